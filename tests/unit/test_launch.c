/* How a tool's entry runs (core/install/launch.h): the manifest's env only for its
 * own tree, {tree} expanded, unset variables removed, PATH prefixed (or
 * defaulted), argv with and without node, and the tools' bin/ list. */
#include "unit.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "install/launch.h"

static const char *
get(char **env, const char *name)
{
	size_t n = strlen(name);
	int i;

	for (i = 0; env[i] != NULL; i++)
		if (strncmp(env[i], name, n) == 0 && env[i][n] == '=')
			return env[i] + n + 1;
	return NULL;
}

static int
count(char **env, const char *name)
{
	size_t n = strlen(name);
	int i, k = 0;

	for (i = 0; env[i] != NULL; i++)
		k += strncmp(env[i], name, n) == 0 && env[i][n] == '=';
	return k;
}

static void
tool(struct launch_tool *t)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->bin, sizeof(t->bin), "node_modules/p/bin/x");
	snprintf(t->env[0].name, sizeof(t->env[0].name), "MANAGED");
	snprintf(t->env[0].value, sizeof(t->env[0].value), "1");
	snprintf(t->env[1].name, sizeof(t->env[1].name), "ROOT");
	snprintf(t->env[1].value, sizeof(t->env[1].value), "{tree}/node_modules/p:{tree}");
	snprintf(t->env[2].name, sizeof(t->env[2].name), "OTHER");
	t->env[2].unset = 1;
	t->nenv = 3;
}

static void
test_tree_and_env(void **state)
{
	char *base[] = {"HOME=/h", "MANAGED=0", "OTHER=x", "PATH=/usr/bin", "OTHERS=keep", NULL};
	struct launch_tool t;
	char tree[256], **env;

	(void)state;
	tool(&t);
	assert_int_equal(launch_tree(&t, "/tools/x/1.0-linux-x64/node_modules/p/bin/x", tree, sizeof(tree)),
	                 1);
	assert_string_equal(tree, "/tools/x/1.0-linux-x64");
	assert_int_equal(launch_tree(&t, "/usr/bin/x", tree, sizeof(tree)), 0);
	assert_int_equal(launch_tree(&t, "/tools/xnode_modules/p/bin/x", tree, sizeof(tree)), 0);
	assert_int_equal(launch_tree(&t, "node_modules/p/bin/x", tree, sizeof(tree)), 0);
	assert_int_equal(launch_tree(NULL, "/a/node_modules/p/bin/x", tree, sizeof(tree)), 0);

	env = launch_env(&t, "/tools/x/1.0-linux-x64/node_modules/p/bin/x", base, NULL);
	assert_non_null(env);
	assert_string_equal(get(env, "MANAGED"), "1");
	assert_int_equal(count(env, "MANAGED"), 1);
	assert_string_equal(get(env, "ROOT"), "/tools/x/1.0-linux-x64/node_modules/p:/tools/x/1.0-linux-x64");
	assert_null(get(env, "OTHER"));
	assert_string_equal(get(env, "OTHERS"), "keep");
	assert_string_equal(get(env, "PATH"), "/usr/bin");
	assert_string_equal(get(env, "HOME"), "/h");
	launch_env_free(env);

	/* a copy from PATH: someone else's launcher, nothing of the manifest */
	env = launch_env(&t, "/usr/bin/x", base, "/tools/bin");
	assert_string_equal(get(env, "MANAGED"), "0");
	assert_string_equal(get(env, "OTHER"), "x");
	assert_null(get(env, "ROOT"));
	assert_string_equal(get(env, "PATH"), "/tools/bin:/usr/bin");
	assert_int_equal(count(env, "PATH"), 1);
	launch_env_free(env);

	/* no PATH at all: the default after the prefix; NULL base */
	env = launch_env(NULL, "/x", NULL, "/a/bin:/b/bin");
	assert_string_equal(get(env, "PATH"), "/a/bin:/b/bin:" LAUNCH_DEFAULT_PATH);
	assert_null(env[1]);
	launch_env_free(env);
	env = launch_env(NULL, "/x", NULL, "");
	assert_null(env[0]);
	launch_env_free(env);
}

static void
test_argv(void **state)
{
	char *args[] = {"--version", "b"}, *flags[] = {"--no-warnings"}, *out[8];

	(void)state;
	assert_int_equal(launch_argv(out, 8, NULL, NULL, 0, "/e", args, 2), 3);
	assert_string_equal(out[0], "/e");
	assert_string_equal(out[2], "b");
	assert_null(out[3]);
	assert_int_equal(launch_argv(out, 8, "/node", flags, 1, "/e.js", args, 2), 5);
	assert_string_equal(out[0], "/node");
	assert_string_equal(out[1], "--no-warnings");
	assert_string_equal(out[2], "/e.js");
	assert_string_equal(out[3], "--version");
	assert_null(out[5]);
	assert_int_equal(launch_argv(out, 5, "/node", flags, 1, "/e.js", args, 2), -1);
	assert_int_equal(launch_argv(out, 4, NULL, NULL, 0, "/e", args, 2), 3);
	assert_int_equal(launch_argv(out, 3, NULL, NULL, 0, "/e", args, 2), -1);
}

static void
test_tools_path(void **state)
{
	char dir[] = "/tmp/abx-launch.XXXXXX", p[256], buf[1024];
	struct tools_chain c;

	(void)state;
	assert_non_null(mkdtemp(dir));
	memset(&c, 0, sizeof(c));
	c.n = 3;
	snprintf(c.d[0].path, sizeof(c.d[0].path), "%s/a", dir);
	snprintf(c.d[1].path, sizeof(c.d[1].path), "%s/missing", dir);
	snprintf(c.d[2].path, sizeof(c.d[2].path), "%s/b", dir);
	snprintf(p, sizeof(p), "%s/a", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/a/bin", dir);
	mkdir(p, 0700);
	launch_tools_path(&c, buf, sizeof(buf));
	assert_string_equal(buf, p);
	snprintf(p, sizeof(p), "%s/b", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/b/bin", dir);
	mkdir(p, 0700);
	launch_tools_path(&c, buf, sizeof(buf));
	snprintf(p, sizeof(p), "%s/a/bin:%s/b/bin", dir, dir);
	assert_string_equal(buf, p);
	launch_tools_path(&c, buf, 10); /* does not fit: nothing cut */
	assert_string_equal(buf, "");
	unit_rmtree(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tree_and_env),
	    cmocka_unit_test(test_argv),
	    cmocka_unit_test(test_tools_path),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
