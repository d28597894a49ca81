/*
 * Command ops: validate the body against the op's parameters, install what
 * the op needs, expand argv (no shell), resolve the program to an absolute
 * path, run it in its own process group under the op's timeout with the
 * declared environment only, and answer with its exit code and output.
 */
#include "api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "manifest.h"
#include "proc.h"

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

static const char *
start_getenv(struct api *a, const char *name)
{
	size_t n = strlen(name);
	char *const *e;

	if (a->start_env == NULL)
		return NULL;
	for (e = a->start_env; *e != NULL; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

static int
executable(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/*
 * argv[0] to an absolute path (SPEC §5 order): an absolute path as is; a
 * bare name: the binary of a tool the op installs (its entry from ensure),
 * then <tools>/bin of the chain, then serve's start PATH, skipping entries
 * that are not absolute or are world-writable.
 */
static int
resolve(struct api_rq *q, const struct op *op, const char *name, char (*entries)[PATH_MAX], char *out,
        size_t cap, struct err *e)
{
	struct tools_chain *ch;
	const char *path;
	char dirs[API_PATH_MAX];
	char *save = NULL, *d;
	struct stat st;
	struct err e2;
	int i;

	if (name[0] == '/') {
		snprintf(out, cap, "%s", name);
		return 0;
	}
	if (strchr(name, '/') != NULL)
		return err_set(e, "config.invalid", "%s: %s: a program is an absolute path or a bare name",
		               op->id, name);
	for (i = 0; i < op->ninstall; i++) {
		const manifest_t *m = manifest_get(q->a->ms, op->install[i], &e2);

		if (m != NULL && strcmp(m->binary, name) == 0 && entries[i][0] == '/') {
			snprintf(out, cap, "%s", entries[i]);
			return 0;
		}
	}
	ch = malloc(sizeof(*ch));
	if (ch != NULL && tools_chain_build(ch, &q->g->set, 0, &e2) == 0)
		for (i = 0; i < ch->n; i++)
			if ((size_t)snprintf(out, cap, "%s/bin/%s", ch->d[i].path, name) < cap &&
			    executable(out)) {
				free(ch);
				return 0;
			}
	free(ch);
	path = start_getenv(q->a, "PATH");
	if (path != NULL && strlen(path) < sizeof(dirs)) {
		memcpy(dirs, path, strlen(path) + 1);
		for (d = strtok_r(dirs, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
			if (d[0] != '/' || stat(d, &st) != 0 || (st.st_mode & S_IWOTH))
				continue;
			if ((size_t)snprintf(out, cap, "%s/%s", d, name) < cap && executable(out))
				return 0;
		}
	}
	return err_set(e, "not_found", "%s: program %s not found in the tools directories or PATH", op->id,
	               name);
}

static int
draining(void *resp)
{
	return httpd_resp_closing(resp);
}

void
api_run_command(struct api_rq *q, const struct op *op)
{
	const char *inst[OP_INSTALL_MAX];
	char(*entries)[PATH_MAX] = NULL;
	char *argv[OP_ARGV_MAX + 1], *envp[OP_ENV_MAX + 1], *envbuf[OP_ENV_MAX];
	char *abuf = NULL, *prog = NULL;
	const struct json_val *root;
	struct proc_capture cap;
	struct proc_spec spec;
	struct json_doc doc;
	struct proc p;
	struct json_w w;
	struct err e;
	size_t outmax;
	int i, argc, nenv = 0, limit, have_slot = 0;

	memset(&cap, 0, sizeof(cap));
	if (api_body_json(q, &doc, &root) != 0)
		return;
	for (i = 0; i < op->ninstall; i++)
		inst[i] = op->install[i];
	entries = calloc(OP_INSTALL_MAX, sizeof(*entries));
	abuf = malloc(OP_EXPAND_MAX);
	prog = malloc(PATH_MAX);
	outmax = q->g->cfg.server.max_output_bytes > 0 ? (size_t)q->g->cfg.server.max_output_bytes
	                                               : API_OUTPUT_DEFAULT;
	cap.cap = outmax;
	cap.out = malloc(outmax + 1);
	cap.err = malloc(outmax + 1);
	if (entries == NULL || abuf == NULL || prog == NULL || cap.out == NULL || cap.err == NULL) {
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
	if (resolve(q, op, argv[0], entries, prog, PATH_MAX, &e) != 0) {
		api_rq_err(q, &e);
		goto out;
	}
	argv[0] = prog;
	for (i = 0; i < op->nenv; i++) {
		const char *v = start_getenv(q->a, op->env[i]);
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
	limit = op->concurrency > 0 ? op->concurrency : q->g->cfg.server.op_concurrency;
	if (slot_acquire(q->a, op->id, limit) != 0) {
		api_rq_retry_after(q, API_BUSY_RETRY_AFTER);
		api_rq_errf(q, "request.rate_limited", "%s is running %d times already", op->id, limit);
		goto out;
	}
	have_slot = 1;
	memset(&spec, 0, sizeof(spec));
	spec.argv = argv;
	spec.envp = envp;
	spec.cwd = op->cwd[0] != '\0' ? op->cwd : NULL;
	spec.timeout_ms = op->timeout > 0 ? op->timeout * 1000 : 0;
	/* A draining server (SIGTERM) ends the run rather than outwait it:
	 * the child is in its own session and would outlive us. */
	if (proc_run_until(&p, &spec, &cap, draining, q->resp, &e) != 0) {
		api_rq_err(q, &e);
		goto out;
	}
	api_count_op(q->a, p.timed_out);
	/* \u00XX escapes grow text up to 6x, for each stream. */
	json_w_init(&w, 12 * outmax + 4096);
	json_w_obj(&w);
	json_w_kint(&w, "exit_code", proc_exit_code(&p));
	json_w_key(&w, "stdout");
	json_w_strn(&w, cap.out, cap.out_len);
	json_w_key(&w, "stderr");
	json_w_strn(&w, cap.err, cap.err_len);
	json_w_kint(&w, "duration_ms", proc_elapsed_ms(&p));
	json_w_kbool(&w, "truncated", cap.truncated);
	if (p.timed_out)
		json_w_kbool(&w, "timed_out", 1);
	if (p.stopped)
		json_w_kbool(&w, "stopped", 1);
	json_w_end(&w);
	if (w.overflow) {
		json_w_free(&w);
		api_rq_errf(q, "internal", "response too large");
		goto out;
	}
	api_rq_json(q, 200, w.buf);
	json_w_free(&w);
out:
	if (have_slot)
		slot_release(q->a, op->id);
	for (i = 0; i < nenv; i++)
		free(envbuf[i]);
	json_free(&doc);
	free(entries);
	free(abuf);
	free(prog);
	free(cap.out);
	free(cap.err);
}
