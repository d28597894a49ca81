/*
 * The configuration load every applet shares, and the whole stack
 * (configuration, policy, manifests, ops) of the introspecting ones.
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

int
cfgload_option(struct cfgload *L, const char *name, const char *value)
{
	if (strcmp(name, "config") == 0) {
		L->config_file = value;
		return 1;
	}
	return config_flags_add(&L->flags, name, value);
}

int
cfgload_set(void *dst, const struct opt *o, const char *arg, struct err *e)
{
	struct cfgload *L;

	memcpy(&L, (char *)dst + o->off, sizeof(L));
	cfgload_option(L, o->name, arg);
	return 0;
}

int
cfgload_config(struct config *c, const char *file, const struct config_flags *f, int warn, struct err *e)
{
	if (config_load(c, file, NULL, f != NULL ? f->v : NULL, f != NULL ? f->n : 0, e) != 0)
		return -1;
	if (warn)
		config_print_warnings(c);
	return 0;
}

int
cfgload_manifests(struct manifest_set *ms, const struct config *c, const char *platform, struct err *e)
{
	struct manifest_opts mo = {0};

	snprintf(mo.npm_mirror, sizeof(mo.npm_mirror), "%s", c->install.npm_mirror);
	if ((mo.allow_unpinned = manifest_unpinned_allowed(c, e)) < 0)
		return -1;
	mo.platform = platform != NULL ? platform : manifest_platform_self();
	return manifest_set_open(ms, c->manifests_dir[0] != '\0' ? c->manifests_dir : NULL, &mo, e);
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
	if (cfgload_config(&L->cfg, L->config_file, &L->flags, 1, e) != 0)
		return -1;
	/* Introspecting applets never open sockets, spawn or read secrets,
	 * whatever the environment says. */
	L->cfg.introspect = 1;
	if (policy_setup(&L->pol, &L->cfg, e) != 0)
		return -1;
	if (cfgload_manifests(&L->ms, &L->cfg, NULL, e) != 0)
		return -1;
	L->ms_open = 1;
	if (ops_init(&L->ops, e) != 0)
		return -1;
	L->ops_ready = 1;
	err_clear(&L->merr);
	if (ops_build(&L->ops, &L->cfg, cfgload_agent_state, cfgload_tool_known, L, e) != 0) {
		/* "no manifest named codex" when manifests/codex.json exists but is broken
		 * would send the reader to the wrong place: say what broke. */
		if (L->merr.code != NULL)
			*e = L->merr;
		return -1;
	}
	return 0;
}
