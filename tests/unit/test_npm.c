#include "unit.h"
#include "pkg/npm.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

/* A file in the test's directory. */
static void
put(const char *rel, const char *text)
{
	unit_put(dir, rel, text);
}

static int
setup(void **state)
{
	return unit_mkdtemp(dir, sizeof(dir), "npm");
}

static int
teardown(void **state)
{
	return unit_rmtree(dir);
}

static void
test_js_entry(void **state)
{
	char p[512], buf[512], *flags[NPM_NODE_FLAGS_MAX];
	int n;

	snprintf(p, sizeof(p), "%s/a", dir);
	put("a", "#!/usr/bin/env node\nconsole.log(1)\n");
	assert_int_equal(npm_js_entry(p, buf, sizeof(buf), flags, &n), 1);
	assert_int_equal(n, 0);
	put("a", "#!/usr/bin/env -S node --no-warnings --max-old-space-size=64\n");
	assert_int_equal(npm_js_entry(p, buf, sizeof(buf), flags, &n), 1);
	assert_int_equal(n, 2);
	assert_string_equal(flags[0], "--no-warnings");
	assert_string_equal(flags[1], "--max-old-space-size=64");
	put("a", "#!/opt/node/bin/node\n");
	assert_int_equal(npm_js_entry(p, buf, sizeof(buf), flags, &n), 1);
	/* another interpreter runs directly, whatever the name says */
	put("a", "#!/bin/sh\necho\n");
	assert_int_equal(npm_js_entry(p, buf, sizeof(buf), flags, &n), 0);
	put("a", "\x7f"
	         "ELF....");
	assert_int_equal(npm_js_entry(p, buf, sizeof(buf), flags, &n), 0);
	/* no shebang: the name decides */
	snprintf(p, sizeof(p), "%s/b.mjs", dir);
	put("b.mjs", "export {}\n");
	assert_int_equal(npm_js_entry(p, buf, sizeof(buf), flags, &n), 1);
	snprintf(p, sizeof(p), "%s/b.cjs", dir);
	put("b.cjs", "");
	assert_int_equal(npm_js_entry(p, buf, sizeof(buf), flags, &n), 1);
	snprintf(p, sizeof(p), "%s/nope", dir);
	assert_int_equal(npm_js_entry(p, buf, sizeof(buf), flags, &n), -1);
	/* a shebang with more than NPM_NODE_FLAGS_MAX words is cut, not overrun */
	snprintf(p, sizeof(p), "%s/a", dir);
	put("a", "#!/usr/bin/env -S node a b c d e f g h i j k l\n");
	assert_int_equal(npm_js_entry(p, buf, sizeof(buf), flags, &n), 1);
	assert_int_equal(n, NPM_NODE_FLAGS_MAX);
}

static void
test_purl(void **state)
{
	struct npmlock_pkg p = {.name = "@openai/codex", .version = "0.1.0-linux-x64"};
	char b[128];

	assert_true(npm_purl(&p, b, sizeof(b)) > 0);
	assert_string_equal(b, "pkg:npm/%40openai/codex@0.1.0-linux-x64");
	p.name = "dep";
	p.version = "1.0.0";
	assert_true(npm_purl(&p, b, sizeof(b)) > 0);
	assert_string_equal(b, "pkg:npm/dep@1.0.0");
	assert_int_equal(npm_purl(&p, b, 8), -1);
}

static void
test_source_set(void **state)
{
	char b[NPM_SOURCE_MAX], small[16], big[600];

	/* a URL shown without its query, fragment or userinfo */
	npm_source_set(b, sizeof(b), "", "https://r.example/a/-/a-1.tgz?X-Amz-Signature=s3cret#f");
	assert_string_equal(b, "https://r.example/a/-/a-1.tgz");
	npm_source_set(b, sizeof(b), "", "https://u:pw@r.example/a.tgz");
	assert_string_equal(b, "https://r.example/a.tgz");
	/* a path keeps its '?' (not a URL); the prefix is put first */
	npm_source_set(b, sizeof(b), "cache:", "/c/ab?c");
	assert_string_equal(b, "cache:/c/ab?c");
	npm_source_set(b, sizeof(b), "oci://h:5000/team/tools", "@sha256:00ff");
	assert_string_equal(b, "oci://h:5000/team/tools@sha256:00ff");
	/* too long: cut to fit, and said with "..." */
	npm_source_set(small, sizeof(small), "cache:", "/a/very/long/path");
	assert_string_equal(small, "cache:/a/ver...");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "https://", 8);
	npm_source_set(b, sizeof(b), "", big);
	assert_int_equal(strlen(b), NPM_SOURCE_MAX - 1);
	assert_string_equal(b + NPM_SOURCE_MAX - 4, "...");
	npm_source_set(small, 3, "abc", "d");
	assert_string_equal(small, "");
}

static void
test_link_bins(void **state)
{
	struct npmlock_pkg root = {.path = "node_modules/@s/t", .name = "@s/t", .version = "1.0.0"};
	struct npmlock_bin bins[1];
	struct npmlock l;
	struct err e;
	struct stat sb;
	char p[512], link[512];
	ssize_t n;

	memset(&l, 0, sizeof(l));
	l.root = &root;
	l.bins = bins;
	l.nbins = 1;
	snprintf(bins[0].name, sizeof(bins[0].name), "t");
	snprintf(bins[0].target, sizeof(bins[0].target), "bin/t.js");
	snprintf(p, sizeof(p), "%s/node_modules/@s/t/bin", dir);
	assert_int_equal(system((snprintf(link, sizeof(link), "mkdir -p '%s'", p), link)), 0);
	/* missing target */
	assert_int_equal(npm_link_bins(&l, dir, &e), -1);
	assert_string_equal(e.code, "install.failed");
	put("node_modules/@s/t/bin/t.js", "#!/usr/bin/env node\n");
	assert_int_equal(npm_link_bins(&l, dir, &e), 0);
	snprintf(p, sizeof(p), "%s/node_modules/.bin/t", dir);
	n = readlink(p, link, sizeof(link) - 1);
	assert_true(n > 0);
	link[n] = '\0';
	assert_string_equal(link, "../@s/t/bin/t.js");
	snprintf(p, sizeof(p), "%s/node_modules/@s/t/bin/t.js", dir);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0755);
	/* a symlink on the way to the target is refused: extraction makes none */
	snprintf(p, sizeof(p), "%s/node_modules/@s/t/lib", dir);
	assert_int_equal(symlink("/etc", p), 0);
	snprintf(bins[0].target, sizeof(bins[0].target), "lib/passwd");
	assert_int_equal(npm_link_bins(&l, dir, &e), -1);
	assert_non_null(strstr(e.msg, "not a regular file"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_js_entry, setup, teardown),
	    cmocka_unit_test(test_purl),
	    cmocka_unit_test(test_source_set),
	    cmocka_unit_test_setup_teardown(test_link_bins, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
