/*
 * The thread of one agent session (see sessions.h): install on first use,
 * the child, its output into the journal, its end.
 */
#include "server/sessions_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "pkg/npm.h"

/* ---- the session thread --------------------------------------------------- */

int
sessions_pid_start(pid_t pid, unsigned long long *start)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* Field 2 (comm) may hold spaces and parentheses: count from the
	 * last ')'. starttime is field 22. */
	p = strrchr(buf, ')');
	if (p == NULL)
		return -1;
	for (field = 2; field < 22 && p != NULL; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL)
		return -1;
	*start = strtoull(p + 1, NULL, 10);
	return 0;
}

/* A conversation's turn ends (st: how; code and msg say why it failed):
 * its end event (idle follows when the thread is done). Caller holds
 * S->mu. */
static void
turn_close(struct slot *s, enum session_status st, const char *code, const char *msg)
{
	if (s->text != NULL)
		sessions_emit_turn(s,
		                   st == SESSION_COMPLETED   ? "agent.session.turn.completed"
		                   : st == SESSION_CANCELLED ? "agent.session.turn.cancelled"
		                                             : "agent.session.turn.failed",
		                   st == SESSION_COMPLETED   ? "completed"
		                   : st == SESSION_CANCELLED ? "cancelled"
		                                             : "failed",
		                   st == SESSION_COMPLETED || st == SESSION_CANCELLED ? NULL : code, msg);
}

static void
fail_env(struct slot *s, const struct err *e)
{
	struct json_w w;

	json_w_init(&w, JOURNAL_LINE_MAX / 2);
	json_w_obj(&w);
	json_w_kstr(&w, "code", e->code != NULL ? e->code : "install.failed");
	json_w_kstr(&w, "message", e->msg);
	json_w_end(&w);
	pthread_mutex_lock(&s->S->mu);
	snprintf(s->v.error, sizeof(s->v.error), "%s", e->code != NULL ? e->code : "install.failed");
	if (s->v.conv) {
		sessions_emit_env(s, "failed", s->v.error, e->msg);
		if (s->text != NULL)
			sessions_emit_turn(s, "agent.session.turn.failed", "failed", "sandbox_error", e->msg);
		sessions_emit_session(s, "agent.session.failed", SESSION_FAILED);
	} else
		sessions_emit(s, "agent.session.environment.failed", w.overflow ? NULL : w.buf,
		              SESSION_FAILED);
	pthread_mutex_unlock(&s->S->mu);
	json_w_free(&w);
}

/* End a session that never started a child (cancelled while waiting). */
static void
end_unstarted(struct slot *s)
{
	struct json_w w;

	json_w_init(&w, 256);
	json_w_obj(&w);
	json_w_kstr(&w, "reason", "server stopped");
	json_w_end(&w);
	pthread_mutex_lock(&s->S->mu);
	clock_iso(clock_wall_ms(), 1, s->v.ended_at, sizeof(s->v.ended_at));
	if (s->v.conv)
		turn_close(s, s->shutdown ? SESSION_FAILED : SESSION_CANCELLED, "internal_error",
		           "the server stopped");
	else if (s->shutdown)
		sessions_emit(s, "agent.session.interrupted", w.buf, SESSION_INTERRUPTED);
	else
		sessions_emit(s, "agent.session.cancelled", NULL, SESSION_CANCELLED);
	pthread_mutex_unlock(&s->S->mu);
	json_w_free(&w);
}

/* Wait for the install job: 0 ready (entry), 1 cancelled, -1 failed. */
static int
wait_install(struct slot *s, char *entry, size_t cap)
{
	struct sessions *S = s->S;
	struct job_view *v = malloc(sizeof(*v));
	struct err e = {0};
	int rc, cancel;

	if (v == NULL) {
		err_set(&e, "internal", "out of memory");
		fail_env(s, &e);
		return -1;
	}
	for (;;) {
		pthread_mutex_lock(&S->mu);
		cancel = s->cancel;
		pthread_mutex_unlock(&S->mu);
		if (cancel) {
			free(v);
			return 1;
		}
		err_clear(&e);
		rc = jobs_need(S->J, s->cfg, s->v.agent, s->v.principal, s->op, SESSION_POLL_MS, v, &e);
		if (rc == 1)
			continue;
		break;
	}
	if (rc != 0) {
		fail_env(s, &e);
		free(v);
		return -1;
	}
	snprintf(entry, cap, "%s", v->entry);
	free(v);
	pthread_mutex_lock(&S->mu);
	if (s->v.conv)
		sessions_emit_env(s, "ready", NULL, NULL);
	else
		sessions_emit(s, "agent.session.environment.ready", NULL, -1);
	s->env_ready = 1;
	pthread_mutex_unlock(&S->mu);
	return 0;
}

/* The node that runs a JavaScript entry: node-runtime's (or an acceptable
 * one on PATH), ready without waiting (it is installed with the agent that
 * requires it). 0, or -1 after failing the session. */
static int
node_entry(struct slot *s, char *out, size_t cap)
{
	struct job_view *v = malloc(sizeof(*v));
	struct err e = {0};
	int rc;

	err_clear(&e);
	if (v == NULL) {
		err_set(&e, "internal", "out of memory");
		fail_env(s, &e);
		return -1;
	}
	rc = jobs_need(s->S->J, s->cfg, "node-runtime", s->v.principal, s->op, 0, v, &e);
	if (rc == 0)
		snprintf(out, cap, "%s", v->entry);
	else {
		if (rc == 1)
			err_set(&e, "install.pending", "node-runtime is still being installed");
		fail_env(s, &e);
	}
	free(v);
	return rc == 0 ? 0 : -1;
}

static void
run_child(struct slot *s, const char *entry, const char *node, char **flags, int nflags)
{
	struct sessions *S = s->S;
	char *argv[SESSION_ARGV_MAX + NPM_NODE_FLAGS_MAX + 2];
	struct sink_ctx sc = {s};
	unsigned long long pstart = 0;
	struct proc_spec spec;
	struct proc p;
	struct err e = {0};
	char **env, tpath[4096];
	struct tools_chain *chain;
	struct json_w x;
	int i, k, cancel_seen = 0, cancelled = 0, shutdown = 0, code;
	enum session_status st;

	k = 0;
	if (node != NULL) {
		/* A JavaScript entry runs as <node> [shebang options] <script>
		 * ARGS, as the shim runs it: no /usr/bin/env, no shell. */
		argv[k++] = (char *)node;
		for (i = 0; i < nflags; i++)
			argv[k++] = flags[i];
	}
	for (i = 0; i < s->argc; i++)
		argv[k++] = i == s->bin_at ? (char *)entry : s->argv[i];
	argv[k] = NULL;
	memset(&spec, 0, sizeof(spec));
	spec.argv = argv;
	/* The manifest's env only once the entry is known: a copy from PATH
	 * runs without it (core/install/launch.h). */
	tpath[0] = '\0';
	if ((chain = malloc(sizeof(*chain))) != NULL && tools_chain_build(chain, s->cfg, 0, &e) == 0)
		launch_tools_path(chain, tpath, sizeof(tpath));
	free(chain);
	env = launch_env(s->tool, entry, s->envp, tpath);
	spec.envp = env != NULL ? env : s->envp;
	spec.cwd = s->cwd;
	spec.kill_grace_ms = S->c.kill_grace_ms;
	err_clear(&e);
	if (env == NULL)
		err_set(&e, "internal", "out of memory");
	if (env == NULL || proc_spawn(&p, &spec, &e) != 0) {
		struct json_w w;

		json_w_init(&w, JOURNAL_LINE_MAX / 2);
		json_w_obj(&w);
		json_w_kstr(&w, "code", e.code);
		json_w_kstr(&w, "message", e.msg);
		json_w_end(&w);
		pthread_mutex_lock(&S->mu);
		snprintf(s->v.error, sizeof(s->v.error), "%s", e.code);
		clock_iso(clock_wall_ms(), 1, s->v.ended_at, sizeof(s->v.ended_at));
		sessions_emit(s, "agent.session.start_failed", w.overflow ? NULL : w.buf,
		              s->v.conv ? -1 : SESSION_FAILED);
		if (s->v.conv)
			turn_close(s, SESSION_FAILED, "sandbox_error", e.msg);
		pthread_mutex_unlock(&S->mu);
		json_w_free(&w);
		launch_env_free(env);
		return;
	}
	launch_env_free(env);
	/* Big reads: a child that writes fast fills the pipe, and each read
	 * is one pass of on_output (lock, journal write, wake-up). */
	for (i = 1; i <= 2; i++)
		(void)fcntl(p.fd[i], F_SETPIPE_SZ, (int)SESSION_READ_BUF);
	p.rbuf = malloc(SESSION_READ_BUF);
	p.rbuf_len = p.rbuf != NULL ? SESSION_READ_BUF : 0;
	sessions_pid_start(p.pid, &pstart);
	pthread_mutex_lock(&S->mu);
	clock_iso(clock_wall_ms(), 1, s->v.started_at, sizeof(s->v.started_at));
	json_w_init(&x, 256);
	json_w_obj(&x);
	json_w_kint(&x, "pid", p.pid);
	json_w_kint(&x, "pid_start", (int64_t)pstart);
	json_w_end(&x);
	sessions_emit(s, "agent.session.started", x.buf, -1);
	if (s->v.conv) {
		s->turn_started_ms = clock_wall_ms();
		sessions_emit_turn(s, "agent.session.turn.in_progress", "in_progress", NULL, NULL);
	}
	pthread_mutex_unlock(&S->mu);

	for (;;) {
		if (!cancel_seen) {
			pthread_mutex_lock(&S->mu);
			cancelled = s->cancel;
			shutdown = s->shutdown;
			pthread_mutex_unlock(&S->mu);
			if (cancelled) {
				cancel_seen = 1;
				proc_kill_tree(&p, SIGTERM);
				p.kill_at_ms = clock_ms() + p.grace_ms;
				p.deadline_ms = 0;
			}
		}
		if (proc_step(&p, cancel_seen ? 50 : SESSION_POLL_MS,
		              s->dialect ? sessions_on_dialect : sessions_on_output, &sc) == 0)
			break;
	}
	if (s->dl.len > 0)
		sessions_on_dialect(&sc, PROC_STDOUT, "\n", 1); /* a last line without its newline */
	code = proc_exit_code(&p);
	pthread_mutex_lock(&S->mu);
	/* What is left without a newline is a last line. */
	for (i = 1; i <= 2; i++)
		if (s->llen[i] > 0) {
			sessions_emit_output(s, i, s->line[i], s->llen[i], 0);
			s->llen[i] = 0;
		}
	if (s->dropped > 0) {
		json_w_reset(&x);
		json_w_obj(&x);
		json_w_kint(&x, "dropped_bytes", (int64_t)s->dropped);
		json_w_end(&x);
		sessions_emit(s, "agent.session.output_dropped", x.buf, -1);
	}
	s->v.exited = 1;
	s->v.exit_code = code;
	s->v.duration_ms = proc_elapsed_ms(&p);
	clock_iso(clock_wall_ms(), 1, s->v.ended_at, sizeof(s->v.ended_at));
	/* a turn the agent itself says failed fails, whatever its exit */
	st = shutdown                    ? SESSION_INTERRUPTED
	     : cancelled                 ? SESSION_CANCELLED
	     : code == 0 && s->dend != 2 ? SESSION_COMPLETED
	                                 : SESSION_FAILED;
	json_w_reset(&x);
	json_w_obj(&x);
	json_w_kint(&x, "exit_code", code);
	if (WIFSIGNALED(p.status))
		json_w_kint(&x, "signal", WTERMSIG(p.status));
	json_w_kint(&x, "duration_ms", s->v.duration_ms);
	json_w_end(&x);
	sessions_emit(s, "agent.session.exited", x.buf, s->v.conv ? -1 : (int)st);
	if (s->v.conv) {
		char why[96];

		snprintf(why, sizeof(why), "%s (exit status %d)",
		         shutdown ? "the server stopped during the turn" : "the agent failed", code);
		if (s->dend == 2 && !shutdown && !cancelled)
			snprintf(why, sizeof(why), "%.95s", s->dwhy[0] ? s->dwhy : "the agent failed");
		turn_close(s, st, shutdown ? "internal_error" : "sandbox_error", why);
	}
	pthread_mutex_unlock(&S->mu);
	json_w_free(&x);
	free(p.rbuf);
	p.rbuf = NULL;
	proc_close(&p);
}

void
sessions_free_run(struct slot *s)
{
	int i;

	for (i = 0; s->argv != NULL && i < s->argc; i++)
		free(s->argv[i]);
	free(s->argv);
	for (i = 0; s->envp != NULL && s->envp[i] != NULL; i++)
		free(s->envp[i]);
	free(s->envp);
	free(s->tool);
	free(s->cwd);
	free(s->text);
	s->tool = NULL;
	s->cwd = NULL;
	s->text = NULL;
	if (s->cfg != NULL && s->S->J != NULL)
		jobs_release(s->S->J, s->cfg);
	free(s->line[1]);
	free(s->line[2]);
	buf_free(&s->dl);
	buf_free(&s->acc);
	json_w_free(&s->iw);
	buf_free(&s->st.b);
	buf_free(&s->st.offs);
	memset(&s->st, 0, sizeof(s->st));
	json_w_free(&s->ow);
	s->argv = s->envp = NULL;
	s->cfg = NULL;
	s->line[1] = s->line[2] = NULL;
	s->argc = 0;
}

void *
sessions_thread(void *arg)
{
	struct slot *s = arg;
	struct sessions *S = s->S;
	char *entry = malloc(PATH_MAX);
	int need_install, rc = 0;

	pthread_mutex_lock(&S->mu);
	need_install = s->v.job[0] != '\0';
	pthread_mutex_unlock(&S->mu);
	if (entry == NULL) {
		struct err e = {0};

		err_set(&e, "internal", "out of memory");
		fail_env(s, &e);
		rc = -1;
	} else if (need_install) {
		rc = wait_install(s, entry, PATH_MAX);
	} else {
		/* set by create: the ready entry travels in argv's place */
		snprintf(entry, PATH_MAX, "%s", s->line[0] != NULL ? s->line[0] : "");
		pthread_mutex_lock(&S->mu);
		if (s->v.conv && !s->env_ready) {
			sessions_emit_env(s, "ready", NULL, NULL);
			s->env_ready = 1;
		}
		pthread_mutex_unlock(&S->mu);
	}
	if (rc == 0 && (!s->v.conv || s->text != NULL)) {
		char shebang[256], *flags[NPM_NODE_FLAGS_MAX], *node = NULL;
		int nflags = 0, js = npm_js_entry(entry, shebang, sizeof(shebang), flags, &nflags);

		if (js == 1 && (node = malloc(PATH_MAX)) != NULL && node_entry(s, node, PATH_MAX) != 0) {
			free(node);
			node = NULL;
			js = -2;
		}
		if (js == 1 && node == NULL) {
			struct err e = {0};

			err_set(&e, "internal", "out of memory");
			fail_env(s, &e);
		} else if (js != -2) {
			run_child(s, entry, node, flags, nflags);
		}
		free(node);
	} else if (rc == 1)
		end_unstarted(s);
	free(entry);
	pthread_mutex_lock(&S->mu);
	free(s->line[0]);
	s->line[0] = NULL;
	sessions_free_run(s);
	if (s->v.ended_at[0] == '\0')
		clock_iso(clock_wall_ms(), 1, s->v.ended_at, sizeof(s->v.ended_at));
	s->running = 0;
	/* Idle in the same critical section as the slot is given back: a
	 * message sent on seeing it finds the session free. */
	if (s->v.conv && s->v.status != SESSION_FAILED)
		sessions_emit_session(s, "agent.session.idle", SESSION_IDLE);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&S->mu);
	return NULL;
}
