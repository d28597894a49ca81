/* core/base/buf.c: the one growable byte buffer. */
#include "unit.h"

#include <string.h>

#include "base/buf.h"
#include "base/err.h"

/* Puts append and keep a NUL after the bytes; growth keeps what was put. */
static void
test_put_grows_and_terminates(void **state)
{
	struct buf b = BUF_INIT(1 << 20);
	char chunk[1000];
	int i;

	memset(chunk, 'a', sizeof(chunk));
	for (i = 0; i < 100; i++)
		assert_int_equal(buf_put(&b, chunk, sizeof(chunk)), 0);
	assert_int_equal(b.len, 100000);
	assert_int_equal(b.p[b.len], '\0');
	assert_int_equal(strspn((const char *)b.p, "a"), 100000);
	assert_int_equal(buf_put(&b, "", 0), 0);
	assert_false(b.over);
	buf_free(&b);
	assert_null(b.p);
	assert_int_equal(b.max, 1 << 20);
}

/* A put that would pass max changes nothing and sets over; later puts do
 * nothing until a reset; exactly max fits. */
static void
test_max_is_a_ceiling(void **state)
{
	struct buf b = BUF_INIT(10);

	assert_int_equal(buf_put(&b, "12345", 5), 0);
	assert_int_equal(buf_put(&b, "123456", 6), -1);
	assert_true(b.over);
	assert_int_equal(b.len, 5);
	assert_string_equal((const char *)b.p, "12345");
	assert_int_equal(buf_put(&b, "1", 1), -1);
	assert_int_equal(b.len, 5);
	buf_reset(&b);
	assert_false(b.over);
	assert_int_equal(b.len, 0);
	assert_int_equal(buf_put(&b, "0123456789", 10), 0);
	assert_string_equal((const char *)b.p, "0123456789");
	assert_true(b.cap <= 11);
	buf_free(&b);
}

/* buf_room: room past len without moving it, within max; refused room
 * sets over and changes nothing. */
static void
test_room(void **state)
{
	struct buf b = BUF_INIT(10);
	char *o;

	o = buf_room(&b, 4);
	assert_non_null(o);
	assert_int_equal(b.len, 0);
	assert_true(b.cap >= 5 && b.cap <= 11);
	memcpy(o, "abcd", 4);
	b.len += 4;
	assert_int_equal(buf_put(&b, "ef", 2), 0);
	assert_memory_equal(b.p, "abcdef", 6);
	assert_null(buf_room(&b, 5)); /* 6 + 5 > 10 */
	assert_true(b.over);
	assert_int_equal(b.len, 6);
	assert_memory_equal(b.p, "abcdef", 6);
	buf_reset(&b);
	assert_non_null(buf_room(&b, 10));
	assert_null(buf_room(&b, 11));
	buf_free(&b);
}

/* As an http sink: over max is http.too_large, and stays refused. */
static void
test_http_sink(void **state)
{
	struct buf b = BUF_INIT(8);
	struct err e = {0};

	assert_int_equal(buf_http_sink(&b, "abcd", 4, &e), 0);
	assert_int_equal(buf_http_sink(&b, "efghi", 5, &e), -1);
	assert_string_equal(e.code, "http.too_large");
	assert_int_equal(b.len, 4);
	assert_int_equal(buf_http_sink(&b, "e", 1, &e), -1);
	buf_free(&b);
}

/* The growable array: pushes zero-filled, kept across growth, max a
 * ceiling (vec_full tells it from memory), a size whose cap would
 * overflow refused, free leaves an empty array of the same kind. */
static void
test_vec(void **state)
{
	struct vec v = VEC_INIT(sizeof(long), 100);
	struct vec huge = VEC_INIT((size_t)-1 / 4, 8);
	long *x;
	int i;

	for (i = 0; i < 100; i++) {
		x = vec_push(&v);
		assert_non_null(x);
		assert_int_equal(*x, 0);
		*x = i;
	}
	assert_true(vec_full(&v));
	assert_null(vec_push(&v));
	assert_int_equal(v.n, 100);
	assert_true(v.cap <= 100);
	for (i = 0; i < 100; i++)
		assert_int_equal(((long *)v.p)[i], i);
	assert_int_equal(vec_reserve(&v, 1), -1);
	vec_free(&v);
	assert_null(v.p);
	assert_int_equal(v.n, 0);
	assert_int_equal(v.max, 100);
	assert_int_equal(vec_reserve(&v, 101), -1);
	assert_int_equal(vec_reserve(&v, 100), 0);
	assert_int_equal(v.n, 0);
	vec_free(&v);
	/* 16 elements of a quarter of the address space: no overflowed cap */
	assert_null(vec_push(&huge));
	assert_false(vec_full(&huge));
	assert_null(huge.p);
}

/* base_test_alloc_fail: the failed put keeps the bytes and sets over, the
 * failed push keeps n and the array is not full. Room beyond double the
 * cap is given exactly. */
static void
test_alloc_failure(void **state)
{
	struct buf b = BUF_INIT(1 << 20);
	struct vec v = VEC_INIT(sizeof(int), 100);
	char big[5000];

	memset(big, 'x', sizeof(big));
	assert_int_equal(buf_put(&b, "abc", 3), 0);
	base_test_alloc_fail = 1;
	assert_int_equal(buf_put(&b, big, sizeof(big)), -1);
	assert_int_equal(base_test_alloc_fail, 0);
	assert_true(b.over);
	assert_int_equal(b.len, 3);
	assert_string_equal((const char *)b.p, "abc");
	buf_reset(&b);
	assert_int_equal(buf_put(&b, big, sizeof(big)), 0);
	assert_int_equal(b.cap, 8192); /* powers of two from 1 KiB: 5001 bytes take 8 KiB */
	buf_free(&b);

	base_test_alloc_fail = 1;
	assert_null(vec_push(&v));
	assert_false(vec_full(&v));
	assert_int_equal(v.n, 0);
	assert_non_null(vec_push(&v));
	assert_int_equal(v.n, 1);
	vec_free(&v);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_put_grows_and_terminates),
	    cmocka_unit_test(test_max_is_a_ceiling),
	    cmocka_unit_test(test_room),
	    cmocka_unit_test(test_http_sink),
	    cmocka_unit_test(test_vec),
	    cmocka_unit_test(test_alloc_failure),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
