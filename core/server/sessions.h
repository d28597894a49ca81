#ifndef ABX_SESSIONS_H
#define ABX_SESSIONS_H
/*
 * Agent sessions: an agent CLI run once, asynchronously, through
 * its manifest's run template, with a journal of events.
 *
 * A session is created in_progress and answered at once; a thread of its
 * own then waits for the tool's install job when the tool is not ready
 * (events agent.session.environment.pending / .ready / .failed), spawns
 * the child in its own process group, turns every line of stdout and
 * stderr into an agent.session.output event, and ends with
 * agent.session.exited. Events are numbered from 1 (seq); an event that
 * changes the session's status carries the new "status", which is how a
 * journal read back after a restart tells where the session got to. A
 * session with no final status in its journal was running when the server
 * died: it gets an agent.session.interrupted event and status interrupted.
 *
 * Statuses: in_progress, completed (exit 0), failed (non-zero exit, or the
 * environment failed, or the child could not start), cancelled,
 * interrupted.
 *
 * A conversation (spec conv, the OpenAI wire of core/server/api_wire.c)
 * runs one child per turn instead: it is idle between turns, a turn is
 * started by sessions_create (with a first message) or sessions_turn, and
 * its events are agent.session.turn.created / .item.added / .in_progress,
 * the child's, then .turn.completed, .failed or .cancelled and
 * agent.session.idle (carrying "status": "idle"). The install's events are
 * agent.session.environment.pending / .ready / .failed (the last one
 * fails the session: status failed). Its event streams stay open while it
 * is idle. A turn running when the server died ends failed after the
 * restart and the session is idle again.
 *
 * Limits: running sessions per agent and in total (sessions_create answers
 * request.rate_limited beyond); journal bytes per session (then one
 * agent.session.truncated event, further output dropped and counted; the
 * final events are always written); event data (SESSION_EVENT_DATA_MAX:
 * a longer line is split into events marked "partial": true, all but the
 * last); streams (sessions_stream_acquire).
 *
 * Memory: the table is sized at start (SESSIONS_KEEP). A new session takes
 * a free slot or the oldest finished session's (its journal file is
 * removed with it); with every slot running or being read it is
 * request.busy.
 *
 * Threads: one mutex for the table; each slot has a condition variable
 * broadcast whenever its journal grows or its status changes.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "server/jobs.h"
#include "server/journal.h"
#include "install/launch.h"
#include "install/tools.h"

/* Sessions kept (running or finished, in memory and on disk). */
#define SESSIONS_KEEP 512
#define SESSION_ID_MAX 24 /* "as_" + 16 hex digits */
/* Output line bytes per event; longer lines are split. 8 KiB keeps an
 * event (with \u escapes, at most 6x) under JOURNAL_LINE_MAX. */
#define SESSION_EVENT_DATA_MAX 8192
/* Defaults of the configuration keys (server.*). */
#define SESSIONS_MAX_DEFAULT 16
#define SESSIONS_PER_AGENT_DEFAULT 4
#define SESSIONS_JOURNAL_MAX_DEFAULT (4u << 20)
#define SESSIONS_HEARTBEAT_DEFAULT 15 /* seconds: under common 30-60 s gateway idle cuts */
/* An argv word from a request (a prompt): Linux's MAX_ARG_STRLEN is 128 KiB. */
#define SESSION_ARG_MAX (128u << 10)
/* argv words of the child (the manifest allows 16). */
#define SESSION_ARGV_MAX 17
/* How often a session waiting for its install looks for a cancel. */
#define SESSION_POLL_MS 200

enum session_status {
	SESSION_IN_PROGRESS,
	SESSION_COMPLETED,
	SESSION_FAILED,
	SESSION_CANCELLED,
	SESSION_INTERRUPTED,
	SESSION_IDLE, /* a conversation between turns */
};

const char *session_status_name(enum session_status s);

struct sessions_config {
	const char *dir; /* journal directory, NULL = memory only */
	/* With have_dir_fd: dir's descriptor, kept open by the caller for the
	 * table's life; journals are opened relative to it (journal_create_at)
	 * and dir only names them in messages. */
	int have_dir_fd;
	int dir_fd;
	int max_running; /* in total */
	int max_per_agent;
	size_t journal_max; /* bytes per journal */
	int kill_grace_ms;  /* cancel: SIGTERM to SIGKILL; 0 = proc's default */
	int max_streams;    /* concurrent event streams */
};

/* A copy of a session's state. */
struct session_view {
	char id[SESSION_ID_MAX];
	char agent[CFG_NAME_MAX];
	char principal[64];
	char created_at[32], started_at[32], ended_at[32]; /* "" = not yet */
	enum session_status status;
	int exited;
	int exit_code;
	int64_t duration_ms;
	char job[JOB_ID_MAX]; /* the install job waited for, "" = none */
	char error[64];       /* failed: the error code */
	uint32_t events;      /* last seq */
	int truncated;
	int cancel_requested;
	int conv;                      /* a conversation */
	uint32_t turns;                /* turns started */
	int64_t created_ms, active_ms; /* wall clock: creation, last event */
	char thread[128];              /* the agent's own id of the conversation ("" = none yet) */
};

/* What a new session runs. */
struct session_spec {
	const char *agent;
	const char *principal;
	const char *op;
	/* argv words, copied; word bin_at (-1: none) is replaced by the
	 * tool's entry once it is ready, whatever it holds: an index, not a
	 * marker word, so no request value can take its place. */
	char *const *argv;
	int argc;
	int bin_at;
	char *const *envp; /* the child's environment; copied; NULL = empty */
	/* How the entry runs (core/install/launch.h): the manifest's env for its own
	 * tree; the tools directories' bin/ (of cfg, when the child starts)
	 * go before PATH. Copied. */
	const struct launch_tool *tool;
	const char *cwd;          /* the child's working directory; NULL = "/" */
	const struct config *cfg; /* held (jobs_hold) until the session ends */
	/* The state of the tool at create: entry != "" when it is ready;
	 * else job names the install job that runs (pending). */
	const char *entry;
	const char *job;
	/* A conversation: conf is the members "agent", "environment" and
	 * "metadata" of its session object (JSON text, copied); text the
	 * user's message of the first turn (NULL: none, idle once the
	 * environment is ready). argv is that turn's. */
	int conv;
	const char *conf;
	const char *text;
	/* The agent's JSON dialect (core/server/dialect.h enum dialect; 0 =
	 * raw): its stdout lines become items, its conversation id is kept. */
	int dialect;
};

struct sessions;

/* The table, empty. NULL when out of memory. c is copied (dir too). */
struct sessions *sessions_new(const struct sessions_config *c, struct jobs *J);

/*
 * Load every journal of the directory: sessions come back with their
 * events; those with no final status get agent.session.interrupted (and a
 * child they left behind, still running under the recorded pid and start
 * time, is killed with its group). Counts into *loaded and *interrupted.
 * Journals that are not ours or do not fit are skipped (*skipped).
 */
void sessions_replay(struct sessions *S, int *loaded, int *interrupted, int *skipped);

/*
 * Create and start a session. Returns 0 with v filled (status in_progress),
 * or -1 with e: request.rate_limited (a limit; *retry_after seconds),
 * request.busy (no slot), internal.
 */
int sessions_create(struct sessions *S, const struct session_spec *sp, struct session_view *v,
                    int *retry_after, struct err *e);

/*
 * Start a turn of conversation id with the user's message text (sp: the
 * turn's argv, environment, entry or install job; its agent and principal
 * are ignored). 0 with v; -1 with e: not_found, session.busy (a turn
 * runs), session.closed (failed, or not a conversation), request.busy,
 * internal.
 */
int sessions_turn(struct sessions *S, const char *id, const struct session_spec *sp, const char *text,
                  struct session_view *v, struct err *e);

/* Delete conversation or session id (its journal goes): 0, or -1 with e
 * (not_found, session.busy while it runs). */
int sessions_delete(struct sessions *S, const char *id, struct err *e);

/* Write session id as the wire's agent.session object into w: 0, or -1
 * when it is not there. With created set, as it was created (in_progress,
 * active then): the create call's answer, which the session's thread may
 * already have taken further (ready, idle) by the time it is written. */
struct json_w;
int sessions_wire_json(struct sessions *S, const char *id, int created, struct json_w *w);

/* Call fn for each event of session id whose type starts with prefix, in
 * order, under the table's lock (fn must not call back): 0, or -1 when
 * the session is not there. */
int sessions_scan(struct sessions *S, const char *id, const char *prefix,
                  void (*fn)(void *arg, uint32_t seq, const char *line, size_t len), void *arg);

/* Whether a session of agent would be admitted now (the same limits as
 * sessions_create, which checks again): 0, or -1 with e and *retry_after.
 * Lets a request over a limit be refused before it starts an install. */
int sessions_admit(struct sessions *S, const char *agent, int *retry_after, struct err *e);

/* The state of session id of agent: 0, or -1 (not there). */
int sessions_get(struct sessions *S, const char *agent, const char *id, struct session_view *v);

/* Up to max sessions of agent (NULL: every agent), newest first, into v.
 * Returns the count. */
int sessions_list(struct sessions *S, const char *agent, struct session_view *v, int max);

/*
 * Request cancellation: the child's group gets SIGTERM, then SIGKILL after
 * the grace; a session still waiting for its install stops waiting. The
 * status becomes cancelled when the session ends. Returns 0 with v (the
 * state now), 1 when it had already ended (v filled), -1 when not there.
 */
int sessions_cancel(struct sessions *S, const char *agent, const char *id, struct session_view *v);

/*
 * Copy events after seq `after` into out (JSON lines; sse != 0: as the
 * wire's Server-Sent Events, with id: and event: fields, each data object
 * starting with "event_id" (the seq, as a string) and "session_id"), at
 * most max_events and about max_bytes (at least one event). *last receives the last seq
 * copied (after when none), *done whether the session has ended and
 * nothing follows. Returns the number of events, or -1 when the session
 * is not there. out is malloc'ed (caller frees; NULL when none).
 */
int sessions_read(struct sessions *S, const char *agent, const char *id, uint32_t after, int max_events,
                  size_t max_bytes, int sse, char **out, size_t *len, uint32_t *last, int *done);

/* What one read of at most max_bytes may hold: a read stops once it has
 * max_bytes, so the last event (a journal line and its SSE head) may pass
 * them by up to one line. */
#define SESSIONS_READ_ROOM(max_bytes) ((size_t)(max_bytes) + JOURNAL_LINE_MAX + 128)

/*
 * sessions_read into a buffer the caller keeps across reads (a stream
 * reads thousands of times: one buffer, grown once, instead of a malloc
 * and its fresh pages per read): b is emptied, then filled; its max is at
 * least SESSIONS_READ_ROOM(max_bytes) (buf_free it when done). Same answers
 * as sessions_read; a read stops early when b runs out of memory.
 */
struct buf;
int sessions_read_buf(struct sessions *S, const char *agent, const char *id, uint32_t after, int max_events,
                      size_t max_bytes, int sse, struct buf *b, uint32_t *last, int *done);

/*
 * Wait at most wait_ms for session id to have events after seq after or
 * to end. Returns 1 when there is something to read (or it ended), 0 on
 * timeout, -1 when the session is not there.
 */
int sessions_wait(struct sessions *S, const char *id, uint32_t after, int wait_ms);

/* A stream slot for principal (at most max_streams in all, at most
 * per_principal of them principal's): 0, -1 when all are taken, -2 when
 * principal holds per_principal already. principal is copied (names are
 * at most POL_NAME_MAX bytes); release with the same name. */
int sessions_stream_acquire(struct sessions *S, const char *principal, int per_principal);
void sessions_stream_release(struct sessions *S, const char *principal);

/* Hold (1) or release (0) session id against eviction while it is read. */
void sessions_hold(struct sessions *S, const char *id, int hold);

/* Counts for doctor and /metrics. */
struct sessions_stats {
	int running, kept, streams;
	uint64_t created, events;
	int persistent; /* journals are files */
};
void sessions_get_stats(struct sessions *S, struct sessions_stats *st);

/*
 * Shutting down: cancel every running session (its child's group killed),
 * marking each interrupted, and wait at most wait_ms for them to end.
 * Returns the number still running.
 */
int sessions_shutdown(struct sessions *S, int wait_ms);

/* Free the table and close every journal (files stay). Sessions still
 * running are shut down first (as sessions_shutdown); if one outlives the
 * grace period the table is left allocated rather than freed under it. */
void sessions_free(struct sessions *S);

#endif
