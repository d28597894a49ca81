#ifndef ABX_JOBS_H
#define ABX_JOBS_H
/*
 * Install jobs for serve: a request that needs a
 * tool which is not ready starts (or joins) one job per tool, a thread that
 * runs ensure(); the request waits at most install.wait seconds for it and
 * otherwise answers 202 with the job, which any number of callers join until
 * it ends. Finished jobs stay readable (GET /v1/install/jobs/<id>) until
 * their slot is needed.
 *
 * Memory: the job table is sized at creation (JOBS_MAX); when every slot
 * holds a running job a new one is refused with request.busy (503). The
 * job layer calls the installer itself (install/install.h): the check,
 * the install on a job's thread, the backoff, another process's progress.
 */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "base/err.h"
#include "install/install.h"
#include "install/tools.h"

/* A sandbox has a handful of tools; 64 slots keep recent results of every
 * tool with room for many concurrent installs. */
#define JOBS_MAX 64
#define JOB_ID_MAX 24 /* "ij_" + 16 hex digits */
#define JOB_PHASE_MAX 32
/* The Retry-After (seconds) a 202 pending answer carries: how soon to
 * poll the job again. */
#define JOBS_RETRY_AFTER 5
/* A job thread runs the install engine, which keeps path buffers on its
 * stack; this is a reservation, not resident memory. */
#define JOBS_STACK_SIZE (2u << 20)
/* Install environments kept idle: one per worker busy at once is the most a
 * steady load returns; more are freed. */
#define JOBS_IDLE 16

enum job_status {
	JOB_PENDING,
	JOB_SUCCEEDED,
	JOB_FAILED,
};

/* A tool installed for the job's tool (its requires, theirs too), with its
 * own progress: at most MANIFEST_MAX_REQUIRES of them are shown. */
struct job_require {
	char tool[CFG_NAME_MAX];
	char phase[JOB_PHASE_MAX];
	struct install_progress prog;
};

/* A copy of a job's state, safe to read after the call. */
struct job_view {
	char id[JOB_ID_MAX];
	char tool[CFG_NAME_MAX];
	char principal[64];
	char op[128];
	enum job_status status;
	char phase[JOB_PHASE_MAX]; /* the tool's own phase and progress */
	struct install_progress prog;
	struct job_require req[MANIFEST_MAX_REQUIRES]; /* in the order they reported */
	int nreq;
	time_t created, finished;
	int retry_after; /* install.backoff: seconds */
	/* JOB_FAILED: err keeps no details of its own (a view is copied
	 * whole), details holds them (JSON object text, or "") */
	struct err err;
	char details[ERR_DETAILS_MAX];
	char entry[PATH_MAX]; /* JOB_SUCCEEDED: the executable */
};

/* The installer a job table runs: install_ensure, or a unit test's double
 * of it. */
typedef int (*jobs_install_fn)(struct install_env *env, const char *tool, const struct install_req *rq,
                               struct install_result *r, struct err *e);
/* Keep cfg alive past the request that passed it (a job's thread, a
 * session): delta 1, until the same call with -1. */
typedef void (*jobs_hold_fn)(void *arg, const struct config *cfg, int delta);

/* Counters for /metrics. */
struct jobs_stats {
	uint64_t started, succeeded, failed, bytes;
	int running;
};

struct jobs;

/*
 * A job table installing the tools of ms (which must outlive it) with
 * install, in install environments it keeps idle between requests and jobs over
 * the same configuration (JOBS_IDLE at most), so what an environment learns
 * (parsed markers, proof lists, the HTTP client, the lockfile parse) serves
 * request after request. hold (NULL: every cfg outlives the table) with arg
 * keeps a job's configuration alive while its thread runs. NULL when out of
 * memory.
 */
struct jobs *jobs_new(struct manifest_set *ms, jobs_install_fn install, jobs_hold_fn hold, void *arg);

/* hold(arg, cfg, 1) and (-1) of J (sessions keep their request's
 * configuration while they run). */
void jobs_hold(struct jobs *J, const struct config *cfg);
void jobs_release(struct jobs *J, const struct config *cfg);

/* Free the idle environments over cfg: before cfg itself is freed (J may be
 * NULL). */
void jobs_forget(struct jobs *J, const struct config *cfg);

/*
 * Make tool ready for a request. First a check that never installs
 * (INSTALL_F_CHECK); when the tool is ready, 0 with v->entry. Otherwise,
 * when cfg's mode installs at runtime, start or join the tool's job and
 * wait at most wait_ms for it: 0 when it succeeded, 1 while it is still
 * pending (v describes it), -1 when it failed (e: its code; v->retry_after
 * for install.backoff). Modes that do not install at runtime run ensure at
 * once (install.required, install.disabled). A recent failure is
 * install.backoff without a job.
 */
int jobs_need(struct jobs *J, const struct config *cfg, const char *tool, const char *principal,
              const char *op, int wait_ms, struct job_view *v, struct err *e);

/* The state of tool without installing: for GET /v1/agents/runtimes. */
struct job_probe {
	int ready;
	char entry[PATH_MAX];
	int backoff;      /* seconds left */
	int has_progress; /* another process is installing it */
	char phase[JOB_PHASE_MAX];
	struct install_progress prog;
	struct err err; /* a manifest error, when not ready */
};
void jobs_probe(struct jobs *J, const struct config *cfg, const char *tool, struct job_probe *p);

/* Clear tool's backoff (the admin reset). */
void jobs_reset(struct jobs *J, const struct config *cfg, const char *tool);

/* The job with id, or -1 when there is none (any more). */
int jobs_get(struct jobs *J, const char *id, struct job_view *v);

/* The running job of tool, 0 (v filled) or -1 when none runs. */
int jobs_running(struct jobs *J, const char *tool, struct job_view *v);

void jobs_get_stats(struct jobs *J, struct jobs_stats *s);

/* Free the table. Jobs still running keep their slots: the table is then
 * leaked to them (at exit only). */
void jobs_free(struct jobs *J);

#endif
