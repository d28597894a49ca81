#include "unit.h"
#include "server/plan.h"

#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/abx-test-plan.XXXXXX";
static char mdir[1024];

static int
setup(void **state)
{
	const char *f = __FILE__, *s = strrchr(f, '/');

	assert_non_null(mkdtemp(dir));
	/* tests/unit/test_plan.c → tests/fixtures/manifests */
	snprintf(mdir, sizeof(mdir), "%.*s/../fixtures/manifests", s ? (int)(s - f) : 1, s ? f : ".");
	return 0;
}

static int
teardown(void **state)
{
	return unit_rmtree(dir);
}

struct fx {
	struct manifest_set ms;
	struct ops o;
	struct policy pol;
	struct plan p;
};

static struct fx *
fx_open(const char *preset)
{
	struct manifest_opts mo = {.platform = "linux-x64"};
	struct fx *x = calloc(1, sizeof(*x));
	struct err e = {0};

	assert_non_null(x);
	if (manifest_set_open(&x->ms, mdir, &mo, &e) != 0)
		fail_msg("manifests %s: %s", mdir, e.msg);
	assert_int_equal(ops_init(&x->o, &e), 0);
	policy_init(&x->pol);
	if (preset != NULL)
		assert_int_equal(policy_add_preset(&x->pol, "default", preset, "test", &e), 0);
	return x;
}

static void
fx_close(struct fx *x)
{
	ops_free(&x->o);
	manifest_set_close(&x->ms);
	free(x);
}

static int path_calls;
static char last_min[64];

static int
never(const manifest_t *m, const char *min, char *entry, size_t ec, char *ver, size_t vc, void *ctx)
{
	path_calls++;
	return 0;
}

/* node-runtime 22 is on PATH, for any minimum up to 22 */
static int
node22(const manifest_t *m, const char *min, char *entry, size_t ec, char *ver, size_t vc, void *ctx)
{
	path_calls++;
	snprintf(last_min, sizeof(last_min), "%s", min);
	if (strcmp(m->name, "node-runtime") != 0 || manifest_version_cmp("22.1.0", min) < 0)
		return 0;
	snprintf(entry, ec, "/usr/bin/node");
	snprintf(ver, vc, "22.1.0");
	return 1;
}

static const char *
order(const struct plan *p, char *buf, size_t cap)
{
	size_t len = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i < p->norder && len < cap; i++)
		len += snprintf(buf + len, cap - len, "%s%s", i ? " " : "", p->t[p->order[i]].m->name);
	return buf;
}

static const struct plan_tool *
tool(const struct plan *p, const char *name)
{
	int i;

	for (i = 0; i < p->n; i++)
		if (strcmp(p->t[i].m->name, name) == 0)
			return &p->t[i];
	return NULL;
}

static int
has_op(const struct plan_tool *t, const char *op)
{
	int i;

	for (i = 0; t != NULL && i < t->nops; i++)
		if (strcmp(t->ops[i], op) == 0)
			return 1;
	return 0;
}

/* --- hostile first --- */

static void
test_missing_manifest_is_an_error(void **state)
{
	struct fx *x = fx_open("admin");
	struct err e = {0};

	assert_int_equal(ops_add_agent(&x->o, "nosuch", NULL, NULL, &e), 0);
	assert_int_equal(plan_build(&x->p, &x->o, &x->pol, &x->ms, 1, never, NULL, &e), -1);
	assert_string_equal(e.code, "not_found");
	fx_close(x);
}

static void
test_version_in(void **state)
{
	char v[32];

	assert_int_equal(manifest_version_in("v22.3.0\n", v, sizeof(v)), 0);
	assert_string_equal(v, "22.3.0");
	assert_int_equal(manifest_version_in("codex-cli 0.171.0", v, sizeof(v)), 0);
	assert_string_equal(v, "0.171.0");
	assert_int_equal(manifest_version_in("node 22", v, sizeof(v)), -1);
	assert_int_equal(manifest_version_in("", v, sizeof(v)), -1);
	assert_int_equal(manifest_version_in("x86_64 1.2", v, sizeof(v)), 0);
	assert_string_equal(v, "1.2");
	assert_int_equal(manifest_version_in("1.2.3.4.5.6.7.8.9", v, 4), -1);
	/* a number inside a word is not the version (install and plan each had
	 * a parser; one said 18 here) */
	assert_int_equal(manifest_version_in("node18 v20.1.0", v, sizeof(v)), 0);
	assert_string_equal(v, "20.1.0");
}

/* --- plans --- */

static void
test_codex_plans_node_then_codex(void **state)
{
	struct fx *x = fx_open("admin");
	const struct plan_tool *t;
	struct err e = {0};
	char buf[256];

	assert_int_equal(ops_add_agent(&x->o, "codex", NULL, NULL, &e), 0);
	path_calls = 0;
	assert_int_equal(plan_build(&x->p, &x->o, &x->pol, &x->ms, 1, never, NULL, &e), 0);
	assert_string_equal(order(&x->p, buf, sizeof(buf)), "node-runtime codex");
	assert_int_equal(path_calls, 1); /* only node-runtime has a path block */
	t = tool(&x->p, "node-runtime");
	assert_string_equal(t->required_by, "codex");
	assert_false(t->direct);
	assert_string_equal(t->min, "18");
	assert_true(has_op(t, "agents.codex.run"));
	t = tool(&x->p, "codex");
	assert_true(t->direct);
	assert_true(has_op(t, "agents.codex.run"));
	assert_true(has_op(t, "agents.codex.sessions.create"));
	assert_true(has_op(t, "agents.codex.install"));
	assert_false(has_op(t, "agents.codex.sessions.get")); /* reading installs nothing */
	fx_close(x);
}

static void
test_path_node_leaves_codex_only(void **state)
{
	struct fx *x = fx_open("admin");
	struct err e = {0};
	char buf[256];

	assert_int_equal(ops_add_agent(&x->o, "codex", NULL, NULL, &e), 0);
	assert_int_equal(plan_build(&x->p, &x->o, &x->pol, &x->ms, 1, node22, NULL, &e), 0);
	assert_string_equal(order(&x->p, buf, sizeof(buf)), "codex");
	assert_true(tool(&x->p, "node-runtime")->on_path);
	assert_string_equal(tool(&x->p, "node-runtime")->path_entry, "/usr/bin/node");
	/* use_path false: PATH never satisfies */
	assert_int_equal(plan_build(&x->p, &x->o, &x->pol, &x->ms, 0, node22, NULL, &e), 0);
	assert_string_equal(order(&x->p, buf, sizeof(buf)), "node-runtime codex");
	fx_close(x);
}

static void
test_strongest_minimum_is_asked(void **state)
{
	struct fx *x = fx_open("admin");
	struct err e = {0};
	char buf[256];

	assert_int_equal(ops_add_agent(&x->o, "codex", NULL, NULL, &e), 0);
	assert_int_equal(ops_add_agent(&x->o, "gemini", NULL, NULL, &e), 0);
	assert_int_equal(plan_build(&x->p, &x->o, &x->pol, &x->ms, 1, node22, NULL, &e), 0);
	assert_string_equal(last_min, "20"); /* gemini asks node-runtime>=20, codex >=18 */
	assert_string_equal(order(&x->p, buf, sizeof(buf)), "codex gemini");
	assert_string_equal(tool(&x->p, "node-runtime")->required_by, "codex,gemini");
	assert_int_equal(plan_build(&x->p, &x->o, &x->pol, &x->ms, 1, never, NULL, &e), 0);
	assert_string_equal(order(&x->p, buf, sizeof(buf)), "node-runtime codex gemini");
	fx_close(x);
}

static void
test_policy_decides_what_is_mounted(void **state)
{
	struct fx *x;
	struct err e = {0};
	char buf[256];

	/* readonly: no op that installs is callable */
	x = fx_open("readonly");
	assert_int_equal(ops_add_agent(&x->o, "codex", NULL, NULL, &e), 0);
	assert_int_equal(plan_build(&x->p, &x->o, &x->pol, &x->ms, 1, never, NULL, &e), 0);
	assert_string_equal(order(&x->p, buf, sizeof(buf)), "");
	fx_close(x);
	/* agents: run is callable, the install endpoint is not */
	x = fx_open("agents");
	assert_int_equal(ops_add_agent(&x->o, "codex", NULL, NULL, &e), 0);
	assert_int_equal(plan_build(&x->p, &x->o, &x->pol, &x->ms, 1, never, NULL, &e), 0);
	assert_string_equal(order(&x->p, buf, sizeof(buf)), "node-runtime codex");
	assert_false(has_op(tool(&x->p, "codex"), "agents.codex.install"));
	fx_close(x);
	/* a deny of install is absolute: nothing for codex */
	x = fx_open("admin");
	assert_int_equal(ops_add_agent(&x->o, "codex", NULL, NULL, &e), 0);
	x->pol.p[0].rules[x->pol.p[0].nrules].effect = POL_DENY;
	snprintf(x->pol.p[0].rules[x->pol.p[0].nrules++].pattern, POL_PATTERN_MAX, "agents.codex.install");
	assert_int_equal(plan_build(&x->p, &x->o, &x->pol, &x->ms, 1, never, NULL, &e), 0);
	assert_string_equal(order(&x->p, buf, sizeof(buf)), "");
	fx_close(x);
	/* no principal at all: nothing */
	x = fx_open(NULL);
	assert_int_equal(ops_add_agent(&x->o, "codex", NULL, NULL, &e), 0);
	assert_int_equal(plan_build(&x->p, &x->o, &x->pol, &x->ms, 1, never, NULL, &e), 0);
	assert_int_equal(x->p.n, 0);
	fx_close(x);
}

static void
test_commands_install_with_requires(void **state)
{
	struct fx *x = fx_open("admin");
	struct err e = {0};
	char path[1100], buf[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cmds.json", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("[{\"id\": \"lint\", \"argv\": [\"jq\", \".\"], \"install\": [\"jq\", \"ripgrep\"]},"
	      " {\"id\": \"lint2\", \"argv\": [\"rg\"], \"install\": [\"ripgrep\"]}]",
	      f);
	fclose(f);
	assert_int_equal(ops_load_commands(&x->o, path, NULL, NULL, &e), 0);
	assert_int_equal(plan_build(&x->p, &x->o, &x->pol, &x->ms, 1, never, NULL, &e), 0);
	assert_string_equal(order(&x->p, buf, sizeof(buf)), "oniguruma jq ripgrep");
	assert_true(has_op(tool(&x->p, "ripgrep"), "lint"));
	assert_true(has_op(tool(&x->p, "ripgrep"), "lint2"));
	assert_true(has_op(tool(&x->p, "oniguruma"), "lint"));
	assert_string_equal(tool(&x->p, "oniguruma")->required_by, "jq");
	fx_close(x);
}

static void
test_default_path_check(void **state)
{
	struct fx *x = fx_open("admin");
	const manifest_t *m;
	char bin[1100], file[1200], ww[1100], entry[PATH_MAX], ver[64], *old = getenv("PATH"), saved[8192];
	struct err e = {0};
	FILE *f;

	snprintf(saved, sizeof(saved), "%s", old ? old : "/usr/bin:/bin");
	m = manifest_get(&x->ms, "node-runtime", &e);
	assert_non_null(m);
	snprintf(bin, sizeof(bin), "%s/bin", dir);
	snprintf(ww, sizeof(ww), "%s/ww", dir);
	mkdir(bin, 0755);
	mkdir(ww, 0755);
	chmod(ww, 0777);
	/* a world-writable entry first: skipped */
	snprintf(file, sizeof(file), "%s/node", ww);
	f = fopen(file, "w");
	fputs("#!/bin/sh\necho v99.0.0\n", f);
	fclose(f);
	chmod(file, 0755);
	snprintf(file, sizeof(file), "%s/node", bin);
	f = fopen(file, "w");
	fputs("#!/bin/sh\necho v20.5.1\n", f);
	fclose(f);
	chmod(file, 0755);
	/* only these two: a node of the machine's own must not answer */
	snprintf(file, sizeof(file), "%s:%s", ww, bin);
	setenv("PATH", file, 1);
	assert_int_equal(plan_path_check(m, "18", entry, sizeof(entry), ver, sizeof(ver), NULL), 1);
	assert_string_equal(ver, "20.5.1");
	assert_non_null(strstr(entry, "/bin/node"));
	assert_null(strstr(entry, "/ww/"));
	assert_int_equal(plan_path_check(m, "21", entry, sizeof(entry), ver, sizeof(ver), NULL), 0);
	/* below the manifest's own path.min (18.0.0) */
	snprintf(file, sizeof(file), "%s/node", bin);
	f = fopen(file, "w");
	fputs("#!/bin/sh\necho v16.0.0\n", f);
	fclose(f);
	assert_int_equal(plan_path_check(m, "", entry, sizeof(entry), ver, sizeof(ver), NULL), 0);
	/* ...but a later copy that qualifies is the one ensure would use, so
	 * the plan says so too */
	snprintf(file, sizeof(file), "%s/later", dir);
	mkdir(file, 0755);
	snprintf(file, sizeof(file), "%s/later/node", dir);
	f = fopen(file, "w");
	fputs("#!/bin/sh\necho v22.1.0\n", f);
	fclose(f);
	chmod(file, 0755);
	snprintf(file, sizeof(file), "%s:%s:%s/later", ww, bin, dir);
	setenv("PATH", file, 1);
	assert_int_equal(plan_path_check(m, "", entry, sizeof(entry), ver, sizeof(ver), NULL), 1);
	assert_string_equal(ver, "22.1.0");
	assert_non_null(strstr(entry, "/later/node"));
	snprintf(file, sizeof(file), "%s:%s", ww, bin);
	setenv("PATH", file, 1);
	snprintf(file, sizeof(file), "%s/node", bin);
	/* a binary that fails */
	f = fopen(file, "w");
	fputs("#!/bin/sh\nexit 1\n", f);
	fclose(f);
	assert_int_equal(plan_path_check(m, "", entry, sizeof(entry), ver, sizeof(ver), NULL), 0);
	/* a manifest without a path block never matches */
	assert_int_equal(plan_path_check(manifest_get(&x->ms, "ripgrep", &e), "", entry, sizeof(entry), ver,
	                                 sizeof(ver), NULL),
	                 0);
	setenv("PATH", saved, 1);
	fx_close(x);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_missing_manifest_is_an_error),
	    cmocka_unit_test(test_version_in),
	    cmocka_unit_test(test_codex_plans_node_then_codex),
	    cmocka_unit_test(test_path_node_leaves_codex_only),
	    cmocka_unit_test(test_strongest_minimum_is_asked),
	    cmocka_unit_test(test_policy_decides_what_is_mounted),
	    cmocka_unit_test(test_commands_install_with_requires),
	    cmocka_unit_test(test_default_path_check),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
