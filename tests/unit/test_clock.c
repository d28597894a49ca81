/* core/base/clock.c: the one monotonic clock reader. */
#include "unit.h"

#include "base/clock.h"

/* The readings never go back, and the two units read the same clock:
 * a millisecond reading lies between the microsecond readings taken
 * around it. */
static void
test_monotonic_and_units_agree(void **state)
{
	int64_t us0, ms, us1, prev = 0;
	int i;

	for (i = 0; i < 1000; i++) {
		us0 = clock_us();
		ms = clock_ms();
		us1 = clock_us();
		assert_true(us0 > 0);
		assert_true(us0 <= us1);
		assert_true(ms >= prev);
		assert_true(us0 / 1000 <= ms);
		assert_true(ms <= us1 / 1000);
		prev = ms;
	}
}

/* It is CLOCK_MONOTONIC itself, not the wall clock: a reading taken with
 * clock_gettime(CLOCK_MONOTONIC) just before and after brackets it. */
static void
test_is_clock_monotonic(void **state)
{
	struct timespec a, b;
	int64_t ms;

	clock_gettime(CLOCK_MONOTONIC, &a);
	ms = clock_ms();
	clock_gettime(CLOCK_MONOTONIC, &b);
	assert_true((int64_t)a.tv_sec * 1000 + a.tv_nsec / 1000000 <= ms);
	assert_true(ms <= (int64_t)b.tv_sec * 1000 + b.tv_nsec / 1000000);
}

/* The one timestamp form: RFC 3339 UTC, with or without milliseconds,
 * floored before the epoch, refused (and "") when cap is short, and the
 * same as strftime's "%Y-%m-%dT%H:%M:%SZ" wherever that applies. */
static void
test_iso(void **state)
{
	char b[CLOCK_ISO_MAX], ref[64];
	struct tm tm;
	time_t t;
	int64_t ms;
	int i;

	assert_int_equal(clock_iso(0, 0, b, sizeof(b)), 20);
	assert_string_equal(b, "1970-01-01T00:00:00Z");
	assert_int_equal(clock_iso(1764873396123, 1, b, sizeof(b)), 24);
	assert_string_equal(b, "2025-12-04T18:36:36.123Z");
	assert_int_equal(clock_iso(1764873396123, 0, b, sizeof(b)), 20);
	assert_string_equal(b, "2025-12-04T18:36:36Z");
	assert_int_equal(clock_iso(-1, 1, b, sizeof(b)), 24);
	assert_string_equal(b, "1969-12-31T23:59:59.999Z");
	assert_int_equal(clock_iso(-1000, 1, b, sizeof(b)), 24);
	assert_string_equal(b, "1969-12-31T23:59:59.000Z");
	assert_int_equal(clock_iso(253402300800000, 0, b, sizeof(b)), 21);
	assert_string_equal(b, "10000-01-01T00:00:00Z");
	/* cap: the text and its NUL, or nothing. */
	assert_int_equal(clock_iso(0, 0, b, 21), 20);
	assert_int_equal(clock_iso(0, 0, b, 20), -1);
	assert_string_equal(b, "");
	assert_int_equal(clock_iso(0, 1, b, 24), -1);
	assert_int_equal(clock_iso(0, 1, b, 0), -1);
	for (i = 0, ms = 1; i < 60; i++, ms = (ms * 3 + 7919) % 253402300799000) {
		t = (time_t)(ms / 1000);
		gmtime_r(&t, &tm);
		strftime(ref, sizeof(ref), "%Y-%m-%dT%H:%M:%SZ", &tm);
		assert_int_equal(clock_iso((int64_t)t * 1000 + 999, 0, b, sizeof(b)), (int)strlen(ref));
		assert_string_equal(b, ref);
	}
	assert_true(clock_iso(clock_wall_ms(), 1, b, sizeof(b)) == 24);
}

/* clock_http against strftime's IMF-fixdate (the C locale's day and month
 * names), across the years up to 9999. */
static void
test_http(void **state)
{
	char b[CLOCK_HTTP_MAX], ref[64];
	struct tm tm;
	time_t t;
	int64_t s;
	int i;

	(void)state;
	assert_int_equal(clock_http(784111777, b, sizeof(b)), 29);
	assert_string_equal(b, "Sun, 06 Nov 1994 08:49:37 GMT");
	assert_int_equal(clock_http(784111777, b, 29), -1);
	assert_string_equal(b, "");
	for (i = 0, s = 1; i < 60; i++, s = (s * 3 + 7919) % 253402300799) {
		t = (time_t)s;
		gmtime_r(&t, &tm);
		strftime(ref, sizeof(ref), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		assert_int_equal(clock_http(t, b, sizeof(b)), (int)strlen(ref));
		assert_string_equal(b, ref);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_monotonic_and_units_agree),
	    cmocka_unit_test(test_is_clock_monotonic),
	    cmocka_unit_test(test_iso),
	    cmocka_unit_test(test_http),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
