/* One connection's request cycle on the event thread (read, parse, body,
 * dispatch, write, linger, timeouts, the access log) and the worker threads
 * that run handlers. */
#include "net/httpd_int.h"

#include "base/clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the request cycle (event thread) ----------------------------------- */

static int
log_stamp(char *buf, size_t cap, struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
	return clock_iso((int64_t)ts->tv_sec * 1000 + ts->tv_nsec / 1000000, 1, buf, cap);
}

/* Write the counts of folded lines held back, if any, and start a new
 * window. */
void
httpd__log_flush_repeats(struct httpd *s)
{
	char line[400], stamp[96];
	struct timespec ts;
	int i, n;

	for (i = 0; s->fold_held > 0 && i <= HTTPD_FOLD_KEYS; i++) {
		struct fold *f = &s->fold[i];

		if (f->n == 0)
			continue;
		log_stamp(stamp, sizeof(stamp), &ts);
		if (i == HTTPD_FOLD_KEYS && s->fold_status == 0)
			n = snprintf(line, sizeof(line), "%s * * * - repeated %u more times\n", stamp, f->n);
		else
			n = snprintf(line, sizeof(line), "%s %s repeated %u more times\n", stamp, f->key,
			             f->n);
		if (n > 0 && write(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line)) < 0)
			break;
	}
	memset(s->fold, 0, sizeof(s->fold));
	s->nfold = 0;
	s->fold_held = 0;
}

/* 1 when this line is counted, not written: its (address, method, path,
 * status) was written already within this second. */
static int
log_fold(struct httpd *s, const struct conn *c, const struct http_view *m, const struct http_view *p,
         int status, time_t sec)
{
	const char *colon = strrchr(c->peer, ':');
	struct fold *f = NULL;
	char key[sizeof(s->fold[0].key)];
	int i;

	if (sec != s->fold_sec)
		httpd__log_flush_repeats(s);
	s->fold_sec = sec;
	snprintf(key, sizeof(key), "%.*s %.*s %.*s %d", colon ? (int)(colon - c->peer) : 47, c->peer,
	         (int)(m->n > 32 ? 32 : m->n), m->p, (int)(p->n > 200 ? 200 : p->n), p->p, status);
	for (i = 0; i < s->nfold && f == NULL; i++)
		if (strcmp(s->fold[i].key, key) == 0)
			f = &s->fold[i];
	if (f == NULL && s->nfold < HTTPD_FOLD_KEYS) {
		memcpy(s->fold[s->nfold++].key, key, sizeof(key));
		return 0;
	}
	if (f == NULL) {
		f = &s->fold[HTTPD_FOLD_KEYS];
		if (f->key[0] == '\0') {
			snprintf(f->key, sizeof(f->key), "* * * %d", status);
			s->fold_status = status;
			return 0;
		}
		if (s->fold_status != status)
			s->fold_status = 0;
	}
	f->n++;
	s->fold_held++;
	return 1;
}

void
httpd__log_request(struct httpd *s, struct conn *c, int status, size_t bytes)
{
	struct http_view m = {"-", 1}, p = {"-", 1};
	char line[512], stamp[96];
	struct timespec ts;
	int64_t us = c->t_start ? clock_us() - c->t_start : 0;
	int n;

	if (s->cfg.observe != NULL)
		s->cfg.observe(s->cfg.observe_arg, c->route, status, bytes, us);
	if (!s->cfg.access_log)
		return;
	if (c->b != NULL && c->b->head_len > 0) {
		m = c->b->hr.method;
		p = c->b->hr.path;
	}
	log_stamp(stamp, sizeof(stamp), &ts);
	if (((status >= 400 && status < 500) || status == 503) && log_fold(s, c, &m, &p, status, ts.tv_sec))
		return;
	n = snprintf(line, sizeof(line), "%s %s %.*s %.*s %d %zu %lld.%03dms\n", stamp, c->peer,
	             (int)(m.n > 32 ? 32 : m.n), m.p, (int)(p.n > 200 ? 200 : p.n), p.p, status, bytes,
	             (long long)(us / 1000), (int)(us % 1000));
	if (n >= (int)sizeof(line)) {
		n = sizeof(line);
		line[n - 1] = '\n';
	}
	/* One write so lines from threads never interleave. */
	if (write(2, line, n) < 0)
		return;
}

static const char *
status_code(int status)
{
	switch (status) {
	case 408:
		return "request.timeout";
	case 413:
		return "request.too_large";
	case 414:
		return "request.uri_too_long";
	case 431:
		return "request.headers_too_large";
	case 501:
		return "request.not_implemented";
	case 505:
		return "request.version";
	default:
		return "request.invalid";
	}
}

static struct httpd_resp *
resp_reset(struct conn *c)
{
	struct httpd_resp *w = &c->b->resp;

	w->c = c;
	w->done = w->streaming = w->raw = w->ended = w->failed = w->head_only = w->deferred = 0;
	w->status = 0;
	w->bytes = 0;
	w->hlen = 0;
	return w;
}

/* An error answer from the event thread; the connection closes after it
 * (lingering when the client may still be sending). */
static void
answer_error(struct httpd *s, struct conn *c, int status, const char *msg)
{
	struct httpd_resp *w = resp_reset(c);

	httpd__out_drop(c);
	c->partial = 0;
	c->close_after = 1;
	c->linger = 1;
	if (httpd_respond_errf(w, status_code(status), "%s", msg) != 0) {
		httpd__conn_close(s, c);
		return;
	}
	c->state = C_WRITE;
	httpd__set_deadline(s, c, s->cfg.write_timeout_ms);
}

/* 413 for a body over max_body: len bytes announced, or -1 when a chunked
 * body grew past it. */
static void
answer_too_large(struct httpd *s, struct conn *c, int64_t len)
{
	char msg[128];

	if (len >= 0)
		snprintf(msg, sizeof(msg), "the request body of %lld bytes is over the limit of %zu bytes",
		         (long long)len, s->cfg.max_body);
	else
		snprintf(msg, sizeof(msg), "the chunked request body is over the limit of %zu bytes",
		         s->cfg.max_body);
	answer_error(s, c, 413, msg);
}

static void
make_ready(struct httpd *s, struct conn *c)
{
	if (c->in_ready)
		return;
	c->in_ready = 1;
	c->next_ready = s->ready;
	s->ready = c;
}

static void
request_done(struct httpd *s, struct conn *c)
{
	struct cbuf *b = c->b;

	httpd__free_request(c);
	if (s->stopping || c->close_after) {
		httpd__conn_close(s, c);
		return;
	}
	memmove(b->in, b->in + b->pos, b->len - b->pos);
	b->len -= b->pos;
	b->pos = b->head_len = b->scanned = b->parsed_at = 0;
	c->state = C_HEAD;
	c->linger = 0;
	c->partial = 0;
	c->admitted = 0;
	c->owner = 0;
	if (b->len == 0) {
		httpd__put_buf(c);
		c->idle = 1;
		c->t_start = 0;
		c->since = clock_ms();
		httpd__set_deadline(s, c, s->cfg.idle_timeout_ms);
	} else {
		c->idle = 0;
		c->t_start = clock_us();
		httpd__set_deadline(s, c, s->cfg.header_timeout_ms);
	}
}

static void
start_linger(struct httpd *s, struct conn *c)
{
	shutdown(c->fd, SHUT_WR);
	httpd__free_request(c);
	httpd__put_buf(c);
	c->state = C_LINGER;
	c->since = clock_ms();
	c->linger_bytes = 0;
	httpd__set_deadline(s, c, HTTPD_LINGER_MS);
}

static void
do_linger(struct httpd *s, struct conn *c)
{
	char tmp[4096];
	ssize_t k;

	for (;;) {
		k = recv(c->fd, tmp, sizeof(tmp), 0);
		if (k > 0) {
			c->linger_bytes += (size_t)k;
			if (c->linger_bytes <= HTTPD_LINGER_BYTES)
				continue;
		} else if (k < 0 && errno == EINTR) {
			continue;
		} else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			return;
		}
		httpd__conn_close(s, c);
		return;
	}
}

/* Returns 1 when the response went out and the connection moved on, 0 when
 * the socket is full, -1 when the connection was closed. */
static int
write_out(struct httpd *s, struct conn *c)
{
	ssize_t k;

	while (c->out_off < c->out.len) {
		k = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
		if (k > 0) {
			c->out_off += (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		httpd__conn_close(s, c);
		return -1;
	}
	httpd__log_request(s, c, c->b->resp.status, c->b->resp.bytes);
	if (c->close_after) {
		if (c->linger)
			start_linger(s, c);
		else
			httpd__conn_close(s, c);
		return -1;
	}
	request_done(s, c);
	return 1;
}

/* A handler finished (event thread). */
static void
resume(struct httpd *s, struct conn *c)
{
	struct httpd_resp *w = &c->b->resp;

	if (w->streaming) {
		httpd__log_request(s, c, w->status, w->bytes);
		if (w->failed)
			httpd__conn_close(s, c);
		else
			request_done(s, c);
		return;
	}
	if (c->out.p == NULL) {
		httpd__conn_close(s, c);
		return;
	}
	c->state = C_WRITE;
	httpd__set_deadline(s, c, s->cfg.write_timeout_ms);
}

static void
terminate(struct http_view v, const char *buf, size_t cap)
{
	if (v.p >= buf && v.p + v.n < buf + cap)
		((char *)v.p)[v.n] = '\0';
}

static int
path_matches(const struct httpd_route *r, const char *path)
{
	if (r->flags & HTTPD_PREFIX)
		return strncmp(path, r->path, strlen(r->path)) == 0;
	return strcmp(path, r->path) == 0;
}

/* The methods the routes of path take, for 405's Allow ("" when none). */
static void
allowed_methods(struct httpd *s, const char *path, char *allow, size_t cap)
{
	const struct httpd_route *r;
	size_t alen = 0;
	int i;

	allow[0] = '\0';
	for (i = 0; i < s->cfg.nroutes; i++) {
		r = &s->cfg.routes[i];
		if (!path_matches(r, path) || strstr(allow, r->method) != NULL ||
		    alen + strlen(r->method) + 8 >= cap)
			continue;
		alen += (size_t)snprintf(allow + alen, cap - alen, "%s%s%s", alen ? ", " : "", r->method,
		                         strcmp(r->method, "GET") == 0 ? ", HEAD" : "");
	}
}

/* 1 when owner's admitted requests (a body being read, a handler) already
 * take its share of the slots. */
static int
owner_full(struct httpd *s, uint64_t owner)
{
	int i, n = 0;

	for (i = 0; i < s->hiwater; i++)
		n += s->conns[i].owner == owner &&
		     (s->conns[i].state == C_BODY || s->conns[i].state == C_BUSY);
	return n >= (s->cfg.max_conns + HTTPD_OWNER_SHARE - 1) / HTTPD_OWNER_SHARE;
}

/* The head is complete: cut it into C strings, pick the route, and let the
 * reserve rule and the gate decide before a byte of the body is read, so a
 * request they refuse never holds a slot while its body trickles in.
 * Returns 0 to read the body and dispatch, 1 when the request was answered
 * (the connection closes after the answer, dropping the unread body). */
static int
admit(struct httpd *s, struct conn *c)
{
	struct cbuf *b = c->b;
	struct http_req *hr = &b->hr;
	struct httpd_req *q = &b->req;
	struct httpd_resp *w = resp_reset(c);
	const struct httpd_route *r, *found = NULL;
	int i, head;

	/* Every view ends on a separator (SP, '?', ':', CR or a blank), so the
	 * head can be cut into C strings in place; the body is read behind
	 * it, so they stay valid until the answer. */
	terminate(hr->method, b->in, s->in_cap);
	terminate(hr->path, b->in, s->in_cap);
	terminate(hr->query, b->in, s->in_cap);
	for (i = 0; i < hr->nfields; i++) {
		terminate(hr->fields[i].name, b->in, s->in_cap);
		terminate(hr->fields[i].value, b->in, s->in_cap);
	}
	q->method = hr->method.p;
	q->path = hr->path.p;
	q->query = hr->has_query ? hr->query.p : "";
	q->body = "";
	q->body_len = 0;
	q->peer = c->peer;
	q->head = hr;
	q->ctx = NULL;
	q->owner = 0;
	head = strcmp(q->method, "HEAD") == 0;
	w->head_only = head;

	for (i = 0; i < s->cfg.nroutes && found == NULL; i++) {
		r = &s->cfg.routes[i];
		if (path_matches(r, q->path) &&
		    (strcmp(r->method, q->method) == 0 || strcmp(r->method, "*") == 0 ||
		     (head && strcmp(r->method, "GET") == 0)))
			found = r;
	}
	c->route = found;
	if (c->reserve) {
		/* A reserve slot answers a liveness probe, nothing else, and
		 * once: it is no extra capacity for a client over its limit. */
		c->close_after = 1;
		if (found == NULL || !(found->flags & HTTPD_PUBLIC)) {
			char why[160];

			httpd__busy_reason(s, c->reserve, c->peer, why, sizeof(why));
			httpd_resp_header(w, "Retry-After", "1");
			httpd_respond_errf(w, "request.busy", "%s", why);
			goto refused;
		}
	}
	if (s->cfg.gate == NULL || (found != NULL && (found->flags & HTTPD_PUBLIC)))
		return 0;
	if (s->cfg.gate(q, found, w, s->cfg.gate_arg) != 0) {
		if (!w->done)
			httpd_respond_errf(w, "internal", "the request gate refused without an answer");
		goto refused;
	}
	/* From here its stalls count against its own address's admitted
	 * requests only (httpd__stalled): a new one starts that count. */
	c->admitted = 1;
	c->partial = 0;
	if (q->owner != 0 && owner_full(s, q->owner)) {
		httpd_resp_header(w, "Retry-After", "1");
		httpd_respond_errf(w, "request.rate_limited",
		                   "the principal of this token holds %d requests in progress, the most one "
		                   "may hold (a quarter of the %d connection slots); finish one first",
		                   (s->cfg.max_conns + HTTPD_OWNER_SHARE - 1) / HTTPD_OWNER_SHARE,
		                   s->cfg.max_conns);
		goto refused;
	}
	c->owner = q->owner;
	return 0;
refused:
	c->close_after = 1;
	c->linger = 1;
	resume(s, c);
	return 1;
}

/* The head was admitted and the body is complete: run the route. */
static void
dispatch(struct httpd *s, struct conn *c)
{
	struct httpd_req *q = &c->b->req;
	struct httpd_resp *w = &c->b->resp;
	const struct httpd_route *found = c->route;
	char allow[128];

	c->partial = 0;
	q->body = c->body.p != NULL ? (const char *)c->body.p : "";
	q->body_len = c->body.len;
	if (found == NULL) {
		allowed_methods(s, q->path, allow, sizeof(allow));
		if (allow[0] != '\0') {
			httpd_resp_header(w, "Allow", allow);
			httpd_respond_errf(w, "request.method", "%s is not allowed for %.200s (allowed: %s)",
			                   q->method, q->path, allow);
		} else {
			httpd_respond_errf(w, "not_found", "no such resource: %.200s", q->path);
		}
		resume(s, c);
		return;
	}
	if (found->flags & HTTPD_INLINE) {
		c->state = C_BUSY;
		c->deadline = INT64_MAX;
		w->holds = 1;
		found->fn(q, w, found->arg);
		if (w->deferred) {
			httpd__release(w);
			return;
		}
		httpd__finish_handler(c);
		resume(s, c);
		return;
	}
	c->state = C_BUSY;
	c->deadline = INT64_MAX;
	pthread_mutex_lock(&s->mu);
	httpd__q_push(&s->work, c);
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* Returns 1 when the state changed, 0 when more input is needed. */
static int
process_head(struct httpd *s, struct conn *c)
{
	struct cbuf *b = c->b;
	int rc;

	if (b == NULL || b->len == 0)
		return 0;
	if (memchr(b->in + b->scanned, '\n', b->len - b->scanned) == NULL &&
	    b->len - b->parsed_at < HTTPD_REPARSE_STEP && b->len < s->cfg.max_head) {
		b->scanned = b->len;
		return 0;
	}
	b->scanned = b->parsed_at = b->len;
	rc = http_req_parse_max(&b->hr, b->in, b->len, s->cfg.max_head);
	if (rc == 0)
		return 0;
	if (rc < 0) {
		answer_error(s, c, b->hr.status, b->hr.why);
		return 1;
	}
	b->head_len = b->pos = (size_t)rc;
	if (admit(s, c) != 0)
		return 1;
	c->body = (struct buf)BUF_INIT(s->cfg.max_body);
	if (b->hr.chunked) {
		http_chunked_init(&c->ck, s->cfg.max_body, 0);
	} else if (b->hr.content_length > 0) {
		if ((uint64_t)b->hr.content_length > s->cfg.max_body) {
			answer_too_large(s, c, b->hr.content_length);
			return 1;
		}
		c->body_left = (uint64_t)b->hr.content_length;
	} else {
		dispatch(s, c);
		return 1;
	}
	c->state = C_BODY;
	httpd__set_deadline(s, c, s->cfg.body_timeout_ms);
	if (b->hr.expect_continue && b->hr.minor == 1 && b->len == b->pos)
		(void)!send(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25, MSG_NOSIGNAL | MSG_DONTWAIT);
	return 1;
}

/* Move the body bytes in the input into c->body. Returns 1 when the body
 * is complete, 0 when more is needed, -1 when the connection was answered
 * or closed. */
static int
take_body(struct httpd *s, struct conn *c)
{
	struct cbuf *b = c->b;
	const unsigned char *d = (const unsigned char *)b->in + b->pos;
	size_t avail = b->len - b->pos, dl = avail;
	long k;

	if (!b->hr.chunked) {
		if (dl > c->body_left)
			dl = (size_t)c->body_left;
		c->body_left -= dl;
		b->pos += dl;
	} else {
		k = http_chunked_step(&c->ck, d, avail, &d, &dl);
		if (k < 0) {
			if (c->ck.status == 413)
				answer_too_large(s, c, -1);
			else
				answer_error(s, c, c->ck.status, c->ck.why);
			return -1;
		}
		b->pos += (size_t)k;
	}
	if (buf_put(&c->body, d, dl) != 0) {
		/* the caps were checked above: only memory ran out */
		httpd__conn_close(s, c);
		return -1;
	}
	return b->hr.chunked ? c->ck.done : c->body_left == 0;
}

static int
process_body(struct httpd *s, struct conn *c)
{
	struct cbuf *b = c->b;
	int done = 0;

	if (b->len == b->pos)
		return 0;
	while (b->len > b->pos && !done)
		if ((done = take_body(s, c)) < 0)
			return 1;
	/* Drop consumed body bytes; keep the head for the handler. */
	memmove(b->in + b->head_len, b->in + b->pos, b->len - b->pos);
	b->len -= b->pos - b->head_len;
	b->pos = b->head_len;
	if (!done)
		return 0;
	/* an empty body still reads as "" with its NUL */
	if (buf_put(&c->body, "", 0) != 0) {
		httpd__conn_close(s, c);
		return 1;
	}
	dispatch(s, c);
	return 1;
}

/* Returns 1 when bytes arrived, 0 when none are waiting, -1 when closed. */
static int
read_more(struct httpd *s, struct conn *c)
{
	struct cbuf *b = httpd__get_buf(c);
	ssize_t k;

	if (b == NULL) {
		httpd__conn_close(s, c);
		return -1;
	}
	if (b->len == s->in_cap)
		return 0;
	for (;;) {
		k = recv(c->fd, b->in + b->len, s->in_cap - b->len, 0);
		if (k > 0)
			break;
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (b->len == 0 && c->state == C_HEAD) {
				/* nothing pending: keep idle connections small */
				httpd__put_buf(c);
			}
			return 0;
		}
		if (b->len > 0)
			httpd__log(s, "%s closed the connection in the middle of a request", c->peer);
		httpd__conn_close(s, c);
		return -1;
	}
	if (c->idle) {
		c->idle = 0;
		httpd__set_deadline(s, c, s->cfg.header_timeout_ms);
	}
	if (c->t_start == 0)
		c->t_start = clock_us();
	c->heard = clock_ms();
	b->len += (size_t)k;
	return 1;
}

void
httpd__drive(struct httpd *s, struct conn *c)
{
	int budget = HTTPD_BUDGET, r;

	for (;;) {
		switch (c->state) {
		case C_HEAD:
		case C_BODY:
			r = c->state == C_HEAD ? process_head(s, c) : process_body(s, c);
			if (r > 0)
				continue;
			if ((r = read_more(s, c)) > 0)
				continue;
			if (r == 0 && (c->state == C_BODY || (c->b != NULL && c->b->len > 0)))
				httpd__stalled(s, c);
			return;
		case C_WRITE:
			if (write_out(s, c) <= 0)
				return;
			if (--budget == 0) {
				make_ready(s, c);
				return;
			}
			continue;
		case C_LINGER:
			do_linger(s, c);
			return;
		default:
			return;
		}
	}
}

void
httpd__on_timeout(struct httpd *s, struct conn *c)
{
	const char *part = c->state == C_HEAD ? "head" : "body";
	char msg[96];

	switch (c->state) {
	case C_HEAD:
	case C_BODY:
		if (c->state == C_HEAD && (c->b == NULL || c->b->len == 0)) {
			/* an idle keep-alive connection: nothing to answer */
			httpd__conn_close(s, c);
			return;
		}
		httpd__log(s, "%s: request %s not received in time", c->peer, part);
		snprintf(msg, sizeof(msg), "the request %s was not received within %d ms", part,
		         c->state == C_HEAD ? s->cfg.header_timeout_ms : s->cfg.body_timeout_ms);
		answer_error(s, c, 408, msg);
		httpd__drive(s, c);
		return;
	case C_WRITE:
		httpd__log(s, "%s: client did not read its response in time", c->peer);
		httpd__conn_close(s, c);
		return;
	case C_LINGER:
		httpd__conn_close(s, c);
		return;
	}
}

void
httpd__sweep(struct httpd *s)
{
	int64_t now = clock_ms(), next = INT64_MAX;
	int i, n = s->hiwater;

	s->next_wake = INT64_MAX;
	for (i = 0; i < n; i++) {
		struct conn *c = &s->conns[i];

		if (c->state == C_FREE || c->state == C_BUSY)
			continue;
		if (c->deadline <= now)
			httpd__on_timeout(s, c);
		if (c->state != C_FREE && c->state != C_BUSY && c->deadline < next)
			next = c->deadline;
	}
	if (next < s->next_wake)
		s->next_wake = next;
}

/* ---- workers --------------------------------------------------------------- */

void *
httpd__worker(void *arg)
{
	struct httpd *s = arg;
	struct conn *c;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (s->work.n == 0 && !s->stop_workers)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->work.n == 0)
			break;
		c = httpd__q_pop(&s->work);
		s->busy++;
		pthread_mutex_unlock(&s->mu);

		c->b->resp.holds = 1;
		c->route->fn(&c->b->req, &c->b->resp, c->route->arg);
		/* Only this thread sets deferred, so reading it is safe; after
		 * release, c may already be answered and reused. */
		if (!c->b->resp.deferred)
			httpd__finish_handler(c);
		httpd__release(&c->b->resp);

		pthread_mutex_lock(&s->mu);
		s->busy--;
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

void
httpd__take_done(struct httpd *s)
{
	uint64_t v;
	struct conn *c;

	/* the queue, not the counter, says what is done */
	(void)!read(s->evfd, &v, sizeof(v));
	pthread_mutex_lock(&s->mu);
	while (s->done.n > 0) {
		c = httpd__q_pop(&s->done);
		pthread_mutex_unlock(&s->mu);
		resume(s, c);
		httpd__drive(s, c);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
}
