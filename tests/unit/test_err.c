#include "unit.h"
#include <errno.h>
#include "base/err.h"
#include "base/json.h"

static void
test_unknown_code_maps_to_internal(void **state)
{
	assert_string_equal(err_info("no.such.code")->code, "internal");
	assert_string_equal(err_info(NULL)->code, "internal");
}

static void
test_status_and_remedy(void **state)
{
	assert_int_equal(err_info("install.pending")->status, 202);
	assert_int_equal(err_info("install.no_space")->status, 507);
	assert_int_equal(err_info("auth.missing")->status, 401);
	assert_int_equal(err_info("policy.denied")->status, 403);
	assert_int_equal(err_info("json.too_large")->status, 413);
	assert_non_null(err_info("install.read_only")->remedy);
}

static void
test_format_one_line_and_fix(void **state)
{
	struct err e = {0};
	char buf[1024];

	assert_int_equal(err_set(&e, "install.checksum_mismatch", "codex: expected %s", "3f1c"), -1);
	err_format(&e, buf, sizeof(buf));
	assert_non_null(
	    strstr(buf, "agent-sandbox-server: install.checksum_mismatch: codex: expected 3f1c\n  fix: "));
	err_set(&e, "request.invalid", NULL);
	err_format(&e, buf, sizeof(buf));
	assert_string_equal(buf, "agent-sandbox-server: request.invalid: the request is malformed\n");
}

static void
test_format_truncates_and_ends_in_newline(void **state)
{
	struct err e = {0};
	char buf[40];
	char big[ERR_MSG_MAX + 200];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	err_set(&e, "internal", "%s", big);
	assert_int_equal(strlen(e.msg), ERR_MSG_MAX - 1);
	assert_string_equal(e.msg + ERR_MSG_MAX - 4, "\xe2\x80\xa6");
	assert_int_equal(err_format(&e, buf, sizeof(buf)), 39);
	assert_int_equal(buf[38], '\n');
}

/* A message cut where a multi-byte character straddles the end loses the
 * whole character, not half of it, and says it was cut. */
static void
test_cut_at_a_character_boundary(void **state)
{
	static const char *const ch[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x93\x81"};
	char big[ERR_MSG_MAX + 16];
	struct err e = {0};
	size_t pad, n, i, k;

	for (k = 0; k < 3; k++) {
		n = strlen(ch[k]);
		for (pad = 0; pad < n; pad++) {
			memset(big, 'x', sizeof(big));
			for (i = pad; i + n < sizeof(big); i += n)
				memcpy(big + i, ch[k], n);
			big[sizeof(big) - 1] = '\0';
			err_set(&e, "internal", "%s", big);
			size_t len = strlen(e.msg);
			assert_true(len <= ERR_MSG_MAX - 1 && len >= ERR_MSG_MAX - 1 - n);
			assert_string_equal(e.msg + len - 3, "\xe2\x80\xa6");
			/* before the ellipsis: whole characters after the pad */
			assert_int_equal((len - 3 - pad) % n, 0);
		}
	}
	/* a message that fits is not touched */
	err_set(&e, "internal", "%s", "caf\xc3\xa9");
	assert_string_equal(e.msg, "caf\xc3\xa9");
}

#define MARK "\xe2\x80\xa6"

static int
err_fmtv_test(char *buf, size_t cap, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = err_fmtv(buf, cap, fmt, ap);
	va_end(ap);
	return n;
}

/* The one mark in msg, checked to be alone; NULL when there is none. */
static const char *
one_mark(const char *msg)
{
	const char *m = strstr(msg, MARK);

	if (m != NULL)
		assert_null(strstr(m + 3, MARK));
	return m;
}

/* Whole UTF-8 characters only (a JSON body carries the message). */
static void
assert_utf8(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	int k;

	while (*p) {
		k = *p < 0x80 ? 0 : *p >= 0xF0 ? 3 : *p >= 0xE0 ? 2 : *p >= 0xC0 ? 1 : -1;
		assert_true(k >= 0);
		for (p++; k > 0; k--, p++)
			assert_int_equal(*p & 0xC0, 0x80);
	}
}

/* A message with a path of ~1000 bytes: the path loses its middle, at
 * component boundaries, and keeps its head, its last component and all
 * the text around it; the message uses the room it has. */
static void
test_long_path_loses_its_middle(void **state)
{
	char path[1200], full[1400];
	const char *m, *tail;
	struct err e = {0};
	size_t n = 0, len, h, i;

	n = (size_t)snprintf(path, sizeof(path), "/tmp/root/file");
	for (i = 1; i <= 55; i++)
		n += (size_t)snprintf(path + n, sizeof(path) - n, "/segment-number-%zu", i);
	snprintf(
	    full, sizeof(full),
	    "tools directory %s (env ABX_TOOLS_DIR): cannot create directory /tmp/root/file: Not a directory",
	    path);
	err_set(&e, "install.read_only",
	        "tools directory %s (env ABX_TOOLS_DIR): cannot create directory %s: %s", path,
	        "/tmp/root/file", "Not a directory");
	len = strlen(e.msg);
	assert_true(len <= ERR_MSG_MAX - 1 && len > ERR_MSG_MAX - 1 - 40);
	m = one_mark(e.msg);
	assert_non_null(m);
	/* before the mark: the message's start, the path's head up to a '/' */
	h = (size_t)(m - e.msg);
	assert_memory_equal(e.msg, full, h);
	assert_true(h > strlen("tools directory /tmp/root/file/"));
	assert_int_equal(m[-1], '/');
	/* after it: the rest of the message, from a '/' of the path on */
	tail = m + 3;
	assert_int_equal(tail[0], '/');
	assert_string_equal(tail, full + strlen(full) - strlen(tail));
	assert_non_null(strstr(tail, "/segment-number-55 (env ABX_TOOLS_DIR): cannot create directory "
	                             "/tmp/root/file: Not a directory"));
	assert_int_equal(e.msg[len], '\0');
}

/* Two long paths: each keeps its own head and name; a name longer than
 * the room keeps its end; multibyte characters are never split. */
static void
test_two_paths_and_long_names(void **state)
{
	char a[700], b[700], big[ERR_MSG_MAX * 3];
	const char *m;
	struct err e = {0};
	size_t i;

	memset(a, 'a', sizeof(a));
	memcpy(a, "/src/", 5);
	memcpy(a + 600, "/from-name.txt", 15);
	memset(b, 'b', sizeof(b));
	memcpy(b, "/dst/", 5);
	memcpy(b + 600, "/to-name.txt", 13);
	err_set(&e, "io.error", "cannot rename %s to %s: %s", a, b, "No space left on device");
	assert_true(strlen(e.msg) <= ERR_MSG_MAX - 1);
	assert_non_null(strstr(e.msg, "cannot rename /src/aaa"));
	assert_non_null(strstr(e.msg, "/from-name.txt to /dst/bbb"));
	assert_non_null(strstr(e.msg, "/to-name.txt: No space left on device"));
	m = strstr(e.msg, MARK);
	assert_true(m != NULL && m < strstr(e.msg, "/from-name.txt"));
	m = strstr(m + 3, MARK);
	assert_true(m != NULL && m > strstr(e.msg, " to ") && m < strstr(e.msg, "/to-name.txt"));
	assert_null(strstr(m + 3, MARK));

	/* one component of 1,800 bytes of "é": the end of the name stays */
	memcpy(big, "/d/", 3);
	for (i = 3; i + 2 < sizeof(big) - 10; i += 2)
		memcpy(big + i, "\xc3\xa9", 2);
	memcpy(big + i, ".json", 6);
	err_set(&e, "config.invalid", "%s: not JSON", big);
	assert_true(strlen(e.msg) <= ERR_MSG_MAX - 1);
	assert_utf8(e.msg);
	m = one_mark(e.msg);
	assert_non_null(m);
	assert_memory_equal(e.msg, "/d/\xc3\xa9", 5);
	assert_non_null(strstr(m, "\xc3\xa9.json: not JSON"));
}

/* A message wrapped around an elided one stays within bounds with one
 * mark, keeps the inner cause's code and the end of its text; text with
 * no path is cut at its end; err_fmtv fits any buffer the same way. */
static void
test_wrap_of_an_elided_message(void **state)
{
	char path[1500], pre[600], buf[100];
	struct err e = {0};
	size_t i;

	for (i = 0; i + 10 < sizeof(path); i += 10)
		memcpy(path + i, "/component", 10);
	path[i] = '\0';
	strcat(path, "/leaf");
	err_sys(&e, "io.error", ENOTDIR, "cannot stat %s: %s", path, "Not a directory");
	for (i = 0; i + 8 < sizeof(pre); i += 8)
		memcpy(pre + i, "/wrapper", 8);
	pre[i] = '\0';
	err_wrap(&e, "install.failed", "tool 1.0 in %s/tool: %s", pre, e.msg);
	assert_true(strlen(e.msg) <= ERR_MSG_MAX - 1);
	assert_string_equal(e.code, "install.failed");
	assert_string_equal(e.cause, "io.error");
	assert_int_equal(e.sys, ENOTDIR);
	assert_memory_equal(e.msg, "tool 1.0 in /wrapper/wrapper", 28);
	assert_non_null(strstr(e.msg, "/wrapper/tool: cannot stat /component"));
	assert_non_null(strstr(e.msg, "/leaf: Not a directory"));
	/* each path elided once, the inner mark gone with its middle */
	assert_non_null(strstr(e.msg, MARK));
	assert_non_null(strstr(strstr(e.msg, "cannot stat"), MARK));
	assert_null(strstr(strstr(strstr(e.msg, "cannot stat"), MARK) + 3, MARK));

	/* twenty paths: each elided to the floor, then the end cut */
	err_set(&e, "internal", "%s %s %s %s %s %s %s %s %s %s %s %s %s %s %s %s %s %s %s %s", path, path,
	        path, path, path, path, path, path, path, path, path, path, path, path, path, path, path,
	        path, path, path);
	assert_true(strlen(e.msg) <= ERR_MSG_MAX - 1 && strlen(e.msg) >= ERR_MSG_MAX - 3);
	assert_string_equal(e.msg + strlen(e.msg) - 3, MARK);
	assert_memory_equal(e.msg, "/component", 10);
	assert_true(strstr(e.msg, " ") - e.msg <= 48);
	assert_non_null(strstr(e.msg, "/leaf /component"));

	assert_int_equal(err_fmtv_test(buf, sizeof(buf), "file %s: %s", path, "bad"), strlen(buf));
	assert_true(strlen(buf) < sizeof(buf));
	assert_memory_equal(buf, "file /component", 15);
	assert_non_null(strstr(buf, "/leaf: bad"));
	assert_non_null(one_mark(buf));
}

/* Random messages of words and paths (ASCII and multibyte components):
 * the result fits, is whole characters, is the message itself when that
 * fits, else carries the mark; when the words and 48 bytes a path fit
 * easily, every word and every path's first and last components stay. */
static void
test_random_messages_fit(void **state)
{
	static const char *const ch[] = {"a", "b", "z", "0", "-", ".", "\xc3\xa9", "\xe2\x82\xac"};
	char msg[16384], *words[64];
	unsigned seed = 42, k, i, j, nw, np, wlen, cut = 0, checked = 0;
	struct err e = {0};
	size_t n;

#define RND(m) ((seed = seed * 1103515245u + 12345u) >> 16) % (m)
	for (k = 0; k < 3000; k++) {
		n = 0, nw = np = wlen = 0;
		for (i = 0, j = 1 + RND(60); i < j && n < sizeof(msg) - 4000; i++) {
			int path = RND(3) == 0;
			unsigned c, nc = path ? 1 + RND(40) : 1, l;
			if (i > 0)
				msg[n++] = ' ';
			words[nw++] = msg + n;
			for (c = 0; c < nc; c++) {
				if (path)
					msg[n++] = '/';
				for (l = 1 + RND(path ? 20 : 8); l > 0; l--) {
					const char *x = ch[RND(path ? 8 : 3)];
					memcpy(msg + n, x, strlen(x));
					n += strlen(x);
				}
			}
			np += path, wlen += path ? 0 : (unsigned)(msg + n - words[nw - 1]) + 1;
		}
		msg[n] = '\0';
		err_set(&e, "internal", "%s", msg);
		assert_true(strlen(e.msg) <= ERR_MSG_MAX - 1);
		assert_utf8(e.msg);
		if (n < ERR_MSG_MAX) {
			assert_string_equal(e.msg, msg);
			continue;
		}
		assert_non_null(strstr(e.msg, MARK));
		cut++;
		if (wlen + np * 49 > 400)
			continue;
		checked++;
		for (i = 0; i < nw; i++) {
			char w[4096], *sp = strchr(words[i], ' '), *last;
			size_t wl = sp ? (size_t)(sp - words[i]) : strlen(words[i]);
			memcpy(w, words[i], wl);
			w[wl] = '\0';
			if (w[0] != '/') {
				assert_non_null(strstr(e.msg, w));
				continue;
			}
			last = strrchr(w, '/');
			if (strlen(last) < 30)
				assert_non_null(strstr(e.msg, last));
			if ((sp = strchr(w + 1, '/')) != NULL && sp - w < 12) {
				*sp = '\0';
				assert_non_null(strstr(e.msg, w));
			}
		}
	}
#undef RND
	assert_true(cut > 500 && checked > 200);
}

static void
test_details_too_long_becomes_empty_object(void **state)
{
	struct err e = {0};
	char big[ERR_DETAILS_MAX + 10], ed[ERR_DETAILS_MAX];

	err_keep_details(&e, ed, sizeof(ed));
	err_set(&e, "install.failed", "x");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	err_details(&e, big);
	assert_string_equal(err_details_text(&e), "{}");
	err_details(&e, "{\"phase\":\"fetch\"}");
	assert_string_equal(err_details_text(&e), "{\"phase\":\"fetch\"}");
	err_set(NULL, "internal", "ignored");
}

/* Without a buffer nothing is kept (and nothing written anywhere); a copy
 * carries the details into the destination's own buffer, or drops them. */
static void
test_details_only_where_kept(void **state)
{
	struct err e = {0}, into = {0}, none = {0};
	char ed[ERR_DETAILS_MAX], id[32], small[8];

	err_set(&e, "install.failed", "no buffer");
	assert_int_equal(err_detail_str(&e, "phase", "fetch"), -1);
	assert_int_equal(err_detail_int(&e, "n", 1), -1);
	err_details(&e, "{\"a\":1}");
	assert_null(e.details);
	assert_string_equal(err_details_text(&e), "");
	assert_string_equal(err_details_text(NULL), "");

	err_keep_details(&e, ed, sizeof(ed));
	err_set(&e, "install.failed", "kept");
	assert_int_equal(err_detail_str(&e, "phase", "fetch"), 0);
	e.sys = 5;
	err_keep_details(&into, id, sizeof(id));
	err_copy(&into, &e);
	assert_string_equal(into.code, "install.failed");
	assert_string_equal(into.msg, "kept");
	assert_int_equal(into.sys, 5);
	assert_ptr_equal(into.details, id);
	assert_string_equal(err_details_text(&into), "{\"phase\":\"fetch\"}");
	/* the destination's buffer too small for them: an empty object */
	err_keep_details(&into, small, sizeof(small));
	err_copy(&into, &e);
	assert_string_equal(err_details_text(&into), "{}");
	/* no buffer in the destination: the copy has no details */
	err_copy(&none, &e);
	assert_null(none.details);
	assert_string_equal(none.msg, "kept");
	/* copying a source without details empties the destination's */
	err_copy(&into, &none);
	assert_string_equal(err_details_text(&into), "");
	/* err_clear empties them and keeps the buffer */
	err_detail_str(&e, "x", "y");
	err_clear(&e);
	assert_ptr_equal(e.details, ed);
	assert_string_equal(err_details_text(&e), "");
	/* a buffer too small for "{}" keeps nothing */
	err_keep_details(&e, small, 2);
	assert_int_equal(err_detail_str(&e, "a", "b"), -1);
}

/* Details member by member: a path, a URL, a message with a quote, a
 * backslash, a newline and control bytes read back as the same bytes; a
 * member that does not fit is left out whole and the object stays valid;
 * err_set empties it. */
static void
test_detail_members_round_trip(void **state)
{
	static const char odd[] = "/tmp/q\"b\\s\nx\001\037\tend";
	char big[ERR_DETAILS_MAX], k[16];
	struct json_doc d;
	struct err e = {0}, pe = {0};
	char ed[ERR_DETAILS_MAX];
	int i;

	err_keep_details(&e, ed, sizeof(ed));
	err_set(&e, "install.failed", "x");
	assert_string_equal(e.details, "");
	assert_int_equal(err_detail_str(&e, "path", odd), 0);
	assert_int_equal(err_detail_int(&e, "limit", -42), 0);
	assert_int_equal(err_detail_json(&e, "list", "[\"a\",1]"), 0);
	assert_int_equal(err_detail_str(&e, "k\"ey", NULL), 0);
	assert_int_equal(json_parse(&d, e.details, strlen(e.details), NULL, &pe), 0);
	assert_string_equal(json_get_str(d.root, "path"), odd);
	assert_int_equal(json_get(d.root, "limit")->u.num.i, -42);
	assert_int_equal(json_get(d.root, "list")->u.arr.n, 2);
	assert_true(json_is(json_get(d.root, "k\"ey"), JSON_NULL));
	json_free(&d);

	/* too big: left out, the rest kept as it was */
	memset(big, 1, sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(err_detail_str(&e, "big", big), -1);
	assert_int_equal(json_parse(&d, e.details, strlen(e.details), NULL, &pe), 0);
	assert_null(json_get(d.root, "big"));
	assert_string_equal(json_get_str(d.root, "path"), odd);
	json_free(&d);
	/* filled to the last byte, never past it */
	for (i = 0; snprintf(k, sizeof(k), "p%d", i), err_detail_str(&e, k, "0123456789") == 0; i++)
		assert_true(strlen(e.details) < sizeof(ed));
	assert_true(strlen(e.details) > sizeof(ed) - 30);
	assert_int_equal(json_parse(&d, e.details, strlen(e.details), NULL, &pe), 0);
	json_free(&d);

	err_set(&e, "install.failed", "y");
	assert_string_equal(e.details, "");
	assert_int_equal(err_detail_str(NULL, "a", "b"), -1);
}

static void
test_message_may_quote_itself(void **state)
{
	struct err e = {0};

	err_set(&e, "http.url", "bad host %s", "x");
	err_set(&e, "http.proxy", "bad proxy URL: %s", e.msg);
	assert_string_equal(e.msg, "bad proxy URL: bad host x");
}

static void
test_wrap_keeps_sys_and_cause(void **state)
{
	struct err e = {0}, copy = {0};

	err_sys(&e, "io.error", ENOSPC, "writing x: %s", "disk says no");
	err_wrap(&e, "install.failed", "kd 1.0: %s", e.msg);
	assert_string_equal(e.code, "install.failed");
	assert_string_equal(e.msg, "kd 1.0: writing x: disk says no");
	assert_int_equal(e.sys, ENOSPC);
	assert_string_equal(e.cause, "io.error");
	/* a second wrap keeps the innermost cause; a copy keeps both */
	err_wrap(&e, "install.failed", "again: %s", e.msg);
	err_copy(&copy, &e);
	assert_string_equal(copy.cause, "io.error");
	assert_int_equal(copy.sys, ENOSPC);
	assert_string_equal(err_root(&copy), "io.error");
	/* err_set starts afresh; err_clear forgets */
	err_set(&e, "install.failed", "other");
	assert_int_equal(e.sys, 0);
	assert_null(e.cause);
	assert_string_equal(err_root(&e), "install.failed");
	err_sys(&e, "io.error", EIO, "x");
	err_clear(&e);
	assert_int_equal(e.sys, 0);
	assert_null(e.cause);
}

static void
test_every_code_is_unique_and_dotted_or_known(void **state)
{
	int n, i, j;
	const struct err_info *t = err_table(&n);

	assert_true(n > 30);
	for (i = 0; i < n; i++) {
		assert_true(t[i].status >= 200 && t[i].status < 600);
		for (j = i + 1; j < n; j++)
			assert_string_not_equal(t[i].code, t[j].code);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unknown_code_maps_to_internal),
	    cmocka_unit_test(test_status_and_remedy),
	    cmocka_unit_test(test_format_one_line_and_fix),
	    cmocka_unit_test(test_format_truncates_and_ends_in_newline),
	    cmocka_unit_test(test_cut_at_a_character_boundary),
	    cmocka_unit_test(test_long_path_loses_its_middle),
	    cmocka_unit_test(test_two_paths_and_long_names),
	    cmocka_unit_test(test_wrap_of_an_elided_message),
	    cmocka_unit_test(test_random_messages_fit),
	    cmocka_unit_test(test_details_too_long_becomes_empty_object),
	    cmocka_unit_test(test_details_only_where_kept),
	    cmocka_unit_test(test_message_may_quote_itself),
	    cmocka_unit_test(test_every_code_is_unique_and_dotted_or_known),
	    cmocka_unit_test(test_wrap_keeps_sys_and_cause),
	    cmocka_unit_test(test_detail_members_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
