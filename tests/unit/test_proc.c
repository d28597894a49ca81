/* core/proc: spawn without a shell, exact environment, capture with a cap,
 * timeouts that kill the whole process group, exit codes. */
#include "unit.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/proc.h"

static char *sh_argv[] = {"/bin/sh", "-c", NULL, NULL};

static int
run_sh(const char *script, int timeout_ms, size_t cap, struct proc *p, struct proc_capture *c)
{
	struct proc_spec s;
	struct err e = {0};

	memset(&s, 0, sizeof(s));
	sh_argv[2] = (char *)script;
	s.argv = sh_argv;
	s.timeout_ms = timeout_ms;
	s.kill_grace_ms = 300;
	c->cap = cap;
	c->out = malloc(cap + 1);
	c->err = malloc(cap + 1);
	return proc_run(p, &s, c, &e);
}

static void
cap_free(struct proc_capture *c)
{
	free(c->out);
	free(c->err);
}

static void
test_relative_argv0_refused(void **st)
{
	char *argv[] = {"sh", "-c", "true", NULL};
	struct proc_spec s = {.argv = argv};
	struct proc p;
	struct err e = {0};

	assert_int_equal(proc_spawn(&p, &s, &e), -1);
	assert_string_equal(e.code, "internal");
}

static void
test_missing_program(void **st)
{
	char *argv[] = {"/nonexistent/prog", NULL};
	struct proc_spec s = {.argv = argv};
	struct proc p;
	struct err e = {0};

	assert_int_equal(proc_spawn(&p, &s, &e), -1);
	assert_string_equal(e.code, "io.error");
	assert_non_null(strstr(e.msg, "/nonexistent/prog"));
}

static void
test_argv_is_not_a_shell(void **st)
{
	char *argv[] = {"/bin/echo", "; touch /tmp/proc-pwned-$$", "$(id)", "a\nb", NULL};
	struct proc_spec s = {.argv = argv};
	struct proc_capture c = {0};
	struct proc p;
	struct err e = {0};

	c.cap = 4096;
	c.out = malloc(c.cap + 1);
	c.err = malloc(c.cap + 1);
	assert_int_equal(proc_run(&p, &s, &c, &e), 0);
	assert_int_equal(proc_exit_code(&p), 0);
	assert_string_equal(c.out, "; touch /tmp/proc-pwned-$$ $(id) a\nb\n");
	cap_free(&c);
}

static void
test_env_exact_and_cwd(void **st)
{
	char *argv[] = {"/usr/bin/env", NULL};
	char *envp[] = {"ONLY=this", NULL};
	char *pwd[] = {"/bin/pwd", NULL};
	struct proc_spec s = {.argv = argv, .envp = envp};
	struct proc_capture c = {0};
	struct proc p;
	struct err e = {0};

	c.cap = 4096;
	c.out = malloc(c.cap + 1);
	c.err = malloc(c.cap + 1);
	assert_int_equal(proc_run(&p, &s, &c, &e), 0);
	assert_string_equal(c.out, "ONLY=this\n");
	s.argv = pwd;
	s.envp = NULL;
	s.cwd = "/";
	assert_int_equal(proc_run(&p, &s, &c, &e), 0);
	assert_string_equal(c.out, "/\n");
	cap_free(&c);
}

static void
test_exit_codes_and_stderr(void **st)
{
	struct proc_capture c = {0};
	struct proc p;

	assert_int_equal(run_sh("echo out; echo err >&2; exit 3", 0, 100, &p, &c), 0);
	assert_int_equal(proc_exit_code(&p), 3);
	assert_string_equal(c.out, "out\n");
	assert_string_equal(c.err, "err\n");
	assert_int_equal(c.truncated, 0);
	assert_int_equal(p.timed_out, 0);
	cap_free(&c);
	assert_int_equal(run_sh("kill -9 $$", 0, 100, &p, &c), 0);
	assert_int_equal(proc_exit_code(&p), 128 + 9);
	cap_free(&c);
}

static void
test_capture_cap(void **st)
{
	struct proc_capture c = {0};
	struct proc p;

	/* 200 KiB: far over the cap and over a pipe buffer, so the child
	 * would block if the rest were not read and discarded. */
	assert_int_equal(run_sh("head -c 204800 /dev/zero | tr -c x x", 5000, 1000, &p, &c), 0);
	assert_int_equal(proc_exit_code(&p), 0);
	assert_int_equal(p.timed_out, 0);
	assert_int_equal(c.out_len, 1000);
	assert_int_equal(c.out_total, 204800);
	assert_int_equal(c.truncated, 1);
	assert_int_equal(strlen(c.out), 1000);
	cap_free(&c);
}

/* Without buffers from the caller, capture allocates as output arrives:
 * nothing for a silent stream, little for a short one, at most cap + 1. */
static void
test_capture_grows(void **st)
{
	struct proc_capture c = {0};
	struct proc_spec s;
	struct proc p;
	struct err e = {0};

	memset(&s, 0, sizeof(s));
	s.argv = sh_argv;
	s.kill_grace_ms = 300;
	c.cap = 1u << 20;
	sh_argv[2] = "echo hi";
	assert_int_equal(proc_run(&p, &s, &c, &e), 0);
	assert_string_equal(c.out, "hi\n");
	assert_true(c.out_room <= PROC_CAPTURE_FIRST);
	assert_null(c.err);
	assert_int_equal(c.err_len, 0);
	proc_capture_free(&c);
	assert_null(c.out);

	/* 3000 bytes: grown past the first buffer, kept whole */
	sh_argv[2] = "head -c 3000 /dev/zero | tr -c x x; echo e >&2";
	assert_int_equal(proc_run(&p, &s, &c, &e), 0);
	assert_int_equal(c.out_len, 3000);
	assert_int_equal(strlen(c.out), 3000);
	assert_true(c.out_room >= 3001 && c.out_room <= 8192);
	assert_string_equal(c.err, "e\n");
	assert_int_equal(c.truncated, 0);
	proc_capture_free(&c);

	/* over the cap: the buffer stops at cap + 1 */
	c.cap = 5000;
	sh_argv[2] = "head -c 204800 /dev/zero | tr -c x x";
	assert_int_equal(proc_run(&p, &s, &c, &e), 0);
	assert_int_equal(c.out_len, 5000);
	assert_int_equal(c.out_room, 5001);
	assert_int_equal(strlen(c.out), 5000);
	assert_int_equal(c.out_total, 204800);
	assert_int_equal(c.truncated, 1);
	proc_capture_free(&c);
}

static int
alive(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;
	char *rp;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) == NULL) {
		fclose(f);
		return 0;
	}
	fclose(f);
	rp = strrchr(buf, ')');
	return rp != NULL && rp[2] != 'Z';
}

/* SIGKILL is delivered asynchronously: give the kernel a moment (10 s at
 * most, for a loaded machine). */
static int
gone_soon(pid_t pid)
{
	int i;

	for (i = 0; i < 1000 && alive(pid); i++)
		usleep(10000);
	return !alive(pid);
}

/* Keeps the first bytes of stdout, NUL-terminated. */
struct first_out {
	char buf[64];
	size_t len;
};

static void
first_out_sink(void *arg, enum proc_stream s, const char *data, size_t len)
{
	struct first_out *o = arg;

	if (s != PROC_STDOUT)
		return;
	if (len > sizeof(o->buf) - 1 - o->len)
		len = sizeof(o->buf) - 1 - o->len;
	memcpy(o->buf + o->len, data, len);
	o->len += len;
	o->buf[o->len] = '\0';
}

static void
test_timeout_kills_group_ignoring_term(void **st)
{
	char *argv[] = {"/bin/sh", "-c", "trap '' TERM; sleep 30 & echo $!; sleep 30", NULL};
	struct proc_spec s = {.argv = argv, .kill_grace_ms = 300};
	struct first_out o = {{0}, 0};
	struct proc p;
	struct err e = {0};
	int64_t t0;
	pid_t bgpid;

	/* The shell ignores TERM, and leaves a background child that ignores
	 * it too; both must die with the group. The deadline is set once the
	 * shell has said so (a deadline from spawn could pass before a loaded
	 * machine ran the trap). */
	assert_int_equal(proc_spawn(&p, &s, &e), 0);
	t0 = clock_ms();
	while (strchr(o.buf, '\n') == NULL && clock_ms() - t0 < 10000)
		assert_int_equal(proc_step(&p, 100, first_out_sink, &o), 1);
	bgpid = (pid_t)atoi(o.buf);
	assert_true(bgpid > 0);
	t0 = clock_ms();
	p.deadline_ms = t0 + 200;
	while (proc_step(&p, -1, first_out_sink, &o) == 1)
		;
	assert_int_equal(p.timed_out, 1);
	assert_int_equal(proc_exit_code(&p), 128 + SIGKILL);
	/* SIGKILL after the grace, not at the end of sleep 30 */
	assert_true(clock_ms() - t0 >= 200 + 300);
	assert_true(clock_ms() - t0 < 10000);
	proc_close(&p);
	assert_true(gone_soon(bgpid));
}

static void
test_timeout_term_suffices(void **st)
{
	struct proc_capture c = {0};
	struct proc p;

	assert_int_equal(run_sh("sleep 30", 100, 100, &p, &c), 0);
	assert_int_equal(p.timed_out, 1);
	assert_int_equal(proc_exit_code(&p), 128 + SIGTERM);
	cap_free(&c);
}

static void
test_leader_exit_kills_stragglers(void **st)
{
	struct proc_capture c = {0};
	struct proc p;
	pid_t bgpid;

	/* The leader exits at once, leaving a child that holds no pipe. */
	assert_int_equal(run_sh("sleep 30 >/dev/null 2>&1 & echo $!", 5000, 100, &p, &c), 0);
	assert_int_equal(proc_exit_code(&p), 0);
	bgpid = (pid_t)atoi(c.out);
	assert_true(bgpid > 0);
	assert_true(gone_soon(bgpid));
	cap_free(&c);
}

static void
test_own_session(void **st)
{
	struct proc_capture c = {0};
	struct proc p;
	char want[32];

	assert_int_equal(
	    run_sh("ps -o sid= -p $$ 2>/dev/null || cut -d' ' -f6 /proc/$$/stat", 0, 100, &p, &c), 0);
	snprintf(want, sizeof(want), "%d", (int)p.pid);
	assert_non_null(strstr(c.out, want));
	cap_free(&c);
}

static void
test_stream_steps(void **st)
{
	char *argv[] = {"/bin/sh", "-c", "echo one; sleep 0.1; echo two", NULL};
	struct proc_spec s = {.argv = argv};
	struct proc p;
	struct err e = {0};
	int n = 0;

	assert_int_equal(proc_spawn(&p, &s, &e), 0);
	while (proc_step(&p, 50, NULL, NULL) == 1)
		n++;
	assert_true(n >= 1);
	assert_int_equal(proc_exit_code(&p), 0);
	proc_close(&p);
}

/* proc_which: PATH order, non-executables and directories skipped, a name
 * with a slash made absolute, a missing program is not_found. */
static void
test_which(void **state)
{
	char dir[] = "/tmp/abx-which.XXXXXX", a[256], b[256], path[700], out[512], cwd[512];
	struct err e = {0};
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/b", dir);
	assert_int_equal(mkdir(a, 0700), 0);
	assert_int_equal(mkdir(b, 0700), 0);
	snprintf(path, sizeof(path), "%s/tool", a); /* not executable: skipped */
	assert_non_null(f = fopen(path, "w"));
	fclose(f);
	snprintf(path, sizeof(path), "%s/tool", b);
	assert_non_null(f = fopen(path, "w"));
	fclose(f);
	assert_int_equal(chmod(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/sub", a); /* a directory: skipped */
	assert_int_equal(mkdir(path, 0700), 0);

	snprintf(path, sizeof(path), "/nonexistent:%s:%s", a, b);
	assert_int_equal(proc_which("tool", path, out, sizeof(out), &e), 0);
	snprintf(path, sizeof(path), "%s/tool", b);
	assert_string_equal(out, path);
	snprintf(path, sizeof(path), "%s:%s", a, b);
	assert_int_equal(proc_which("sub", path, out, sizeof(out), &e), -1);
	assert_string_equal(e.code, "not_found");
	assert_int_equal(proc_which("nosuch", path, out, sizeof(out), &e), -1);
	assert_non_null(strstr(e.msg, "nosuch: not found on PATH"));
	assert_int_equal(proc_which("tool", NULL, out, sizeof(out), &e), -1);

	assert_int_equal(proc_which("/bin/sh", NULL, out, sizeof(out), &e), 0);
	assert_string_equal(out, "/bin/sh");
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(proc_which("./x/y", NULL, out, sizeof(out), &e), 0);
	snprintf(path, sizeof(path), "%s/./x/y", cwd);
	assert_string_equal(out, path);
	assert_int_equal(proc_which("/bin/sh", NULL, out, 4, &e), -1);

	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	assert_int_equal(system(path), 0);
}

/* merge: stderr lands in out too, within one cap, pieces in the order they
 * were read (one pipe keeps its own order; across the two it is the
 * reading order); the counts still say which stream carried what. */
static void
test_capture_merged(void **st)
{
	struct proc_capture c = {0};
	struct proc p;

	c.merge = 1;
	assert_int_equal(run_sh("echo one; echo two >&2; echo three", 5000, 64, &p, &c), 0);
	assert_int_equal(c.out_len, 14);
	assert_non_null(strstr(c.out, "two\n"));
	assert_true(strstr(c.out, "one\n") < strstr(c.out, "three\n"));
	assert_string_equal(c.err, "");
	assert_int_equal(c.err_len, 0);
	assert_int_equal(c.out_total, 10);
	assert_int_equal(c.err_total, 4);
	cap_free(&c);
	memset(&c, 0, sizeof(c));
	c.merge = 1;
	assert_int_equal(run_sh("echo 123456 >&2; echo 789 >&2", 5000, 8, &p, &c), 0);
	assert_string_equal(c.out, "123456\n7");
	assert_true(c.truncated);
	cap_free(&c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_relative_argv0_refused),
	    cmocka_unit_test(test_missing_program),
	    cmocka_unit_test(test_argv_is_not_a_shell),
	    cmocka_unit_test(test_env_exact_and_cwd),
	    cmocka_unit_test(test_exit_codes_and_stderr),
	    cmocka_unit_test(test_capture_cap),
	    cmocka_unit_test(test_capture_grows),
	    cmocka_unit_test(test_timeout_kills_group_ignoring_term),
	    cmocka_unit_test(test_timeout_term_suffices),
	    cmocka_unit_test(test_leader_exit_kills_stragglers),
	    cmocka_unit_test(test_own_session),
	    cmocka_unit_test(test_stream_steps),
	    cmocka_unit_test(test_which),
	    cmocka_unit_test(test_capture_merged),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
