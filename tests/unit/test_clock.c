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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_monotonic_and_units_agree),
		cmocka_unit_test(test_is_clock_monotonic),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
