/*
 * Configuration generations (see api.h): building one (cfgstack.h:
 * configuration, policy, ops over serve's manifest set), the references
 * requests, jobs and sessions hold on it, the swap a reload makes, and
 * what a request asks of one (is an agent enabled, the name closest to a
 * typo) or of serve's start environment.
 * The bottom of the API's files with api_metrics.c (api_int.h).
 */
#include "server/api_int.h"

#include <stdlib.h>
#include <string.h>

#include "server/cfgstack.h"

/* ---- generations ------------------------------------------------------- */

struct api_gen *
api_gen_build(const char *file_flag, const struct config_flag *flags, int nflags, struct manifest_set *ms,
              const unsigned char *default_digest, struct err *e)
{
	struct api_gen *g = calloc(1, sizeof(*g));
	struct cfgstack s = {0};

	if (g == NULL) {
		err_set(e, "internal", "out of memory");
		return NULL;
	}
	s.cfg = &g->cfg, s.pol = &g->pol, s.ops = &g->ops, s.ms = ms, s.ms_open = 1;
	s.file = file_flag, s.flags = flags, s.nflags = nflags;
	if (cfgstack_load(&s, e) != 0) {
		cfgstack_free(&s);
		free(g);
		return NULL;
	}
	g->ops_ready = 1;
	if (default_digest != NULL && policy_add_token_digest(&g->pol, "default", default_digest, e) != 0) {
		api_gen_free(g);
		return NULL;
	}
	return g;
}

void
api_gen_free(struct api_gen *g)
{
	if (g == NULL)
		return;
	if (g->ops_ready)
		ops_free(&g->ops);
	free(g->ready_err);
	free(g);
}

struct api_gen *
api_gen_get(struct api *a)
{
	struct api_gen *g;

	pthread_mutex_lock(&a->mu);
	g = a->gen;
	g->refs++;
	pthread_mutex_unlock(&a->mu);
	return g;
}

void
api_gen_hold(struct api *a, struct api_gen *g)
{
	pthread_mutex_lock(&a->mu);
	g->refs++;
	pthread_mutex_unlock(&a->mu);
}

void
api_gen_put(struct api *a, struct api_gen *g)
{
	int last;

	pthread_mutex_lock(&a->mu);
	last = --g->refs == 0;
	pthread_mutex_unlock(&a->mu);
	if (last) {
		/* the job table's idle install environments read g's cfg */
		jobs_forget(a->jobs, &g->cfg);
		api_gen_free(g);
	}
}

void
api_swap(struct api *a, struct api_gen *g)
{
	struct api_gen *old;

	g->refs = 1;
	pthread_mutex_lock(&a->mu);
	old = a->gen;
	a->gen = g;
	pthread_mutex_unlock(&a->mu);
	if (old != NULL)
		api_gen_put(a, old);
}

/* ---- what a request reads of them -------------------------------------- */

int
api_agent_enabled(const struct api_gen *g, const char *a)
{
	int i;

	for (i = 0; i < g->cfg.agents.n; i++)
		if (strcmp(g->cfg.agents.v[i], a) == 0)
			return 1;
	return 0;
}

const char *
api_suggest(const struct api_gen *g, const char *principal, const char *word, int want_agent)
{
	const char *cand[OPS_MAX];
	struct pol_decision *d = malloc(sizeof(*d));
	const char *inst[OP_INSTALL_MAX];
	int i, k, n = 0;

	if (d == NULL)
		return NULL;
	for (i = 0; i < ops_n(&g->ops) && n < OPS_MAX; i++) {
		const struct op *op = ops_at(&g->ops, i);
		if (want_agent && op->kind != OP_AGENT)
			continue;
		for (k = 0; k < op->ninstall; k++)
			inst[k] = op->install[k];
		if (policy_decide(&g->pol, principal, op->id, inst, op->ninstall, d))
			cand[n++] = want_agent ? op->agent : op->id;
	}
	free(d);
	return config_did_you_mean(word, cand, n);
}

const char *
api_start_getenv(struct api *a, const char *name)
{
	size_t n = strlen(name);
	char *const *e;

	if (a->start_env == NULL)
		return NULL;
	for (e = a->start_env; *e != NULL; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}
