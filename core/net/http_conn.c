/* One client connection: open (directly, through a proxy's CONNECT, then
 * TLS), send and receive under the read and whole-transfer deadlines and
 * the minimum-rate guard, read a response head, read a body by its framing
 * into the caller's sink. */
#include "net/http_int.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/net.h"

#ifdef ABX_TEST
int (*http_test_connect)(const struct http_url *u, struct err *e);
#endif

/* ---- Connection I/O ----------------------------------------------------- */

void
http__conn_close(struct conn *c)
{
	if (c == NULL)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->tls);
	free(c);
}

static long
conn_recv(struct conn *c, void *buf, size_t len, struct xfer *x, struct err *e)
{
	ssize_t n;

	if (c->tls != NULL)
		return tls_read(c->tls, buf, len, &x->tm, e);
	for (;;) {
		n = recv(c->fd, buf, len, 0);
		if (n >= 0)
			return (long)n;
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
			if (net_wait(c->fd, POLLIN, x->tm.step_ms, x->tm.end_ms, "receive", e) != 0)
				return -1;
			continue;
		}
		if (errno == ECONNRESET)
			return err_set(e, "http.truncated", "the server reset the connection");
		return err_sys(e, "http.connect", errno, "recv: %s", strerror(errno));
	}
}

int
http__conn_send(struct conn *c, const void *buf, size_t len, struct xfer *x, struct err *e)
{
	const char *p = buf;
	ssize_t n;

	if (c->tls != NULL)
		return tls_write(c->tls, buf, len, &x->tm, e);
	while (len > 0) {
		n = send(c->fd, p, len, MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			if (net_wait(c->fd, POLLOUT, x->tm.step_ms, x->tm.end_ms, "send", e) != 0)
				return -1;
			continue;
		}
		return err_set(e, "http.connect", "send: %s", n < 0 ? strerror(errno) : "closed");
	}
	return 0;
}

/* Fill c->buf with more bytes (compacting first). Returns >0, 0 at EOF,
 * -1 with e set. */
static long
conn_fill(struct conn *c, struct xfer *x, struct err *e)
{
	long n;

	if (c->off > 0) {
		memmove(c->buf, c->buf + c->off, c->len - c->off);
		c->len -= c->off;
		c->off = 0;
	}
	if (c->len == sizeof(c->buf))
		return err_set(e, "http.protocol", "response head too large");
	n = conn_recv(c, c->buf + c->len, sizeof(c->buf) - c->len, x, e);
	if (n > 0)
		c->len += (size_t)n;
	return n;
}

/* Read and parse a response head. *got says whether any byte came. */
int
http__read_head(struct conn *c, struct xfer *x, struct http_head *h, int *got, struct err *e)
{
	long n;
	int r;

	*got = c->len > c->off;
	for (;;) {
		if (c->len > c->off) {
			r = http_parse_head((const char *)c->buf + c->off, c->len - c->off, h);
			if (r < 0)
				return err_set(e, "http.protocol", "malformed response head: %s", h->why);
			if (r > 0) {
				c->off += (size_t)r;
				return 0;
			}
		}
		n = conn_fill(c, x, e);
		if (n < 0)
			return -1;
		if (n == 0)
			return err_set(e, "http.truncated",
			               "the server closed the connection before answering");
		*got = 1;
	}
}

int
http__head_token(const struct http_head *h, const char *name, const char *token)
{
	const struct http_field *f;
	size_t tl = strlen(token), i, s;
	int k;

	for (k = 0; k < h->nfields; k++) {
		f = &h->fields[k];
		if (f->name_len != strlen(name) || strncasecmp(f->name, name, f->name_len) != 0)
			continue;
		for (i = 0; i < f->value_len;) {
			while (i < f->value_len &&
			       (f->value[i] == ',' || f->value[i] == ' ' || f->value[i] == '\t'))
				i++;
			s = i;
			while (i < f->value_len && f->value[i] != ',' && f->value[i] != ' ' &&
			       f->value[i] != '\t')
				i++;
			if (i - s == tl && strncasecmp(f->value + s, token, tl) == 0)
				return 1;
		}
	}
	return 0;
}

void
http__copy_field(const struct http_head *h, const char *name, char *out, size_t cap)
{
	const struct http_field *f = http_head_get(h, name);
	size_t n = f ? f->value_len : 0;

	if (n >= cap)
		n = cap - 1;
	if (f)
		memcpy(out, f->value, n);
	out[n] = '\0';
}

/* Body framing of a response: http_framing_* decide, as for the server's
 * requests; which responses carry no body at all is decided here. */
int
http__framing(const struct http_head *h, int head_req, int *kind, int64_t *clen, struct err *e)
{
	const struct http_field *fl;
	struct http_framing f;
	int i, body;

	http_framing_init(&f);
	for (i = 0; i < h->nfields; i++) {
		fl = &h->fields[i];
		if (http_framing_field(&f, fl->name, fl->name_len, fl->value, fl->value_len) != 0)
			return err_set(e, "http.protocol", "%s", f.why);
	}
	body = http_framing_end(&f, h->minor, 1);
	if (body < 0)
		return err_set(e, "http.protocol", "%s", f.why);
	*clen = f.length;
	*kind = head_req || h->status == 204 || h->status == 304 || h->status < 200 ? HTTP_BODY_NONE : body;
	return 0;
}

static int
rate_check(struct xfer *x, size_t n, struct err *e)
{
	const struct http_limits *l = &x->rq->limits;
	int64_t now, el;

	if (l->min_rate <= 0 || l->rate_window_ms <= 0)
		return 0;
	now = clock_ms();
	if (x->win_start == 0) {
		x->win_start = now;
		x->win_bytes = 0;
	}
	x->win_bytes += (int64_t)n;
	el = now - x->win_start;
	if (el >= l->rate_window_ms) {
		if (x->win_bytes * 1000 / el < l->min_rate)
			return err_set(e, "http.too_slow", "%lld bytes in %lld ms, below %lld bytes/s",
			               (long long)x->win_bytes, (long long)el, (long long)l->min_rate);
		x->win_start = now;
		x->win_bytes = 0;
	}
	return 0;
}

/* Deliver body bytes: to the sink (final 2xx), or only the snippet. */
static int
deliver(struct xfer *x, int to_sink, const unsigned char *p, size_t n, struct err *e)
{
	struct http_response *rs = x->rs;
	const struct http_limits *l = &x->rq->limits;
	size_t k;

	if (to_sink && l->max_body > 0 && rs->body_bytes + (int64_t)n > l->max_body)
		return err_set(e, "http.too_large", "%s: body larger than the cap of %lld bytes", rs->url,
		               (long long)l->max_body);
	if (rs->snippet_len < HTTP_SNIPPET_MAX) {
		k = HTTP_SNIPPET_MAX - rs->snippet_len;
		if (k > n)
			k = n;
		memcpy(rs->snippet + rs->snippet_len, p, k);
		rs->snippet_len += k;
	}
	if (!to_sink)
		return 0;
	rs->body_bytes += (int64_t)n;
	if (rate_check(x, n, e) != 0)
		return -1;
	if (x->end_ms > 0 && clock_ms() > x->end_ms)
		return err_set(e, "http.timeout", "the transfer deadline passed");
	if (x->rq->sink != NULL && x->rq->sink(x->rq->sink_arg, p, n, e) != 0) {
		if (e != NULL && e->code == NULL)
			err_set(e, "internal", "the body sink failed");
		return -1;
	}
	return 0;
}

/* A body being read: its framing and how far it got. */
struct body {
	int kind, to_sink;
	int64_t clen, got;
	struct http_chunked ch;
};

/* Take body bytes from p[0..n): *used says how many were the body's (the
 * rest belongs to the next response). Returns 1 when the body is complete,
 * 0 when it wants more, -1 with e set. */
static int
body_take(struct body *b, struct xfer *x, const unsigned char *p, size_t n, size_t *used, struct err *e)
{
	const unsigned char *d;
	size_t off = 0, dl;
	long k;

	*used = 0;
	if (b->kind != HTTP_BODY_CHUNKED) {
		if (b->kind == HTTP_BODY_LENGTH && (int64_t)n > b->clen - b->got)
			n = (size_t)(b->clen - b->got);
		if (n > 0 && deliver(x, b->to_sink, p, n, e) != 0)
			return -1;
		b->got += (int64_t)n;
		*used = n;
		return b->kind == HTTP_BODY_LENGTH && b->got == b->clen;
	}
	while (off < n) {
		k = http_chunked_step(&b->ch, p + off, n - off, &d, &dl);
		if (k < 0)
			return err_set(e, "http.protocol", "%s: bad chunked framing: %s", x->rs->url,
			               b->ch.why);
		off += (size_t)k;
		*used = off;
		if (dl > 0) {
			b->got += (int64_t)dl;
			if (!b->to_sink && b->got > DRAIN_MAX)
				return err_set(e, "http.too_large", "not draining a large body");
			if (deliver(x, b->to_sink, d, dl, e) != 0)
				return -1;
		}
		if (b->ch.done)
			return 1;
		if (k == 0)
			break;
	}
	return 0;
}

/* Read a body with the given framing. to_sink: deliver to the sink
 * (else discard, at most DRAIN_MAX). Over TLS the body is taken straight
 * from the engine's record buffer (no copy through c->buf). Returns 0 when
 * the body ended properly (the connection may then be reused), 1 when it
 * ended by close, -1 with e set. */
int
http__read_body(struct conn *c, struct xfer *x, int kind, int64_t clen, int to_sink, struct err *e)
{
	struct body b = {kind, to_sink, clen, 0, {0}};
	const unsigned char *p;
	size_t used;
	long n = 0;
	int r;

	if (kind == HTTP_BODY_NONE || (kind == HTTP_BODY_LENGTH && clen == 0))
		return 0;
	if (!to_sink && (kind == HTTP_BODY_CLOSE || (kind == HTTP_BODY_LENGTH && clen > DRAIN_MAX)))
		return err_set(e, "http.too_large", "not draining a large body");
	http_chunked_init(&b.ch, UINT64_MAX, HTTP_LF_OK);
	for (;;) {
		if (c->len > c->off) {
			/* what came with the head, or over plain HTTP */
			r = body_take(&b, x, c->buf + c->off, c->len - c->off, &used, e);
			c->off += used;
		} else if (c->tls != NULL) {
			c->off = c->len = 0;
			n = tls_peek(c->tls, &p, &x->tm, e);
			if (n <= 0)
				goto ended;
			r = body_take(&b, x, p, (size_t)n, &used, e);
			tls_ack(c->tls, used);
		} else {
			c->off = c->len = 0;
			n = conn_recv(c, c->buf, sizeof(c->buf), x, e);
			if (n <= 0)
				goto ended;
			c->len = (size_t)n;
			continue;
		}
		if (r != 0)
			return r < 0 ? -1 : 0;
	}
ended:
	if (n < 0)
		return -1;
	if (kind == HTTP_BODY_CLOSE)
		return 1; /* ended by close: fine, but not reusable */
	if (kind == HTTP_BODY_LENGTH)
		return err_set(e, "http.truncated", "%s: the connection closed after %lld of %lld bytes",
		               x->rs->url, (long long)b.got, (long long)clen);
	return err_set(e, "http.truncated", "%s: the connection closed before the last chunk", x->rs->url);
}

/* Connect to the origin, directly or through a proxy (CONNECT for https),
 * then the TLS handshake. */
struct conn *
http__conn_open(const struct http_url *u, const struct proxy *px, struct xfer *x, struct err *e)
{
	const struct http_limits *l = &x->rq->limits;
	struct tls_timing ctm;
	struct http_head h;
	struct conn *c;
	char req[1024];
	int n, got;

	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		err_set(e, "internal", "out of memory");
		return NULL;
	}
	c->https = u->https;
	c->via_proxy = px != NULL;
	/* Plain requests through a proxy share one connection to the proxy:
	 * the cache keys them by the proxy's address. */
	snprintf(c->host, sizeof(c->host), "%s", px && !u->https ? px->host : u->host);
	c->port = px && !u->https ? px->port : u->port;
#ifdef ABX_TEST
	if (http_test_connect != NULL)
		c->fd = http_test_connect(u, e);
	else
#endif
		c->fd = net_connect(px ? px->host : u->host, px ? px->port : u->port, l->connect_ms,
		                    x->end_ms, e);
	if (c->fd < 0) {
		if (px != NULL && e != NULL && e->code != NULL && strcmp(e->code, "http.timeout") != 0) {
			err_set(e, "http.proxy", "proxy %s:%d: %s", px->host, px->port, e->msg);
		}
		goto fail;
	}
	ctm.step_ms = l->connect_ms;
	ctm.end_ms = x->end_ms;
	if (px != NULL && u->https) {
		const char *v6 = strchr(u->host, ':') ? "[" : "", *v6e = *v6 ? "]" : "";
		n = snprintf(req, sizeof(req), "CONNECT %s%s%s:%d HTTP/1.1\r\nHost: %s%s%s:%d\r\n%s%s%s\r\n",
		             v6, u->host, v6e, u->port, v6, u->host, v6e, u->port,
		             px->auth[0] ? "Proxy-Authorization: " : "", px->auth, px->auth[0] ? "\r\n" : "");
		struct xfer px_x = *x;
		px_x.tm = ctm;
		if (http__conn_send(c, req, (size_t)n, &px_x, e) != 0 ||
		    http__read_head(c, &px_x, &h, &got, e) != 0) {
			if (e != NULL && e->code != NULL && strcmp(e->code, "http.timeout") != 0) {
				err_set(e, "http.proxy", "proxy %s:%d: %s", px->host, px->port, e->msg);
			}
			goto fail;
		}
		if (h.status / 100 != 2) {
			err_set(e, "http.proxy", "proxy %s:%d answered CONNECT with %d %.*s", px->host,
			        px->port, h.status, (int)h.reason_len, h.reason);
			goto fail;
		}
		if (c->len != c->off) {
			err_set(e, "http.proxy", "proxy sent data after its CONNECT answer");
			goto fail;
		}
		c->off = c->len = 0;
	}
	if (u->https) {
		c->tls = malloc(sizeof(*c->tls));
		if (c->tls == NULL) {
			err_set(e, "internal", "out of memory");
			goto fail;
		}
		/* The handshake waits like a read, bounded by the deadline. */
		ctm.step_ms = l->read_ms;
		if (tls_handshake(c->tls, c->fd, u->host, &ctm, e) != 0)
			goto fail;
	}
	return c;
fail:
	http__conn_close(c);
	return NULL;
}
