/*
 * The install engine behind serve's job table (jobs.h's struct jobs_ops):
 * install contexts kept with the configuration generation they read, each
 * used by one request or job at a time and handed to the next, so what a
 * context learns (parsed markers, proof lists, the HTTP client, the
 * lockfile parse) serves request after request.
 */
#include "server/api_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The generation whose cfg this is: every cfg the job table sees is one
 * (api_init's table is only ever passed &g->cfg). */
static struct api_gen *
gen_of(const struct config *cfg)
{
	return (struct api_gen *)(void *)((char *)(uintptr_t)cfg - offsetof(struct api_gen, cfg));
}

/* An idle context of cfg's generation, made ready (install_ctx_reuse), or
 * a new one. NULL with e. */
static struct install_ctx *
ctx_take(struct api *a, const struct config *cfg, struct err *e)
{
	struct api_gen *g = gen_of(cfg);
	struct install_ctx *c = NULL;

	pthread_mutex_lock(&a->mu);
	if (g->nidle > 0)
		c = g->idle[--g->nidle];
	pthread_mutex_unlock(&a->mu);
	if (c != NULL) {
		if (install_ctx_reuse(c, e) == 0)
			return c;
		install_ctx_free(c);
		free(c);
		return NULL;
	}
	/* large (paths, probe caches): heap, not a worker's stack */
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		err_set(e, "internal", "out of memory");
		return NULL;
	}
	if (install_ctx_init(c, a->ms, cfg, NULL, NULL, e) != 0) {
		install_ctx_free(c);
		free(c);
		return NULL;
	}
	return c;
}

/* Back to its generation for the next caller, or freed when API_CTX_IDLE
 * are already idle there. */
static void
ctx_put(struct api *a, const struct config *cfg, struct install_ctx *c)
{
	struct api_gen *g = gen_of(cfg);

	pthread_mutex_lock(&a->mu);
	if (g->nidle < API_CTX_IDLE) {
		g->idle[g->nidle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&a->mu);
	if (c != NULL) {
		install_ctx_free(c);
		free(c);
	}
}

void
api_gen_ctx_free(struct api_gen *g)
{
	while (g->nidle > 0) {
		install_ctx_free(g->idle[--g->nidle]);
		free(g->idle[g->nidle]);
	}
}

static int
op_check(void *arg, const struct config *cfg, const char *tool, struct install_result *r, struct err *e)
{
	struct install_ctx *c = ctx_take(arg, cfg, e);
	int rc;

	memset(r, 0, sizeof(*r));
	if (c == NULL) {
		r->state = INSTALL_FAILED;
		return -1;
	}
	rc = install_ensure(c, tool, INSTALL_F_CHECK, r, e);
	ctx_put(arg, cfg, c);
	return rc;
}

static int
op_ensure(void *arg, const struct config *cfg, const char *tool, const char *principal, const char *op,
          install_progress_fn progress, void *parg, struct install_result *r, uint64_t *bytes, struct err *e)
{
	struct install_ctx *c = ctx_take(arg, cfg, e);
	struct install_observer obs = {.progress = progress, .arg = parg};
	int rc;

	*bytes = 0;
	memset(r, 0, sizeof(*r));
	if (c == NULL) {
		r->state = INSTALL_FAILED;
		return -1;
	}
	c->principal = principal;
	c->op = op;
	c->obs = &obs;
	rc = install_ensure(c, tool, 0, r, e);
	c->obs = NULL;
	*bytes = c->bytes_downloaded;
	ctx_put(arg, cfg, c);
	return rc;
}

static int
op_backoff_left(void *arg, const struct config *cfg, const char *tool)
{
	struct install_ctx *c;
	struct err e;
	int left;

	if ((c = ctx_take(arg, cfg, &e)) == NULL)
		return 0;
	left = install_backoff_left(c, tool);
	ctx_put(arg, cfg, c);
	return left;
}

static void
op_backoff_clear(void *arg, const struct config *cfg, const char *tool)
{
	struct install_ctx *c;
	struct err e;

	if ((c = ctx_take(arg, cfg, &e)) == NULL)
		return;
	install_backoff_clear(c, tool);
	ctx_put(arg, cfg, c);
}

static int
op_progress(void *arg, const struct config *cfg, const char *tool, char *phase, size_t cap,
            struct install_progress *p)
{
	struct install_ctx *c;
	struct err e;
	long pid = 0;
	int rc;

	if ((c = ctx_take(arg, cfg, &e)) == NULL)
		return -1;
	rc = install_progress_read(c, tool, phase, cap, p, &pid);
	ctx_put(arg, cfg, c);
	return rc;
}

/* A job's thread or a session keeps its generation, as a request does. */
static void
op_hold(void *arg, const struct config *cfg)
{
	struct api *a = arg;

	pthread_mutex_lock(&a->mu);
	gen_of(cfg)->refs++;
	pthread_mutex_unlock(&a->mu);
}

static void
op_release(void *arg, const struct config *cfg)
{
	api_gen_put(arg, gen_of(cfg));
}

const struct jobs_ops api_jobs_ops = {
    op_check, op_ensure, op_backoff_left, op_backoff_clear, op_progress, op_hold, op_release,
};
