/*
 * Install jobs: one thread per tool being installed, joined by every
 * request that needs the tool meanwhile.
 */
#include "server/jobs.h"
#include "base/clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"

struct install_job {
	int used;
	struct job_view v;
	const struct config *cfg; /* held (jobs_hold) while the thread runs */
	struct jobs *J;
};

/* An install environment not in use now, over cfg. */
struct jobs_idle {
	const struct config *cfg;
	struct install_env *c;
};

struct jobs {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* broadcast whenever a job ends */
	struct manifest_set *ms;
	jobs_install_fn install;
	jobs_hold_fn hold;
	void *arg;
	struct jobs_stats st;
	struct install_job slot[JOBS_MAX];
	struct jobs_idle idle[JOBS_IDLE]; /* under mu */
	int nidle;
};

struct jobs *
jobs_new(struct manifest_set *ms, jobs_install_fn install, jobs_hold_fn hold, void *arg)
{
	struct jobs *J = calloc(1, sizeof(*J));

	if (J == NULL)
		return NULL;
	pthread_mutex_init(&J->mu, NULL);
	pthread_cond_init(&J->cv, NULL);
	J->ms = ms;
	J->install = install;
	J->hold = hold;
	J->arg = arg;
	return J;
}

void
jobs_hold(struct jobs *J, const struct config *cfg)
{
	if (J->hold != NULL)
		J->hold(J->arg, cfg, 1);
}

void
jobs_release(struct jobs *J, const struct config *cfg)
{
	if (J->hold != NULL)
		J->hold(J->arg, cfg, -1);
}

void
jobs_forget(struct jobs *J, const struct config *cfg)
{
	struct install_env *gone[JOBS_IDLE];
	int i, n = 0;

	if (J == NULL)
		return;
	pthread_mutex_lock(&J->mu);
	for (i = 0; i < J->nidle;)
		if (cfg == NULL || J->idle[i].cfg == cfg) {
			gone[n++] = J->idle[i].c;
			J->idle[i] = J->idle[--J->nidle];
		} else {
			i++;
		}
	pthread_mutex_unlock(&J->mu);
	while (n > 0)
		install_env_free(gone[--n]);
}

void
jobs_free(struct jobs *J)
{
	int i;

	if (J == NULL)
		return;
	pthread_mutex_lock(&J->mu);
	for (i = 0; i < JOBS_MAX; i++)
		if (J->slot[i].used && J->slot[i].v.status == JOB_PENDING) {
			/* A thread still uses the table: leave it to exit. */
			pthread_mutex_unlock(&J->mu);
			return;
		}
	pthread_mutex_unlock(&J->mu);
	jobs_forget(J, NULL);
	pthread_mutex_destroy(&J->mu);
	pthread_cond_destroy(&J->cv);
	free(J);
}

/* An idle environment over cfg, made ready (install_env_reuse), or a new one.
 * NULL with e. An install on first use keeps its verified downloads in the
 * cache (a drifted tree is repaired from them) and no extracted tree: a
 * sandbox has one tools directory, which the tree already fills. */
static struct install_env *
env_take(struct jobs *J, const struct config *cfg, struct err *e)
{
	static const struct install_setup lazy = {.keep_no_trees = 1};
	struct install_env *c = NULL;
	int i;

	pthread_mutex_lock(&J->mu);
	for (i = J->nidle - 1; i >= 0 && c == NULL; i--)
		if (J->idle[i].cfg == cfg) {
			c = J->idle[i].c;
			J->idle[i] = J->idle[--J->nidle];
		}
	pthread_mutex_unlock(&J->mu);
	if (c != NULL) {
		if (install_env_reuse(c, e) == 0)
			return c;
		install_env_free(c);
		return NULL;
	}
	install_env_new(&c, J->ms, cfg, &lazy, e);
	return c;
}

/* Back for the next caller over cfg, or freed when JOBS_IDLE are idle. */
static void
env_put(struct jobs *J, const struct config *cfg, struct install_env *c)
{
	pthread_mutex_lock(&J->mu);
	if (J->nidle < JOBS_IDLE) {
		J->idle[J->nidle++] = (struct jobs_idle){cfg, c};
		c = NULL;
	}
	pthread_mutex_unlock(&J->mu);
	if (c != NULL)
		install_env_free(c);
}

/* The fast path: no lock, nothing written. */
static const struct install_req check = {.flags = INSTALL_F_CHECK};

/* J's installer for rq over an environment of cfg. */
static int
run_install(struct jobs *J, const struct config *cfg, const char *tool, const struct install_req *rq,
            struct install_result *r, struct err *e)
{
	struct install_env *c = env_take(J, cfg, e);
	int rc;

	memset(r, 0, sizeof(*r));
	if (c == NULL) {
		r->state = INSTALL_FAILED;
		return -1;
	}
	rc = J->install(c, tool, rq, r, e);
	env_put(J, cfg, c);
	return rc;
}

/* tool's install backoff through an environment over cfg: the seconds left, or
 * cleared (clear: 0 returned). No environment: 0, as if there were none. */
static int
backoff(struct jobs *J, const struct config *cfg, const char *tool, int clear)
{
	struct install_env *c;
	struct err e = {0};
	int left = 0;

	if ((c = env_take(J, cfg, &e)) == NULL)
		return 0;
	if (clear)
		install_backoff_clear(c, tool);
	else
		left = install_backoff_left(c, tool);
	env_put(J, cfg, c);
	return left;
}

static void
new_id(char *id)
{
	memcpy(id, "ij_", 3);
	fs_rand_hex(id + 3, 8);
}

static void
on_progress(void *arg, const char *name, const char *phase, const struct install_progress *pg)
{
	struct install_job *j = arg;

	struct job_require *q = NULL;
	int i;

	pthread_mutex_lock(&j->J->mu);
	/* a requirement installs beside the tool: its progress is its own,
	 * not the job's (the two would alternate in one report) */
	if (name != NULL && strcmp(name, j->v.tool) != 0) {
		for (i = 0; i < j->v.nreq && q == NULL; i++)
			if (strcmp(j->v.req[i].tool, name) == 0)
				q = &j->v.req[i];
		if (q == NULL && j->v.nreq < MANIFEST_MAX_REQUIRES) {
			q = &j->v.req[j->v.nreq++];
			snprintf(q->tool, sizeof(q->tool), "%s", name);
		}
		if (q != NULL) {
			snprintf(q->phase, sizeof(q->phase), "%s", phase != NULL ? phase : "");
			q->prog = *pg;
		}
	} else {
		snprintf(j->v.phase, sizeof(j->v.phase), "%s", phase != NULL ? phase : "");
		j->v.prog = *pg;
	}
	pthread_mutex_unlock(&j->J->mu);
}

static void *
job_thread(void *arg)
{
	struct install_job *j = arg;
	struct jobs *J = j->J;
	struct install_observer obs = {.progress = on_progress, .arg = j};
	struct install_req rq = {j->v.principal, j->v.op, 0, &obs};
	struct install_result *r;
	struct err e = {0};
	char details[ERR_DETAILS_MAX];
	int rc, i;

	err_keep_details(&e, details, sizeof(details));
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		rc = err_set(&e, "internal", "out of memory");
	else
		rc = run_install(J, j->cfg, j->v.tool, &rq, r, &e);
	/* before the job is seen ended: once it is, jobs_free may free J */
	jobs_release(J, j->cfg);
	pthread_mutex_lock(&J->mu);
	j->v.finished = time(NULL);
	J->st.bytes += r != NULL ? r->n.bytes_downloaded : 0;
	J->st.running--;
	if (rc == 0) {
		j->v.status = JOB_SUCCEEDED;
		snprintf(j->v.entry, sizeof(j->v.entry), "%s", r->entry);
		snprintf(j->v.phase, sizeof(j->v.phase), "done");
		/* the tool is ready only with every requirement it reported */
		for (i = 0; i < j->v.nreq; i++)
			snprintf(j->v.req[i].phase, sizeof(j->v.req[i].phase), "done");
		J->st.succeeded++;
	} else {
		j->v.status = JOB_FAILED;
		if (e.code == NULL)
			err_set(&e, "install.failed", "%s: install failed", j->v.tool);
		err_copy(&j->v.err, &e);
		snprintf(j->v.details, sizeof(j->v.details), "%s", details);
		j->v.retry_after = r != NULL ? r->retry_after : 0;
		J->st.failed++;
	}
	j->cfg = NULL;
	pthread_cond_broadcast(&J->cv);
	pthread_mutex_unlock(&J->mu);
	free(r);
	return NULL;
}

/* A slot for a new job: a free one, else the oldest finished. Under mu. */
static struct install_job *
slot_take(struct jobs *J)
{
	struct install_job *best = NULL;
	int i;

	for (i = 0; i < JOBS_MAX; i++) {
		struct install_job *j = &J->slot[i];

		if (!j->used)
			return j;
		if (j->v.status != JOB_PENDING && (best == NULL || j->v.finished < best->v.finished))
			best = j;
	}
	return best;
}

static struct install_job *
running_of(struct jobs *J, const char *tool)
{
	int i;

	for (i = 0; i < JOBS_MAX; i++)
		if (J->slot[i].used && J->slot[i].v.status == JOB_PENDING &&
		    strcmp(J->slot[i].v.tool, tool) == 0)
			return &J->slot[i];
	return NULL;
}

/* Wait (under mu) for job j to end or the time to pass; copy its view. */
static int
wait_job(struct jobs *J, struct install_job *j, int wait_ms, struct job_view *v, struct err *e)
{
	struct timespec until;
	char id[JOB_ID_MAX];

	memcpy(id, j->v.id, sizeof(id));
	clock_wall_after(wait_ms, &until);
	/* The slot is never reused while its job runs, and a finished job's
	 * slot only after a newer job took every free one: check the id. */
	while (j->v.status == JOB_PENDING && wait_ms > 0)
		if (pthread_cond_timedwait(&J->cv, &J->mu, &until) == ETIMEDOUT)
			break;
	if (strcmp(j->v.id, id) != 0)
		return err_set(e, "internal", "install job %s was replaced", id);
	*v = j->v;
	if (j->v.status == JOB_SUCCEEDED)
		return 0;
	if (j->v.status == JOB_PENDING)
		return 1;
	err_copy(e, &j->v.err);
	err_details(e, j->v.details);
	return -1;
}

int
jobs_need(struct jobs *J, const struct config *cfg, const char *tool, const char *principal, const char *op,
          int wait_ms, struct job_view *v, struct err *e)
{
	struct install_req rq = {0};
	struct install_result *r;
	struct install_job *j;
	pthread_attr_t at;
	pthread_t th;
	int rc;

	memset(v, 0, sizeof(*v));
	snprintf(v->tool, sizeof(v->tool), "%s", tool);
	pthread_mutex_lock(&J->mu);
	j = running_of(J, tool);
	if (j != NULL) {
		rc = wait_job(J, j, wait_ms, v, e);
		pthread_mutex_unlock(&J->mu);
		return rc;
	}
	pthread_mutex_unlock(&J->mu);

	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return err_set(e, "internal", "out of memory");
	/* The fast path: no lock, nothing written. */
	err_clear(e);
	if (run_install(J, cfg, tool, &check, r, e) == 0 && r->state == INSTALL_READY) {
		v->status = JOB_SUCCEEDED;
		snprintf(v->entry, sizeof(v->entry), "%s", r->entry);
		free(r);
		return 0;
	}
	if (e->code != NULL && strcmp(e->code, "not_found") != 0) {
		/* A manifest error, not "not installed". */
		free(r);
		return -1;
	}
	err_clear(e);
	if (!config_mode_installs_at_runtime(cfg->install.mode)) {
		/* build, off: ensure answers install.required / disabled
		 * without installing (or ready, found elsewhere). */
		rq.principal = principal;
		rq.op = op;
		rc = run_install(J, cfg, tool, &rq, r, e);
		if (rc == 0) {
			v->status = JOB_SUCCEEDED;
			snprintf(v->entry, sizeof(v->entry), "%s", r->entry);
		} else {
			v->retry_after = r->retry_after;
		}
		free(r);
		return rc == 0 ? 0 : -1;
	}
	free(r);
	if ((v->retry_after = backoff(J, cfg, tool, 0)) > 0)
		return err_set(e, "install.backoff", "%s failed to install recently; retry in %d s", tool,
		               v->retry_after);
	err_clear(e);

	pthread_mutex_lock(&J->mu);
	j = running_of(J, tool); /* another request may have started it meanwhile */
	if (j == NULL) {
		j = slot_take(J);
		if (j == NULL) {
			pthread_mutex_unlock(&J->mu);
			return err_set(e, "request.busy", "%d install jobs are running", JOBS_MAX);
		}
		memset(j, 0, sizeof(*j));
		j->J = J;
		j->cfg = cfg;
		new_id(j->v.id);
		snprintf(j->v.tool, sizeof(j->v.tool), "%s", tool);
		snprintf(j->v.principal, sizeof(j->v.principal), "%s", principal != NULL ? principal : "");
		snprintf(j->v.op, sizeof(j->v.op), "%s", op != NULL ? op : "");
		snprintf(j->v.phase, sizeof(j->v.phase), "queued");
		j->v.status = JOB_PENDING;
		j->v.created = time(NULL);
		pthread_attr_init(&at);
		pthread_attr_setstacksize(&at, JOBS_STACK_SIZE);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		jobs_hold(J, cfg);
		rc = pthread_create(&th, &at, job_thread, j);
		pthread_attr_destroy(&at);
		if (rc != 0) {
			jobs_release(J, cfg);
			j->cfg = NULL;
			pthread_mutex_unlock(&J->mu);
			return err_sys(e, "internal", rc, "cannot start an install thread: %s", strerror(rc));
		}
		j->used = 1;
		J->st.started++;
		J->st.running++;
	}
	rc = wait_job(J, j, wait_ms, v, e);
	pthread_mutex_unlock(&J->mu);
	return rc;
}

void
jobs_reset(struct jobs *J, const struct config *cfg, const char *tool)
{
	backoff(J, cfg, tool, 1);
}

void
jobs_probe(struct jobs *J, const struct config *cfg, const char *tool, struct job_probe *p)
{
	struct install_result *r = calloc(1, sizeof(*r));
	struct install_env *c = NULL;
	struct err e = {0};
	long pid = 0;

	memset(p, 0, sizeof(*p));
	err_clear(&e);
	if (r == NULL || (c = env_take(J, cfg, &e)) == NULL) {
		if (e.code == NULL)
			err_set(&e, "internal", "out of memory");
		err_copy(&p->err, &e);
		free(r);
		return;
	}
	if (J->install(c, tool, &check, r, &e) == 0 && r->state == INSTALL_READY) {
		p->ready = 1;
		snprintf(p->entry, sizeof(p->entry), "%s", r->entry);
	} else if (e.code != NULL && strcmp(e.code, "not_found") != 0) {
		err_copy(&p->err, &e);
	}
	free(r);
	p->backoff = install_backoff_left(c, tool);
	if (!p->ready && install_progress_read(c, tool, p->phase, sizeof(p->phase), &p->prog, &pid) == 0)
		p->has_progress = 1;
	env_put(J, cfg, c);
}

int
jobs_get(struct jobs *J, const char *id, struct job_view *v)
{
	int i, rc = -1;

	pthread_mutex_lock(&J->mu);
	for (i = 0; i < JOBS_MAX; i++)
		if (J->slot[i].used && strcmp(J->slot[i].v.id, id) == 0) {
			*v = J->slot[i].v;
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&J->mu);
	return rc;
}

int
jobs_running(struct jobs *J, const char *tool, struct job_view *v)
{
	struct install_job *j;
	int rc = -1;

	pthread_mutex_lock(&J->mu);
	j = running_of(J, tool);
	if (j != NULL) {
		*v = j->v;
		rc = 0;
	}
	pthread_mutex_unlock(&J->mu);
	return rc;
}

void
jobs_get_stats(struct jobs *J, struct jobs_stats *s)
{
	pthread_mutex_lock(&J->mu);
	*s = J->st;
	pthread_mutex_unlock(&J->mu);
}
