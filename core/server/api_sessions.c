/*
 * Starting agent sessions for the wire (core/server/api_wire.c) and POST
 * /v1/ops/agents.<a>.run, a session run to its end and answered like a
 * command op; the wire's event streams. Starting a session builds the run
 * argv from the manifest and the body (or the agent's JSON dialect), the
 * working directory and the environment; the engine is
 * core/server/sessions.c.
 *
 * Event streams do not hold a worker: the worker defers the answer and a
 * thread of the stream's own writes it (httpd_defer, httpd_complete), so
 * /health and the rest of the API answer however many streams are open.
 * Streams are capped (server.max_streams, default API_SSE_STREAMS_DEFAULT;
 * per principal API_SSE_PRINCIPAL_SHARE of them) and end after API_SSE_MAX_MS even when the session goes on:
 * the client reconnects with Last-Event-ID and loses nothing. A client that went away is noticed at the next
 * heartbeat at the latest.
 */
#include "server/api_int.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/fs.h"
#include "base/json.h"
#include "install/launch.h"
#include "pkg/manifest.h"
#include "server/dialect.h"
#include "server/sessions.h"

/* Events and bytes of events gathered for one read (a stream write, or a
 * run's output). */
#define API_EVENTS_PAGE_MAX 1000
#define API_EVENTS_BYTES (512u << 10)
/* How often a waiting stream looks at the server draining. */
#define API_SSE_TICK_MS 500

/* One stream's whole life; then the client resumes with Last-Event-ID. */
#define API_SSE_MAX_MS (300 * 1000)
/* The reconnection delay an SSE client is told (ms). */
#define API_SSE_RETRY_MS 1000
/* Streams open at once unless server.max_streams says: each is a thread
 * (API_SSE_STACK reserved, a few pages used) and its read buffer. */
#define API_SSE_STREAMS_DEFAULT 64
/* When more than one principal has a token, one principal holds at most
 * this share of the stream slots (a quarter, at least one): a read-only
 * token cannot take every slot from the others, and it takes four tokens
 * to fill them. With one principal there is nobody to keep slots for. */
#define API_SSE_PRINCIPAL_SHARE 4
/* A stream thread's stack: the loop keeps its buffer on the heap. */
#define API_SSE_STACK (128u << 10)

/* ---- set-up ---------------------------------------------------------------- */

/* The sessions directory under the state directory's descriptor sfd, made
 * and opened without following a link (dir names it in messages). Returns
 * its descriptor, kept open for the process's life: journals are opened
 * relative to it (journal_create_at), so they land in that directory even
 * when an ancestor of its path, which the owner of a home directory may
 * rename, points elsewhere later, and no /proc is needed; -1 with e when
 * the directory cannot be used. */
static int
sessions_dir_at(int sfd, const char *dir, struct err *e)
{
	int fd = fs_subdir_open_safe(sfd, "sessions", 1, dir, e);

	if (fd < 0)
		return -1;
	if (faccessat(fd, ".", W_OK | X_OK, 0) != 0) {
		err_set(e, "io.error", "%s is not writable", dir);
		close(fd);
		return -1;
	}
	return fd;
}

int
api_sessions_init(struct api *a, char *msg, size_t cap, struct err *e)
{
	struct sessions_config c;
	struct api_gen *g = api_gen_get(a);
	char state[PATH_MAX], dir[PATH_MAX + 16];
	int loaded, interrupted, skipped, have_dir = 0;
	struct err e2 = {0};

	memset(&c, 0, sizeof(c));
	c.max_running = g->cfg.server.max_sessions;
	c.max_per_agent = g->cfg.server.max_sessions_per_agent;
	c.journal_max = (size_t)g->cfg.server.session_journal_max_bytes;
	c.max_streams = g->cfg.server.max_streams > 0 ? g->cfg.server.max_streams : API_SSE_STREAMS_DEFAULT;
	err_clear(&e2);
	if (tools_state_dir(&g->cfg, state, sizeof(state)) >= 0 &&
	    fs_path_join(dir, sizeof(dir), state, "sessions", NULL) == 0) {
		if (a->have_state_fd) {
			c.dir_fd = sessions_dir_at(a->state_fd, dir, &e2);
			c.have_dir_fd = have_dir = c.dir_fd >= 0;
		} else if (fs_mkdir_p(dir, 0700, &e2) == 0 && fs_dir_safe(dir, &e2) == 0 &&
		           access(dir, W_OK | X_OK) == 0)
			have_dir = 1;
	}
	api_gen_put(a, g);
	c.dir = have_dir ? dir : NULL;
	a->sessions = sessions_new(&c, a->jobs);
	if (a->sessions == NULL)
		return err_set(e, "internal", "out of memory");
	if (!have_dir) {
		snprintf(msg, cap,
		         "no writable state directory for session journals (%s): they live in memory, "
		         "replay is limited to this process's lifetime",
		         e2.code != NULL ? e2.msg : "not writable");
		return 1;
	}
	sessions_replay(a->sessions, &loaded, &interrupted, &skipped);
	snprintf(msg, cap, "session journals in %s: %d replayed (%d marked interrupted), %d skipped", dir,
	         loaded, interrupted, skipped);
	return 0;
}

/* ---- helpers ---------------------------------------------------------------- */

/* fn(arg) on a detached thread of a stack of stack bytes: 0, or the error
 * of pthread_create (no thread to spare: the caller runs it itself). */
static int
start_detached(void *(*fn)(void *), void *arg, size_t stack)
{
	pthread_attr_t at;
	pthread_t th;
	int rc;

	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, stack);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &at, fn, arg);
	pthread_attr_destroy(&at);
	return rc;
}

/* ---- starting sessions ------------------------------------------------------- */

static int
slot_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/*
 * Expand the run template with the body's values: {bin} stays as a whole
 * word for the session to fill in; every other {slot} takes the body's
 * member of that name (a string, integer or boolean); {{ and }} are
 * literal braces. Every body member must be a slot and every slot must be
 * given. A value that would stand alone as a word and starts with '-' is
 * refused unless a "--" word comes before it: it would be read as an
 * option, not as the text it is.
 */
/* Members of a create request that are options of the session, not
 * slots of the template. */
static int
option_key(const char *key)
{
	return strcmp(key, "cwd") == 0 || strcmp(key, "env") == 0 || strcmp(key, "timeout") == 0;
}

static int
expand_run(const manifest_t *m, const struct json_val *body, char **argv, int *argc, int *bin_at,
           struct err *e)
{
	const char *slots[MANIFEST_MAX_ARGV * 4];
	int nslots = 0, i, k, dashdash = 0;
	size_t bi;

	*argc = 0;
	*bin_at = -1;
	for (i = 0; i < m->run.n; i++) {
		const char *t = m->run.v[i], *p;
		size_t cap = strlen(t) + 1, len = 0;
		char *out;

		if (strcmp(t, "{bin}") == 0) {
			/* The session puts the entry at this index. */
			if ((argv[i] = strdup("")) == NULL)
				return err_set(e, "internal", "out of memory");
			*bin_at = i;
			(*argc)++;
			continue;
		}
		out = malloc(SESSION_ARG_MAX);
		if (out == NULL)
			return err_set(e, "internal", "out of memory");
		argv[i] = out;
		(*argc)++;
		for (p = t; *p != '\0';) {
			if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
				if (len + 1 >= SESSION_ARG_MAX)
					goto toolong;
				out[len++] = p[0];
				p += 2;
				continue;
			}
			if (p[0] == '{') {
				const struct json_val *val;
				char name[MANIFEST_ARG_MAX], num[32];
				const char *s;
				size_t n = 0, sl;

				p++;
				while (slot_char(p[n]))
					n++;
				if (p[n] != '}' || n == 0)
					return err_set(e, "install.manifest_invalid",
					               "%s: run word %d: a bad placeholder", m->name, i);
				memcpy(name, p, n);
				name[n] = '\0';
				p += n + 1;
				if (strcmp(name, "bin") == 0)
					return err_set(e, "install.manifest_invalid",
					               "%s: run word %d: {bin} must be a word of its own",
					               m->name, i);
				for (k = 0; k < nslots && strcmp(slots[k], name) != 0; k++)
					;
				if (k == nslots && nslots < (int)(sizeof(slots) / sizeof(slots[0])))
					slots[nslots++] = m->run.v[i] + (p - n - 1 - t);
				val = body != NULL ? json_get(body, name) : NULL;
				if (val == NULL)
					return err_set(e, "request.invalid",
					               "%s is required (the run template of %s uses it)",
					               name, m->name);
				if (val->type == JSON_STRING) {
					s = val->u.str.s;
					sl = val->u.str.len;
					if (strlen(s) != sl)
						return err_set(e, "request.invalid", "%s contains a NUL byte",
						               name);
				} else if (val->type == JSON_NUMBER && val->u.num.is_int) {
					snprintf(num, sizeof(num), "%lld", (long long)val->u.num.i);
					s = num;
					sl = strlen(num);
				} else if (val->type == JSON_TRUE || val->type == JSON_FALSE) {
					s = val->type == JSON_TRUE ? "true" : "false";
					sl = strlen(s);
				} else {
					return err_set(e, "request.invalid",
					               "%s must be a string, an integer or a boolean", name);
				}
				if (len == 0 && *p == '\0' && sl > 0 && s[0] == '-' && !dashdash)
					return err_set(
					    e, "request.invalid",
					    "%s starts with '-' and would be read as an option by %s", name,
					    m->name);
				if (len + sl >= SESSION_ARG_MAX)
					goto toolong;
				memcpy(out + len, s, sl);
				len += sl;
				continue;
			}
			if (len + 1 >= SESSION_ARG_MAX)
				goto toolong;
			out[len++] = *p++;
		}
		out[len] = '\0';
		(void)cap;
		if (strcmp(t, "--") == 0)
			dashdash = 1;
	}
	/* Every member of the body must be a slot. */
	for (bi = 0; body != NULL && bi < body->u.obj.n; bi++) {
		const char *key = body->u.obj.m[bi].key;
		size_t kl = strlen(key);

		if (option_key(key))
			continue;
		for (k = 0; k < nslots; k++)
			if (strncmp(slots[k], key, kl) == 0 && slots[k][kl] == '}')
				break;
		if (k == nslots)
			return err_set(e, "request.invalid", "%s is not a parameter of %s's run template",
			               key, m->name);
	}
	return 0;
toolong:
	return err_set(e, "request.too_large", "run word %d of %s would exceed %u bytes", *argc - 1, m->name,
	               SESSION_ARG_MAX - 1);
}

/* dir (a real path) is under (a real path) or inside it. */
static int
path_within(const char *dir, const char *under)
{
	size_t n = strlen(under);

	return n > 1 && strncmp(dir, under, n) == 0 && (dir[n] == '\0' || dir[n] == '/');
}

/*
 * The session's working directory, into out (its real path): the request's
 * cwd, else server.session_cwd, else serve's HOME, else "/". It must be
 * absolute, an existing directory, and not inside a tools directory or the
 * state directory (an agent writes where it runs). A HOME that does not
 * qualify falls back to "/". 0, or -1 with e (request.invalid for the
 * request's, config.invalid for server.session_cwd).
 */
int
api_session_cwd(struct api_rq *q, const struct json_val *root, char *out, size_t cap, struct err *e)
{
	const struct json_val *v = root != NULL ? json_get(root, "cwd") : NULL;
	const char *want, *from, *code = "request.invalid";
	char *rp = malloc(3 * PATH_MAX), *d, *state;
	struct tools_chain *ch = malloc(sizeof(*ch));
	struct stat st;
	struct err e2 = {0};
	int i, rc = -1;

	if (rp == NULL || ch == NULL) {
		free(rp);
		free(ch);
		return err_set(e, "internal", "out of memory");
	}
	d = rp + PATH_MAX;
	state = rp + 2 * PATH_MAX;
	if (v != NULL) {
		if (v->type != JSON_STRING || strlen(v->u.str.s) != v->u.str.len) {
			err_set(e, code, "cwd must be a string (an absolute path)");
			goto out;
		}
		want = v->u.str.s, from = "cwd";
	} else if (q->g->cfg.server.session_cwd[0] != '\0') {
		want = q->g->cfg.server.session_cwd, from = "server.session_cwd", code = "config.invalid";
	} else {
		want = api_start_getenv(q->a, "HOME"), from = "HOME";
		if (want == NULL || want[0] != '/')
			want = "/";
	}
again:
	if (want[0] != '/') {
		err_set(e, code, "%s %s is not an absolute path", from, want);
		goto out;
	}
	if (realpath(want, rp) == NULL || stat(rp, &st) != 0 || !S_ISDIR(st.st_mode)) {
		err_set(e, code, "%s %s is not an existing directory", from, want);
		goto bad;
	}
	err_clear(&e2);
	if (tools_chain_build(ch, &q->g->cfg, 0, &e2) == 0)
		for (i = 0; i < ch->n; i++)
			if (realpath(ch->d[i].path, d) != NULL && path_within(rp, d)) {
				err_set(e, code, "%s %s is inside the tools directory %s", from, want, d);
				goto bad;
			}
	if (tools_state_dir(&q->g->cfg, d, PATH_MAX) >= 0 && realpath(d, state) != NULL &&
	    path_within(rp, state)) {
		err_set(e, code, "%s %s is inside the state directory %s", from, want, state);
		goto bad;
	}
	snprintf(out, cap, "%s", rp);
	rc = 0;
	goto out;
bad:
	if (strcmp(from, "HOME") == 0 && strcmp(want, "/") != 0) {
		want = "/";
		goto again;
	}
out:
	free(rp);
	free(ch);
	return rc;
}

/*
 * The child's environment: serve's start environment without our own
 * secret, with the request's env (NAME: string, every NAME listed in
 * server.session_env) over it. *owned receives the strings made here
 * (free them, and the array, after use). NULL with e on a bad request.
 */
static char **
session_env(struct api_rq *q, const struct json_val *root, char ***owned, struct err *e)
{
	const struct json_val *v = root != NULL ? json_get(root, "env") : NULL;
	const struct cfg_names *allow = &q->g->cfg.server.session_env;
	char **env, **mine;
	int n = 0, k = 0, nm = 0, i, j;
	size_t bi;

	*owned = NULL;
	if (v != NULL && v->type != JSON_OBJECT) {
		err_set(e, "request.invalid", "env must be an object of NAME: string");
		return NULL;
	}
	for (bi = 0; v != NULL && bi < v->u.obj.n; bi++) {
		const struct json_member *mb = &v->u.obj.m[bi];

		for (j = 0; j < allow->n && strcmp(allow->v[j], mb->key) != 0; j++)
			;
		if (j == allow->n) {
			err_set(e, "request.invalid",
			        "env.%.64s is not a variable a session may set (server.session_env)",
			        mb->key);
			return NULL;
		}
		if (mb->val.type != JSON_STRING || strlen(mb->val.u.str.s) != mb->val.u.str.len) {
			err_set(e, "request.invalid", "env.%.64s must be a string without NUL", mb->key);
			return NULL;
		}
	}
	while (q->a->start_env != NULL && q->a->start_env[n] != NULL)
		n++;
	env = calloc((size_t)n + CFG_LIST_MAX + 1, sizeof(*env));
	mine = calloc(CFG_LIST_MAX + 1, sizeof(*mine));
	if (env == NULL || mine == NULL) {
		free(env);
		free(mine);
		err_set(e, "internal", "out of memory");
		return NULL;
	}
	for (bi = 0; v != NULL && bi < v->u.obj.n && nm < CFG_LIST_MAX; bi++) {
		const struct json_member *mb = &v->u.obj.m[bi];
		size_t len = strlen(mb->key) + mb->val.u.str.len + 2;

		if ((mine[nm] = malloc(len)) == NULL)
			break;
		snprintf(mine[nm++], len, "%s=%s", mb->key, mb->val.u.str.s);
	}
	for (i = 0; i < n; i++) {
		const char *w = q->a->start_env[i];
		int over = strncmp(w, "ABX_SERVER_TOKEN=", 17) == 0;

		for (j = 0; !over && j < nm; j++) {
			size_t kl = strcspn(mine[j], "=");

			over = strncmp(w, mine[j], kl + 1) == 0;
		}
		if (!over)
			env[k++] = q->a->start_env[i];
	}
	for (j = 0; j < nm; j++)
		env[k++] = mine[j];
	*owned = mine;
	return env;
}

/*
 * Create the session of agents.<agent>.run (its policy checked by the
 * caller) for the request q: 0 with *sv (not answered yet) and *timeout_s
 * (the run's "timeout", 0 = none), or 1 when q was answered with an error.
 */
static int start_session(struct api_rq *q, const char *agent, const char *action, const struct json_val *root,
                         const struct wire_start *ws, struct session_view *sv, int *timeout_s, int admitted);

static int
create_session(struct api_rq *q, const char *agent, struct session_view *sv, int *timeout_s)
{
	const struct json_val *root;
	struct json_doc doc;
	int rc;

	if (api_body_json(q, &doc, &root) != 0)
		return 1;
	rc = start_session(q, agent, "run", root, NULL, sv, timeout_s, 1);
	json_free(&doc);
	return rc;
}

int
api_session_start(struct api_rq *q, const char *agent, const struct json_val *root,
                  const struct wire_start *ws, struct session_view *sv)
{
	int t;

	return start_session(q, agent, ws->id != NULL ? "sessions.send_event" : "sessions.create", root, ws,
	                     sv, &t, 0);
}

/* A conversation's turn of an agent whose manifest names a JSON dialect:
 * dialect_argv's argv (the entry at word 0) and *dia; *dia 0 when it names
 * none (the run template's argv, which takes no model or instructions).
 * 0, or -1 with e. */
static int
dialect_run(const manifest_t *m, const struct wire_start *ws, char **argv, int *argc, int *bin_at, int *dia,
            struct err *e)
{
	const char *w[DIALECT_ARGV_MAX + 1], *extra[DIALECT_ARGV_MAX];
	struct dialect_turn t;
	enum dialect d;
	size_t cap;
	char *buf;
	int n, i;

	*dia = 0;
	if (dialect_from_name(m->dialect, &d) != 0 || d == DIALECT_RAW) {
		if (ws->model != NULL || ws->instructions != NULL)
			return err_set(e, "request.invalid",
			               "agent.%s cannot be passed to %s: its manifest names no JSON dialect "
			               "(run.dialect) whose turn argv has the option",
			               ws->model != NULL ? "model" : "instructions", m->name);
		return 1;
	}
	memset(&t, 0, sizeof(t));
	t.bin = "";
	t.prompt = ws->text != NULL ? ws->text : "";
	t.model = ws->model;
	t.instructions = ws->instructions;
	t.conversation = ws->thread != NULL && ws->thread[0] != '\0' ? ws->thread : NULL;
	/* the manifest's run.extra: the agent's non-interactive permission
	 * options (docs/trust-model.md) */
	for (i = 0; i < m->run_extra.n && i < DIALECT_ARGV_MAX; i++)
		extra[i] = m->run_extra.v[i];
	t.extra = extra;
	t.nextra = i;
	cap = strlen(t.prompt) + (t.instructions != NULL ? 6 * strlen(t.instructions) : 0) + 4096;
	if ((buf = malloc(cap)) == NULL)
		return err_set(e, "internal", "out of memory");
	n = dialect_argv(d, &t, w, buf, cap, e);
	for (i = 0; i < n; i++)
		if ((argv[i] = strdup(w[i])) == NULL)
			n = err_set(e, "internal", "out of memory");
		else
			*argc = i + 1;
	free(buf);
	*bin_at = 0;
	*dia = (int)d;
	return n < 0 ? -1 : 0;
}

static int
start_session(struct api_rq *q, const char *agent, const char *action, const struct json_val *root,
              const struct wire_start *ws, struct session_view *sv, int *timeout_s, int admitted)
{
	char op[OP_ID_MAX], *argv[SESSION_ARGV_MAX + 1];
	const char *tools[1] = {agent};
	const struct json_val *tv;
	struct session_spec sp;
	struct job_view *jv = NULL;
	const manifest_t *m;
	struct err e = {0};
	char **env = NULL, **owned = NULL, *cwd = NULL, ed[ERR_DETAILS_MAX];
	struct launch_tool *lt = NULL;
	int argc = 0, i, rc, retry, bin_at = -1, answered = 1, dia = 0;

	err_keep_details(&e, ed, sizeof(ed));
	memset(argv, 0, sizeof(argv));
	snprintf(op, sizeof(op), "agents.%s.%s", agent, action);
	if (!api_agent_enabled(q->g, agent) || ops_find(&q->g->ops, op) == NULL) {
		const char *s = api_suggest(q->g, q->principal, agent, 1);
		api_rq_errf(q, "not_found", "no agent %s is enabled%s%s%s", agent, s ? " (did you mean " : "",
		            s ? s : "", s ? "?)" : "");
		return 1;
	}
	/* Install admission: the op, and agents.<a>.install not denied. */
	if (!admitted && api_rq_policy(q, op, tools, 1) != 0)
		return 1;
	m = manifest_get(q->a->ms, agent, &e);
	if (m == NULL || m->run.n == 0) {
		if (m != NULL)
			err_set(&e, "install.manifest_invalid", "%s has no run block", agent);
		api_rq_err(q, &e);
		goto out;
	}
	/* The request first: a bad one must not start an install. */
	err_clear(&e);
	*timeout_s = 0;
	if ((tv = root != NULL ? json_get(root, "timeout") : NULL) != NULL) {
		if (strcmp(action, "run") != 0) {
			api_rq_errf(q, "request.invalid", "timeout is an option of agents.%s.run only",
			            agent);
			goto out;
		}
		if (tv->type != JSON_NUMBER || !tv->u.num.is_int || tv->u.num.i < 1 || tv->u.num.i > 86400) {
			api_rq_errf(q, "request.invalid", "timeout must be seconds 1..86400");
			goto out;
		}
		*timeout_s = (int)tv->u.num.i;
	}
	if ((ws != NULL && (rc = dialect_run(m, ws, argv, &argc, &bin_at, &dia, &e)) < 0) ||
	    ((ws == NULL || (rc == 1 && ws->text != NULL)) &&
	     expand_run(m, root, argv, &argc, &bin_at, &e) != 0)) {
		api_rq_err(q, &e);
		goto out;
	}
	jv = malloc(sizeof(*jv));
	cwd = malloc(PATH_MAX);
	lt = malloc(sizeof(*lt));
	if (jv == NULL || cwd == NULL || lt == NULL) {
		api_rq_errf(q, "internal", "out of memory");
		goto out;
	}
	err_clear(&e);
	if (api_session_cwd(q, root, cwd, PATH_MAX, &e) != 0 ||
	    (env = session_env(q, root, &owned, &e)) == NULL) {
		api_rq_err(q, &e);
		goto out;
	}
	launch_tool_of(lt, m);
	/* Over a limit: refused before an install starts for it. */
	err_clear(&e);
	if (sessions_admit(q->a->sessions, agent, &retry, &e) != 0) {
		api_rq_retry_after(q, retry);
		api_rq_err(q, &e);
		goto out;
	}
	/* Never waits: ready, pending (the job runs), or an error now
	 * (install.required, install.disabled, install.backoff, …). */
	err_clear(&e);
	rc = jobs_need(q->a->jobs, &q->g->cfg, agent, q->principal, op, 0, jv, &e);
	if (rc < 0) {
		if (e.code != NULL && strcmp(e.code, "install.backoff") == 0)
			api_rq_retry_after(q, jv->retry_after);
		api_rq_err(q, &e);
		goto out;
	}
	memset(&sp, 0, sizeof(sp));
	sp.agent = agent;
	sp.principal = q->principal;
	sp.op = op;
	sp.argv = argv;
	sp.argc = argc;
	sp.bin_at = bin_at;
	sp.envp = env;
	sp.tool = lt;
	sp.cwd = cwd;
	sp.cfg = &q->g->cfg;
	sp.entry = rc == 0 ? jv->entry : "";
	sp.job = rc == 1 ? jv->id : NULL;
	if (ws != NULL) {
		sp.conv = 1;
		sp.conf = ws->conf;
		sp.text = ws->text;
		sp.dialect = dia;
	}
	err_clear(&e);
	retry = 0;
	if (ws != NULL && ws->id != NULL ? sessions_turn(q->a->sessions, ws->id, &sp, ws->text, sv, &e) != 0
	                                 : sessions_create(q->a->sessions, &sp, sv, &retry, &e) != 0) {
		if (retry > 0)
			api_rq_retry_after(q, retry);
		api_rq_err(q, &e);
		goto out;
	}
	answered = 0;
out:
	for (i = 0; i < argc; i++)
		free(argv[i]);
	free(env);
	for (i = 0; owned != NULL && owned[i] != NULL; i++)
		free(owned[i]);
	free(owned);
	free(jv);
	free(cwd);
	free(lt);
	return answered;
}

/* ---- agents.<a>.run: a session run to its end ------------------------------ */

/* The thread that waits for a run's session (the worker is free). */
#define API_RUN_STACK (256u << 10)

struct run_ctx {
	struct api_rq q; /* its generation held (api_gen_hold) */
	int timeout_s;   /* the request's "timeout": cancel after it; 0 = none */
	char agent[CFG_NAME_MAX];
	char id[SESSION_ID_MAX];
};

/* Append data[0..n) and a newline (unless partial) to b, whole or not at
 * all: what does not fit in b's max (or in memory) sets *truncated, and a
 * later, shorter chunk may still fit. */
static void
run_append(struct buf *b, const char *data, size_t n, int partial, int *truncated)
{
	size_t want = n + (partial ? 0 : 1);

	if (want > b->max - b->len || buf_put(b, data, n) != 0 || (!partial && buf_put(b, "\n", 1) != 0)) {
		*truncated = 1;
		b->over = 0;
	}
}

/* Wait for the session to end, then answer with its output as a command op
 * answers: {exit_code, stdout, stderr, duration_ms, truncated} and the
 * session's id, status and error. */
static void
run_finish(struct run_ctx *x)
{
	struct sessions *S = x->q.a->sessions;
	size_t cap = x->q.g->cfg.server.max_output_bytes > 0 ? (size_t)x->q.g->cfg.server.max_output_bytes
	                                                     : API_OUTPUT_DEFAULT;
	struct buf out[3] = {BUF_INIT(cap), BUF_INIT(cap), BUF_INIT(cap)};
	struct session_view v;
	struct json_w w;
	char *buf = NULL, *line, *nl;
	const char *o1, *o2;
	uint32_t after = 0, last;
	size_t len, each, on, en;
	int n, done = 0, truncated = 0, i, timed_out = 0;
	int64_t until = clock_ms() + (int64_t)x->timeout_s * 1000;

	while (sessions_get(S, x->agent, x->id, &v) == 0 && v.status == SESSION_IN_PROGRESS) {
		if (x->timeout_s > 0 && !timed_out && clock_ms() >= until) {
			/* SIGTERM, SIGKILL after the grace: the end comes */
			timed_out = 1;
			sessions_cancel(S, x->agent, x->id, &v);
		}
		sessions_wait(S, x->id, v.events, API_SSE_TICK_MS);
	}
	while (!done) {
		n = sessions_read(S, x->agent, x->id, after, API_EVENTS_PAGE_MAX, API_EVENTS_BYTES, 0, &buf,
		                  &len, &last, &done);
		if (n <= 0) {
			free(buf);
			break;
		}
		for (line = buf; line < buf + len; line = nl + 1) {
			struct json_doc d;
			struct err e = {0};
			const char *type, *stream;
			const struct json_val *data, *partial;

			if ((nl = memchr(line, '\n', (size_t)(buf + len - line))) == NULL)
				nl = buf + len;
			if (json_parse(&d, line, (size_t)(nl - line), NULL, &e) != 0)
				continue;
			type = json_get_str(d.root, "type");
			stream = json_get_str(d.root, "stream");
			data = json_get(d.root, "data");
			partial = json_get(d.root, "partial");
			if (type != NULL && strcmp(type, "agent.session.output") == 0 && stream != NULL &&
			    data != NULL && data->type == JSON_STRING)
				run_append(&out[strcmp(stream, "stderr") == 0 ? 2 : 1], data->u.str.s,
				           data->u.str.len, partial != NULL && partial->type == JSON_TRUE,
				           &truncated);
			else if (type != NULL && (strcmp(type, "agent.session.truncated") == 0 ||
			                          strcmp(type, "agent.session.output_dropped") == 0))
				truncated = 1;
			json_free(&d);
		}
		free(buf);
		buf = NULL;
		after = last;
	}
	sessions_get(S, x->agent, x->id, &v);
	each = api_stream_room(&x->q, cap);
	o1 = out[1].p != NULL ? (const char *)out[1].p : "";
	o2 = out[2].p != NULL ? (const char *)out[2].p : "";
	on = json_escaped_prefix(o1, out[1].len, each);
	en = json_escaped_prefix(o2, out[2].len, each);
	if (on < out[1].len || en < out[2].len)
		truncated = 1;
	json_w_init(&w, 2 * each + API_ANSWER_FRAME);
	json_w_obj(&w);
	json_w_key(&w, "exit_code");
	v.exited ? json_w_int(&w, v.exit_code) : json_w_null(&w);
	json_w_key(&w, "stdout");
	json_w_strn(&w, o1, on);
	json_w_key(&w, "stderr");
	json_w_strn(&w, o2, en);
	json_w_kint(&w, "duration_ms", v.duration_ms);
	json_w_kbool(&w, "truncated", truncated);
	json_w_kbool(&w, "timed_out", timed_out);
	json_w_kstr(&w, "session", v.id);
	json_w_kstr(&w, "status", session_status_name(v.status));
	if (v.error[0] != '\0')
		json_w_kstr(&w, "error", v.error);
	json_w_end(&w);
	for (i = 1; i <= 2; i++)
		buf_free(&out[i]);
	api_rq_json_w(&x->q, 200, &w);
}

static void *
run_thread(void *arg)
{
	struct run_ctx *x = arg;
	struct httpd_resp *resp = x->q.resp;

	run_finish(x);
	api_rq_record(&x->q);
	sessions_hold(x->q.a->sessions, x->id, 0);
	api_gen_put(x->q.a, x->q.g);
	free(x);
	httpd_complete(resp);
	return NULL;
}

void
api_agent_run(struct api_rq *q, const char *agent)
{
	struct session_view sv;
	struct run_ctx *x;
	int rc;

	if ((x = calloc(1, sizeof(*x))) == NULL) {
		api_rq_errf(q, "internal", "out of memory");
		return;
	}
	if (create_session(q, agent, &sv, &x->timeout_s) != 0) {
		free(x);
		return;
	}
	sessions_hold(q->a->sessions, sv.id, 1);
	snprintf(x->agent, sizeof(x->agent), "%s", agent);
	snprintf(x->id, sizeof(x->id), "%s", sv.id);
	x->q = *q;
	api_gen_hold(q->a, q->g);
	q->deferred = 1;
	/* Deferred before the thread exists: it may answer first. */
	httpd_defer(q->resp);
	rc = start_detached(run_thread, x, API_RUN_STACK);
	if (rc != 0)
		run_thread(x); /* no thread to spare: wait on this worker */
}

/* ---- reading ----------------------------------------------------------------- */

/*
 * One event stream, on a thread of its own: the worker that took the
 * request deferred it (httpd_defer) and went back to the pool, so open
 * streams never starve other requests. Everything the thread needs is
 * copied here; resp stays valid until httpd_complete, the last thing the
 * thread does with it (the session hold and stream slot are given back
 * before: once a drain sees every answer complete, nothing touches S).
 */
struct sse_ctx {
	struct sessions *S;
	struct httpd_resp *resp;
	char id[SESSION_ID_MAX];
	char principal[POL_NAME_MAX];
	uint32_t after;
	int hb_ms;
};

static void
sse_run(struct sse_ctx *x)
{
	struct sessions *S = x->S;
	struct httpd_resp *resp = x->resp;
	int64_t end = clock_ms() + API_SSE_MAX_MS, idle_since = clock_ms();
	struct buf b = BUF_INIT(SESSIONS_READ_ROOM(API_EVENTS_BYTES));
	char hello[64];
	uint32_t last = x->after;
	int n, done = 0, w, left, hb_ms = x->hb_ms;

	if (httpd_stream_begin(resp, 200, "text/event-stream") != 0)
		goto out;
	snprintf(hello, sizeof(hello), "retry: %d\n\n", API_SSE_RETRY_MS);
	if (httpd_stream_write(resp, hello, strlen(hello)) != 0)
		goto out;
	while (!done) {
		n = sessions_read_buf(S, NULL, x->id, last, API_EVENTS_PAGE_MAX, API_EVENTS_BYTES, 1, &b,
		                      &last, &done);
		if (n < 0)
			break;
		if (n > 0) {
			if (httpd_stream_write(resp, b.p, b.len) != 0)
				break;
			continue;
		}
		if (done || httpd_resp_closing(resp) || clock_ms() >= end)
			break;
		/* Short waits, so a draining server is noticed at once. */
		left = hb_ms - (int)(clock_ms() - idle_since);
		w = sessions_wait(S, x->id, last,
		                  left < 1                 ? 1
		                  : left < API_SSE_TICK_MS ? left
		                                           : API_SSE_TICK_MS);
		if (w < 0)
			break;
		if (w > 0) {
			idle_since = clock_ms();
		} else if (clock_ms() - idle_since >= hb_ms) {
			if (httpd_stream_write(resp, ": keep-alive\n\n", 14) != 0)
				break;
			idle_since = clock_ms();
		}
	}
	httpd_stream_end(resp);
out:
	buf_free(&b);
	sessions_hold(S, x->id, 0);
	sessions_stream_release(S, x->principal);
}

static void *
sse_thread(void *arg)
{
	struct sse_ctx *x = arg;
	struct httpd_resp *resp = x->resp;

	sse_run(x);
	free(x);
	httpd_complete(resp);
	return NULL;
}

/* The streams one principal may hold (API_SSE_PRINCIPAL_SHARE). */
static int
streams_per_principal(const struct api_rq *q, int max)
{
	int i, with_tokens = 0;

	for (i = 0; i < q->g->pol.n; i++)
		with_tokens += q->g->pol.p[i].ntokens > 0;
	if (with_tokens < 2)
		return max;
	return (max + API_SSE_PRINCIPAL_SHARE - 1) / API_SSE_PRINCIPAL_SHARE;
}

void
api_events_stream(struct api_rq *q, const char *id, uint32_t after)
{
	struct sessions *S = q->a->sessions;
	struct session_view v;
	struct sse_ctx *x;
	int rc, max, mine;

	if (sessions_get(S, NULL, id, &v) != 0) {
		api_rq_errf(q, "not_found", "no session %s", id);
		return;
	}
	x = calloc(1, sizeof(*x));
	if (x == NULL) {
		api_rq_errf(q, "internal", "out of memory");
		return;
	}
	snprintf(x->principal, sizeof(x->principal), "%s", q->principal != NULL ? q->principal : "");
	max = q->g->cfg.server.max_streams > 0 ? q->g->cfg.server.max_streams : API_SSE_STREAMS_DEFAULT;
	mine = streams_per_principal(q, max);
	rc = sessions_stream_acquire(S, x->principal, mine);
	if (rc != 0) {
		api_rq_retry_after(q, 5);
		if (rc == -2)
			api_rq_errf(q, "request.rate_limited",
			            "principal %s holds %d event stream%s, the most one principal may hold "
			            "(a quarter of server.max_streams %d); close one of its streams first",
			            x->principal[0] ? x->principal : "-", mine, mine == 1 ? "" : "s", max);
		else
			api_rq_errf(q, "request.rate_limited",
			            "every event stream slot is taken (server.max_streams)");
		free(x);
		return;
	}
	sessions_hold(S, id, 1);
	q->status = 200;
	x->S = S;
	x->resp = q->resp;
	snprintf(x->id, sizeof(x->id), "%s", id);
	x->after = after;
	x->hb_ms = q->g->cfg.server.sse_heartbeat * 1000;
	/* Deferred before the thread exists: it may answer and complete
	 * before this worker is back in its loop. */
	httpd_defer(q->resp);
	rc = start_detached(sse_thread, x, API_SSE_STACK);
	if (rc != 0) {
		/* No thread to spare: stream from this worker, as before. */
		sse_run(x);
		free(x);
		httpd_complete(q->resp);
	}
}
