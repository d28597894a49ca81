/*
 * The API's metrics (see api.h): counts by route and status, latency
 * histograms, and their Prometheus text.
 */
#include "server/api_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/decimal.h"

/* The metrics text: a few kilobytes for every route and status. */
#define API_METRICS_MAX (1u << 20)

/* every status the API answers with (the error table's and 200, 201, 202):
 * "other" is left for what no route sends */
static const int status_codes[API_NSTATUS] = {200, 201, 202, 400, 401, 403, 404, 405, 408, 413, 414,
                                              424, 429, 431, 500, 501, 502, 503, 504, 505, 507};
/* the upper bounds in microseconds */
static const uint32_t buckets[API_NBUCKETS] = {500,   1000,   2500,   5000,   10000,   25000,
                                               50000, 100000, 250000, 500000, 1000000, 5000000};
static const char *const route_names[R_NROUTES] = {
    "health",  "ops_list",     "ops_run", "runtimes",  "runtime",  "runtime_install", "install_job",
    "metrics", "unauthorized", "server",  "not_found", "sessions", "ready",
};

/* (api_int.h) */
void
api_metrics_record(struct api *a, enum api_route r, int status, int64_t usec)
{
	int i, si = API_NSTATUS;

	for (i = 0; i < API_NSTATUS; i++)
		if (status_codes[i] == status) {
			si = i;
			break;
		}
	pthread_mutex_lock(&a->mu);
	a->m.req[r][si]++;
	if (usec < 0)
		usec = 0;
	for (i = 0; i < API_NBUCKETS && usec > buckets[i]; i++)
		;
	a->m.hist[r][i]++;
	a->m.sum_us[r] += (uint64_t)usec;
	a->m.count[r]++;
	pthread_mutex_unlock(&a->mu);
}

void
api_count_op(struct api *a, int timed_out)
{
	pthread_mutex_lock(&a->mu);
	a->m.ops_run++;
	if (timed_out)
		a->m.ops_timeouts++;
	pthread_mutex_unlock(&a->mu);
}

/* (api_int.h) */
void
api_count(struct api *a, uint64_t *c)
{
	pthread_mutex_lock(&a->mu);
	(*c)++;
	pthread_mutex_unlock(&a->mu);
}

/* The longest line of the metrics text (a route name, a bucket, a count). */
#define API_METRICS_LINE 512

static void mprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Append one formatted line to b; a line over API_METRICS_LINE sets over. */
static void
mprintf(struct buf *b, const char *fmt, ...)
{
	char line[API_METRICS_LINE];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(line))
		b->over = 1;
	else
		buf_put(b, line, (size_t)n);
}

void
api_metrics_text(struct api *a, char **out, size_t *len)
{
	struct api_metrics *m = malloc(sizeof(*m));
	struct buf b = BUF_INIT(API_METRICS_MAX);
	struct jobs_stats js;
	int r, i;

	*out = NULL;
	*len = 0;
	if (m == NULL)
		return;
	pthread_mutex_lock(&a->mu);
	*m = a->m;
	pthread_mutex_unlock(&a->mu);
	jobs_get_stats(a->jobs, &js);

	mprintf(&b, "# HELP abx_http_requests_total API requests answered, by route and status.\n"
	            "# TYPE abx_http_requests_total counter\n");
	for (r = 0; r < R_NROUTES; r++)
		for (i = 0; i <= API_NSTATUS; i++)
			if (m->req[r][i] != 0) {
				if (i < API_NSTATUS)
					mprintf(&b,
					        "abx_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
					        route_names[r], status_codes[i],
					        (unsigned long long)m->req[r][i]);
				else
					mprintf(
					    &b,
					    "abx_http_requests_total{route=\"%s\",status=\"other\"} %llu\n",
					    route_names[r], (unsigned long long)m->req[r][i]);
			}
	mprintf(&b, "# HELP abx_http_request_duration_seconds API request latency, by route.\n"
	            "# TYPE abx_http_request_duration_seconds histogram\n");
	for (r = 0; r < R_NROUTES; r++) {
		uint64_t cum = 0;
		char num[48];

		if (m->count[r] == 0)
			continue;
		for (i = 0; i < API_NBUCKETS; i++) {
			cum += m->hist[r][i];
			dec_fixed(buckets[i], 6, 1, num, sizeof(num));
			mprintf(&b, "abx_http_request_duration_seconds_bucket{route=\"%s\",le=\"%s\"} %llu\n",
			        route_names[r], num, (unsigned long long)cum);
		}
		mprintf(&b, "abx_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
		        route_names[r], (unsigned long long)m->count[r]);
		dec_fixed(m->sum_us[r], 6, 0, num, sizeof(num));
		mprintf(&b, "abx_http_request_duration_seconds_sum{route=\"%s\"} %s\n", route_names[r], num);
		mprintf(&b, "abx_http_request_duration_seconds_count{route=\"%s\"} %llu\n", route_names[r],
		        (unsigned long long)m->count[r]);
	}
#define COUNTER(name, help, v)                                                                               \
	mprintf(&b, "# HELP " name " " help "\n# TYPE " name " counter\n" name " %llu\n",                    \
	        (unsigned long long)(v))
	COUNTER("abx_auth_failures_total", "Requests refused with 401.", m->auth_failures);
	COUNTER("abx_policy_denials_total", "Requests refused with 403 policy.denied.", m->policy_denials);
	COUNTER("abx_ops_runs_total", "Command ops run.", m->ops_run);
	COUNTER("abx_ops_timeouts_total", "Command ops killed at their timeout.", m->ops_timeouts);
	COUNTER("abx_ops_rejected_total", "Command ops refused at their concurrency limit (429).",
	        m->ops_rejected_busy);
	COUNTER("abx_installs_started_total", "Install jobs started.", js.started);
	COUNTER("abx_installs_succeeded_total", "Install jobs that succeeded.", js.succeeded);
	COUNTER("abx_installs_failed_total", "Install jobs that failed.", js.failed);
	COUNTER("abx_install_downloaded_bytes_total", "Bytes downloaded by install jobs.", js.bytes);
#undef COUNTER
	mprintf(&b,
	        "# HELP abx_install_jobs_running Install jobs running now.\n"
	        "# TYPE abx_install_jobs_running gauge\nabx_install_jobs_running %d\n",
	        js.running);
	free(m);
	if (b.over) {
		buf_free(&b);
		return;
	}
	*out = (char *)b.p;
	*len = b.len;
}
