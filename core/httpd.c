#include "httpd.h"
#include "buf.h"
#include "clock.h"
#include "net.h"
#include "json.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Room after a maximal head (config max_head), so a body or the next
 * pipelined request can still be read while the head is kept for the
 * handler. */
#define HTTPD_READ_EXTRA 4096
/* A head that has not ended is re-parsed when a line ends or after this
 * many new bytes, so a client sending one byte per packet costs O(lines)
 * parses, not O(bytes). */
#define HTTPD_REPARSE_STEP 1024
/* After an error answer: read and drop what the client still sends for at
 * most this long or this many bytes, then close (closing with unread data
 * would reset the connection and the client could lose the answer). */
#define HTTPD_LINGER_MS 2000
#define HTTPD_LINGER_BYTES (256 * 1024)
/* Requests served for one connection before yielding to others: a client
 * pipelining fast must not starve the rest. */
#define HTTPD_BUDGET 16
/* Idle request buffers kept for reuse (~21 KiB each). */
#define HTTPD_BUF_CACHE 8
/* Connections accepted per wake-up before serving the ready ones. */
#define HTTPD_ACCEPT_BATCH 64
/* File descriptors beyond max_conns: listener, epoll, eventfd, the reserve,
 * stdio, and what handlers open (pipes of child processes). */
#define HTTPD_FD_SLACK 64
/* Why a connection was let in past the limits (struct conn reserve). */
enum { WHY_NONE, WHY_FULL, WHY_PEER };

enum cstate {
	C_FREE,
	C_HEAD,   /* reading a request head (or waiting for one) */
	C_BODY,   /* reading a body */
	C_BUSY,   /* a worker owns the connection */
	C_WRITE,  /* writing a response */
	C_LINGER, /* answer sent, half-closed, dropping input until the client closes */
};

struct httpd_resp {
	struct conn *c;
	int done; /* a response was produced (or streaming began) */
	int streaming;
	int raw; /* streaming to HTTP/1.0: no chunk framing, close at end */
	int ended;
	int failed;    /* stream write failed: close */
	int head_only; /* HEAD: headers only */
	int deferred;  /* httpd_defer: httpd_complete hands it back */
	int holds;     /* handler + deferred holder; the last one hands it back */
	int status;
	size_t bytes; /* body bytes, for the log */
	size_t hlen;
	char hdrs[HTTPD_RESP_HEADERS_MAX];
};

/* Per-connection buffers, allocated on the first byte of a request. */
struct cbuf {
	struct http_req hr;
	struct httpd_req req;
	struct httpd_resp resp;
	size_t len;       /* bytes in in[] */
	size_t pos;       /* first byte not yet consumed */
	size_t parsed_at; /* len when the head was last parsed */
	size_t scanned;   /* in[0..scanned) known to hold no new line end */
	size_t head_len;  /* 0 until the head is complete */
	char in[];        /* max_head + HTTPD_READ_EXTRA bytes (httpd in_cap) */
};

struct conn {
	struct httpd *srv;
	int fd;
	int state;
	int idle;        /* waiting for the first byte of a request */
	int reserve;     /* WHY_*: in a reserve slot (public routes, one answer) */
	int64_t since;   /* monotonic ms since it waits for a request's first byte */
	unsigned char addr[16]; /* peer address (IPv4 v4-mapped), for the per-peer count */
	int close_after; /* close once the current answer is written */
	int linger;      /* …after reading what the client still sends */
	int budget;
	int64_t deadline; /* monotonic ms; INT64_MAX = none */
	int64_t t_start;  /* first byte of the request, for the log */
	struct cbuf *b;
	struct buf body; /* max: the server's max_body */
	uint64_t body_left;
	struct http_chunked ck;
	const struct httpd_route *route;
	char *out;
	size_t out_len, out_off;
	int status; /* logged status (error answers) */
	size_t linger_bytes;
	struct conn *next_ready;
	int in_ready;
	char peer[64];
};

struct queue {
	struct conn **ring;
	int cap, head, n;
};

struct httpd {
	struct httpd_config cfg;
	int lfd, epfd, evfd, reserve_fd;
	int port;
	size_t in_cap; /* bytes of a cbuf's in[] */
	struct conn *conns;
	int *free_slots;
	int nfree;
	int hiwater; /* slots [0, hiwater) have been used */
	int active;
	int64_t next_wake;
	struct conn *ready; /* connections with work left after their budget */
	pthread_mutex_t mu; /* guards work, done, stop_workers, busy */
	pthread_cond_t cv;
	struct queue work, done;
	int stop_workers, busy;
	pthread_t *threads;
	int nthreads;
	/* Atomics (lock-free, so also safe from a signal handler): stop_req
	 * is set by httpd_stop from anywhere, stopping is read by workers. */
	int stop_req;
	int stopping;
	int64_t drain_end;
	int stuck; /* drain timed out with workers still busy */
	struct cbuf *cache[HTTPD_BUF_CACHE];
	int ncache;
	int nreserve; /* connections in reserve slots */
	/* Connections per peer address: open addressing, linear probing,
	 * backward-shift deletion; twice the slots, so probes stay short. */
	struct peer {
		unsigned char addr[16];
		int n; /* 0 = empty entry */
	} *peers;
	size_t peer_mask;
	/* Bytes of whole answers built and not yet sent (atomic): what clients
	 * that do not read hold, bounded by HTTPD_HELD_MAX through
	 * httpd_resp_room. */
	size_t held;
	/* A 401 flood must not grow the access log a line per request:
	 * refused lines identical in address, method and path within one
	 * second are counted here (event thread only) and written as one
	 * "repeated N" line with the next line, when the second is over (the
	 * loop wakes for it) or when the server stops. */
	char rep_key[300];
	time_t rep_sec;
	unsigned rep_n;
};

static int
is_stopping(struct httpd *s)
{
	return __atomic_load_n(&s->stopping, __ATOMIC_RELAXED);
}

static const char *
reason(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 202:
		return "Accepted";
	case 204:
		return "No Content";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 409:
		return "Conflict";
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 424:
		return "Failed Dependency";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	case 505:
		return "HTTP Version Not Supported";
	case 507:
		return "Insufficient Storage";
	default:
		return status < 300 ? "OK" : status < 500 ? "Client Error" : "Server Error";
	}
}


/* ---- the error envelope (strings escaped by core/json.h) ---------------- */

int
httpd_error_body(char *buf, size_t cap, const char *code, const char *msg, const char *details_json)
{
	const struct err_info *in = err_info(code);
	/* Every byte may escape to six (\u00XX): on the heap, not on a
	 * worker's 128 KiB stack. */
	size_t mcap = ERR_MSG_MAX * 6 + 8;
	char *m, r[512];
	int n;

	if (code == NULL)
		code = "internal";
	if (msg == NULL || *msg == '\0')
		msg = in->sentence;
	if (details_json == NULL || *details_json == '\0')
		details_json = "{}";
	if (in->remedy == NULL)
		strcpy(r, "null");
	else if (json_escape(r, sizeof(r), in->remedy) < 0)
		return -1;
	if ((m = malloc(mcap)) == NULL)
		return -1;
	if (json_escape(m, mcap, msg) < 0) {
		free(m);
		return -1;
	}
	n = snprintf(buf, cap, "{\"error\":{\"code\":\"%s\",\"message\":%s,\"details\":%s,\"remedy\":%s}}",
	             code, m, details_json, r);
	free(m);
	return n < 0 || (size_t)n >= cap ? -1 : n;
}

/* ---- logging ---------------------------------------------------------- */

static void vlog(struct httpd *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
vlog(struct httpd *s, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	if (!s->cfg.verbose)
		return;
	n = snprintf(line, sizeof(line), "agent-sandbox-server: serve: ");
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(2, line, n) < 0)
		return;
}

/* ---- queues (guarded by s->mu) ------------------------------------------ */

static void
q_push(struct queue *q, struct conn *c)
{
	q->ring[(q->head + q->n) % q->cap] = c;
	q->n++;
}

static struct conn *
q_pop(struct queue *q)
{
	struct conn *c = q->ring[q->head];

	q->head = (q->head + 1) % q->cap;
	q->n--;
	return c;
}

/* ---- connection lifetime ----------------------------------------------- */

static void
set_deadline(struct httpd *s, struct conn *c, int ms)
{
	c->deadline = ms < 0 ? INT64_MAX : clock_ms() + ms;
	if (c->deadline < s->next_wake)
		s->next_wake = c->deadline;
}

/* Free the answer buffer and give its bytes back to the server's budget. */
static void
out_drop(struct conn *c)
{
	if (c->out != NULL)
		__atomic_sub_fetch(&c->srv->held, c->out_len, __ATOMIC_RELAXED);
	free(c->out);
	c->out = NULL;
	c->out_len = c->out_off = 0;
}

static void
free_request(struct conn *c)
{
	buf_free(&c->body);
	c->body_left = 0;
	out_drop(c);
	c->route = NULL;
	c->status = 0;
}

static size_t
peer_hash(const struct httpd *s, const unsigned char *addr)
{
	uint32_t h = 2166136261u;
	int i;

	for (i = 0; i < 16; i++)
		h = (h ^ addr[i]) * 16777619u;
	return h & s->peer_mask;
}

/* The entry of addr, or the empty one where it would go. */
static struct peer *
peer_slot(struct httpd *s, const unsigned char *addr)
{
	size_t i = peer_hash(s, addr);

	while (s->peers[i].n != 0 && memcmp(s->peers[i].addr, addr, 16) != 0)
		i = (i + 1) & s->peer_mask;
	return &s->peers[i];
}

static void
peer_release(struct httpd *s, const unsigned char *addr)
{
	struct peer *p = peer_slot(s, addr);
	size_t i, j, h;

	if (p->n == 0 || --p->n > 0)
		return;
	/* Backward-shift deletion keeps every probe run unbroken. */
	i = j = (size_t)(p - s->peers);
	for (;;) {
		j = (j + 1) & s->peer_mask;
		if (s->peers[j].n == 0)
			break;
		h = peer_hash(s, s->peers[j].addr);
		if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
			continue;
		s->peers[i] = s->peers[j];
		i = j;
	}
	s->peers[i].n = 0;
}

static void put_buf(struct conn *c);
static void busy_reason(struct httpd *s, int why, const char *peer, char *buf, size_t cap);

static void
conn_close(struct httpd *s, struct conn *c)
{
	if (c->state == C_FREE)
		return;
	close(c->fd); /* also removes it from the epoll set */
	free_request(c);
	put_buf(c);
	c->fd = -1;
	c->state = C_FREE;
	s->free_slots[s->nfree++] = (int)(c - s->conns);
	s->active--;
	if (c->reserve)
		s->nreserve--;
	peer_release(s, c->addr);
}

/* Buffers come and go with every keep-alive request; a few are kept for
 * reuse (event thread only) so busy connections do not churn the allocator,
 * while the memory held after a burst stays bounded. */
static struct cbuf *
get_buf(struct conn *c)
{
	struct httpd *s = c->srv;

	if (c->b == NULL) {
		c->b = s->ncache > 0 ? s->cache[--s->ncache] : malloc(sizeof(*c->b) + s->in_cap);
		if (c->b == NULL)
			return NULL;
		c->b->len = c->b->pos = c->b->parsed_at = c->b->scanned = c->b->head_len = 0;
	}
	return c->b;
}

static void
put_buf(struct conn *c)
{
	struct httpd *s = c->srv;

	if (c->b != NULL && s->ncache < HTTPD_BUF_CACHE)
		s->cache[s->ncache++] = c->b;
	else
		free(c->b);
	c->b = NULL;
}

/* ---- building responses ------------------------------------------------- */

/* Formatted once a second per thread. */
static void
date_header(char *buf, size_t cap)
{
	static __thread time_t last;
	static __thread char text[40];
	struct tm tm;
	time_t t = time(NULL);

	if (t != last) {
		gmtime_r(&t, &tm);
		strftime(text, sizeof(text), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		last = t;
	}
	snprintf(buf, cap, "%s", text);
}

/* Status line and headers into buf; returns the length or -1. */
static int
format_head(struct httpd_resp *w, char *buf, size_t cap, int status, const char *ctype, const char *framing,
            int keep)
{
	struct conn *c = w->c;
	char date[40];
	int n;

	date_header(date, sizeof(date));
	n = snprintf(buf, cap, "HTTP/1.1 %d %s\r\nDate: %s\r\nContent-Type: %s\r\n%s%s%.*s\r\n", status,
	             reason(status), date, ctype, framing,
	             !keep                 ? "Connection: close\r\n"
	             : c->b->hr.minor == 0 ? "Connection: keep-alive\r\n"
	                                   : "",
	             (int)w->hlen, w->hdrs);
	return n < 0 || (size_t)n >= cap ? -1 : n;
}

static int
keep_alive(struct httpd_resp *w)
{
	struct conn *c = w->c;

	return !c->close_after && c->b->hr.keep_alive && !is_stopping(c->srv);
}

int
httpd_resp_header(struct httpd_resp *w, const char *name, const char *value)
{
	size_t nl = strlen(name), vl = strlen(value);

	if (w->done || strpbrk(name, "\r\n:") != NULL || strpbrk(value, "\r\n") != NULL || nl == 0)
		return -1;
	if (w->hlen + nl + vl + 4 > sizeof(w->hdrs))
		return -1;
	memcpy(w->hdrs + w->hlen, name, nl);
	memcpy(w->hdrs + w->hlen + nl, ": ", 2);
	memcpy(w->hdrs + w->hlen + nl + 2, value, vl);
	memcpy(w->hdrs + w->hlen + nl + 2 + vl, "\r\n", 2);
	w->hlen += nl + vl + 4;
	return 0;
}

int
httpd_respond(struct httpd_resp *w, int status, const char *content_type, const void *body, size_t len)
{
	struct conn *c = w->c;
	char head[HTTPD_RESP_HEADERS_MAX + 512], framing[48];
	int keep, n;
	size_t blen = w->head_only ? 0 : len;

	if (w->done)
		return -1;
	if (status >= 400 || is_stopping(c->srv))
		c->close_after = 1;
	keep = keep_alive(w);
	snprintf(framing, sizeof(framing), "Content-Length: %zu\r\n", len);
	n = format_head(w, head, sizeof(head), status, content_type, framing, keep);
	if (n < 0)
		return -1;
	c->out = malloc((size_t)n + blen);
	if (c->out == NULL)
		return -1;
	memcpy(c->out, head, n);
	if (blen)
		memcpy(c->out + n, body, blen);
	c->out_len = (size_t)n + blen;
	c->out_off = 0;
	__atomic_add_fetch(&c->srv->held, c->out_len, __ATOMIC_RELAXED);
	if (!keep)
		c->close_after = 1;
	w->done = 1;
	w->status = status;
	w->bytes = blen;
	return 0;
}

size_t
httpd_resp_room(const struct httpd_resp *w)
{
	size_t held = __atomic_load_n(&w->c->srv->held, __ATOMIC_RELAXED);

	return held < HTTPD_HELD_MAX ? HTTPD_HELD_MAX - held : 0;
}

int
httpd_respond_json(struct httpd_resp *w, int status, const char *json)
{
	return httpd_respond(w, status, "application/json", json, strlen(json));
}

int
httpd_respond_err(struct httpd_resp *w, const struct err *e)
{
	char body[HTTPD_ERROR_BODY_MAX];
	const char *code = e && e->code ? e->code : "internal";
	int n = httpd_error_body(body, sizeof(body), code, e ? e->msg : NULL, e ? e->details : NULL);

	if (n < 0)
		n = httpd_error_body(body, sizeof(body), code, NULL, NULL);
	if (n < 0)
		return -1;
	return httpd_respond(w, err_info(code)->status, "application/json", body, (size_t)n);
}

int
httpd_respond_errf(struct httpd_resp *w, const char *code, const char *fmt, ...)
{
	struct err e;
	va_list ap;

	va_start(ap, fmt);
	err_setv(&e, code, fmt, ap);
	va_end(ap);
	return httpd_respond_err(w, &e);
}

int
httpd_resp_closing(const struct httpd_resp *w)
{
	return is_stopping(w->c->srv) || w->failed;
}

static void finish_handler(struct conn *c);

/* Drop one hold; the last hands the connection back to the event thread. */
static void
release(struct httpd_resp *w)
{
	struct conn *c = w->c;
	struct httpd *s = c->srv;
	const uint64_t one = 1;

	if (__atomic_sub_fetch(&w->holds, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	pthread_mutex_lock(&s->mu);
	q_push(&s->done, c);
	pthread_mutex_unlock(&s->mu);
	/* a failed write means the counter is full: the event thread is
	 * awake anyway */
	(void)!write(s->evfd, &one, sizeof(one));
}

void
httpd_defer(struct httpd_resp *w)
{
	if (w->deferred)
		return;
	__atomic_add_fetch(&w->holds, 1, __ATOMIC_ACQ_REL);
	w->deferred = 1;
}

void
httpd_complete(struct httpd_resp *w)
{
	finish_handler(w->c);
	release(w);
}

/* ---- streaming (worker thread; the event thread leaves a busy fd alone) -- */

static int
send_iov(struct httpd_resp *w, struct iovec *iov, int n)
{
	struct conn *c = w->c;
	struct msghdr mh;
	ssize_t k;

	if (w->failed)
		return -1;
	while (n > 0) {
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = n;
		k = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
		if (k < 0) {
			struct pollfd p = {c->fd, POLLOUT, 0};

			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				break;
			if (poll(&p, 1, c->srv->cfg.write_timeout_ms) <= 0 ||
			    (p.revents & (POLLERR | POLLHUP)))
				break;
			continue;
		}
		while (n > 0 && (size_t)k >= iov->iov_len) {
			k -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
	if (n > 0) {
		w->failed = 1;
		w->c->close_after = 1;
		return -1;
	}
	return 0;
}

int
httpd_stream_begin(struct httpd_resp *w, int status, const char *content_type)
{
	struct conn *c = w->c;
	char head[HTTPD_RESP_HEADERS_MAX + 512];
	struct iovec iov;
	int n, keep;

	if (w->done || (c->route && (c->route->flags & HTTPD_INLINE) && !w->deferred))
		return -1;
	w->raw = c->b->hr.minor == 0;
	if (w->raw || is_stopping(c->srv))
		c->close_after = 1;
	keep = keep_alive(w);
	n = format_head(w, head, sizeof(head), status, content_type,
	                w->raw ? "Cache-Control: no-store\r\n"
	                       : "Transfer-Encoding: chunked\r\nCache-Control: no-store\r\n",
	                keep);
	if (n < 0)
		return -1;
	if (!keep)
		c->close_after = 1;
	w->done = w->streaming = 1;
	w->status = status;
	iov.iov_base = head;
	iov.iov_len = (size_t)n;
	return send_iov(w, &iov, 1);
}

int
httpd_stream_write(struct httpd_resp *w, const void *data, size_t len)
{
	char size[24];
	struct iovec iov[3];

	if (!w->streaming || w->ended)
		return -1;
	if (len == 0 || w->head_only)
		return w->failed ? -1 : 0;
	w->bytes += len;
	if (w->raw) {
		iov[0].iov_base = (void *)data;
		iov[0].iov_len = len;
		return send_iov(w, iov, 1);
	}
	iov[0].iov_base = size;
	iov[0].iov_len = (size_t)snprintf(size, sizeof(size), "%zx\r\n", len);
	iov[1].iov_base = (void *)data;
	iov[1].iov_len = len;
	iov[2].iov_base = "\r\n";
	iov[2].iov_len = 2;
	return send_iov(w, iov, 3);
}

int
httpd_stream_end(struct httpd_resp *w)
{
	struct iovec iov;

	if (!w->streaming || w->ended)
		return -1;
	w->ended = 1;
	if (w->raw || w->head_only)
		return w->failed ? -1 : 0;
	iov.iov_base = "0\r\n\r\n";
	iov.iov_len = 5;
	return send_iov(w, &iov, 1);
}

/* ---- the request cycle (event thread) ----------------------------------- */


static int
log_stamp(char *buf, size_t cap, struct timespec *ts)
{
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, ts);
	gmtime_r(&ts->tv_sec, &tm);
	return snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
	    tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts->tv_nsec / 1000000);
}

/* Write the count of refused lines held back, if any. */
static void
log_flush_repeats(struct httpd *s)
{
	char line[512], stamp[96];
	struct timespec ts;
	int n;

	if (s->rep_n == 0)
		return;
	log_stamp(stamp, sizeof(stamp), &ts);
	n = snprintf(line, sizeof(line), "%s %s 401 repeated %u more times\n", stamp, s->rep_key, s->rep_n);
	s->rep_n = 0;
	if (n >= (int)sizeof(line)) {
		n = sizeof(line);
		line[n - 1] = '\n';
	}
	if (write(2, line, n) < 0)
		return;
}

/* 1 when this 401 repeats the last one written within its second (counted,
 * not written); else it becomes the one later repeats are compared with. */
static int
log_repeat(struct httpd *s, const struct conn *c, const struct http_view *m, const struct http_view *p,
    time_t sec)
{
	char key[sizeof(s->rep_key)];
	const char *colon = strrchr(c->peer, ':');
	int alen = colon != NULL ? (int)(colon - c->peer) : (int)strlen(c->peer);

	snprintf(key, sizeof(key), "%.*s %.*s %.*s", alen, c->peer, (int)(m->n > 32 ? 32 : m->n), m->p,
	    (int)(p->n > 200 ? 200 : p->n), p->p);
	if (sec == s->rep_sec && strcmp(key, s->rep_key) == 0) {
		s->rep_n++;
		return 1;
	}
	log_flush_repeats(s);
	memcpy(s->rep_key, key, sizeof(key));
	s->rep_sec = sec;
	return 0;
}

static void
log_request(struct httpd *s, struct conn *c, int status, size_t bytes)
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
	if (status == 401) {
		if (log_repeat(s, c, &m, &p, ts.tv_sec))
			return;
	} else {
		log_flush_repeats(s);
		s->rep_key[0] = '\0';
	}
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

	out_drop(c);
	c->close_after = 1;
	c->linger = 1;
	if (httpd_respond_errf(w, status_code(status), "%s", msg) != 0) {
		conn_close(s, c);
		return;
	}
	c->state = C_WRITE;
	set_deadline(s, c, s->cfg.write_timeout_ms);
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

	free_request(c);
	if (s->stopping || c->close_after) {
		conn_close(s, c);
		return;
	}
	memmove(b->in, b->in + b->pos, b->len - b->pos);
	b->len -= b->pos;
	b->pos = b->head_len = b->scanned = b->parsed_at = 0;
	c->state = C_HEAD;
	c->linger = 0;
	if (b->len == 0) {
		put_buf(c);
		c->idle = 1;
		c->t_start = 0;
		c->since = clock_ms();
		set_deadline(s, c, s->cfg.idle_timeout_ms);
	} else {
		c->idle = 0;
		c->t_start = clock_us();
		set_deadline(s, c, s->cfg.header_timeout_ms);
	}
}

static void
start_linger(struct httpd *s, struct conn *c)
{
	shutdown(c->fd, SHUT_WR);
	free_request(c);
	put_buf(c);
	c->state = C_LINGER;
	c->linger_bytes = 0;
	set_deadline(s, c, HTTPD_LINGER_MS);
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
		conn_close(s, c);
		return;
	}
}

/* Returns 1 when the response went out and the connection moved on, 0 when
 * the socket is full, -1 when the connection was closed. */
static int
write_out(struct httpd *s, struct conn *c)
{
	ssize_t k;

	while (c->out_off < c->out_len) {
		k = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (k > 0) {
			c->out_off += (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		conn_close(s, c);
		return -1;
	}
	log_request(s, c, c->b->resp.status, c->b->resp.bytes);
	if (c->close_after) {
		if (c->linger)
			start_linger(s, c);
		else
			conn_close(s, c);
		return -1;
	}
	request_done(s, c);
	return 1;
}

/* Auto-finish what a handler left open; on the thread that ran it. */
static void
finish_handler(struct conn *c)
{
	struct httpd_resp *w = &c->b->resp;

	if (w->streaming && !w->ended)
		httpd_stream_end(w);
	else if (!w->done && httpd_respond_errf(w, "internal", "the handler produced no response") != 0)
		c->close_after = 1;
}

/* A handler finished (event thread). */
static void
resume(struct httpd *s, struct conn *c)
{
	struct httpd_resp *w = &c->b->resp;

	if (w->streaming) {
		log_request(s, c, w->status, w->bytes);
		if (w->failed)
			conn_close(s, c);
		else
			request_done(s, c);
		return;
	}
	if (c->out == NULL) {
		conn_close(s, c);
		return;
	}
	c->state = C_WRITE;
	set_deadline(s, c, s->cfg.write_timeout_ms);
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

/* The head (and body) are complete: pick the route and run it. */
static void
dispatch(struct httpd *s, struct conn *c)
{
	struct cbuf *b = c->b;
	struct http_req *hr = &b->hr;
	struct httpd_req *q = &b->req;
	struct httpd_resp *w = resp_reset(c);
	const struct httpd_route *r, *found = NULL;
	char allow[128];
	size_t alen = 0;
	int i, head;

	/* Every view ends on a separator (SP, '?', ':', CR or a blank), so the
	 * head can be cut into C strings in place. */
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
	q->body = c->body.p != NULL ? (const char *)c->body.p : "";
	q->body_len = c->body.len;
	q->peer = c->peer;
	q->head = hr;
	head = strcmp(q->method, "HEAD") == 0;
	w->head_only = head;

	allow[0] = '\0';
	for (i = 0; i < s->cfg.nroutes; i++) {
		r = &s->cfg.routes[i];
		if (!path_matches(r, q->path))
			continue;
		if (strcmp(r->method, q->method) == 0 || strcmp(r->method, "*") == 0 ||
		    (head && strcmp(r->method, "GET") == 0)) {
			found = r;
			break;
		}
		if (strstr(allow, r->method) == NULL && alen + strlen(r->method) + 8 < sizeof(allow))
			alen +=
			    (size_t)snprintf(allow + alen, sizeof(allow) - alen, "%s%s%s", alen ? ", " : "",
			                     r->method, strcmp(r->method, "GET") == 0 ? ", HEAD" : "");
	}
	c->route = found;
	q->ctx = NULL;
	if (c->reserve) {
		/* A reserve slot answers a liveness probe, nothing else, and
		 * once: it is no extra capacity for a client over its limit. */
		c->close_after = 1;
		if (found == NULL || !(found->flags & HTTPD_PUBLIC)) {
			char why[160];

			busy_reason(s, c->reserve, c->peer, why, sizeof(why));
			httpd_resp_header(w, "Retry-After", "1");
			httpd_respond_errf(w, "request.busy", "%s", why);
			resume(s, c);
			return;
		}
	}
	if (s->cfg.gate != NULL && (found == NULL || !(found->flags & HTTPD_PUBLIC)) &&
	    s->cfg.gate(q, found, w, s->cfg.gate_arg) != 0) {
		if (!w->done)
			httpd_respond_errf(w, "internal", "the request gate refused without an answer");
		resume(s, c);
		return;
	}
	if (found == NULL) {
		if (alen) {
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
			release(w);
			return;
		}
		finish_handler(c);
		resume(s, c);
		return;
	}
	c->state = C_BUSY;
	c->deadline = INT64_MAX;
	pthread_mutex_lock(&s->mu);
	q_push(&s->work, c);
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
	set_deadline(s, c, s->cfg.body_timeout_ms);
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
		conn_close(s, c);
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
		conn_close(s, c);
		return 1;
	}
	dispatch(s, c);
	return 1;
}

/* Returns 1 when bytes arrived, 0 when none are waiting, -1 when closed. */
static int
read_more(struct httpd *s, struct conn *c)
{
	struct cbuf *b = get_buf(c);
	ssize_t k;

	if (b == NULL) {
		conn_close(s, c);
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
				put_buf(c);
			}
			return 0;
		}
		if (b->len > 0)
			vlog(s, "%s closed the connection in the middle of a request", c->peer);
		conn_close(s, c);
		return -1;
	}
	if (c->idle) {
		c->idle = 0;
		set_deadline(s, c, s->cfg.header_timeout_ms);
	}
	if (c->t_start == 0)
		c->t_start = clock_us();
	b->len += (size_t)k;
	return 1;
}

static void
drive(struct httpd *s, struct conn *c)
{
	int budget = HTTPD_BUDGET, r;

	for (;;) {
		switch (c->state) {
		case C_HEAD:
		case C_BODY:
			r = c->state == C_HEAD ? process_head(s, c) : process_body(s, c);
			if (r > 0)
				continue;
			if (read_more(s, c) > 0)
				continue;
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

static void
on_timeout(struct httpd *s, struct conn *c)
{
	char msg[96];

	switch (c->state) {
	case C_HEAD:
		if (c->b == NULL || c->b->len == 0) {
			conn_close(s, c);
			return;
		}
		vlog(s, "%s: request head not received in time", c->peer);
		snprintf(msg, sizeof(msg), "the request head was not received within %d ms",
		         s->cfg.header_timeout_ms);
		answer_error(s, c, 408, msg);
		drive(s, c);
		return;
	case C_BODY:
		vlog(s, "%s: request body not received in time", c->peer);
		snprintf(msg, sizeof(msg), "the request body was not received within %d ms",
		         s->cfg.body_timeout_ms);
		answer_error(s, c, 408, msg);
		drive(s, c);
		return;
	case C_WRITE:
		vlog(s, "%s: client did not read its response in time", c->peer);
		conn_close(s, c);
		return;
	case C_LINGER:
		conn_close(s, c);
		return;
	}
}

static void
sweep(struct httpd *s)
{
	int64_t now = clock_ms(), next = INT64_MAX;
	int i, n = s->hiwater;

	s->next_wake = INT64_MAX;
	for (i = 0; i < n; i++) {
		struct conn *c = &s->conns[i];

		if (c->state == C_FREE || c->state == C_BUSY)
			continue;
		if (c->deadline <= now)
			on_timeout(s, c);
		if (c->state != C_FREE && c->state != C_BUSY && c->deadline < next)
			next = c->deadline;
	}
	if (next < s->next_wake)
		s->next_wake = next;
}

/* ---- accepting ------------------------------------------------------------ */

static void
format_peer(const struct sockaddr_storage *sa, char *buf, size_t cap)
{
	char ip[INET6_ADDRSTRLEN];

	if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		snprintf(buf, cap, "[%s]:%d", ip, ntohs(a->sin6_port));
	} else if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		snprintf(buf, cap, "%s:%d", ip, ntohs(a->sin_port));
	} else {
		snprintf(buf, cap, "-");
	}
}

/* Why a client is over a limit, for its 503 and the log. */
static void
busy_reason(struct httpd *s, int why, const char *peer, char *buf, size_t cap)
{
	char ip[64];
	const char *colon = strrchr(peer, ':');

	snprintf(ip, sizeof(ip), "%.*s", colon ? (int)(colon - peer) : (int)strlen(peer), peer);
	if (why == WHY_PEER)
		snprintf(buf, cap, "%s already holds %d connection%s, the limit per client address", ip,
		         s->cfg.max_conns_per_peer, s->cfg.max_conns_per_peer == 1 ? "" : "s");
	else if (why == WHY_FULL)
		snprintf(buf, cap, "all %d connection slots are in use", s->cfg.max_conns);
	else
		snprintf(buf, cap, "the server is stopping");
}

/* Over a limit (or draining): answer 503 without blocking and close. */
static void
reject_busy(struct httpd *s, int fd, const struct sockaddr_storage *sa, int why)
{
	struct conn tmp;
	char drop[1024], msg[160], body[512], resp[768];
	int n;

	memset(&tmp, 0, sizeof(tmp));
	format_peer(sa, tmp.peer, sizeof(tmp.peer));
	tmp.t_start = clock_us();
	busy_reason(s, why, tmp.peer, msg, sizeof(msg));
	n = httpd_error_body(body, sizeof(body), "request.busy", msg, NULL);
	n = snprintf(resp, sizeof(resp),
	             "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
	             "Content-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s",
	             n < 0 ? 0 : n, n < 0 ? "" : body);
	/* What already arrived is read first: closing with unread data would
	 * reset the connection before the client reads the 503. */
	(void)!recv(fd, drop, sizeof(drop), MSG_DONTWAIT);
	if (n > 0 && (size_t)n < sizeof(resp))
		(void)!send(fd, resp, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
	shutdown(fd, SHUT_WR);
	close(fd);
	vlog(s, "%s: refused: %s", tmp.peer, msg);
	log_request(s, &tmp, 503, 0);
}

/* The peer's address as 16 bytes (IPv4 v4-mapped); 1 when it is loopback. */
static int
peer_addr(const struct sockaddr_storage *sa, unsigned char addr[16])
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	memset(addr, 0, 16);
	if (sa->ss_family == AF_INET) {
		memcpy(addr, mapped, 12);
		memcpy(addr + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->ss_family == AF_INET6) {
		memcpy(addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
	if (memcmp(addr, mapped, 12) == 0)
		return addr[12] == 127;
	return memcmp(addr, in6addr_loopback.s6_addr, 16) == 0;
}

/* The connection that has waited longest for a request's first byte (an
 * idle keep-alive one, or one that never sent a byte), of one peer address
 * or of any; NULL when every connection is in the middle of something. */
static struct conn *
oldest_waiting(struct httpd *s, const unsigned char *addr)
{
	struct conn *best = NULL;
	int i;

	for (i = 0; i < s->hiwater; i++) {
		struct conn *c = &s->conns[i];

		if (c->state != C_HEAD || c->reserve || c->in_ready || (c->b != NULL && c->b->len > 0))
			continue;
		if (addr != NULL && memcmp(c->addr, addr, 16) != 0)
			continue;
		if (best == NULL || c->since < best->since)
			best = c;
	}
	return best;
}

/* Make room for a new connection of peer addr by closing one that waits
 * for a request, or say which limit holds (WHY_*). Closing an idle
 * keep-alive connection is what any HTTP/1.1 server may do at any time
 * (RFC 9112 9.8); here it keeps a flood of idle connections from locking
 * out every new client until the idle timeout. */
static int
make_room(struct httpd *s, const unsigned char *addr, const char *peer)
{
	struct conn *v;

	/* At max_conns the table-full rule below says the same, better. */
	if (s->cfg.max_conns_per_peer < s->cfg.max_conns && peer_slot(s, addr)->n >= s->cfg.max_conns_per_peer) {
		if ((v = oldest_waiting(s, addr)) == NULL)
			return WHY_PEER;
		vlog(s, "%s: closed its longest-waiting connection %s for a new one (per-address limit %d)", peer,
		     v->peer, s->cfg.max_conns_per_peer);
		conn_close(s, v);
	}
	if (s->active - s->nreserve >= s->cfg.max_conns) {
		if ((v = oldest_waiting(s, NULL)) == NULL)
			return WHY_FULL;
		vlog(s, "%s: closed the longest-waiting connection %s for a new one (all %d slots in use)", peer,
		     v->peer, s->cfg.max_conns);
		conn_close(s, v);
	}
	return WHY_NONE;
}

/* The reserve is full: close its oldest connection still reading a head.
 * A health check sends its whole request at once and is answered inline, so
 * a loopback client holding reserve slots with half heads only delays the
 * next probe by a moment instead of locking it out. */
static void
reserve_room(struct httpd *s, const char *peer)
{
	struct conn *v = NULL;
	int i;

	for (i = 0; i < s->hiwater; i++) {
		struct conn *c = &s->conns[i];

		if (c->reserve && c->state == C_HEAD && !c->in_ready && (v == NULL || c->since < v->since))
			v = c;
	}
	if (v == NULL)
		return;
	vlog(s, "%s: closed reserve connection %s, which sent no whole request, for a new one", peer, v->peer);
	conn_close(s, v);
}

static void
accept_all(struct httpd *s)
{
	struct sockaddr_storage sa;
	struct epoll_event ev;
	socklen_t sl;
	struct conn *c;
	struct peer *p;
	unsigned char addr[16];
	char peer[64];
	int i, fd, one = 1, loopback, why;

	for (i = 0; i < HTTPD_ACCEPT_BATCH && s->lfd >= 0; i++) {
		sl = sizeof(sa);
		fd = accept4(s->lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if ((errno == EMFILE || errno == ENFILE) && s->reserve_fd >= 0) {
				/* Out of descriptors: free the reserve to accept
				 * and refuse one, so the backlog does not spin us. */
				close(s->reserve_fd);
				sl = sizeof(sa);
				fd = accept4(s->lfd, (struct sockaddr *)&sa, &sl,
				             SOCK_NONBLOCK | SOCK_CLOEXEC);
				if (fd >= 0)
					reject_busy(s, fd, &sa, WHY_FULL);
				s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			}
			return;
		}
		if (s->stopping) {
			reject_busy(s, fd, &sa, WHY_NONE);
			continue;
		}
		loopback = peer_addr(&sa, addr);
		format_peer(&sa, peer, sizeof(peer));
		why = make_room(s, addr, peer);
		if (why != WHY_NONE && loopback && s->nreserve >= s->cfg.reserve)
			reserve_room(s, peer);
		if (why != WHY_NONE && (!loopback || s->nreserve >= s->cfg.reserve)) {
			reject_busy(s, fd, &sa, why);
			continue;
		}
		c = &s->conns[s->free_slots[--s->nfree]];
		memset(c, 0, sizeof(*c));
		c->srv = s;
		c->fd = fd;
		c->state = C_HEAD;
		c->since = clock_ms();
		c->reserve = why;
		if (why != WHY_NONE) {
			s->nreserve++;
			vlog(s, "%s: in a reserve slot (public routes only): %s", peer,
			     why == WHY_PEER ? "at the per-address limit" : "all slots in use");
		}
		memcpy(c->addr, addr, 16);
		p = peer_slot(s, addr);
		if (p->n == 0)
			memcpy(p->addr, addr, 16);
		p->n++;
		memcpy(c->peer, peer, sizeof(c->peer));
		if (c - s->conns >= s->hiwater)
			s->hiwater = (int)(c - s->conns) + 1;
		s->active++;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		/* Edge-triggered, registered once: every state change tries its
		 * read or write at once, so no edge is ever needed twice. */
		ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
		ev.data.ptr = c;
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
			conn_close(s, c);
			continue;
		}
		set_deadline(s, c, s->cfg.header_timeout_ms);
	}
}

/* ---- workers --------------------------------------------------------------- */

static void *
worker(void *arg)
{
	struct httpd *s = arg;
	struct conn *c;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (s->work.n == 0 && !s->stop_workers)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->work.n == 0)
			break;
		c = q_pop(&s->work);
		s->busy++;
		pthread_mutex_unlock(&s->mu);

		c->b->resp.holds = 1;
		c->route->fn(&c->b->req, &c->b->resp, c->route->arg);
		/* Only this thread sets deferred, so reading it is safe; after
		 * release, c may already be answered and reused. */
		if (!c->b->resp.deferred)
			finish_handler(c);
		release(&c->b->resp);

		pthread_mutex_lock(&s->mu);
		s->busy--;
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static void
take_done(struct httpd *s)
{
	uint64_t v;
	struct conn *c;

	/* the queue, not the counter, says what is done */
	(void)!read(s->evfd, &v, sizeof(v));
	pthread_mutex_lock(&s->mu);
	while (s->done.n > 0) {
		c = q_pop(&s->done);
		pthread_mutex_unlock(&s->mu);
		resume(s, c);
		drive(s, c);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
}

/* ---- the server ------------------------------------------------------------ */

void
httpd_config_defaults(struct httpd_config *c)
{
	memset(c, 0, sizeof(*c));
	c->host = "0.0.0.0";
	c->port = 9000;
	c->max_conns = HTTPD_MAX_CONNS_DEFAULT;
	c->reserve = HTTPD_RESERVE_DEFAULT;
	c->workers = HTTPD_WORKERS_DEFAULT;
	c->max_body = HTTPD_MAX_BODY_DEFAULT;
	c->max_head = HTTP_REQ_HEAD_MAX;
	c->header_timeout_ms = HTTPD_HEADER_TIMEOUT_MS;
	c->idle_timeout_ms = HTTPD_IDLE_TIMEOUT_MS;
	c->body_timeout_ms = HTTPD_BODY_TIMEOUT_MS;
	c->write_timeout_ms = HTTPD_WRITE_TIMEOUT_MS;
	c->drain_ms = HTTPD_DRAIN_MS;
	c->access_log = 1;
}

const char *
httpd_req_header(const struct httpd_req *r, const char *name)
{
	const struct http_req_field *f = http_req_field(r->head, name);

	return f ? f->value.p : NULL;
}

int
httpd_req_header_count(const struct httpd_req *r, const char *name)
{
	return http_req_field_count(r->head, name);
}

int
httpd_port(const struct httpd *s)
{
	return s->port;
}

void
httpd_stop(struct httpd *s)
{
	const uint64_t one = 1;

	__atomic_store_n(&s->stop_req, 1, __ATOMIC_SEQ_CST);
	if (write(s->evfd, &one, sizeof(one)) < 0)
		return;
}

static int
listen_on(struct httpd *s, const char *host, int port, struct err *e)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd, one = 1;

	if (net_sockaddr(host, port, 1, &ss, &sl) != 0)
		return err_set(e, "config.invalid", "--host %s: not an address or a known host name", host);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_set(e, "io.error", "socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, SOMAXCONN) != 0) {
		err_set(e, errno == EADDRINUSE ? "server.address_in_use" : "io.error", "cannot listen on %s port %d: %s",
			host, port, strerror(errno));
		close(fd);
		return -1;
	}
	sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						 : ((struct sockaddr_in *)&ss)->sin_port);
	s->lfd = fd;
	return 0;
}

/* Enough descriptors for every slot, raising the soft limit if needed. */
static int
fd_budget(int max_conns, struct err *e)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)max_conns + HTTPD_FD_SLACK;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
		return err_set(e, "config.invalid",
		               "--max-connections %d needs %llu file descriptors; the hard limit is %llu",
		               max_conns, (unsigned long long)need, (unsigned long long)rl.rlim_max);
	rl.rlim_cur = need;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return err_set(e, "config.invalid", "cannot raise the file descriptor limit to %llu: %s",
		               (unsigned long long)need, strerror(errno));
	return 0;
}

struct httpd *
httpd_new(const struct httpd_config *cfg, struct err *e)
{
	struct httpd *s;
	struct epoll_event ev;
	pthread_attr_t attr;
	sigset_t all, old;
	size_t npeers;
	int i, slots;

	if (cfg->max_conns < 1 || cfg->max_conns > 65536) {
		err_set(e, "config.invalid", "max connections must be 1..65536, not %d", cfg->max_conns);
		return NULL;
	}
	if (cfg->workers < 1 || cfg->workers > 256) {
		err_set(e, "config.invalid", "workers must be 1..256, not %d", cfg->workers);
		return NULL;
	}
	if (cfg->port < 0 || cfg->port > 65535) {
		err_set(e, "config.invalid", "port must be 0..65535, not %d", cfg->port);
		return NULL;
	}
	if (cfg->header_timeout_ms <= 0 || cfg->idle_timeout_ms <= 0 || cfg->body_timeout_ms <= 0 ||
	    cfg->write_timeout_ms <= 0 || cfg->drain_ms < 0 || cfg->max_body > (1u << 30)) {
		err_set(e, "config.invalid", "timeouts must be positive and the body limit at most 1 GiB");
		return NULL;
	}
	if (cfg->max_head < HTTP_REQ_HEAD_LIMIT_MIN || cfg->max_head > HTTP_REQ_HEAD_LIMIT_MAX) {
		err_set(e, "config.invalid", "the request head limit must be %u..%u bytes, not %zu",
		        HTTP_REQ_HEAD_LIMIT_MIN, HTTP_REQ_HEAD_LIMIT_MAX, cfg->max_head);
		return NULL;
	}
	if (cfg->reserve < 0 || cfg->reserve > 64) {
		err_set(e, "config.invalid", "reserve slots must be 0..64, not %d", cfg->reserve);
		return NULL;
	}
	if (cfg->max_conns_per_peer < 0) {
		err_set(e, "config.invalid", "connections per client address must be 0 (no limit) or more, not %d",
		        cfg->max_conns_per_peer);
		return NULL;
	}
	if (fd_budget(cfg->max_conns + cfg->reserve, e) != 0)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		err_set(e, "internal", "out of memory");
		return NULL;
	}
	s->cfg = *cfg;
	if (s->cfg.max_conns_per_peer == 0 || s->cfg.max_conns_per_peer > cfg->max_conns)
		s->cfg.max_conns_per_peer = cfg->max_conns;
	slots = cfg->max_conns + cfg->reserve;
	for (npeers = 16; npeers < 2 * (size_t)slots; npeers *= 2)
		;
	s->peer_mask = npeers - 1;
	s->in_cap = cfg->max_head + HTTPD_READ_EXTRA;
	s->lfd = s->epfd = s->evfd = s->reserve_fd = -1;
	s->next_wake = INT64_MAX;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	/* calloc'd pages stay untouched (and out of RSS) until a slot is used */
	s->conns = calloc((size_t)slots, sizeof(*s->conns));
	s->free_slots = malloc((size_t)slots * sizeof(int));
	s->work.ring = malloc((size_t)slots * sizeof(struct conn *));
	s->done.ring = malloc((size_t)slots * sizeof(struct conn *));
	s->peers = calloc(npeers, sizeof(*s->peers));
	s->threads = calloc((size_t)cfg->workers, sizeof(pthread_t));
	if (!s->conns || !s->free_slots || !s->work.ring || !s->done.ring || !s->peers || !s->threads) {
		err_set(e, "internal", "out of memory for %d connection slots", cfg->max_conns);
		goto fail;
	}
	s->work.cap = s->done.cap = slots;
	for (i = 0; i < slots; i++)
		s->free_slots[i] = slots - 1 - i;
	s->nfree = slots;

	if (listen_on(s, cfg->host ? cfg->host : "0.0.0.0", cfg->port, e) != 0)
		goto fail;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->epfd < 0 || s->evfd < 0) {
		err_set(e, "io.error", "epoll/eventfd: %s", strerror(errno));
		goto fail;
	}
	ev.events = EPOLLIN;
	ev.data.ptr = &s->lfd;
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev);
	ev.data.ptr = &s->evfd;
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &ev);
	s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	/* Workers never take signals: SIGTERM goes to the event thread. */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, HTTPD_STACK_SIZE);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < cfg->workers; i++) {
		if (pthread_create(&s->threads[i], &attr, worker, s) != 0)
			break;
		s->nthreads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (s->nthreads < cfg->workers) {
		err_set(e, "internal", "cannot start %d worker threads", cfg->workers);
		goto fail;
	}
	return s;
fail:
	httpd_free(s);
	return NULL;
}

static void
begin_drain(struct httpd *s)
{
	int i;

	__atomic_store_n(&s->stopping, 1, __ATOMIC_SEQ_CST);
	s->drain_end = clock_ms() + s->cfg.drain_ms;
	if (s->lfd >= 0) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
		close(s->lfd);
		s->lfd = -1;
	}
	for (i = 0; i < s->hiwater; i++) {
		struct conn *c = &s->conns[i];

		if (c->state == C_HEAD && (c->b == NULL || c->b->len == 0))
			conn_close(s, c);
	}
	vlog(s, "stopping: %d connection(s) in progress", s->active);
}

int
httpd_run(struct httpd *s, struct err *e)
{
	struct epoll_event ev[64];
	int64_t now, wait;
	int i, n, rc = 0, busy;

	for (;;) {
		if (__atomic_load_n(&s->stop_req, __ATOMIC_SEQ_CST) && !s->stopping)
			begin_drain(s);
		now = clock_ms();
		if (s->stopping) {
			if (s->active == 0)
				break;
			if (now >= s->drain_end) {
				rc = 1;
				break;
			}
		}
		if (s->ready != NULL)
			wait = 0;
		else if (s->next_wake == INT64_MAX)
			wait = -1;
		else
			wait = s->next_wake > now ? s->next_wake - now + 1 : 0;
		if (s->stopping && (wait < 0 || wait > s->drain_end - now))
			wait = s->drain_end - now + 1;
		if (s->rep_n > 0 && (wait < 0 || wait > 1000))
			wait = 1000;
		n = epoll_wait(s->epfd, ev, 64, (int)(wait > INT_MAX ? INT_MAX : wait));
		if (n < 0 && errno != EINTR) {
			err_set(e, "io.error", "epoll_wait: %s", strerror(errno));
			rc = -1;
			break;
		}
		for (i = 0; i < n; i++) {
			if (ev[i].data.ptr == &s->lfd)
				accept_all(s);
			else if (ev[i].data.ptr == &s->evfd)
				take_done(s);
			else if (((struct conn *)ev[i].data.ptr)->state != C_FREE)
				drive(s, ev[i].data.ptr);
		}
		while (s->ready != NULL) {
			struct conn *c = s->ready;

			s->ready = c->next_ready;
			c->in_ready = 0;
			drive(s, c);
		}
		if (clock_ms() >= s->next_wake)
			sweep(s);
		if (s->rep_n > 0 && time(NULL) != s->rep_sec)
			log_flush_repeats(s);
	}
	log_flush_repeats(s);

	pthread_mutex_lock(&s->mu);
	s->stop_workers = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	/* A handler runs only for a connection in C_BUSY (deferred ones too),
	 * which counts as active: with none active, the workers are at most
	 * finishing their loop and join at once. */
	busy = 0;
	for (i = 0; i < s->hiwater; i++)
		busy += s->conns[i].state == C_BUSY;
	if (busy > 0) {
		/* From now on, a worker (or the holder of a deferred answer)
		 * may still touch its connection: leave all of it to process
		 * exit. */
		s->stuck = 1;
		return rc;
	}
	for (i = 0; i < s->nthreads; i++)
		pthread_join(s->threads[i], NULL);
	s->nthreads = 0;
	for (i = 0; i < s->hiwater; i++)
		conn_close(s, &s->conns[i]);
	return rc;
}

void
httpd_free(struct httpd *s)
{
	int i;

	if (s == NULL)
		return;
	if (s->lfd >= 0)
		close(s->lfd);
	s->lfd = -1;
	if (s->stuck)
		return;
	if (s->nthreads > 0) {
		pthread_mutex_lock(&s->mu);
		s->stop_workers = 1;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		for (i = 0; i < s->nthreads; i++)
			pthread_join(s->threads[i], NULL);
	}
	for (i = 0; s->conns && i < s->hiwater; i++)
		conn_close(s, &s->conns[i]);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->evfd >= 0)
		close(s->evfd);
	if (s->reserve_fd >= 0)
		close(s->reserve_fd);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	while (s->ncache > 0)
		free(s->cache[--s->ncache]);
	free(s->conns);
	free(s->free_slots);
	free(s->peers);
	free(s->work.ring);
	free(s->done.ring);
	free(s->threads);
	free(s);
}
