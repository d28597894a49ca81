/* core/api (authentication: token presentation, digests, the generated
 * token file) and core/jobs (one job per tool, joining, waiting, failures,
 * backoff), with a fake install engine. Placeholders: hostile values stay
 * one argv word each (ops_expand_argv, as the API calls it). */
#include "unit.h"

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/api.h"
#include "base/digest.h"
#include "server/jobs.h"
#include "base/json.h"
#include "server/ops.h"
#include "install/install_int.h"

/* ---- token presentation ------------------------------------------------ */

static int
tok(const char *x, int nx, const char *a, int na, char *out)
{
	const char *t;
	size_t n;
	int rc = api_token_from(x, nx, a, na, &t, &n);

	out[0] = '\0';
	if (rc == 1) {
		memcpy(out, t, n);
		out[n] = '\0';
	}
	return rc;
}

static void
test_token_presentation(void **st)
{
	char t[600], longtok[600];

	assert_int_equal(tok(NULL, 0, NULL, 0, t), 0);
	assert_int_equal(tok("abc", 1, NULL, 0, t), 1);
	assert_string_equal(t, "abc");
	assert_int_equal(tok(NULL, 0, "Bearer abc", 1, t), 1);
	assert_string_equal(t, "abc");
	assert_int_equal(tok(NULL, 0, "bEARER   abc", 1, t), 1);
	assert_string_equal(t, "abc");
	assert_int_equal(tok(NULL, 0, "Bearer\tabc", 1, t), 1);
	/* both, equal: fine; different: refused */
	assert_int_equal(tok("abc", 1, "Bearer abc", 1, t), 1);
	assert_int_equal(tok("abc", 1, "Bearer abd", 1, t), -1);
	assert_int_equal(tok("abc", 1, "Bearer abcd", 1, t), -1);
	/* other schemes, no token, spaces inside, repeats, control bytes */
	assert_int_equal(tok(NULL, 0, "Basic abc", 1, t), -2);
	assert_int_equal(tok(NULL, 0, "Token abc", 1, t), -2);
	assert_int_equal(tok(NULL, 0, "Bearer", 1, t), -1);
	assert_int_equal(tok(NULL, 0, "Bearer ", 1, t), -1);
	assert_int_equal(tok(NULL, 0, "Bearerabc", 1, t), -1);
	assert_int_equal(tok(NULL, 0, "Bearer a b", 1, t), -1);
	assert_int_equal(tok("", 1, NULL, 0, t), -1);
	assert_int_equal(tok("abc", 2, NULL, 0, t), -1);
	assert_int_equal(tok(NULL, 0, "Bearer abc", 2, t), -1);
	assert_int_equal(tok("a\x01"
	                     "b",
	                     1, NULL, 0, t),
	                 -1);
	assert_int_equal(tok("a\xc3\xa9", 1, NULL, 0, t), -1);
	memset(longtok, 'a', API_TOKEN_MAX + 1);
	longtok[API_TOKEN_MAX + 1] = '\0';
	assert_int_equal(tok(longtok, 1, NULL, 0, t), -1);
	longtok[API_TOKEN_MAX] = '\0';
	assert_int_equal(tok(longtok, 1, NULL, 0, t), 1);
}

static void
test_principal_by_digest(void **st)
{
	struct policy *p = calloc(1, sizeof(*p));
	struct digest d;
	struct err e = {0};

	policy_init(p);
	assert_int_equal(api_policy_has_tokens(p), 0);
	digest_buf(DIGEST_SHA256, "s3cret", 6, &d);
	assert_int_equal(policy_add_token_digest(p, "alice", d.v, &e), 0);
	assert_int_equal(api_policy_has_tokens(p), 1);
	assert_string_equal(api_principal(NULL, p, "s3cret", 6), "alice");
	assert_null(api_principal(NULL, p, "s3cre", 5));
	assert_null(api_principal(NULL, p, "s3cret!", 7));
	assert_null(api_principal(NULL, p, "S3cret", 6));
	assert_null(api_principal(NULL, p, "", 0));
	free(p);
}

static void
test_token_file(void **st)
{
	char dir[] = "/tmp/abx-api-XXXXXX", sd[256], t1[80], t2[80], path[300];
	struct stat sb;
	struct err e = {0};
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(sd, sizeof(sd), "%s/a/b/state", dir);
	assert_int_equal(api_token_file(sd, t1, sizeof(t1), path, sizeof(path), &e), 0);
	assert_int_equal(strlen(t1), 64);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_int_equal(stat(sd, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	/* a restart reads the same token */
	assert_int_equal(api_token_file(sd, t2, sizeof(t2), path, sizeof(path), &e), 0);
	assert_string_equal(t1, t2);
	/* a file others can read is refused, not used */
	chmod(path, 0644);
	assert_int_equal(api_token_file(sd, t2, sizeof(t2), path, sizeof(path), &e), -1);
	assert_string_equal(e.code, "config.state_dir_unsafe");
	/* garbage is refused */
	chmod(path, 0600);
	f = fopen(path, "w");
	fputs("not a token\n", f);
	fclose(f);
	assert_int_equal(api_token_file(sd, t2, sizeof(t2), path, sizeof(path), &e), -1);
	/* an unsafe state directory is refused */
	unlink(path);
	chmod(sd, 0777);
	assert_int_equal(api_token_file(sd, t2, sizeof(t2), path, sizeof(path), &e), -1);
	assert_string_equal(e.code, "config.state_dir_unsafe");
	chmod(sd, 0700);
	rmdir(sd);
	snprintf(sd, sizeof(sd), "%s/a/b", dir);
	rmdir(sd);
	snprintf(sd, sizeof(sd), "%s/a", dir);
	rmdir(sd);
	rmdir(dir);
}

/* ---- placeholders ------------------------------------------------------- */

static void
test_placeholders_hostile(void **st)
{
	static const char cmds[] =
	    "[{\"id\":\"x.y\",\"argv\":[\"/bin/echo\",\"--name={v}\",\"{n}\"],"
	    "\"params\":{\"v\":{\"type\":\"string\",\"required\":true},\"n\":{\"type\":\"integer\"}}}]";
	char file[] = "/tmp/abx-api-cmdsXXXXXX", *argv[OP_ARGV_MAX + 1], *buf = malloc(OP_EXPAND_MAX);
	struct json_doc doc;
	struct ops o;
	struct err e = {0};
	int fd = mkstemp(file), argc;
	const char *js;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, cmds, sizeof(cmds) - 1), (ssize_t)(sizeof(cmds) - 1));
	close(fd);
	assert_int_equal(ops_init(&o, &e), 0);
	assert_int_equal(ops_load_commands(&o, file, NULL, NULL, &e), 0);
	js = "{\"v\":\"; rm -rf / $(id) `x`\\n|&\"}";
	assert_int_equal(json_parse(&doc, js, strlen(js), NULL, &e), 0);
	argc = ops_expand_argv(ops_find(&o, "x.y"), doc.root, argv, buf, OP_EXPAND_MAX, &e);
	assert_int_equal(argc, 2);
	assert_string_equal(argv[1], "--name=; rm -rf / $(id) `x`\n|&");
	assert_null(argv[2]);
	json_free(&doc);
	js = "{\"v\":\"a\",\"n\":\"1; id\"}";
	assert_int_equal(json_parse(&doc, js, strlen(js), NULL, &e), 0);
	assert_int_equal(ops_expand_argv(ops_find(&o, "x.y"), doc.root, argv, buf, OP_EXPAND_MAX, &e), -1);
	assert_string_equal(e.code, "request.invalid");
	json_free(&doc);
	js = "{\"n\":3}";
	assert_int_equal(json_parse(&doc, js, strlen(js), NULL, &e), 0);
	assert_int_equal(ops_expand_argv(ops_find(&o, "x.y"), doc.root, argv, buf, OP_EXPAND_MAX, &e), -1);
	json_free(&doc);
	ops_free(&o);
	unlink(file);
	free(buf);
}

/* ---- jobs with a fake engine ------------------------------------------ */

/* The job table calls the install engine itself (check, backoff, progress)
 * and install_ensure through the one function it is given: the fake stands
 * in for that one, and records a failure's backoff as the engine does, in a
 * real tools directory. */
struct fake {
	pthread_mutex_t mu;
	int installed;    /* ready after an install */
	int installs;     /* ensure() calls that installed */
	int sleep_ms;     /* how long an install takes */
	const char *fail; /* error code to fail with, or NULL */
	int held;         /* an install waits until the test clears this (10 s at most) */
};
static struct fake *fake;

static int
fake_install(struct install_env *c, const char *tool, const struct install_req *rq, struct install_result *r,
             struct err *e)
{
	struct fake *f = fake;
	int rc = 0;

	pthread_mutex_lock(&f->mu);
	if (f->installed) {
		r->state = INSTALL_READY;
		snprintf(r->entry, sizeof(r->entry), "/tools/%s", tool);
	} else if (rq->flags & INSTALL_F_CHECK) {
		r->state = INSTALL_MISSING;
		rc = err_set(e, "not_found", "%s is not installed", tool);
	} else if (!config_mode_installs_at_runtime(c->cfg->install.mode)) {
		r->state = INSTALL_MISSING;
		rc = err_set(e, "install.required", "%s: mode forbids installing", tool);
	} else {
		pthread_mutex_unlock(&f->mu);
		if (rq->obs != NULL && rq->obs->progress != NULL) {
			struct install_progress pg = {10, 100, 0, 1};
			rq->obs->progress(rq->obs->arg, tool, "download", &pg);
		}
		usleep((useconds_t)f->sleep_ms * 1000);
		for (int i = 0; i < 5000 && __atomic_load_n(&f->held, __ATOMIC_SEQ_CST); i++)
			usleep(2000);
		pthread_mutex_lock(&f->mu);
		f->installs++;
		r->n.bytes_downloaded = 100;
		if (f->fail != NULL) {
			r->state = INSTALL_FAILED;
			rc = err_set(e, f->fail, "%s failed", tool);
			install_backoff_record(c, tool, e);
		} else {
			f->installed = 1;
			r->state = INSTALL_READY;
			snprintf(r->entry, sizeof(r->entry), "/tools/%s", tool);
		}
	}
	pthread_mutex_unlock(&f->mu);
	return rc;
}

/* A configuration in mode with its own tools directory (jobs_done removes
 * it), installed by the fake f. */
static struct config *
jobs_set(struct fake *f, enum cfg_mode mode)
{
	struct config *set = calloc(1, sizeof(*set));

	fake = f;
	assert_non_null(set);
	assert_int_equal(unit_mkdtemp(set->tools_dir, sizeof(set->tools_dir), "test-jobs"), 0);
	set->install.mode = mode;
	return set;
}

static void
jobs_done(struct jobs *J, struct config *set)
{
	jobs_free(J);
	unit_rmtree(set->tools_dir);
	free(set);
}

struct caller {
	struct jobs *J;
	struct config *set;
	int rc;
	struct job_view v;
};

static void *
call(void *arg)
{
	struct caller *c = arg;
	struct err e = {0};

	c->rc = jobs_need(c->J, c->set, "tool", "p", "op", 5000, &c->v, &e);
	return NULL;
}

static void
test_jobs_concurrent_callers_share_one_install(void **st)
{
	struct fake f = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 200, NULL, 0};
	struct config *set = jobs_set(&f, CFG_MODE_LAZY);
	struct jobs *J = jobs_new(NULL, fake_install, NULL, NULL);
	struct caller c[8];
	pthread_t th[8];
	struct jobs_stats s;
	int i;

	for (i = 0; i < 8; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].J = J;
		c[i].set = set;
		c[i].rc = -9;
		pthread_create(&th[i], NULL, call, &c[i]);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(c[i].rc, 0);
		assert_string_equal(c[i].v.entry, "/tools/tool");
	}
	assert_int_equal(f.installs, 1);
	jobs_get_stats(J, &s);
	assert_int_equal(s.started, 1);
	assert_int_equal(s.succeeded, 1);
	assert_int_equal(s.bytes, 100);
	assert_int_equal(s.running, 0);
	jobs_done(J, set);
}

static void
test_jobs_pending_then_join_then_done(void **st)
{
	/* the install runs until the pending answers have been looked at */
	struct fake f = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, NULL, 1};
	struct config *set = jobs_set(&f, CFG_MODE_LAZY);
	struct jobs *J = jobs_new(NULL, fake_install, NULL, NULL);
	struct job_view v, v2, v3;
	struct err e = {0};

	assert_int_equal(jobs_need(J, set, "tool", "p", "op", 50, &v, &e), 1);
	assert_int_equal(v.status, JOB_PENDING);
	assert_int_equal(strncmp(v.id, "ij_", 3), 0);
	assert_int_equal(strlen(v.id), 19);
	assert_int_equal(jobs_need(J, set, "tool", "q", "op2", 0, &v2, &e), 1);
	assert_string_equal(v2.id, v.id); /* joined, not a second job */
	assert_int_equal(jobs_running(J, "tool", &v3), 0);
	assert_int_equal(jobs_get(J, v.id, &v3), 0);
	assert_int_equal(v3.status, JOB_PENDING);
	__atomic_store_n(&f.held, 0, __ATOMIC_SEQ_CST);
	assert_int_equal(jobs_need(J, set, "tool", "p", "op", 5000, &v2, &e), 0);
	assert_int_equal(jobs_get(J, v.id, &v3), 0);
	assert_int_equal(v3.status, JOB_SUCCEEDED);
	assert_int_equal(jobs_running(J, "tool", &v3), -1);
	assert_int_equal(jobs_get(J, "ij_0000000000000000", &v3), -1);
	assert_int_equal(f.installs, 1);
	jobs_done(J, set);
}

static void
test_jobs_failure_backoff_reset(void **st)
{
	struct fake f = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 10, "install.checksum_mismatch", 0};
	struct config *set = jobs_set(&f, CFG_MODE_LAZY);
	struct jobs *J = jobs_new(NULL, fake_install, NULL, NULL);
	struct job_view v;
	struct jobs_stats s;
	struct err e = {0};

	assert_int_equal(jobs_need(J, set, "tool", "p", "op", 5000, &v, &e), -1);
	assert_string_equal(e.code, "install.checksum_mismatch");
	assert_int_equal(v.status, JOB_FAILED);
	/* a recent failure: backoff, no new job */
	assert_int_equal(jobs_need(J, set, "tool", "p", "op", 5000, &v, &e), -1);
	assert_string_equal(e.code, "install.backoff");
	/* the engine's record: 30 s from the failure, a second may have passed */
	assert_in_range(v.retry_after, 29, 30);
	assert_int_equal(f.installs, 1);
	jobs_reset(J, set, "tool");
	assert_int_equal(jobs_need(J, set, "tool", "p", "op", 5000, &v, &e), -1);
	assert_string_equal(e.code, "install.checksum_mismatch");
	assert_int_equal(f.installs, 2);
	jobs_get_stats(J, &s);
	assert_int_equal(s.failed, 2);
	jobs_done(J, set);
}

static void
test_jobs_mode_build_never_starts_a_job(void **st)
{
	struct fake f = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 10, NULL, 0};
	struct config *set = jobs_set(&f, CFG_MODE_BUILD);
	struct jobs *J = jobs_new(NULL, fake_install, NULL, NULL);
	struct job_view v;
	struct jobs_stats s;
	struct err e = {0};

	assert_int_equal(jobs_need(J, set, "tool", "p", "op", 5000, &v, &e), -1);
	assert_string_equal(e.code, "install.required");
	jobs_get_stats(J, &s);
	assert_int_equal(s.started, 0);
	assert_int_equal(f.installs, 0);
	/* already installed: ready in any mode */
	f.installed = 1;
	assert_int_equal(jobs_need(J, set, "tool", "p", "op", 5000, &v, &e), 0);
	jobs_done(J, set);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_token_presentation),
	    cmocka_unit_test(test_principal_by_digest),
	    cmocka_unit_test(test_token_file),
	    cmocka_unit_test(test_placeholders_hostile),
	    cmocka_unit_test(test_jobs_concurrent_callers_share_one_install),
	    cmocka_unit_test(test_jobs_pending_then_join_then_done),
	    cmocka_unit_test(test_jobs_failure_backoff_reset),
	    cmocka_unit_test(test_jobs_mode_build_never_starts_a_job),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
