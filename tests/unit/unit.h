/* Shared includes for cmocka unit tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Until the file-system clock has moved past path's ctime, so the next
 * change stamps a different time: the clock the kernel stamps files with is
 * coarse (one tick: up to 10 ms) on many kernels, and two changes in one
 * tick look alike. */
static void
unit_clock_past_ctime(const char *path)
{
	struct timespec now;
	struct stat sb;
	int i;

	assert_int_equal(stat(path, &sb), 0);
	for (i = 0; i < 2000; i++) {
		clock_gettime(CLOCK_REALTIME_COARSE, &now);
		if (now.tv_sec > sb.st_ctim.tv_sec ||
		    (now.tv_sec == sb.st_ctim.tv_sec && now.tv_nsec > sb.st_ctim.tv_nsec))
			return;
		usleep(1000);
	}
}

/* rm -rf dir (a test's private temporary directory): 0 or -1. */
static int
unit_rmtree(const char *dir)
{
	char cmd[4200];

	if (snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir) >= (int)sizeof(cmd) || strchr(dir, '\'') != NULL)
		return -1;
	return system(cmd) == 0 ? 0 : -1;
}

/* A fresh private directory /tmp/abx-<what>-XXXXXX in dir: 0 or -1. */
static int
unit_mkdtemp(char *dir, size_t cap, const char *what)
{
	if (snprintf(dir, cap, "/tmp/abx-%s-XXXXXX", what) >= (int)cap)
		return -1;
	return mkdtemp(dir) != NULL ? 0 : -1;
}

/* A directory under base whose path is exactly len bytes, made (names of
 * at most 200 bytes: each one the kernel takes), into out (cap bytes):
 * for a path that is one byte short of a limit. */
static void
unit_deep_dir(const char *base, char *out, size_t cap, size_t len)
{
	size_t n, k;

	assert_true(len < cap && (size_t)snprintf(out, cap, "%s", base) < len);
	while ((n = strlen(out)) < len) {
		k = len - n - 1 < 200 ? len - n - 1 : 200;
		if (len - n - 1 - k == 1)
			k--; /* never leave a name of nothing */
		out[n] = '/';
		memset(out + n + 1, 'd', k);
		out[n + 1 + k] = '\0';
		assert_int_equal(mkdir(out, 0700), 0);
	}
}

/* Write text to dir/rel (the test fails when it cannot). */
static void
unit_put(const char *dir, const char *rel, const char *text)
{
	char p[512];
	FILE *f;

	/* a cut path would be another file */
	assert_true((size_t)snprintf(p, sizeof(p), "%s/%s", dir, rel) < sizeof(p));
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/*
 * Pages of path's page cache still dirty (cachestat(2), Linux 6.5: no
 * wrapper in the C libraries yet), or -1 when it cannot be told: no such
 * call, or a filesystem without writeback (tmpfs: its pages stay dirty).
 * A file whose writeback was started has none left (they are under
 * writeback or clean); without the start they stay dirty for 30 s or until
 * gigabytes are. Something else may sync meanwhile (a `sync` elsewhere):
 * then 0 proves nothing, so a test asserts 0, never a count above it.
 */
#include <sys/syscall.h>
#include <sys/vfs.h>
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif
static long
unit_dirty_pages(const char *path)
{
	struct {
		uint64_t off, len;
	} range = {0, 0};
	struct {
		uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
	} cs;
	struct statfs sf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	long r;

	if (fd < 0)
		return -1;
	r = fstatfs(fd, &sf) == 0 && sf.f_type != 0x01021994 /* TMPFS_MAGIC */ &&
	            syscall(SYS_cachestat, fd, &range, &cs, 0) == 0
	        ? (long)cs.nr_dirty
	        : -1;
	close(fd);
	return r;
}

/* The descriptors this process has open (counted in-process: a child
 * would race): a refusal or a failure leaks none. */
#include <dirent.h>
static int
unit_open_fds(void)
{
	struct dirent *de;
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}
