#include "base/clock.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t
clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
clock_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t
clock_thread_cpu_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Two decimal digits of v (0..99) at p. */
static char *
two(char *p, int v)
{
	p[0] = (char)('0' + v / 10);
	p[1] = (char)('0' + v % 10);
	return p + 2;
}

/* The calendar time of t in UTC into *tm, buf (cap bytes) emptied first:
 * 0, or -1 when t has no calendar time. */
static int
utc(time_t t, struct tm *tm, char *buf, size_t cap)
{
	if (cap > 0)
		buf[0] = '\0';
	return gmtime_r(&t, tm) == NULL ? -1 : 0;
}

int
clock_iso(int64_t ms, int frac, char *buf, size_t cap)
{
	/* Floor, not truncation: before the epoch a second starts below. */
	int64_t s = ms / 1000 - (ms % 1000 < 0), sub = ms - s * 1000;
	time_t t = (time_t)s;
	char tmp[CLOCK_ISO_MAX], *p = tmp;
	struct tm tm;
	int n;

	if (utc(t, &tm, buf, cap) != 0)
		return -1;
	if (tm.tm_year + 1900 >= 0 && tm.tm_year + 1900 <= 9999) {
		p = two(two(p, (tm.tm_year + 1900) / 100), (tm.tm_year + 1900) % 100);
	} else {
		n = snprintf(p, 16, "%d", tm.tm_year + 1900);
		p += n < 0 || n >= 16 ? 0 : n;
	}
	*p++ = '-';
	p = two(p, tm.tm_mon + 1);
	*p++ = '-';
	p = two(p, tm.tm_mday);
	*p++ = 'T';
	p = two(p, tm.tm_hour);
	*p++ = ':';
	p = two(p, tm.tm_min);
	*p++ = ':';
	p = two(p, tm.tm_sec);
	if (frac) {
		*p++ = '.';
		*p++ = (char)('0' + sub / 100);
		p = two(p, (int)(sub % 100));
	}
	*p++ = 'Z';
	n = (int)(p - tmp);
	if ((size_t)n >= cap)
		return -1;
	memcpy(buf, tmp, (size_t)n);
	buf[n] = '\0';
	return n;
}

int
clock_http(time_t t, char *buf, size_t cap)
{
	static const char day[] = "SunMonTueWedThuFriSat", mon[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	struct tm tm;
	int n;

	if (utc(t, &tm, buf, cap) != 0)
		return -1;
	n = snprintf(buf, cap, "%.3s, %02d %.3s %04d %02d:%02d:%02d GMT", day + 3 * tm.tm_wday, tm.tm_mday,
	             mon + 3 * tm.tm_mon, tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
	if (n < 0 || (size_t)n >= cap) {
		if (cap > 0)
			buf[0] = '\0';
		return -1;
	}
	return n;
}

int64_t
clock_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
clock_wall_after(int ms, struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

#ifdef ABX_TEST
int64_t clock_test_fs_behind_ms;
#endif

void
clock_fs_now(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME_COARSE, ts);
#ifdef ABX_TEST
	if (clock_test_fs_behind_ms > 0) {
		int64_t ns =
		    (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec - clock_test_fs_behind_ms * 1000000;
		ts->tv_sec = (time_t)(ns / 1000000000);
		ts->tv_nsec = (long)(ns % 1000000000);
	}
#endif
}

int
clock_fs_after(const struct timespec *now, const struct timespec *t, int secs)
{
	if (secs)
		return now->tv_sec > t->tv_sec;
	return now->tv_sec > t->tv_sec || (now->tv_sec == t->tv_sec && now->tv_nsec > t->tv_nsec);
}

int
clock_fs_past(const struct timespec *t, int secs)
{
	struct timespec now;

	clock_fs_now(&now);
	return clock_fs_after(&now, t, secs);
}

int
clock_fs_wait_past(const struct timespec *t, int secs, int64_t max_ms)
{
	struct timespec nap = {0, 1000000};
	int64_t start = clock_ms();

	for (;;) {
		if (clock_fs_past(t, secs))
			return 1;
		if (clock_ms() - start >= max_ms)
			return 0;
		nanosleep(&nap, NULL);
	}
}
