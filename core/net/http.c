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

#include "base/digest.h"
#include "base/net.h"
#include "net/tls.h"

#ifndef ABX_VERSION
#define ABX_VERSION "0.0.0-dev"
#endif

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
		if (s[i] == '%' && i + 2 < n && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
			out[o++] = (unsigned char)(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
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
		return err_set(e, "http.proxy", "bad proxy URL: %s", e ? e->msg : "");
	}
	snprintf(px->host, sizeof(px->host), "%s", u.host);
	px->port = u.port; /* 80 unless named, as curl does for http:// */
	px->set = 1;
	return 0;
}

static void
cache_clear(struct http_client *c)
{
	int i;

	for (i = 0; i < HTTP_CONN_CACHE; i++) {
		http__conn_close(c->cache[i]);
		c->cache[i] = NULL;
	}
}

int
http_client_set_proxy(struct http_client *c, const char *https_proxy, const char *http_proxy,
                      const char *no_proxy, struct err *e)
{
	cache_clear(c);
	if (proxy_parse(https_proxy, &c->https_proxy, e) != 0 ||
	    proxy_parse(http_proxy, &c->http_proxy, e) != 0)
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
	http__conn_close(cl->cache[oldest]);
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
		return err_set(e, "http.url", "request header %.40s%s: %s", h, strlen(h) > 40 ? "..." : "",
		               why);
	nl = (size_t)(c - h);
	for (i = 0; i < sizeof(refused_headers) / sizeof(refused_headers[0]); i++) {
		rl = strlen(refused_headers[i]);
		if ((refused_headers[i][rl - 1] == '-' ? nl >= rl : nl == rl) &&
		    strncasecmp(h, refused_headers[i], rl) == 0)
			return err_set(e, "http.url", "request header %.*s is the client's to write", (int)nl,
			               h);
	}
	return 0;
}

static int
same_origin(const struct http_url *a, const struct http_url *b)
{
	return a->https == b->https && a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* POST and PUT carry a body (check_request allows no other method but GET
 * and HEAD). */
static int
has_body(const struct http_request *rq)
{
	return rq->method != NULL && (strcmp(rq->method, "POST") == 0 || strcmp(rq->method, "PUT") == 0);
}

/* The request body after the head: from memory, or from the file read by
 * offset in BODY_CHUNK pieces (the same bytes again on a retry). */
#define BODY_CHUNK (64 * 1024)
static int
send_body(struct conn *c, struct xfer *x, struct err *e)
{
	const struct http_request *rq = x->rq;
	unsigned char *buf;
	int64_t off = 0;
	ssize_t r;

	if (!has_body(rq) || rq->body_len == 0)
		return 0;
	if (rq->body != NULL)
		return http__conn_send(c, rq->body, (size_t)rq->body_len, x, e);
	if ((buf = malloc(BODY_CHUNK)) == NULL)
		return err_set(e, "internal", "out of memory");
	while (off < rq->body_len) {
		size_t want = rq->body_len - off < BODY_CHUNK ? (size_t)(rq->body_len - off) : BODY_CHUNK;
		r = pread(rq->body_fd, buf, want, (off_t)off);
		if (r <= 0) {
			free(buf);
			return err_sys(e, "io.error", errno, "reading the request body: %s",
			               r == 0 ? "the file is shorter than its length" : strerror(errno));
		}
		if (http__conn_send(c, buf, (size_t)r, x, e) != 0) {
			free(buf);
			return -1;
		}
		off += r;
	}
	free(buf);
	return 0;
}

static int
build_request(const struct http_request *rq, const struct http_url *u, const struct proxy *plain_px,
              int with_headers, char *out, size_t cap, struct err *e)
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
	if (has_body(rq)) {
		k = snprintf(out + n, cap - n, "Content-Length: %lld\r\n", (long long)rq->body_len);
		if (k < 0 || (size_t)k >= cap - n)
			return err_set(e, "http.url", "request too long");
		n += (size_t)k;
	}
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

	if (rq->method != NULL && strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0 &&
	    !has_body(rq))
		return err_set(e, "http.url", "method %s is not supported", rq->method);
	if (has_body(rq) && (rq->body_len < 0 || (rq->body == NULL && rq->body_len > 0 && rq->body_fd < 0)))
		return err_set(e, "http.url", "a %s without a usable body", rq->method);
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
exchange(struct http_client *cl, struct xfer *x, const struct http_url *u, const struct proxy *px,
         const char *req, size_t len, struct http_head *h, struct err *e)
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
		if (c == NULL && (c = http__conn_open(u, px, x, e)) == NULL)
			return NULL;
		if (e != NULL)
			err_clear(e);
		got = 0;
		if (http__conn_send(c, req, len, x, e) == 0 && send_body(c, x, e) == 0 &&
		    http__read_head(c, x, h, &got, e) == 0)
			break;
		http__conn_close(c);
		if (!x->rs->reused || got ||
		    (e != NULL && e->code != NULL && strcmp(e->code, "http.timeout") == 0))
			return NULL;
	}
	/* 1xx interim answers (100 Continue, 103 Early Hints): skip. */
	while (h->status >= 100 && h->status < 200 && h->status != 101) {
		if (http__read_head(c, x, h, &got, e) != 0) {
			http__conn_close(c);
			return NULL;
		}
	}
	return c;
}

/* Whether the server lets c be reused after this answer: HTTP/1.1 and no
 * "Connection: close". Taken from the head before its body is read, since
 * the head's views point into c->buf, which a plain-HTTP body read
 * overwrites. */
static int
head_keeps(const struct http_head *h)
{
	return h->minor == 1 && !http__head_token(h, "Connection", "close");
}

/* After a response: keep c for reuse when its body was read to the end
 * (body_rc 0), nothing else is buffered, and neither side said close.
 * Either way c belongs to the cache or is freed afterwards: nothing may
 * read c or a head parsed from c->buf after this call. */
static void
conn_done(struct http_client *cl, struct conn *c, int keep, int body_rc)
{
	if (body_rc == 0 && keep && c->off == c->len && (c->tls == NULL || !tls_closed(c->tls)))
		cache_put(cl, c);
	else
		http__conn_close(c);
}

/* A redirect answer on c (consumed): drain its body, check the hop and set
 * *cur to the target. Returns 0 to follow it, -1 with e set. */
static int
follow_redirect(struct http_client *cl, struct xfer *x, struct conn *c, const struct http_head *h, int keep,
                int kind, int64_t clen, int hop, struct http_url *cur, struct err *e)
{
	const struct http_request *rq = x->rq;
	struct http_response *rs = x->rs;
	const struct http_field *loc = http_head_get(h, "Location");
	char locbuf[HTTP_URL_MAX];
	struct http_url next;
	struct err drain = {0};

	if (loc == NULL || loc->value_len == 0 || loc->value_len >= sizeof(locbuf)) {
		http__conn_close(c);
		return err_set(e, "http.redirect", "%s: %d without a usable Location", rs->url, rs->status);
	}
	memcpy(locbuf, loc->value, loc->value_len);
	locbuf[loc->value_len] = '\0';
	/* The redirect's own body is drained (small) or the connection
	 * dropped; either way it is not an error. */
	conn_done(cl, c, keep, http__read_body(c, x, kind, clen, 0, &drain));
	if (hop + 1 > rq->limits.max_redirects)
		return err_set(e, "http.redirect", "%s: more than %d redirects", rs->url,
		               rq->limits.max_redirects);
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

/* A field that must not be cut (a cut Location names another place): ""
 * when absent or longer than cap - 1. */
static void
copy_whole(const struct http_head *h, const char *name, char *out, size_t cap)
{
	const struct http_field *f = http_head_get(h, name);

	if (f != NULL && f->value_len < cap)
		http__copy_field(h, name, out, cap);
	else
		out[0] = '\0';
}

/* The final answer on c (consumed): a 2xx body to the sink, anything else
 * drained and reported as http.status. */
static int
final_response(struct http_client *cl, struct xfer *x, struct conn *c, const struct http_head *h, int keep,
               int kind, int64_t clen, struct err *e)
{
	const struct http_request *rq = x->rq;
	struct http_response *rs = x->rs;
	struct err tmp = {0};
	char reason[REASON_KEPT];
	int r;

	rs->content_length = kind == HTTP_BODY_CHUNKED ? -1 : clen;
	http__copy_field(h, "Content-Type", rs->content_type, sizeof(rs->content_type));
	http__copy_field(h, "ETag", rs->etag, sizeof(rs->etag));
	http__copy_field(h, "Last-Modified", rs->last_modified, sizeof(rs->last_modified));
	copy_whole(h, "Location", rs->location, sizeof(rs->location));
	copy_whole(h, "WWW-Authenticate", rs->www_authenticate, sizeof(rs->www_authenticate));
	if (h->status / 100 != 2) {
		/* the reason is a view into c->buf: copied before the drain
		 * overwrites it and conn_done frees or caches c */
		snprintf(reason, sizeof(reason), "%.*s", (int)h->reason_len, h->reason);
		conn_done(cl, c, keep, http__read_body(c, x, kind, clen, 0, &tmp));
		return err_set(e, "http.status", "%s: HTTP %d %s", rs->url, rs->status, reason);
	}
	if (rq->limits.max_body > 0 && clen > rq->limits.max_body) {
		http__conn_close(c);
		return err_set(e, "http.too_large", "%s: %lld bytes announced, above the cap of %lld bytes",
		               rs->url, (long long)clen, (long long)rq->limits.max_body);
	}
	r = http__read_body(c, x, kind, clen, 1, e);
	if (r < 0) {
		http__conn_close(c);
		return -1;
	}
	conn_done(cl, c, keep, r);
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
	int head_req = rq->method != NULL && strcmp(rq->method, "HEAD") == 0, hop, r, kind = HTTP_BODY_NONE,
	    keep, with_headers = 1;
	int64_t clen = 0;

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
		r = build_request(rq, &cur, px != NULL && !cur.https ? px : NULL, with_headers, req,
		                  sizeof(req), e);
		if (r < 0 || (c = exchange(cl, &x, &cur, px, req, (size_t)r, &h, e)) == NULL)
			return -1;
		rs->status = h.status;
		if (http__framing(&h, head_req, &kind, &clen, e) != 0) {
			http__conn_close(c);
			return -1;
		}
		keep = head_keeps(&h);
		if (!is_redirect(h.status) || has_body(rq))
			return final_response(cl, &x, c, &h, keep, kind, clen, e);
		if (follow_redirect(cl, &x, c, &h, keep, kind, clen, hop, &cur, e) != 0)
			return -1;
	}
}
