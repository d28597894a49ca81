/* Answers: the status line and headers, whole responses, the JSON error
 * envelope, and streaming (chunked, or raw to HTTP/1.0) from a worker. */
#include "net/httpd_int.h"

#include "base/clock.h"
#include "base/json.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

const char *
httpd__reason(int status)
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

/* ---- the error envelope (written by base/json.h's writer) ------------- */

int
httpd_error_body(char *buf, size_t cap, const char *code, const char *msg, const char *details_json)
{
	const struct err_info *in = err_info(code);
	struct json_w w;
	int n = -1;

	if (cap == 0)
		return -1;
	if (code == NULL)
		code = "internal";
	if (msg == NULL || *msg == '\0')
		msg = in->sentence;
	json_w_init(&w, cap - 1);
	json_w_obj(&w);
	json_w_key(&w, "error");
	json_w_obj(&w);
	json_w_kstr(&w, "code", code);
	json_w_kstr(&w, "message", msg);
	json_w_key(&w, "details");
	json_w_raw(&w, details_json == NULL || *details_json == '\0' ? "{}" : details_json);
	json_w_kstr(&w, "remedy", in->remedy); /* NULL: null */
	json_w_end(&w);
	json_w_end(&w);
	if (!w.overflow) {
		memcpy(buf, w.buf, w.len + 1);
		n = (int)w.len;
	}
	json_w_free(&w);
	return n;
}

/* ---- building responses ------------------------------------------------- */

/* Formatted once a second per thread. */
static void
date_header(char *buf, size_t cap)
{
	static __thread time_t last;
	static __thread char text[CLOCK_HTTP_MAX];
	time_t t = time(NULL);

	if (t != last) {
		clock_http(t, text, sizeof(text));
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
	             httpd__reason(status), date, ctype, framing,
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

	return !c->close_after && c->b->hr.keep_alive && !httpd__stopping(c->srv);
}

int
httpd_resp_header(struct httpd_resp *w, const char *name, const char *value)
{
	size_t nl = strlen(name), vl = strlen(value);

	char *line = w->hdrs + w->hlen;

	if (w->done || w->hlen + nl + vl + 4 > sizeof(w->hdrs))
		return -1;
	/* written in place, kept only when the grammar accepts it */
	memcpy(line, name, nl);
	memcpy(line + nl, ": ", 2);
	memcpy(line + nl + 2, value, vl);
	if (memchr(name, ':', nl) != NULL || http_field_check(line, nl + 2 + vl) != NULL)
		return -1;
	memcpy(line + nl + 2 + vl, "\r\n", 2);
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
	if (status >= 400 || httpd__stopping(c->srv))
		c->close_after = 1;
	keep = keep_alive(w);
	snprintf(framing, sizeof(framing), "Content-Length: %zu\r\n", len);
	n = format_head(w, head, sizeof(head), status, content_type, framing, keep);
	if (n < 0)
		return -1;
	c->out = (struct buf)BUF_INIT((size_t)n + blen);
	if (buf_put(&c->out, head, (size_t)n) != 0 || buf_put(&c->out, body, blen) != 0) {
		buf_free(&c->out);
		return -1;
	}
	c->out_off = 0;
	__atomic_add_fetch(&c->srv->held, c->out.len, __ATOMIC_RELAXED);
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
	int n = httpd_error_body(body, sizeof(body), code, e ? e->msg : NULL, err_details_text(e));

	if (n < 0)
		n = httpd_error_body(body, sizeof(body), code, NULL, NULL);
	if (n < 0)
		return -1;
	return httpd_respond(w, err_info(code)->status, "application/json", body, (size_t)n);
}

int
httpd_respond_errf(struct httpd_resp *w, const char *code, const char *fmt, ...)
{
	struct err e = {0};
	va_list ap;

	va_start(ap, fmt);
	err_setv(&e, code, fmt, ap);
	va_end(ap);
	return httpd_respond_err(w, &e);
}

int
httpd_resp_closing(const struct httpd_resp *w)
{
	return httpd__stopping(w->c->srv) || w->failed;
}

/* Auto-finish what a handler left open; on the thread that ran it. */
void
httpd__finish_handler(struct conn *c)
{
	struct httpd_resp *w = &c->b->resp;

	if (w->streaming && !w->ended)
		httpd_stream_end(w);
	else if (!w->done && httpd_respond_errf(w, "internal", "the handler produced no response") != 0)
		c->close_after = 1;
}

/* Drop one hold; the last hands the connection back to the event thread. */
void
httpd__release(struct httpd_resp *w)
{
	struct conn *c = w->c;
	struct httpd *s = c->srv;
	const uint64_t one = 1;

	if (__atomic_sub_fetch(&w->holds, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	pthread_mutex_lock(&s->mu);
	httpd__q_push(&s->done, c);
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
	httpd__finish_handler(w->c);
	httpd__release(w);
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
	if (w->raw || httpd__stopping(c->srv))
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
