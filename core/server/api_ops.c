/*
 * Command ops: validate the body against the op's parameters, install what
 * the op needs, expand argv (no shell), resolve the program to an absolute
 * path, run it in its own process group under the op's timeout with the
 * declared environment only (on the runner thread, see below), and answer
 * with its exit code and output.
 */
#include "server/api_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/json.h"
#include "install/launch.h"
#include "pkg/manifest.h"
#include "pkg/npm.h"
#include "base/proc.h"

/* PATH entries searched for a bare argv[0]. */
#define API_PATH_MAX 4096

/* A run slot of op id under its limit: 0, or -1 when the op is at it. */
static int
slot_acquire(struct api *a, const char *id, int limit)
{
	int i, rc = -1;

	pthread_mutex_lock(&a->mu);
	for (i = 0; i < a->nopc; i++)
		if (strcmp(a->opc[i].id, id) == 0)
			break;
	if (i == a->nopc && a->nopc < OPS_MAX) {
		snprintf(a->opc[i].id, sizeof(a->opc[i].id), "%s", id);
		a->opc[i].running = 0;
		a->nopc++;
	}
	/* More distinct ids than OPS_MAX (reloads adding ops): the table
	 * cannot track it, so it runs unlimited rather than never. */
	if (i == OPS_MAX || limit <= 0 || a->opc[i].running < limit) {
		if (i < OPS_MAX)
			a->opc[i].running++;
		rc = 0;
	} else {
		a->m.ops_rejected_busy++;
	}
	pthread_mutex_unlock(&a->mu);
	return rc;
}

static void
slot_release(struct api *a, const char *id)
{
	int i;

	pthread_mutex_lock(&a->mu);
	for (i = 0; i < a->nopc; i++)
		if (strcmp(a->opc[i].id, id) == 0) {
			a->opc[i].running--;
			break;
		}
	pthread_mutex_unlock(&a->mu);
}

static int
executable(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/*
 * argv[0] to an absolute path, in this order: an absolute path as is; a
 * bare name: the binary of a tool the op installs (its entry from ensure),
 * then <tools>/bin of the chain, then serve's start PATH, skipping entries
 * that are not absolute or are world-writable. A name that is a tool's (the
 * op installs it, or <tools>/bin/<name> is a shim link to this binary and
 * the tool is ready) resolves to the tool's entry and *tool to its manifest,
 * so the op launches it as the shim would (core/install/launch.h). path receives
 * the tools directories' bin/ for the child's PATH.
 */
static int
resolve(struct api_rq *q, const struct op *op, const char *name, char (*entries)[PATH_MAX], char *out,
        size_t cap, const manifest_t **tool, char *path, size_t pcap, struct err *e)
{
	struct tools_chain *ch;
	const char *spath;
	char dirs[API_PATH_MAX];
	char *save = NULL, *d;
	struct stat st;
	struct err e2 = {0};
	int i, rc = -1;

	*tool = NULL;
	path[0] = '\0';
	ch = malloc(sizeof(*ch));
	if (ch != NULL && tools_chain_build(ch, &q->g->cfg, 0, &e2) == 0)
		launch_tools_path(ch, path, pcap);
	else if (ch != NULL)
		ch->n = 0;
	if (name[0] == '/') {
		snprintf(out, cap, "%s", name);
		rc = ops_program_usable(op->id, name, e);
		goto done;
	}
	if (strchr(name, '/') != NULL) {
		err_set(e, "config.invalid", "%s: %s: a program is an absolute path or a bare name", op->id,
		        name);
		goto done;
	}
	for (i = 0; i < op->ninstall; i++) {
		const manifest_t *m = manifest_get(q->a->ms, op->install[i], &e2);

		if (m != NULL && strcmp(m->binary, name) == 0 && entries[i][0] == '/') {
			snprintf(out, cap, "%s", entries[i]);
			*tool = m;
			rc = 0;
			goto done;
		}
	}
	for (i = 0; ch != NULL && i < ch->n; i++) {
		const manifest_t *m;
		struct job_probe *pr;
		char *rp;

		if (fs_path_join(out, cap, ch->d[i].path, "bin", NULL) != 0 ||
		    fs_path_join(out, cap, out, name, NULL) != 0 || !executable(out))
			continue;
		rc = 0;
		/* A shim link: the tool's entry when it is ready (a shim that
		 * is not would install by its own mode, as from a shell). */
		if ((rp = malloc(2 * PATH_MAX)) == NULL)
			goto done;
		if (realpath(out, rp) == NULL || realpath("/proc/self/exe", rp + PATH_MAX) == NULL ||
		    strcmp(rp, rp + PATH_MAX) != 0 || (m = manifest_find_binary(q->a->ms, name)) == NULL ||
		    (pr = malloc(sizeof(*pr))) == NULL) {
			free(rp);
			goto done;
		}
		free(rp);
		jobs_probe(q->a->jobs, &q->g->cfg, m->name, pr);
		if (pr->ready) {
			snprintf(out, cap, "%s", pr->entry);
			*tool = m;
		}
		free(pr);
		goto done;
	}
	spath = api_start_getenv(q->a, "PATH");
	if (spath != NULL && strlen(spath) < sizeof(dirs)) {
		memcpy(dirs, spath, strlen(spath) + 1);
		for (d = strtok_r(dirs, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
			if (d[0] != '/' || stat(d, &st) != 0 || (st.st_mode & S_IWOTH))
				continue;
			if (fs_path_join(out, cap, d, name, NULL) == 0 && executable(out)) {
				rc = 0;
				goto done;
			}
		}
	}
	err_set(e, "not_found", "%s: program %s not found in the tools directories or PATH", op->id, name);
done:
	free(ch);
	return rc;
}

/*
 * The argv and environment of a resolved program: a tool runs as the shim
 * runs it (a JavaScript entry through node-runtime's node, which is ready
 * with the tool that requires it; the manifest's env for its own tree);
 * every program gets the tools' bin/ first on its PATH. *envp is malloc'd
 * (launch_env_free). 0, or -1 having answered q.
 */
static int
launch(struct api_rq *q, const struct op *op, const manifest_t *tool, char **argv, int argc, char **out,
       char *node, char *shebang, size_t scap, char *const *decl_env, const char *path, char ***envp)
{
	struct launch_tool *lt = calloc(1, sizeof(*lt));
	char *flags[NPM_NODE_FLAGS_MAX];
	int nflags = 0, js = 0;

	if (lt == NULL) {
		api_rq_errf(q, "internal", "out of memory");
		return -1;
	}
	if (tool != NULL) {
		launch_tool_of(lt, tool);
		js = npm_js_entry(argv[0], shebang, scap, flags, &nflags);
		if (js < 0) {
			free(lt);
			api_rq_errf(q, "install.failed", "%s: cannot read %s", op->id, argv[0]);
			return -1;
		}
	}
	if (js == 1) {
		struct job_view *v = malloc(sizeof(*v));
		struct err e = {0};
		char ed[ERR_DETAILS_MAX];
		int rc;

		err_keep_details(&e, ed, sizeof(ed));
		rc = v != NULL
		         ? jobs_need(q->a->jobs, &q->g->cfg, "node-runtime", q->principal, op->id, 0, v, &e)
		         : -1;
		if (rc == 0)
			snprintf(node, PATH_MAX, "%s", v->entry);
		else if (rc == 1)
			err_set(&e, "install.pending", "node-runtime is still being installed");
		else if (v == NULL)
			err_set(&e, "internal", "out of memory");
		free(v);
		if (rc != 0) {
			free(lt);
			api_rq_err(q, &e);
			return -1;
		}
	}
	if (launch_argv(out, OP_ARGV_MAX + NPM_NODE_FLAGS_MAX + 2, js == 1 ? node : NULL, flags, nflags,
	                argv[0], argv + 1, argc - 1) < 0 ||
	    (*envp = launch_env(tool != NULL ? lt : NULL, argv[0], decl_env, path)) == NULL) {
		free(lt);
		api_rq_errf(q, "internal", "out of memory");
		return -1;
	}
	free(lt);
	return 0;
}

/* ---- the runner ----------------------------------------------------------- */

/*
 * Command ops run off the worker threads: a worker checks the request,
 * installs what the op needs, spawns the child, waits for it at most
 * API_RUN_INLINE_MS, and otherwise hands it to one runner thread, which
 * waits on every running op at once (epoll over their pipes and pidfds),
 * enforces timeouts and the drain, and answers (the response is deferred:
 * httpd_defer, then httpd_complete). So ops that run for minutes never leave
 * other requests waiting for a worker. What it costs: a run whose leader
 * exited while a descendant that left its group still holds the pipes
 * keeps the runner in proc_step for up to PROC_DRAIN_MS.
 */
/* Ops running at once, server-wide: each holds three descriptors (two pipes
 * and a pidfd) beside its connection; beyond this, 429 with Retry-After. */
#define API_RUNS_MAX 64
/* Without a pidfd (kernels before 5.3) exit is looked for this often. */
#define API_RUNNER_TICK_MS 10
/* How long the worker that spawned an op waits for it before handing it to
 * the runner. Most ops end within a few milliseconds, and answering them on
 * the worker saves two thread wake-ups per request (the hand-over and the
 * runner's); an op that runs longer holds a worker for this long only. */
#define API_RUN_INLINE_MS 10

struct run {
	struct proc p;
	struct proc_capture cap;
	struct api_rq q; /* q.g: the run's own reference to its generation */
	char id[OP_ID_MAX];
	struct run *next;
};

struct api_runner {
	pthread_t th;
	int ep, ev;
	int stop;             /* under api.mu */
	int n;                /* runs admitted and not answered, under api.mu */
	struct run *incoming; /* handed over by workers, under api.mu */
	struct run *active;   /* the runner thread's own */
};

/* The answer of a finished run, through q, its streams bounded by
 * api_stream_room. */
static void
run_answer(struct api_rq *q, struct run *r)
{
	size_t each = api_stream_room(q, r->cap.cap), on, en;
	const char *out = r->cap.out != NULL ? r->cap.out : "", *er = r->cap.err != NULL ? r->cap.err : "";
	struct json_w w;

	api_count_op(q->a, r->p.timed_out);
	on = json_escaped_prefix(out, r->cap.out_len, each);
	en = json_escaped_prefix(er, r->cap.err_len, each);
	json_w_init(&w, 2 * each + API_ANSWER_FRAME);
	json_w_obj(&w);
	json_w_kint(&w, "exit_code", proc_exit_code(&r->p));
	json_w_key(&w, "stdout");
	json_w_strn(&w, out, on);
	json_w_key(&w, "stderr");
	json_w_strn(&w, er, en);
	json_w_kint(&w, "duration_ms", proc_elapsed_ms(&r->p));
	json_w_kbool(&w, "truncated", r->cap.truncated || on < r->cap.out_len || en < r->cap.err_len);
	if (r->p.timed_out)
		json_w_kbool(&w, "timed_out", 1);
	if (r->p.stopped)
		json_w_kbool(&w, "stopped", 1);
	json_w_end(&w);
	if (w.overflow)
		api_rq_errf(q, "internal", "response too large");
	else
		api_rq_json(q, 200, w.buf);
	json_w_free(&w);
}

/* Answer, give back the slot and the generation, and hand the response back
 * to the server (last: after it, req and resp may be reused). */
static void
run_finish(struct api_runner *rt, struct run *r)
{
	struct api *a = r->q.a;
	struct httpd_resp *resp = r->q.resp;

	proc_close(&r->p);
	run_answer(&r->q, r);
	api_rq_record(&r->q);
	slot_release(a, r->id);
	api_gen_put(a, r->q.g);
	proc_capture_free(&r->cap);
	free(r);
	pthread_mutex_lock(&a->mu);
	rt->n--;
	pthread_mutex_unlock(&a->mu);
	httpd_complete(resp);
}

static void
run_watch(struct api_runner *rt, struct run *r)
{
	struct epoll_event ev;
	int i, fds[3] = {r->p.fd[1], r->p.fd[2], r->p.pidfd};

	/* Level-triggered; a descriptor leaves the set when proc closes it
	 * (never EPOLL_CTL_DEL: the number may be another run's by then). */
	ev.events = EPOLLIN;
	ev.data.ptr = r;
	for (i = 0; i < 3; i++)
		if (fds[i] >= 0)
			epoll_ctl(rt->ep, EPOLL_CTL_ADD, fds[i], &ev);
}

static void *
runner_main(void *arg)
{
	struct api *a = arg;
	struct api_runner *rt = a->runner;
	struct epoll_event evs[64];
	struct run *r, **pp, *in;
	int64_t now, next;
	uint64_t v;
	int stop, t, tick;

	for (;;) {
		pthread_mutex_lock(&a->mu);
		in = rt->incoming;
		rt->incoming = NULL;
		stop = rt->stop;
		pthread_mutex_unlock(&a->mu);
		while (in != NULL) {
			r = in;
			in = in->next;
			r->next = rt->active;
			rt->active = r;
			run_watch(rt, r);
		}
		if (stop && rt->active == NULL)
			break;
		/* Step every run: output, exit, its deadline, the drain. */
		now = clock_ms();
		next = now + PROC_STOP_CHECK_MS;
		tick = 0;
		for (pp = &rt->active; (r = *pp) != NULL;) {
			if (!r->p.stopped && !r->p.exited && httpd_resp_closing(r->q.resp)) {
				/* A draining server (SIGTERM) ends the run rather
				 * than outwait it: the child is in its own session
				 * and would outlive us. */
				r->p.stopped = 1;
				proc_kill(&r->p, SIGTERM);
				r->p.deadline_ms = 0;
				r->p.kill_at_ms = now + r->p.grace_ms;
			}
			if (proc_step(&r->p, 0, proc_capture_sink, &r->cap) == 0) {
				*pp = r->next;
				run_finish(rt, r);
				continue;
			}
			if (r->p.deadline_ms != 0 && !r->p.timed_out && r->p.deadline_ms < next)
				next = r->p.deadline_ms;
			if (r->p.kill_at_ms != 0 && r->p.kill_at_ms < next)
				next = r->p.kill_at_ms;
			if (r->p.pidfd < 0)
				tick = 1;
			pp = &r->next;
		}
		t = next > now ? (int)(next - now) : 0;
		if (tick && t > API_RUNNER_TICK_MS)
			t = API_RUNNER_TICK_MS;
		if (rt->active == NULL && !stop)
			t = -1;
		if (epoll_wait(rt->ep, evs, 64, t) > 0)
			(void)!read(rt->ev, &v, sizeof(v));
	}
	return NULL;
}

/* Start the runner on the first command op. 0, or -1 (e). Under a->mu. */
static int
runner_start(struct api *a, struct err *e)
{
	struct api_runner *rt;
	struct epoll_event ev;
	pthread_attr_t at;
	sigset_t all, old;
	int rc;

	rt = calloc(1, sizeof(*rt));
	if (rt == NULL)
		return err_set(e, "internal", "out of memory");
	rt->ep = epoll_create1(EPOLL_CLOEXEC);
	rt->ev = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (rt->ep < 0 || rt->ev < 0) {
		rc = errno;
		goto fail;
	}
	ev.events = EPOLLIN;
	ev.data.ptr = NULL;
	epoll_ctl(rt->ep, EPOLL_CTL_ADD, rt->ev, &ev);
	a->runner = rt;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, HTTPD_STACK_SIZE);
	/* Signals stay with the threads that wait for them (SIGTERM, SIGHUP). */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&rt->th, &at, runner_main, a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
	if (rc == 0)
		return 0;
	a->runner = NULL;
fail:
	if (rt->ep >= 0)
		close(rt->ep);
	if (rt->ev >= 0)
		close(rt->ev);
	free(rt);
	return err_sys(e, "internal", rc, "cannot start the op runner: %s", strerror(rc));
}

/* A place among the running ops: 0, 1 when all API_RUNS_MAX are taken, or
 * -1 (e) when the runner cannot start. */
static int
runner_admit(struct api *a, struct err *e)
{
	int rc = 0;

	pthread_mutex_lock(&a->mu);
	if (a->runner == NULL && runner_start(a, e) != 0)
		rc = -1;
	else if (a->runner->n >= API_RUNS_MAX)
		rc = 1;
	else
		a->runner->n++;
	pthread_mutex_unlock(&a->mu);
	return rc;
}

static void
runner_unadmit(struct api *a)
{
	pthread_mutex_lock(&a->mu);
	a->runner->n--;
	pthread_mutex_unlock(&a->mu);
}

static void
runner_hand(struct api *a, struct run *r)
{
	const uint64_t one = 1;

	pthread_mutex_lock(&a->mu);
	r->next = a->runner->incoming;
	a->runner->incoming = r;
	pthread_mutex_unlock(&a->mu);
	(void)!write(a->runner->ev, &one, sizeof(one));
}

void
api_runner_free(struct api *a)
{
	struct api_runner *rt = a->runner;
	const uint64_t one = 1;

	if (rt == NULL)
		return;
	pthread_mutex_lock(&a->mu);
	rt->stop = 1;
	pthread_mutex_unlock(&a->mu);
	(void)!write(rt->ev, &one, sizeof(one));
	pthread_join(rt->th, NULL);
	close(rt->ep);
	close(rt->ev);
	free(rt);
	a->runner = NULL;
}

void
api_run_command(struct api_rq *q, const struct op *op)
{
	const char *inst[OP_INSTALL_MAX];
	char(*entries)[PATH_MAX] = NULL;
	char *argv[OP_ARGV_MAX + 1], *envp[OP_ENV_MAX + 1], *envbuf[OP_ENV_MAX];
	char *abuf = NULL, *prog = NULL, *largv[OP_ARGV_MAX + NPM_NODE_FLAGS_MAX + 2], **lenv = NULL;
	char shebang[512], *node = NULL, *tpath = NULL; /* heap: a worker has HTTPD_STACK_SIZE */
	const manifest_t *tool = NULL;
	const struct json_val *root;
	struct proc_spec spec;
	struct json_doc doc;
	struct run *r = NULL;
	struct err e = {0};
	char ed[ERR_DETAILS_MAX];
	int64_t until, left;
	int i, argc, nenv = 0, limit, have_slot = 0, admitted = 0, rc;

	err_keep_details(&e, ed, sizeof(ed));
	if (api_body_json(q, &doc, &root) != 0)
		return;
	for (i = 0; i < op->ninstall; i++)
		inst[i] = op->install[i];
	entries = op->ninstall > 0 ? calloc(OP_INSTALL_MAX, sizeof(*entries)) : NULL;
	abuf = malloc(OP_EXPAND_MAX);
	prog = malloc(PATH_MAX);
	node = malloc(PATH_MAX);
	tpath = malloc(API_PATH_MAX);
	r = calloc(1, sizeof(*r));
	if ((op->ninstall > 0 && entries == NULL) || abuf == NULL || prog == NULL || r == NULL ||
	    node == NULL || tpath == NULL) {
		api_rq_errf(q, "internal", "out of memory");
		goto out;
	}
	/* Arguments first: a bad request must not start an install. */
	argc = ops_expand_argv(op, root, argv, abuf, OP_EXPAND_MAX, &e);
	if (argc < 0) {
		api_rq_err(q, &e);
		goto out;
	}
	if (api_need_tools(q, op->id, inst, op->ninstall, entries) != 0)
		goto out;
	if (resolve(q, op, argv[0], entries, prog, PATH_MAX, &tool, tpath, API_PATH_MAX, &e) != 0) {
		api_rq_err(q, &e);
		goto out;
	}
	argv[0] = prog;
	for (i = 0; i < op->nenv; i++) {
		const char *v = api_start_getenv(q->a, op->env[i]);
		size_t n;

		if (v == NULL)
			continue;
		n = strlen(op->env[i]) + strlen(v) + 2;
		envbuf[nenv] = malloc(n);
		if (envbuf[nenv] == NULL)
			break;
		snprintf(envbuf[nenv], n, "%s=%s", op->env[i], v);
		envp[nenv] = envbuf[nenv];
		nenv++;
	}
	envp[nenv] = NULL;
	if (launch(q, op, tool, argv, argc, largv, node, shebang, sizeof(shebang), envp, tpath, &lenv) != 0)
		goto out;
	limit = op->concurrency > 0 ? op->concurrency : q->g->cfg.server.op_concurrency;
	if (slot_acquire(q->a, op->id, limit) != 0) {
		api_rq_retry_after(q, API_BUSY_RETRY_AFTER);
		api_rq_errf(q, "request.rate_limited", "%s is running %d times already", op->id, limit);
		goto out;
	}
	have_slot = 1;
	rc = runner_admit(q->a, &e);
	if (rc != 0) {
		if (rc < 0) {
			api_rq_err(q, &e);
		} else {
			api_rq_retry_after(q, API_BUSY_RETRY_AFTER);
			api_rq_errf(q, "request.rate_limited", "%d ops are running already", API_RUNS_MAX);
		}
		goto out;
	}
	admitted = 1;
	memset(&spec, 0, sizeof(spec));
	spec.argv = largv;
	spec.envp = lenv;
	spec.cwd = op->cwd[0] != '\0' ? op->cwd : NULL;
	spec.timeout_ms = op->timeout > 0 ? op->timeout * 1000 : 0;
	r->cap.cap = q->g->cfg.server.max_output_bytes > 0 ? (size_t)q->g->cfg.server.max_output_bytes
	                                                   : API_OUTPUT_DEFAULT;
	proc_capture_begin(&r->cap);
	if (proc_spawn(&r->p, &spec, &e) != 0) {
		api_rq_err(q, &e);
		goto out;
	}
	until = clock_ms() + API_RUN_INLINE_MS;
	while ((left = until - clock_ms()) > 0)
		if (proc_step(&r->p, (int)left, proc_capture_sink, &r->cap) == 0) {
			proc_close(&r->p);
			run_answer(q, r);
			goto out;
		}
	/* From here the runner owns r and answers; this worker is free. */
	snprintf(r->id, sizeof(r->id), "%s", op->id);
	r->q = *q;
	api_gen_hold(q->a, q->g);
	q->deferred = 1;
	httpd_defer(q->resp);
	runner_hand(q->a, r);
	r = NULL;
	have_slot = admitted = 0;
out:
	if (admitted)
		runner_unadmit(q->a);
	if (have_slot)
		slot_release(q->a, op->id);
	for (i = 0; i < nenv; i++)
		free(envbuf[i]);
	launch_env_free(lenv);
	json_free(&doc);
	if (r != NULL)
		proc_capture_free(&r->cap);
	free(r);
	free(entries);
	free(abuf);
	free(prog);
	free(node);
	free(tpath);
}
