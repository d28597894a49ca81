#include "http.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "tls.h"

#ifndef ABX_VERSION
#define ABX_VERSION "0.0.0-dev"
#endif

static int
hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* ---- Client ------------------------------------------------------------- */

/* Read buffer per connection: a whole response head must fit, and bigger
 * reads cost fewer system calls on plain HTTP. */
#define CONN_BUF (2 * HTTP_HEAD_MAX)
/* Request head we write: request line with the longest URL, Host, our few
 * headers and the caller's. */
#define REQ_MAX (HTTP_URL_MAX + 4096)
/* A redirect or error body larger than this is not drained (the connection
 * is closed instead). */
#define DRAIN_MAX (64 * 1024)

struct proxy {
	int set;
	char host[HTTP_HOST_MAX];
	int port;
	char auth[256]; /* "Basic <b64>" or "" */
};

struct conn {
	int fd;
	int https;
	int via_proxy;
	char host[HTTP_HOST_MAX]; /* origin host (or proxy host for plain via proxy) */
	int port;
	struct tls_conn *tls;
	unsigned char buf[CONN_BUF];
	size_t off, len;
	int64_t idle_since;
};

struct http_client {
	struct proxy https_proxy, http_proxy;
	char no_proxy[1024];
	struct conn *cache[HTTP_CONN_CACHE];
};

static void
conn_close(struct conn *c)
{
	if (c == NULL)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->tls);
	free(c);
}

static void
b64(const unsigned char *in, size_t n, char *out)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i;
	char *o = out;

	for (i = 0; i + 2 < n; i += 3) {
		*o++ = t[in[i] >> 2];
		*o++ = t[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
		*o++ = t[((in[i + 1] & 15) << 2) | (in[i + 2] >> 6)];
		*o++ = t[in[i + 2] & 63];
	}
	if (i < n) {
		*o++ = t[in[i] >> 2];
		if (i + 1 < n) {
			*o++ = t[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
			*o++ = t[(in[i + 1] & 15) << 2];
		} else {
			*o++ = t[(in[i] & 3) << 4];
			*o++ = '=';
		}
		*o++ = '=';
	}
	*o = '\0';
}

static size_t
pct_decode(const char *s, size_t n, unsigned char *out, size_t cap)
{
	size_t i, o = 0;

	for (i = 0; i < n && o < cap; i++) {
		if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			out[o++] = (unsigned char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else {
			out[o++] = (unsigned char)s[i];
		}
	}
	return o;
}

/* "http://[user:pass@]host[:port][/]" (scheme optional, as curl allows). */
static int
proxy_parse(const char *v, struct proxy *px, struct err *e)
{
	char buf[HTTP_URL_MAX];
	const char *rest, *at;
	struct http_url u;
	unsigned char cred[190];
	size_t cl;

	memset(px, 0, sizeof(*px));
	if (v == NULL || *v == '\0')
		return 0;
	if (strncasecmp(v, "https://", 8) == 0)
		return err_set(e, "http.proxy", "TLS to the proxy itself is not supported: %.80s", v);
	rest = strncasecmp(v, "http://", 7) == 0 ? v + 7 : v;
	if (strstr(rest, "://") != NULL)
		return err_set(e, "http.proxy", "unsupported proxy scheme: %.80s", v);
	at = strchr(rest, '@');
	if (at != NULL && strcspn(rest, "/") > (size_t)(at - rest)) {
		cl = pct_decode(rest, (size_t)(at - rest), cred, sizeof(cred));
		if (cl * 4 / 3 + 16 >= sizeof(px->auth) - 6)
			return err_set(e, "http.proxy", "proxy credentials too long");
		memcpy(px->auth, "Basic ", 6);
		b64(cred, cl, px->auth + 6);
		rest = at + 1;
	}
	if (snprintf(buf, sizeof(buf), "http://%s", rest) >= (int)sizeof(buf))
		return err_set(e, "http.proxy", "proxy URL too long");
	if (http_url_parse(buf, &u, e) != 0) {
		/* err_set writes e->msg, so the cause is copied out first. */
		char why[ERR_MSG_MAX];
		snprintf(why, sizeof(why), "%s", e ? e->msg : "");
		return err_set(e, "http.proxy", "bad proxy URL: %s", why);
	}
	snprintf(px->host, sizeof(px->host), "%s", u.host);
	px->port = u.port; /* 80 unless named, as curl does for http:// */
	px->set = 1;
	return 0;
}

static const char *
env2(const char *a, const char *b)
{
	const char *v = getenv(a);

	return v != NULL && *v ? v : getenv(b);
}

static void
cache_clear(struct http_client *c)
{
	int i;

	for (i = 0; i < HTTP_CONN_CACHE; i++) {
		conn_close(c->cache[i]);
		c->cache[i] = NULL;
	}
}

int
http_client_set_proxy(struct http_client *c, const char *https_proxy, const char *http_proxy, const char *no_proxy,
		      struct err *e)
{
	cache_clear(c);
	if (proxy_parse(https_proxy, &c->https_proxy, e) != 0 || proxy_parse(http_proxy, &c->http_proxy, e) != 0)
		return -1;
	snprintf(c->no_proxy, sizeof(c->no_proxy), "%s", no_proxy ? no_proxy : "");
	return 0;
}

struct http_client *
http_client_new(struct err *e)
{
	struct http_client *c = calloc(1, sizeof(*c));

	if (c == NULL) {
		err_set(e, "internal", "out of memory");
		return NULL;
	}
	if (http_client_set_proxy(c, env2("HTTPS_PROXY", "https_proxy"), env2("HTTP_PROXY", "http_proxy"),
				  env2("NO_PROXY", "no_proxy"), e) != 0) {
		free(c);
		return NULL;
	}
	return c;
}

void
http_client_free(struct http_client *c)
{
	if (c == NULL)
		return;
	cache_clear(c);
	free(c);
}

void
http_limits_default(struct http_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->connect_ms = HTTP_CONNECT_MS_DEFAULT;
	l->read_ms = HTTP_READ_MS_DEFAULT;
	l->min_rate = HTTP_MIN_RATE_DEFAULT;
	l->rate_window_ms = HTTP_RATE_WINDOW_MS_DEFAULT;
	l->max_redirects = HTTP_REDIRECTS_MAX;
}

void
http_request_init(struct http_request *rq, const char *url)
{
	memset(rq, 0, sizeof(*rq));
	rq->method = "GET";
	rq->url = url;
	http_limits_default(&rq->limits);
}

/* Per-request state. */
struct xfer {
	const struct http_request *rq;
	struct http_response *rs;
	struct tls_timing tm;
	int64_t end_ms;
	/* rate guard */
	int64_t win_start, win_bytes;
};

/* ---- Connection I/O ----------------------------------------------------- */

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
		return err_set(e, "http.connect", "recv: %s", strerror(errno));
	}
}

static int
conn_send(struct conn *c, const void *buf, size_t len, struct xfer *x, struct err *e)
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
static int
read_head(struct conn *c, struct xfer *x, struct http_head *h, int *got, struct err *e)
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
			return err_set(e, "http.truncated", "the server closed the connection before answering");
		*got = 1;
	}
}

static int
head_token(const struct http_head *h, const char *name, const char *token)
{
	const struct http_field *f;
	size_t tl = strlen(token), i, s;
	int k;

	for (k = 0; k < h->nfields; k++) {
		f = &h->fields[k];
		if (f->name_len != strlen(name) || strncasecmp(f->name, name, f->name_len) != 0)
			continue;
		for (i = 0; i < f->value_len;) {
			while (i < f->value_len && (f->value[i] == ',' || f->value[i] == ' ' || f->value[i] == '\t'))
				i++;
			s = i;
			while (i < f->value_len && f->value[i] != ',' && f->value[i] != ' ' && f->value[i] != '\t')
				i++;
			if (i - s == tl && strncasecmp(f->value + s, token, tl) == 0)
				return 1;
		}
	}
	return 0;
}

static void
copy_field(const struct http_head *h, const char *name, char *out, size_t cap)
{
	const struct http_field *f = http_head_get(h, name);
	size_t n = f ? f->value_len : 0;

	if (n >= cap)
		n = cap - 1;
	if (f)
		memcpy(out, f->value, n);
	out[n] = '\0';
}

/* Body framing of a response. */
enum { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_CLOSE };

static int
framing(const struct http_head *h, int head_req, int *kind, int64_t *clen, struct err *e)
{
	const struct http_field *te = http_head_get(h, "Transfer-Encoding");
	const struct http_field *cl;
	int i, seen = 0;
	int64_t v;
	size_t j;

	*clen = -1;
	*kind = BODY_NONE;
	if (te != NULL) {
		if (te->value_len != 7 || strncasecmp(te->value, "chunked", 7) != 0)
			return err_set(e, "http.protocol", "unsupported Transfer-Encoding %.*s", (int)te->value_len,
				       te->value);
		*kind = BODY_CHUNKED;
	}
	for (i = 0; i < h->nfields; i++) {
		cl = &h->fields[i];
		if (cl->name_len != 14 || strncasecmp(cl->name, "Content-Length", 14) != 0)
			continue;
		if (cl->value_len == 0 || cl->value_len > 18)
			return err_set(e, "http.protocol", "bad Content-Length");
		for (v = 0, j = 0; j < cl->value_len; j++) {
			if (!isdigit((unsigned char)cl->value[j]))
				return err_set(e, "http.protocol", "bad Content-Length");
			v = v * 10 + (cl->value[j] - '0');
		}
		if (seen && v != *clen)
			return err_set(e, "http.protocol", "conflicting Content-Length headers");
		*clen = v;
		seen = 1;
	}
	if (te != NULL && seen)
		return err_set(e, "http.protocol", "both Content-Length and Transfer-Encoding");
	if (head_req || h->status == 204 || h->status == 304 || h->status < 200)
		*kind = BODY_NONE;
	else if (te == NULL)
		*kind = seen ? BODY_LENGTH : BODY_CLOSE;
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

/* Read a body with the given framing. to_sink: deliver to the sink
 * (else discard, at most DRAIN_MAX). Returns 0 when the body ended
 * properly (the connection may then be reused), -1 with e set. */
static int
read_body(struct conn *c, struct xfer *x, int kind, int64_t clen, int to_sink, struct err *e)
{
	struct http_chunked ch;
	const unsigned char *d;
	size_t dl, avail;
	int64_t got = 0;
	long n, k;

	if (kind == BODY_NONE)
		return 0;
	if (!to_sink && (kind == BODY_CLOSE || (kind == BODY_LENGTH && clen > DRAIN_MAX)))
		return err_set(e, "http.too_large", "not draining a large body");
	http_chunked_init(&ch, UINT64_MAX, HTTP_LF_OK);
	for (;;) {
		avail = c->len - c->off;
		if (avail > 0) {
			if (kind == BODY_CHUNKED) {
				k = http_chunked_step(&ch, c->buf + c->off, avail, &d, &dl);
				if (k < 0)
					return err_set(e, "http.protocol", "%s: bad chunked framing: %s", x->rs->url, ch.why);
				c->off += (size_t)k;
				if (dl > 0) {
					got += (int64_t)dl;
					if (!to_sink && got > DRAIN_MAX)
						return err_set(e, "http.too_large", "not draining a large body");
					if (deliver(x, to_sink, d, dl, e) != 0)
						return -1;
				}
				if (ch.done)
					return 0;
				continue;
			}
			if (kind == BODY_LENGTH && (int64_t)avail > clen - got)
				avail = (size_t)(clen - got);
			if (avail > 0 && deliver(x, to_sink, c->buf + c->off, avail, e) != 0)
				return -1;
			c->off += avail;
			got += (int64_t)avail;
		}
		if (kind == BODY_LENGTH && got == clen)
			return 0;
		c->off = c->len = 0;
		n = conn_recv(c, c->buf, sizeof(c->buf), x, e);
		if (n < 0)
			return -1;
		if (n == 0) {
			if (kind == BODY_CLOSE)
				return 1; /* ended by close: fine, but not reusable */
			if (kind == BODY_LENGTH)
				return err_set(e, "http.truncated", "%s: the connection closed after %lld of %lld bytes",
					       x->rs->url, (long long)got, (long long)clen);
			return err_set(e, "http.truncated", "%s: the connection closed before the last chunk",
				       x->rs->url);
		}
		c->len = (size_t)n;
	}
}

/* Connect to the origin, directly or through a proxy (CONNECT for https),
 * then the TLS handshake. */
static struct conn *
conn_open(const struct http_url *u, const struct proxy *px, struct xfer *x, struct err *e)
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
	c->fd = net_connect(px ? px->host : u->host, px ? px->port : u->port, l->connect_ms, x->end_ms, e);
	if (c->fd < 0) {
		if (px != NULL && e != NULL && e->code != NULL && strcmp(e->code, "http.timeout") != 0) {
			struct err tmp = *e;
			err_set(e, "http.proxy", "proxy %s:%d: %s", px->host, px->port, tmp.msg);
		}
		goto fail;
	}
	ctm.step_ms = l->connect_ms;
	ctm.end_ms = x->end_ms;
	if (px != NULL && u->https) {
		const char *v6 = strchr(u->host, ':') ? "[" : "", *v6e = *v6 ? "]" : "";
		n = snprintf(req, sizeof(req), "CONNECT %s%s%s:%d HTTP/1.1\r\nHost: %s%s%s:%d\r\n%s%s%s\r\n", v6,
			     u->host, v6e, u->port, v6, u->host, v6e, u->port, px->auth[0] ? "Proxy-Authorization: " : "",
			     px->auth, px->auth[0] ? "\r\n" : "");
		struct xfer px_x = *x;
		px_x.tm = ctm;
		if (conn_send(c, req, (size_t)n, &px_x, e) != 0 || read_head(c, &px_x, &h, &got, e) != 0) {
			if (e != NULL && e->code != NULL && strcmp(e->code, "http.timeout") != 0) {
				struct err tmp = *e;
				err_set(e, "http.proxy", "proxy %s:%d: %s", px->host, px->port, tmp.msg);
			}
			goto fail;
		}
		if (h.status / 100 != 2) {
			err_set(e, "http.proxy", "proxy %s:%d answered CONNECT with %d %.*s", px->host, px->port, h.status,
				(int)h.reason_len, h.reason);
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
	conn_close(c);
	return NULL;
}

static struct conn *
cache_take(struct http_client *cl, const struct http_url *u, int via_proxy)
{
	struct conn *c;
	int i;

	for (i = 0; i < HTTP_CONN_CACHE; i++) {
		c = cl->cache[i];
		if (c != NULL && c->https == u->https && c->port == u->port && c->via_proxy == via_proxy &&
		    strcmp(c->host, u->host) == 0) {
			cl->cache[i] = NULL;
			return c;
		}
	}
	return NULL;
}

static void
cache_put(struct http_client *cl, struct conn *c)
{
	int i, oldest = 0;

	c->idle_since = clock_ms();
	c->off = c->len = 0;
	for (i = 0; i < HTTP_CONN_CACHE; i++) {
		if (cl->cache[i] == NULL) {
			cl->cache[i] = c;
			return;
		}
		if (cl->cache[i]->idle_since < cl->cache[oldest]->idle_since)
			oldest = i;
	}
	conn_close(cl->cache[oldest]);
	cl->cache[oldest] = c;
}

static const char *const refused_headers[] = {
	"host", "connection", "content-length", "transfer-encoding", "proxy-", "te", "upgrade", "keep-alive",
};

static int
check_header(const char *h, struct err *e)
{
	const char *c = strchr(h, ':'), *why = http_field_check(h, strlen(h));
	size_t nl, i, rl;

	if (why != NULL)
		return err_set(e, "http.url", "request header %.40s%s: %s", h, strlen(h) > 40 ? "..." : "", why);
	nl = (size_t)(c - h);
	for (i = 0; i < sizeof(refused_headers) / sizeof(refused_headers[0]); i++) {
		rl = strlen(refused_headers[i]);
		if ((refused_headers[i][rl - 1] == '-' ? nl >= rl : nl == rl) && strncasecmp(h, refused_headers[i], rl) == 0)
			return err_set(e, "http.url", "request header %.*s is the client's to write", (int)nl, h);
	}
	return 0;
}

static int
same_origin(const struct http_url *a, const struct http_url *b)
{
	return a->https == b->https && a->port == b->port && strcmp(a->host, b->host) == 0;
}

static int
build_request(const struct http_request *rq, const struct http_url *u, const struct proxy *plain_px, int with_headers,
	      char *out, size_t cap, struct err *e)
{
	const char *v6 = strchr(u->host, ':') ? "[" : "", *v6e = *v6 ? "]" : "";
	char port[16] = "", abs[HTTP_URL_MAX + 16];
	size_t n;
	int i, k;

	if (u->port_explicit && u->port != (u->https ? 443 : 80))
		snprintf(port, sizeof(port), ":%d", u->port);
	if (plain_px != NULL)
		http_url_format(u, abs, sizeof(abs));
	k = snprintf(out, cap,
		     "%s %s HTTP/1.1\r\nHost: %s%s%s%s\r\nUser-Agent: agent-sandbox-server/" ABX_VERSION
		     "\r\nAccept: */*\r\nAccept-Encoding: identity\r\n",
		     rq->method ? rq->method : "GET", plain_px ? abs : u->target, v6, u->host, v6e, port);
	if (k < 0 || (size_t)k >= cap)
		return err_set(e, "http.url", "request too long");
	n = (size_t)k;
	if (plain_px != NULL && plain_px->auth[0]) {
		k = snprintf(out + n, cap - n, "Proxy-Authorization: %s\r\n", plain_px->auth);
		if (k < 0 || (size_t)k >= cap - n)
			return err_set(e, "http.url", "request too long");
		n += (size_t)k;
	}
	for (i = 0; with_headers && i < rq->nheaders; i++) {
		k = snprintf(out + n, cap - n, "%s\r\n", rq->headers[i]);
		if (k < 0 || (size_t)k >= cap - n)
			return err_set(e, "http.url", "request headers too long");
		n += (size_t)k;
	}
	if (n + 3 > cap)
		return err_set(e, "http.url", "request too long");
	memcpy(out + n, "\r\n", 3);
	return (int)(n + 2);
}

static int
is_redirect(int s)
{
	return s == 301 || s == 302 || s == 303 || s == 307 || s == 308;
}

/* Refuse what the client cannot send: methods other than GET and HEAD,
 * headers it writes itself or that break the grammar, a redirect limit out
 * of range, a bad URL (parsed into *u). */
static int
check_request(const struct http_request *rq, struct http_url *u, struct err *e)
{
	int i;

	if (rq->method != NULL && strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0)
		return err_set(e, "http.url", "method %s is not supported", rq->method);
	if (rq->nheaders < 0 || rq->nheaders > HTTP_REQ_HEADERS_MAX)
		return err_set(e, "http.url", "too many request headers");
	for (i = 0; i < rq->nheaders; i++)
		if (check_header(rq->headers[i], e) != 0)
			return -1;
	if (rq->limits.max_redirects < 0 || rq->limits.max_redirects > HTTP_REDIRECTS_MAX)
		return err_set(e, "http.url", "at most %d redirects may be allowed", HTTP_REDIRECTS_MAX);
	if (rq->url == NULL)
		return err_set(e, "http.url", "no URL");
	return http_url_parse(rq->url, u, e);
}

/* The caller's host rule for the hop to u (rs->url already names it). */
static int
check_host(const struct http_request *rq, const struct http_url *u, const char *url, struct err *e)
{
	if (rq->host_ok == NULL)
		return 0;
	if (e != NULL)
		err_clear(e);
	if (rq->host_ok(rq->host_arg, u, e) == 0)
		return 0;
	if (e != NULL && e->code == NULL)
		err_set(e, "http.redirect", "%s: host %s is not allowed", url, u->host);
	return -1;
}

/* The proxy for u under the client's settings, or NULL. */
static const struct proxy *
pick_proxy(const struct http_client *cl, const struct http_url *u)
{
	if (http_no_proxy_match(cl->no_proxy, u->host, u->port))
		return NULL;
	if (u->https)
		return cl->https_proxy.set ? &cl->https_proxy : NULL;
	return cl->http_proxy.set ? &cl->http_proxy : NULL;
}

/* Send req on a cached or new connection to u and read the final head
 * (1xx interim answers skipped) into h. A cached connection the server
 * closed while idle gets one more try on a new one. Returns the connection,
 * or NULL with e set. */
static struct conn *
exchange(struct http_client *cl, struct xfer *x, const struct http_url *u, const struct proxy *px, const char *req,
         size_t len, struct http_head *h, struct err *e)
{
	struct http_url key = *u;
	struct conn *c;
	int attempt, got;

	if (px != NULL && !u->https) {
		/* Plain requests through a proxy share the proxy connection. */
		snprintf(key.host, sizeof(key.host), "%s", px->host);
		key.port = px->port;
	}
	for (attempt = 0;; attempt++) {
		c = attempt == 0 ? cache_take(cl, &key, px != NULL) : NULL;
		x->rs->reused = c != NULL;
		if (c == NULL && (c = conn_open(u, px, x, e)) == NULL)
			return NULL;
		if (e != NULL)
			err_clear(e);
		got = 0;
		if (conn_send(c, req, len, x, e) == 0 && read_head(c, x, h, &got, e) == 0)
			break;
		conn_close(c);
		if (!x->rs->reused || got || (e != NULL && e->code != NULL && strcmp(e->code, "http.timeout") == 0))
			return NULL;
	}
	/* 1xx interim answers (100 Continue, 103 Early Hints): skip. */
	while (h->status >= 100 && h->status < 200 && h->status != 101) {
		if (read_head(c, x, h, &got, e) != 0) {
			conn_close(c);
			return NULL;
		}
	}
	return c;
}

/* After a response: keep c for reuse when its body was read to the end
 * (body_rc 0), nothing else is buffered, and neither side said close. */
static void
conn_done(struct http_client *cl, struct conn *c, const struct http_head *h, int body_rc)
{
	if (body_rc == 0 && c->off == c->len && !head_token(h, "Connection", "close") && h->minor == 1 &&
	    (c->tls == NULL || !tls_closed(c->tls)))
		cache_put(cl, c);
	else
		conn_close(c);
}

/* A redirect answer on c (consumed): drain its body, check the hop and set
 * *cur to the target. Returns 0 to follow it, -1 with e set. */
static int
follow_redirect(struct http_client *cl, struct xfer *x, struct conn *c, const struct http_head *h, int kind,
                int64_t clen, int hop, struct http_url *cur, struct err *e)
{
	const struct http_request *rq = x->rq;
	struct http_response *rs = x->rs;
	const struct http_field *loc = http_head_get(h, "Location");
	char locbuf[HTTP_URL_MAX];
	struct http_url next;
	struct err drain;

	if (loc == NULL || loc->value_len == 0 || loc->value_len >= sizeof(locbuf)) {
		conn_close(c);
		return err_set(e, "http.redirect", "%s: %d without a usable Location", rs->url, h->status);
	}
	memcpy(locbuf, loc->value, loc->value_len);
	locbuf[loc->value_len] = '\0';
	/* The redirect's own body is drained (small) or the connection
	 * dropped; either way it is not an error. */
	conn_done(cl, c, h, read_body(c, x, kind, clen, 0, &drain));
	if (hop + 1 > rq->limits.max_redirects)
		return err_set(e, "http.redirect", "%s: more than %d redirects", rs->url, rq->limits.max_redirects);
	if (http_url_resolve(cur, locbuf, &next, e) != 0) {
		struct err tmp = e ? *e : (struct err){0};

		return err_set(e, "http.redirect", "%s: bad Location: %s", rs->url, tmp.msg);
	}
	if (cur->https && !next.https)
		return err_set(e, "http.redirect", "%s: redirect from https to http refused", rs->url);
	*cur = next;
	rs->redirects = hop + 1;
	return 0;
}

/* The final answer on c (consumed): a 2xx body to the sink, anything else
 * drained and reported as http.status. */
static int
final_response(struct http_client *cl, struct xfer *x, struct conn *c, const struct http_head *h, int kind,
               int64_t clen, struct err *e)
{
	const struct http_request *rq = x->rq;
	struct http_response *rs = x->rs;
	struct err tmp;
	int r;

	rs->content_length = kind == BODY_CHUNKED ? -1 : clen;
	copy_field(h, "Content-Type", rs->content_type, sizeof(rs->content_type));
	copy_field(h, "ETag", rs->etag, sizeof(rs->etag));
	copy_field(h, "Last-Modified", rs->last_modified, sizeof(rs->last_modified));
	if (h->status / 100 != 2) {
		conn_done(cl, c, h, read_body(c, x, kind, clen, 0, &tmp));
		return err_set(e, "http.status", "%s: HTTP %d %.*s", rs->url, h->status, (int)h->reason_len,
		               h->reason);
	}
	if (rq->limits.max_body > 0 && clen > rq->limits.max_body) {
		conn_close(c);
		return err_set(e, "http.too_large", "%s: %lld bytes announced, above the cap of %lld bytes", rs->url,
		               (long long)clen, (long long)rq->limits.max_body);
	}
	r = read_body(c, x, kind, clen, 1, e);
	if (r < 0) {
		conn_close(c);
		return -1;
	}
	conn_done(cl, c, h, r);
	if (e != NULL)
		err_clear(e);
	return 0;
}

int
http_request(struct http_client *cl, const struct http_request *rq, struct http_response *rs, struct err *e)
{
	struct xfer x;
	struct http_url cur, origin;
	const struct proxy *px;
	struct http_head h;
	struct conn *c;
	char req[REQ_MAX];
	int head_req = rq->method != NULL && strcmp(rq->method, "HEAD") == 0, hop, r, kind, with_headers = 1;
	int64_t clen;

	memset(rs, 0, sizeof(*rs));
	rs->content_length = -1;
	memset(&x, 0, sizeof(x));
	x.rq = rq;
	x.rs = rs;
	if (check_request(rq, &cur, e) != 0)
		return -1;
	origin = cur;
	x.end_ms = rq->limits.total_ms > 0 ? clock_ms() + rq->limits.total_ms : 0;
	x.tm.step_ms = rq->limits.read_ms > 0 ? rq->limits.read_ms : HTTP_READ_MS_DEFAULT;
	x.tm.end_ms = x.end_ms;
	for (hop = 0;; hop++) {
		http_url_format(&cur, rs->url, sizeof(rs->url));
		if (check_host(rq, &cur, rs->url, e) != 0)
			return -1;
		px = pick_proxy(cl, &cur);
		/* headers go to the first origin only */
		with_headers = with_headers && same_origin(&cur, &origin);
		r = build_request(rq, &cur, px != NULL && !cur.https ? px : NULL, with_headers, req, sizeof(req), e);
		if (r < 0 || (c = exchange(cl, &x, &cur, px, req, (size_t)r, &h, e)) == NULL)
			return -1;
		rs->status = h.status;
		if (framing(&h, head_req, &kind, &clen, e) != 0) {
			conn_close(c);
			return -1;
		}
		if (!is_redirect(h.status))
			return final_response(cl, &x, c, &h, kind, clen, e);
		if (follow_redirect(cl, &x, c, &h, kind, clen, hop, &cur, e) != 0)
			return -1;
	}
}
