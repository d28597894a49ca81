#ifndef ABX_API_INT_H
#define ABX_API_INT_H
/*
 * What the API's files share: one request in progress and the helpers that
 * answer it. The files form one floor, bottom to top, each calling only
 * the files below it (api.c, the dispatcher, calls down into all; none
 * calls it):
 *   api_metrics.c   the counters and their Prometheus text;
 *   api_gen.c       configuration generations: build, hold, put, swap,
 *                   and what a request asks of one (agent enabled, the
 *                   closest name) or of serve's start environment;
 *   api_req.c       one request: its answers, its body as JSON, its
 *                   policy check, its count in the metrics;
 *   api_jobs.c      install jobs: the generation a job holds, the job
 *                   object, install on first use (api_need_tools);
 *   api_auth.c      tokens and principals (api_gate, api_authenticate);
 *   api_ops.c       command ops and the runner thread that answers them;
 *   api_sessions.c  session starts, event streams and agents.<a>.run;
 *   api.c           set-up, routing, the op list, runtimes, jobs, metrics.
 */
#include "server/api.h"

struct api_rq {
	struct api *a;
	struct api_gen *g;
	const struct httpd_req *req;
	struct httpd_resp *resp;
	const char *principal;
	int status; /* the answer's status, for metrics */
	enum api_route route;
	int64_t t0;   /* CLOCK_MONOTONIC microseconds at the start, for metrics */
	int deferred; /* the answer comes later, from another thread */
};

/* Room for the fixed members of an answer around its two output streams. */
#define API_ANSWER_FRAME 4096
/* One job or runtime object. */
#define API_OBJ_MAX 16384

/* ---- api_metrics.c ---- */

/* Count one answer of route r: its status and latency (secs). */
void api_metrics_record(struct api *a, enum api_route r, int status, int64_t usec);
/* Add one to the counter c of a's metrics (under a->mu). */
void api_count(struct api *a, uint64_t *c);
/* Count a finished command op for metrics. */
void api_count_op(struct api *a, int timed_out);

/* ---- api_gen.c ---- */

/* Hold g once more for an answer given later (api_gen_put then). */
void api_gen_hold(struct api *a, struct api_gen *g);
/* Is agent a among the configuration's enabled agents? */
int api_agent_enabled(const struct api_gen *g, const char *a);
/* For a not_found answer: the op id (want_agent 0) or the agent (1) closest
 * to word, among the ops principal may call (what GET /v1/ops lists: no
 * name the principal may not use is given away), or NULL when none is a
 * likely typo (config_did_you_mean). */
const char *api_suggest(const struct api_gen *g, const char *principal, const char *word, int want_agent);
/* A variable of serve's start environment (NULL = not set). */
const char *api_start_getenv(struct api *a, const char *name);

/* ---- api_req.c ---- */

int api_rq_json(struct api_rq *q, int status, const char *json);
/* Answer with w's document and free it (500 internal when it overflowed). */
struct json_w;
int api_rq_json_w(struct api_rq *q, int status, struct json_w *w);
int api_rq_err(struct api_rq *q, const struct err *e);
int api_rq_errf(struct api_rq *q, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void api_rq_retry_after(struct api_rq *q, int secs);

/* Parse the request body as a JSON object (an empty body is no object:
 * *root NULL). Returns 0, or 1 when the request was answered (400/413). */
struct json_doc;
struct json_val;
int api_body_json(struct api_rq *q, struct json_doc *doc, const struct json_val **root);

/* Policy for op_id (installs: the install-admission rule): 0 when allowed,
 * else 1 after answering 403 (audited, counted). */
int api_rq_policy(struct api_rq *q, const char *op_id, const char *const *installs, int n);

/* Count the answered request q in the metrics (route, status, latency). */
void api_rq_record(struct api_rq *q);

/* The escaped bytes each of an answer's two output streams (stdout, stderr)
 * may take: twice the capture cap (text with newlines and quotes fits; NUL
 * and other control bytes grow six-fold and are cut with json_escaped_prefix,
 * truncated: true), and within what is left of the server's budget for
 * unread answers (HTTPD_HELD_MAX). One answer is then at most 4 x cap +
 * API_ANSWER_FRAME bytes. */
size_t api_stream_room(struct api_rq *q, size_t cap);

/* ---- api_jobs.c ---- */

/* The job table's jobs_hold_fn (arg: the api): a job's thread or a session
 * holds the generation of cfg as a request does. */
void api_jobs_hold(void *arg, const struct config *cfg, int delta);

/* The install job v as its JSON object. */
void api_job_json(struct json_w *w, const struct job_view *v);
/* An install's progress (install/install.h): bytes of total downloaded,
 * packages (npm) or artifacts (tarball) done of count; kept after the
 * install. */
void api_job_progress(struct json_w *w, const struct install_progress *p);
/* "requires": each tool installed for v's, with its own progress. */
void api_job_requires(struct json_w *w, const struct job_view *v);

/*
 * Make tools[0..n) ready for op (install on first use: a tool not ready
 * is installed by a job the request joins): waits at most install.wait
 * seconds in all. Returns 0 when every tool is ready
 * (entries[i] filled when entries is not NULL), or 1 when the request was
 * answered (202 with the install job, or the install error).
 */
int api_need_tools(struct api_rq *q, const char *op_id, const char *const *tools, int n,
                   char (*entries)[PATH_MAX]);

/* ---- api_auth.c ---- */

/* 0 with q->principal set, else answered 401 (audited, counted) — the same
 * answer whatever the path, so a caller without a token learns nothing
 * about routes. */
int api_authenticate(struct api_rq *q);

/* ---- api_ops.c ---- */

/* Stop the command op runner once no op runs; api_free. */
void api_runner_free(struct api *a);

/* ---- api_sessions.c ---- */

/* What the OpenAI wire (api_wire.c) adds to a session start: a turn of
 * conversation id (NULL: a new conversation, whose object's members are
 * conf), the user's message text (NULL: none, a new conversation only). */
struct wire_start {
	const char *id;
	const char *text;
	const char *conf;
	/* the agent's options (NULL: its defaults) and its conversation id
	 * from the turns before (NULL: none) */
	const char *model, *instructions, *thread;
};
/* Start a conversation of agent or a turn of one, for q, admitted as
 * agents.<a>.sessions.create or .send_event (install admission as a
 * session's): root holds the run template's slots and "cwd". 0 with *sv,
 * or 1 when q was answered with an error. */
struct session_view;
int api_session_start(struct api_rq *q, const char *agent, const struct json_val *root,
                      const struct wire_start *ws, struct session_view *sv);
/* The working directory root's "cwd" asks for (or the default), checked:
 * 0 with out, or -1 with e. */
struct err;
int api_session_cwd(struct api_rq *q, const struct json_val *root, char *out, size_t cap, struct err *e);
/* Answer q with session id's events after seq after as Server-Sent Events
 * in the wire's form, on a thread of the stream's own. */
void api_events_stream(struct api_rq *q, const char *id, uint32_t after);

/* ---- api_wire.c ---- */

/* Route /v1/agents/sessions…: 1 when answered, 0 when not the wire's. */
int api_wire_route(struct api_rq *q);

/* POST /v1/ops/agents.<a>.run, its policy checked: a session run to its
 * end, answered (deferred) with its output like a command op. */
void api_agent_run(struct api_rq *q, const char *agent);

#endif
