#ifndef ABX_HTTPD_H
#define ABX_HTTPD_H
/*
 * The HTTP/1.1 server core every endpoint of the API plugs into.
 *
 * Threads: one event thread (the caller of httpd_run) accepts connections
 * and reads requests with epoll, non-blocking, each connection under a
 * deadline (header, body, idle keep-alive, write). A complete request goes
 * to a fixed pool of worker threads, so a slow handler never stops other
 * connections from being read, and a slow client never holds a worker: the
 * worker builds the whole response in memory and the event thread writes it.
 * Routes marked HTTPD_INLINE (handlers that never block, like /health) run
 * on the event thread and skip the two thread hand-offs.
 *
 * Memory: the connection table is sized at start (HTTPD config max_conns,
 * plus reserve slots for loopback clients). A connection's buffers
 * are allocated when its first byte arrives and released when it goes idle,
 * so idle connections cost a table slot and a socket.
 *
 * Limits: a client address holds at most max_conns_per_peer connections.
 * A new connection over that limit, or with every slot taken, first closes
 * the longest-waiting connection that holds no request (an idle keep-alive
 * one or one that never sent a byte), else the one that has waited longest
 * for the rest of a request (a head, or a body the gate has not let
 * through): of its own address for the address limit, for a full table of
 * the address holding the most connections, the one that has received
 * nothing for longest. A whole request is never closed this way, and one
 * whose head the gate admitted (an authorized upload) only when the table is
 * full and its body has received nothing for HTTPD_STALL_MS. One address holds at
 * most HTTPD_PARTIAL_PER_PEER partly sent requests of each kind, unvetted
 * and admitted (a stalled one over it closes the address's oldest of its
 * kind), so the body deadline is the only other end of an admitted one.
 * Only when every candidate is in a handler or being answered is the new one
 * refused with 503 request.busy (written without blocking) - unless it comes
 * from loopback: then it gets one of the reserve slots, which answer only
 * HTTPD_PUBLIC routes (GET /health; any other request gets the 503) and
 * close after one answer; with the reserve full, its oldest connection still
 * reading a head makes room. So neither idle floods nor slow heads and
 * bodies lock clients out until a timeout, and a health check from inside
 * the container is answered whatever the load.
 *
 * Errors: every error answer is the JSON envelope {"error": {"code",
 * "message", "details", "remedy"}} (httpd_error_body) built from the
 * core/base/err.h table, with Connection: close; parse errors close the
 * connection after the answer (lingering to read what the client still
 * sends, so it sees the answer instead of a reset).
 */
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "net/http_parse.h"

/* Defaults; each is a field of struct httpd_config. */
#define HTTPD_MAX_CONNS_DEFAULT 1024 /* each slot is ~200 bytes until used */
/* Slots past max_conns for loopback clients only, that answer nothing but
 * HTTPD_PUBLIC routes (GET /health) and close after one answer: when every
 * slot holds a request in progress (nothing to reclaim), the container's
 * health check still gets its answer, and a client over a limit gains no
 * capacity from them. A few are enough: a probe is answered inline. */
#define HTTPD_RESERVE_DEFAULT 4
#define HTTPD_WORKERS_DEFAULT 8           /* handlers that wait (installs, ops) */
#define HTTPD_MAX_BODY_DEFAULT (1u << 20) /* JSON op arguments are < 64 KiB */
#define HTTPD_HEADER_TIMEOUT_MS 10000     /* whole head, from its first byte */
/* Connections of one client address that hold part of a request and wait
 * for the rest, counted apart for heads (and bodies of public routes, or
 * with no gate) and for bodies the gate admitted. A client sends a request
 * in one write, or a few for a big body, so its connections are in this
 * state for a round trip or so; 8 covers a proxy forwarding a few requests
 * that arrive in pieces at once. A connection that stalls over the limit
 * closes the address's oldest stalled one of its kind: slow heads (no
 * token needed) hold at most 8 slots per address, so neither one address
 * (everyone behind one proxy) nor a handful of addresses reach
 * max_conns_per_peer or max_conns with them, and they never close an
 * admitted upload. */
#define HTTPD_PARTIAL_PER_PEER 8
/* One owner (struct httpd_req owner) holds at most max_conns / 4 request
 * slots with admitted requests: a principal whose requests are all denied
 * still cannot fill the table with bodies it never finishes. */
#define HTTPD_OWNER_SHARE 4
/* An admitted body that has received nothing for this long is closed when
 * the table is full and nothing else can make room: a stall no client
 * that is sending its body makes (TCP retransmits back off to 1 s first). */
#define HTTPD_STALL_MS 2000
#define HTTPD_IDLE_TIMEOUT_MS 60000  /* keep-alive wait for the next request */
#define HTTPD_BODY_TIMEOUT_MS 30000  /* whole body: 1 MiB at 35 KB/s */
#define HTTPD_WRITE_TIMEOUT_MS 30000 /* a response or stream chunk to a client that does not read */
/* SIGTERM drain: docker stop sends SIGKILL 10 s after SIGTERM; finish
 * before that so in-flight answers go out and the exit status is ours. */
#define HTTPD_DRAIN_MS 8000

/* Worker thread stacks. Handlers keep big buffers on the heap; 128 KiB is
 * 8x what they need and keeps 8 workers' reservations at 1 MiB. */
#define HTTPD_STACK_SIZE (128 * 1024)
/* Extra response header bytes a handler may add (Allow, Retry-After,
 * Location, WWW-Authenticate, …). */
#define HTTPD_RESP_HEADERS_MAX 1024
/* An error response's envelope (message, details and remedy included): a
 * message of control bytes escapes to 6 bytes each (\u0001). */
#define HTTPD_ERROR_BODY_MAX (6 * ERR_MSG_MAX + ERR_DETAILS_MAX + 1024)

struct httpd;
struct httpd_resp;

/* A request as handlers see it. Strings are NUL-terminated and live until
 * the handler has produced its response. */
struct httpd_req {
	const char *method; /* "GET" */
	const char *path;   /* as sent, still percent-encoded; "/v1/ops/x" */
	const char *query;  /* after '?', "" when none */
	const char *body;   /* NUL-terminated copy; "" when none */
	size_t body_len;
	const char *peer;            /* "127.0.0.1:53211" */
	const struct http_req *head; /* every field (views into the head) */
	void *ctx;                   /* set by the gate (e.g. the principal), else NULL */
	/* Set by the gate: who the credential names (a hash of the principal),
	 * 0 for no one in particular. The admitted requests of one owner that
	 * are read or run (body, handler) hold at most 1/HTTPD_OWNER_SHARE of
	 * max_conns; one past that is answered 429 request.rate_limited. */
	uint64_t owner;
};

/* The value of the first field named name (case-insensitive), NUL-terminated,
 * or NULL. */
const char *httpd_req_header(const struct httpd_req *r, const char *name);
/* How many fields are named name. */
int httpd_req_header_count(const struct httpd_req *r, const char *name);

typedef void (*httpd_handler)(const struct httpd_req *req, struct httpd_resp *resp, void *arg);

enum {
	HTTPD_EXACT = 0,  /* path equals route path */
	HTTPD_PREFIX = 1, /* path starts with route path */
	HTTPD_INLINE = 2, /* run on the event thread: the handler must never block */
	HTTPD_PUBLIC = 4, /* the gate is not consulted (GET /health) */
};

/* One route. The table is searched in order: the first route whose path
 * matches and whose method equals the request's runs (HEAD runs a GET route
 * and drops the body; method "*" takes any method, path "" with HTTPD_PREFIX
 * any target, "OPTIONS *" included). A path that matches only under other
 * methods answers 405 with Allow; no match answers 404 not_found. */
struct httpd_route {
	const char *method; /* "GET", …, or "*" for any */
	const char *path;
	int flags;
	httpd_handler fn;
	void *arg;
};

/* Consulted for every request except those of HTTPD_PUBLIC routes, as soon
 * as its head is complete: before 404/405 are decided, so an
 * unauthenticated client learns nothing about which paths exist, and
 * before any of its body is read (req->body is "" here, and 100 Continue
 * is sent only after it), so a refused client never holds a slot with a
 * slow body. route is the matched route or NULL. Runs on the event thread:
 * it must not block (hashing a token is fine). Return 0 to let the request
 * through (req->ctx and req->owner may be set; a partly sent body of it
 * is then reclaimed only as HTTPD_PARTIAL_PER_PEER and HTTPD_STALL_MS
 * say), or non-zero
 * after answering through resp (401, 403, 429, …): the connection closes
 * after that answer, the body unread. */
typedef int (*httpd_gate)(struct httpd_req *req, const struct httpd_route *route, struct httpd_resp *resp,
                          void *arg);

/* Called once per answered request (also 503-when-full, with route NULL) on
 * the event thread, for metrics: route (NULL when none matched), status,
 * body bytes, microseconds from the first byte of the request. */
typedef void (*httpd_observe)(void *arg, const struct httpd_route *route, int status, size_t bytes,
                              int64_t usec);

struct httpd_config {
	const char *host; /* numeric or a name; NULL = 0.0.0.0 */
	int port;         /* 0 = any free port (see httpd_port) */
	int max_conns;
	int max_conns_per_peer; /* per client address; 0 = max_conns */
	int reserve;            /* loopback reserve slots, 0..64 */
	int workers;
	size_t max_body;
	size_t max_head; /* request head bytes, 431 beyond (HTTP_REQ_HEAD_LIMIT_MIN..MAX) */
	int header_timeout_ms, idle_timeout_ms, body_timeout_ms, write_timeout_ms, drain_ms;
	int access_log;                   /* one line per request on stderr */
	int verbose;                      /* also connection events (503 full, timeouts) */
	const struct httpd_route *routes; /* not copied: must outlive the server */
	int nroutes;
	httpd_gate gate; /* NULL: every request passes */
	void *gate_arg;
	httpd_observe observe;
	void *observe_arg;
	/* NULL, or called on the event thread after every wake-up for work
	 * due later (audit records a fold holds back): returns the ms after
	 * which to be called again, or -1 for the next wake-up. Must not
	 * block, and is called every turn, so it must be cheap when idle. */
	int (*tick)(void *arg);
	void *tick_arg;
};

void httpd_config_defaults(struct httpd_config *c);

/* Bind, listen, size the tables, start the workers. Returns the server or
 * NULL with e set (config.invalid for bad limits or an unknown host,
 * io.error when the address cannot be bound). Ignore SIGPIPE is not needed:
 * every write uses MSG_NOSIGNAL. */
struct httpd *httpd_new(const struct httpd_config *c, struct err *e);

/* The bound port (the chosen one when config port was 0). */
int httpd_port(const struct httpd *s);

/* Serve until httpd_stop, then drain: stop accepting, close idle
 * connections, let requests in progress finish for at most drain_ms, and
 * return. Returns 0 when everything finished, 1 when the drain time ran out
 * (handlers still running are left to process exit), -1 with e set when the
 * event loop itself failed. */
int httpd_run(struct httpd *s, struct err *e);

/* Ask httpd_run to drain and return. Async-signal-safe: call it from a
 * SIGTERM handler. */
void httpd_stop(struct httpd *s);

/* Free everything. After a drain that timed out (handlers still running)
 * this only closes the listening socket: memory a worker may still touch
 * is left to process exit. */
void httpd_free(struct httpd *s);

/* ---- responses (from a handler, once per request) --------------------- */

/* Add a response header before responding. "name: value" must be one field
 * line of the wire grammar (core/net/http_parse.h: a token name, a value of
 * visible bytes, SP and HTAB, no CR or LF). Returns 0, or -1 (invalid, or
 * HTTPD_RESP_HEADERS_MAX reached). */
int httpd_resp_header(struct httpd_resp *w, const char *name, const char *value);

/* The whole response at once: status, Content-Type, body (copied). Returns 0,
 * or -1 when a response was already produced or memory ran out. */
int httpd_respond(struct httpd_resp *w, int status, const char *content_type, const void *body, size_t len);

/* Whole answers wait in memory until the client reads them; a client that
 * never reads holds its answer until the connection ends. Across the server
 * they may hold this much: 64 MiB is 16 default-sized op answers (4 MiB each,
 * see core/server/api_ops.c) and far above what /health, errors and listings need. */
#define HTTPD_HELD_MAX ((size_t)64 << 20)
/* Bytes an answer built now may take within HTTPD_HELD_MAX (0 when it is
 * spent). Advisory: answers built at the same moment on other threads are
 * not counted until they are handed over. */
size_t httpd_resp_room(const struct httpd_resp *w);

/* application/json body (a NUL-terminated JSON text). */
int httpd_respond_json(struct httpd_resp *w, int status, const char *json);

/* The error envelope {"error":{"code","message","details","remedy"}} with
 * the status of e->code in the core/base/err.h table; e->msg (or the table's
 * sentence) is the message and its details (err_details_text) the details
 * object. */
int httpd_respond_err(struct httpd_resp *w, const struct err *e);
int httpd_respond_errf(struct httpd_resp *w, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Streaming (Server-Sent Events and other long answers). Only from a worker
 * route (not HTTPD_INLINE). httpd_stream_begin sends the status line and
 * headers with Transfer-Encoding: chunked (HTTP/1.0 clients: the body is
 * delimited by closing the connection). Each httpd_stream_write sends one
 * chunk at once, waiting at most write_timeout_ms for the client to take
 * it. httpd_stream_end sends the last chunk; a handler that returns without
 * it gets it sent for it. Every call returns 0, or -1 once the client is
 * gone or too slow (stop producing then: the connection will be closed).
 */
int httpd_stream_begin(struct httpd_resp *w, int status, const char *content_type);
int httpd_stream_write(struct httpd_resp *w, const void *data, size_t len);
int httpd_stream_end(struct httpd_resp *w);

/*
 * Deferred answers: a handler that must wait (an install job, a session's
 * next event) calls httpd_defer(resp) and returns, freeing its worker (or the
 * event thread, for an HTTPD_INLINE route). Later, any one thread answers
 * through the same resp (httpd_respond*, or httpd_stream_* which then writes
 * from that thread) and calls httpd_complete(resp) exactly once; resp and
 * req stay valid until then. The server applies no deadline meanwhile: the
 * holder owns the timeout (e.g. an install waiter answers 202 when its wait
 * is over). A drain waits
 * for deferred answers like any other request in progress.
 */
void httpd_defer(struct httpd_resp *w);
void httpd_complete(struct httpd_resp *w);

/* 1 when the server is draining (SIGTERM): long-running streams should end. */
int httpd_resp_closing(const struct httpd_resp *w);

/* Write into buf the JSON error envelope for code/msg/details_json (NULL or
 * "" = {}); remedy comes from the error table. Returns the length, or -1 if
 * it does not fit. */
int httpd_error_body(char *buf, size_t cap, const char *code, const char *msg, const char *details_json);

#endif
