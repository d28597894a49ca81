#include "unit.h"
#include "base/digest.h"

#include <unistd.h>

static const char abc256[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
static const char abc512[] = "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
                             "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f";
static const char abc1[] = "a9993e364706816aba3e25717850c26c9cd0d89d";

static void
test_parse_hex_rejects_bad_input(void **state)
{
	struct digest d;
	struct err e = {0};

	assert_int_equal(digest_parse_hex(DIGEST_SHA256, "abc", &d, "usage", &e), -1);
	assert_string_equal(e.code, "usage");
	assert_int_equal(digest_parse_hex(DIGEST_SHA256, NULL, &d, "usage", &e), -1);
	char bad[65];
	memcpy(bad, abc256, 65);
	bad[63] = 'g';
	assert_int_equal(digest_parse_hex(DIGEST_SHA256, bad, &d, "install.manifest_invalid", &e), -1);
	assert_non_null(strstr(e.msg, "non-hex character at 63"));
	char longer[70];
	snprintf(longer, sizeof(longer), "%s00", abc256);
	assert_int_equal(digest_parse_hex(DIGEST_SHA256, longer, &d, "usage", &e), -1);
}

/* The one hex codec: digits of either case, nothing else (no sign, blank
 * or "0x" as sscanf's %x would take), never past 2n digits. */
static void
test_hex(void **state)
{
	unsigned char b[4], all[256];
	char out[2 * sizeof(all) + 1], *big;
	int i;

	assert_int_equal(hex_digit('0'), 0);
	assert_int_equal(hex_digit('a'), 10);
	assert_int_equal(hex_digit('F'), 15);
	assert_int_equal(hex_digit('g'), -1);
	assert_int_equal(hex_digit(':'), -1);
	assert_int_equal(hex_digit('@'), -1);
	assert_int_equal(hex_digit('`'), -1);
	assert_int_equal(hex_digit(0xc1), -1);
	assert_int_equal(hex_digit(-1), -1);
	for (i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	assert_ptr_equal(hex_encode(all, sizeof(all), out), out);
	assert_int_equal(strlen(out), 512);
	assert_memory_equal(out, "000102", 6);
	assert_string_equal(out + 500, "fafbfcfdfeff");
	memset(all, 0, sizeof(all));
	assert_int_equal(hex_decode(out, all, sizeof(all)), 0);
	for (i = 0; i < 256; i++)
		assert_int_equal(all[i], i);
	assert_int_equal(hex_decode("DEADbeef", b, 4), 0);
	assert_memory_equal(b, "\xde\xad\xbe\xef", 4);
	assert_int_equal(hex_decode("+f00", b, 2), -1);
	assert_int_equal(hex_decode(" f00", b, 2), -1);
	assert_int_equal(hex_decode("0xff", b, 2), -1);
	assert_int_equal(hex_decode("abc", b, 2), -1); /* the NUL is not a digit */
	assert_int_equal(hex_decode("", b, 0), 0);
	/* Exactly 2n bytes read: the last digit at the end of an allocation. */
	big = malloc(4);
	memcpy(big, "c0de", 4);
	assert_int_equal(hex_decode(big, b, 2), 0);
	assert_memory_equal(b, "\xc0\xde", 2);
	free(big);
	assert_string_equal(hex_encode("", 0, out), "");
	/* Constant-time compare: equal, one bit off at either end. */
	assert_true(ct_equal("abcd", "abcd", 4));
	assert_false(ct_equal("abcd", "abce", 4));
	assert_false(ct_equal("bbcd", "abcd", 4));
	assert_true(ct_equal("x", "y", 0));
}

static void
test_sri_rejects_malformed(void **state)
{
	struct digest d;
	struct err e = {0};

	assert_int_equal(digest_parse_sri("", &d, "x", &e), -1);
	assert_int_equal(digest_parse_sri(NULL, &d, "x", &e), -1);
	assert_int_equal(digest_parse_sri("md5-1B2M2Y8AsgTpgAmY7PhCfg==", &d, "x", &e),
	                 -1);                                               /* unknown only */
	assert_int_equal(digest_parse_sri("sha512-abc", &d, "x", &e), -1);  /* bad length */
	assert_int_equal(digest_parse_sri("sha256-!!!!", &d, "x", &e), -1); /* bad chars */
	/* sha1 of "abc" with a non-zero trailing bit: not canonical. */
	assert_int_equal(digest_parse_sri("sha1-qZk+NkcGgWq6PiVxeFDCbJzQ2J1=", &d, "x", &e), -1);
	assert_int_equal(digest_parse_sri("sha1-qZk+NkcGgWq6PiVxeFDCbJzQ2J0=", &d, "x", &e), 0);
	char big[2000];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(digest_parse_sri(big, &d, "x", &e), -1);
}

static void
test_known_vectors(void **state)
{
	struct digest d;
	char hex[DIGEST_HEX_MAX];

	digest_buf(DIGEST_SHA256, "abc", 3, &d);
	assert_string_equal(digest_hex(&d, hex), abc256);
	digest_buf(DIGEST_SHA512, "abc", 3, &d);
	assert_string_equal(digest_hex(&d, hex), abc512);
	digest_buf(DIGEST_SHA1, "abc", 3, &d);
	assert_string_equal(digest_hex(&d, hex), abc1);
}

static void
test_streaming_equals_one_shot(void **state)
{
	unsigned char data[1000];
	struct digest_ctx c;
	struct digest a, b;
	size_t i;

	for (i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 7);
	digest_buf(DIGEST_SHA512, data, sizeof(data), &a);
	digest_init(&c, DIGEST_SHA512);
	for (i = 0; i < sizeof(data); i += 13)
		digest_update(&c, data + i, sizeof(data) - i < 13 ? sizeof(data) - i : 13);
	assert_int_equal(c.bytes, sizeof(data));
	digest_final(&c, &b);
	assert_true(digest_equal(&a, &b));
}

static void
test_sri_round_trip_and_strongest_wins(void **state)
{
	struct digest d, p;
	struct err e = {0};
	char sri[DIGEST_SRI_MAX], both[300];

	digest_buf(DIGEST_SHA512, "abc", 3, &d);
	digest_sri(&d, sri);
	assert_string_equal(sri, "sha512-3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/"
	                         "uu9RU1EI2Q86A4qmslPpUyknw==");
	assert_int_equal(digest_parse_sri(sri, &p, "x", &e), 0);
	assert_true(digest_equal(&d, &p));
	snprintf(both, sizeof(both), "sha1-qZk+NkcGgWq6PiVxeFDCbJzQ2J0= %s?opt md5-xx==", sri);
	assert_int_equal(digest_parse_sri(both, &p, "x", &e), 0);
	assert_int_equal(p.alg, DIGEST_SHA512);
	assert_true(digest_equal(&d, &p));
	digest_buf(DIGEST_SHA256, "abc", 3, &d);
	digest_sri(&d, sri);
	assert_int_equal(digest_parse_sri(sri, &p, "x", &e), 0);
	assert_true(digest_equal(&d, &p));
}

static void
test_equal_checks_alg_and_bytes(void **state)
{
	struct digest a, b;

	digest_buf(DIGEST_SHA256, "abc", 3, &a);
	digest_buf(DIGEST_SHA256, "abd", 3, &b);
	assert_false(digest_equal(&a, &b));
	b = a;
	assert_true(digest_equal(&a, &b));
	b.alg = DIGEST_SHA512;
	assert_false(digest_equal(&a, &b));
	assert_true(ct_equal("abc", "abc", 3));
	assert_false(ct_equal("abc", "abd", 3));
}

static void
test_file(void **state)
{
	char path[] = "/tmp/abx-digest-XXXXXX";
	struct digest d;
	struct err e = {0};
	uint64_t n = 0;
	char hex[DIGEST_HEX_MAX];
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "abc", 3), 3);
	close(fd);
	assert_int_equal(digest_file(DIGEST_SHA256, path, &d, &n, &e), 0);
	assert_int_equal(n, 3);
	assert_string_equal(digest_hex(&d, hex), abc256);
	unlink(path);
	assert_int_equal(digest_file(DIGEST_SHA256, path, &d, &n, &e), -1);
	assert_string_equal(e.code, "io.error");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_hex_rejects_bad_input),
	    cmocka_unit_test(test_hex),
	    cmocka_unit_test(test_sri_rejects_malformed),
	    cmocka_unit_test(test_known_vectors),
	    cmocka_unit_test(test_streaming_equals_one_shot),
	    cmocka_unit_test(test_sri_round_trip_and_strongest_wins),
	    cmocka_unit_test(test_equal_checks_alg_and_bytes),
	    cmocka_unit_test(test_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
