#ifndef ABX_API_H
#define ABX_API_H
/*
 * The operations API of serve: authentication, policy, routing,
 * command ops, install on first use, runtimes, jobs, metrics, audit.
 *
 * Every request except GET /health is authenticated before it is routed,
 * so an unknown path and a known one answer the same 401. A request then
 * runs against one configuration generation (struct api_gen: configuration,
 * policy, op registry), taken with a reference at its
 * start; SIGHUP builds a new generation and swaps it in atomically, and a
 * bad file keeps the old one (api_reload).
 *
 * Threads: handlers run on httpd's worker threads; a command op that
 * outlasts API_RUN_INLINE_MS is handed to the op runner thread (api_ops.c),
 * which answers it, so ops that run long never hold a worker; everything
 * shared is behind api's mutex or atomic counters.
 */
#include <pthread.h>
#include <stdint.h>

#include "config/config.h"
#include "base/err.h"
#include "net/httpd.h"
#include "server/jobs.h"
#include "server/ops.h"
#include "server/policy.h"
#include "server/tokfile.h"
#include "install/tools.h"

struct manifest_set;

/* Token bytes accepted; a sha256 hex token is 64. Longer is auth.invalid
 * without hashing megabytes. */
#define API_TOKEN_MAX 512
/* Generated tokens: 32 random bytes, hex. */
#define API_TOKEN_BYTES 32
/* Command op output kept per stream when server.max_output_bytes is 0. */
#define API_OUTPUT_DEFAULT (1u << 20)
/* Retry-After of a 429 (an op at its concurrency limit): runs are short. */
#define API_BUSY_RETRY_AFTER 1
/* Request bodies of ops are small JSON objects. */
#define API_BODY_JSON_MAX (256u << 10)

/* GET /ready looks at the tools at most this often per generation. */
#define API_READY_MS 1000

/* One configuration generation. */
struct api_gen {
	int refs; /* under api.mu: requests, job threads and sessions using it */
	struct config cfg;
	struct policy pol;
	struct ops ops;
	int ops_ready;
	/* GET /ready's look at the tools, kept API_READY_MS (under api.mu):
	 * an unauthenticated caller can ask at any rate */
	int64_t ready_us;
	struct err *ready_err; /* NULL = every tool ready */
};

/* Route labels for metrics. */
enum api_route {
	R_HEALTH,
	R_OPS_LIST,
	R_OPS_RUN,
	R_RUNTIMES,
	R_RUNTIME,
	R_RUNTIME_INSTALL,
	R_JOB,
	R_METRICS,
	R_UNAUTHORIZED, /* refused before routing */
	R_SERVER,       /* answered by the server core: malformed, too large, timed out, slots full */
	R_NOT_FOUND,
	R_SESSIONS, /* /v1/agents/sessions… (api_wire.c) */
	R_READY,
	R_NROUTES
};

/* Status codes counted one by one; others fall into API_STATUS_OTHER. */
#define API_NSTATUS 21
#define API_NBUCKETS 12

struct api_metrics {
	uint64_t req[R_NROUTES][API_NSTATUS + 1];
	uint64_t hist[R_NROUTES][API_NBUCKETS + 1]; /* cumulative when printed */
	uint64_t sum_us[R_NROUTES];                 /* microseconds */
	uint64_t count[R_NROUTES];
	uint64_t auth_failures, policy_denials, ops_run, ops_timeouts, ops_rejected_busy;
};

/* The running-count of one op id (its concurrency limit). */
struct api_opcount {
	char id[OP_ID_MAX];
	int running;
};

struct api {
	pthread_mutex_t mu;
	struct api_gen *gen;       /* current generation; one reference held by api */
	struct manifest_set *ms;   /* not owned */
	struct jobs *jobs;         /* owned */
	struct sessions *sessions; /* agent sessions (api_sessions_init); NULL = none */
	struct api_metrics m;      /* under mu */
	struct api_opcount opc[OPS_MAX];
	int nopc;
	/* The token of principal `default` (ABX_SERVER_TOKEN or generated):
	 * only its digest, added to every generation's policy. */
	int have_default_digest;
	unsigned char default_digest[32];
	/* server.token_file's token, principal default's instead (NULL = not
	 * configured): until it is read every request but /health and /ready
	 * answers 503 server.not_initialised */
	struct tokfile *tf;
	char *const *start_env; /* serve's start environment (env allow-lists read it) */
	/* Requests waiting for an install hold a worker thread each; at most
	 * this many wait at once (half the workers, at least one), the rest
	 * get their 202 at once, so installs never starve other requests. */
	int max_install_waiters;
	int install_waiters; /* under mu */
	int verbose;
	struct api_runner *runner; /* command ops in progress (api_ops.c); NULL until the first */
	/* The state directory serve started with, opened by fs_dir_open_safe
	 * (no link another user made is followed): session journals live
	 * under it whatever happens to its path's ancestors later. */
	int have_state_fd;
	int state_fd;
};

/*
 * Build a generation (cfgstack_load): configuration (file_flag, the
 * process environment, flags), policy, ops (agents checked against ms),
 * plus the default principal's digest when given. Returns NULL with e set
 * (config.invalid, json.*).
 */
struct api_gen *api_gen_build(const char *file_flag, const struct config_flag *flags, int nflags,
                              struct manifest_set *ms, const unsigned char *default_digest, struct err *e);
void api_gen_free(struct api_gen *g);

/* Set up a with its first generation (ownership of g passes to a) and a job
 * table installing ms's tools (install_ensure). Returns 0 or -1 (e). */
int api_init(struct api *a, struct api_gen *g, struct manifest_set *ms, struct err *e);
void api_free(struct api *a);

/* Swap in g (owned by a from now on); the old generation is freed when its
 * last request ends. */
void api_swap(struct api *a, struct api_gen *g);

/* A reference to the current generation; api_gen_put when done. */
struct api_gen *api_gen_get(struct api *a);
void api_gen_put(struct api *a, struct api_gen *g);

/* httpd's gate (gate_arg is the api): the token of every request but
 * /health, checked once its head is complete, before its body is read; a
 * request without a valid one is answered 401 (audited, counted) and its
 * body never read. The principal is not handed on: a configuration
 * reloaded while the body arrives may revoke the token, so api_handle
 * authenticates again against the generation it answers with. */
int api_gate(struct httpd_req *req, const struct httpd_route *route, struct httpd_resp *resp, void *arg);
/* The handler for every request but /health: route arg is the api. */
void api_handle(const struct httpd_req *req, struct httpd_resp *resp, void *arg);
/* httpd's observe hook: counts the answers the server core gives by itself
 * (no route: 400, 408, 413, 414, 431, 503 when full) under route "server". */
void api_observe(void *arg, const struct httpd_route *route, int status, size_t bytes, int64_t usec);
/* httpd tick: write the audit records a fold holds back once their window
 * is over (audit_flush); force: now, whatever the window (at shutdown). */
int api_tick(void *arg);
void api_flush_audit(struct api *a);
/* GET /health (inline: never blocks): liveness, the version, and whether
 * the token file was read ("initialised"). */
void api_health(const struct httpd_req *req, struct httpd_resp *resp, void *arg);
/* GET /ready (no token): 200 once initialised and, in modes build and
 * offline, with every tool an op any principal may call installs installed
 * (the fast path's check, no install); else 503 with server.not_initialised
 * or server.not_ready (details.tool). */
void api_ready(const struct httpd_req *req, struct httpd_resp *resp, void *arg);

/*
 * The token a request presents: X-Access-Token or Authorization: Bearer
 * (scheme case-insensitive). Never the query string, which logs and
 * proxies keep.
 * Returns 1 with tok/len (a view into the request) when one is presented,
 * 0 when none (auth.missing), -1 when the presentation is invalid (repeated
 * fields, an empty token, both fields with different tokens, over
 * API_TOKEN_MAX), -2 when Authorization names another scheme than Bearer
 * ("Token abc", "Basic ..."): both auth.invalid, -2 saying the scheme is
 * wrong.
 */
int api_token_from(const char *x_access_token, int n_x, const char *authorization, int n_auth,
                   const char **tok, size_t *len);

/* The principal of a presented token: sha256, then constant-time
 * comparison against every configured digest, then a's token file's
 * (principal default; a may be NULL). NULL when none matches. */
const char *api_principal(struct api *a, const struct policy *p, const char *tok, size_t len);

/*
 * The default principal's token when none is configured: read from
 * <state_dir>/token when it exists (ours, 0600), else created there (state
 * directory 0700, file 0600, 32 random bytes as hex). The directory is
 * opened with fs_dir_open_safe (created when missing) and the file
 * relative to it, no link followed. The token is written
 * to tok (cap >= 2*API_TOKEN_BYTES+1) and its file path to path. Returns 0,
 * or -1 with e (io.error, config.state_dir_unsafe) when no token file can be
 * read or written.
 */
int api_token_file(const char *state_dir, char *tok, size_t cap, char *path, size_t pcap, struct err *e);

/* Whether any principal of p has a token digest. */
int api_policy_has_tokens(const struct policy *p);

/* The Prometheus text of the metrics (api_metrics.c): *out (malloc'd, the
 * caller frees it) of *len bytes, or NULL when memory ran out or the text
 * passed its ceiling of 1 MiB. */
void api_metrics_text(struct api *a, char **out, size_t *len);

/*
 * Agent sessions (api_sessions.c): the session table from the current
 * generation's limits, journals in <state dir>/sessions when it can be
 * made and written (else in memory), journals found there replayed. msg
 * receives a line for the log. 0; 1 when the journals live in memory only
 * (msg says why, worth logging even when quiet); -1 (e) when out of memory.
 */
int api_sessions_init(struct api *a, char *msg, size_t cap, struct err *e);

/* Command ops (api_ops.c). */
struct api_rq;
void api_run_command(struct api_rq *q, const struct op *op);

#ifdef ABX_TEST
/* Tests: when set, called on the wire's create between the session's
 * start and the answer (a test lets the session's thread run ahead). */
struct sessions;
extern void (*api_test_created)(struct sessions *S, const char *id);
#endif

#endif
