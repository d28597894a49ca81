#ifndef ABX_HTTP_PARSE_H
#define ABX_HTTP_PARSE_H
/*
 * HTTP/1.1 request parsing for the server (RFC 9112), pure: no I/O, no
 * allocation, views into the caller's buffer. Strict where leniency has been
 * the root of request smuggling: Content-Length with Transfer-Encoding,
 * repeated or malformed Content-Length, obs-fold, bare CR or LF, invalid
 * field names or values, HTTP/1.1 without exactly one Host, a malformed
 * request line, and malformed chunked framing are all refused.
 *
 * (The client's response parser lives in core/http.h; the names here carry
 * http_req_ so the two never collide.)
 */
#include <stddef.h>
#include <stdint.h>

/* The whole request head (request line + fields + blank line). 16 KiB is
 * what nginx accepts by default with large_client_header_buffers and far
 * above any real client of this API (a bearer token and a few fields). */
#define HTTP_REQ_HEAD_MAX 16384
/* The range a server may configure instead (server.max_header_bytes): a
 * request line and a token need ~300 bytes; 1 MiB bounds a buffer that
 * every connection in a request holds. */
#define HTTP_REQ_HEAD_LIMIT_MIN 1024
#define HTTP_REQ_HEAD_LIMIT_MAX (1u << 20)
/* Header fields per request; real clients send under 20. The cap bounds the
 * fixed array below (and the linear lookups over it). */
#define HTTP_REQ_MAX_FIELDS 100
/* The request-target: our longest route plus a query is under 200 bytes;
 * 8 KiB is the minimum RFC 9112 §3 recommends supporting. */
#define HTTP_REQ_TARGET_MAX 8192
/* Longer than any registered method name (RFC 9110 and WebDAV's are <= 17):
 * a longer "method" is answered 501 without reading further. */
#define HTTP_REQ_METHOD_MAX 24
/* A chunk-size line with extensions. Nobody sends extensions to this API;
 * the bound stops a peer that streams an endless extension. */
#define HTTP_REQ_CHUNK_LINE_MAX 1024
/* Trailer section after the last chunk: bytes and field count. Trailers are
 * read and discarded; these bound the work. */
#define HTTP_REQ_TRAILER_MAX 4096
#define HTTP_REQ_MAX_TRAILERS 32

struct http_view {
	const char *p; /* into the caller's buffer (or a static string), not terminated */
	size_t n;
};

struct http_req_field {
	struct http_view name;  /* a token; compare case-insensitively */
	struct http_view value; /* leading and trailing blanks removed */
};

struct http_req {
	struct http_view method; /* a token, case-sensitive ("GET") */
	struct http_view target; /* as sent */
	struct http_view path;   /* origin-form path; for absolute-form the path part ("/" if empty) */
	struct http_view query;  /* after '?', without it; n = 0 when absent */
	int has_query;
	int minor; /* HTTP/1.<minor>: 0 or 1 (1.2 … 1.9 are read as 1.1) */
	int nfields;
	struct http_req_field fields[HTTP_REQ_MAX_FIELDS];
	int64_t content_length; /* -1 when absent */
	int chunked;            /* Transfer-Encoding: chunked */
	int keep_alive;         /* after the version default and Connection */
	int expect_continue;    /* Expect: 100-continue */
	/* On -1: the status to answer (400, 413, 414, 431, 501, 505) and a short
	 * static reason for the error message and the log. */
	int status;
	const char *why;
};

/*
 * Parse a request head at buf[0..len). Leading empty lines (CRLF) before the
 * request line are skipped (RFC 9112 §2.2). Returns the bytes consumed
 * through the blank line (> 0; the body, if any, follows), 0 when more bytes
 * are needed (everything so far is valid and under the limits), or -1 with
 * r->status and r->why set. Early errors are reported as soon as the bytes
 * that prove them are present: a target longer than HTTP_REQ_TARGET_MAX is
 * 414 before its end arrives, HTTP_REQ_HEAD_MAX bytes without the blank line
 * are 431. Views in r point into buf; r is fully rewritten by every call, so
 * a caller may call again on the same buffer after it grows.
 */
int http_req_parse(struct http_req *r, const char *buf, size_t len);

/* http_req_parse with head_max in place of HTTP_REQ_HEAD_MAX (clamped to
 * HTTP_REQ_HEAD_LIMIT_MIN..HTTP_REQ_HEAD_LIMIT_MAX): a head that has not
 * ended within head_max bytes, or ends after them, is 431. */
int http_req_parse_max(struct http_req *r, const char *buf, size_t len, size_t head_max);

/* The first field named name (ASCII case-insensitive), or NULL. */
const struct http_req_field *http_req_field(const struct http_req *r, const char *name);

/* How many fields are named name (duplicates matter for auth headers). */
int http_req_field_count(const struct http_req *r, const char *name);

/*
 * Incremental chunked body decoder (RFC 9112 §7.1): chunk-size is hex, at
 * most 16 digits (no overflow), optionally followed by extensions (bounded by
 * HTTP_REQ_CHUNK_LINE_MAX, no control bytes); every chunk's data ends with
 * exactly CRLF; trailers are validated as fields and dropped, bounded by
 * HTTP_REQ_TRAILER_MAX and HTTP_REQ_MAX_TRAILERS.
 */
struct http_req_chunked {
	int state;
	int digits;
	uint64_t left;     /* data bytes left in the current chunk */
	uint64_t total;    /* data bytes decoded so far */
	uint64_t max_body; /* over it: status 413 */
	size_t line;       /* bytes of the current size/extension line */
	size_t trailer_bytes;
	int ntrailers;
	int done;   /* the last chunk and the trailer section were read */
	int status; /* on -1: 400 or 413 */
	const char *why;
};

void http_req_chunked_init(struct http_req_chunked *c, uint64_t max_body);

/*
 * Decode framing from in[0..len), writing chunk data to out (out may be in
 * itself: data is only ever moved towards the front). The caller provides
 * room for min(len, max_body - total) bytes at out. Returns the bytes of in
 * consumed: all of them unless the body ended (c->done), in which case the
 * rest belongs to the next request. *nout receives the data bytes written.
 * Returns -1 with c->status and c->why on malformed framing (400) or a body
 * above max_body (413). Feeding the same bytes split anywhere gives the same
 * result.
 */
int http_req_chunked_decode(struct http_req_chunked *c, const char *in, size_t len, char *out, size_t *nout);

#endif
