/* Shared includes for cmocka unit tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
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

/* Write text to dir/rel (the test fails when it cannot). */
static void
unit_put(const char *dir, const char *rel, const char *text)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}
