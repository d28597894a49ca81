/*
 * The sessions API: POST /v1/agents/<a>/sessions,
 * GET …/sessions, GET …/sessions/<id>, GET …/sessions/<id>/events (JSON
 * page or Server-Sent Events), POST …/sessions/<id>/cancel. Creating a
 * session and agents.<a>.run are in api_sessions_new.c; the engine is
 * core/server/sessions.c.
 *
 * Event streams do not hold a worker: the worker defers the answer and a
 * thread of the stream's own writes it (httpd_defer, httpd_complete), so
 * /health and the rest of the API answer however many streams are open.
 * Streams are capped (server.max_streams, default API_SSE_STREAMS_DEFAULT;
 * per principal API_SSE_PRINCIPAL_SHARE of them) and end after API_SSE_MAX_MS even when the session goes on:
 * the client reconnects with Last-Event-ID and loses nothing. A client that went away is noticed at the next
 * heartbeat at the latest.
 */
#include "server/api_int.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/fs.h"
#include "base/json.h"
#include "install/launch.h"
#include "pkg/manifest.h"
#include "base/proc.h"
#include "server/sessions.h"

/* One stream's whole life; then the client resumes with Last-Event-ID. */
#define API_SSE_MAX_MS (300 * 1000)
/* The reconnection delay an SSE client is told (ms). */
#define API_SSE_RETRY_MS 1000
/* Streams open at once unless server.max_streams says: each is a thread
 * (API_SSE_STACK reserved, a few pages used) and its read buffer. */
#define API_SSE_STREAMS_DEFAULT 64
/* When more than one principal has a token, one principal holds at most
 * this share of the stream slots (a quarter, at least one): a read-only
 * token cannot take every slot from the others, and it takes four tokens
 * to fill them. With one principal there is nobody to keep slots for. */
#define API_SSE_PRINCIPAL_SHARE 4
/* A stream thread's stack: the loop keeps its buffer on the heap. */
#define API_SSE_STACK (128u << 10)

/* ---- set-up ---------------------------------------------------------------- */

/* The sessions directory under the state directory's descriptor sfd, made
 * and opened without following a link (dir names it in messages). Returns
 * its descriptor, kept open for the process's life: journals are opened
 * relative to it (journal_create_at), so they land in that directory even
 * when an ancestor of its path, which the owner of a home directory may
 * rename, points elsewhere later, and no /proc is needed; -1 with e when
 * the directory cannot be used. */
static int
sessions_dir_at(int sfd, const char *dir, struct err *e)
{
	int fd = fs_subdir_open_safe(sfd, "sessions", 1, dir, e);

	if (fd < 0)
		return -1;
	if (faccessat(fd, ".", W_OK | X_OK, 0) != 0) {
		err_set(e, "io.error", "%s is not writable", dir);
		close(fd);
		return -1;
	}
	return fd;
}

int
api_sessions_init(struct api *a, char *msg, size_t cap, struct err *e)
{
	struct sessions_config c;
	struct api_gen *g = api_gen_get(a);
	char state[PATH_MAX], dir[PATH_MAX + 16];
	int loaded, interrupted, skipped, have_dir = 0;
	struct err e2;

	memset(&c, 0, sizeof(c));
	c.max_running = g->cfg.server.max_sessions;
	c.max_per_agent = g->cfg.server.max_sessions_per_agent;
	c.journal_max = (size_t)g->cfg.server.session_journal_max_bytes;
	c.max_streams = g->cfg.server.max_streams > 0 ? g->cfg.server.max_streams : API_SSE_STREAMS_DEFAULT;
	err_clear(&e2);
	if (tools_state_dir(&g->cfg, state, sizeof(state)) >= 0 &&
	    (size_t)snprintf(dir, sizeof(dir), "%s/sessions", state) < sizeof(dir)) {
		if (a->have_state_fd) {
			c.dir_fd = sessions_dir_at(a->state_fd, dir, &e2);
			c.have_dir_fd = have_dir = c.dir_fd >= 0;
		} else if (fs_mkdir_p(dir, 0700, &e2) == 0 && fs_dir_safe(dir, &e2) == 0 &&
		           access(dir, W_OK | X_OK) == 0)
			have_dir = 1;
	}
	api_gen_put(a, g);
	c.dir = have_dir ? dir : NULL;
	a->sessions = sessions_new(&c, a->jobs);
	if (a->sessions == NULL)
		return err_set(e, "internal", "out of memory");
	if (!have_dir) {
		snprintf(msg, cap,
		         "no writable state directory for session journals (%s): they live in memory, "
		         "replay is limited to this process's lifetime",
		         e2.code != NULL ? e2.msg : "not writable");
		return 1;
	}
	sessions_replay(a->sessions, &loaded, &interrupted, &skipped);
	snprintf(msg, cap, "session journals in %s: %d replayed (%d marked interrupted), %d skipped", dir,
	         loaded, interrupted, skipped);
	return 0;
}

/* ---- helpers ---------------------------------------------------------------- */

static void
session_json(struct json_w *w, const struct session_view *v)
{
	json_w_obj(w);
	json_w_kstr(w, "id", v->id);
	json_w_kstr(w, "object", "agent.session");
	json_w_kstr(w, "agent", v->agent);
	json_w_kstr(w, "status", session_status_name(v->status));
	json_w_kstr(w, "created_at", v->created_at);
	json_w_key(w, "started_at");
	v->started_at[0] != '\0' ? json_w_str(w, v->started_at) : json_w_null(w);
	json_w_key(w, "ended_at");
	v->ended_at[0] != '\0' && v->status != SESSION_IN_PROGRESS ? json_w_str(w, v->ended_at)
	                                                           : json_w_null(w);
	json_w_key(w, "exit_code");
	v->exited ? json_w_int(w, v->exit_code) : json_w_null(w);
	if (v->exited)
		json_w_kint(w, "duration_ms", v->duration_ms);
	json_w_kint(w, "events", v->events);
	if (v->job[0] != '\0')
		json_w_kstr(w, "install_job", v->job);
	if (v->error[0] != '\0')
		json_w_kstr(w, "error", v->error);
	if (v->truncated)
		json_w_kbool(w, "truncated", 1);
	if (v->cancel_requested && v->status == SESSION_IN_PROGRESS)
		json_w_kbool(w, "cancel_requested", 1);
	json_w_kstr(w, "principal", v->principal);
	json_w_end(w);
}

/* (api_int.h) */
int
api_respond_session(struct api_rq *q, int status, const struct session_view *v)
{
	struct json_w w;

	json_w_init(&w, API_SESSION_OBJ_MAX);
	session_json(&w, v);
	return api_rq_json_w(q, status, &w);
}

/* The value of name in a query string (a view), or NULL. */
static const char *
query_get(const char *qs, const char *name, size_t *len)
{
	size_t n = strlen(name);
	const char *p = qs, *amp;

	while (p != NULL && *p != '\0') {
		amp = strchr(p, '&');
		if (strncmp(p, name, n) == 0 && p[n] == '=') {
			*len = amp != NULL ? (size_t)(amp - p - n - 1) : strlen(p + n + 1);
			return p + n + 1;
		}
		p = amp != NULL ? amp + 1 : NULL;
	}
	return NULL;
}

/* A decimal in [0, max] from s[0..n): 0 or -1. */
static int
parse_u32(const char *s, size_t n, uint32_t max, uint32_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (n == 0 || n > 10)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* ---- reading ----------------------------------------------------------------- */

static void
list(struct api_rq *q, const char *agent)
{
	struct session_view *v = malloc(SESSIONS_KEEP * sizeof(*v));
	struct json_w w;
	int i, n;

	if (v == NULL) {
		api_rq_errf(q, "internal", "out of memory");
		return;
	}
	n = sessions_list(q->a->sessions, agent, v, SESSIONS_KEEP);
	json_w_init(&w, (size_t)SESSIONS_KEEP * API_SESSION_OBJ_MAX);
	json_w_obj(&w);
	json_w_kstr(&w, "object", "list");
	json_w_key(&w, "data");
	json_w_arr(&w);
	for (i = 0; i < n; i++)
		session_json(&w, &v[i]);
	json_w_end(&w);
	json_w_end(&w);
	free(v);
	api_rq_json_w(q, 200, &w);
}

static void
get_one(struct api_rq *q, const char *agent, const char *id)
{
	struct session_view v;

	if (sessions_get(q->a->sessions, agent, id, &v) != 0) {
		api_rq_errf(q, "not_found", "no session %s of %s", id, agent);
		return;
	}
	api_respond_session(q, 200, &v);
}

static void
cancel(struct api_rq *q, const char *agent, const char *id)
{
	struct session_view v;
	int rc, i;

	rc = sessions_cancel(q->a->sessions, agent, id, &v);
	if (rc < 0) {
		api_rq_errf(q, "not_found", "no session %s of %s", id, agent);
		return;
	}
	/* Answer with the end when it comes soon: SIGTERM, then SIGKILL after
	 * the grace, is bounded. */
	for (i = 0; rc == 0 && i < (PROC_KILL_GRACE_MS_DEFAULT + 1000) / 100; i++) {
		if (sessions_get(q->a->sessions, agent, id, &v) != 0 || v.status != SESSION_IN_PROGRESS)
			break;
		sessions_wait(q->a->sessions, id, v.events, 100);
	}
	api_respond_session(q, 200, &v);
}

static void
events_page(struct api_rq *q, const char *agent, const char *id, uint32_t after, uint32_t limit)
{
	struct session_view v;
	struct json_w w;
	char *buf = NULL;
	size_t len, i;
	uint32_t last;
	int n, done;

	n = sessions_read(q->a->sessions, agent, id, after, (int)limit, API_EVENTS_BYTES, 0, &buf, &len,
	                  &last, &done);
	if (n < 0 || sessions_get(q->a->sessions, agent, id, &v) != 0) {
		free(buf);
		api_rq_errf(q, "not_found", "no session %s of %s", id, agent);
		return;
	}
	/* JSON lines to an array: each newline but the last becomes a comma. */
	for (i = 0; i + 1 < len; i++)
		if (buf[i] == '\n')
			buf[i] = ',';
	if (len > 0)
		buf[len - 1] = '\0';
	json_w_init(&w, API_EVENTS_BYTES * 2);
	json_w_obj(&w);
	json_w_kstr(&w, "object", "list");
	json_w_key(&w, "data");
	json_w_arr(&w);
	if (n > 0)
		json_w_raw(&w, buf);
	json_w_end(&w);
	json_w_kint(&w, "first_id", n > 0 ? after + 1 : 0);
	json_w_kint(&w, "last_id", last);
	json_w_kbool(&w, "has_more", last < v.events);
	json_w_kstr(&w, "session_status", session_status_name(v.status));
	json_w_end(&w);
	free(buf);
	api_rq_json_w(q, 200, &w);
}

/*
 * One event stream, on a thread of its own: the worker that took the
 * request deferred it (httpd_defer) and went back to the pool, so open
 * streams never starve other requests. Everything the thread needs is
 * copied here; resp stays valid until httpd_complete, the last thing the
 * thread does with it (the session hold and stream slot are given back
 * before: once a drain sees every answer complete, nothing touches S).
 */
struct sse_ctx {
	struct sessions *S;
	struct httpd_resp *resp;
	char agent[CFG_NAME_MAX];
	char id[SESSION_ID_MAX];
	char principal[POL_NAME_MAX];
	uint32_t after;
	int hb_ms;
};

static void
sse_run(struct sse_ctx *x)
{
	struct sessions *S = x->S;
	struct httpd_resp *resp = x->resp;
	int64_t end = clock_ms() + API_SSE_MAX_MS, idle_since = clock_ms();
	struct buf b = BUF_INIT(SESSIONS_READ_ROOM(API_EVENTS_BYTES));
	char hello[64];
	uint32_t last = x->after;
	int n, done = 0, w, left, hb_ms = x->hb_ms;

	if (httpd_stream_begin(resp, 200, "text/event-stream") != 0)
		goto out;
	snprintf(hello, sizeof(hello), "retry: %d\n\n", API_SSE_RETRY_MS);
	if (httpd_stream_write(resp, hello, strlen(hello)) != 0)
		goto out;
	while (!done) {
		n = sessions_read_buf(S, x->agent, x->id, last, API_EVENTS_PAGE_MAX, API_EVENTS_BYTES, 1, &b,
		                      &last, &done);
		if (n < 0)
			break;
		if (n > 0) {
			if (httpd_stream_write(resp, b.p, b.len) != 0)
				break;
			continue;
		}
		if (done || httpd_resp_closing(resp) || clock_ms() >= end)
			break;
		/* Short waits, so a draining server is noticed at once. */
		left = hb_ms - (int)(clock_ms() - idle_since);
		w = sessions_wait(S, x->id, last,
		                  left < 1                 ? 1
		                  : left < API_SSE_TICK_MS ? left
		                                           : API_SSE_TICK_MS);
		if (w < 0)
			break;
		if (w > 0) {
			idle_since = clock_ms();
		} else if (clock_ms() - idle_since >= hb_ms) {
			if (httpd_stream_write(resp, ": keep-alive\n\n", 14) != 0)
				break;
			idle_since = clock_ms();
		}
	}
	httpd_stream_end(resp);
out:
	buf_free(&b);
	sessions_hold(S, x->id, 0);
	sessions_stream_release(S, x->principal);
}

static void *
sse_thread(void *arg)
{
	struct sse_ctx *x = arg;
	struct httpd_resp *resp = x->resp;

	sse_run(x);
	free(x);
	httpd_complete(resp);
	return NULL;
}

/* The streams one principal may hold (API_SSE_PRINCIPAL_SHARE). */
static int
streams_per_principal(const struct api_rq *q, int max)
{
	int i, with_tokens = 0;

	for (i = 0; i < q->g->pol.n; i++)
		with_tokens += q->g->pol.p[i].ntokens > 0;
	if (with_tokens < 2)
		return max;
	return (max + API_SSE_PRINCIPAL_SHARE - 1) / API_SSE_PRINCIPAL_SHARE;
}

static void
events_stream(struct api_rq *q, const char *agent, const char *id, uint32_t after)
{
	struct sessions *S = q->a->sessions;
	struct session_view v;
	struct sse_ctx *x;
	pthread_attr_t at;
	pthread_t th;
	int rc, max, mine;

	if (sessions_get(S, agent, id, &v) != 0) {
		api_rq_errf(q, "not_found", "no session %s of %s", id, agent);
		return;
	}
	x = calloc(1, sizeof(*x));
	if (x == NULL) {
		api_rq_errf(q, "internal", "out of memory");
		return;
	}
	snprintf(x->principal, sizeof(x->principal), "%s", q->principal != NULL ? q->principal : "");
	max = q->g->cfg.server.max_streams > 0 ? q->g->cfg.server.max_streams : API_SSE_STREAMS_DEFAULT;
	mine = streams_per_principal(q, max);
	rc = sessions_stream_acquire(S, x->principal, mine);
	if (rc != 0) {
		api_rq_retry_after(q, 5);
		if (rc == -2)
			api_rq_errf(q, "request.rate_limited",
			            "principal %s holds %d event stream%s, the most one principal may hold "
			            "(a quarter of server.max_streams %d); close one of its streams first",
			            x->principal[0] ? x->principal : "-", mine, mine == 1 ? "" : "s", max);
		else
			api_rq_errf(q, "request.rate_limited",
			            "every event stream slot is taken (server.max_streams)");
		free(x);
		return;
	}
	sessions_hold(S, id, 1);
	q->status = 200;
	x->S = S;
	x->resp = q->resp;
	snprintf(x->agent, sizeof(x->agent), "%s", agent);
	snprintf(x->id, sizeof(x->id), "%s", id);
	x->after = after;
	x->hb_ms = q->g->cfg.server.sse_heartbeat * 1000;
	/* Deferred before the thread exists: it may answer and complete
	 * before this worker is back in its loop. */
	httpd_defer(q->resp);
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, API_SSE_STACK);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &at, sse_thread, x);
	pthread_attr_destroy(&at);
	if (rc != 0) {
		/* No thread to spare: stream from this worker, as before. */
		sse_run(x);
		free(x);
		httpd_complete(q->resp);
	}
}

static void
events(struct api_rq *q, const char *agent, const char *id)
{
	const char *accept = httpd_req_header(q->req, "Accept");
	const char *lei = httpd_req_header(q->req, "Last-Event-ID"), *s;
	uint32_t after = 0, limit = API_EVENTS_PAGE;
	size_t n;

	if ((s = query_get(q->req->query, "after", &n)) != NULL &&
	    parse_u32(s, n, UINT32_MAX - 1, &after) != 0) {
		api_rq_errf(q, "request.invalid", "after must be an event number");
		return;
	}
	if ((s = query_get(q->req->query, "limit", &n)) != NULL &&
	    (parse_u32(s, n, API_EVENTS_PAGE_MAX, &limit) != 0 || limit == 0)) {
		api_rq_errf(q, "request.invalid", "limit must be 1..%d", API_EVENTS_PAGE_MAX);
		return;
	}
	if (accept != NULL && strstr(accept, "text/event-stream") != NULL) {
		/* A reconnecting EventSource sends the last id it saw. */
		if (lei != NULL && parse_u32(lei, strlen(lei), UINT32_MAX - 1, &after) != 0) {
			api_rq_errf(q, "request.invalid", "Last-Event-ID must be an event number");
			return;
		}
		events_stream(q, agent, id, after);
		return;
	}
	events_page(q, agent, id, after, limit);
}

/* ---- routing ------------------------------------------------------------------ */

static void
not_allowed(struct api_rq *q, const char *allow)
{
	httpd_resp_header(q->resp, "Allow", allow);
	api_rq_errf(q, "request.method", "%s is not allowed here (allowed: %s)", q->req->method, allow);
}

/* Copy the segment at p (up to '/' or the end) into out; its length, or 0
 * when it is empty, too long or has other than [A-Za-z0-9_-]. */
static size_t
segment(const char *p, char *out, size_t cap)
{
	size_t n = 0;

	while (p[n] != '\0' && p[n] != '/') {
		char c = p[n];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_') ||
		    n + 1 >= cap)
			return 0;
		out[n] = c;
		n++;
	}
	out[n] = '\0';
	return n;
}

int
api_sessions_route(struct api_rq *q)
{
	const char *p = q->req->path, *m = q->req->method, *rest;
	int get = strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0, post = strcmp(m, "POST") == 0;
	char agent[CFG_NAME_MAX], id[SESSION_ID_MAX], op[OP_ID_MAX];
	size_t n;

	if (strncmp(p, "/v1/agents/", 11) != 0 || q->a->sessions == NULL)
		return 0;
	rest = p + 11;
	if ((n = segment(rest, agent, sizeof(agent))) == 0 || strncmp(rest + n, "/sessions", 9) != 0)
		return 0;
	rest += n + 9;
	if (*rest != '\0' && *rest != '/')
		return 0;
	q->route = R_SESSIONS;
	if (!api_agent_enabled(q->g, agent)) {
		const char *s = api_suggest(q->g, q->principal, agent, 1);
		api_rq_errf(q, "not_found", "no agent %s is enabled%s%s%s", agent, s ? " (did you mean " : "",
		            s ? s : "", s ? "?)" : "");
		return 1;
	}
	if (*rest == '\0') {
		if (post) {
			api_sessions_create(q, agent);
		} else if (get) {
			snprintf(op, sizeof(op), "agents.%s.sessions.list", agent);
			if (api_rq_policy(q, op, NULL, 0) == 0)
				list(q, agent);
		} else {
			not_allowed(q, "GET, POST");
		}
		return 1;
	}
	rest++;
	if ((n = segment(rest, id, sizeof(id))) == 0) {
		api_rq_errf(q, "not_found", "no such resource: %s", p);
		return 1;
	}
	rest += n;
	if (*rest == '\0') {
		if (!get) {
			not_allowed(q, "GET");
			return 1;
		}
		snprintf(op, sizeof(op), "agents.%s.sessions.get", agent);
		if (api_rq_policy(q, op, NULL, 0) == 0)
			get_one(q, agent, id);
	} else if (strcmp(rest, "/events") == 0) {
		if (!get) {
			not_allowed(q, "GET");
			return 1;
		}
		snprintf(op, sizeof(op), "agents.%s.sessions.events", agent);
		if (api_rq_policy(q, op, NULL, 0) == 0)
			events(q, agent, id);
	} else if (strcmp(rest, "/cancel") == 0) {
		if (!post) {
			not_allowed(q, "POST");
			return 1;
		}
		snprintf(op, sizeof(op), "agents.%s.sessions.cancel", agent);
		if (api_rq_policy(q, op, NULL, 0) == 0)
			cancel(q, agent, id);
	} else {
		api_rq_errf(q, "not_found", "no such resource: %s", p);
	}
	return 1;
}
