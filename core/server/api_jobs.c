/*
 * Install jobs as the API sees them: a job's thread or a session holding
 * its configuration generation, the job object, and install on first use
 * as a request meets it, waiting for the tools an op needs
 * (api_need_tools).
 */
#include "server/api_int.h"
#include "base/clock.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

/* The generation whose cfg this is: every cfg the job table sees is one
 * (api_init's table is only ever passed &g->cfg). */
static struct api_gen *
gen_of(const struct config *cfg)
{
	return (struct api_gen *)(void *)((char *)(uintptr_t)cfg - offsetof(struct api_gen, cfg));
}

/* (api_int.h) */
void
api_jobs_hold(void *arg, const struct config *cfg, int delta)
{
	if (delta > 0)
		api_gen_hold(arg, gen_of(cfg));
	else
		api_gen_put(arg, gen_of(cfg));
}

/* ---- install on first use ------------------------------------------------- */

static const char *
job_status_name(enum job_status s)
{
	return s == JOB_PENDING ? "pending" : s == JOB_SUCCEEDED ? "succeeded" : "failed";
}

/* An install's progress (install/install.h): bytes of total downloaded, packages
 * (npm) or artifacts (tarball) done of count; kept after the install. */
void
api_job_progress(struct json_w *w, const struct install_progress *p)
{
	json_w_kint(w, "bytes", (int64_t)p->bytes);
	json_w_kint(w, "total", (int64_t)p->total);
	json_w_kint(w, "packages_done", (int64_t)p->done);
	json_w_kint(w, "packages_total", (int64_t)p->count);
}

/* "requires": each tool installed for v's, with its own progress. */
void
api_job_requires(struct json_w *w, const struct job_view *v)
{
	int i;

	json_w_key(w, "requires");
	json_w_arr(w);
	for (i = 0; i < v->nreq; i++) {
		json_w_obj(w);
		json_w_kstr(w, "tool", v->req[i].tool);
		json_w_kstr(w, "phase", v->req[i].phase);
		api_job_progress(w, &v->req[i].prog);
		json_w_end(w);
	}
	json_w_end(w);
}

void
api_job_json(struct json_w *w, const struct job_view *v)
{
	char ts[CLOCK_ISO_MAX];

	json_w_obj(w);
	json_w_kstr(w, "object", "install.job");
	json_w_kstr(w, "id", v->id);
	json_w_kstr(w, "tool", v->tool);
	json_w_kstr(w, "status", job_status_name(v->status));
	json_w_kstr(w, "phase", v->phase);
	api_job_progress(w, &v->prog);
	api_job_requires(w, v);
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
		json_w_raw(w, v->details[0] != '\0' ? v->details : "{}");
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
	struct err e = {0};
	char ed[ERR_DETAILS_MAX];
	int64_t deadline = 0, left;
	int i, rc, waiter;

	if (n == 0)
		return 0;
	err_keep_details(&e, ed, sizeof(ed));
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
			api_job_json(&w, v);
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
