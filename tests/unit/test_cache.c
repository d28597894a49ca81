#include "unit.h"
#include "base/clock.h"
#include "base/fs.h"
#include "base/proof.h"
#include "pkg/cache.h"
#include "pkg/cache_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
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
exists(const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return access(p, F_OK) == 0;
}

/* The sealing key's file: in a state directory beside the caches, never
 * inside one. */
static char keyf[128];

static int
setup(void **state)
{
	int rc = unit_mkdtemp(dir, sizeof(dir), "cache");

	snprintf(keyf, sizeof(keyf), "%s/state/" CACHE_KEY_FILE, dir);
	return rc;
}

static int
teardown(void **state)
{
	return unit_rmtree(dir);
}

static void
test_get_verifies(void **state)
{
	char cache[256], p[512], got[512], hex[DIGEST_HEX_MAX], h512[DIGEST_HEX_MAX], idx[512];
	struct digest d512, d256;
	struct buf mem = BUF_INIT(1024);
	struct err e = {0};
	int in_mem = 0;

	snprintf(cache, sizeof(cache), "%s/c", dir);
	mkdir(cache, 0700);
	digest_buf(DIGEST_SHA512, "tarball", 7, &d512);
	digest_buf(DIGEST_SHA256, "tarball", 7, &d256);
	/* no alias: a miss */
	assert_int_equal(cache_get(cache, 1, &d512, NULL, NULL, NULL, got, sizeof(got), &e), 0);
	/* alias and blob: a hit naming the sha256 blob, kept in memory */
	digest_hex(&d256, hex);
	snprintf(p, sizeof(p), "c/%s", hex);
	put(p, "tarball");
	snprintf(idx, sizeof(idx), "c/sha512-%s", digest_hex(&d512, h512));
	put(idx, hex);
	assert_int_equal(cache_get(cache, 1, &d512, &mem, &in_mem, NULL, got, sizeof(got), &e), 1);
	assert_int_equal(in_mem, 1);
	assert_int_equal(mem.len, 7);
	assert_memory_equal(mem.p, "tarball", 7);
	snprintf(p, sizeof(p), "%s/%s", cache, hex);
	assert_string_equal(got, p);
	assert_int_equal(cache_sha256_of(cache, &d512, got), 1);
	assert_string_equal(got, hex);
	/* sha256 asked directly: the blob's own name */
	assert_int_equal(cache_get(cache, 1, &d256, NULL, NULL, NULL, got, sizeof(got), &e), 1);
	/* the blob changed behind the alias: a miss, and both are removed */
	snprintf(p, sizeof(p), "c/%s", hex);
	put(p, "tarbalL");
	assert_int_equal(cache_get(cache, 1, &d512, &mem, &in_mem, NULL, got, sizeof(got), &e), 0);
	assert_int_equal(in_mem, 0);
	assert_false(exists(p));
	assert_false(exists(idx));
	/* an alias that is not a hex digest is ignored */
	put(idx, "../../../../etc/passwd................................................");
	assert_int_equal(cache_get(cache, 1, &d512, NULL, NULL, NULL, got, sizeof(got), &e), 0);
	buf_free(&mem);
}

/* An alias naming another artifact's blob (sound for its own digest): the
 * mismatch removes the alias, never that blob. */
static void
test_alias_to_other_blob(void **state)
{
	char cache[256], p[512], got[512], hex[DIGEST_HEX_MAX], h512[DIGEST_HEX_MAX], idx[512];
	struct digest a512, b256;
	struct err e = {0};

	snprintf(cache, sizeof(cache), "%s/c", dir);
	mkdir(cache, 0700);
	digest_buf(DIGEST_SHA512, "artifact a", 10, &a512);
	digest_buf(DIGEST_SHA256, "artifact b", 10, &b256);
	snprintf(p, sizeof(p), "c/%s", digest_hex(&b256, hex));
	put(p, "artifact b");
	snprintf(idx, sizeof(idx), "c/sha512-%s", digest_hex(&a512, h512));
	put(idx, hex);
	assert_int_equal(cache_get(cache, 1, &a512, NULL, NULL, NULL, got, sizeof(got), &e), 0);
	assert_false(exists(idx));
	assert_true(exists(p));
	assert_int_equal(cache_get(cache, 1, &b256, NULL, NULL, NULL, got, sizeof(got), &e), 1);
}

/* A blob, an alias, or a key that is not a regular file (a FIFO) is
 * refused at once (cache.unsafe_entry naming it), never waited on; one
 * owned by another user in our own cache is refused, naming the owner. */
static void
test_get_refuses(void **state)
{
	char cache[256], p[512], got[512], hex[DIGEST_HEX_MAX], h512[DIGEST_HEX_MAX], idx[600];
	struct digest d512, d256;
	unsigned char sk[KEY_LEN];
	const char *why = NULL;
	struct err e = {0};
	int fd = -1, i;

	snprintf(cache, sizeof(cache), "%s/c", dir);
	mkdir(cache, 0700);
	digest_buf(DIGEST_SHA512, "tarball", 7, &d512);
	digest_buf(DIGEST_SHA256, "tarball", 7, &d256);
	snprintf(p, sizeof(p), "%s/%s", cache, digest_hex(&d256, hex));
	assert_int_equal(mkfifo(p, 0600), 0);
	err_clear(&e);
	assert_int_equal(cache_get(cache, 1, &d256, NULL, NULL, &fd, got, sizeof(got), &e), -1);
	assert_string_equal(e.code, "cache.unsafe_entry");
	assert_non_null(strstr(e.msg, p));
	assert_non_null(strstr(e.msg, "FIFO"));
	assert_int_equal(fd, -1);
	snprintf(idx, sizeof(idx), "%s/sha512-%s", cache, digest_hex(&d512, h512));
	assert_int_equal(mkfifo(idx, 0600), 0);
	assert_int_equal(cache_get(cache, 1, &d512, NULL, NULL, NULL, got, sizeof(got), &e), -1);
	assert_non_null(strstr(e.msg, idx));
	assert_int_equal(cache_sha256_of(cache, &d512, got), 0);
	unlink(p);
	unlink(idx);
	/* another user's blob: refused in our cache, hashed in a mirror */
	put((snprintf(got, sizeof(got), "c/%s", hex), got), "tarball");
	if (geteuid() == 0) {
		assert_int_equal(chown(p, 65534, 65534), 0);
		assert_int_equal(cache_get(cache, 1, &d256, NULL, NULL, NULL, got, sizeof(got), &e), -1);
		assert_string_equal(e.code, "cache.unsafe_entry");
		assert_non_null(strstr(e.msg, "owned by uid 65534"));
		assert_int_equal(cache_get(cache, 0, &d256, NULL, NULL, &fd, got, sizeof(got), &e), 1);
		assert_true(fd >= 0);
		close(fd);
	}
	/* the key: a FIFO is refused, not waited on */
	snprintf(p, sizeof(p), "%s/state", dir);
	mkdir(p, 0700);
	assert_int_equal(mkfifo(keyf, 0600), 0);
	assert_int_equal(cache_seal_key(keyf, sk, &why), -1);
	assert_non_null(strstr(why, "not a regular file"));
	unlink(keyf);
	/* a key file we wrote reads back as its 32 bytes; one not hex is refused */
	assert_int_equal(fs_write_atomic(keyf,
	                                 "000102030405060708090a0b0c0d0e0f"
	                                 "101112131415161718191A1B1C1D1E1F\n",
	                                 65, 0600, &e),
	                 0);
	assert_int_equal(cache_seal_key(keyf, sk, &why), 0);
	for (i = 0; i < KEY_LEN; i++)
		assert_int_equal(sk[i], i);
	unlink(keyf);
	assert_int_equal(fs_write_atomic(keyf,
	                                 "00010203040506070809Xa0b0c0d0e0f"
	                                 "101112131415161718191a1b1c1d1e1f\n",
	                                 65, 0600, &e),
	                 0);
	assert_int_equal(cache_seal_key(keyf, sk, &why), -1);
	assert_non_null(strstr(why, "not hex"));
	/* the key's hex: signs and blanks that sscanf's %x took are refused */
	unlink(keyf);
	fd = open(keyf, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "+f", 2), 2);
	for (int k = 0; k < 31; k++)
		assert_int_equal(write(fd, "00", 2), 2);
	assert_int_equal(write(fd, "\n", 1), 1);
	close(fd);
	assert_int_equal(cache_seal_key(keyf, sk, &why), -1);
	assert_non_null(strstr(why, "not hex"));
	unlink(keyf);
}

static void
test_put_commit(void **state)
{
	char cache[256], out[512], hex[DIGEST_HEX_MAX], h512[DIGEST_HEX_MAX], p[512];
	struct digest want, got, sha;
	struct cache_put cp;
	struct err e = {0};

	snprintf(cache, sizeof(cache), "%s/c", dir);
	mkdir(cache, 0700);
	digest_buf(DIGEST_SHA512, "hello world", 11, &want);
	assert_int_equal(cache_put_open(&cp, cache, DIGEST_SHA512, &e), 0);
	assert_int_equal(cache_put_write(&cp, "hello ", 6, &e), 0);
	assert_int_equal(cache_put_write(&cp, "world", 5, &e), 0);
	assert_int_equal(cache_put_commit(&cp, &want, 0, &got, &sha, NULL, out, sizeof(out), &e), 1);
	assert_true(digest_equal(&want, &got));
	digest_hex(&sha, hex);
	snprintf(p, sizeof(p), "%s/%s", cache, hex);
	assert_string_equal(out, p);
	/* the alias names the blob */
	assert_int_equal(cache_sha256_of(cache, &want, p), 1);
	assert_string_equal(p, hex);
	/* a mismatch leaves nothing, not even the temporary file */
	assert_int_equal(cache_put_open(&cp, cache, DIGEST_SHA512, &e), 0);
	assert_int_equal(cache_put_write(&cp, "hello World", 11, &e), 0);
	assert_int_equal(cache_put_commit(&cp, &want, 0, &got, &sha, NULL, out, sizeof(out), &e), 0);
	assert_false(digest_equal(&want, &got));
	snprintf(p, sizeof(p), "c/sha512-%s", digest_hex(&want, h512));
	assert_true(exists(p));
	{
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "test $(ls -A %s | wc -l) -eq 2", cache);
		assert_int_equal(system(cmd), 0);
	}
}

/* ---- the hashing pipe ---------------------------------------------------- */

/* path's writeback was started once it was written: no page of it is still
 * dirty (unit.h: when that can be told). */
static void
assert_written_back(const char *path)
{
	long n = unit_dirty_pages(path);

	if (n > 0)
		fail_msg("%s: %ld pages still dirty", path, n);
}

/* n bytes of a pattern no chunk boundary lines up with */
static unsigned char *
pattern(size_t n)
{
	unsigned char *b = malloc(n);
	size_t i;

	assert_non_null(b);
	for (i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 131 + i / 7);
	return b;
}

/* Write n bytes through a pipe in pieces of step bytes (the last shorter);
 * the file and both digests must be those of the bytes. */
static void
pipe_roundtrip2(size_t n, size_t step, int two)
{
	char p[512];
	unsigned char *b = pattern(n), *back = malloc(n + 1);
	struct digest a, s, wa, ws;
	struct cache_pipe *cp;
	size_t off;
	int fd;

	assert_non_null(back);
	snprintf(p, sizeof(p), "%s/pipe.bin", dir);
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	cp = cache_pipe_new(fd, two ? DIGEST_SHA512 : DIGEST_SHA256, two ? DIGEST_SHA256 : DIGEST_NONE);
	assert_non_null(cp);
	for (off = 0; off < n; off += step)
		assert_int_equal(cache_pipe_write(cp, b + off, n - off < step ? n - off : step), 0);
	assert_int_equal(cache_pipe_finish(cp, &a, two ? &s : NULL), 0);
	digest_buf(two ? DIGEST_SHA512 : DIGEST_SHA256, b, n, &wa);
	digest_buf(DIGEST_SHA256, b, n, &ws);
	assert_true(digest_equal(&a, &wa));
	if (two)
		assert_true(digest_equal(&s, &ws));
	assert_int_equal(pread(fd, back, n + 1, 0), (ssize_t)n);
	assert_memory_equal(back, b, n);
	assert_written_back(p); /* the tail too, not only each 8 MiB */
	close(fd);
	free(b);
	free(back);
}

static void
pipe_roundtrip(size_t n, size_t step)
{
	pipe_roundtrip2(n, step, 1);
}

static void
test_pipe_small(void **state)
{
	pipe_roundtrip(0, 1);
	pipe_roundtrip(11, 5);
	pipe_roundtrip(100000, 16384); /* under one chunk: no thread */
}

static void
test_pipe_large(void **state)
{
	/* many times the ring, in TLS-record and odd-sized pieces, and in
	 * pieces larger than a chunk */
	pipe_roundtrip(5u << 20, 16384);
	pipe_roundtrip((3u << 20) + 7, 1000);
	pipe_roundtrip((2u << 20) + 1, 300000);
	pipe_roundtrip(256u << 10, 256u << 10); /* exactly one chunk */
	/* one digest: its thread and the writer's */
	pipe_roundtrip2((3u << 20) + 7, 16384, 0);
}

/* A write the worker fails is reported (by a later write or by finish),
 * with its errno, and the pipe still stops cleanly. */
static void
test_pipe_write_error(void **state)
{
	char p[512];
	unsigned char *b = pattern(1u << 20);
	struct cache_pipe *cp;
	struct digest a;
	int fd, failed = 0, i;

	snprintf(p, sizeof(p), "%s/ro.bin", dir);
	put("ro.bin", "");
	fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	cp = cache_pipe_new(fd, DIGEST_SHA256, DIGEST_NONE);
	assert_non_null(cp);
	for (i = 0; i < 8 && !failed; i++)
		failed = cache_pipe_write(cp, b, 1u << 20) < 0;
	if (failed)
		assert_int_equal(errno, EBADF);
	errno = 0;
	assert_int_equal(cache_pipe_finish(cp, &a, NULL), -1);
	assert_int_equal(errno, EBADF);
	/* small (no thread): finish reports it */
	cp = cache_pipe_new(fd, DIGEST_SHA256, DIGEST_NONE);
	assert_int_equal(cache_pipe_write(cp, b, 10), 0);
	assert_int_equal(cache_pipe_finish(cp, &a, NULL), -1);
	assert_int_equal(errno, EBADF);
	/* abandoned mid-way */
	cp = cache_pipe_new(fd, DIGEST_SHA256, DIGEST_NONE);
	(void)cache_pipe_write(cp, b, 1u << 20);
	cache_pipe_free(cp);
	close(fd);
	free(b);
}

/* A follower (extraction while downloading): what it reads, on its own
 * thread, until the end or until it has stop bytes (then it lets go). */
struct fol {
	struct cache_pipe *cp;
	unsigned char *got;
	size_t n, stop;
	int rc, err;
};

static void *
fol_main(void *arg)
{
	struct fol *f = arg;
	const void *p;
	ssize_t r = 0;

	while (f->n < f->stop && (r = cache_pipe_next(f->cp, &p)) > 0) {
		memcpy(f->got + f->n, p, (size_t)r);
		f->n += (size_t)r;
	}
	f->rc = f->n < f->stop ? (int)r : 1;
	f->err = errno;
	cache_pipe_unfollow(f->cp);
	return NULL;
}

/* n bytes in pieces of step through a followed pipe: the follower reads
 * exactly them (or stops after stop), the digests and the file are the
 * bytes'; the writer is never held by a follower that let go. */
static void
follow_roundtrip(size_t n, size_t step, size_t stop)
{
	char p[512];
	unsigned char *b = pattern(n);
	struct fol f = {NULL, malloc(n + 1), 0, stop, 0, 0};
	struct digest a, s, wa, ws;
	pthread_t th;
	size_t off;
	int fd;

	snprintf(p, sizeof(p), "%s/follow.bin", dir);
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	f.cp = cache_pipe_new(fd, DIGEST_SHA512, DIGEST_SHA256);
	assert_int_equal(cache_pipe_follow(f.cp), 0);
	assert_int_equal(cache_pipe_follow(f.cp), -1); /* one follower */
	assert_int_equal(pthread_create(&th, NULL, fol_main, &f), 0);
	for (off = 0; off < n; off += step)
		assert_int_equal(cache_pipe_write(f.cp, b + off, n - off < step ? n - off : step), 0);
	assert_int_equal(cache_pipe_finish(f.cp, &a, &s), 0);
	pthread_join(th, NULL);
	digest_buf(DIGEST_SHA512, b, n, &wa);
	digest_buf(DIGEST_SHA256, b, n, &ws);
	assert_true(digest_equal(&a, &wa));
	assert_true(digest_equal(&s, &ws));
	if (stop >= n) {
		assert_int_equal(f.rc, 0); /* the end, after every byte */
		assert_int_equal(f.n, n);
	} else {
		assert_true(f.n >= stop);
	}
	assert_memory_equal(f.got, b, f.n < n ? f.n : n);
	close(fd);
	free(b);
	free(f.got);
}

static void
test_pipe_follow(void **state)
{
	follow_roundtrip(0, 1, SIZE_MAX);
	follow_roundtrip(11, 5, SIZE_MAX);
	follow_roundtrip(100000, 16384, SIZE_MAX); /* under one chunk: handed over by finish */
	follow_roundtrip(5u << 20, 16384, SIZE_MAX);
	follow_roundtrip((3u << 20) + 7, 300000, SIZE_MAX);
	follow_roundtrip(128u << 10, 128u << 10, SIZE_MAX);
	/* a follower that stops early (an archive's end before the file's,
	 * an extraction error): the rest goes on without it */
	follow_roundtrip(8u << 20, 16384, 300000);
}

/* A put without a directory hashes and hands its bytes to the follower,
 * writes no file, and names no blob: a match answers 1 with out "" and no
 * descriptor, a mismatch 0. */
static void
test_put_unwritten(void **state)
{
	size_t n = (3u << 20) + 11;
	unsigned char *b = pattern(n);
	char cache[256], out[512] = "x", cmd[600];
	struct digest want, got, sha;
	struct cache_put cp;
	struct fol f;
	struct err e = {0};
	pthread_t th;
	int fd = 7, pass;

	snprintf(cache, sizeof(cache), "%s/unwritten", dir);
	mkdir(cache, 0700);
	digest_buf(DIGEST_SHA256, b, n, &want);
	for (pass = 0; pass < 2; pass++) {
		f = (struct fol){NULL, malloc(n + 1), 0, SIZE_MAX, 0, 0};
		assert_int_equal(cache_put_open(&cp, NULL, DIGEST_SHA256, &e), 0);
		assert_int_equal(cp.fd, -1);
		f.cp = cp.pipe;
		assert_int_equal(cache_pipe_follow(f.cp), 0);
		assert_int_equal(pthread_create(&th, NULL, fol_main, &f), 0);
		if (pass == 1)
			b[n / 2] ^= 1;
		assert_int_equal(cache_put_write(&cp, b, n, &e), 0);
		assert_int_equal(cache_put_commit(&cp, &want, 1, &got, &sha, &fd, out, sizeof(out), &e),
		                 !pass);
		pthread_join(th, NULL);
		assert_int_equal(f.rc, 0);
		assert_int_equal(f.n, n);
		assert_memory_equal(f.got, b, n);
		assert_int_equal(fd, -1);
		assert_int_equal(digest_equal(&got, &want), !pass);
		if (!pass)
			assert_string_equal(out, "");
		free(f.got);
	}
	snprintf(cmd, sizeof(cmd), "test $(ls -A %s | wc -l) -eq 0", cache);
	assert_int_equal(system(cmd), 0);
	free(b);
}

/* An abandoned download ends its follower's reads with ECANCELED; a pipe
 * written to takes no follower. */
static void
test_pipe_follow_abandon(void **state)
{
	char p[512];
	unsigned char *b = pattern(1u << 20);
	struct fol f = {NULL, malloc(1u << 20), 0, SIZE_MAX, 0, 0};
	pthread_t th;
	int fd;

	snprintf(p, sizeof(p), "%s/abandon.bin", dir);
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	f.cp = cache_pipe_new(fd, DIGEST_SHA256, DIGEST_NONE);
	assert_int_equal(cache_pipe_follow(f.cp), 0);
	assert_int_equal(pthread_create(&th, NULL, fol_main, &f), 0);
	assert_int_equal(cache_pipe_write(f.cp, b, 1u << 20), 0);
	cache_pipe_free(f.cp);
	pthread_join(th, NULL);
	assert_int_equal(f.rc, -1);
	assert_int_equal(f.err, ECANCELED);
	f.cp = cache_pipe_new(fd, DIGEST_SHA256, DIGEST_NONE);
	assert_int_equal(cache_pipe_write(f.cp, b, 10), 0);
	assert_int_equal(cache_pipe_follow(f.cp), -1);
	cache_pipe_free(f.cp);
	close(fd);
	free(b);
	free(f.got);
}

/* ---- extracted trees ---------------------------------------------------- */

struct tap {
	int n;
	char first[64];
	const char *touch; /* a path to touch once told of the first file */
};

static void
tap(void *arg, const char *name, const struct stat *st, const unsigned char sha[32])
{
	struct tap *t = arg;

	if (t->n++ == 0)
		snprintf(t->first, sizeof(t->first), "%s", name);
	if (t->touch != NULL)
		assert_int_equal(utimensat(AT_FDCWD, t->touch, NULL, 0), 0);
}

/* What the last place or place_heard did. */
static struct cache_placed placed;

static char key[CACHE_KEY_MAX];

static void make_entry_with(char *cache, size_t cap, struct cache_sums *sums, const char *after);
static const char *sum_a_text;

/* A source tree with a file, a nested executable, a link and an empty
 * directory, kept as an entry; returns the cache path. */
static void
make_entry(char *cache, size_t cap)
{
	make_entry_with(cache, cap, NULL, NULL);
}

/* Record in sums what an extractor would have for src/rel (its stat now),
 * with the digest of text (the file's own content, or a lie). */
static void
sum_of(struct cache_sums *sums, const char *rel, const char *text)
{
	char p[512];
	struct digest d;
	struct stat st;

	snprintf(p, sizeof(p), "%s/src/%s", dir, rel);
	assert_int_equal(stat(p, &st), 0);
	digest_buf(DIGEST_SHA256, text, strlen(text), &d);
	cache_sums_add(sums, rel, &st, d.v);
}

/* The same tree, kept with digests from "extraction": a.txt's recorded as
 * that of a_text, bin/tool's true; then the shell command after (in src),
 * then kept. */
static void
make_entry_sums(char *cache, size_t cap, const char *a_text, const char *after)
{
	struct cache_sums sums = {0};

	sum_a_text = a_text;
	make_entry_with(cache, cap, &sums, after);
	cache_sums_free(&sums);
}

static void
make_entry_with(char *cache, size_t cap, struct cache_sums *sums, const char *after)
{
	char src[256];
	struct digest d;
	int fd;

	snprintf(cache, cap, "%s/c", dir);
	mkdir(cache, 0700);
	snprintf(src, sizeof(src), "%s/src", dir);
	mkdir(src, 0755);
	put("src/a.txt", "alpha\n");
	mkdir((snprintf(src, sizeof(src), "%s/src/bin", dir), src), 0755);
	put("src/bin/tool", "#!/bin/sh\necho hi\n");
	snprintf(src, sizeof(src), "%s/src/bin/tool", dir);
	chmod(src, 0755);
	snprintf(src, sizeof(src), "%s/src/link", dir);
	assert_int_equal(symlink("bin/tool", src), 0);
	mkdir((snprintf(src, sizeof(src), "%s/src/empty", dir), src), 0750);
	digest_buf(DIGEST_SHA256, "artifact", 8, &d);
	assert_int_equal(cache_tree_key(&d, "t1", key), 0);
	if (sums != NULL) {
		sum_of(sums, "a.txt", sum_a_text);
		sum_of(sums, "bin/tool", "#!/bin/sh\necho hi\n");
	}
	if (after != NULL) {
		char c[600];
		snprintf(c, sizeof(c), "cd %s/src && %s", dir, after);
		assert_int_equal(system(c), 0);
	}
	snprintf(src, sizeof(src), "%s/src", dir);
	fd = open(src, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(
	    cache_tree_store(cache, keyf, key, fd, "size=8", "test", sums ? cache_sums_get : NULL, sums), 1);
	close(fd);
}

/* Place the entry as <dir>/dst/tree: the result of cache_tree_place. */
static int
place(const char *cache, struct tap *t, char *meta, size_t mcap)
{
	char dst[256];
	struct err e = {0};
	int fd, rc;

	snprintf(dst, sizeof(dst), "%s/dst", dir);
	mkdir(dst, 0700);
	fd = open(dst, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	memset(&placed, 0, sizeof(placed));
	rc = cache_tree_place(cache, keyf, key, fd, "tree", "test", tap, t, meta, mcap, &placed, &e);
	close(fd);
	return rc;
}

static void
test_tree_place(void **state)
{
	char cache[256], meta[64], p[512], buf[64];
	struct tap t = {0};
	struct stat st;
	ssize_t n;

	make_entry(cache, sizeof(cache));
	assert_int_equal(cache_tree_has(cache, key), 1);
	snprintf(p, sizeof(p), "trees/%s/manifest", key);
	snprintf(p, sizeof(p), "c/trees/%s/manifest", key);
	assert_true(exists(p));
	assert_int_equal(place(cache, &t, meta, sizeof(meta)), 1);
	assert_string_equal(meta, "size=8");
	assert_int_equal(t.n, 2); /* a.txt and bin/tool */
	/* untouched since it was kept: its proof holds, no file hashed */
	assert_int_equal(placed.proved, 1);
	assert_int_equal(placed.files, 2);
	assert_string_equal(t.first, "a.txt");
	snprintf(p, sizeof(p), "%s/dst/tree/bin/tool", dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	snprintf(p, sizeof(p), "%s/dst/tree/link", dir);
	n = readlink(p, buf, sizeof(buf) - 1);
	assert_int_equal(n, 8);
	assert_memory_equal(buf, "bin/tool", 8);
	snprintf(p, sizeof(p), "%s/dst/tree/empty", dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0750);
	/* each copy's writeback started (the kept tree's and the placed one) */
	assert_written_back((snprintf(p, sizeof(p), "%s/dst/tree/a.txt", dir), p));
	assert_written_back((snprintf(p, sizeof(p), "%s/dst/tree/bin/tool", dir), p));
	assert_written_back((snprintf(p, sizeof(p), "%s/trees/%s/tree/a.txt", cache, key), p));
	/* nothing else under the parent: the work directory took its name */
	assert_int_equal(system((snprintf(p, sizeof(p), "test \"$(ls -A %s/dst)\" = tree", dir), p)), 0);
	/* the entry stays for the next one */
	assert_int_equal(cache_tree_has(cache, key), 1);
}

/* Damage the entry with cmd (run in its directory), then place: a miss,
 * the entry gone, nothing left under dst. */
static void
damaged(const char *cmd)
{
	char cache[256], c[1024];
	struct tap t = {0};

	make_entry(cache, sizeof(cache));
	snprintf(c, sizeof(c), "cd %s/trees/%s && %s", cache, key, cmd);
	assert_int_equal(system(c), 0);
	assert_int_equal(place(cache, &t, NULL, 0), 0);
	assert_int_equal(cache_tree_has(cache, key), 0);
	snprintf(c, sizeof(c), "test -z \"$(ls -A %s/dst)\"", dir);
	assert_int_equal(system(c), 0);
	/* and it can be kept again */
	snprintf(c, sizeof(c), "rm -rf %s/src %s/dst", dir, dir);
	assert_int_equal(system(c), 0);
	make_entry(cache, sizeof(cache));
	assert_int_equal(place(cache, &t, NULL, 0), 1);
}

/* Run fn(cache) with stderr in a file; what was written, NUL-ended, into
 * out. */
static void
with_stderr(void (*fn)(char *), char *cache, char *out, size_t cap)
{
	char errf[300];
	ssize_t n;
	int fd, saved;

	snprintf(errf, sizeof(errf), "%s/stderr", dir);
	fd = open(errf, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	fn(cache);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, out, cap - 1, 0);
	close(fd);
	out[n > 0 ? n : 0] = '\0';
}

/* levels nested directories "d" under dir/rel (made). */
static void
nest(const char *rel, int levels)
{
	char p[512];
	int fd, nfd, i;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	fd = open(p, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	for (i = 0; i < levels; i++) {
		assert_int_equal(mkdirat(fd, "d", 0755), 0);
		nfd = openat(fd, "d", O_RDONLY | O_DIRECTORY);
		close(fd);
		fd = nfd;
		assert_true(fd >= 0);
	}
	close(fd);
}

static void
store_deep(char *cache)
{
	char src[256];
	struct digest d;
	int fd;

	snprintf(src, sizeof(src), "%s/src", dir);
	fd = open(src, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	digest_buf(DIGEST_SHA256, "artifact", 8, &d);
	assert_int_equal(cache_tree_key(&d, "t1", key), 0);
	assert_int_equal(cache_tree_store(cache, keyf, key, fd, "size=8", "test", NULL, NULL), 0);
	close(fd);
}

static void
place_missed(char *cache)
{
	struct tap t = {0};

	assert_int_equal(place(cache, &t, NULL, 0), 0);
}

/* The tree cache walks with fs_walk's limits: a tree deeper than
 * FS_MAX_DEPTH is not kept (the extractor never makes one), and one made
 * that deep inside a kept entry is refused by the placement's walk
 * (the walk's cache.unsafe_entry, said), the entry discarded; before, both walks went as
 * deep as the tree did, two 4 KiB paths on the stack per level. */
static void
test_tree_too_deep(void **state)
{
	char cache[256], said[4096], c[700];

	snprintf(cache, sizeof(cache), "%s/c", dir);
	mkdir(cache, 0700);
	mkdir((snprintf(c, sizeof(c), "%s/src", dir), c), 0755);
	put("src/a.txt", "alpha\n");
	nest("src", FS_MAX_DEPTH + 2);
	with_stderr(store_deep, cache, said, sizeof(said));
	if (strstr(said, "not keeping") == NULL || strstr(said, "tree deeper than 128 levels") == NULL)
		fail_msg("%s", said);
	assert_int_equal(cache_tree_has(cache, key), 0);
	/* made too deep after it was kept */
	snprintf(c, sizeof(c), "rm -rf %s/src", dir);
	assert_int_equal(system(c), 0);
	make_entry(cache, sizeof(cache));
	snprintf(c, sizeof(c), "c/trees/%s/tree/empty", key);
	assert_int_equal(chmod((snprintf(said, sizeof(said), "%s/%s", dir, c), said), 0755), 0);
	nest(c, FS_MAX_DEPTH + 2);
	with_stderr(place_missed, cache, said, sizeof(said));
	if (strstr(said, "is damaged") == NULL || strstr(said, "tree deeper than 128 levels") == NULL)
		fail_msg("%s", said);
	assert_int_equal(cache_tree_has(cache, key), 0);
}

static void
test_tree_file_changed(void **state)
{
	damaged("printf 'alphA\\n' >tree/a.txt");
}

static void
test_tree_file_missing(void **state)
{
	damaged("rm tree/bin/tool");
}

static void
test_tree_extra_file(void **state)
{
	damaged("echo x >tree/bin/extra");
}

static void
test_tree_mode_changed(void **state)
{
	damaged("chmod 0777 tree/bin/tool");
}

static void
test_tree_link_changed(void **state)
{
	damaged("rm tree/link && ln -s /etc/passwd tree/link");
}

static void
test_tree_manifest_tampered(void **state)
{
	/* the listing edited to agree with a changed file: the seal breaks */
	damaged("printf 'alphA\\n' >tree/a.txt && h=$(sha256sum <tree/a.txt | cut -c1-64) && "
	        "sed -i \"s/^f 0644 6 [0-9a-f]* a.txt$/f 0644 6 $h a.txt/\" manifest");
}

static void
test_tree_partial_entry(void **state)
{
	/* a kill before the manifest was written (an entry never gets its name
	 * so; a copy made by hand could) */
	damaged("rm manifest");
}

static void
test_tree_other_key(void **state)
{
	char c[600];

	/* an entry sealed with another machine's key (the cache copied or
	 * restored there) is not trusted */
	snprintf(
	    c, sizeof(c),
	    "rm %s && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' >%s && echo >>%s && chmod 600 %s",
	    keyf, keyf, keyf, keyf);
	damaged(c);
}

/* A key kept inside the cache (as an earlier version did) is never read: a
 * manifest forged and sealed with it is refused, and keeping a tree removes
 * it. */
static void
test_tree_in_cache_key_ignored(void **state)
{
	char cache[256], c[1400];
	struct tap t = {0};

	make_entry(cache, sizeof(cache));
	snprintf(
	    c, sizeof(c),
	    "cd %s/trees && printf '%%064d\\n' 0 >.key && chmod 600 .key && cd %s && "
	    "printf forged >tree/a.txt && sed -i '$d' manifest && "
	    "sed -i \"s/^f \\([0-7]*\\) [0-9]* [0-9a-f]* a.txt$/f \\1 6 $(printf forged | sha256sum | cut "
	    "-c1-64) a.txt/\" manifest && "
	    "printf 'mac %%s\\n' $(openssl dgst -sha256 -mac HMAC -macopt hexkey:$(printf '%%064d' 0) "
	    "<manifest "
	    "| sed 's/.* //') >>manifest",
	    cache, (snprintf(c + 1000, 300, "%s/trees/%s", cache, key), c + 1000));
	assert_int_equal(system(c), 0);
	/* the forgery is sound under the in-cache key (what an earlier
	 * version read): placed with it, the forged bytes would install */
	snprintf(c, sizeof(c), "cp -a %s %s.copy", cache, cache);
	assert_int_equal(system(c), 0);
	snprintf(c, sizeof(c), "%s", keyf);
	snprintf(keyf, sizeof(keyf), "%s.copy/trees/.key", cache);
	assert_int_equal(place((snprintf(c + 300, 300, "%s.copy", cache), c + 300), &t, NULL, 0), 1);
	snprintf(keyf, sizeof(keyf), "%s", c);
	snprintf(c, sizeof(c), "grep -qx forged %s/dst/tree/a.txt && rm -rf %s/dst", dir, dir);
	assert_int_equal(system(c), 0);
	assert_int_equal(place(cache, &t, NULL, 0), 0);
	assert_int_equal(cache_tree_has(cache, key), 0);
	snprintf(c, sizeof(c), "test -z \"$(ls -A %s/dst)\"", dir);
	assert_int_equal(system(c), 0);
}

/* Keeping a tree takes each file's digest from extraction instead of
 * hashing the copy again: a digest the extractor got wrong is what the
 * listing records (so it was not recomputed), and placement, which hashes
 * every copy when the entry's proof does not hold (here: none), refuses
 * the entry. */
static void
test_tree_store_uses_sums(void **state)
{
	char cache[256], c[1024];
	struct tap t = {0};

	make_entry_sums(cache, sizeof(cache), "alpha\n", NULL);
	assert_int_equal(place(cache, &t, NULL, 0), 1);
	assert_int_equal(t.n, 2);
	snprintf(c, sizeof(c), "rm -rf %s/src %s/dst %s", dir, dir, cache);
	assert_int_equal(system(c), 0);
	make_entry_sums(cache, sizeof(cache), "not alpha\n", NULL);
	snprintf(c, sizeof(c),
	         "grep -q \"^f 0644 6 $(printf 'not alpha\\n' | sha256sum | cut -c1-64) a.txt$\" "
	         "%s/trees/%s/manifest",
	         cache, key);
	assert_int_equal(system(c), 0);
	snprintf(c, sizeof(c), "rm %s/trees/%s/proof", cache, key);
	assert_int_equal(system(c), 0);
	assert_int_equal(place(cache, &t, NULL, 0), 0);
	assert_int_equal(cache_tree_has(cache, key), 0);
}

/* A file changed after extraction hashed it (its ctime moved) is hashed
 * again as it is kept: the recorded digest no longer describes it. */
static void
test_tree_store_changed_since(void **state)
{
	char cache[256], c[1024];
	struct tap t = {0};

	make_entry_sums(cache, sizeof(cache), "alpha\n", "sleep 0.02; printf 'alphA\\n' >a.txt");
	snprintf(
	    c, sizeof(c),
	    "grep -q \"^f 0644 6 $(printf 'alphA\\n' | sha256sum | cut -c1-64) a.txt$\" %s/trees/%s/manifest",
	    cache, key);
	assert_int_equal(system(c), 0);
	assert_int_equal(place(cache, &t, NULL, 0), 1);
}

/* A file large enough to be copied through the hashing pipe: placed whole
 * and byte for byte, and one byte changed in the middle of the cache's copy
 * is found. */
static void
test_tree_large_file(void **state)
{
	char cache[256], p[512], c[1024];
	size_t n = (9u << 20) + 3;
	unsigned char *b = pattern(n), *back = malloc(n);
	struct tap t = {0};
	struct digest d;
	FILE *f;
	int fd;

	assert_non_null(back);
	snprintf(cache, sizeof(cache), "%s/c", dir);
	mkdir(cache, 0700);
	snprintf(p, sizeof(p), "%s/src", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/src/big.bin", dir);
	f = fopen(p, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, n, f), n);
	fclose(f);
	digest_buf(DIGEST_SHA256, "large", 5, &d);
	assert_int_equal(cache_tree_key(&d, "t1", key), 0);
	snprintf(p, sizeof(p), "%s/src", dir);
	fd = open(p, O_RDONLY | O_DIRECTORY);
	assert_int_equal(cache_tree_store(cache, keyf, key, fd, "size=5", "test", NULL, NULL), 1);
	close(fd);
	assert_int_equal(place(cache, &t, NULL, 0), 1);
	snprintf(p, sizeof(p), "%s/dst/tree/big.bin", dir);
	f = fopen(p, "r");
	assert_non_null(f);
	assert_int_equal(fread(back, 1, n, f), n);
	fclose(f);
	assert_memory_equal(back, b, n);
	/* damaged in the middle, size and mode unchanged */
	snprintf(c, sizeof(c),
	         "rm -rf %s/dst && printf X | dd of=%s/trees/%s/tree/big.bin bs=1 seek=5000000 "
	         "conv=notrunc 2>/dev/null",
	         dir, cache, key);
	assert_int_equal(system(c), 0);
	assert_int_equal(place(cache, &t, NULL, 0), 0);
	assert_int_equal(cache_tree_has(cache, key), 0);
	free(b);
	free(back);
}

static void
test_tree_renamed_entry(void **state)
{
	char cache[256], c[1024], other[CACHE_KEY_MAX];
	struct digest d;
	struct tap t = {0};

	/* an entry moved under another artifact's key: its header names the
	 * first artifact */
	make_entry(cache, sizeof(cache));
	digest_buf(DIGEST_SHA256, "other", 5, &d);
	assert_int_equal(cache_tree_key(&d, "t1", other), 0);
	snprintf(c, sizeof(c), "mv %s/trees/%s %s/trees/%s", cache, key, cache, other);
	assert_int_equal(system(c), 0);
	snprintf(key, sizeof(key), "%s", other);
	assert_int_equal(place(cache, &t, NULL, 0), 0);
	assert_int_equal(cache_tree_has(cache, key), 0);
}

/* The copies an extraction wrote (cache_sums_copies): a file whose stat
 * still matches its record takes its copy by a rename (same inode, the
 * copy gone from the copies directory); a file changed since, or whose copy
 * has the wrong size, is copied from the tree as before; the directory and
 * what is left in it go with cache_sums_free; the entry places. */
static void
test_tree_store_takes_copies(void **state)
{
	char cache[256], src[256], p[512], c[1024];
	struct cache_sums sums = {0};
	struct digest d;
	struct stat st, copy0;
	struct tap t = {0};
	int fd, cfd;

	snprintf(cache, sizeof(cache), "%s/c", dir);
	mkdir(cache, 0700);
	snprintf(src, sizeof(src), "%s/src", dir);
	mkdir(src, 0755);
	mkdir((snprintf(p, sizeof(p), "%s/src/bin", dir), p), 0755);
	put("src/a.txt", "alpha\n");
	put("src/b.txt", "beta\n");
	put("src/bin/tool", "#!/bin/sh\necho hi\n");
	cfd = cache_sums_copies(&sums, cache);
	assert_true(cfd >= 0);
	assert_non_null(sums.copies);
	/* the copies as the extractor writes them: a.txt whole, b.txt short,
	 * bin/tool whole but the file changes after it was hashed */
	snprintf(c, sizeof(c),
	         "cd %s && printf 'alpha\\n' >0 && printf 'bet' >1 && printf '#!/bin/sh\\necho hi\\n' >2",
	         sums.copies);
	assert_int_equal(system(c), 0);
	assert_int_equal(fstatat(cfd, "0", &copy0, 0), 0);
	snprintf(p, sizeof(p), "%s/src/a.txt", dir);
	assert_int_equal(stat(p, &st), 0);
	digest_buf(DIGEST_SHA256, "alpha\n", 6, &d);
	cache_sums_add_copy(&sums, "a.txt", &st, d.v, "0");
	snprintf(p, sizeof(p), "%s/src/b.txt", dir);
	assert_int_equal(stat(p, &st), 0);
	digest_buf(DIGEST_SHA256, "beta\n", 5, &d);
	cache_sums_add_copy(&sums, "b.txt", &st, d.v, "1");
	snprintf(p, sizeof(p), "%s/src/bin/tool", dir);
	unit_clock_past_ctime(p);
	assert_int_equal(stat(p, &st), 0);
	digest_buf(DIGEST_SHA256, "#!/bin/sh\necho hi\n", 18, &d);
	cache_sums_add_copy(&sums, "bin/tool", &st, d.v, "2");
	assert_int_equal(chmod(p, 0755), 0);
	digest_buf(DIGEST_SHA256, "artifact", 8, &d);
	assert_int_equal(cache_tree_key(&d, "t1", key), 0);
	fd = open(src, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(cache_tree_store(cache, keyf, key, fd, "size=8", "test", cache_sums_get, &sums), 1);
	close(fd);
	snprintf(p, sizeof(p), "%s/trees/%s/tree/a.txt", cache, key);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_ino, copy0.st_ino);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(fstatat(cfd, "0", &st, 0), -1);
	assert_int_equal(fstatat(cfd, "1", &st, 0), 0); /* not taken */
	assert_int_equal(fstatat(cfd, "2", &st, 0), 0);
	snprintf(p, sizeof(p), "%s/trees/%s/tree/bin/tool", cache, key);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	snprintf(p, sizeof(p), "%s", sums.copies);
	cache_sums_free(&sums);
	assert_int_equal(stat(p, &st), -1);
	assert_int_equal(place(cache, &t, NULL, 0), 1);
	assert_int_equal(t.n, 3);
	snprintf(c, sizeof(c), "cmp %s/dst/tree/b.txt %s/src/b.txt", dir, dir);
	assert_int_equal(system(c), 0);
}

/* ---- placement on two threads ------------------------------------------- */

/* What fn heard, in order. */
struct heard {
	size_t n;
	char rel[512][48];
	unsigned char sha[512][32];
	off_t size[512];
};

static void
hear(void *arg, const char *name, const struct stat *st, const unsigned char sha[32])
{
	struct heard *h = arg;

	assert_true(h->n < 512);
	snprintf(h->rel[h->n], sizeof(h->rel[0]), "%s", name);
	memcpy(h->sha[h->n], sha, 32);
	h->size[h->n] = st->st_size;
	h->n++;
}

/* A tree of 40 directories of 8 files, a link and a subdirectory each,
 * one read-only, with a large file (the hashing pipe) and a 2 MiB one in
 * the middle, kept as an entry; returns the cache path. */
static void
make_many(char *cache, size_t cap)
{
	char c[1024];
	struct digest d;
	int fd;

	snprintf(cache, cap, "%s/c", dir);
	mkdir(cache, 0700);
	snprintf(c, sizeof(c),
	         "mkdir %s/src && cd %s/src && for d in $(seq 10 49); do mkdir -p d$d/sub; for f in 1 2 3 4 "
	         "5 6 7 8; do "
	         "echo \"file $d $f\" >d$d/f$f; done; echo x >d$d/sub/x; ln -s f1 d$d/l; done && "
	         "head -c 5000000 /dev/zero | tr '\\0' y >d20/big && head -c 2100000 /dev/zero | tr '\\0' z "
	         ">d15/mid "
	         "&& chmod 0755 d11/f3 && chmod 0555 d25",
	         dir, dir);
	assert_int_equal(system(c), 0);
	digest_buf(DIGEST_SHA256, "many", 4, &d);
	assert_int_equal(cache_tree_key(&d, "t1", key), 0);
	snprintf(c, sizeof(c), "%s/src", dir);
	fd = open(c, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(cache_tree_store(cache, keyf, key, fd, "size=9", "test", NULL, NULL), 1);
	close(fd);
}

static int
place_heard(const char *cache, struct heard *h, struct err *e)
{
	char dst[256];
	int fd, rc;

	snprintf(dst, sizeof(dst), "%s/dst", dir);
	mkdir(dst, 0700);
	fd = open(dst, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	memset(&placed, 0, sizeof(placed));
	rc = cache_tree_place(cache, keyf, key, fd, "tree", "test", hear, h, NULL, 0, &placed, e);
	close(fd);
	return rc;
}

/* Many files over two threads: placed whole (the listing made equals the
 * one the one-threaded store sealed, byte for byte, or it would not
 * place), fn heard once per file in the listing's order with the digest
 * of the bytes placed, modes kept, no descriptor left open. */
static void
many(int proof)
{
	char cache[256], p[512], hex[65], rel[256];
	static struct heard h;
	unsigned mode;
	long long size;
	size_t i = 0;
	struct digest d;
	struct stat st;
	struct err e = {0};
	FILE *f;
	int fds;

	make_many(cache, sizeof(cache));
	if (!proof)
		assert_int_equal(system((snprintf(p, sizeof(p), "rm %s/trees/%s/proof", cache, key), p)), 0);
	fds = unit_open_fds();
	memset(&h, 0, sizeof(h));
	assert_int_equal(place_heard(cache, &h, &e), 1);
	assert_int_equal(placed.proved, proof);
	assert_int_equal(unit_open_fds(), fds);
	assert_int_equal(h.n, 40 * 9 + 2);
	/* the sealed listing's files, in order, are what fn heard */
	snprintf(p, sizeof(p), "%s/trees/%s/manifest", cache, key);
	f = fopen(p, "r");
	assert_non_null(f);
	while (fgets(p, sizeof(p), f) != NULL) {
		if (p[0] != 'f')
			continue;
		assert_int_equal(sscanf(p, "f %o %lld %64s %255s", &mode, &size, hex, rel), 4);
		assert_true(i < h.n);
		assert_string_equal(h.rel[i], rel);
		assert_int_equal(h.size[i], size);
		memcpy(d.v, h.sha[i], 32);
		d.alg = DIGEST_SHA256;
		d.len = 32;
		assert_string_equal(digest_hex(&d, p), hex);
		i++;
	}
	fclose(f);
	assert_int_equal(i, h.n);
	/* and the digest fn heard is of the bytes placed */
	for (i = 0; i < h.n; i++) {
		unsigned char *b;
		size_t len;
		snprintf(p, sizeof(p), "%s/dst/tree/%s", dir, h.rel[i]);
		assert_int_equal(fs_read_alloc(p, 8u << 20, (char **)&b, &len, &e), 0);
		digest_buf(DIGEST_SHA256, b, len, &d);
		assert_memory_equal(d.v, h.sha[i], 32);
		free(b);
	}
	snprintf(p, sizeof(p), "%s/dst/tree/d25", dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0555);
	snprintf(p, sizeof(p), "%s/dst/tree/d11/f3", dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	assert_int_equal(system((snprintf(p, sizeof(p), "test \"$(ls -A %s/dst)\" = tree", dir), p)), 0);
}

/* The entry untouched since it was kept: its proof holds, the files are
 * copied by the kernel and fn hears the sealed digests, which are those of
 * the bytes placed. */
static void
test_tree_place_many(void **state)
{
	many(1);
}

/* The same with no proof (an entry an older version kept): every copy
 * hashed, the same result. */
static void
test_tree_place_many_hashed(void **state)
{
	many(0);
}

/* The kept entry at <cache>/trees/<key>/rel, into path. */
static const char *
entry_path(const char *cache, const char *rel, char *path, size_t cap)
{
	snprintf(path, cap, "%s/trees/%s/%s", cache, key, rel);
	return path;
}

/* Place into a fresh <dir>/dst once the clock has ticked past every change
 * made so far (a proof is made only of a tree that has not changed within
 * the clock's last tick): the result of place. */
static int
place_later(const char *cache, struct tap *t)
{
	char c[600];

	usleep(20000);
	assert_int_equal(system((snprintf(c, sizeof(c), "rm -rf %s/dst", dir), c)), 0);
	return place(cache, t, NULL, 0);
}

/* A file of the kept tree touched (its ctime moves, its content does
 * not): the proof no longer holds, the tree is hashed as it is copied and
 * still places, and the entry is sealed with a new proof that the next
 * placement finds holding; so for a proof list edited (its sha256 no
 * longer the one the sealed header names). */
static void
test_tree_proof_touched(void **state)
{
	char cache[256], p[600];
	struct tap t = {0};
	char *pl;
	size_t len;
	struct err e = {0};

	make_entry(cache, sizeof(cache));
	assert_int_equal(utimensat(AT_FDCWD, entry_path(cache, "tree/a.txt", p, sizeof(p)), NULL, 0), 0);
	assert_int_equal(place_later(cache, &t), 1);
	assert_int_equal(placed.proved, 0);
	assert_int_equal(placed.resealed, 1);
	assert_int_equal(placed.files, 2);
	assert_int_equal(cache_tree_has(cache, key), 1);
	assert_int_equal(place_later(cache, &t), 1);
	assert_int_equal(placed.proved, 1);
	assert_int_equal(placed.resealed, 0);

	assert_int_equal(system((snprintf(p, sizeof(p), "rm -rf %s/src %s/dst %s", dir, dir, cache), p)), 0);
	make_entry(cache, sizeof(cache));
	assert_int_equal(fs_read_alloc(entry_path(cache, "proof", p, sizeof(p)), 1u << 20, &pl, &len, &e), 0);
	assert_true(len > 40);
	pl[len - 2] ^= 1; /* a byte of the last name */
	assert_int_equal(fs_write_atomic(p, pl, len, 0644, &e), 0);
	free(pl);
	assert_int_equal(place_later(cache, &t), 1);
	assert_int_equal(placed.proved, 0);
	assert_int_equal(placed.resealed, 1);
	assert_int_equal(place_later(cache, &t), 1);
	assert_int_equal(placed.proved, 1);
}

/* A file touched just now, the placement in the same tick of the clock:
 * the proof fails (the ctime moved), every copy is hashed, and the proof
 * made for the next placement waits for the clock to tick past the touch
 * (at most 20 ms) so that a later change in that tick cannot go unseen;
 * the next placement is proved. */
static void
test_tree_proof_just_touched(void **state)
{
	char cache[256], p[600];
	struct tap t = {0};
	struct err e = {0};

	make_entry(cache, sizeof(cache));
	assert_int_equal(utimensat(AT_FDCWD, entry_path(cache, "tree/a.txt", p, sizeof(p)), NULL, 0), 0);
	assert_int_equal(place(cache, &t, NULL, 0), 1);
	assert_int_equal(placed.proved, 0);
	assert_int_equal(placed.resealed, 1);
	assert_int_equal(fs_rm_tree((snprintf(p, sizeof(p), "%s/dst", dir), p), &e), 0);
	assert_int_equal(place(cache, &t, NULL, 0), 1);
	assert_int_equal(placed.proved, 1);
	assert_int_equal(placed.resealed, 0);
}

/* A tree kept while the clock has not ticked past it (one-second
 * timestamps): kept without a proof, quietly (no warning: the first
 * placement hashes and gives it one, said in its note), and then proved. */
static void
test_tree_store_clock_behind(void **state)
{
	char cache[256], p[600], errf[300];
	struct tap t = {0};
	struct stat st;
	int fd, saved;

	snprintf(errf, sizeof(errf), "%s/stderr", dir);
	fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	close(fd);
	clock_test_fs_behind_ms = 10000;
	make_entry(cache, sizeof(cache));
	clock_test_fs_behind_ms = 0;
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	assert_int_equal(stat(errf, &st), 0);
	if (st.st_size != 0)
		fail_msg("keeping a tree without its proof was not quiet (%lld bytes on stderr)",
		         (long long)st.st_size);
	assert_int_equal(cache_tree_has(cache, key), 1);
	assert_int_equal(access(entry_path(cache, "proof", p, sizeof(p)), F_OK), -1);
	assert_int_equal(place(cache, &t, NULL, 0), 1);
	assert_int_equal(placed.proved, 0);
	assert_int_equal(placed.resealed, 1);
	assert_int_equal(access(entry_path(cache, "proof", p, sizeof(p)), F_OK), 0);
	assert_int_equal(fs_rm_tree((snprintf(p, sizeof(p), "%s/dst", dir), p), &(struct err){0}), 0);
	assert_int_equal(place(cache, &t, NULL, 0), 1);
	assert_int_equal(placed.proved, 1);
}

/* A file's content rewritten in the kept tree (size and mode kept): the
 * proof fails, the copy is hashed, the entry discarded. */
static void
test_tree_proof_rewritten(void **state)
{
	char cache[256], p[600], c[700];
	struct tap t = {0};

	make_entry(cache, sizeof(cache));
	entry_path(cache, "tree/a.txt", p, sizeof(p));
	snprintf(c, sizeof(c), "printf 'alphA\\n' >%s", p);
	assert_int_equal(system(c), 0);
	assert_int_equal(place(cache, &t, NULL, 0), 0);
	assert_int_equal(cache_tree_has(cache, key), 0);
}

/* An entry kept by a version without proofs ("abx-tree 1", sealed with
 * the same key): placed by hashing every copy. */
static void
test_tree_proof_old_entry(void **state)
{
	char cache[256], p[600], trees[300], mac[65];
	unsigned char sk[KEY_LEN];
	const char *why;
	struct tap t = {0};
	struct buf b = BUF_INIT(1u << 20);
	char *text, *nl, *sp;
	size_t len;
	struct err e = {0};

	make_entry(cache, sizeof(cache));
	snprintf(trees, sizeof(trees), "%s/trees", cache);
	assert_int_equal(cache_seal_key(keyf, sk, &why), 0);
	assert_int_equal(
	    fs_read_alloc(entry_path(cache, "manifest", p, sizeof(p)), 1u << 20, &text, &len, &e), 0);
	assert_memory_equal(text, "abx-tree 2 ", 11);
	nl = strchr(text, '\n');
	/* "abx-tree 2 <key> <proof> <meta>": drop the proof field */
	sp = strchr(text + 11, ' ');
	assert_non_null(sp);
	assert_int_equal(buf_put(&b, "abx-tree 1 ", 11), 0);
	assert_int_equal(buf_put(&b, text + 11, (size_t)(sp + 1 - (text + 11))), 0);
	assert_true(nl > sp + 66);
	assert_int_equal(buf_put(&b, sp + 66, (size_t)(text + len - 69 - (sp + 66))), 0);
	cache_seal(sk, b.p, b.len, mac);
	assert_int_equal(buf_put(&b, "mac ", 4), 0);
	assert_int_equal(buf_put(&b, mac, 64), 0);
	assert_int_equal(buf_put(&b, "\n", 1), 0);
	assert_int_equal(fs_write_atomic(p, (const char *)b.p, b.len, 0644, &e), 0);
	free(text);
	buf_free(&b);
	assert_int_equal(place_later(cache, &t), 1);
	assert_int_equal(placed.proved, 0);
	assert_int_equal(placed.resealed, 1);
	assert_int_equal(t.n, 2);
	assert_int_equal(place_later(cache, &t), 1);
	assert_int_equal(placed.proved, 1);
}

/* The kept tree touched once its files were copied (each under its lease,
 * its descriptor unchanged to the end of its copy): the placement stands,
 * its bytes the proved ones; the entry's proof no longer holds, so the
 * next placement hashes every copy and seals a new proof. */
static void
test_tree_proof_changed_while_copied(void **state)
{
	char cache[256], p[600];
	struct tap t = {0};

	make_entry(cache, sizeof(cache));
	t.touch = entry_path(cache, "tree/bin/tool", p, sizeof(p));
	assert_int_equal(place(cache, &t, NULL, 0), 1);
	assert_int_equal(placed.proved, 1);
	assert_int_equal(cache_tree_has(cache, key), 1);
	t.touch = NULL;
	assert_int_equal(place_later(cache, &t), 1);
	assert_int_equal(placed.proved, 0);
	assert_int_equal(placed.resealed, 1);
}

/* What the placement hook does: swap the entry at its path back to the
 * genuine one (moved aside to <entry>.real), the forged one (opened
 * already) moved aside. */
static void
swap_back(const char *entry)
{
	char c[1400];

	snprintf(c, sizeof(c), "mv '%s' '%s.forged2' && mv '%s.real' '%s'", entry, entry, entry, entry);
	assert_int_equal(system(c), 0);
}

/* A tree renamed over the entry's between the opening of its tree and the
 * check of its proof: the proof is checked through the descriptor the
 * files are copied from, so the forged tree (the one opened) fails it, is
 * hashed and refused; its bytes are never placed. */
static void
test_tree_swapped_after_open(void **state)
{
	char cache[256], p[600], c[1400];
	struct tap t = {0};
	int rc;

	make_entry(cache, sizeof(cache));
	entry_path(cache, "", p, sizeof(p));
	p[strlen(p) - 1] = '\0';
	snprintf(c, sizeof(c),
	         "cp -a '%s' '%s.forged' && printf 'FORGE\n' >'%s.forged/tree/a.txt' && mv '%s' '%s.real' && "
	         "mv '%s.forged' '%s'",
	         p, p, p, p, p, p, p);
	assert_int_equal(system(c), 0);
	cache_test_place_fn = swap_back;
	rc = place(cache, &t, NULL, 0);
	cache_test_place_fn = NULL;
	assert_int_equal(rc, 0);
	snprintf(c, sizeof(c), "! grep -rq FORGE %s/dst", dir);
	assert_int_equal(system(c), 0);
	snprintf(c, sizeof(c), "test -z \"$(ls -A %s/dst)\"", dir);
	assert_int_equal(system(c), 0);
}

/* A write through a shared mapping whose page is dirty already moves no
 * ctime: the stat proof holds over changed bytes. A proof sealed while
 * the mapping was there (as an earlier version sealed it) does not make
 * the file trusted: the read lease is refused while the file is open for
 * writing, so the file is hashed, the change seen, the entry discarded. */
static void
test_tree_dirty_mapping(void **state)
{
	char cache[256], a[600], tree[600], mpath[600], ppath[600], hex[65];
	unsigned char sk[KEY_LEN];
	const char *why;
	struct tap t = {0};
	char *pl = NULL, *text = NULL, *m;
	size_t plen, len;
	struct err e = {0};
	int fd;

	make_entry(cache, sizeof(cache));
	entry_path(cache, "tree/a.txt", a, sizeof(a));
	fd = open(a, O_RDWR);
	assert_true(fd >= 0);
	m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(m != MAP_FAILED);
	close(fd);
	((volatile char *)m)[0] = m[0]; /* the page dirty and writable from now on */
	usleep(20000);
	/* the entry sealed again with a proof made now */
	entry_path(cache, "tree", tree, sizeof(tree));
	assert_int_equal(proof_make(tree, "io.error", &pl, &plen, &e), 0);
	entry_path(cache, "proof", ppath, sizeof(ppath));
	unlink(ppath);
	assert_int_equal(cache_proof_put(ppath, pl, plen, hex, &e), 0);
	entry_path(cache, "manifest", mpath, sizeof(mpath));
	assert_int_equal(fs_read_alloc(mpath, 1u << 20, &text, &len, &e), 0);
	assert_int_equal(cache_seal_key(keyf, sk, &why), 0);
	{
		/* "abx-tree 2 <key> <proof> <meta>\n<body>mac <hex>\n" */
		char *nl = strchr(text, '\n'), *meta = nl;
		while (meta > text && meta[-1] != ' ')
			meta--;
		unlink(mpath);
		assert_int_equal(cache_manifest_put(mpath, sk, key, hex, meta, (size_t)(nl - meta), nl + 1,
		                                    (size_t)(text + len - 69 - (nl + 1)), &e),
		                 0);
	}
	/* a write through the dirty mapping: the proof still holds */
	((volatile char *)m)[0] = 'X';
	assert_int_equal(proof_check(tree, pl, plen), 1);
	assert_int_equal(place(cache, &t, NULL, 0), 0);
	assert_int_equal(cache_tree_has(cache, key), 0);
	munmap(m, 4096);
	free(pl);
	free(text);
}

/* Entries owned by another user (root may chown; others skip): a file, a
 * directory, the tree itself: refused and discarded, never proved. */
static void
test_tree_not_ours(void **state)
{
	static const char *const what[] = {"tree/a.txt", "tree/bin", "tree/link", "tree"};
	char cache[256], p[600], c[700];
	struct tap t = {0};
	size_t i;

	if (geteuid() != 0)
		skip();
	for (i = 0; i < sizeof(what) / sizeof(*what); i++) {
		make_entry(cache, sizeof(cache));
		assert_int_equal(lchown(entry_path(cache, what[i], p, sizeof(p)), 65534, 65534), 0);
		assert_int_equal(place(cache, &t, NULL, 0), 0);
		assert_int_equal(cache_tree_has(cache, key), 0);
		snprintf(c, sizeof(c), "rm -rf %s/src %s/dst %s", dir, dir, cache);
		assert_int_equal(system(c), 0);
	}
}

/* One file in the middle of many changed in the cache (size kept): the
 * copy and the entry are discarded, nothing left under the parent. */
static void
test_tree_place_many_damaged(void **state)
{
	char cache[256], c[1024];
	static struct heard h;
	struct err e = {0};
	int fds;

	make_many(cache, sizeof(cache));
	snprintf(c, sizeof(c), "cd %s/trees/%s/tree && chmod u+w d25 && echo 'file 25 X' >d25/f4", cache,
	         key);
	assert_int_equal(system(c), 0);
	fds = unit_open_fds();
	memset(&h, 0, sizeof(h));
	assert_int_equal(place_heard(cache, &h, &e), 0);
	assert_int_equal(unit_open_fds(), fds);
	assert_int_equal(cache_tree_has(cache, key), 0);
	snprintf(c, sizeof(c), "test -z \"$(ls -A %s/dst)\"", dir);
	assert_int_equal(system(c), 0);
}

/* A write in the destination fails in the middle of many files (a file
 * size limit, for the 2 MiB file or the large one): -1 with the
 * destination's error, nothing left, the entry kept. */
static void
dest_error(rlim_t limit)
{
	char cache[256], c[1024];
	static struct heard h;
	struct rlimit old, rl;
	struct err e = {0};
	int fds, rc;

	make_many(cache, sizeof(cache));
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	rl = old;
	rl.rlim_cur = limit;
	fds = unit_open_fds();
	memset(&h, 0, sizeof(h));
	err_clear(&e);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
	rc = place_heard(cache, &h, &e);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(rc, -1);
	assert_non_null(strstr(e.msg, limit > (3u << 20) ? "d20/big: copying: " : "d15/mid: copying: "));
	assert_non_null(strstr(e.msg, strerror(EFBIG)));
	assert_int_equal(unit_open_fds(), fds);
	assert_int_equal(cache_tree_has(cache, key), 1);
	snprintf(c, sizeof(c), "test -z \"$(ls -A %s/dst)\"", dir);
	assert_int_equal(system(c), 0);
}

static void
test_tree_place_dest_error(void **state)
{
	dest_error(1u << 20);
}

static void
test_tree_place_dest_error_pipe(void **state)
{
	dest_error(4u << 20);
}

static void
test_tree_key_rejects(void **state)
{
	struct digest d;
	char k[CACHE_KEY_MAX];

	digest_buf(DIGEST_SHA256, "x", 1, &d);
	assert_int_equal(cache_tree_key(&d, "a/b", k), -1);
	assert_int_equal(cache_tree_key(&d, "a b", k), -1);
}

/* Sealed notes: what was put reads back; an edited one, one renamed from
 * another name or one read with another cache's key is not sound (-1 and
 * why); none is 0; a name that is not a plain file name is refused. */
static void
test_note_sealed(void **state)
{
	char body[256], c[1024];
	const char *why = NULL;

	assert_int_equal(cache_note_get(dir, keyf, "t-1.0.0.verified", body, sizeof(body), &why), 0);
	assert_int_equal(cache_note_put(dir, keyf, "t-1.0.0.verified", "tree abc\nat 1\n", 14), 1);
	assert_true(exists("state/" CACHE_KEY_FILE));
	assert_false(exists("trees/.key"));
	assert_int_equal(cache_note_get(dir, keyf, "t-1.0.0.verified", body, sizeof(body), &why), 1);
	assert_string_equal(body, "tree abc\nat 1\n");
	/* too small a buffer is not a truncated note */
	assert_int_equal(cache_note_get(dir, keyf, "t-1.0.0.verified", body, 5, &why), -1);
	snprintf(c, sizeof(c), "cp %s/trees/t-1.0.0.verified %s/trees/u-1.0.0.verified", dir, dir);
	assert_int_equal(system(c), 0);
	assert_int_equal(cache_note_get(dir, keyf, "u-1.0.0.verified", body, sizeof(body), &why), -1);
	assert_non_null(strstr(why, "not a note of this name"));
	snprintf(c, sizeof(c), "sed -i 's/^at 1/at 2/' %s/trees/t-1.0.0.verified", dir);
	assert_int_equal(system(c), 0);
	assert_int_equal(cache_note_get(dir, keyf, "t-1.0.0.verified", body, sizeof(body), &why), -1);
	assert_non_null(strstr(why, "seal does not match"));
	/* put again: replaced whole, sound again; then another cache's key */
	assert_int_equal(cache_note_put(dir, keyf, "t-1.0.0.verified", "x\n", 2), 1);
	assert_int_equal(cache_note_get(dir, keyf, "t-1.0.0.verified", body, sizeof(body), &why), 1);
	snprintf(c, sizeof(c),
	         "cd %s/state && rm " CACHE_KEY_FILE
	         " && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' "
	         ">" CACHE_KEY_FILE " && echo >>" CACHE_KEY_FILE " && chmod 600 " CACHE_KEY_FILE,
	         dir);
	assert_int_equal(system(c), 0);
	assert_int_equal(cache_note_get(dir, keyf, "t-1.0.0.verified", body, sizeof(body), &why), -1);
	assert_int_equal(cache_note_put(dir, keyf, "../x", "x\n", 2), 0);
	assert_int_equal(cache_note_put(dir, keyf, ".key", "x\n", 2), 0);
	assert_int_equal(cache_note_put(dir, keyf, "a b", "x\n", 2), 0);
	assert_int_equal(cache_note_get(dir, keyf, "../x", body, sizeof(body), &why), 0);
}

/* A cache whose "<cache>/trees" does not fit in PATH_MAX: cut, it would
 * name "<cache>/tree", another directory. Nothing is kept, placed or
 * noted, and nothing is made under the cut name. */
static void
test_cache_path_too_long(void **state)
{
	char cache[PATH_MAX], p[PATH_MAX + 64], body[16];
	const char *why = NULL;
	struct tap t = {0};
	struct digest d;
	int fd;

	unit_deep_dir(dir, cache, sizeof(cache), PATH_MAX - 6);
	snprintf(p, sizeof(p), "%s/src", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	put("src/a.txt", "alpha\n");
	digest_buf(DIGEST_SHA256, "artifact", 8, &d);
	assert_int_equal(cache_tree_key(&d, "t1", key), 0);
	fd = open(p, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(cache_tree_store(cache, keyf, key, fd, "size=8", "test", NULL, NULL), 0);
	close(fd);
	assert_int_equal(cache_tree_has(cache, key), 0);
	assert_int_equal(place(cache, &t, NULL, 0), 0);
	assert_int_equal(cache_note_put(cache, keyf, "t-1.0.0.verified", "x\n", 2), 0);
	assert_int_equal(cache_note_get(cache, keyf, "t-1.0.0.verified", body, sizeof(body), &why), 0);
	snprintf(p, sizeof(p), "test -z \"$(ls -A %s)\"", cache);
	assert_int_equal(system(p), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_get_verifies, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_put_commit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pipe_small, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pipe_large, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pipe_write_error, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pipe_follow, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pipe_follow_abandon, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_put_unwritten, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_place, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_file_changed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_file_missing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_extra_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_mode_changed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_link_changed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_manifest_tampered, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_partial_entry, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_other_key, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_alias_to_other_blob, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_get_refuses, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_in_cache_key_ignored, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_renamed_entry, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_store_uses_sums, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_large_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_store_changed_since, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_store_takes_copies, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_place_many, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_place_many_hashed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_proof_touched, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_proof_just_touched, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_store_clock_behind, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_proof_rewritten, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_proof_old_entry, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_proof_changed_while_copied, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_swapped_after_open, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_dirty_mapping, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_not_ours, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_place_many_damaged, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_place_dest_error, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tree_place_dest_error_pipe, setup, teardown),
	    cmocka_unit_test(test_tree_key_rejects),
	    cmocka_unit_test_setup_teardown(test_tree_too_deep, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_note_sealed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cache_path_too_long, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
