#ifndef ABX_HTTP_INT_H
#define ABX_HTTP_INT_H
/*
 * Private to the HTTP client's files: http.c (clients, the connection
 * cache, proxies, requests and redirects) and http_conn.c (one
 * connection: open through a proxy and TLS, send and receive under the
 * deadlines, read a head, read a body by its framing).
 */
#include <stddef.h>
#include <stdint.h>

#include "net/http.h"
#include "net/tls.h"

/* Read buffer per connection: a whole response head must fit, and bigger
 * reads cost fewer system calls on plain HTTP. */
#define CONN_BUF (2 * HTTP_HEAD_MAX)
/* Request head we write: request line with the longest URL, Host, our few
 * headers and the caller's. */
#define REQ_MAX (HTTP_URL_MAX + 4096)
/* The reason phrase an http.status message keeps ("Service Unavailable");
 * a longer one is cut: real ones are a few words. */
#define REASON_KEPT 128
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

/* One http_request across its hops: the caller's request and response,
 * the deadlines and the minimum-rate window. */
struct xfer {
	const struct http_request *rq;
	struct http_response *rs;
	struct tls_timing tm;
	int64_t end_ms;
	/* rate guard */
	int64_t win_start, win_bytes;
};

/* http.c */
void http__conn_close(struct conn *c);

/* http_conn.c */
struct conn *http__conn_open(const struct http_url *u, const struct proxy *px, struct xfer *x, struct err *e);
int http__conn_send(struct conn *c, const void *buf, size_t len, struct xfer *x, struct err *e);
int http__read_head(struct conn *c, struct xfer *x, struct http_head *h, int *got, struct err *e);
int http__head_token(const struct http_head *h, const char *name, const char *token);
void http__copy_field(const struct http_head *h, const char *name, char *out, size_t cap);
int http__framing(const struct http_head *h, int head_req, int *kind, int64_t *clen, struct err *e);
int http__read_body(struct conn *c, struct xfer *x, int kind, int64_t clen, int to_sink, struct err *e);

#endif
