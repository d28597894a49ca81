/*
 * One request in progress (struct api_rq, api_int.h): its answers (JSON,
 * errors, Retry-After), its body as JSON, its policy check, its count in
 * the metrics, and the room its output streams may take. Below every
 * route of the API; it calls only api_metrics.c of them.
 */
#include "server/api_int.h"
#include "base/clock.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "install/audit.h"

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
	struct err e = {0};
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
	struct err e = {0};

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

int
api_rq_policy(struct api_rq *q, const char *op_id, const char *const *installs, int n)
{
	struct pol_decision *d = malloc(sizeof(*d));
	struct err e = {0};
	char ed[ERR_DETAILS_MAX];

	err_keep_details(&e, ed, sizeof(ed));
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

void
api_rq_record(struct api_rq *q)
{
	api_metrics_record(q->a, q->route, q->status, clock_us() - q->t0);
}

size_t
api_stream_room(struct api_rq *q, size_t cap)
{
	size_t room = httpd_resp_room(q->resp), each = 2 * cap;

	room = room > API_ANSWER_FRAME ? room - API_ANSWER_FRAME : 0;
	return each > room / 2 ? room / 2 : each;
}
