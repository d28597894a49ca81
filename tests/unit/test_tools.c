/* Tools directories: the chain, the safety rule, creation. */
#include "unit.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json.h"
#include "config/config.h"
#include "install/tools.h"

static char dir[64];

static int
setup(void **state)
{
	return unit_mkdtemp(dir, sizeof(dir), "tools");
}

static int
teardown(void **state)
{
	return unit_rmtree(dir);
}

static void
settings(struct config *s, const char *tools, const char *state_dir)
{
	config_defaults(s);
	snprintf(s->tools_dir, sizeof(s->tools_dir), "%s", tools ? tools : "");
	snprintf(s->state_dir, sizeof(s->state_dir), "%s", state_dir ? state_dir : "");
}

static void
test_explicit_dir_created_and_first(void **state)
{
	static struct config s;
	struct tools_chain c;
	struct err e = {0};
	char t[128], st[128];
	struct stat sb;

	snprintf(t, sizeof(t), "%s/tools", dir);
	snprintf(st, sizeof(st), "%s/state", dir);
	settings(&s, t, st);
	assert_int_equal(tools_chain_build(&c, &s, 0, &e), 0);
	assert_string_equal(c.d[0].path, t);
	assert_int_equal(c.d[0].exists, 0);
	assert_int_equal(c.writable, -1); /* a reader creates nothing */
	assert_int_not_equal(stat(t, &sb), 0);
	assert_int_equal(tools_chain_build(&c, &s, 1, &e), 0);
	assert_int_equal(c.writable, 0);
	assert_int_equal(stat(t, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0755); /* root prepares, the user runs */
	/* the chain: explicit, /opt, <state>/tools */
	assert_string_equal(c.d[1].path, "/opt/agent-sandbox/tools");
	snprintf(t, sizeof(t), "%s/state/tools", dir);
	assert_string_equal(c.d[2].path, t);
}

static void
test_unsafe_dirs(void **state)
{
	static struct config s;
	struct tools_chain c;
	struct err e = {0};
	char ed[ERR_DETAILS_MAX];

	err_keep_details(&e, ed, sizeof(ed));
	char t[128], st[128];

	snprintf(t, sizeof(t), "%s/ww", dir);
	mkdir(t, 0700);
	chmod(t, 0777);
	snprintf(st, sizeof(st), "%s/state", dir);
	settings(&s, t, st);
	/* an explicitly named unsafe directory is an error */
	assert_int_equal(tools_chain_build(&c, &s, 1, &e), -1);
	assert_string_equal(e.code, "config.state_dir_unsafe");
	/* an unsafe default is skipped; the per-user default is created */
	settings(&s, NULL, t);
	snprintf(st, sizeof(st), "%s/tools", t);
	mkdir(st, 0700);
	chmod(st, 0777);
	assert_int_equal(tools_chain_build(&c, &s, 1, &e), 0);
	assert_int_equal(c.writable, -1);
	{
		char buf[2048];
		struct json_doc d;
		const struct json_val *a;
		size_t i;

		err_clear(&e);
		tools_chain_detail_tried(&c, &e);
		assert_int_equal(json_parse(&d, e.details, strlen(e.details), NULL, &e), 0);
		a = json_get(d.root, "tried");
		assert_true(json_is(a, JSON_ARRAY));
		snprintf(buf, sizeof(buf), "%s/tools", t);
		for (i = 0; i < a->u.arr.n && strcmp(json_str(&a->u.arr.v[i]), buf) != 0; i++)
			;
		assert_true(i < a->u.arr.n);
		json_free(&d);
		tools_chain_tried_text(&c, buf, sizeof(buf));
		assert_non_null(strstr(buf, "writable"));
	}
}

static void
test_prefer_and_relative(void **state)
{
	static struct config s;
	struct tools_chain c;
	struct err e = {0};
	char t[128];

	settings(&s, "relative/tools", dir);
	assert_int_equal(tools_chain_build(&c, &s, 1, &e), -1);
	assert_string_equal(e.code, "config.invalid");
	snprintf(t, sizeof(t), "%s/a", dir);
	mkdir(t, 0700);
	settings(&s, NULL, dir);
	assert_int_equal(tools_chain_build(&c, &s, 0, &e), 0);
	tools_chain_prefer(&c, t);
	assert_string_equal(c.d[0].path, t);
	assert_int_equal(c.writable, 0);
	tools_chain_prefer(&c, t);
	assert_string_equal(c.d[0].path, t);
	assert_string_not_equal(c.d[1].path, t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_explicit_dir_created_and_first, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unsafe_dirs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_prefer_and_relative, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
