/* The install engine's building blocks (core/install*.c): tree listings, the
 * proof list, running verify commands, markers, backoff, the check-only
 * ensure. The whole engine runs end to end in tests/integration/install.sh. */
#include "unit.h"
#include <errno.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/proof.h"
#include "base/digest.h"
#include "base/clock.h"
#include "install/install.h"
#include "install/install_int.h"
#include "base/json.h"

static char dir[64];
/* A request from the command line, and a check. */
static const struct install_req rq, check = {.flags = INSTALL_F_CHECK};

static int
setup(void **state)
{
	return unit_mkdtemp(dir, sizeof(dir), "install");
}

static int
teardown(void **state)
{
	return unit_rmtree(dir);
}

static void
put(const char *rel, const char *text, mode_t mode)
{
	char p[256];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	chmod(p, mode);
}

static void
test_tree_listing(void **state)
{
	char p[256], hex[65], hex2[65], *text = NULL;
	size_t len;
	uint64_t files, bytes;
	struct err e = {0};

	snprintf(p, sizeof(p), "%s/t", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/t/sub", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/t", dir);
	put("t/b", "bee\n", 0644);
	put("t/a", "hello", 0755);
	put("t/sub/c", "", 0600);
	snprintf(p, sizeof(p), "%s/t/link", dir);
	assert_int_equal(symlink("sub/c", p), 0);
	snprintf(p, sizeof(p), "%s/t", dir);
	assert_int_equal(install_tree_list(p, &text, &len, hex, &files, &bytes, &e), 0);
	assert_int_equal(files, 3);
	assert_int_equal(bytes, 9);
	/* sorted, one line per entry, mode, size, digest, path */
	assert_non_null(
	    strstr(text, "f 0755 5 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824 a\n"));
	assert_true(strstr(text, " a\n") < strstr(text, " b\n"));
	assert_non_null(strstr(text, "l 0777 5 "));
	assert_non_null(strstr(text, "d 0700 - - sub\n"));
	assert_non_null(strstr(text, " sub/c\n"));
	free(text);
	/* stable, and every kind of change changes it */
	assert_int_equal(install_tree_list(p, NULL, NULL, hex2, NULL, NULL, &e), 0);
	assert_string_equal(hex, hex2);
	put("t/b", "bee!\n", 0644);
	assert_int_equal(install_tree_list(p, NULL, NULL, hex2, NULL, NULL, &e), 0);
	assert_string_not_equal(hex, hex2);
	memcpy(hex, hex2, sizeof(hex));
	snprintf(p, sizeof(p), "%s/t/a", dir);
	chmod(p, 0700);
	snprintf(p, sizeof(p), "%s/t", dir);
	assert_int_equal(install_tree_list(p, NULL, NULL, hex2, NULL, NULL, &e), 0);
	assert_string_not_equal(hex, hex2);
	/* only files, directories and symlinks */
	snprintf(p, sizeof(p), "%s/t/fifo", dir);
	assert_int_equal(mkfifo(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/t", dir);
	assert_int_equal(install_tree_list(p, NULL, NULL, hex2, NULL, NULL, &e), -1);
	assert_string_equal(e.code, "install.failed");
	snprintf(p, sizeof(p), "%s/nothere", dir);
	assert_int_equal(install_tree_list(p, NULL, NULL, hex2, NULL, NULL, &e), -1);
}

/* run a shell command in dir/<sub> */
static void
sh_in(const char *sub, const char *cmd)
{
	char buf[1024];

	snprintf(buf, sizeof(buf), "cd '%s/%s' && %s", dir, sub, cmd);
	if (system(buf) != 0)
		fail_msg("failed: %s", buf);
}

/* a fresh tree dir/t: files, a subdirectory two deep, a symlink */
static void
proof_tree(void)
{
	sh_in(
	    ".",
	    "rm -rf t && mkdir -p t/bin t/sub/deep && printf '#!/bin/sh\\n' >t/bin/x && chmod 755 t/bin/x && "
	    "printf aaaa >t/sub/a && printf bbbb >t/sub/b && printf c >t/sub/deep/c && ln -s sub/a t/link");
}

static void
test_proof_list_catches_each_change(void **state)
{
	/* each change, made after proof_make, on a fresh tree */
	static const char *const changes[] = {
	    "printf zzzz >sub/a",                                                   /* rewrite, same size */
	    "printf z | dd of=sub/a conv=notrunc status=none",                      /* in place */
	    "printf aaaa >sub/a",                                                   /* same bytes again */
	    "chmod 600 sub/a",                                                      /* chmod */
	    "chmod 700 sub/deep",                                                   /* chmod of a directory */
	    ": >sub/new",                                                           /* added file */
	    "mkdir sub/deep/more",                                                  /* added directory */
	    "rm sub/b",                                                             /* removed file */
	    "rm -r sub/deep",                                                       /* removed directory */
	    "mv sub/a sub/t && mv sub/b sub/a && mv sub/t sub/b",                   /* names swapped */
	    "mv sub/a sub/a2",                                                      /* renamed */
	    "mv sub sub.old && cp -a sub.old sub && rm -rf sub.old",                /* directory replaced */
	    "mv bin/x bin/x.old && cp -a bin/x.old bin/x && rm bin/x.old",          /* file replaced */
	    "ln -s sub/b link.new && mv -T link.new link",                          /* symlink swapped */
	    "ln sub/a ../elsewhere",                                                /* hard link made */
	    "t=$(stat -c %y sub/a) && printf zzzz >sub/a && touch -d \"$t\" sub/a", /* mtime set back */
	    "t=$(stat -c %y sub) && : >sub/x && rm sub/x && touch -d \"$t\" sub",   /* mtime set back */
	    "cd .. && mv t t.old && cp -a t.old t && rm -rf t.old",                 /* root replaced */
	};
	char root[256], *pl = NULL;
	size_t len = 0, i;
	struct err e = {0};

	snprintf(root, sizeof(root), "%s/t", dir);
	for (i = 0; i < sizeof(changes) / sizeof(changes[0]); i++) {
		proof_tree();
		sh_in(".", "rm -f elsewhere");
		assert_int_equal(proof_make(root, "install.failed", &pl, &len, &e), 0);
		assert_int_equal(proof_parse(pl, len), 9); /* the root and 8 entries */
		if (proof_check(root, pl, len) != 1)
			fail_msg("unchanged tree not proved before: %s", changes[i]);
		sh_in("t", changes[i]);
		if (proof_check(root, pl, len) != 0)
			fail_msg("change not caught: %s", changes[i]);
		free(pl);
		pl = NULL;
	}
	/* an archive's mtimes in the future do not hold proof_make
	 * up (it waits for the clock to pass the newest ctime, at most 2.5 s) */
	proof_tree();
	sh_in("t", "touch -h -d '2100-01-01' sub/a link sub");
	{
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		assert_int_equal(proof_make(root, "install.failed", &pl, &len, &e), 0);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >= 2000)
			fail_msg("proof_make waited for future mtimes");
		assert_int_equal(proof_check(root, pl, len), 1);
		free(pl);
		pl = NULL;
	}
	/* reading is not a change */
	proof_tree();
	assert_int_equal(proof_make(root, "install.failed", &pl, &len, &e), 0);
	sh_in("t", "cat sub/a bin/x >/dev/null && ls -R >/dev/null && readlink link >/dev/null");
	assert_int_equal(proof_check(root, pl, len), 1);
	/* another tree with the same content is not this tree */
	sh_in(".", "rm -rf u && cp -a t u");
	snprintf(root, sizeof(root), "%s/u", dir);
	assert_int_equal(proof_check(root, pl, len), 0);
	snprintf(root, sizeof(root), "%s/nothere", dir);
	assert_int_equal(proof_check(root, pl, len), 0);
	assert_int_equal(proof_make(root, "install.failed", &pl, &len, &e), -1);
	assert_string_equal(e.code, "io.error");
	free(pl);
}

static void
test_proof_quick(void **state)
{
	char root[256], *pl = NULL;
	size_t len = 0;
	struct err e = {0};
	int64_t t0, waited;
	int rc;

	(void)state;
	snprintf(root, sizeof(root), "%s/t", dir);
	/* a tree written just now: proved once the clock has ticked past it
	 * (a filesystem with fine timestamps) and the proof sees later changes */
	proof_tree();
	err_clear(&e);
	rc = proof_make_quick(root, "io.error", &pl, &len, &e);
	if (rc == 0) {
		assert_int_equal(proof_parse(pl, len), 9);
		assert_int_equal(proof_check(root, pl, len), 1);
		sh_in("t", "printf zzzz >sub/a");
		assert_int_equal(proof_check(root, pl, len), 0);
		free(pl);
		pl = NULL;
	} else {
		/* one-second timestamps: no proof, no error */
		assert_int_equal(rc, 1);
		assert_null(pl);
		assert_null(e.code);
	}
	/* a clock that has not ticked past the tree (one-second timestamps,
	 * a tree written within the tick): no proof, no error, and no more
	 * than 20 ms waited, where proof_make waits for it (2.5 s at most) */
	proof_tree();
	clock_test_fs_behind_ms = 10000;
	err_clear(&e);
	pl = NULL;
	t0 = clock_ms();
	rc = proof_make_quick(root, "io.error", &pl, &len, &e);
	waited = clock_ms() - t0;
	clock_test_fs_behind_ms = 0;
	assert_int_equal(rc, 1);
	assert_null(pl);
	assert_null(e.code);
	if (waited < 20)
		fail_msg("proof_make_quick gave up after %lld ms, before the clock could tick",
		         (long long)waited);
	/* the clock back: proved */
	assert_int_equal(proof_make_quick(root, "io.error", &pl, &len, &e), 0);
	assert_int_equal(proof_check(root, pl, len), 1);
	free(pl);
	pl = NULL;
	/* a missing root is an error */
	snprintf(root, sizeof(root), "%s/nothere", dir);
	assert_int_equal(proof_make_quick(root, "io.error", &pl, &len, &e), -1);
	assert_string_equal(e.code, "io.error");
}

/* write len bytes of buf to dir/<rel> by rename (a new inode) */
static void
put_file(const char *rel, const char *buf, size_t len)
{
	char p[256], tmp[280];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
	assert_int_equal(rename(tmp, p), 0);
}

static void
sha_hex(const char *buf, size_t len, char hex[65])
{
	struct digest dg;

	digest_buf(DIGEST_SHA256, buf, len, &dg);
	digest_hex(&dg, hex);
}

static void
cache_counts(unsigned long *h, unsigned long *l)
{
	install_proof_cache_stats(h, l);
}

/* the process-wide cache of proof lists: reused only for the same file and
 * sha256; the tree is still checked on every call */
static void
test_proof_cache(void **state)
{
	char root[256], path[256], hex[65], hex2[65], other[256], *pl = NULL, *pl2 = NULL;
	const char *b, *b2;
	size_t len = 0, len2 = 0, bl = 0;
	unsigned long h0, l0, h, l;
	struct install_proof_ref *r, *r2, *held;
	struct err e = {0};
	int i;

	install_proof_cache_clear();
	proof_tree();
	snprintf(root, sizeof(root), "%s/t", dir);
	snprintf(path, sizeof(path), "%s/list", dir);
	assert_int_equal(proof_make(root, "install.failed", &pl, &len, &e), 0);
	put_file("list", pl, len);
	sha_hex(pl, len, hex);

	/* first read loads, the second is a hit on the same bytes */
	cache_counts(&h0, &l0);
	b = install_proof_cache_get(path, hex, &bl, &r);
	assert_non_null(b);
	assert_int_equal(bl, len);
	assert_memory_equal(b, pl, len);
	cache_counts(&h, &l);
	assert_int_equal(l, l0 + 1);
	assert_int_equal(h, h0);
	b2 = install_proof_cache_get(path, hex, &bl, &r2);
	assert_ptr_equal(b2, b);
	cache_counts(&h, &l);
	assert_int_equal(l, l0 + 1);
	assert_int_equal(h, h0 + 1);
	assert_int_equal(proof_check(root, b2, bl), 1);
	install_proof_cache_put(r2);

	/* a change to the tree with the cache warm is still caught */
	sh_in("t", "printf zzzz >sub/a");
	b2 = install_proof_cache_get(path, hex, &bl, &r2);
	assert_ptr_equal(b2, b);
	assert_int_equal(proof_check(root, b2, bl), 0);
	install_proof_cache_put(r2);

	/* another sha256 (another marker) is never served from the cache */
	memcpy(hex2, hex, sizeof(hex2));
	hex2[0] = hex2[0] == '0' ? '1' : '0';
	cache_counts(&h0, &l0);
	assert_null(install_proof_cache_get(path, hex2, &bl, &r2));
	assert_null(r2);
	cache_counts(&h, &l);
	assert_int_equal(h, h0);
	assert_null(install_proof_cache_get(path, "zz", &bl, &r2));

	/* a replaced list file is read again: a new list for the new tree */
	proof_tree();
	assert_int_equal(proof_make(root, "install.failed", &pl2, &len2, &e), 0);
	put_file("list", pl2, len2);
	sha_hex(pl2, len2, hex2);
	cache_counts(&h0, &l0);
	b2 = install_proof_cache_get(path, hex2, &bl, &r2);
	assert_non_null(b2);
	cache_counts(&h, &l);
	assert_int_equal(l, l0 + 1);
	assert_int_equal(bl, len2);
	assert_memory_equal(b2, pl2, len2);
	assert_int_equal(proof_check(root, b2, bl), 1);
	install_proof_cache_put(r2);
	/* the reference held from before the replacement is still the old
	 * list (ASan: not freed under the holder) */
	assert_memory_equal(b, pl, len);
	install_proof_cache_put(r);

	/* the same bytes under a new inode: read again (identity moved) */
	put_file("list", pl2, len2);
	cache_counts(&h0, &l0);
	b2 = install_proof_cache_get(path, hex2, &bl, &r2);
	assert_non_null(b2);
	cache_counts(&h, &l);
	assert_int_equal(l, l0 + 1);
	install_proof_cache_put(r2);
	/* written to in place (appended: the size moves even within one tick
	 * of the clock): read again, and refused since the bytes no longer
	 * match the marker's sha256 */
	sh_in(".", "printf x >>list");
	cache_counts(&h0, &l0);
	assert_null(install_proof_cache_get(path, hex2, &bl, &r2));
	cache_counts(&h, &l);
	assert_int_equal(h, h0);
	/* gone: nothing */
	sh_in(".", "rm list");
	assert_null(install_proof_cache_get(path, hex2, &bl, &r2));
	/* a symlink to a good list is not followed */
	put_file("list2", pl2, len2);
	sh_in(".", "ln -s list2 list");
	assert_null(install_proof_cache_get(path, hex2, &bl, &r2));

	/* bounded: more lists than entries; a held reference outlives its
	 * eviction */
	snprintf(other, sizeof(other), "%s/list2", dir);
	held = NULL;
	b = install_proof_cache_get(other, hex2, &bl, &held);
	assert_non_null(b);
	for (i = 0; i < INSTALL_PROOF_CACHE + 2; i++) {
		char rel[32];
		snprintf(rel, sizeof(rel), "l%d", i);
		put_file(rel, pl2, len2);
		snprintf(other, sizeof(other), "%s/%s", dir, rel);
		b2 = install_proof_cache_get(other, hex2, &bl, &r2);
		assert_non_null(b2);
		install_proof_cache_put(r2);
	}
	assert_memory_equal(b, pl2, len2);
	install_proof_cache_put(held);
	/* the first of them was evicted: read again */
	snprintf(other, sizeof(other), "%s/l0", dir);
	cache_counts(&h0, &l0);
	b2 = install_proof_cache_get(other, hex2, &bl, &r2);
	assert_non_null(b2);
	install_proof_cache_put(r2);
	cache_counts(&h, &l);
	assert_int_equal(l, l0 + 1);
	install_proof_cache_clear();
	free(pl);
	free(pl2);
}

/* above the threshold for the second thread: a change in either half */
static void
test_proof_list_large_tree(void **state)
{
	char root[256], *pl = NULL;
	size_t len = 0;
	struct err e = {0};
	int n, k;

	snprintf(root, sizeof(root), "%s/big", dir);
	for (k = 0; k < 2; k++) {
		sh_in(".", "rm -rf big && mkdir big && cd big && for d in 0 1 2 3 4 5 6 7 8 9; do mkdir d$d; "
		           "for f in 00 01 02 03 04 05 06 07 08 09 10 11 12 13 14 15 16 17 18 19; do "
		           "for g in a b c d e f; do printf x >d$d/f$f$g; done; done; done");
		assert_int_equal(proof_make(root, "install.failed", &pl, &len, &e), 0);
		n = proof_parse(pl, len);
		assert_int_equal(n, 1 + 10 + 1200);
		assert_int_equal(proof_check(root, pl, len), 1);
		assert_int_equal(proof_check(root, pl, len), 1);
		/* the walk order is the directories' own: change each end */
		sh_in("big", k == 0 ? "printf y >\"$(find . -type f | head -1)\""
		                    : "printf y >\"$(find . -type f | tail -1)\"");
		assert_int_equal(proof_check(root, pl, len), 0);
		free(pl);
		pl = NULL;
	}
}

/* a proof list that is not one is never a proof */
static void
test_proof_list_hostile(void **state)
{
	char root[256], *pl = NULL, *bad;
	size_t len = 0, i;
	uint32_t u;
	struct err e = {0};

	proof_tree();
	snprintf(root, sizeof(root), "%s/t", dir);
	assert_int_equal(proof_make(root, "install.failed", &pl, &len, &e), 0);
	assert_int_equal(proof_check(root, pl, len), 1);
	assert_int_equal(proof_check(root, NULL, len), 0);
	assert_int_equal(proof_parse(NULL, 0), -1);
	bad = malloc(len + 8);
	assert_non_null(bad);
	/* every truncation */
	for (i = 0; i < len; i++) {
		memcpy(bad, pl, i);
		if (proof_parse(bad, i) != -1 || proof_check(root, bad, i) != 0)
			fail_msg("a list cut at %zu bytes of %zu passed", i, len);
	}
	/* a byte more */
	memcpy(bad, pl, len);
	bad[len] = '\0';
	assert_int_equal(proof_check(root, bad, len + 1), 0);
	/* misaligned */
	memcpy(bad + 1, pl, len);
	assert_int_equal(proof_check(root, bad + 1, len), 0);
	/* magic, counts, name offsets, names */
	memcpy(bad, pl, len);
	bad[0] = 'X';
	assert_int_equal(proof_check(root, bad, len), 0);
	memcpy(bad, pl, len);
	u = 0xffffffffu;
	memcpy(bad + 8, &u, 4);
	assert_int_equal(proof_parse(bad, len), -1);
	memcpy(bad, pl, len);
	memcpy(bad + 12, &u, 4);
	assert_int_equal(proof_parse(bad, len), -1);
	memcpy(bad, pl, len);
	memcpy(bad + 16 + 48 + 44, &u, 4); /* entry 1's name offset */
	assert_int_equal(proof_parse(bad, len), -1);
	memcpy(bad, pl, len);
	bad[len - 1] = 'x'; /* names not terminated */
	assert_int_equal(proof_parse(bad, len), -1);
	memcpy(bad, pl, len);
	memcpy(&u, bad + 16 + 48 + 44, 4);
	bad[16 + 9 * 48 + u] = '/'; /* an absolute name */
	assert_int_equal(proof_parse(bad, len), -1);
	/* a changed record is a changed tree */
	memcpy(bad, pl, len);
	bad[16 + 48 + 16] ^= 1; /* entry 1's ctime */
	assert_int_equal(proof_parse(bad, len), 9);
	assert_int_equal(proof_check(root, bad, len), 0);
	free(bad);
	free(pl);
}

static void
test_run_scrubbed_and_bounded(void **state)
{
	char out[4096];
	struct err e = {0};
	char *env[] = {"/usr/bin/env", NULL};
	char *sh[] = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL};
	char *slow[] = {"/bin/sh", "-c", "sleep 5", NULL};
	char *none[] = {"/nonexistent/x", NULL};

	setenv("ABX_SECRET_FOR_TEST", "leak", 1);
	assert_int_equal(install_run(env, "/usr/bin:/bin", dir, 5, out, sizeof(out), &e), 0);
	assert_null(strstr(out, "ABX_SECRET_FOR_TEST"));
	assert_non_null(strstr(out, "PATH=/usr/bin:/bin\n"));
	assert_non_null(strstr(out, "LANG=C\n"));
	assert_non_null(strstr(out, "HOME="));
	unsetenv("ABX_SECRET_FOR_TEST");
	assert_int_equal(install_run(sh, "/usr/bin:/bin", dir, 5, out, sizeof(out), &e), 3);
	assert_non_null(strstr(out, "out\n"));
	assert_non_null(strstr(out, "err\n"));
	assert_int_equal(install_run(slow, "/usr/bin:/bin", dir, 1, out, sizeof(out), &e), 128 + 9);
	assert_int_equal(install_run(none, "/usr/bin:/bin", dir, 5, out, sizeof(out), &e), 127);
	assert_non_null(strstr(out, "/nonexistent/x"));
	{
		/* the deadline ends the whole group, a child that ignores
		 * SIGTERM too, promptly */
		char *stubborn[] = {"/bin/sh", "-c", "trap '' TERM; sleep 30 & sleep 30", NULL};
		int64_t t0 = clock_ms();
		assert_int_equal(install_run(stubborn, "/usr/bin:/bin", dir, 1, out, sizeof(out), &e),
		                 128 + 9);
		assert_true(clock_ms() - t0 < 1000 + INSTALL_RUN_GRACE_MS + 1500);
	}
	/* a tiny buffer is filled and terminated, never overrun */
	assert_int_equal(install_run(sh, "/usr/bin:/bin", dir, 5, out, 3, &e), 3);
	assert_int_equal(strlen(out), 2);
}

static void
test_names(void **state)
{
	char buf[64];

	install_tool_env_name("node-runtime", buf, sizeof(buf));
	assert_string_equal(buf, "ABX_TOOL_NODE_RUNTIME");
	install_tool_env_name("claude-code", buf, sizeof(buf));
	assert_string_equal(buf, "ABX_TOOL_CLAUDE_CODE");
	assert_string_equal(install_state_name(INSTALL_READ_ONLY), "read_only");
	assert_string_equal(install_state_name(INSTALL_NETWORK_UNREACHABLE), "network_unreachable");
}

static void
test_check_only_and_modes(void **state)
{
	static struct config set;
	static struct manifest_set ms;
	static struct install_env c;
	struct manifest_opts mo = {.platform = "linux-x64"};
	struct install_result r;
	struct err e = {0};
	char ed[ERR_DETAILS_MAX];

	err_keep_details(&e, ed, sizeof(ed));
	char tools[128], marker[200];

	config_defaults(&set);
	snprintf(tools, sizeof(tools), "%s/tools", dir);
	snprintf(set.tools_dir, sizeof(set.tools_dir), "%s", tools);
	snprintf(set.state_dir, sizeof(set.state_dir), "%s/state", dir);
	set.install.use_path = 0;
	assert_int_equal(manifest_set_open(&ms, NULL, &mo, &e), 0);
	assert_int_equal(install_env_init(&c, &ms, &set, "linux-x64", NULL, &e), 0);
	/* check-only: missing, and nothing is created */
	assert_int_equal(install_ensure(&c, "node-runtime", &check, &r, &e), -1);
	assert_int_equal(r.state, INSTALL_MISSING);
	assert_int_equal(access(tools, F_OK), -1);
	assert_int_equal(install_ensure(&c, "no-such-tool", &rq, &r, &e), -1);
	assert_string_equal(e.code, "not_found");
	/* mode off never installs; build only under prepare */
	set.install.mode = CFG_MODE_OFF;
	assert_int_equal(install_ensure(&c, "node-runtime", &rq, &r, &e), -1);
	assert_string_equal(e.code, "install.disabled");
	assert_int_equal(r.state, INSTALL_DISABLED);
	set.install.mode = CFG_MODE_BUILD;
	assert_int_equal(install_ensure(&c, "node-runtime", &rq, &r, &e), -1);
	assert_string_equal(e.code, "install.required");
	assert_int_equal(r.state, INSTALL_MISSING);
	assert_int_equal(access(tools, F_OK), -1);
	/* a backoff recorded by another process is honoured */
	set.install.mode = CFG_MODE_LAZY;
	mkdir(tools, 0700);
	snprintf(marker, sizeof(marker), "%s/.locks", tools);
	mkdir(marker, 0700);
	install_env_fini(&c);
	assert_int_equal(install_env_init(&c, &ms, &set, "linux-x64", NULL, &e), 0);
	put("tools/.locks/node-runtime.backoff", "{\"failures\":1,\"until\":99999999999,\"seconds\":30}",
	    0600);
	if (install_backoff_left(&c, "node-runtime") <= 0)
		fail_msg("no backoff: chain[0]=%s writable=%d why=%s", c.chain.d[0].path,
		         c.chain.d[0].writable, c.chain.d[0].why);
	assert_int_equal(install_ensure(&c, "node-runtime", &rq, &r, &e), -1);
	assert_string_equal(e.code, "install.backoff");
	assert_true(r.retry_after > 0 && r.retry_after <= INSTALL_BACKOFF_MAX);
	assert_non_null(strstr(e.details, "retry_after"));
	install_backoff_clear(&c, "node-runtime");
	assert_int_equal(install_backoff_left(&c, "node-runtime"), 0);
	/* a broken marker is not a ready tool */
	snprintf(marker, sizeof(marker), "%s/node-runtime", tools);
	mkdir(marker, 0755);
	put("tools/node-runtime/.installed.json", "{\"name\":\"node-runtime\",\"tree\":\"../../x\"}", 0644);
	{
		struct install_marker mk;
		assert_int_equal(install_marker_read(tools, "node-runtime", &mk, &e), -1);
	}
	assert_int_equal(install_ensure(&c, "node-runtime", &check, &r, &e), -1);
	assert_int_equal(r.state, INSTALL_MISSING);
	install_env_fini(&c);
	manifest_set_close(&ms);
}

/* An npm-lock install parses its lockfile once: the network probe, the
 * install and the marker's SBOM share the context's parse (the file can be
 * gone after the first), and another platform or manifest parses again. */
static void
test_npm_lock_parsed_once(void **state)
{
	static struct config set;
	static struct manifest_set ms;
	static struct install_env c;
	struct manifest_opts mo = {.platform = "linux-x64"};
	manifest_t *m = malloc(sizeof(*m));
	const char *man =
	    "{\"schema\":1,\"name\":\"codex\",\"binary\":\"codex\",\"version\":\"0.1.0\","
	    "\"source\":{\"type\":\"npm-lock\",\"package\":\"@openai/codex\","
	    "\"lock\":\"codex/package-lock.json\",\"package_json\":\"codex/package.json\","
	    "\"bin\":\"node_modules/.bin/codex\",\"allow_scripts\":false},\"hosts\":[\"registry.npmjs.org\"],"
	    "\"verify\":{\"argv\":[\"{bin}\",\"--version\"]},\"platforms\":[\"linux-x64\",\"linux-arm64\"]}";
	const char *lock = "{\"lockfileVersion\":3,\"packages\":{\"\":{},\"node_modules/@openai/codex\":{"
	                   "\"version\":\"0.1.0\",\"resolved\":\"https://registry.npmjs.org/@openai/codex/-/"
	                   "codex-0.1.0.tgz\","
	                   "\"integrity\":\"sha512-pKvURIxJVi2CgRXROh/M6pJ/"
	                   "UrTVRZKX+LQ+QtqJI4vBNibkPcs43bCCSIkn7JBPtCBXRDmD6IWFF51QVRr+Yg==\"}}}";
	struct install_npm_info info;
	struct json_w w;
	struct err e = {0};
	char path[256], url[512];

	assert_non_null(m);
	snprintf(path, sizeof(path), "%s/codex", dir);
	mkdir(path, 0700);
	put("codex/package-lock.json", lock, 0644);
	put("codex.json", man, 0644);
	snprintf(path, sizeof(path), "%s/codex.json", dir);
	assert_int_equal(manifest_load_file(m, path, &mo, &e), 0);
	config_defaults(&set);
	snprintf(set.tools_dir, sizeof(set.tools_dir), "%s/tools", dir);
	snprintf(path, sizeof(path), "%s/cache", dir);
	set.install.mode = CFG_MODE_OFFLINE;
	assert_int_equal(manifest_set_open(&ms, NULL, &mo, &e), 0);
	assert_int_equal(install_env_init(&c, &ms, &set, "linux-x64", path, &e), 0);
	assert_int_equal(install_npm_probe_url(&c, m, url, sizeof(url)), 1);
	assert_string_equal(url, "https://registry.npmjs.org/@openai/codex/-/codex-0.1.0.tgz");
	assert_non_null(c.npm_lock);
	/* the file is gone: what follows can only read the parse */
	snprintf(path, sizeof(path), "%s/codex/package-lock.json", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(install_npm_probe_url(&c, m, url, sizeof(url)), 1);
	json_w_init(&w, 65536);
	json_w_arr(&w);
	install_npm_sbom(&c, m, &w);
	json_w_end(&w);
	assert_non_null(strstr(w.buf, "\"name\":\"@openai/codex\""));
	json_w_free(&w);
	/* offline and not cached: refused by the install itself, which got
	 * as far as the packages (the lockfile came from the parse) */
	memset(&info, 0, sizeof(info));
	assert_int_equal(install_npm_stage(&c, m, dir, NULL, &info, &e), -1);
	assert_string_equal(e.code, "install.disabled");
	assert_int_equal(strlen(info.lock_sha256), 64);
	/* every platform is another parse, which now fails */
	assert_int_equal(install_npm_fetch(&c, &rq, m, "all", &info, NULL, &e), -1);
	assert_non_null(strstr(e.msg, "package-lock.json"));
	install_env_fini(&c);
	assert_null(c.npm_lock);
	manifest_set_close(&ms);
	free(m);
}

/* The network probe is cached per process (one probe answers every install), not per
 * context: serve runs each install job with a context of its own. */
static void
test_probe_cached_per_process(void **state)
{
	struct install_env c1, c2;
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	struct err e = {0};
	char ed[ERR_DETAILS_MAX];

	err_keep_details(&e, ed, sizeof(ed));
	char url[64];
	unsigned long before;
	int ls, n = 0, fd;

	ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(ls >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(ls, 8), 0);
	assert_int_equal(getsockname(ls, (struct sockaddr *)&sa, &sl), 0);
	snprintf(url, sizeof(url), "https://127.0.0.1:%d/x.tgz", ntohs(sa.sin_port));
	unsetenv("HTTPS_PROXY");
	unsetenv("https_proxy");
	install_probe_cache_clear();
	memset(&c1, 0, sizeof(c1));
	memset(&c2, 0, sizeof(c2));
	before = install_probe_connects();
	assert_int_equal(install_net_probe(&c1, NULL, url, &e), 0);
	assert_int_equal(install_net_probe(&c2, NULL, url, &e), 0);
	assert_int_equal(install_probe_connects() - before, 1);
	while ((fd = accept(ls, NULL, NULL)) >= 0) {
		n++;
		close(fd);
	}
	assert_int_equal(n, 1);
	close(ls);
	/* a refused host: unreachable, with the phase, host and hint, and
	 * the answer is cached as well */
	assert_int_equal(install_net_probe(&c1, NULL, url, &e), 0); /* still cached as reachable */
	install_probe_cache_clear();
	before = install_probe_connects();
	assert_int_equal(install_net_probe(&c1, NULL, url, &e), -1);
	assert_string_equal(e.code, "install.network_unreachable");
	assert_non_null(strstr(e.details, "\"phase\":\"probe\""));
	assert_non_null(strstr(e.details, "\"host\":\"127.0.0.1:"));
	assert_non_null(strstr(e.details, "\"hint\""));
	assert_int_equal(install_net_probe(&c2, NULL, url, &e), -1);
	assert_int_equal(install_probe_connects() - before, 1);
	install_probe_cache_clear();
}

/* A tool's requires are ensured on a thread of their own while the tool is
 * staged (core/install/install.c), joined before its verify: both published, the
 * require's outcome reported once, from that thread. A require that fails
 * is the answer ("X requires Y: " and its code) and the dependent leaves
 * nothing behind: no tree, no staging, no backoff of its own. */
static pthread_t req_main;
static int req_calls, req_rc, req_elsewhere;

static void
on_required(void *arg, const char *name, int rc, const struct install_result *r, const struct err *e)
{
	(void)arg;
	(void)r;
	(void)e;
	req_calls += strcmp(name, "ubase") == 0;
	req_rc = rc;
	req_elsewhere = !pthread_equal(pthread_self(), req_main);
}

static const struct install_observer req_obs = {.required = on_required};

/* dir/m/<name>.json: a tarball tool whose artifact is in dir/<cache>, its
 * bin a shell script that exits 0. */
static void
tarball_tool(const char *name, const char *requires, const char *cache)
{
	char cmd[1024], p[256], sha[65], man[1024];
	struct digest d;
	struct err e = {0};

	snprintf(cmd, sizeof(cmd),
	         "mkdir -p m src-%s/bin %s && printf '#!/bin/sh\\nexit 0\\n' >src-%s/bin/%s && "
	         "chmod 755 src-%s/bin/%s && tar czf %s.tgz -C src-%s bin",
	         name, cache, name, name, name, name, name, name);
	sh_in(".", cmd);
	snprintf(p, sizeof(p), "%s/%s.tgz", dir, name);
	assert_int_equal(digest_file(DIGEST_SHA256, p, &d, NULL, &e), 0);
	digest_hex(&d, sha);
	snprintf(cmd, sizeof(cmd), "cp %s.tgz %s/%s", name, cache, sha);
	sh_in(".", cmd);
	snprintf(man, sizeof(man),
	         "{\"schema\":1,\"name\":\"%s\",\"binary\":\"%s\",\"version\":\"1.0.0\",%s%s%s"
	         "\"source\":{\"type\":\"tarball\",\"bin\":\"bin/%s\",\"platforms\":{\"linux-x64\":"
	         "{\"url\":\"https://example.invalid/%s.tgz\",\"sha256\":\"%s\"}}},"
	         "\"hosts\":[\"example.invalid\"],\"verify\":{\"argv\":[\"{bin}\"]},\"platforms\":[\"linux-"
	         "x64\"]}",
	         name, name, requires ? "\"requires\":[\"" : "", requires ? requires : "",
	         requires ? "\"]," : "", name, name, sha);
	snprintf(p, sizeof(p), "m/%s.json", name);
	put(p, man, 0644);
}

static void
test_requires_beside(void **state)
{
	static struct config set;
	static struct manifest_set ms;
	static struct install_env c;
	struct manifest_opts mo = {.platform = "linux-x64"};
	struct install_result r;
	struct err e = {0};
	char p[256];

	tarball_tool("ubase", NULL, "tools/.cache");
	tarball_tool("utop", "ubase", "tools/.cache");
	sh_in(".", "mkdir -p tools2/.cache && cp tools/.cache/* tools2/.cache/ && "
	           "rm tools2/.cache/$(sha256sum <ubase.tgz | cut -d' ' -f1)");
	config_defaults(&set);
	snprintf(set.tools_dir, sizeof(set.tools_dir), "%s/tools", dir);
	snprintf(set.state_dir, sizeof(set.state_dir), "%s/state", dir);
	set.install.use_path = 0;
	set.install.mode = CFG_MODE_OFFLINE;
	snprintf(p, sizeof(p), "%s/m", dir);
	assert_int_equal(manifest_set_open(&ms, p, &mo, &e), 0);
	assert_int_equal(install_env_init(&c, &ms, &set, "linux-x64", NULL, &e), 0);
	req_main = pthread_self();
	if (install_ensure(&c, "utop", &(struct install_req){.obs = &req_obs}, &r, &e) != 0)
		fail_msg("ensure utop: %s: %s", e.code, e.msg);
	assert_int_equal(r.installed, 1);
	assert_int_equal(req_calls, 1);
	assert_int_equal(req_rc, 0);
	assert_int_equal(req_elsewhere, 1);
	assert_int_equal(r.n.installs, 2); /* the require's counted too */
	snprintf(p, sizeof(p), "%s/tools/ubase/.installed.json", dir);
	assert_int_equal(access(p, F_OK), 0);
	install_env_fini(&c);

	/* the require's artifact is not in this cache (offline): it fails */
	snprintf(set.tools_dir, sizeof(set.tools_dir), "%s/tools2", dir);
	assert_int_equal(install_env_init(&c, &ms, &set, "linux-x64", NULL, &e), 0);
	req_calls = 0;
	assert_int_equal(install_ensure(&c, "utop", &(struct install_req){.obs = &req_obs}, &r, &e), -1);
	assert_int_equal(req_calls, 1);
	assert_int_equal(req_rc, -1);
	assert_non_null(e.code);
	assert_true(strncmp(e.msg, "utop requires ubase: ", 21) == 0);
	assert_int_not_equal(r.state, INSTALL_READY);
	snprintf(p, sizeof(p), "%s/tools2/utop", dir);
	assert_int_equal(access(p, F_OK), -1);
	snprintf(p, sizeof(p), "%s/tools2/.locks/utop.backoff", dir);
	assert_int_equal(access(p, F_OK), -1);
	snprintf(p, sizeof(p), "%s/tools2/.locks/ubase.backoff", dir);
	assert_int_equal(access(p, F_OK), 0);
	sh_in("tools2", "test -z \"$(ls -A .staging)\"");
	install_env_fini(&c);
	manifest_set_close(&ms);
}

/* What the hook does once the artifact was hashed: 1 renames other bytes
 * (a valid archive of its own) over its name, 2 writes into the very file
 * hashed. */
static int swap_how;
static int swap_calls;

static void
swap_artifact(const char *path)
{
	char forged[256];

	swap_calls++;
	if (swap_how == 1) {
		snprintf(forged, sizeof(forged), "%s/forged.tgz", dir);
		assert_int_equal(rename(forged, path), 0);
	} else if (swap_how == 2) {
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "cat '%s/forged.tgz' >'%s'", dir, path);
		assert_int_equal(system(cmd), 0);
	}
}

/* A verified artifact is extracted from the descriptor it was hashed
 * through: a file renamed over its name after the hash is not installed
 * (the pinned bytes are), and a write into the hashed file itself is
 * caught by the hash taken as it is extracted (install.checksum_mismatch,
 * nothing published). */
static void
test_artifact_swapped_after_hash(void **state)
{
	static struct config set;
	static struct manifest_set ms;
	static struct install_env c;
	struct manifest_opts mo = {.platform = "linux-x64"};
	struct install_result r;
	struct err e = {0};
	char p[256], body[64];
	int fd;
	ssize_t n;

	tarball_tool("uswap", NULL, "tools/.cache");
	sh_in(".", "mkdir -p forged/bin && printf '#!/bin/sh\\necho forged; exit 0\\n' >forged/bin/uswap && "
	           "chmod 755 forged/bin/uswap && tar czf forged.tgz -C forged bin");
	config_defaults(&set);
	snprintf(set.tools_dir, sizeof(set.tools_dir), "%s/tools", dir);
	snprintf(set.state_dir, sizeof(set.state_dir), "%s/state", dir);
	set.install.use_path = 0;
	set.install.mode = CFG_MODE_OFFLINE;
	snprintf(p, sizeof(p), "%s/m", dir);
	assert_int_equal(manifest_set_open(&ms, p, &mo, &e), 0);
	assert_int_equal(install_env_init(&c, &ms, &set, "linux-x64", NULL, &e), 0);
	install_test_hashed_fn = swap_artifact;
	swap_how = 1;
	if (install_ensure(&c, "uswap", &rq, &r, &e) != 0)
		fail_msg("ensure uswap: %s: %s", e.code, e.msg);
	assert_int_equal(swap_calls, 1);
	snprintf(p, sizeof(p), "%s/bin/uswap", r.tree);
	fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, body, sizeof(body) - 1);
	close(fd);
	assert_true(n > 0);
	body[n] = '\0';
	assert_string_equal(body, "#!/bin/sh\nexit 0\n");
	install_env_fini(&c);

	/* the hashed file itself written to: refused, nothing published */
	sh_in(".",
	      "rm -rf tools/uswap tools/.cache/trees && cp uswap.tgz tools/.cache/$(sha256sum <uswap.tgz | "
	      "cut -d' ' -f1) && tar czf forged.tgz -C forged bin");
	assert_int_equal(install_env_init(&c, &ms, &set, "linux-x64", NULL, &e), 0);
	swap_how = 2;
	assert_int_equal(install_ensure(&c, "uswap", &rq, &r, &e), -1);
	assert_string_equal(e.code, "install.checksum_mismatch");
	assert_non_null(strstr(e.msg, "changed after it was verified"));
	snprintf(p, sizeof(p), "%s/tools/uswap/.installed.json", dir);
	assert_int_equal(access(p, F_OK), -1);
	install_test_hashed_fn = NULL;
	install_env_fini(&c);
	manifest_set_close(&ms);
}

/* install_specific_code reads e->sys and e->cause: a message in another
 * language, or one quoting the words of another error, decides nothing. */
static void
test_specific_code_by_fields_not_text(void **state)
{
	struct err e = {0};
	char ed[ERR_DETAILS_MAX];

	err_keep_details(&e, ed, sizeof(ed));

	(void)state;
	err_sys(&e, "install.failed", ENOSPC, "écriture de %s : plus de place", "/t/x");
	install_specific_code(&e);
	assert_string_equal(e.code, "install.no_space");
	err_sys(&e, "io.error", EDQUOT, "quota");
	err_wrap(&e, "install.failed", "kd: %s", e.msg);
	install_specific_code(&e);
	assert_string_equal(e.code, "install.no_space");
	/* the words alone are not a full disk, nor a missing CA bundle */
	err_set(&e, "install.failed", "a path /t/%s/tls.no_trust_anchors", strerror(ENOSPC));
	err_details(&e, "{\"phase\":\"fetch\",\"code\":\"tls.no_trust_anchors\"}");
	install_specific_code(&e);
	assert_string_equal(e.code, "install.failed");
	err_set(&e, "tls.no_trust_anchors", "aucun certificat");
	err_wrap(&e, "install.failed", "kd: fetch: %s", e.msg);
	install_specific_code(&e);
	assert_string_equal(e.code, "tls.no_trust_anchors");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_probe_cached_per_process),
	    cmocka_unit_test_setup_teardown(test_tree_listing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_proof_list_catches_each_change, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_proof_quick, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_proof_list_large_tree, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_proof_list_hostile, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_proof_cache, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_run_scrubbed_and_bounded, setup, teardown),
	    cmocka_unit_test(test_names),
	    cmocka_unit_test_setup_teardown(test_check_only_and_modes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_npm_lock_parsed_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_requires_beside, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_artifact_swapped_after_hash, setup, teardown),
	    cmocka_unit_test(test_specific_code_by_fields_not_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
