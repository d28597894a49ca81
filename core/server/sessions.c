/*
 * Agent sessions (see sessions.h): the table of slots and their lifecycle
 * (create, admit, list, cancel, shut down, replay journals at start). The
 * events are in sessions_io.c, the thread of a session in sessions_run.c.
 */
#include "server/sessions_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/json.h"
#include "pkg/npm.h"
#include "base/proc.h"

struct sessions *
sessions_new(const struct sessions_config *c, struct jobs *J)
{
	struct sessions *S = calloc(1, sizeof(*S));

	if (S == NULL)
		return NULL;
	pthread_mutex_init(&S->mu, NULL);
	S->c = *c;
	if (S->c.max_streams < 1)
		S->c.max_streams = 1;
	S->holders = calloc((size_t)S->c.max_streams, sizeof(*S->holders));
	if (S->holders == NULL) {
		free(S);
		return NULL;
	}
	if (c->dir != NULL) {
		snprintf(S->dir, sizeof(S->dir), "%s", c->dir);
		S->c.dir = S->dir;
	}
	if (S->c.journal_max == 0)
		S->c.journal_max = SESSIONS_JOURNAL_MAX_DEFAULT;
	S->J = J;
	/* Slots are set up when first used (slot_init): the table's pages
	 * stay untouched, and out of serve's resident memory, until then. */
	return S;
}

static void
slot_init(struct slot *s)
{
	if (!s->inited) {
		pthread_cond_init(&s->cv, NULL);
		s->inited = 1;
	}
}

/* ---- create -------------------------------------------------------------- */

static void
new_id(char *id)
{
	memcpy(id, "as_", 3);
	fs_rand_hex(id + 3, 8);
}

/* A slot never used past the high-water mark (under mu), or NULL when the
 * table is full. */
static struct slot *
slot_fresh(struct sessions *S)
{
	if (S->hw >= SESSIONS_KEEP)
		return NULL;
	slot_init(&S->slot[S->hw]);
	return &S->slot[S->hw++];
}

/* A slot for a new session (under mu): free, else the oldest finished one
 * nobody reads, whose journal goes with it. */
static struct slot *
slot_take(struct sessions *S)
{
	struct slot *best = NULL;
	int i;

	for (i = 0; i < S->hw; i++) {
		struct slot *s = &S->slot[i];

		if (!s->used || (s->deleted && s->holds == 0)) {
			s->used = s->deleted = 0;
			free(s->conf);
			s->conf = NULL;
			return s;
		}
		if (!s->deleted && !s->running && s->holds == 0 &&
		    (best == NULL || s->created_ms < best->created_ms))
			best = s;
	}
	if (S->hw < SESSIONS_KEEP)
		return slot_fresh(S);
	if (best != NULL) {
		journal_close(&best->j, 1);
		best->used = 0;
		free(best->conf);
		best->conf = NULL;
	}
	return best;
}

/* Whether a session of agent may start now (the running limits): 0, or -1
 * with e (request.rate_limited) and *retry_after. Caller holds S->mu. */
static int
over_limit(struct sessions *S, const char *agent, int *retry_after, struct err *e)
{
	int i, total = 0, mine = 0;

	for (i = 0; i < S->hw; i++)
		if (S->slot[i].used && sessions_live(&S->slot[i])) {
			total++;
			mine += strcmp(S->slot[i].v.agent, agent) == 0;
		}
	if (total < S->c.max_running && mine < S->c.max_per_agent)
		return 0;
	*retry_after = 5;
	if (total >= S->c.max_running)
		return err_set(e, "request.rate_limited", "%d sessions are running (server.max_sessions)",
		               total);
	return err_set(e, "request.rate_limited",
	               "%d sessions of %s are running (server.max_sessions_per_agent)", mine, agent);
}

static char **
copy_strv(char *const *v, int n)
{
	char **c;
	int i;

	if (n < 0)
		for (n = 0; v != NULL && v[n] != NULL; n++)
			;
	c = calloc((size_t)n + 1, sizeof(*c));
	if (c == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if ((c[i] = strdup(v[i])) == NULL) {
			while (i-- > 0)
				free(c[i]);
			free(c);
			return NULL;
		}
	return c;
}

static void turn_open(struct slot *s);

/* Give s what its thread runs (sp's argv, environment, tool, working
 * directory, entry or install job, configuration, message) and start the
 * thread. Caller holds S->mu. 0, or -1 with e (nothing kept). */
static int
slot_run(struct sessions *S, struct slot *s, const struct session_spec *sp, int *retry_after, struct err *e)
{
	pthread_attr_t at;
	pthread_t th;
	int rc;

	s->v.job[0] = '\0';
	if (sp->job != NULL && (sp->entry == NULL || sp->entry[0] == '\0'))
		snprintf(s->v.job, sizeof(s->v.job), "%s", sp->job);
	s->dropped = 0;
	s->llen[1] = s->llen[2] = 0;
	s->tms = -1;
	s->seq.n = 0;
	s->dialect = sp->dialect;
	dialect_stream_init(&s->ds, (enum dialect)sp->dialect);
	s->dl = (struct buf)BUF_INIT(DIALECT_LINE_MAX);
	s->acc = (struct buf)BUF_INIT(SESSION_EVENT_DATA_MAX);
	json_w_init(&s->iw, JOURNAL_LINE_MAX - 1024);
	s->nitems = s->dend = 0;
	json_w_init(&s->ow, JOURNAL_LINE_MAX - 512);
	s->argv = copy_strv(sp->argv, sp->argc);
	s->argc = sp->argc;
	s->bin_at = sp->bin_at;
	s->envp = copy_strv(sp->envp, -1);
	s->tool = NULL;
	s->cwd = NULL;
	s->text = NULL;
	if (sp->tool != NULL && (s->tool = malloc(sizeof(*s->tool))) != NULL)
		*s->tool = *sp->tool;
	if (sp->cwd != NULL)
		s->cwd = strdup(sp->cwd);
	if (sp->text != NULL)
		s->text = strdup(sp->text);
	s->line[0] = strdup(sp->entry != NULL ? sp->entry : "");
	s->line[1] = malloc(SESSION_EVENT_DATA_MAX);
	s->line[2] = malloc(SESSION_EVENT_DATA_MAX);
	if (s->argv == NULL || s->envp == NULL || s->line[0] == NULL || s->line[1] == NULL ||
	    s->line[2] == NULL || (sp->tool != NULL && s->tool == NULL) ||
	    (sp->cwd != NULL && s->cwd == NULL) || (sp->text != NULL && s->text == NULL)) {
		rc = ENOMEM;
		goto fail;
	}
	/* the request's configuration stays while the session runs */
	s->cfg = sp->cfg;
	if (S->J != NULL)
		jobs_hold(S->J, s->cfg);
	s->running = 1;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, SESSION_STACK_SIZE);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &at, sessions_thread, s);
	pthread_attr_destroy(&at);
	if (rc == 0)
		return 0;
	s->running = 0;
fail:
	free(s->line[0]);
	s->line[0] = NULL;
	sessions_free_run(s);
	if (rc == ENOMEM)
		return err_set(e, "internal", "out of memory");
	*retry_after = 5;
	return err_sys(e, "request.busy", rc, "cannot start a session thread: %s", strerror(rc));
}

int
sessions_create(struct sessions *S, const struct session_spec *sp, struct session_view *v, int *retry_after,
                struct err *e)
{
	struct slot *s;
	struct json_w w, x;
	int rc;

	*retry_after = 0;
	if ((sp->argc < 1 && !(sp->conv && sp->text == NULL)) || sp->argc > SESSION_ARGV_MAX)
		return err_set(e, "internal", "a run template of %d words", sp->argc);
	pthread_mutex_lock(&S->mu);
	if (over_limit(S, sp->agent, retry_after, e) != 0) {
		pthread_mutex_unlock(&S->mu);
		return -1;
	}
	s = slot_take(S);
	if (s == NULL) {
		pthread_mutex_unlock(&S->mu);
		*retry_after = 5;
		return err_set(e, "request.busy", "all %d session slots are running or being read",
		               SESSIONS_KEEP);
	}
	memset(&s->v, 0, sizeof(s->v));
	s->holds = s->cancel = s->shutdown = 0;
	s->tms = -1;
	s->S = S;
	new_id(s->v.id);
	snprintf(s->v.agent, sizeof(s->v.agent), "%s", sp->agent);
	snprintf(s->v.principal, sizeof(s->v.principal), "%s", sp->principal != NULL ? sp->principal : "");
	snprintf(s->op, sizeof(s->op), "%s", sp->op != NULL ? sp->op : "");
	s->created_ms = clock_wall_ms();
	clock_iso(s->created_ms, 1, s->v.created_at, sizeof(s->v.created_at));
	s->v.status = SESSION_IN_PROGRESS;

	json_w_init(&w, JOURNAL_HEADER_MAX - 1);
	json_w_obj(&w);
	json_w_kstr(&w, "object", "agent.session.journal");
	json_w_kint(&w, "version", 1);
	json_w_kstr(&w, "id", s->v.id);
	json_w_kstr(&w, "agent", s->v.agent);
	json_w_kstr(&w, "principal", s->v.principal);
	json_w_kstr(&w, "created_at", s->v.created_at);
	json_w_kint(&w, "created_ms", s->created_ms);
	json_w_end(&w);
	rc = w.overflow ? err_set(e, "internal", "journal header too long")
	                : journal_create_at(&s->j, S->c.have_dir_fd ? S->c.dir_fd : AT_FDCWD, S->c.dir,
	                                    s->v.id, w.buf, e);
	if (rc != 0 && S->c.dir != NULL && !w.overflow) {
		/* The directory went away or filled up: keep the session in
		 * memory rather than refuse it, and say so. */
		warnx_line("%s: %s: session %s's journal is kept in memory only", e->code, e->msg, s->v.id);
		err_clear(e);
		rc = journal_create(&s->j, NULL, s->v.id, w.buf, e);
	}
	json_w_free(&w);
	if (rc != 0) {
		pthread_mutex_unlock(&S->mu);
		return -1;
	}
	s->v.conv = sp->conv;
	s->v.created_ms = s->created_ms;
	s->env_ready = 0;
	if (sp->conv && (s->conf = strdup(sp->conf != NULL ? sp->conf : "{}")) == NULL) {
		journal_close(&s->j, 1);
		pthread_mutex_unlock(&S->mu);
		return err_set(e, "internal", "out of memory");
	}
	if (slot_run(S, s, sp, retry_after, e) != 0) {
		journal_close(&s->j, 1);
		free(s->conf);
		s->conf = NULL;
		pthread_mutex_unlock(&S->mu);
		return -1;
	}
	s->used = 1;
	S->created++;
	if (sp->conv) {
		sessions_emit_session(s, "agent.session.created", SESSION_IN_PROGRESS);
		sessions_emit_env(s, "pending", NULL, NULL);
		if (sp->text != NULL)
			turn_open(s);
	} else if (s->v.job[0] != '\0') {
		json_w_init(&x, 512);
		json_w_obj(&x);
		json_w_kstr(&x, "job", s->v.job);
		json_w_kstr(&x, "tool", s->v.agent);
		json_w_end(&x);
		sessions_emit(s, "agent.session.environment.pending", x.buf, -1);
		json_w_free(&x);
	}
	*v = s->v;
	pthread_mutex_unlock(&S->mu);
	return 0;
}

/* A new turn of s: agent.session.turn.created and the user's message as
 * its first item. Caller holds S->mu. */
static void
turn_open(struct slot *s)
{
	struct json_w w;
	char id[32], iid[32];

	s->v.turns++;
	s->turn_created_ms = clock_wall_ms();
	s->turn_started_ms = 0;
	s->v.status = SESSION_IN_PROGRESS;
	sessions_emit_turn(s, "agent.session.turn.created", "queued", NULL, NULL);
	snprintf(id, sizeof(id), "turn_%u", s->v.turns);
	json_w_init(&w, JOURNAL_LINE_MAX - 1024);
	json_w_obj(&w);
	json_w_kstr(&w, "turn_id", id);
	json_w_key(&w, "output_index");
	json_w_null(&w);
	json_w_key(&w, "item");
	json_w_obj(&w);
	snprintf(iid, sizeof(iid), "item_%u", journal_count(&s->j) + 1);
	json_w_kstr(&w, "id", iid);
	json_w_kstr(&w, "type", "message");
	json_w_kstr(&w, "role", "user");
	json_w_kstr(&w, "status", "completed");
	json_w_kstr(&w, "turn_id", id);
	json_w_key(&w, "phase");
	json_w_null(&w);
	json_w_key(&w, "content");
	json_w_arr(&w);
	json_w_obj(&w);
	json_w_kstr(&w, "type", "input_text");
	json_w_kstr(&w, "text", s->text != NULL ? s->text : "");
	json_w_end(&w);
	json_w_end(&w);
	json_w_end(&w);
	json_w_end(&w);
	sessions_emit(s, "agent.session.turn.item.added", w.overflow ? NULL : w.buf, -1);
	json_w_free(&w);
}

int
sessions_turn(struct sessions *S, const char *id, const struct session_spec *sp, const char *text,
              struct session_view *v, struct err *e)
{
	struct slot *s;
	int retry;
	struct session_spec t = *sp;

	pthread_mutex_lock(&S->mu);
	s = sessions_find(S, NULL, id);
	if (s == NULL) {
		pthread_mutex_unlock(&S->mu);
		return err_set(e, "not_found", "no session %s", id);
	}
	if (!s->v.conv || s->v.status == SESSION_FAILED) {
		pthread_mutex_unlock(&S->mu);
		return err_set(e, "session.closed", "session %s takes no message", id);
	}
	if (s->running || s->v.status != SESSION_IDLE) {
		pthread_mutex_unlock(&S->mu);
		return err_set(e, "session.busy", "session %s has a turn running", id);
	}
	if (over_limit(S, s->v.agent, &retry, e) != 0) {
		pthread_mutex_unlock(&S->mu);
		return -1;
	}
	t.text = text;
	s->cancel = s->shutdown = 0;
	s->v.cancel_requested = 0;
	if (slot_run(S, s, &t, &retry, e) != 0) {
		pthread_mutex_unlock(&S->mu);
		return -1;
	}
	turn_open(s);
	*v = s->v;
	pthread_mutex_unlock(&S->mu);
	return 0;
}

int
sessions_delete(struct sessions *S, const char *id, struct err *e)
{
	struct slot *s;

	pthread_mutex_lock(&S->mu);
	s = sessions_find(S, NULL, id);
	if (s == NULL) {
		pthread_mutex_unlock(&S->mu);
		return err_set(e, "not_found", "no session %s", id);
	}
	if (s->running) {
		pthread_mutex_unlock(&S->mu);
		return err_set(e, "session.busy", "session %s is running; cancel it first", id);
	}
	journal_close(&s->j, 1);
	s->j.path[0] = '\0';
	s->deleted = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&S->mu);
	return 0;
}

int
sessions_wire_json(struct sessions *S, const char *id, int created, struct json_w *w)
{
	struct slot *s;

	pthread_mutex_lock(&S->mu);
	s = sessions_find(S, NULL, id);
	if (s != NULL)
		sessions_session_json(w, s, created);
	pthread_mutex_unlock(&S->mu);
	return s != NULL ? 0 : -1;
}

int
sessions_admit(struct sessions *S, const char *agent, int *retry_after, struct err *e)
{
	int rc;

	*retry_after = 0;
	pthread_mutex_lock(&S->mu);
	rc = over_limit(S, agent, retry_after, e);
	pthread_mutex_unlock(&S->mu);
	return rc;
}

/* ---- reading ------------------------------------------------------------- */

int
sessions_get(struct sessions *S, const char *agent, const char *id, struct session_view *v)
{
	struct slot *s;

	pthread_mutex_lock(&S->mu);
	s = sessions_find(S, agent, id);
	if (s != NULL)
		*v = s->v;
	pthread_mutex_unlock(&S->mu);
	return s != NULL ? 0 : -1;
}

int
sessions_list(struct sessions *S, const char *agent, struct session_view *v, int max)
{
	int64_t when[SESSIONS_KEEP];
	int i, k, n = 0;

	pthread_mutex_lock(&S->mu);
	for (i = 0; i < S->hw; i++) {
		struct slot *s = &S->slot[i];

		if (!s->used || s->deleted || (agent != NULL && strcmp(s->v.agent, agent) != 0))
			continue;
		/* Insert, newest first; keep the max newest. */
		for (k = n; k > 0 && when[k - 1] < s->created_ms; k--)
			if (k < max) {
				v[k] = v[k - 1];
				when[k] = when[k - 1];
			}
		if (k < max) {
			v[k] = s->v;
			when[k] = s->created_ms;
			if (n < max)
				n++;
		}
	}
	pthread_mutex_unlock(&S->mu);
	return n;
}

int
sessions_cancel(struct sessions *S, const char *agent, const char *id, struct session_view *v)
{
	struct slot *s;
	int rc;

	pthread_mutex_lock(&S->mu);
	s = sessions_find(S, agent, id);
	if (s == NULL) {
		pthread_mutex_unlock(&S->mu);
		return -1;
	}
	rc = sessions_live(s) ? 0 : 1;
	if (rc == 0 && !s->cancel) {
		s->cancel = 1;
		s->v.cancel_requested = 1;
	}
	*v = s->v;
	pthread_mutex_unlock(&S->mu);
	return rc;
}

/* principal's entry, or a free one (NULL: none, which max_streams entries
 * for max_streams streams rule out). Caller holds S->mu. */
static struct stream_holder *
holder_of(struct sessions *S, const char *principal)
{
	struct stream_holder *free_h = NULL;
	int i;

	for (i = 0; i < S->c.max_streams; i++) {
		struct stream_holder *h = &S->holders[i];

		if (h->n > 0 && strcmp(h->name, principal) == 0)
			return h;
		if (h->n == 0 && free_h == NULL)
			free_h = h;
	}
	return free_h;
}

int
sessions_stream_acquire(struct sessions *S, const char *principal, int per_principal)
{
	struct stream_holder *h;
	int rc = -1;

	pthread_mutex_lock(&S->mu);
	h = holder_of(S, principal);
	if (S->streams >= S->c.max_streams || h == NULL) {
		rc = -1;
	} else if (h->n >= per_principal) {
		rc = -2;
	} else {
		if (h->n == 0)
			snprintf(h->name, sizeof(h->name), "%s", principal);
		h->n++;
		S->streams++;
		rc = 0;
	}
	pthread_mutex_unlock(&S->mu);
	return rc;
}

void
sessions_stream_release(struct sessions *S, const char *principal)
{
	struct stream_holder *h;

	pthread_mutex_lock(&S->mu);
	h = holder_of(S, principal);
	if (h != NULL && h->n > 0)
		h->n--;
	S->streams--;
	pthread_mutex_unlock(&S->mu);
}

void
sessions_hold(struct sessions *S, const char *id, int hold)
{
	struct slot *s;
	int i;

	pthread_mutex_lock(&S->mu);
	for (i = 0; i < S->hw; i++) {
		s = &S->slot[i];
		if (s->used && strcmp(s->v.id, id) == 0 && (hold || s->holds > 0)) {
			s->holds += hold ? 1 : -1;
			break;
		}
	}
	pthread_mutex_unlock(&S->mu);
}

void
sessions_get_stats(struct sessions *S, struct sessions_stats *st)
{
	int i;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&S->mu);
	for (i = 0; i < S->hw; i++)
		if (S->slot[i].used) {
			st->kept++;
			st->running += S->slot[i].running;
		}
	st->streams = S->streams;
	st->created = S->created;
	st->events = S->events;
	st->persistent = S->c.dir != NULL;
	pthread_mutex_unlock(&S->mu);
}

int
sessions_shutdown(struct sessions *S, int wait_ms)
{
	int64_t until = clock_ms() + wait_ms;
	int i, n;

	pthread_mutex_lock(&S->mu);
	for (i = 0; i < S->hw; i++)
		if (S->slot[i].used && S->slot[i].running) {
			S->slot[i].cancel = 1;
			S->slot[i].shutdown = 1;
		}
	for (;;) {
		struct timespec ts = {0, 20 * 1000000L};

		for (n = 0, i = 0; i < S->hw; i++)
			n += S->slot[i].used && S->slot[i].running;
		if (n == 0 || clock_ms() >= until)
			break;
		pthread_mutex_unlock(&S->mu);
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&S->mu);
	}
	pthread_mutex_unlock(&S->mu);
	return n;
}

void
sessions_free(struct sessions *S)
{
	int i;

	if (S == NULL)
		return;
	/* A session thread touches its slot until its last critical section,
	 * even after the session looks ended: wait for every one. If one is
	 * still running after the grace, leaking the table beats a use after
	 * free. */
	if (sessions_shutdown(S, PROC_KILL_GRACE_MS_DEFAULT + 8000) > 0)
		return;
	for (i = 0; i < S->hw; i++) {
		if (S->slot[i].used)
			journal_close(&S->slot[i].j, 0);
		free(S->slot[i].conf);
		if (S->slot[i].inited)
			pthread_cond_destroy(&S->slot[i].cv);
	}
	pthread_mutex_destroy(&S->mu);
	free(S->holders);
	free(S);
}

/* ---- replay --------------------------------------------------------------- */

/* Kill the group a dead server left running, when pid is still that child
 * (same start time), never another process that reused the number. */
static void
kill_orphan(const struct json_val *ev)
{
	const struct json_val *pid = json_get(ev, "pid"), *ps = json_get(ev, "pid_start");
	unsigned long long now;

	if (pid == NULL || ps == NULL || pid->type != JSON_NUMBER || ps->type != JSON_NUMBER ||
	    !pid->u.num.is_int || pid->u.num.i <= 1 || !ps->u.num.is_int)
		return;
	if (sessions_pid_start((pid_t)pid->u.num.i, &now) == 0 && now == (unsigned long long)ps->u.num.i)
		kill(-(pid_t)pid->u.num.i, SIGKILL);
}

/* What a conversation's event named agent.session.<t> tells at replay. */
static void
replay_conv(struct slot *s, const char *t, const struct json_val *ev, int *open_turn)
{
	const struct json_val *x = json_get(ev, "session"), *m;
	static const char *const keys[] = {"agent", "environment", "metadata"};
	struct json_w w;
	int i;

	if (strcmp(t, "created") == 0 && x != NULL && x->type == JSON_OBJECT) {
		json_w_init(&w, JOURNAL_LINE_MAX);
		json_w_obj(&w);
		for (i = 0; i < 3; i++)
			if ((m = json_get(x, keys[i])) != NULL) {
				json_w_key(&w, keys[i]);
				json_w_val(&w, m);
			}
		json_w_end(&w);
		free(s->conf);
		s->conf = w.overflow ? NULL : strdup(w.buf);
		s->v.conv = s->conf != NULL;
		json_w_free(&w);
	} else if (strcmp(t, "turn.created") == 0) {
		s->v.turns++;
		*open_turn = 1;
		s->turn_created_ms = clock_wall_ms();
		x = json_get(json_get(ev, "turn"), "created_at");
		if (x != NULL && x->type == JSON_NUMBER && x->u.num.is_int)
			s->turn_created_ms = x->u.num.i * 1000;
	} else if (strcmp(t, "turn.completed") == 0 || strcmp(t, "turn.failed") == 0 ||
	           strcmp(t, "turn.cancelled") == 0) {
		*open_turn = 0;
	} else if (strcmp(t, "environment.ready") == 0) {
		s->env_ready = 1;
	} else if (strcmp(t, "thread") == 0 && json_get_str(ev, "thread") != NULL) {
		snprintf(s->v.thread, sizeof(s->v.thread), "%s", json_get_str(ev, "thread"));
	}
}

static int
replay_one(struct sessions *S, const char *name, int *interrupted)
{
	struct json_limits lim = json_default_limits;
	const struct json_val *r, *x;
	struct json_doc doc;
	struct json_w w;
	struct slot *s = NULL;
	struct journal j;
	struct err e = {0};
	uint32_t k;
	int i, started = 0, open_turn = 0;
	const char *line;
	size_t l;

	if (journal_load_at(&j, S->c.have_dir_fd ? S->c.dir_fd : AT_FDCWD, S->c.dir, name, &e) != 0)
		return -1;
	lim.max_depth = 8;
	if (json_parse(&doc, j.header, strlen(j.header), &lim, &e) != 0) {
		journal_close(&j, 0);
		return -1;
	}
	r = doc.root;
	if (json_get_str(r, "object") == NULL ||
	    strcmp(json_get_str(r, "object"), "agent.session.journal") != 0 ||
	    json_get_str(r, "id") == NULL || strcmp(json_get_str(r, "id"), j.id) != 0 ||
	    strlen(j.id) >= SESSION_ID_MAX || json_get_str(r, "agent") == NULL ||
	    json_get_str(r, "created_at") == NULL) {
		json_free(&doc);
		journal_close(&j, 0);
		return -1;
	}
	pthread_mutex_lock(&S->mu);
	for (i = 0; i < S->hw && s == NULL; i++)
		if (!S->slot[i].used)
			s = &S->slot[i];
	if (s == NULL)
		s = slot_fresh(S);
	if (s == NULL || sessions_find(S, NULL, j.id) != NULL) {
		pthread_mutex_unlock(&S->mu);
		json_free(&doc);
		journal_close(&j, 0);
		return -1;
	}
	memset(&s->v, 0, sizeof(s->v));
	s->S = S;
	s->holds = s->cancel = s->shutdown = s->running = 0;
	s->deleted = s->env_ready = 0;
	s->turn_started_ms = 0;
	s->j = j;
	memcpy(s->v.id, j.id, strlen(j.id) + 1); /* fits: checked with the header */
	snprintf(s->v.agent, sizeof(s->v.agent), "%s", json_get_str(r, "agent"));
	snprintf(s->v.principal, sizeof(s->v.principal), "%s",
	         json_get_str(r, "principal") != NULL ? json_get_str(r, "principal") : "");
	snprintf(s->v.created_at, sizeof(s->v.created_at), "%s", json_get_str(r, "created_at"));
	x = json_get(r, "created_ms");
	s->created_ms = x != NULL && x->type == JSON_NUMBER && x->u.num.is_int ? x->u.num.i : 0;
	s->v.created_ms = s->created_ms;
	json_free(&doc);
	s->v.status = SESSION_IN_PROGRESS;
	s->v.events = journal_count(&s->j);
	for (k = 1; k <= journal_count(&s->j); k++) {
		const char *type, *st, *tm;

		line = journal_line(&s->j, k, &l);
		if (json_parse(&doc, line, l, &lim, &e) != 0)
			continue;
		type = json_get_str(doc.root, "type");
		tm = json_get_str(doc.root, "time");
		if (type != NULL && strcmp(type, "agent.session.environment.pending") == 0 &&
		    json_get_str(doc.root, "job") != NULL)
			snprintf(s->v.job, sizeof(s->v.job), "%s", json_get_str(doc.root, "job"));
		if (type != NULL && strcmp(type, "agent.session.started") == 0) {
			started = (int)k;
			if (tm != NULL)
				snprintf(s->v.started_at, sizeof(s->v.started_at), "%s", tm);
		}
		if (type != NULL && strcmp(type, "agent.session.truncated") == 0)
			s->v.truncated = 1;
		if (type != NULL && strncmp(type, "agent.session.", 14) == 0)
			replay_conv(s, type + 14, doc.root, &open_turn);
		if (type != NULL && (strcmp(type, "agent.session.environment.failed") == 0 ||
		                     strcmp(type, "agent.session.start_failed") == 0)) {
			const char *c = json_get_str(doc.root, "code");

			snprintf(s->v.error, sizeof(s->v.error), "%s", c != NULL ? c : "install.failed");
		}
		if (type != NULL && strcmp(type, "agent.session.exited") == 0) {
			x = json_get(doc.root, "exit_code");
			s->v.exited = 1;
			s->v.exit_code = x != NULL && x->type == JSON_NUMBER ? (int)x->u.num.i : -1;
			x = json_get(doc.root, "duration_ms");
			s->v.duration_ms = x != NULL && x->type == JSON_NUMBER ? x->u.num.i : 0;
		}
		st = json_get_str(doc.root, "status");
		if (st != NULL && sessions_status_parse(st, &s->v.status) == 0 && tm != NULL)
			snprintf(s->v.ended_at, sizeof(s->v.ended_at), "%s", tm);
		json_free(&doc);
	}
	if (s->v.conv && (open_turn || s->v.status == SESSION_IN_PROGRESS)) {
		if (started > 0 && open_turn && (line = journal_line(&s->j, (uint32_t)started, &l)) != NULL &&
		    json_parse(&doc, line, l, &lim, &e) == 0) {
			kill_orphan(doc.root);
			json_free(&doc);
		}
		if (open_turn) {
			s->turn_created_ms = s->turn_created_ms > 0 ? s->turn_created_ms : clock_wall_ms();
			sessions_emit_turn(s, "agent.session.turn.failed", "failed", "internal_error",
			                   "the server stopped during the turn");
		}
		sessions_emit_session(s, "agent.session.idle", SESSION_IDLE);
		(*interrupted)++;
	} else if (s->v.status == SESSION_IN_PROGRESS) {
		/* Running when the server died: its child's group may still be
		 * there, under the pid and start time the started event
		 * recorded. */
		if (started > 0 && (line = journal_line(&s->j, (uint32_t)started, &l)) != NULL &&
		    json_parse(&doc, line, l, &lim, &e) == 0) {
			kill_orphan(doc.root);
			json_free(&doc);
		}
		json_w_init(&w, 256);
		json_w_obj(&w);
		json_w_kstr(&w, "reason", "the server stopped while the session ran");
		json_w_end(&w);
		sessions_emit(s, "agent.session.interrupted", w.buf, SESSION_INTERRUPTED);
		json_w_free(&w);
		clock_iso(clock_wall_ms(), 1, s->v.ended_at, sizeof(s->v.ended_at));
		(*interrupted)++;
	}
	s->used = 1;
	pthread_mutex_unlock(&S->mu);
	return 0;
}

void
sessions_replay(struct sessions *S, int *loaded, int *interrupted, int *skipped)
{
	char **names;
	size_t n, i, len;
	struct err e = {0};

	*loaded = *interrupted = *skipped = 0;
	if (S->c.dir == NULL || fs_dir_names(S->c.have_dir_fd ? S->c.dir_fd : AT_FDCWD, S->c.dir, "io.error",
	                                     &names, &n, &e) != 0)
		return;
	for (i = 0; i < n; i++) {
		len = strlen(names[i]);
		if (len < 7 || strcmp(names[i] + len - 6, ".jsonl") != 0)
			continue;
		if (replay_one(S, names[i], interrupted) == 0)
			(*loaded)++;
		else
			(*skipped)++;
	}
	free(names);
}
