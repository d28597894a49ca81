/*
 * The shared configuration stack of the introspecting applets.
 */
#include "cfgload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	if (L->ms_open)
		manifest_set_close(&L->ms);
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
	    {"policy", "policy", "--policy"},          {"preset", "preset", "--preset"},
	    {"commands", "commands", "--commands"},    {"manifests", "manifests_dir", "--manifests"},
	    {"tools-dir", "tools_dir", "--tools-dir"}, {"state-dir", "state_dir", "--state-dir"},
	    {"base-dir", "base_dir", "--base-dir"},
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

enum ops_agent_state
cfgload_agent_state(const char *name, void *ctx, char *hint, size_t cap)
{
	struct cfgload *L = ctx;
	const manifest_t *m;
	struct err e;

	if ((m = manifest_get(&L->ms, name, &e)) == NULL) {
		if (e.code == NULL || strcmp(e.code, "not_found") != 0)
			L->merr = e;
		else
			manifest_agents_hint(&L->ms, name, hint, cap);
		return OPS_AGENT_UNKNOWN;
	}
	return m->run.n > 0 ? OPS_AGENT_OK : OPS_AGENT_NOT_AGENT;
}

int
cfgload_tool_known(const char *name, void *ctx)
{
	struct cfgload *L = ctx;
	struct err e;

	if (manifest_get(&L->ms, name, &e) == NULL) {
		if (e.code == NULL || strcmp(e.code, "not_found") != 0)
			L->merr = e;
		return 0;
	}
	return 1;
}

int
cfgload_run(struct cfgload *L, struct err *e)
{
	struct manifest_opts opts;

	if (config_load(&L->cfg, L->config_file, NULL, L->flags, L->nflags, e) != 0)
		return -1;
	/* Introspecting applets never open sockets, spawn or read secrets,
	 * whatever the environment says. */
	L->cfg.introspect = 1;
	config_print_warnings(&L->cfg);
	if (policy_setup(&L->pol, &L->cfg, e) != 0)
		return -1;
	opts.platform = manifest_platform_self();
	if ((opts.allow_unpinned = manifest_unpinned_allowed(L->cfg.environment, e)) < 0)
		return -1;
	if (manifest_set_open(&L->ms, L->cfg.manifests_dir[0] ? L->cfg.manifests_dir : NULL, &opts, e) != 0)
		return -1;
	L->ms_open = 1;
	if (ops_init(&L->ops, e) != 0)
		return -1;
	L->ops_ready = 1;
	err_clear(&L->merr);
	if (ops_build(&L->ops, &L->cfg, cfgload_agent_state, cfgload_tool_known, L, e) != 0) {
		/* "no manifest named codex" when codex.json exists but is broken
		 * would send the reader to the wrong place: say what broke. */
		if (L->merr.code != NULL)
			*e = L->merr;
		return -1;
	}
	return 0;
}
