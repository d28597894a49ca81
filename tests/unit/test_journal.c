#include "unit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/journal.h"

static char dir[] = "/tmp/abx-journal-XXXXXX";

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
file_text(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, cap - 1);
	assert_true(n >= 0);
	buf[n] = '\0';
	close(fd);
}

static void
append_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_APPEND);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void
test_hostile_ids_and_lines(void **state)
{
	struct journal j;
	struct err e = {0};

	assert_int_equal(journal_create(&j, dir, "../escape", "{}", &e), -1);
	assert_string_equal(e.code, "request.invalid");
	assert_int_equal(journal_create(&j, dir, "", "{}", &e), -1);
	assert_int_equal(journal_create(&j, NULL, "a", "{\n}", &e), -1);
	assert_int_equal(journal_create(&j, NULL, "mem1", "{\"h\":1}", &e), 0);
	assert_int_equal(journal_append(&j, "{\"a\":\n1}", 8, &e), -1); /* a newline inside */
	assert_string_equal(e.code, "request.too_large");
	assert_int_equal(journal_append(&j, "", 0, &e), -1);
	{
		char *big = malloc(JOURNAL_LINE_MAX);

		memset(big, 'x', JOURNAL_LINE_MAX);
		assert_int_equal(journal_append(&j, big, JOURNAL_LINE_MAX, &e), -1);
		free(big);
	}
	assert_int_equal(journal_count(&j), 0);
	journal_close(&j, 0);
}

static void
test_memory_lines(void **state)
{
	struct journal j;
	struct err e = {0};
	char line[64];
	const char *p;
	size_t len;
	int i;

	assert_int_equal(journal_create(&j, NULL, "mem", "{\"h\":1}", &e), 0);
	assert_int_equal(j.fd, -1);
	for (i = 1; i <= 1000; i++) {
		snprintf(line, sizeof(line), "{\"seq\":%d}", i);
		assert_int_equal(journal_append(&j, line, strlen(line), &e), i);
	}
	assert_int_equal(journal_count(&j), 1000);
	p = journal_line(&j, 1, &len);
	assert_int_equal(len, strlen("{\"seq\":1}"));
	assert_memory_equal(p, "{\"seq\":1}", len);
	p = journal_line(&j, 1000, &len);
	assert_memory_equal(p, "{\"seq\":1000}", len);
	assert_int_equal(len, 12);
	assert_null(journal_line(&j, 0, &len));
	assert_null(journal_line(&j, 1001, &len));
	assert_int_equal(journal_bytes(&j), j.b.len);
	journal_close(&j, 0);
}

static void
test_file_roundtrip_and_partial_tail(void **state)
{
	struct journal j, k;
	struct err e = {0};
	char path[256], text[4096];
	const char *p;
	size_t len;

	assert_int_equal(journal_create(&j, dir, "as_1", "{\"object\":\"h\"}", &e), 0);
	snprintf(path, sizeof(path), "%s/as_1.jsonl", dir);
	{
		struct stat st;

		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
	}
	assert_int_equal(journal_create(&k, dir, "as_1", "{}", &e), -1); /* O_EXCL */
	assert_int_equal(journal_append(&j, "{\"seq\":1}", 9, &e), 1);
	assert_int_equal(journal_append(&j, "{\"seq\":2}", 9, &e), 2);
	journal_close(&j, 0);
	file_text(path, text, sizeof(text));
	assert_string_equal(text, "{\"object\":\"h\"}\n{\"seq\":1}\n{\"seq\":2}\n");

	/* A crash mid-write: half a line. Loading drops it and cuts the file. */
	append_text(path, "{\"seq\":3,\"ty");
	assert_int_equal(journal_load(&k, path, &e), 0);
	assert_string_equal(k.id, "as_1");
	assert_string_equal(k.header, "{\"object\":\"h\"}");
	assert_int_equal(journal_count(&k), 2);
	file_text(path, text, sizeof(text));
	assert_string_equal(text, "{\"object\":\"h\"}\n{\"seq\":1}\n{\"seq\":2}\n");
	/* Appends continue on a fresh line. */
	assert_int_equal(journal_append(&k, "{\"seq\":3}", 9, &e), 3);
	journal_close(&k, 0);
	file_text(path, text, sizeof(text));
	assert_string_equal(text, "{\"object\":\"h\"}\n{\"seq\":1}\n{\"seq\":2}\n{\"seq\":3}\n");
	assert_int_equal(journal_load(&k, path, &e), 0);
	p = journal_line(&k, 3, &len);
	assert_memory_equal(p, "{\"seq\":3}", len);
	journal_close(&k, 1);
	assert_int_equal(access(path, F_OK), -1);
}

static void
test_load_refuses_what_is_not_ours(void **state)
{
	struct journal j;
	struct err e = {0};
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/bad.jsonl", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not json\n", 9), 9);
	close(fd);
	assert_int_equal(journal_load(&j, path, &e), -1);
	assert_string_equal(e.code, "json.syntax");
	snprintf(path, sizeof(path), "%s/nonewline.jsonl", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_int_equal(write(fd, "{}", 2), 2);
	close(fd);
	assert_int_equal(journal_load(&j, path, &e), -1);
	snprintf(path, sizeof(path), "%s/missing.jsonl", dir);
	assert_int_equal(journal_load(&j, path, &e), -1);
	assert_string_equal(e.code, "io.error");
	snprintf(path, sizeof(path), "%s/x.txt", dir);
	assert_int_equal(journal_load(&j, path, &e), -1);
	/* A symlink is not followed. */
	snprintf(path, sizeof(path), "%s/link.jsonl", dir);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(journal_load(&j, path, &e), -1);
}

static void
test_bad_line_ends_the_trusted_part(void **state)
{
	struct journal j;
	struct err e = {0};
	char path[256];
	int fd;
	const char *t = "{\"h\":1}\n{\"seq\":1}\ngarbage\n{\"seq\":3}\n";

	snprintf(path, sizeof(path), "%s/mid.jsonl", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_int_equal(write(fd, t, strlen(t)), (ssize_t)strlen(t));
	close(fd);
	assert_int_equal(journal_load(&j, path, &e), 0);
	assert_int_equal(journal_count(&j), 1);
	journal_close(&j, 0);
}

/* Journals under a directory descriptor: the file is opened, loaded and
 * unlinked relative to it, while every message names <dir>/<id>.jsonl as
 * given (the path the user knows), never the descriptor's. A write that
 * fails (a full disk: /dev/full in the file's place) warns once with that
 * path and the journal goes on in memory. */
static void
test_at_a_descriptor_named_by_dir(void **state)
{
	char sub[sizeof(dir) + 8], path[sizeof(sub) + 32], log[sizeof(dir) + 16], text[1024];
	const char *line;
	struct journal j;
	struct err e = {0};
	size_t len;
	int dfd, full, saved, lfd;

	snprintf(sub, sizeof(sub), "%s/real", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	dfd = open(sub, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	assert_int_equal(journal_create_at(&j, dfd, "/state/sessions", "as_1", "{\"h\":1}", &e), 0);
	assert_string_equal(j.path, "/state/sessions/as_1.jsonl");
	assert_true(journal_append(&j, "{\"a\":1}", 7, &e) == 1);
	snprintf(path, sizeof(path), "%s/as_1.jsonl", sub);
	file_text(path, text, sizeof(text));
	assert_string_equal(text, "{\"h\":1}\n{\"a\":1}\n");

	/* the disk fills: one warning naming the display path, then memory */
	snprintf(log, sizeof(log), "%s/log", dir);
	lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	full = open("/dev/full", O_WRONLY);
	assert_true(lfd >= 0 && full >= 0);
	assert_true(dup2(full, j.fd) == j.fd);
	close(full);
	saved = dup(2);
	dup2(lfd, 2);
	assert_true(journal_append(&j, "{\"b\":2}", 7, &e) == 2);
	assert_true(journal_append(&j, "{\"c\":3}", 7, &e) == 3);
	dup2(saved, 2);
	close(saved);
	close(lfd);
	assert_int_equal(j.write_failed, 1);
	assert_non_null(journal_line(&j, 3, &len));
	file_text(log, text, sizeof(text));
	line = strstr(text, "io.error: /state/sessions/as_1.jsonl: No space left on device");
	if (line == NULL || strstr(line + 1, "io.error") != NULL || strstr(text, "/proc/") != NULL)
		fail_msg("one warning naming the path: %s", text);
	journal_close(&j, 0);

	/* loaded under the descriptor, named by dir; unlinked there */
	assert_int_equal(journal_load_at(&j, dfd, "/state/sessions", "as_1.jsonl", &e), 0);
	assert_string_equal(j.path, "/state/sessions/as_1.jsonl");
	assert_string_equal(j.id, "as_1");
	assert_int_equal(journal_count(&j), 1);
	journal_close(&j, 1);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(journal_load_at(&j, dfd, "/state/sessions", "as_1.jsonl", &e), -1);
	assert_non_null(strstr(e.msg, "/state/sessions/as_1.jsonl: No such file"));
	close(dfd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hostile_ids_and_lines),
	    cmocka_unit_test(test_memory_lines),
	    cmocka_unit_test(test_file_roundtrip_and_partial_tail),
	    cmocka_unit_test(test_load_refuses_what_is_not_ours),
	    cmocka_unit_test(test_bad_line_ends_the_trusted_part),
	    cmocka_unit_test(test_at_a_descriptor_named_by_dir),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
