#include "unit.h"
#include "base/clock.h"
#include "base/digest.h"
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
	struct err e = {0};
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

/* ctime of dir/rel, once the file clock is past it (a change made after
 * this moves it) */
static struct timespec
settled_ctime(const char *rel)
{
	char p[512];
	struct stat sb;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(clock_fs_wait_past(&sb.st_ctim, 0, 5000), 1);
	return sb.st_ctim;
}

static void
assert_ctime(const char *rel, const struct timespec *t, mode_t mode)
{
	char p[512];
	struct stat sb;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, mode);
	assert_int_equal(sb.st_ctim.tv_sec, t->tv_sec);
	assert_int_equal(sb.st_ctim.tv_nsec, t->tv_nsec);
}

/* A bin already 0755 is left alone, ctime and all (the tree listing then
 * takes extraction's digest instead of reading it again); another mode is
 * made 0755. */
static void
test_bin_exec_keeps_ctime(void **state)
{
	struct npmlock_pkg root = {.path = "node_modules/p", .name = "p", .version = "1.0.0"};
	struct npmlock_bin bins[1];
	struct npmlock l;
	struct err e;
	struct timespec t;
	char p[512];

	memset(&l, 0, sizeof(l));
	l.root = &root;
	l.bins = bins;
	l.nbins = 1;
	snprintf(bins[0].name, sizeof(bins[0].name), "p");
	snprintf(bins[0].target, sizeof(bins[0].target), "bin/p");
	snprintf(p, sizeof(p), "mkdir -p '%s/node_modules/p/bin'", dir);
	assert_int_equal(system(p), 0);
	put("node_modules/p/bin/p", "#!/bin/sh\n");
	put("node_modules/p/bin/q", "#!/bin/sh\n");
	snprintf(p, sizeof(p), "%s/node_modules/p/bin/p", dir);
	assert_int_equal(chmod(p, 0755), 0);
	t = settled_ctime("node_modules/p/bin/p");
	assert_int_equal(npm_bin_exec(dir, "node_modules/p/bin/p", &e), 0);
	assert_ctime("node_modules/p/bin/p", &t, 0755);
	assert_int_equal(npm_link_bins(&l, dir, &e), 0);
	assert_ctime("node_modules/p/bin/p", &t, 0755);
	/* another mode (put's) becomes 0755 */
	assert_int_equal(npm_bin_exec(dir, "node_modules/p/bin/q", &e), 0);
	snprintf(p, sizeof(p), "%s/node_modules/p/bin/q", dir);
	assert_int_equal(access(p, X_OK), 0);
	t = settled_ctime("node_modules/p/bin/q");
	assert_ctime("node_modules/p/bin/q", &t, 0755);
}

/* ---- npm_opts.source: another place the bytes come from ------------------ */

#define SRC_PKGS 24

/* The source of the test: package i's bytes are "package i", sent in two
 * pieces; "decline" packages are not there (1), "corrupt" ones come with a
 * byte changed. Calls are counted across the workers. */
struct fake_src {
	int decline, corrupt;
	int overlap;               /* the first call waits (bounded) for a second in flight */
	int calls, inflight, most; /* atomics */
};

static int
fake_source(void *arg, struct http_client *hc, const struct npmlock_pkg *p, http_sink sink, void *sink_arg,
            const struct http_limits *lim, struct http_response *rs, char *src, size_t cap, struct err *e)
{
	struct fake_src *f = arg;
	char body[64];
	int i = atoi(p->name + 4), n, now, rc = 0, first, k;

	first = __atomic_add_fetch(&f->calls, 1, __ATOMIC_SEQ_CST) == 1;
	now = __atomic_add_fetch(&f->inflight, 1, __ATOMIC_SEQ_CST);
	for (k = 0; f->overlap && first && k < 10000 && __atomic_load_n(&f->inflight, __ATOMIC_SEQ_CST) < 2;
	     k++)
		usleep(1000);
	now = __atomic_load_n(&f->inflight, __ATOMIC_SEQ_CST);
	if (now > __atomic_load_n(&f->most, __ATOMIC_SEQ_CST))
		__atomic_store_n(&f->most, now, __ATOMIC_SEQ_CST);
	if (i == f->decline) {
		rc = 1;
		goto out;
	}
	n = snprintf(body, sizeof(body), "package %d", i);
	if (i == f->corrupt)
		body[0] = 'P';
	rs->content_length = n;
	if (sink(sink_arg, body, 4, e) != 0 || sink(sink_arg, body + 4, (size_t)n - 4, e) != 0) {
		rc = -1;
		goto out;
	}
	snprintf(src, cap, "fake:%d", i);
out:
	__atomic_sub_fetch(&f->inflight, 1, __ATOMIC_SEQ_CST);
	return rc;
}

static void
test_source(void **state)
{
	struct npmlock_pkg pk[SRC_PKGS];
	char names[SRC_PKGS][16], paths[SRC_PKGS][40], body[64], cache[128];
	char sources[SRC_PKGS][NPM_SOURCE_MAX];
	struct fake_src f = {.decline = -1, .corrupt = -1};
	struct npm_opts o;
	struct npm_stats st;
	struct npmlock l;
	struct err e = {0};
	int i;

	memset(&l, 0, sizeof(l));
	memset(pk, 0, sizeof(pk));
	for (i = 0; i < SRC_PKGS; i++) {
		snprintf(names[i], sizeof(names[i]), "pkg-%d", i);
		snprintf(paths[i], sizeof(paths[i]), "node_modules/pkg-%d", i);
		pk[i].name = pk[i].folder = names[i];
		pk[i].path = paths[i];
		pk[i].version = "1.0.0";
		/* the origin is a closed port: only the source can give bytes */
		pk[i].resolved = "https://127.0.0.1:1/p.tgz";
		pk[i].integrity = "sha512-x";
		digest_buf(DIGEST_SHA512, body, (size_t)snprintf(body, sizeof(body), "package %d", i),
		           &pk[i].digest);
	}
	l.pkgs = pk;
	l.npkgs = SRC_PKGS;
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	memset(&o, 0, sizeof(o));
	o.lock = &l;
	o.cache = cache;
	o.fetch_only = 1;
	o.jobs = 4;
	o.source = fake_source;
	o.source_arg = &f;
	o.sources = sources;
	memset(sources, 0, sizeof(sources));
	/* a corrupt blob is refused by the pin, whatever the source says */
	f.corrupt = 5;
	o.offline = 1;
	assert_int_equal(npm_install(&o, &st, &e), -1);
	assert_string_equal(e.code, "install.checksum_mismatch");
	assert_non_null(strstr(e.msg, "fake:5"));
	/* offline: what the source has is fetched, in parallel; a package it
	 * lacks is the offline refusal */
	f.corrupt = -1;
	f.decline = 7;
	snprintf(body, sizeof(body), "rm -rf '%s'", cache); /* what the last run kept */
	assert_int_equal(system(body), 0);
	assert_int_equal(npm_install(&o, &st, &e), -1);
	assert_string_equal(e.code, "install.disabled");
	assert_non_null(strstr(e.msg, "pkg-7@1.0.0"));
	/* everything there: each package once, by several workers at once
	 * (the first one fetched waits for another: an event, not a time) */
	f.decline = -1;
	f.calls = f.most = 0;
	f.overlap = 1;
	assert_int_equal(system(body), 0);
	assert_int_equal(npm_install(&o, &st, &e), 0);
	assert_int_equal(st.fetched + st.cached, SRC_PKGS);
	assert_true(st.fetched > 0);
	assert_int_equal(f.calls, (int)st.fetched);
	assert_true(f.most > 1);
	f.overlap = 0;
	for (i = 0; i < SRC_PKGS; i++)
		assert_true(strncmp(sources[i], "fake:", 5) == 0 || strncmp(sources[i], "cache:", 6) == 0);
	/* the cache holds them now: the source is not asked again */
	f.calls = 0;
	assert_int_equal(npm_install(&o, &st, &e), 0);
	assert_int_equal(st.cached, SRC_PKGS);
	assert_int_equal(f.calls, 0);
	/* lazy: a package the source lacks goes to the origin (here closed) */
	assert_int_equal(system(body), 0);
	o.offline = 0;
	f.decline = 3;
	assert_int_equal(npm_install(&o, &st, &e), -1);
	assert_true(strncmp(e.code, "http.", 5) == 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_js_entry, setup, teardown),
	    cmocka_unit_test(test_purl),
	    cmocka_unit_test(test_source_set),
	    cmocka_unit_test_setup_teardown(test_link_bins, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bin_exec_keeps_ctime, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_source, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
