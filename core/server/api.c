/*
 * The operations API's top (api_int.h): setting up and freeing the API,
 * routing every request to its endpoint, and the endpoints that are
 * routing and little else (the op list, runtimes, install jobs, metrics,
 * /health). It calls down into every other file of the API; none calls
 * it.
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
#include "server/plan.h"

#ifndef ABX_VERSION
#define ABX_VERSION "0.0.0-dev"
#endif

/* Responses listing ops or runtimes: 256 ops with descriptions fit. */
#define API_LIST_MAX (1u << 20)
/* agents.<a>.<action> built from an agent name (< CFG_NAME_MAX). */
#define AGENT_OP_MAX (CFG_NAME_MAX + 32)

/* ---- set-up ------------------------------------------------------------- */

int
api_init(struct api *a, struct api_gen *g, struct manifest_set *ms, struct err *e)
{
	pthread_mutex_init(&a->mu, NULL);
	a->ms = ms;
	a->jobs = jobs_new(ms, install_ensure, api_jobs_hold, a);
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
	for (i = 0; i < ops_n(o); i++) {
		const struct op *op = ops_at(o, i);
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
	struct err e = {0};

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
		api_job_progress(w, &v->prog);
		api_job_requires(w, v);
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
			api_job_progress(w, &p->prog);
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
	return api_rq_policy(q, op, installs, n);
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
	api_job_json(&w, v);
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
	if (api_rq_policy(q, op->id, inst, op->ninstall) != 0)
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
	 * machinery itself is the wire's. */
	if (api_need_tools(q, op->id, inst, op->ninstall, NULL) != 0)
		return;
	api_rq_errf(q, "request.not_implemented", "%s is served by the sessions wire (/v1/agents/sessions)",
	            op->id);
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

	/* The sessions wire routes its own paths (/v1/agents/sessions…). */
	if (api_wire_route(q))
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
	} else if (strcmp(p, "/health") == 0 || strcmp(p, "/ready") == 0) {
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
	q.t0 = clock_us();
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
api_observe(void *arg, const struct httpd_route *route, int status, size_t bytes, int64_t usec)
{
	if (route == NULL)
		api_metrics_record(arg, R_SERVER, status, usec);
}

void
api_health(const struct httpd_req *req, struct httpd_resp *resp, void *arg)
{
	struct api *a = arg;
	int64_t t0 = clock_us();
	struct json_w w;

	json_w_init(&w, 256);
	json_w_obj(&w);
	json_w_kstr(&w, "status", "ok");
	json_w_kstr(&w, "version", ABX_VERSION);
	json_w_kbool(&w, "initialised", a->tf == NULL || tokfile_ready(a->tf, NULL) == 0);
	json_w_end(&w);
	if (w.overflow)
		httpd_respond_errf(resp, "internal", "out of memory");
	else
		httpd_respond_json(resp, 200, w.buf);
	json_w_free(&w);
	api_metrics_record(a, R_HEALTH, 200, clock_us() - t0);
}

/* The first tool an op any principal may call installs that is not ready,
 * as e (server.not_ready, details.tool), or 0 when none: the plan's
 * direct tools (PATH left to the check, which honours install.use_path),
 * each through the install engine's check. */
static int
tools_ready(struct api *a, struct api_gen *g, struct err *e)
{
	struct plan *p = malloc(sizeof(*p));
	struct job_probe *pr = malloc(sizeof(*pr));
	int i, rc = 0;

	if (p == NULL || pr == NULL)
		rc = err_set(e, "internal", "out of memory");
	else if (plan_build(p, &g->ops, &g->pol, a->ms, 0, NULL, NULL, e) != 0)
		rc = err_wrap(e, "server.not_ready", "%s", e->msg);
	for (i = 0; rc == 0 && i < p->n; i++) {
		if (!p->t[i].direct)
			continue;
		jobs_probe(a->jobs, &g->cfg, p->t[i].m->name, pr);
		if (pr->ready)
			continue;
		rc = err_set(e, "server.not_ready", "%s is not installed and verified (mode %s: %s)",
		             p->t[i].m->name, config_mode_name(g->cfg.install.mode),
		             pr->err.code != NULL ? pr->err.msg : "not installed");
		err_detail_str(e, "tool", p->t[i].m->name);
	}
	free(p);
	free(pr);
	return rc;
}

void
api_ready(const struct httpd_req *req, struct httpd_resp *resp, void *arg)
{
	struct api *a = arg;
	int64_t t0 = clock_us();
	struct api_gen *g = api_gen_get(a);
	struct err *e = calloc(1, sizeof(*e));
	int64_t now = clock_us();
	char ed[ERR_DETAILS_MAX];
	int rc = 0;

	if (e == NULL) {
		httpd_respond_errf(resp, "internal", "out of memory");
		api_gen_put(a, g);
		return;
	}
	err_keep_details(e, ed, sizeof(ed));
	if (a->tf != NULL && tokfile_ready(a->tf, e) != 0) {
		rc = -1;
	} else if (g->cfg.install.mode == CFG_MODE_BUILD || g->cfg.install.mode == CFG_MODE_OFFLINE) {
		pthread_mutex_lock(&a->mu);
		if (g->ready_us != 0 && now - g->ready_us < API_READY_MS * 1000) {
			rc = g->ready_err != NULL ? -1 : 0;
			if (rc)
				err_copy(e, g->ready_err);
			pthread_mutex_unlock(&a->mu);
		} else {
			pthread_mutex_unlock(&a->mu);
			rc = tools_ready(a, g, e);
			pthread_mutex_lock(&a->mu);
			free(g->ready_err);
			g->ready_err = NULL;
			/* the details' buffer follows the struct */
			if (rc != 0 && (g->ready_err = calloc(1, sizeof(*e) + ERR_DETAILS_MAX)) != NULL) {
				err_keep_details(g->ready_err, (char *)(g->ready_err + 1), ERR_DETAILS_MAX);
				err_copy(g->ready_err, e);
			}
			g->ready_us = now;
			pthread_mutex_unlock(&a->mu);
		}
	}
	api_gen_put(a, g);
	if (rc == 0) {
		struct json_w w;

		json_w_init(&w, 64);
		json_w_obj(&w);
		json_w_kstr(&w, "status", "ready");
		json_w_end(&w);
		httpd_respond_json(resp, 200, w.buf);
		json_w_free(&w);
	} else {
		httpd_respond_err(resp, e);
	}
	api_metrics_record(a, R_READY, rc == 0 ? 200 : err_info(e->code)->status, clock_us() - t0);
	free(e);
}
