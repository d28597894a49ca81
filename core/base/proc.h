#ifndef ABX_PROC_H
#define ABX_PROC_H
/*
 * Child processes for serve's command ops and agent sessions: spawn an argv
 * (never through a shell) with an exact environment and working directory,
 * in its own session and process group, stdin from /dev/null, stdout and
 * stderr on pipes; read them as they come (stream) or capture them up to a
 * cap; kill the whole group at a deadline (SIGTERM, then SIGKILL after a
 * grace period), and when the leader exits, so nothing it started outlives
 * the run.
 *
 * Threads: a struct proc belongs to the thread that spawned it. Spawning uses
 * posix_spawn (vfork-like, safe in a threaded server); every descriptor we
 * create is close-on-exec, so a child spawned by another thread never holds
 * our pipes. The child starts with every signal at its default action and
 * an empty signal mask, whatever serve blocks or ignores.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/clock.h"
#include "base/err.h"

/* SIGTERM to SIGKILL: long enough for a well-behaved tool to flush and
 * exit, short enough that a request timing out still answers promptly. */
#define PROC_KILL_GRACE_MS_DEFAULT 2000
/* After the leader exits, how long its output pipes may stay open (held by
 * a descendant that escaped the group with setsid) before we stop reading. */
#define PROC_DRAIN_MS 200
/* One read from a pipe. */
#define PROC_READ_CHUNK 16384

struct proc_spec {
	char *const *argv; /* argv[0] is executed as is: an absolute path */
	char *const *envp; /* the child's whole environment; NULL = empty */
	const char *cwd;   /* NULL = inherit */
	int timeout_ms;    /* 0 = none */
	int kill_grace_ms; /* 0 = PROC_KILL_GRACE_MS_DEFAULT */
};

enum proc_stream {
	PROC_STDOUT = 1,
	PROC_STDERR = 2,
};

struct proc {
	pid_t pid;           /* also the process group and session id */
	int fd[3];           /* [1] stdout, [2] stderr read ends, -1 when closed; [0] unused */
	int pidfd;           /* -1 when the kernel has none (then polled) */
	int64_t started_ms;  /* CLOCK_MONOTONIC */
	int64_t ended_ms;    /* when the leader was reaped, 0 before */
	int64_t deadline_ms; /* 0 = none */
	int64_t kill_at_ms;  /* SIGKILL time once SIGTERM was sent */
	int grace_ms;
	int timed_out; /* the deadline passed and the group was signalled */
	int stopped;   /* proc_run_until's stop() asked to end it */
	int exited;    /* the leader was reaped */
	int status;    /* waitpid status once exited */
	/* Set after proc_spawn to read through a bigger buffer than
	 * PROC_READ_CHUNK on the stack (fewer reads and sink calls for a
	 * child that writes a lot); NULL = the stack one. */
	char *rbuf;
	size_t rbuf_len;
};

/* Called with each piece of output as it is read. */
typedef void (*proc_sink)(void *arg, enum proc_stream s, const char *data, size_t len);

/*
 * Start s->argv[0] as described above. Returns 0, or -1 with e set
 * (io.error naming the program and errno: not found, not executable).
 */
int proc_spawn(struct proc *p, const struct proc_spec *s, struct err *e);

/*
 * Wait at most wait_ms (-1 = until something happens, bounded by the
 * deadline) for output or exit, passing output to sink. Handles the deadline
 * (SIGTERM to the group, SIGKILL after the grace). Returns 1 while the run
 * goes on, 0 once the leader has exited, the group is killed and both pipes
 * are drained (p->status valid).
 */
int proc_step(struct proc *p, int wait_ms, proc_sink sink, void *arg);

/* Signal the whole group (e.g. a cancelled session). 0 or -1 (ESRCH: gone). */
int proc_kill(struct proc *p, int sig);
/* Processes proc_kill_tree finds at most. */
#define PROC_TREE_MAX 256
/* sig to p's group, then to the descendants p had (found by their parents
 * in /proc, at most PROC_TREE_MAX) before: a child that left the group (its own
 * session or group, as gemini's shell tool starts one) goes too. 0, or -1
 * as proc_kill. */
int proc_kill_tree(struct proc *p, int sig);

/* Stop the run now: SIGTERM to the group, SIGKILL after the grace, drain,
 * reap. For abandoning a run (cancel, shutdown); p->status is valid after. */
void proc_terminate(struct proc *p);

/* Close what is left; reaps with SIGKILL if the run is still going. */
void proc_close(struct proc *p);

/* Exit code as a shell reports it: the status, or 128 + signal. */
int proc_exit_code(const struct proc *p);

/* Milliseconds since spawn (or until exit). */
int64_t proc_elapsed_ms(const struct proc *p);

/* Capture buffers for proc_run: each stream keeps its first cap bytes, the
 * rest is read and counted (so the child never blocks on a full pipe).
 * out and err are either given by the caller (cap + 1 bytes each) or NULL:
 * then they are allocated as output arrives, doubling up to cap + 1, so a
 * run that prints little costs little whatever the cap (a NULL stream after
 * the run printed nothing). Either way they are NUL-terminated when
 * non-NULL and the caller frees them (proc_capture_free). With merge set,
 * stderr is kept in out as well, in the order the pieces were read (a
 * probe's or a check's whole output in one text; err stays NULL and
 * err_total counts what came on stderr). */
#define PROC_CAPTURE_FIRST 1024
struct proc_capture {
	char *out, *err;
	size_t out_room, err_room; /* bytes at out/err (0: cap + 1 when given) */
	size_t cap;
	size_t out_len, err_len;
	uint64_t out_total, err_total;
	int truncated; /* either stream went over cap */
	int merge;     /* stderr into out too (set before the run) */
};

/*
 * Run s to completion, capturing into c. Returns 0 (p->status etc. valid:
 * exit code via proc_exit_code, p->timed_out), or -1 with e when it could
 * not start.
 */
int proc_run(struct proc *p, const struct proc_spec *s, struct proc_capture *c, struct err *e);

/* Start capturing into c (lengths and counts zeroed; buffers as described
 * at struct proc_capture), and the sink that fills it, for a caller that
 * drives proc_step itself. */
void proc_capture_begin(struct proc_capture *c);
void proc_capture_sink(void *c, enum proc_stream s, const char *data, size_t len);
/* Free out and err (NULL after). */
void proc_capture_free(struct proc_capture *c);

/* How often proc_run_until asks whether to stop. */
#define PROC_STOP_CHECK_MS 100

/*
 * proc_run, asking stop(arg) every PROC_STOP_CHECK_MS: once it answers
 * non-zero (the server drains), the group gets SIGTERM and, after the
 * grace, SIGKILL; output until then is kept. p->stopped says it happened.
 */
int proc_run_until(struct proc *p, const struct proc_spec *s, struct proc_capture *c, int (*stop)(void *),
                   void *arg, struct err *e);

/*
 * The absolute path proc_spawn needs for a program named as a user would
 * name it, the way execvp finds it: a name with a slash is taken as is
 * (made absolute against the current directory, not the child's cwd); a
 * bare name is looked up in each entry of path (a PATH value, ':'-separated;
 * an empty entry is the current directory) for an executable regular file.
 * Returns 0 with out filled, or -1 with e (not_found naming the program, or
 * io.error when the result would not fit in cap).
 */
int proc_which(const char *name, const char *path, char *out, size_t cap, struct err *e);

#endif
