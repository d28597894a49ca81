#include "unit.h"
#include "npm.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static void
put(const char *rel, const char *text)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
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
	put("a", "\x7f" "ELF....");
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
test_cache_lookup_verifies(void **state)
{
	char cache[256], p[512], got[512], hex[DIGEST_HEX_MAX];
	struct digest d512, d256;
	struct err e;

	snprintf(cache, sizeof(cache), "%s/cache", dir);
	mkdir(cache, 0700);
	snprintf(p, sizeof(p), "%s/npm", cache);
	mkdir(p, 0700);
	digest_buf(DIGEST_SHA512, "tarball", 7, &d512);
	digest_buf(DIGEST_SHA256, "tarball", 7, &d256);
	/* no index: a miss */
	assert_int_equal(npm_cache_lookup(cache, &d512, got, sizeof(got), &e), 0);
	/* index and entry: a hit naming the sha256 file */
	digest_hex(&d256, hex);
	snprintf(p, sizeof(p), "cache/%s", hex);
	put(p, "tarball");
	{
		char idx[512], h512[DIGEST_HEX_MAX];
		snprintf(idx, sizeof(idx), "cache/npm/sha512-%s", digest_hex(&d512, h512));
		put(idx, hex);
	}
	assert_int_equal(npm_cache_lookup(cache, &d512, got, sizeof(got), &e), 1);
	snprintf(p, sizeof(p), "%s/%s", cache, hex);
	assert_string_equal(got, p);
	assert_int_equal(npm_cache_sha256(cache, &d512, got), 1);
	assert_string_equal(got, hex);
	/* the entry changed behind the index: a miss, never a hit */
	snprintf(p, sizeof(p), "cache/%s", hex);
	put(p, "tarbalL");
	assert_int_equal(npm_cache_lookup(cache, &d512, got, sizeof(got), &e), 0);
	/* an index that is not a hex digest is ignored */
	{
		char idx[512], h512[DIGEST_HEX_MAX];
		snprintf(idx, sizeof(idx), "cache/npm/sha512-%s", digest_hex(&d512, h512));
		put(idx, "../../../../etc/passwd................................................");
	}
	assert_int_equal(npm_cache_lookup(cache, &d512, got, sizeof(got), &e), 0);
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
		cmocka_unit_test_setup_teardown(test_cache_lookup_verifies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_bins, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
