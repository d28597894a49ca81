#ifndef ABX_CLOCK_H
#define ABX_CLOCK_H
/*
 * The clocks, read here only. The monotonic clock (CLOCK_MONOTONIC) is for
 * deadlines, timeouts, waits and durations: it never goes back and does not
 * follow changes of the wall clock. The wall clock (CLOCK_REALTIME) is for
 * timestamps people read and for pthread_cond_timedwait, whose deadline is
 * on it.
 */
#include <stdint.h>
#include <time.h>

/* Milliseconds on the monotonic clock. */
int64_t clock_ms(void);

/* Microseconds on the monotonic clock. */
int64_t clock_us(void);

/* Microseconds of CPU the calling thread has used (CLOCK_THREAD_CPUTIME_ID):
 * where an install's time went, per thread, beside the wall-clock phases. */
int64_t clock_thread_cpu_us(void);

/* Milliseconds since the epoch on the wall clock. */
int64_t clock_wall_ms(void);

/* Room for clock_iso's longest answer with its NUL:
 * "YYYY-MM-DDTHH:MM:SS.mmmZ" is 25 bytes; a year past 9999 takes more. */
#define CLOCK_ISO_MAX 40

/* The wall-clock time ms (milliseconds since the epoch) in UTC as RFC 3339
 * text, the one timestamp form of logs, journals, audit records and the
 * API: "2026-12-04T18:36:36Z", or with frac "2026-12-04T18:36:36.123Z".
 * Returns the length, or -1 (buf then holds "") when it does not fit cap. */
int clock_iso(int64_t ms, int frac, char *buf, size_t cap);

/* Room for clock_http's answer with its NUL: "Sun, 06 Nov 1994 08:49:37 GMT"
 * is 30 bytes; a year past 9999 takes more. */
#define CLOCK_HTTP_MAX 40

/* t (seconds since the epoch) as an HTTP date (RFC 9110 IMF-fixdate), the
 * Date header's form: "Sat, 05 Dec 2026 09:01:02 GMT". Returns the length,
 * or -1 (buf then holds "") when it does not fit cap. */
int clock_http(time_t t, char *buf, size_t cap);

/* The wall-clock time ms milliseconds from now, as pthread_cond_timedwait
 * takes it. */
void clock_wall_after(int ms, struct timespec *ts);

/* The wall clock as file timestamps are taken from it (CLOCK_REALTIME_COARSE:
 * a fine-grained ctime is never behind it). */
void clock_fs_now(struct timespec *ts);

/* Is now past t? When secs (a filesystem whose timestamps carry no
 * nanoseconds, taken to tick once a second), past t's second.
 * clock_fs_past: is clock_fs_now past t? */
int clock_fs_after(const struct timespec *now, const struct timespec *t, int secs);
int clock_fs_past(const struct timespec *t, int secs);

/* Wait until clock_fs_now is past t (clock_fs_past), at most max_ms on the
 * monotonic clock: 1 when it is, 0 when the time ran out. */
int clock_fs_wait_past(const struct timespec *t, int secs, int64_t max_ms);

#ifdef ABX_TEST
/* Tests: clock_fs_now answers this many milliseconds behind (a clock that
 * has not ticked past what was written just now). */
extern int64_t clock_test_fs_behind_ms;
#endif

#endif
