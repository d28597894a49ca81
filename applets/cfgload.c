/*
 * The shared configuration stack of the introspecting applets.
 */
#include "cfgload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/json.h"
#include "../core/manifests_embed.h"
#include "common.h"

struct cfgload *
cfgload_new(void)
{
	return calloc(1, sizeof(struct cfgload));
}

void
cfgload_free(struct cfgload *L)
{
	if (L == NULL)
		return;
	if (L->ops_ready)
		ops_free(&L->ops);
	free(L);
}

void
cfgload_flag(struct cfgload *L, const char *key, const char *value, const char *flag)
{
	int i;

	for (i = 0; i < L->nflags; i++)
		if (strcmp(L->flags[i].key, key) == 0) {
			L->flags[i].value = value;
			return;
		}
	if (L->nflags < CFGLOAD_MAX_FLAGS)
		L->flags[L->nflags++] = (struct config_flag){key, value, flag};
}

int
cfgload_option(struct cfgload *L, const char *name, const char *value)
{
	static const struct {
		const char *opt, *key, *flag;
	} map[] = {
		{"policy", "policy", "--policy"},
		{"preset", "preset", "--preset"},
		{"commands", "commands", "--commands"},
		{"manifests", "manifests_dir", "--manifests"},
		{"tools-dir", "tools_dir", "--tools-dir"},
		{"state-dir", "state_dir", "--state-dir"},
		{"mode", "install.mode", "--mode"},
	};
	size_t i;

	if (strcmp(name, "config") == 0) {
		L->config_file = value;
		return 1;
	}
	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(map[i].opt, name) == 0) {
			cfgload_flag(L, map[i].key, value, map[i].flag);
			return 1;
		}
	return 0;
}

/*
 * Manifest lookups. The manifest loader (core/manifest.h) answers these once
 * it is in the tree; until then a manifest is found by its file name in the
 * manifests directory or the embedded table and is an agent when it has a
 * "run" member.
 */
static int
manifest_json(const struct cfgload *L, const char *name, struct json_doc *doc)
{
	char path[CFG_PATH_MAX + 80], file[80];
	struct err e;
	int i;

	snprintf(file, sizeof(file), "%s.json", name);
	if (L->cfg.manifests_dir[0] != '\0') {
		snprintf(path, sizeof(path), "%s/%s", L->cfg.manifests_dir, file);
		if (json_parse_file(doc, path, NULL, &e) == 0)
			return 0;
	}
	for (i = 0; embedded_manifests[i].path != NULL; i++)
		if (strcmp(embedded_manifests[i].path, file) == 0)
			return json_parse(doc, (const char *)embedded_manifests[i].data, embedded_manifests[i].len, NULL,
					  &e);
	return -1;
}

enum ops_agent_state
cfgload_agent_state(const char *name, void *ctx)
{
	struct json_doc doc;
	enum ops_agent_state st;

	if (manifest_json(ctx, name, &doc) != 0)
		return OPS_AGENT_UNKNOWN;
	st = json_get(doc.root, "run") != NULL ? OPS_AGENT_OK : OPS_AGENT_NOT_AGENT;
	json_free(&doc);
	return st;
}

int
cfgload_tool_known(const char *name, void *ctx)
{
	struct json_doc doc;

	if (manifest_json(ctx, name, &doc) != 0)
		return 0;
	json_free(&doc);
	return 1;
}

int
cfgload_run(struct cfgload *L, struct err *e)
{
	int i;

	if (config_load(&L->cfg, L->config_file, NULL, L->flags, L->nflags, e) != 0)
		return -1;
	/* Introspecting applets never open sockets, spawn or read secrets,
	 * whatever the environment says. */
	L->cfg.introspect = 1;
	for (i = 0; i < L->cfg.nwarn; i++)
		warnx_line("%s", L->cfg.warn[i]);
	if (policy_setup(&L->pol, &L->cfg, e) != 0)
		return -1;
	if (ops_init(&L->ops, e) != 0)
		return -1;
	L->ops_ready = 1;
	return ops_build(&L->ops, &L->cfg, cfgload_agent_state, cfgload_tool_known, L, e);
}
