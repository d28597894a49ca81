#include "unit.h"

#include <fcntl.h>
#include <unistd.h>

#include "server/journal.h"

/* journal_reserve / journal_commit: a line written in place. */

static char dir[] = "/tmp/abx-jres-XXXXXX";

static int
setup(void **state)
{
	return mkdtemp(dir) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	return unit_rmtree(dir);
}

static void
put(struct journal *j, const char *text, int64_t want)
{
	struct err e = {0};
	char *p = journal_reserve(j, 64);

	assert_non_null(p);
	memcpy(p, text, strlen(text));
	assert_int_equal(journal_commit(j, strlen(text), &e), want);
}

static void
test_in_place_lines_reach_memory_and_file(void **state)
{
	struct journal j, k;
	struct err e = {0};
	char path[256], buf[512];
	const char *l;
	size_t n;
	ssize_t got;
	int fd;

	assert_int_equal(journal_create(&j, dir, "r1", "{\"h\":1}", &e), 0);
	put(&j, "{\"a\":1}", 1);
	j.defer = 1;
	put(&j, "{\"b\":2}", 2);
	assert_int_equal(journal_append(&j, "{\"c\":3}", 7, &e), 3);
	put(&j, "{\"d\":4}", 4);
	j.defer = 0;
	journal_flush(&j);
	l = journal_line(&j, 2, &n);
	assert_non_null(l);
	assert_int_equal(n, 7);
	assert_memory_equal(l, "{\"b\":2}", 7);
	assert_int_equal(journal_bytes(&j), 32);
	snprintf(path, sizeof(path), "%s/r1.jsonl", dir);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(got >= 0);
	buf[got] = '\0';
	assert_string_equal(buf, "{\"h\":1}\n{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n{\"d\":4}\n");
	journal_close(&j, 0);
	assert_int_equal(journal_load(&k, path, &e), 0);
	assert_int_equal(journal_count(&k), 4);
	journal_close(&k, 1);
}

static void
test_commit_is_bounded_by_the_reservation(void **state)
{
	struct journal j;
	struct err e = {0};
	char *p;

	assert_int_equal(journal_create(&j, NULL, "r2", "{}", &e), 0);
	/* No reservation: nothing to commit. */
	assert_int_equal(journal_commit(&j, 2, &e), -1);
	/* More than was reserved. */
	p = journal_reserve(&j, 4);
	assert_non_null(p);
	memcpy(p, "{\"x\":1}", 7);
	assert_int_equal(journal_commit(&j, 7, &e), -1);
	assert_string_equal(e.code, "request.too_large");
	/* A reservation is used once. */
	p = journal_reserve(&j, 8);
	memcpy(p, "{}", 2);
	assert_int_equal(journal_commit(&j, 2, &e), 1);
	assert_int_equal(journal_commit(&j, 2, &e), -1);
	/* An append in between forgets the reservation. */
	p = journal_reserve(&j, 8);
	assert_non_null(p);
	assert_int_equal(journal_append(&j, "{\"y\":2}", 7, &e), 2);
	assert_int_equal(journal_commit(&j, 2, &e), -1);
	/* Empty, a newline inside, too long. */
	p = journal_reserve(&j, 8);
	assert_int_equal(journal_commit(&j, 0, &e), -1);
	p = journal_reserve(&j, 8);
	memcpy(p, "{\n}", 3);
	assert_int_equal(journal_commit(&j, 3, &e), -1);
	assert_null(journal_reserve(&j, JOURNAL_LINE_MAX));
	assert_int_equal(journal_count(&j), 2);
	assert_int_equal(journal_bytes(&j), 3 + 8);
	journal_close(&j, 0);
}

/* journal_reserve_lines / journal_prewrite / journal_append_lines: a block
 * of lines formatted elsewhere reaches the file first, then memory, in
 * order with single appends; the line ceiling cuts a block at a line. */
static void
test_block_of_lines(void **state)
{
	static const char block[] = "{\"b\":1}\n{\"b\":22}\n{\"b\":333}\n";
	const uint32_t off[] = {0, 8, 17};
	struct journal j, k;
	struct err e = {0};
	char path[256], buf[512];
	const char *l;
	size_t n;
	ssize_t got;
	int fd;

	assert_int_equal(journal_create(&j, dir, "r3", "{\"h\":3}", &e), 0);
	assert_int_equal(journal_append(&j, "{\"a\":0}", 7, &e), 1);
	assert_int_equal(journal_reserve_lines(&j, sizeof(block) - 1, 3), 3);
	assert_int_equal(journal_prewrite(&j, block, sizeof(block) - 1), 1);
	snprintf(path, sizeof(path), "%s/r3.jsonl", dir);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(got >= 0);
	buf[got] = '\0';
	/* in the file before readers can see it */
	assert_string_equal(buf, "{\"h\":3}\n{\"a\":0}\n{\"b\":1}\n{\"b\":22}\n{\"b\":333}\n");
	assert_int_equal(journal_count(&j), 1);
	assert_int_equal(journal_append_lines(&j, block, sizeof(block) - 1, off, 3, 1), 4);
	l = journal_line(&j, 3, &n);
	assert_non_null(l);
	assert_int_equal(n, 8);
	assert_memory_equal(l, "{\"b\":22}", 8);
	l = journal_line(&j, 4, &n);
	assert_int_equal(n, 9);
	assert_memory_equal(l, "{\"b\":333}", 9);
	/* nothing is written twice */
	assert_int_equal(journal_append(&j, "{\"c\":4}", 7, &e), 5);
	/* with deferred bytes waiting, prewrite declines and the block goes
	 * through journal_flush in order */
	j.defer = 1;
	assert_int_equal(journal_append(&j, "{\"d\":5}", 7, &e), 6);
	assert_int_equal(journal_reserve_lines(&j, sizeof(block) - 1, 3), 3);
	assert_int_equal(journal_prewrite(&j, block, sizeof(block) - 1), 0);
	assert_int_equal(journal_append_lines(&j, block, sizeof(block) - 1, off, 3, 0), 9);
	j.defer = 0;
	journal_flush(&j);
	journal_close(&j, 0);
	assert_int_equal(journal_load(&k, path, &e), 0);
	assert_int_equal(journal_count(&k), 9);
	l = journal_line(&k, 9, &n);
	assert_memory_equal(l, "{\"b\":333}", 9);
	l = journal_line(&k, 6, &n);
	assert_memory_equal(l, "{\"d\":5}", 7);
	journal_close(&k, 1);

	/* no room reserved: refused, nothing added */
	assert_int_equal(journal_create(&j, NULL, "r4", "{\"h\":4}", &e), 0);
	assert_int_equal(journal_append_lines(&j, block, sizeof(block) - 1, off, 3, 0), -1);
	assert_int_equal(journal_count(&j), 0);
	/* the line ceiling: a block is cut to what fits */
	j.n = JOURNAL_LINES_MAX - 2;
	assert_int_equal(journal_reserve_lines(&j, sizeof(block) - 1, 3), 2);
	j.n = JOURNAL_LINES_MAX;
	assert_int_equal(journal_reserve_lines(&j, sizeof(block) - 1, 3), 0);
	j.n = 0;
	assert_int_equal(journal_prewrite(&j, block, sizeof(block) - 1), 1);
	journal_close(&j, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_in_place_lines_reach_memory_and_file),
	    cmocka_unit_test(test_commit_is_bounded_by_the_reservation),
	    cmocka_unit_test(test_block_of_lines),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
