#include "server/cfgstack.h"

#include <string.h>

/* Whether tool name has a valid manifest (with its requires closure), and
 * whether it has a run block: ops_build's lookups. */
static enum ops_agent_state
agent_state(const char *name, void *ctx, char *hint, size_t cap)
{
	struct cfgstack *s = ctx;
	const manifest_t *m;
	struct err e = {0};

	if ((m = manifest_get(s->ms, name, &e)) == NULL) {
		if (e.code == NULL || strcmp(e.code, "not_found") != 0)
			err_copy(&s->merr, &e);
		else
			manifest_agents_hint(s->ms, name, hint, cap);
		return OPS_AGENT_UNKNOWN;
	}
	return m->run.n > 0 ? OPS_AGENT_OK : OPS_AGENT_NOT_AGENT;
}

static int
tool_known(const char *name, void *ctx)
{
	struct cfgstack *s = ctx;
	struct err e = {0};

	if (manifest_get(s->ms, name, &e) == NULL) {
		if (e.code == NULL || strcmp(e.code, "not_found") != 0)
			err_copy(&s->merr, &e);
		return 0;
	}
	return 1;
}

int
cfgstack_load(struct cfgstack *s, struct err *e)
{
	int i;

	if (config_load(s->cfg, s->file, NULL, s->flags, s->nflags, e) != 0)
		return -1;
	if (s->warn_once)
		config_print_warnings(s->cfg);
	else
		for (i = 0; i < s->cfg->nwarn; i++)
			warnx_line("%s", s->cfg->warn[i]);
	if (s->introspect)
		s->cfg->introspect = 1;
	if (policy_setup(s->pol, s->cfg, e) != 0)
		return -1;
	if (!s->ms_open) {
		if (manifest_set_load(s->ms, s->cfg, s->platform, e) != 0)
			return -1;
		s->ms_open = s->ms_owned = 1;
	}
	if (ops_init(s->ops, e) != 0)
		return -1;
	s->ops_ready = 1;
	err_clear(&s->merr);
	if (ops_build(s->ops, s->cfg, agent_state, tool_known, s, e) != 0) {
		/* "no manifest named codex" when manifests/codex.json exists but
		 * is broken would send the reader to the wrong place */
		if (s->merr.code != NULL)
			err_copy(e, &s->merr);
		return -1;
	}
	return 0;
}

void
cfgstack_free(struct cfgstack *s)
{
	if (s->ops_ready)
		ops_free(s->ops);
	if (s->ms_owned)
		manifest_set_close(s->ms);
	s->ops_ready = s->ms_open = s->ms_owned = 0;
}
