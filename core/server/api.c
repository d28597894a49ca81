/*
 * The operations API: generations, responses, routing, runtimes, jobs.
 * Tokens are in api_auth.c, metrics in api_metrics.c, command ops in
 * api_ops.c, sessions in api_sessions.c.
 */
#include "server/api_int.h"
#include "base/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "install/audit.h"
#include "base/digest.h"
#include "base/fs.h"
#include "base/json.h"
#include "pkg/manifest.h"

#ifndef ABX_VERSION
#define ABX_VERSION "0.0.0-dev"
#endif

/* Responses listing ops or runtimes: 256 ops with descriptions fit. */
#define API_LIST_MAX (1u << 20)
/* agents.<a>.<action> built from an agent name (< CFG_NAME_MAX). */
#define AGENT_OP_MAX (CFG_NAME_MAX + 32)
/* One job or runtime object. */
#define API_OBJ_MAX 16384

/* ---- generations ------------------------------------------------------- */

static enum ops_agent_state
agent_lookup(const char *name, void *ctx, char *hint, size_t cap)
{
	struct err e;
	const manifest_t *m = manifest_get(ctx, name, &e);

	if (m == NULL) {
		manifest_agents_hint(ctx, name, hint, cap);
		return OPS_AGENT_UNKNOWN;
	}
	return m->run.n > 0 ? OPS_AGENT_OK : OPS_AGENT_NOT_AGENT;
}

static int
tool_lookup(const char *name, void *ctx)
{
	struct err e;

	return manifest_get(ctx, name, &e) != NULL;
}

struct api_gen *
api_gen_build(const char *file_flag, const struct config_flag *flags, int nflags, struct manifest_set *ms,
              const unsigned char *default_digest, struct err *e)
{
	struct api_gen *g = calloc(1, sizeof(*g));
	int i;

	if (g == NULL) {
		err_set(e, "internal", "out of memory");
		return NULL;
	}
	if (config_load(&g->cfg, file_flag, NULL, flags, nflags, e) != 0)
		goto fail;
	for (i = 0; i < g->cfg.nwarn; i++)
		warnx_line("%s", g->cfg.warn[i]);
	if (policy_setup(&g->pol, &g->cfg, e) != 0)
		goto fail;
	if (default_digest != NULL && policy_add_token_digest(&g->pol, "default", default_digest, e) != 0)
		goto fail;
	if (ops_init(&g->ops, e) != 0)
		goto fail;
	g->ops_ready = 1;
	if (ops_build(&g->ops, &g->cfg, agent_lookup, ms != NULL ? tool_lookup : NULL, ms, e) != 0)
		goto fail;
	return g;
fail:
	api_gen_free(g);
	return NULL;
}

void
api_gen_free(struct api_gen *g)
{
	if (g == NULL)
		return;
	if (g->ops_ready)
		ops_free(&g->ops);
	api_gen_ctx_free(g);
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
api_gen_put(struct api *a, struct api_gen *g)
{
	int last;

	pthread_mutex_lock(&a->mu);
	last = --g->refs == 0;
	pthread_mutex_unlock(&a->mu);
	if (last)
		api_gen_free(g);
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

int
api_init(struct api *a, struct api_gen *g, struct manifest_set *ms, struct err *e)
{
	pthread_mutex_init(&a->mu, NULL);
	a->ms = ms;
	a->jobs = jobs_new(&api_jobs_ops, a);
	if (a->jobs == NULL) {
		pthread_mutex_destroy(&a->mu);
		return err_set(e, "internal", "out of memory");
	}
	a->gen = NULL;
	a->runner = NULL;
	a->max_install_waiters = g->cfg.server.workers / 2 > 0 ? g->cfg.server.workers / 2 : 1;
	api_swap(a, g);
	return 0;
}

void
api_free(struct api *a)
{
	api_runner_free(a);
	jobs_free(a->jobs);
	a->jobs = NULL;
	if (a->gen != NULL)
		api_gen_put(a, a->gen);
	a->gen = NULL;
	pthread_mutex_destroy(&a->mu);
}

/* ---- responses --------------------------------------------------------- */

int
api_rq_json(struct api_rq *q, int status, const char *json)
{
	q->status = status;
	return httpd_respond_json(q->resp, status, json);
}

int
api_rq_err(struct api_rq *q, const struct err *e)
{
	q->status = err_info(e->code)->status;
	return httpd_respond_err(q->resp, e);
}

int
api_rq_errf(struct api_rq *q, const char *code, const char *fmt, ...)
{
	struct err e;
	va_list ap;

	va_start(ap, fmt);
	err_setv(&e, code, fmt, ap);
	va_end(ap);
	return api_rq_err(q, &e);
}

void
api_rq_retry_after(struct api_rq *q, int secs)
{
	char v[16];

	snprintf(v, sizeof(v), "%d", secs > 0 ? secs : 1);
	httpd_resp_header(q->resp, "Retry-After", v);
}

int
api_rq_json_w(struct api_rq *q, int status, struct json_w *w)
{
	int rc;

	if (w->overflow) {
		json_w_free(w);
		return api_rq_errf(q, "internal", "response too large");
	}
	rc = api_rq_json(q, status, w->buf);
	json_w_free(w);
	return rc;
}

int
api_body_json(struct api_rq *q, struct json_doc *doc, const struct json_val **root)
{
	struct json_limits lim = json_default_limits;
	struct err e;

	*root = NULL;
	doc->root = NULL;
	doc->arena = NULL;
	if (q->req->body_len == 0)
		return 0;
	lim.max_bytes = API_BODY_JSON_MAX;
	lim.max_depth = 16;
	lim.max_values = 4096;
	if (json_parse(doc, q->req->body, q->req->body_len, &lim, &e) != 0) {
		api_rq_err(q, &e);
		return 1;
	}
	if (doc->root->type != JSON_OBJECT) {
		json_free(doc);
		api_rq_errf(q, "request.invalid", "the request body must be a JSON object");
		return 1;
	}
	*root = doc->root;
	return 0;
}

/* ---- policy and installs ----------------------------------------------- */

/* 0 when allowed, else answered 403. */
static int
check_policy(struct api_rq *q, const char *op_id, const char *const *installs, int n)
{
	struct pol_decision *d = malloc(sizeof(*d));
	struct err e;

	if (d == NULL)
		return api_rq_errf(q, "internal", "out of memory"), 1;
	if (policy_decide(&q->g->pol, q->principal, op_id, installs, n, d)) {
		free(d);
		return 0;
	}
	err_set(&e, "policy.denied", "%s may not call %s: %s", q->principal, op_id, d->rule);
	err_detail_str(&e, "op", op_id);
	err_detail_str(&e, "principal", q->principal);
	err_detail_str(&e, "rule", d->rule);
	audit_policy_denied(&q->g->cfg, q->req->peer, q->principal, op_id, d->rule);
	api_count(q->a, &q->a->m.policy_denials);
	free(d);
	api_rq_err(q, &e);
	return 1;
}

int
api_rq_policy(struct api_rq *q, const char *op_id, const char *const *installs, int n)
{
	return check_policy(q, op_id, installs, n);
}

static const char *
job_status_name(enum job_status s)
{
	return s == JOB_PENDING ? "pending" : s == JOB_SUCCEEDED ? "succeeded" : "failed";
}

/* An install's progress (install/install.h): bytes of total downloaded, packages
 * (npm) or artifacts (tarball) done of count; kept after the install. */
static void
progress_fields(struct json_w *w, const struct install_progress *p)
{
	json_w_kint(w, "bytes", (int64_t)p->bytes);
	json_w_kint(w, "total", (int64_t)p->total);
	json_w_kint(w, "packages_done", (int64_t)p->done);
	json_w_kint(w, "packages_total", (int64_t)p->count);
}

/* "requires": each tool installed for v's, with its own progress. */
static void
requires_json(struct json_w *w, const struct job_view *v)
{
	int i;

	json_w_key(w, "requires");
	json_w_arr(w);
	for (i = 0; i < v->nreq; i++) {
		json_w_obj(w);
		json_w_kstr(w, "tool", v->req[i].tool);
		json_w_kstr(w, "phase", v->req[i].phase);
		progress_fields(w, &v->req[i].prog);
		json_w_end(w);
	}
	json_w_end(w);
}

static void
job_json(struct json_w *w, const struct job_view *v)
{
	char ts[CLOCK_ISO_MAX];

	json_w_obj(w);
	json_w_kstr(w, "object", "install.job");
	json_w_kstr(w, "id", v->id);
	json_w_kstr(w, "tool", v->tool);
	json_w_kstr(w, "status", job_status_name(v->status));
	json_w_kstr(w, "phase", v->phase);
	progress_fields(w, &v->prog);
	requires_json(w, v);
	json_w_kstr(w, "principal", v->principal);
	json_w_kstr(w, "op", v->op);
	clock_iso((int64_t)v->created * 1000, 0, ts, sizeof(ts));
	json_w_kstr(w, "created", ts);
	if (v->status == JOB_PENDING) {
		json_w_kint(w, "retry_after", JOBS_RETRY_AFTER);
	} else {
		clock_iso((int64_t)v->finished * 1000, 0, ts, sizeof(ts));
		json_w_kstr(w, "finished", ts);
	}
	if (v->status == JOB_FAILED) {
		json_w_key(w, "error");
		json_w_obj(w);
		json_w_kstr(w, "code", v->err.code);
		json_w_kstr(w, "message",
		            v->err.msg[0] != '\0' ? v->err.msg : err_info(v->err.code)->sentence);
		json_w_key(w, "details");
		json_w_raw(w, v->err.details[0] != '\0' ? v->err.details : "{}");
		json_w_end(w);
		if (v->retry_after > 0)
			json_w_kint(w, "retry_after", v->retry_after);
	}
	json_w_end(w);
}

static int
respond_install_error(struct api_rq *q, struct err *e, int retry_after)
{
	if (e->code != NULL && strcmp(e->code, "install.backoff") == 0)
		api_rq_retry_after(q, retry_after);
	else if (e->code != NULL && strcmp(e->code, "request.busy") == 0)
		api_rq_retry_after(q, JOBS_RETRY_AFTER);
	return api_rq_err(q, e);
}

int
api_need_tools(struct api_rq *q, const char *op_id, const char *const *tools, int n,
               char (*entries)[PATH_MAX])
{
	struct job_view *v;
	struct json_w w;
	struct err e;
	int64_t deadline = 0, left;
	int i, rc, waiter;

	if (n == 0)
		return 0;
	v = malloc(sizeof(*v));
	if (v == NULL)
		return api_rq_errf(q, "internal", "out of memory"), 1;
	pthread_mutex_lock(&q->a->mu);
	waiter = q->a->install_waiters < q->a->max_install_waiters;
	if (waiter)
		q->a->install_waiters++;
	pthread_mutex_unlock(&q->a->mu);
	deadline = clock_ms() + (waiter ? (int64_t)q->g->cfg.install.wait * 1000 : 0);
	for (i = 0; i < n; i++) {
		left = deadline - clock_ms();
		if (left < 0)
			left = 0;
		err_clear(&e);
		rc = jobs_need(q->a->jobs, &q->g->cfg, tools[i], q->principal, op_id, (int)left, v, &e);
		if (rc == 0) {
			if (entries != NULL)
				snprintf(entries[i], PATH_MAX, "%s", v->entry);
			continue;
		}
		if (rc == 1) {
			json_w_init(&w, API_OBJ_MAX);
			job_json(&w, v);
			api_rq_retry_after(q, JOBS_RETRY_AFTER);
			api_rq_json_w(q, 202, &w);
		} else {
			respond_install_error(q, &e, v->retry_after);
		}
		rc = 1;
		goto out;
	}
	rc = 0;
out:
	if (waiter) {
		pthread_mutex_lock(&q->a->mu);
		q->a->install_waiters--;
		pthread_mutex_unlock(&q->a->mu);
	}
	free(v);
	return rc;
}

/* ---- endpoints ----------------------------------------------------------- */

static const char *const param_types[] = {"string", "integer", "number", "boolean"};

static void
ops_list(struct api_rq *q)
{
	const struct ops *o = &q->g->ops;
	struct pol_decision *d = malloc(sizeof(*d));
	struct json_w w;
	int i, k;

	if (d == NULL) {
		api_rq_errf(q, "internal", "out of memory");
		return;
	}
	json_w_init(&w, API_LIST_MAX);
	json_w_obj(&w);
	json_w_kstr(&w, "object", "list");
	json_w_kstr(&w, "principal", q->principal);
	json_w_key(&w, "data");
	json_w_arr(&w);
	for (i = 0; i < o->n; i++) {
		const struct op *op = &o->v[i];
		const char *inst[OP_INSTALL_MAX];

		for (k = 0; k < op->ninstall; k++)
			inst[k] = op->install[k];
		if (!policy_decide(&q->g->pol, q->principal, op->id, inst, op->ninstall, d))
			continue;
		json_w_obj(&w);
		json_w_kstr(&w, "id", op->id);
		json_w_kstr(&w, "kind", op->kind == OP_COMMAND ? "command" : "agent");
		if (op->kind == OP_AGENT)
			json_w_kstr(&w, "agent", op->agent);
		if (op->description[0] != '\0')
			json_w_kstr(&w, "description", op->description);
		json_w_key(&w, "installs");
		json_w_arr(&w);
		for (k = 0; k < op->ninstall; k++)
			json_w_str(&w, op->install[k]);
		json_w_end(&w);
		if (op->kind == OP_COMMAND) {
			json_w_kint(&w, "timeout", op->timeout);
			json_w_key(&w, "params");
			json_w_obj(&w);
			for (k = 0; k < op->nparams; k++) {
				json_w_key(&w, op->params[k].name);
				json_w_obj(&w);
				json_w_kstr(&w, "type", param_types[op->params[k].type]);
				json_w_kbool(&w, "required", op->params[k].required);
				json_w_end(&w);
			}
			json_w_end(&w);
		}
		json_w_end(&w);
	}
	json_w_end(&w);
	json_w_end(&w);
	free(d);
	api_rq_json_w(q, 200, &w);
}

static void
runtime_json(struct api_rq *q, struct json_w *w, const char *agent)
{
	struct job_view *v = malloc(sizeof(*v));
	struct job_probe *p = malloc(sizeof(*p));
	const manifest_t *m;
	struct err e;

	json_w_obj(w);
	json_w_kstr(w, "object", "agent.runtime");
	json_w_kstr(w, "name", agent);
	json_w_kstr(w, "mode", config_mode_name(q->g->cfg.install.mode));
	m = manifest_get(q->a->ms, agent, &e);
	if (m != NULL)
		json_w_kstr(w, "version", m->version);
	if (v == NULL || p == NULL) {
		json_w_kstr(w, "state", "unknown");
	} else if (jobs_running(q->a->jobs, agent, v) == 0) {
		json_w_kstr(w, "state", "installing");
		json_w_kstr(w, "job", v->id);
		json_w_key(w, "progress");
		json_w_obj(w);
		json_w_kstr(w, "phase", v->phase);
		progress_fields(w, &v->prog);
		requires_json(w, v);
		json_w_end(w);
	} else {
		jobs_probe(q->a->jobs, &q->g->cfg, agent, p);
		if (p->ready) {
			json_w_kstr(w, "state", "ready");
			json_w_kstr(w, "entry", p->entry);
		} else if (p->has_progress) {
			/* Another process (prepare, a shim) is installing it. */
			json_w_kstr(w, "state", "installing");
		} else if (p->backoff > 0) {
			json_w_kstr(w, "state", "backoff");
			json_w_kint(w, "retry_after", p->backoff);
		} else if (p->err.code != NULL) {
			json_w_kstr(w, "state", "error");
			json_w_kstr(w, "error", p->err.code);
			json_w_kstr(w, "message", p->err.msg);
		} else {
			json_w_kstr(w, "state", "missing");
		}
		json_w_key(w, "progress");
		if (p->has_progress) {
			json_w_obj(w);
			json_w_kstr(w, "phase", p->phase);
			progress_fields(w, &p->prog);
			json_w_end(w);
		} else {
			json_w_null(w);
		}
	}
	json_w_end(w);
	free(v);
	free(p);
}

/* A path segment we route on: an agent name or job id, no escapes. */
static int
segment_ok(const char *s, size_t n, size_t max)
{
	size_t i;

	if (n == 0 || n >= max)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_'))
			return 0;
	return 1;
}

int
api_agent_enabled(const struct api_gen *g, const char *a)
{
	int i;

	for (i = 0; i < g->cfg.agents.n; i++)
		if (strcmp(g->cfg.agents.v[i], a) == 0)
			return 1;
	return 0;
}

static void
runtimes_list(struct api_rq *q)
{
	struct pol_decision *d = malloc(sizeof(*d));
	char op[AGENT_OP_MAX];
	struct json_w w;
	int i;

	if (d == NULL) {
		api_rq_errf(q, "internal", "out of memory");
		return;
	}
	json_w_init(&w, API_LIST_MAX);
	json_w_obj(&w);
	json_w_kstr(&w, "object", "list");
	json_w_key(&w, "data");
	json_w_arr(&w);
	for (i = 0; i < q->g->cfg.agents.n; i++) {
		snprintf(op, sizeof(op), "agents.%s.status", q->g->cfg.agents.v[i]);
		if (policy_decide(&q->g->pol, q->principal, op, NULL, 0, d))
			runtime_json(q, &w, q->g->cfg.agents.v[i]);
	}
	json_w_end(&w);
	json_w_end(&w);
	free(d);
	api_rq_json_w(q, 200, &w);
}

/* An enabled agent and a policy that allows op = agents.<agent>.<verb>
 * (with the installs it would make): 0, else answered and -1. */
static int
agent_gate(struct api_rq *q, const char *agent, const char *verb, char op[AGENT_OP_MAX],
           const char *const *installs, int n)
{
	if (!api_agent_enabled(q->g, agent)) {
		const char *s = api_suggest(q->g, q->principal, agent, 1);
		api_rq_errf(q, "not_found", "no agent %s is enabled%s%s%s", agent, s ? " (did you mean " : "",
		            s ? s : "", s ? "?)" : "");
		return -1;
	}
	snprintf(op, AGENT_OP_MAX, "agents.%s.%s", agent, verb);
	return check_policy(q, op, installs, n);
}

static void
runtime_one(struct api_rq *q, const char *agent)
{
	char op[AGENT_OP_MAX];
	struct json_w w;

	if (agent_gate(q, agent, "status", op, NULL, 0) != 0)
		return;
	json_w_init(&w, API_OBJ_MAX);
	runtime_json(q, &w, agent);
	api_rq_json_w(q, 200, &w);
}

static void
runtime_install(struct api_rq *q, const char *agent)
{
	const char *tools[1] = {agent};
	const struct json_val *root, *reset;
	struct json_doc doc;
	char op[AGENT_OP_MAX];
	struct json_w w;

	if (agent_gate(q, agent, "install", op, tools, 1) != 0)
		return;
	if (api_body_json(q, &doc, &root) != 0)
		return;
	reset = json_get(root, "reset");
	if (root != NULL && (root->u.obj.n > 1 || (root->u.obj.n == 1 && reset == NULL))) {
		json_free(&doc);
		api_rq_errf(q, "request.invalid", "the only member of the body is \"reset\" (boolean)");
		return;
	}
	if (reset != NULL && reset->type != JSON_TRUE && reset->type != JSON_FALSE) {
		json_free(&doc);
		api_rq_errf(q, "request.invalid", "reset must be a boolean");
		return;
	}
	if (reset != NULL && reset->type == JSON_TRUE)
		jobs_reset(q->a->jobs, &q->g->cfg, agent);
	json_free(&doc);
	if (api_need_tools(q, op, tools, 1, NULL) != 0)
		return;
	json_w_init(&w, API_OBJ_MAX);
	runtime_json(q, &w, agent);
	api_rq_json_w(q, 200, &w);
}

static void
job_get(struct api_rq *q, const char *id)
{
	struct job_view *v = malloc(sizeof(*v));
	struct json_w w;

	if (v == NULL) {
		api_rq_errf(q, "internal", "out of memory");
		return;
	}
	/* Job ids are unguessable; a principal sees only the jobs of the ops
	 * it may call (the job's own op). */
	if (jobs_get(q->a->jobs, id, v) != 0) {
		free(v);
		api_rq_errf(q, "not_found", "no install job %s", id);
		return;
	}
	json_w_init(&w, API_OBJ_MAX);
	job_json(&w, v);
	free(v);
	api_rq_json_w(q, 200, &w);
}

static void
metrics(struct api_rq *q)
{
	char *text;
	size_t len;

	api_metrics_text(q->a, &text, &len);
	if (text == NULL) {
		api_rq_errf(q, "internal", "out of memory");
		return;
	}
	q->status = 200;
	httpd_respond(q->resp, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
	free(text);
}

static void
run_op(struct api_rq *q, const char *id)
{
	const struct op *op = ops_find(&q->g->ops, id);
	const char *inst[OP_INSTALL_MAX];
	int k;

	if (op == NULL) {
		const char *s = api_suggest(q->g, q->principal, id, 0);
		api_rq_errf(q, "not_found", "no op %s%s%s%s", id, s ? " (did you mean " : "", s ? s : "",
		            s ? "?)" : "");
		return;
	}
	for (k = 0; k < op->ninstall; k++)
		inst[k] = op->install[k];
	if (check_policy(q, op->id, inst, op->ninstall) != 0)
		return;
	if (op->kind == OP_COMMAND) {
		api_run_command(q, op);
		return;
	}
	/* Agent ops through the generic endpoint. */
	if (strcmp(op->action, "status") == 0) {
		struct json_w w;

		json_w_init(&w, API_OBJ_MAX);
		runtime_json(q, &w, op->agent);
		api_rq_json_w(q, 200, &w);
		return;
	}
	if (strcmp(op->action, "install") == 0) {
		runtime_install(q, op->agent);
		return;
	}
	if (strcmp(op->action, "run") == 0) {
		api_agent_run(q, op->agent);
		return;
	}
	/* sessions.*: install on first use applies here too; the session
	 * machinery itself is the sessions API's. */
	if (api_need_tools(q, op->id, inst, op->ninstall, NULL) != 0)
		return;
	api_rq_errf(q, "request.not_implemented", "%s is served by the sessions API (/v1/agents/%s/sessions)",
	            op->id, op->agent);
}

static void
method_not_allowed(struct api_rq *q, const char *allow)
{
	httpd_resp_header(q->resp, "Allow", allow);
	api_rq_errf(q, "request.method", "%s is not allowed here (allowed: %s)", q->req->method, allow);
}

static void
route(struct api_rq *q)
{
	const char *p = q->req->path, *m = q->req->method, *rest, *slash;
	int get = strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0, post = strcmp(m, "POST") == 0;
	char seg[CFG_NAME_MAX];
	size_t n;

	/* The sessions API routes its own paths (/v1/agents/<a>/sessions…). */
	if (api_sessions_route(q))
		return;
	if (strcmp(p, "/v1/ops") == 0) {
		q->route = R_OPS_LIST;
		get ? ops_list(q) : method_not_allowed(q, "GET");
		return;
	}
	if (strncmp(p, "/v1/ops/", 8) == 0) {
		rest = p + 8;
		n = strlen(rest);
		if (n > 0 && n < OP_ID_MAX && policy_op_id_valid(rest)) {
			q->route = R_OPS_RUN;
			post ? run_op(q, rest) : method_not_allowed(q, "POST");
			return;
		}
	} else if (strcmp(p, "/v1/agents/runtimes") == 0) {
		q->route = R_RUNTIMES;
		get ? runtimes_list(q) : method_not_allowed(q, "GET");
		return;
	} else if (strncmp(p, "/v1/agents/runtimes/", 20) == 0) {
		rest = p + 20;
		slash = strchr(rest, '/');
		n = slash != NULL ? (size_t)(slash - rest) : strlen(rest);
		if (segment_ok(rest, n, CFG_NAME_MAX)) {
			memcpy(seg, rest, n);
			seg[n] = '\0';
			if (slash == NULL) {
				q->route = R_RUNTIME;
				get ? runtime_one(q, seg) : method_not_allowed(q, "GET");
				return;
			}
			if (strcmp(slash, "/install") == 0) {
				q->route = R_RUNTIME_INSTALL;
				post ? runtime_install(q, seg) : method_not_allowed(q, "POST");
				return;
			}
		}
	} else if (strncmp(p, "/v1/install/jobs/", 17) == 0) {
		rest = p + 17;
		if (segment_ok(rest, strlen(rest), JOB_ID_MAX)) {
			q->route = R_JOB;
			get ? job_get(q, rest) : method_not_allowed(q, "GET");
			return;
		}
	} else if (strcmp(p, "/health") == 0) {
		/* GET and HEAD are the inline route; any other method. */
		q->route = R_HEALTH;
		method_not_allowed(q, "GET, HEAD");
		return;
	} else if (strcmp(p, "/metrics") == 0) {
		q->route = R_METRICS;
		get ? metrics(q) : method_not_allowed(q, "GET");
		return;
	}
	q->route = R_NOT_FOUND;
	api_rq_errf(q, "not_found", "no such resource: %s", p);
}

void
api_handle(const struct httpd_req *req, struct httpd_resp *resp, void *arg)
{
	struct api_rq q;

	memset(&q, 0, sizeof(q));
	q.t0 = (clock_us() / 1e6);
	q.a = arg;
	q.req = req;
	q.resp = resp;
	q.route = R_NOT_FOUND;
	q.g = api_gen_get(q.a);
	if (api_authenticate(&q) == 0)
		route(&q);
	/* A deferred answer (a command op) is counted when it is given. */
	if (!q.deferred)
		api_rq_record(&q);
	api_gen_put(q.a, q.g);
}

void
api_rq_record(struct api_rq *q)
{
	api_metrics_record(q->a, q->route, q->status, (clock_us() / 1e6) - q->t0);
}

void
api_observe(void *arg, const struct httpd_route *route, int status, size_t bytes, int64_t usec)
{
	if (route == NULL)
		api_metrics_record(arg, R_SERVER, status, (double)usec / 1e6);
}

void
api_health(const struct httpd_req *req, struct httpd_resp *resp, void *arg)
{
	struct api *a = arg;
	double t0 = (clock_us() / 1e6);
	struct json_w w;

	json_w_init(&w, 256);
	json_w_obj(&w);
	json_w_kstr(&w, "status", "ok");
	json_w_kstr(&w, "version", ABX_VERSION);
	json_w_end(&w);
	if (w.overflow)
		httpd_respond_errf(resp, "internal", "out of memory");
	else
		httpd_respond_json(resp, 200, w.buf);
	json_w_free(&w);
	api_metrics_record(a, R_HEALTH, 200, (clock_us() / 1e6) - t0);
}
