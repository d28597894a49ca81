/* core/server/tokfile: the token file's states (missing, empty, not a
 * token, read), replacement, the sandbox id that voids a token read in
 * another sandbox until the file is written again. Each step calls
 * tokfile_check itself, so nothing waits for the watch thread. */
#include "unit.h"

#include "base/digest.h"
#include "server/tokfile.h"

static char dir[64], tpath[128], ipath[128];

static void
put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int
matches(struct tokfile *t, const char *tok)
{
	struct digest d;

	digest_buf(DIGEST_SHA256, tok, strlen(tok), &d);
	return tokfile_match(t, d.v);
}

static const char *
why(struct tokfile *t, struct err *e)
{
	err_clear(e);
	if (tokfile_ready(t, e) == 0)
		return "";
	assert_string_equal(e->code, "server.not_initialised");
	return e->msg;
}

static void
test_states_and_rotation(void **st)
{
	static struct tokfile t;
	char big[700];
	struct err e = {0};
	char ed[ERR_DETAILS_MAX];

	err_keep_details(&e, ed, sizeof(ed));

	assert_int_equal(tokfile_start(&t, tpath, ipath, &e), 0);
	assert_non_null(strstr(why(&t, &e), "is missing"));
	assert_non_null(strstr(e.details, tpath));
	assert_int_equal(matches(&t, ""), 0);
	put(tpath, " \n\t\n");
	tokfile_check(&t);
	assert_non_null(strstr(why(&t, &e), "is empty"));
	put(tpath, "two words\n");
	tokfile_check(&t);
	assert_non_null(strstr(why(&t, &e), "does not hold a token"));
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	put(tpath, big);
	tokfile_check(&t);
	assert_non_null(strstr(why(&t, &e), "does not hold a token"));
	put(tpath, "\n first \r\n");
	tokfile_check(&t);
	assert_string_equal(why(&t, &e), "");
	assert_int_equal(matches(&t, "first"), 1);
	assert_int_equal(matches(&t, "first\n"), 0);
	assert_int_equal(matches(&t, "firs"), 0);
	put(tpath, "second");
	tokfile_check(&t);
	assert_int_equal(matches(&t, "second"), 1);
	assert_int_equal(matches(&t, "first"), 0);
	unlink(tpath);
	tokfile_check(&t);
	assert_int_equal(matches(&t, "second"), 0);
	assert_non_null(strstr(why(&t, &e), "is missing"));
}

static void
test_sandbox_id(void **st)
{
	static struct tokfile t;
	char tmp[140];
	struct err e = {0};

	put(ipath, "sbx-a\n");
	put(tpath, "tok");
	assert_int_equal(tokfile_start(&t, tpath, ipath, &e), 0);
	assert_int_equal(matches(&t, "tok"), 1);
	/* the same sandbox, read again: still valid */
	tokfile_check(&t);
	assert_int_equal(matches(&t, "tok"), 1);
	put(ipath, "sbx-b\n");
	tokfile_check(&t);
	assert_int_equal(matches(&t, "tok"), 0);
	assert_non_null(strstr(why(&t, &e), "another sandbox"));
	/* back to sbx-a or not: void until the file is written again */
	tokfile_check(&t);
	assert_int_equal(matches(&t, "tok"), 0);
	/* written again with the same token, in place */
	unit_clock_past_ctime(tpath);
	put(tpath, "tok");
	tokfile_check(&t);
	assert_int_equal(matches(&t, "tok"), 1);
	/* no id file: no platform, nothing compared */
	unlink(ipath);
	tokfile_check(&t);
	assert_int_equal(matches(&t, "tok"), 1);
	/* an id that appears after the token was read is another sandbox */
	put(ipath, "sbx-c");
	tokfile_check(&t);
	assert_int_equal(matches(&t, "tok"), 0);
	/* renamed into place, as a platform's file API does */
	snprintf(tmp, sizeof(tmp), "%s.tmp", tpath);
	put(tmp, "tok2\n");
	assert_int_equal(rename(tmp, tpath), 0);
	tokfile_check(&t);
	assert_int_equal(matches(&t, "tok2"), 1);
	unlink(ipath);
	unlink(tpath);
}

static void
test_path_too_long(void **st)
{
	static struct tokfile t;
	char p[2000];
	struct err e = {0};

	memset(p, 'a', sizeof(p) - 1);
	p[sizeof(p) - 1] = '\0';
	err_clear(&e);
	assert_int_equal(tokfile_start(&t, p, "", &e), -1);
	assert_string_equal(e.code, "config.invalid");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_states_and_rotation),
	    cmocka_unit_test(test_sandbox_id),
	    cmocka_unit_test(test_path_too_long),
	};
	int rc;

	snprintf(dir, sizeof(dir), "/tmp/abx-tokfile.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(tpath, sizeof(tpath), "%s/token", dir);
	snprintf(ipath, sizeof(ipath), "%s/id", dir);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	unit_rmtree(dir);
	return rc;
}
