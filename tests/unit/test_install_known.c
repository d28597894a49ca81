/* Known files (core/install/install_known.c): digests taken at extraction are used
 * by the tree listing only while the file stats exactly as recorded; any
 * change (content of the same size with the mtime put back, a chmod, a
 * replacement) sends the listing back to reading the file, so the listing
 * with the table is always the listing without it. */
#include "unit.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/digest.h"
#include "install/install_int.h"

static char dir[64];

static int
setup(void **state)
{
	return unit_mkdtemp(dir, sizeof(dir), "known");
}

static int
teardown(void **state)
{
	return unit_rmtree(dir);
}

/* Write rel (under dir/t) and record it in k as extraction would: the
 * fstat of the complete file and the sha256 of what was written. */
static void
put(struct install_known *k, const char *pkg, const char *name, const char *text)
{
	char p[256];
	struct stat sb;
	struct digest d;
	int fd;

	snprintf(p, sizeof(p), "%s/t/%s/%s", dir, pkg, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fstat(fd, &sb), 0);
	close(fd);
	digest_buf(DIGEST_SHA256, text, strlen(text), &d);
	if (k != NULL)
		install_known_add(k, pkg, name, &sb, d.v);
}

static void
listing(const struct install_known *k, char hex[65], char **text)
{
	char p[256];
	size_t len;
	struct err e = {0};

	snprintf(p, sizeof(p), "%s/t", dir);
	if (install_tree_list_known(p, k, text, &len, hex, NULL, NULL, &e) != 0)
		fail_msg("%s", e.msg);
}

static void
test_known(void **state)
{
	struct install_known *k = install_known_new();
	char p[256], hex0[65], hex1[65], hex2[65], *t0 = NULL, *t1 = NULL;
	unsigned char sha[32];
	struct stat sb;
	struct timespec ts[2];
	int fd;

	assert_non_null(k);
	snprintf(p, sizeof(p), "%s/t", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/t/pkg", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	put(k, "pkg", "a", "alpha");
	put(k, "pkg", "b", "bravo");
	/* a record a later one replaces: the same path written again */
	put(k, "pkg", "c", "first");
	put(k, "pkg", "c", "second");
	assert_int_equal(install_known_count(k), 4);

	/* nothing is answered before settling */
	snprintf(p, sizeof(p), "%s/t/pkg/a", dir);
	assert_int_equal(lstat(p, &sb), 0);
	assert_int_equal(install_known_get(k, "pkg/a", &sb, sha), 0);
	install_known_settle(k);
	assert_int_equal(install_known_count(k), 3);
	assert_int_equal(install_known_get(k, "pkg/a", &sb, sha), 1);
	assert_int_equal(install_known_get(k, "pkg/zz", &sb, sha), 0);
	assert_int_equal(install_known_get(NULL, "pkg/a", &sb, sha), 0);

	/* the same listing with and without the table */
	listing(k, hex1, &t1);
	listing(NULL, hex0, &t0);
	assert_string_equal(hex0, hex1);
	assert_string_equal(t0, t1);
	assert_non_null(strstr(t0, "pkg/c"));
	free(t0);
	free(t1);

	/* settle waited for the clock: a change now gets a later ctime. The
	 * same size, and the mtime put back: only the ctime tells. */
	snprintf(p, sizeof(p), "%s/t/pkg/b", dir);
	assert_int_equal(lstat(p, &sb), 0);
	fd = open(p, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "BRAVO", 5, 0), 5);
	ts[0] = sb.st_atim;
	ts[1] = sb.st_mtim;
	assert_int_equal(futimens(fd, ts), 0);
	close(fd);
	assert_int_equal(lstat(p, &sb), 0);
	assert_int_equal(install_known_get(k, "pkg/b", &sb, sha), 0);
	listing(k, hex1, NULL);
	listing(NULL, hex2, NULL);
	assert_string_equal(hex1, hex2);
	assert_string_not_equal(hex1, hex0);

	/* a chmod is a change too */
	unit_clock_past_ctime(p);
	snprintf(p, sizeof(p), "%s/t/pkg/a", dir);
	assert_int_equal(chmod(p, 0600), 0);
	assert_int_equal(chmod(p, 0644), 0);
	assert_int_equal(lstat(p, &sb), 0);
	assert_int_equal(install_known_get(k, "pkg/a", &sb, sha), 0);
	install_known_free(k);
}

/* Records of files in the root itself (an empty package path). */
static void
test_known_root(void **state)
{
	struct install_known *k = install_known_new();
	char p[256], hex0[65], hex1[65];
	unsigned char sha[32];
	struct stat sb;
	struct digest d;

	snprintf(p, sizeof(p), "%s/t", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	put(NULL, ".", "top", "top");
	snprintf(p, sizeof(p), "%s/t/top", dir);
	assert_int_equal(lstat(p, &sb), 0);
	digest_buf(DIGEST_SHA256, "top", 3, &d);
	install_known_add(k, "", "top", &sb, d.v);
	install_known_settle(k);
	assert_int_equal(install_known_get(k, "top", &sb, sha), 1);
	assert_memory_equal(sha, d.v, 32);
	listing(k, hex1, NULL);
	listing(NULL, hex0, NULL);
	assert_string_equal(hex0, hex1);
	install_known_free(k);
}

/* A ctime far ahead of our clock (a file server's) is not waited for: the
 * table is emptied at once and the listing reads every file. */
static void
test_known_clock_ahead(void **state)
{
	struct install_known *k = install_known_new();
	unsigned char sha[32] = {0};
	struct stat sb;
	struct timespec t0, t1;

	memset(&sb, 0, sizeof(sb));
	sb.st_mode = S_IFREG | 0644;
	clock_gettime(CLOCK_REALTIME, &sb.st_ctim);
	sb.st_ctim.tv_sec += 3600;
	install_known_add(k, "pkg", "f", &sb, sha);
	assert_int_equal(install_known_count(k), 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	install_known_settle(k);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_int_equal(install_known_count(k), 0);
	assert_int_equal(install_known_get(k, "pkg/f", &sb, sha), 0);
	/* no 2.5 s wait (a generous bound for a loaded machine) */
	assert_true(t1.tv_sec - t0.tv_sec < 2);
	install_known_free(k);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_known, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_known_root, setup, teardown),
	    cmocka_unit_test(test_known_clock_ahead),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
