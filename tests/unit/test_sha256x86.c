#include "unit.h"

#include "base/sha256x86.h"

/* The accelerated update must give BearSSL's answer for every length and
 * every way of splitting the input, and interleave with the portable path. */
static void
test_matches_bearssl(void **state)
{
	static unsigned char data[4096 + 7];
	unsigned char a[32], b[32];
	br_sha256_context x, y;
	size_t len, off, step;
	unsigned seed = 12345;

	for (off = 0; off < sizeof(data); off++) {
		seed = seed * 1103515245u + 12345u;
		data[off] = (unsigned char)(seed >> 16);
	}
	for (len = 0; len <= 300; len++) {
		for (step = 1; step <= 131; step += 13) {
			br_sha256_init(&x);
			br_sha256_init(&y);
			br_sha256_update(&x, data, len);
			for (off = 0; off < len; off += step)
				sha256x86_update(&y, data + off, len - off < step ? len - off : step);
			br_sha256_out(&x, a);
			br_sha256_out(&y, b);
			assert_memory_equal(a, b, 32);
		}
	}
	/* Large, and mixed with the portable code mid-stream. */
	br_sha256_init(&x);
	br_sha256_init(&y);
	br_sha256_update(&x, data, sizeof(data));
	sha256x86_update(&y, data, 1000);
	br_sha256_update(&y, data + 1000, 1001);
	sha256x86_update(&y, data + 2001, sizeof(data) - 2001);
	br_sha256_out(&x, a);
	br_sha256_out(&y, b);
	assert_memory_equal(a, b, 32);
}

static void
test_known_answer_both_paths(void **state)
{
	/* FIPS 180-2 "abc" and the two-block message. */
	static const unsigned char abc[32] = {
	    0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
	    0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad,
	};
	static const unsigned char two[32] = {
	    0x24, 0x8d, 0x6a, 0x61, 0xd2, 0x06, 0x38, 0xb8, 0xe5, 0xc0, 0x26, 0x93, 0x0c, 0x3e, 0x60, 0x39,
	    0xa3, 0x3c, 0xe4, 0x59, 0x64, 0xff, 0x21, 0x67, 0xf6, 0xec, 0xed, 0xd4, 0x19, 0xdb, 0x06, 0xc1,
	};
	const char *m2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	unsigned char out[32];
	br_sha256_context c;
	int forced;

	for (forced = 0; forced < 2; forced++) {
		sha256x86_force_portable(forced);
		br_sha256_init(&c);
		sha256x86_update(&c, "abc", 3);
		br_sha256_out(&c, out);
		assert_memory_equal(out, abc, 32);
		br_sha256_init(&c);
		sha256x86_update(&c, m2, strlen(m2));
		br_sha256_out(&c, out);
		assert_memory_equal(out, two, 32);
	}
	sha256x86_force_portable(0);
	print_message("SHA-NI in use: %s\n", sha256x86_available() ? "yes" : "no");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_matches_bearssl),
	    cmocka_unit_test(test_known_answer_both_paths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
