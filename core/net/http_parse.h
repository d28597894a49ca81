#ifndef ABX_HTTP_PARSE_H
#define ABX_HTTP_PARSE_H
/*
 * The HTTP/1.1 wire (RFC 9112), pure: no I/O, no allocation, views into the
 * caller's buffer. One grammar for a field line, used by the server's
 * request parser, the client's response parser and the chunked decoder's
 * trailers: a name of token characters, a colon, a value of visible bytes,
 * SP, HTAB and obs-text (leading and trailing blanks dropped), CRLF. A line
 * that starts with a blank (obs-fold), a bare CR, a control byte and an
 * empty name are refused. One chunked decoder for request and response
 * bodies. A client reading a response also takes a bare LF as a line end
 * (HTTP_LF_OK: many small servers send them); the server never does, since
 * that leniency is where request smuggling starts.
 *
 * Framing is decided once, by the same rule for a request the server reads
 * and a response the client reads (http_framing_*): strict where leniency
 * has been the root of smuggling and response splitting. The server's
 * request parser also refuses HTTP/1.1 without exactly one Host and a
 * malformed request line.
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
/* A chunk-size line with its extensions. Nobody sends extensions to this
 * API or from a registry; the bound stops a peer that streams an endless
 * one. */
#define HTTP_CHUNK_LINE_MAX 4096
/* Trailer section after the last chunk: bytes and field count. Trailers are
 * read and discarded; these bound the work. */
#define HTTP_CHUNK_TRAILER_MAX 8192
#define HTTP_CHUNK_TRAILERS_MAX 32
/* A chunk size must be below 2^60: no real body comes near, and the sum of
 * the sizes cannot overflow 64 bits. */
#define HTTP_CHUNK_SIZE_LIMIT ((uint64_t)1 << 60)
/* Response head (status line + fields): 16 KiB is what nginx and most
 * servers send at most by default; more is a hostile or broken peer. */
#define HTTP_HEAD_MAX 16384
/* Header fields kept per response; extra fields are an error (hostile peer). */
#define HTTP_FIELDS_MAX 64

/* Flag for the line grammar: a bare LF ends a line (a client reading a
 * response; never a server). */
#define HTTP_LF_OK 1

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

/* NULL when line[0..n) (no line end) is one field line of the grammar
 * above, else what is wrong with it (a static string). */
const char *http_field_check(const char *line, size_t n);

/* ---- Message framing (RFC 9112 §6) ----------------------------------- */

/* How a message body ends. */
enum http_body {
	HTTP_BODY_NONE,    /* no body */
	HTTP_BODY_LENGTH,  /* Content-Length bytes */
	HTTP_BODY_CHUNKED, /* Transfer-Encoding: chunked */
	HTTP_BODY_CLOSE,   /* a response without either: until the peer closes */
};

/* The framing fields of one head, fed one field at a time. */
struct http_framing {
	int ncl, nte;
	int64_t length; /* Content-Length; -1 when absent */
	int status;     /* on -1: 400, or 501 for a transfer coding we lack */
	const char *why;
};

void http_framing_init(struct http_framing *f);

/*
 * One field line of the head (name and value as the field grammar left
 * them, blanks trimmed); names other than Content-Length and
 * Transfer-Encoding are ignored. Returns 0, or -1 with f->status and f->why:
 * a Content-Length that is not 1 to 18 digits, or a second one even with
 * the same value (RFC 9112 §6.3 lets a recipient refuse it; two parsers that
 * differ on it are how smuggling starts); a Transfer-Encoding other than
 * exactly "chunked" (501), or a second one.
 */
int http_framing_field(struct http_framing *f, const char *name, size_t nlen, const char *value, size_t vlen);

/*
 * After the last field: the body's framing (enum http_body), or -1 with
 * f->status 400 and f->why for Content-Length with Transfer-Encoding, or
 * Transfer-Encoding in HTTP/1.0 (minor 0: RFC 9112 §6.1 calls its framing
 * faulty). response: without either field a response runs until close
 * (HTTP_BODY_CLOSE), a request has no body (HTTP_BODY_NONE). Whether a
 * response may have a body at all (HEAD, 1xx, 204, 304) is the caller's.
 */
int http_framing_end(struct http_framing *f, int minor, int response);

/* ---- Response head (the client's) --------------------------------- */

struct http_field {
	const char *name; /* views into the caller's buffer, not terminated */
	size_t name_len;
	const char *value; /* leading/trailing blanks trimmed */
	size_t value_len;
};

struct http_head {
	int minor;  /* HTTP/1.<minor> (0 or 1) */
	int status; /* 100..599 */
	const char *reason;
	size_t reason_len;
	struct http_field fields[HTTP_FIELDS_MAX];
	int nfields;
	const char *why; /* on -1: what was wrong, a static string */
};

/* Parse a response head at buf[0..len): status line, fields, blank line,
 * lines ending in CRLF or a bare LF. Returns the bytes consumed through the
 * blank line (>0), 0 when more bytes are needed (and len < HTTP_HEAD_MAX),
 * or -1 with h->why (malformed, obsolete line folding, more than
 * HTTP_FIELDS_MAX fields, or HTTP_HEAD_MAX reached without the end). Views
 * in h point into buf. */
int http_parse_head(const char *buf, size_t len, struct http_head *h);

/* The first field named name (case-insensitive), or NULL. */
const struct http_field *http_head_get(const struct http_head *h, const char *name);

/* ---- Chunked transfer coding (RFC 9112 §7.1) ------------------------ */

/*
 * A byte-driven state machine, so framing may be split anywhere across
 * reads. chunk-size is hex below HTTP_CHUNK_SIZE_LIMIT (leading zeros are
 * fine); blanks may follow it only before ';' and the extensions, which
 * are visible bytes, SP or HTAB, the whole line at most
 * HTTP_CHUNK_LINE_MAX bytes; every chunk's data ends with exactly CRLF (or
 * LF under HTTP_LF_OK); trailers are field lines (the grammar above),
 * dropped, bounded by HTTP_CHUNK_TRAILER_MAX and HTTP_CHUNK_TRAILERS_MAX.
 */
struct http_chunked {
	int state;
	unsigned flags;    /* HTTP_LF_OK */
	int digits;        /* hex digits of the current size */
	uint64_t left;     /* data bytes left in the current chunk */
	uint64_t total;    /* data bytes decoded so far */
	uint64_t max_body; /* over it: status 413; UINT64_MAX = no cap */
	size_t line;       /* bytes of the current size/extension line */
	int fl;            /* field-line state of the current trailer */
	size_t trailer_bytes;
	int ntrailers;
	int done;   /* the last chunk and the trailer section were read */
	int status; /* on -1: 400 (framing) or 413 (over max_body) */
	const char *why;
};

void http_chunked_init(struct http_chunked *c, uint64_t max_body, unsigned flags);

/* Consume a prefix of in[0..len). Returns the bytes consumed (>0); when the
 * prefix is chunk data, *data and *dlen name it (a view into in), otherwise
 * *dlen is 0. Returns 0 when len is 0 or c->done (the bytes after the body
 * belong to the next message), -1 with c->status and c->why on bad framing
 * or a body over max_body; once -1, every later call is -1. Feeding the
 * same bytes split anywhere gives the same result. */
long http_chunked_step(struct http_chunked *c, const unsigned char *in, size_t len,
                       const unsigned char **data, size_t *dlen);

#endif
