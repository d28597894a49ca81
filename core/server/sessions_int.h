#ifndef ABX_SESSIONS_INT_H
#define ABX_SESSIONS_INT_H
/*
 * What the files of agent sessions share. They form one floor, bottom to
 * top, each calling only the files below it:
 *   sessions_io.c   status names, finding a slot, the event log (what a
 *                   session thread writes) and its readers;
 *   sessions_items.c an agent's JSON lines (core/server/dialect.h) as the
 *                   wire's items and events;
 *   sessions_run.c  the thread of one session: install, run, journal, end;
 *   sessions.c      the table and the lifecycle of its slots: create,
 *                   admit, list, cancel, shut down, replay at start.
 */
#include "server/sessions.h"

#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/proc.h"
#include "server/dialect.h"
#include "server/policy.h"

/* A session thread keeps proc's read buffer and two line buffers. */
#define SESSION_STACK_SIZE (256u << 10)
/* The child's pipes and one read from them (heap): 256 KiB is 4000 lines
 * of 64 bytes per pass of on_output. */
#define SESSION_READ_BUF (256u << 10)
/* The stage (formatted events of one read) kept between reads: a read of
 * 64-byte lines needs about 600 KiB. */
#define SESSION_STAGE_KEEP (1u << 20)
/* The stage's ceiling: output events stop at the journal limit (counting
 * what is staged), the rest are few and small, and the stage joins a
 * journal whose offsets are 32-bit. */
#define SESSION_STAGE_MAX(S) ((size_t)(S)->c.journal_max + SESSION_TAIL_RESERVE + JOURNAL_LINE_MAX)
/* Room above the journal limit for the events that end a session
 * (truncated, exited, interrupted): they are always written. */
#define SESSION_TAIL_RESERVE 4096

/* A decimal counter kept as text: the next number costs an increment of
 * its last digits, not a conversion (a stream writes an id per event). */
struct dec {
	uint32_t v;
	size_t n; /* 0: not set */
	char d[12];
};

struct slot {
	int used;
	struct session_view v;
	struct journal j;
	pthread_cond_t cv;
	int64_t created_ms; /* realtime, for eviction order */
	int inited;         /* cv initialised (slot_init) */
	int running;        /* a thread works on it: the slot is not free (see live()) */
	int holds;          /* readers that must not see it evicted */
	int cancel;         /* cancel or shutdown asked */
	int shutdown;       /* ... by the server stopping: interrupted */
	uint64_t dropped;   /* output bytes not journaled (over the limit) */
	/* The thread's own, set before it starts. */
	char **argv;
	int argc;
	int bin_at; /* the argv word the entry takes, -1 = none */
	char **envp;
	struct launch_tool *tool; /* NULL = none */
	char *cwd;
	const struct config *cfg; /* held (jobs_hold) while the session runs */
	char op[128];
	struct sessions *S;
	struct json_w ow; /* the thread's writer for output events */
	int64_t tms;      /* fmt_time cache: the ms of tstr */
	char tstr[32];
	int tfixed;     /* on_output: tstr is the time of this chunk */
	struct dec seq; /* emit_output_fast's last seq, as text */
	/* on_output formats a chunk's events here without the lock, then
	 * hands them to the journal at once (struct stage). */
	int staging;
	struct stage {
		struct buf b;    /* the events, each ending in '\n' (max: SESSION_STAGE_MAX) */
		struct buf offs; /* uint32_t start of event i in b */
		uint32_t n;
		int truncated; /* the chunk crossed the journal limit */
	} st;
	/* A conversation's: its session object's members (sessions_spec
	 * conf), the message of the turn to run (the thread's), the turn's
	 * times and the install job still to wait for. */
	char *conf;
	char *text;
	int64_t turn_created_ms, turn_started_ms;
	int deleted;   /* gone for clients; the slot waits for its readers */
	int env_ready; /* environment.ready is out */
	/* A dialect's turn (the thread's): its stdout lines, the stream
	 * state, items so far (output_index), the end the agent reported
	 * (0 none, 1 completed, 2 failed with why). */
	int dialect;
	struct buf dl;
	struct buf acc;   /* the open message's deltas (sessions_items.c) */
	struct json_w iw; /* an item event's members (sessions_items.c) */
	struct dialect_stream ds;
	int nitems;
	int dend;
	char dwhy[256];
	/* Line assembly per stream (the thread's). */
	char *line[3];
	size_t llen[3];
};

struct sessions {
	pthread_mutex_t mu;
	struct sessions_config c;
	char dir[4096];
	struct jobs *J;
	int streams;
	/* Streams per principal: at most max_streams names hold one, so a
	 * table of max_streams entries (allocated with S) never fills. */
	struct stream_holder {
		char name[POL_NAME_MAX];
		int n; /* 0 = free entry */
	} * holders;
	uint64_t created, events;
	/* Slots [0, hw) have been used; every scan stops there, so the
	 * table's pages past it are never read or written and stay out of
	 * serve's resident memory. */
	int hw;
	struct slot slot[SESSIONS_KEEP];
};

/* The status named s (session_status_name's inverse): 0, or -1 when s
 * names none. */
int sessions_status_parse(const char *s, enum session_status *out);
/* The used slot of session id (of agent, when not NULL), or NULL. Caller
 * holds S->mu. */
struct slot *sessions_find(struct sessions *S, const char *agent, const char *id);
/* Whether a thread still works on s (it may write events). */
int sessions_live(const struct slot *s);

/* Write the turn object of s's current turn (status, error code and
 * message or NULL) and the session object (as it was created, with
 * created set: sessions_wire_json). Caller holds S->mu. */
void sessions_turn_json(struct json_w *w, const struct slot *s, const char *status, const char *code,
                        const char *msg);
void sessions_session_json(struct json_w *w, const struct slot *s, int created);
/* Emit the turn event type with its turn object (and usage, for an end). */
void sessions_emit_turn(struct slot *s, const char *type, const char *status, const char *code,
                        const char *msg);
/* agent.session.environment.<status> of a conversation (error code and
 * message, or NULL). */
void sessions_emit_env(struct slot *s, const char *status, const char *code, const char *msg);
/* The session event type ("session": the object), with status. */
void sessions_emit_session(struct slot *s, const char *type, int status);
/* Whether readers should keep waiting on s: it runs, or it is an open
 * conversation. */
int sessions_open(const struct slot *s);

/* Append one event {"seq", "type", "time", the members of members (an
 * object a json_w wrote, or NULL), "status" when status >= 0} to s's
 * journal (sessions_io.c); it always goes in. Caller holds S->mu unless s
 * is staging. */
void sessions_emit(struct slot *s, const char *type, const char *members, int status);
/* One output event for data[0..n) of stream i, partial or not; output
 * events obey the journal limit. Caller holds S->mu. */
void sessions_emit_output(struct slot *s, int i, const char *data, size_t n, int partial);

/* Start event type in w (emptied first): {"seq","type","time" and the
 * object left open for its members. */
void sessions_event_head(struct slot *s, struct json_w *w, const char *type);
/* The event sessions_event_head started in w (head: its length then),
 * with its members written since, as an item or delta event: dropped
 * (counted) once the journal is at its limit, as output is. Caller: the
 * session thread, staging. */
void sessions_emit_limited(struct slot *s, struct json_w *w, size_t head);
/* An event written in place, while staging: its head {"seq","type","time"
 * in the stage's room for len more bytes, *line where it starts; the
 * members go at the pointer returned (NULL: no room, not staging or
 * truncated; then nothing was added). */
char *sessions_place_head(struct slot *s, const char *type, size_t len, char **line);
/* The members of the event sessions_place_head started at line, from head
 * (its pointer) to o: the event ends and is staged, under the limit as
 * sessions_emit_limited's; 0, or 1 when it was not (nothing added). */
int sessions_place_end(struct slot *s, char *line, const char *head, char *o);
/* Output events for data[0..n) of stream i, split into partial events of
 * at most SESSION_EVENT_DATA_MAX bytes. */
void sessions_emit_text(struct slot *s, int i, const char *data, size_t n);
/* Format events without the lock from here (on 1) and hand them to the
 * journal at once (on 0; takes S->mu). */
void sessions_stage(struct slot *s, int on);

/* The argument of sessions_on_output. */
struct sink_ctx {
	struct slot *s;
};
/* proc's sink: split into lines and journal them (the session thread). */
void sessions_on_output(void *arg, enum proc_stream st, const char *data, size_t len);

/* proc's sink for an agent with a JSON dialect: stdout lines through
 * dialect_line into items and events, stderr as sessions_on_output. */
void sessions_on_dialect(void *arg, enum proc_stream st, const char *data, size_t len);

/* The start time of process pid (clock ticks after boot, /proc/<pid>/stat),
 * which tells a pid apart from a later process with the same pid: 0 or -1. */
int sessions_pid_start(pid_t pid, unsigned long long *start);
/* Release what a session's thread owns (argv, environment, buffers). */
void sessions_free_run(struct slot *s);
/* The thread of one session (its slot): install, run, journal, end. */
void *sessions_thread(void *arg);

#endif
