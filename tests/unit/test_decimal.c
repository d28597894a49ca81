/*
 * core/base/decimal.c against the host C library's strtod and %.Ng (glibc:
 * correctly rounded), on edge cases and on pseudo-random doubles and
 * decimal strings.
 */
#include "unit.h"
#include "base/decimal.h"

#include <math.h>
#include <stdint.h>

static uint64_t rng = 88172645463325252u;

static uint64_t
next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int
same(double a, double b)
{
	return memcmp(&a, &b, sizeof(a)) == 0;
}

/* what json_w_double printed with snprintf and strtod */
static void
old_format(double d, char *g, size_t cap)
{
	int p;

	if (d == 0 && signbit(d)) {
		snprintf(g, cap, "-0");
		return;
	}
	if (d == trunc(d) && fabs(d) <= 9007199254740992.0) {
		snprintf(g, cap, "%lld", (long long)d);
		return;
	}
	for (p = 15; p <= 17; p++) {
		snprintf(g, cap, "%.*g", p, d);
		if (strtod(g, NULL) == d)
			return;
	}
}

static void
test_parse_edges(void **state)
{
	static const char *const ok[] = {"0",
	                                 "-0",
	                                 "1e-400",
	                                 "4.9e-324",
	                                 "2.4703282292062327e-324",
	                                 "2.4703282292062328e-324",
	                                 "4503599627370496.5",
	                                 "4503599627370497.5",
	                                 "9007199254740993",
	                                 "9007199254740993.000000000000000000001",
	                                 "1.7976931348623157e308",
	                                 "1.7976931348623158e308",
	                                 "2.2250738585072011e-308",
	                                 "0.1",
	                                 "123456789012345678901234567890",
	                                 "1e23",
	                                 "8.98846567431158e307",
	                                 ".5",
	                                 "5.",
	                                 "+3",
	                                 "0e99999999999",
	                                 "0.000000000000000000000000000000000000000000001",
	                                 "100000000000000000000000000000000000000000000e-44",
	                                 "-1.5e-5",
	                                 "1.00000000000000011102230246251565404236316680908203125"};
	static const char *const big[] = {"1e400", "-1.5e309", "1.7976931348623159e308",
	                                  "1e99999999999999999"};
	const char *end;
	double d;
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(dec_parse(ok[i], &end, &d), 0);
		assert_true(*end == '\0');
		if (!same(d, strtod(ok[i], NULL)))
			fail_msg("%s: %.17g, strtod %.17g", ok[i], d, strtod(ok[i], NULL));
	}
	for (i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
		assert_int_equal(dec_parse(big[i], &end, &d), 1);
		assert_true(isinf(d) && signbit(d) == (big[i][0] == '-'));
	}
	/* where the reading stops */
	assert_int_equal(dec_parse("-", &end, &d), -1);
	assert_int_equal(dec_parse(".", &end, &d), -1);
	assert_int_equal(dec_parse("e5", &end, &d), -1);
	assert_int_equal(dec_parse("1e+", &end, &d), 0);
	assert_string_equal(end, "e+");
	assert_int_equal(dec_parse("2.5s", &end, &d), 0);
	assert_string_equal(end, "s");
	assert_true(d == 2.5);
}

static void
test_format_edges(void **state)
{
	static const double v[] = {0.0,
	                           -0.0,
	                           1.0,
	                           -123.0,
	                           9007199254740992.0,
	                           9007199254740994.0,
	                           0.1,
	                           1.0 / 3,
	                           1e21,
	                           1e-5,
	                           1e-4,
	                           123456.789,
	                           4.9e-324,
	                           -2.5e-308,
	                           1.7976931348623157e308,
	                           1e300,
	                           0.5,
	                           1e16};
	char b[40], g[40];
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		dec_format(v[i], b, sizeof(b));
		old_format(v[i], g, sizeof(g));
		assert_string_equal(b, g);
	}
	assert_int_equal(dec_format(1.0 / 3, b, 4), 3);
	assert_string_equal(b, "0.3");
}

static void
test_random(void **state)
{
	char b[40], g[40], s[64];
	uint64_t bits;
	double d, r;
	long i;

	for (i = 0; i < 300000; i++) {
		bits = next();
		if (i % 3 == 0) /* subnormals and the smallest normals */
			bits &= 0x800FFFFFFFFFFFFFu | (next() % 3) << 52;
		memcpy(&d, &bits, sizeof(d));
		if (!isfinite(d))
			continue;
		dec_format(d, b, sizeof(b));
		old_format(d, g, sizeof(g));
		if (strcmp(b, g) != 0)
			fail_msg("%.17g: %s, %%g %s", d, b, g);
		assert_int_equal(dec_parse(b, NULL, &r), 0);
		assert_true(same(r, d));
		snprintf(s, sizeof(s), "%llu.%llue%d", (unsigned long long)(next() % 100000000000u),
		         (unsigned long long)(next() % 10000000000u), (int)(next() % 700) - 350);
		if (dec_parse(s, NULL, &r) != (isinf(strtod(s, NULL)) ? 1 : 0) || !same(r, strtod(s, NULL)))
			fail_msg("%s: %.17g, strtod %.17g", s, r, strtod(s, NULL));
	}
}

static void
test_fixed(void **state)
{
	static const uint64_t us[] = {500, 1000, 2500, 5000, 10000, 25000, 100000, 1000000, 5000000};
	static const char *const le[] = {"0.0005", "0.001", "0.0025", "0.005", "0.01",
	                                 "0.025",  "0.1",   "1",      "5"};
	char b[48];
	size_t i;

	for (i = 0; i < sizeof(us) / sizeof(us[0]); i++) {
		dec_fixed(us[i], 6, 1, b, sizeof(b));
		assert_string_equal(b, le[i]);
	}
	dec_fixed(1234567, 6, 0, b, sizeof(b));
	assert_string_equal(b, "1.234567");
	dec_fixed(0, 6, 0, b, sizeof(b));
	assert_string_equal(b, "0.000000");
	dec_fixed(UINT64_MAX, 1, 0, b, sizeof(b));
	assert_string_equal(b, "1844674407370955161.5");
	dec_fixed(42, 0, 1, b, sizeof(b));
	assert_string_equal(b, "42");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_edges),
	    cmocka_unit_test(test_format_edges),
	    cmocka_unit_test(test_random),
	    cmocka_unit_test(test_fixed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
