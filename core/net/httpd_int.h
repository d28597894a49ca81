#ifndef ABX_HTTPD_INT_H
#define ABX_HTTPD_INT_H
/*
 * Private to the server's files: httpd.c (listener, accepting, connection
 * slots, the event loop), httpd_conn.c (one connection's request cycle and
 * the worker threads) and httpd_resp.c (building and streaming answers).
 * Threads: everything here belongs to the event thread except where a
 * comment says a worker may touch it.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/buf.h"
#include "net/httpd.h"

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
/* Keys of the access log's fold (struct httpd fold). */
#define HTTPD_FOLD_KEYS 16
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
	int idle;               /* waiting for the first byte of a request */
	int partial;            /* a request partly received stalled (httpd__stalled) */
	int admitted;           /* the gate let its head through: see httpd__stalled */
	int reserve;            /* WHY_*: in a reserve slot (public routes, one answer) */
	int64_t since;          /* monotonic ms since it waits for a request's first byte */
	int64_t heard;          /* monotonic ms of the last bytes received */
	uint64_t owner;         /* of the admitted request (struct httpd_req owner) */
	unsigned char addr[16]; /* peer address (IPv4 v4-mapped), for the per-peer count */
	int close_after;        /* close once the current answer is written */
	int linger;             /* …after reading what the client still sends */
	int budget;
	int64_t deadline; /* monotonic ms; INT64_MAX = none */
	int64_t t_start;  /* first byte of the request, for the log */
	struct cbuf *b;
	struct buf body; /* max: the server's max_body */
	uint64_t body_left;
	struct http_chunked ck;
	const struct httpd_route *route;
	struct buf out; /* the whole answer (httpd_respond), sent from out_off */
	size_t out_off;
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
	} * peers;
	size_t peer_mask;
	/* Bytes of whole answers built and not yet sent (atomic): what clients
	 * that do not read hold, bounded by HTTPD_HELD_MAX through
	 * httpd_resp_room. */
	size_t held;
	/* A flood of refused or malformed requests (4xx, and 503 when full)
	 * must not grow the access log a line per request, whatever paths,
	 * methods and addresses it takes turns with: within one wall-clock
	 * second the first line of each (address, method, path, status) is
	 * written and the rest counted (event thread only); past
	 * HTTPD_FOLD_KEYS keys every other line counts under one more. The
	 * counts are written as "repeated N" lines when the second is over
	 * (the loop wakes for it) or when the server stops: at most
	 * 2 * (HTTPD_FOLD_KEYS + 1) such lines a second. */
	struct fold {
		char key[300]; /* "address method path status" */
		unsigned n;
	} fold[HTTPD_FOLD_KEYS + 1];
	int nfold;
	int fold_status; /* of the key of every other line; 0 once mixed */
	time_t fold_sec;
	unsigned fold_held; /* lines counted and not yet written */
};

/* ---- shared between the server's files, bottom (httpd_table.c) to top
 * (httpd.c): each file calls only those listed before it ------------------ */

/* httpd_table.c */
int httpd__stopping(struct httpd *s);
void httpd__log(struct httpd *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void httpd__q_push(struct queue *q, struct conn *c);
struct conn *httpd__q_pop(struct queue *q);
void httpd__set_deadline(struct httpd *s, struct conn *c, int ms);
void httpd__out_drop(struct conn *c);
void httpd__free_request(struct conn *c);
void httpd__conn_close(struct httpd *s, struct conn *c);
struct cbuf *httpd__get_buf(struct conn *c);
void httpd__put_buf(struct conn *c);
void httpd__busy_reason(struct httpd *s, int why, const char *peer, char *buf, size_t cap);
void httpd__stalled(struct httpd *s, struct conn *c);
/* The entry of addr in the per-address counts, or the empty one where it
 * would go. */
struct peer *httpd__peer_slot(struct httpd *s, const unsigned char *addr);
/* The connection of class admitted that has waited longest for the rest of
 * a request, of one peer address (or of any: addr NULL), other than except. */
struct conn *httpd__oldest_stalled(struct httpd *s, const unsigned char *addr, const struct conn *except,
                                   int admitted);

/* httpd_resp.c */
const char *httpd__reason(int status);
void httpd__release(struct httpd_resp *w);
void httpd__finish_handler(struct conn *c);

/* httpd_conn.c */
void httpd__drive(struct httpd *s, struct conn *c);
void httpd__on_timeout(struct httpd *s, struct conn *c);
void httpd__sweep(struct httpd *s);
void httpd__log_flush_repeats(struct httpd *s);
void httpd__log_request(struct httpd *s, struct conn *c, int status, size_t bytes);
void *httpd__worker(void *arg);
void httpd__take_done(struct httpd *s);

#endif
