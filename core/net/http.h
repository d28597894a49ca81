#ifndef ABX_HTTP_H
#define ABX_HTTP_H
/*
 * HTTP/1.1 client for every download: GET and HEAD over plain TCP or TLS
 * (core/net/tls.h, always verified), Content-Length and chunked bodies,
 * keep-alive reuse per origin, redirects checked hop by hop, timeouts, a
 * minimum-rate guard, a size cap, HTTPS_PROXY / HTTP_PROXY (CONNECT for
 * https) and NO_PROXY. Response heads and chunked framing are read by the
 * wire parsers the server shares (core/net/http_parse.h).
 *
 * The body is never buffered whole: it is handed to the caller's sink as it
 * arrives, so the caller hashes and writes while downloading. Memory is
 * bounded by the connection cache (HTTP_CONN_CACHE connections, each with one
 * TLS I/O buffer of about 33 KiB) whatever the file size.
 *
 * Errors (struct err codes, core/base/errcodes.h):
 *   http.url       URL refused: not http/https, userinfo, raw space/CR/LF/
 *                  control bytes, bad port, too long
 *   http.resolve   host name not resolved
 *   http.connect   TCP connect failed or timed out (connect limit)
 *   http.proxy     the proxy refused CONNECT or is unusable
 *   http.timeout   no byte for read_ms, or the whole-transfer deadline passed
 *   http.too_slow  the minimum-rate guard fired
 *   http.redirect  too many redirects, https -> http, no/bad Location, or a
 *                  hop whose host the caller's rule refused (unless the rule
 *                  set its own code)
 *   http.too_large body (announced or received) above max_body
 *   http.truncated the connection ended before the body did (short
 *                  Content-Length, missing last chunk)
 *   http.protocol  malformed status line, headers, or chunk framing (the
 *                  message says what was wrong)
 *   http.status    final status is not 2xx (rs->status says which)
 *   tls.*          certificate and handshake failures (core/net/tls.h)
 *   or whatever code the sink or host rule set.
 *
 * Threads: a struct http_client is used by one thread at a time. Clients in
 * different threads share nothing but the trust anchors (loaded once).
 */
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "net/http_parse.h"

/* A URL longer than this is refused; real artifact URLs are < 1 KiB, and npm
 * tarball URLs with scoped names stay far below it. */
#define HTTP_URL_MAX 2048
/* DNS names are at most 253 bytes (RFC 1035); an IPv6 literal is shorter. */
#define HTTP_HOST_MAX 256
/* At most 10 redirects are followed; the 11th is refused (registries and
 * CDNs use one or two; more is a loop). */
#define HTTP_REDIRECTS_MAX 10
/* Extra request headers a caller may add (Authorization, Accept, ...). */
#define HTTP_REQ_HEADERS_MAX 8
/* Idle keep-alive connections kept per client. One origin (an npm registry)
 * is the common case; a few more cover a registry plus a redirect target
 * (CDN). Each costs one TLS buffer, so this bounds memory. */
#define HTTP_CONN_CACHE 4
/* First body bytes kept in the response (error pages, mismatch reports). */
#define HTTP_SNIPPET_MAX 256

/* Defaults: a stalled connect or read fails well before an install's own
 * timeout, and a peer trickling under 1 KiB/s over 30 s is given up on. */
#define HTTP_CONNECT_MS_DEFAULT 15000
#define HTTP_READ_MS_DEFAULT 60000
#define HTTP_RATE_WINDOW_MS_DEFAULT 30000
#define HTTP_MIN_RATE_DEFAULT 1024 /* bytes/s averaged over the window */

/* ---- URLs ------------------------------------------------------------- */

struct http_url {
	int https;                 /* 1 https, 0 http */
	char host[HTTP_HOST_MAX];  /* lower-cased; an IPv6 literal without [] */
	int port;                  /* explicit, else 443 / 80 */
	int port_explicit;         /* the URL named the port */
	char target[HTTP_URL_MAX]; /* "/path?query" as sent; fragment dropped */
};

/* Parse an absolute http:// or https:// URL. Refused (http.url): other
 * schemes, userinfo ("user:pw@"), raw space, CR, LF or other control bytes
 * or non-ASCII bytes anywhere, an empty host, a port outside 1..65535, a URL
 * longer than HTTP_URL_MAX. Returns 0 or -1. */
int http_url_parse(const char *url, struct http_url *u, struct err *e);

/* Resolve a Location value (absolute, scheme-relative "//h/p", absolute
 * path "/p", or relative "p") against base into out; same refusals as
 * http_url_parse. Returns 0 or -1. */
int http_url_resolve(const struct http_url *base, const char *ref, struct http_url *out, struct err *e);

/* "https://host[:port]/target" into buf (IPv6 hosts bracketed, default
 * ports omitted). Returns the length, or -1 when it does not fit in cap. */
int http_url_format(const struct http_url *u, char *buf, size_t cap);

/* ---- Client ------------------------------------------------------------ */

/* Decide whether a host may be contacted; called for the first URL and for
 * every redirect hop before anything is sent to it. Return 0 to allow, -1 to
 * refuse (set e to give your own code; left unset the refusal is
 * http.redirect naming the host). */
typedef int (*http_host_rule)(void *arg, const struct http_url *u, struct err *e);

/* Receive body bytes of the final 2xx response as they arrive. Return 0 to
 * go on, -1 to abort (set e). Never called for redirect or error bodies. */
typedef int (*http_sink)(void *arg, const void *buf, size_t len, struct err *e);

struct http_limits {
	int connect_ms;     /* per TCP connect (and proxy CONNECT); default 15 s */
	int read_ms;        /* longest wait for any byte (or to send); 60 s */
	int total_ms;       /* whole request incl. redirects; 0 = no limit */
	int64_t min_rate;   /* bytes/s averaged over rate_window_ms; 0 = off */
	int rate_window_ms; /* default 30 s; the first window starts at the
	                     * first body byte, each later one where the last
	                     * ended */
	int64_t max_body;   /* final body cap in bytes; 0 = no cap */
	int max_redirects;  /* 0..HTTP_REDIRECTS_MAX; default 10 */
};

/* Fill l with the defaults above (no total limit, no body cap). */
void http_limits_default(struct http_limits *l);

struct http_request {
	const char *method; /* "GET" (NULL means GET), "HEAD", "POST" or "PUT" */
	const char *url;
	/* Extra header lines "Name: value", at most HTTP_REQ_HEADERS_MAX. They
	 * go to the host of url only: a redirect to any other host (or port or
	 * scheme) drops them all, so an Authorization or token header never
	 * leaves its origin. Host, Connection, Content-Length, Transfer-Encoding
	 * and Proxy-* are refused (http.url); the client writes those. */
	const char *headers[HTTP_REQ_HEADERS_MAX];
	int nheaders;
	http_host_rule host_ok; /* NULL allows every host */
	void *host_arg;
	http_sink sink; /* NULL discards the body */
	void *sink_arg;
	struct http_limits limits;
	/* The body of a POST or PUT (sent with Content-Length; those methods
	 * always send one, body_len 0 an empty one): body_len bytes at body, or,
	 * when body is NULL, from body_fd read by offset from 0, so a retry on a
	 * new connection sends it again. A redirect answer to a request with a
	 * body is not followed: it is the final answer (http.status). */
	const void *body;
	int body_fd;
	int64_t body_len;
};

/* Initialise rq: GET, no headers, default limits, everything else NULL. */
void http_request_init(struct http_request *rq, const char *url);

struct http_response {
	int status;             /* final status; 0 when none was received */
	int64_t content_length; /* of the final response; -1 when absent */
	int64_t body_bytes;     /* bytes handed to the sink */
	int redirects;          /* hops followed */
	int reused;             /* the final request ran on a cached connection */
	char url[HTTP_URL_MAX]; /* the final URL */
	char content_type[128]; /* "" when absent; cut if longer */
	char etag[128];
	char last_modified[64];
	/* Of the final answer, "" when absent or too long: where a POST's upload
	 * goes on (Location of a 2xx), and how a 401 asks to be authenticated. */
	char location[HTTP_URL_MAX];
	char www_authenticate[1024];
	/* First bytes of the final body (2xx: what the sink got; error status:
	 * the error page), for reports such as "this looks like an HTML page". */
	unsigned char snippet[HTTP_SNIPPET_MAX];
	size_t snippet_len;
};

struct http_client;

/* A client with an empty connection cache and no proxy (the environment's
 * proxies are the configuration layer's: config_http_client). Returns NULL
 * with e set (internal: out of memory). The caller owns the client and
 * frees it with http_client_free. */
struct http_client *http_client_new(struct err *e);

/* Replace the proxy settings (NULL or "" = none). A proxy URL may carry
 * user:password, sent only to the proxy as Proxy-Authorization, never to an
 * origin. Closes cached connections. Returns 0, or -1 with http.proxy for
 * an unusable proxy URL. */
int http_client_set_proxy(struct http_client *c, const char *https_proxy, const char *http_proxy,
                          const char *no_proxy, struct err *e);

/* Close every cached connection and free c. c may be NULL. */
void http_client_free(struct http_client *c);

/* Run rq: connect (or reuse a cached connection to the same origin through
 * the same proxy), send, read the head, follow redirects (301, 302, 303,
 * 307, 308, each hop checked by rq->host_ok; https -> http refused; at most
 * rq->limits.max_redirects), then stream a 2xx body to rq->sink. Before the
 * first sink call rs->status, rs->content_length and rs->url are set, so a
 * sink may read them (e.g. for progress). A connection whose response was
 * read to its end is kept for reuse unless the server said close. A request
 * on a reused connection that fails before any response byte is retried
 * once on a new connection (the server closed an idle connection).
 * Returns 0 for a 2xx response whose body was read completely, else -1 with
 * e set; rs is filled as far as the transfer went. */
int http_request(struct http_client *c, const struct http_request *rq, struct http_response *rs,
                 struct err *e);

#ifdef ABX_TEST
/* Tests: when set, every new connection is this descriptor (a socketpair
 * end the fuzz target fills with a server's bytes) instead of a TCP
 * connect; -1 with e set fails the connect. */
extern int (*http_test_connect)(const struct http_url *u, struct err *e);
#endif

/* ---- Proxy selection (exposed for tests) ------------------------------ */

/* 1 when host:port must bypass the proxy under no_proxy: a comma- or
 * space-separated list of "*" (everything), exact host names or IP
 * literals, ".suffix" or "suffix" (matches the name and its subdomains),
 * each optionally with ":port". Matching is case-insensitive. */
int http_no_proxy_match(const char *no_proxy, const char *host, int port);

#endif
