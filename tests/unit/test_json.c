#include "unit.h"
#include "base/json.h"

#include <limits.h>
#include <math.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ---- */

/* Parse a copy of exactly len bytes, so ASan catches any read past the end. */
static int
parse_n(struct json_doc *doc, const char *text, size_t len, const struct json_limits *lim, struct err *e)
{
	char *copy = malloc(len ? len : 1);
	int rc;

	assert_non_null(copy);
	memcpy(copy, text, len);
	err_clear(e);
	rc = json_parse(doc, copy, len, lim, e);
	/* The tree must not point into the input. */
	memset(copy, 'X', len);
	free(copy);
	if (rc < 0) {
		assert_null(doc->root);
		assert_null(doc->arena);
		assert_non_null(e->code);
	}
	return rc;
}

static void
expect_fail_n(const char *text, size_t len, const struct json_limits *lim, const char *code, const char *msg)
{
	struct json_doc doc;
	struct err e = {0};

	if (parse_n(&doc, text, len, lim, &e) == 0) {
		json_free(&doc);
		fail_msg("parsed but should fail: %.*s", (int)len, text);
	}
	if (strcmp(e.code, code) != 0)
		fail_msg("%.*s: got %s \"%s\", want %s", (int)len, text, e.code, e.msg, code);
	if (msg != NULL && strcmp(e.msg, msg) != 0)
		fail_msg("%.*s: got \"%s\", want \"%s\"", (int)len, text, e.msg, msg);
	json_free(&doc);
}

static void
expect_fail(const char *text, const char *code, const char *msg)
{
	expect_fail_n(text, strlen(text), NULL, code, msg);
}

/* Parse text, write it, return the written text (caller frees). */
static char *
rewrite_n(const char *text, size_t len, const struct json_limits *lim)
{
	struct json_doc doc;
	struct json_w w;
	struct err e = {0};
	char *out;

	if (parse_n(&doc, text, len, lim, &e) < 0)
		fail_msg("%.*s: %s %s", (int)len, text, e.code, e.msg);
	json_w_init(&w, 64u << 20);
	json_w_val(&w, doc.root);
	assert_false(w.overflow);
	out = strdup(w.buf);
	json_w_free(&w);
	json_free(&doc);
	return out;
}

static void
expect_rewrite(const char *in, const char *want)
{
	char *out = rewrite_n(in, strlen(in), NULL);

	assert_string_equal(out, want);
	free(out);
}

static const char sample[] =
    "{\n"
    "  \"name\": \"caf\\u00e9 \\ud83d\\ude00 \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\",\n"
    "  \"esc\": \"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0000\",\n"
    "  \"nums\": [0, -0, 1, -1, 12.5e-3, 1E+2, 9223372036854775807, -9223372036854775808],\n"
    "  \"lits\": [true, false, null],\n"
    "  \"nested\": {\"a\": [{}, [], [[{\"b\": \"\"}]]]},\n"
    "  \"empty\": \"\"\n"
    "}";

/* ---- hostile cases first ---- */

static void
test_truncated_at_every_offset(void **state)
{
	size_t n = strlen(sample), i;
	struct json_doc doc;
	struct err e = {0};

	for (i = 0; i < n; i++) {
		if (parse_n(&doc, sample, i, NULL, &e) == 0) {
			json_free(&doc);
			fail_msg("prefix of %zu bytes parsed", i);
		}
		assert_true(strcmp(e.code, "json.syntax") == 0 || strcmp(e.code, "json.encoding") == 0);
		/* Every message starts with line:col. */
		assert_true(e.msg[0] >= '1' && e.msg[0] <= '9');
		assert_non_null(strchr(e.msg, ':'));
		json_free(&doc); /* safe on a failed parse */
	}
	assert_int_equal(parse_n(&doc, sample, n, NULL, &e), 0);
	json_free(&doc);
	json_free(&doc); /* twice is safe */
}

static void
test_every_prefix_of_scalars(void **state)
{
	static const char *docs[] = {"true",        "false",    "null", "\"abc\"",
	                             "\"\\u00e9\"", "-12.5e+3", "[1]",  "{\"a\":1}"};
	size_t d, i;
	struct json_doc doc;
	struct err e = {0};

	for (d = 0; d < sizeof(docs) / sizeof(docs[0]); d++) {
		size_t n = strlen(docs[d]);

		for (i = 0; i < n; i++) {
			/* Prefixes of numbers may be numbers ("-12"): skip those. */
			if (docs[d][0] == '-' && i >= 2 && docs[d][i - 1] >= '0' && docs[d][i - 1] <= '9')
				continue;
			if (parse_n(&doc, docs[d], i, NULL, &e) == 0) {
				json_free(&doc);
				fail_msg("%s: prefix %zu parsed", docs[d], i);
			}
		}
	}
}

static void
test_syntax_errors_with_position(void **state)
{
	expect_fail("", "json.syntax", "1:1: unexpected end of input, expected a value");
	expect_fail("   \n  ", "json.syntax", "2:3: unexpected end of input, expected a value");
	expect_fail("{\"a\" 1}", "json.syntax", "1:6: unexpected '1', expected ':' after the key");
	expect_fail("[1,]", "json.syntax", "1:4: unexpected ']', expected a value");
	expect_fail("[1 2]", "json.syntax", "1:4: unexpected '2', expected ',' or ']'");
	expect_fail("{\"a\":1,}", "json.syntax", "1:8: unexpected '}', expected a string key");
	expect_fail("{\"a\":1 \"b\":2}", "json.syntax", "1:8: unexpected '\"', expected ',' or '}'");
	expect_fail("{a:1}", "json.syntax", "1:2: unexpected 'a', expected a string key");
	expect_fail("{'a':1}", "json.syntax", "1:2: unexpected ''', expected a string key");
	expect_fail("[1]\n[2]", "json.syntax",
	            "2:1: unexpected '[', expected the end of input after the value");
	expect_fail("1 2", "json.syntax", "1:3: unexpected '2', expected the end of input after the value");
	expect_fail("tru", "json.syntax", "1:4: unexpected end of input, expected 'true'");
	expect_fail("trUe", "json.syntax", "1:1: invalid literal, expected 'true'");
	expect_fail("nul", "json.syntax", "1:4: unexpected end of input, expected 'null'");
	expect_fail("[\n  01]", "json.syntax",
	            "2:4: leading zeros are not allowed, expected '.', 'e' or the end of the number");
	expect_fail("-", "json.syntax", "1:2: unexpected end of input, expected a digit after '-'");
	expect_fail("-a", "json.syntax", "1:2: unexpected 'a', expected a digit after '-'");
	expect_fail("+1", "json.syntax", "1:1: unexpected '+', expected a value");
	expect_fail("1.", "json.syntax", "1:3: unexpected end of input, expected a digit after '.'");
	expect_fail("1.e5", "json.syntax", "1:3: unexpected 'e', expected a digit after '.'");
	expect_fail(".5", "json.syntax", "1:1: unexpected '.', expected a value");
	expect_fail("1e", "json.syntax", "1:3: unexpected end of input, expected a digit in the exponent");
	expect_fail("1e+", "json.syntax", "1:4: unexpected end of input, expected a digit in the exponent");
	expect_fail("NaN", "json.syntax", "1:1: unexpected 'N', expected a value");
	expect_fail("Infinity", "json.syntax", "1:1: unexpected 'I', expected a value");
	expect_fail("-Infinity", "json.syntax", "1:2: unexpected 'I', expected a digit after '-'");
	expect_fail("\"abc", "json.syntax", "1:5: unexpected end of input in a string, expected '\"'");
	expect_fail("\"a\nb\"", "json.syntax",
	            "1:3: control character 0x0A in a string, expected it escaped");
	expect_fail("\"a\tb\"", "json.syntax",
	            "1:3: control character 0x09 in a string, expected it escaped");
	expect_fail("\"\\x\"", "json.syntax",
	            "1:3: unexpected 'x', expected an escape (one of \"\\/bfnrtu) after '\\'");
	expect_fail("\"\\", "json.syntax", "1:3: unexpected end of input in a string, expected an escape");
	expect_fail("\"\\u12G4\"", "json.syntax", "1:6: unexpected 'G', expected 4 hex digits after \\u");
	expect_fail("\"\\u12", "json.syntax",
	            "1:6: unexpected end of input, expected 4 hex digits after \\u");
	expect_fail("\x01", "json.syntax", "1:1: unexpected byte 0x01, expected a value");
	expect_fail("\xc3\xa9", "json.syntax", "1:1: unexpected non-ASCII character, expected a value");
	expect_fail_n("[1]\0", 4, NULL, "json.syntax",
	              "1:4: unexpected byte 0x00, expected the end of input after the value");
	expect_fail("\r\n\r\n  x", "json.syntax", "3:3: unexpected 'x', expected a value");
}

static void
test_encoding_errors_with_position(void **state)
{
	expect_fail("\xef\xbb\xbf{}", "json.encoding", "1:1: a byte order mark is not allowed");
	expect_fail("\"\xc0\xaf\"", "json.encoding", "1:2: invalid UTF-8: overlong encoding");
	expect_fail("\"\xc1\xbf\"", "json.encoding", "1:2: invalid UTF-8: overlong encoding");
	expect_fail("\"\xe0\x80\xaf\"", "json.encoding", "1:2: invalid UTF-8: overlong encoding");
	expect_fail("\"\xf0\x80\x80\xaf\"", "json.encoding", "1:2: invalid UTF-8: overlong encoding");
	expect_fail("[\"ok\",\n \"x\xed\xa0\x80\"]", "json.encoding",
	            "2:4: invalid UTF-8: encoded surrogate");
	expect_fail("\"\xed\xbf\xbf\"", "json.encoding", "1:2: invalid UTF-8: encoded surrogate");
	expect_fail("\"\xf4\x90\x80\x80\"", "json.encoding", "1:2: invalid UTF-8: code point above U+10FFFF");
	expect_fail("\"\xf5\x80\x80\x80\"", "json.encoding", "1:2: invalid UTF-8: code point above U+10FFFF");
	expect_fail("\"\xff\"", "json.encoding", "1:2: invalid UTF-8: byte never valid");
	expect_fail("\"\x80\"", "json.encoding", "1:2: invalid UTF-8: unexpected continuation byte");
	expect_fail("\"\xc3\"", "json.encoding", "1:2: invalid UTF-8: truncated sequence");
	expect_fail("\"\xe2\x82\"", "json.encoding", "1:2: invalid UTF-8: truncated sequence");
	expect_fail("\"\xf0\x9f\x98\"", "json.encoding", "1:2: invalid UTF-8: truncated sequence");
	expect_fail_n("\"\xf0\x9f", 3, NULL, "json.encoding", "1:2: invalid UTF-8: truncated sequence");
	expect_fail("\"ab\xe2\x82", "json.encoding", "1:4: invalid UTF-8: truncated sequence");
	/* Outside strings, invalid UTF-8 is reported as such. */
	expect_fail("[\xff]", "json.encoding", "1:2: invalid UTF-8: byte never valid");
	/* Escaped surrogates. */
	expect_fail("\"\\ud800\"", "json.encoding",
	            "1:2: lone high surrogate \\uD800, expected a \\uDC00-\\uDFFF after it");
	expect_fail("\"\\ud800\\u0041\"", "json.encoding",
	            "1:2: lone high surrogate \\uD800, expected a \\uDC00-\\uDFFF after it");
	expect_fail("\"\\ud800\\ud800\"", "json.encoding", NULL);
	expect_fail("\"x\\udc00\"", "json.encoding", "1:3: lone low surrogate \\uDC00");
	expect_fail("\"\\uDFFF\\uD800\"", "json.encoding", "1:2: lone low surrogate \\uDFFF");
	expect_fail("\"\\ud83d\"", "json.encoding", NULL);
}

static void
test_numbers_out_of_range_and_limits(void **state)
{
	expect_fail("1e400", "json.too_large", "1:1: number out of range");
	expect_fail("[0, -1.5e309]", "json.too_large", "1:5: number out of range");
}

static void
test_depth_limit(void **state)
{
	struct json_limits lim = json_default_limits;
	struct json_doc doc;
	struct err e = {0};
	char buf[2 * 200 + 1];
	int d;

	for (d = 1; d <= 70; d++) {
		memset(buf, '[', (size_t)d);
		memset(buf + d, ']', (size_t)d);
		if (d <= JSON_MAX_DEPTH_DEFAULT) {
			assert_int_equal(parse_n(&doc, buf, 2 * (size_t)d, NULL, &e), 0);
			json_free(&doc);
		} else {
			expect_fail_n(buf, 2 * (size_t)d, NULL, "json.too_deep", NULL);
		}
	}
	memset(buf, '[', 65);
	expect_fail_n(buf, 65, NULL, "json.too_deep", "1:65: nesting deeper than 64");
	/* Objects count too, and a scalar is depth 0. */
	lim.max_depth = 2;
	assert_int_equal(parse_n(&doc, "{\"a\":[1]}", strlen("{\"a\":[1]}"), &lim, &e), 0);
	json_free(&doc);
	expect_fail_n("{\"a\":[{}]}", 10, &lim, "json.too_deep", "1:7: nesting deeper than 2");
	lim.max_depth = 0;
	assert_int_equal(parse_n(&doc, "1", strlen("1"), &lim, &e), 0);
	json_free(&doc);
	expect_fail_n("[]", 2, &lim, "json.too_deep", "1:1: nesting deeper than 0");
}

static void
test_deep_nesting_does_not_recurse(void **state)
{
	/* A caller with a huge limit: the parser's stack is on the heap. */
	struct json_limits lim = json_default_limits;
	size_t n = 200000, i;
	char *buf = malloc(2 * n);
	struct json_doc doc;
	struct json_w w;
	struct err e = {0};
	const struct json_val *v;

	assert_non_null(buf);
	memset(buf, '[', n);
	memset(buf + n, ']', n);
	lim.max_depth = INT_MAX;
	assert_int_equal(json_parse(&doc, buf, 2 * n, &lim, &e), 0);
	for (v = doc.root, i = 1; v->u.arr.n == 1; v = &v->u.arr.v[0])
		i++;
	assert_int_equal(i, n);
	/* The writer refuses past its depth instead of recursing. */
	json_w_init(&w, 1 << 20);
	json_w_val(&w, doc.root);
	assert_true(w.overflow);
	json_w_free(&w);
	json_free(&doc);
	/* Alternating objects and arrays, truncated in the middle. */
	for (i = 0; i < n; i++)
		memcpy(buf + 2 * i, i & 1 ? "[ " : "{\"", 2);
	expect_fail_n(buf, 2 * n, &lim, "json.syntax", NULL);
	free(buf);
}

static void
test_size_limit(void **state)
{
	struct json_limits lim = json_default_limits;
	struct json_doc doc;
	struct err e = {0};

	lim.max_bytes = 7;
	assert_int_equal(parse_n(&doc, "[1,2,3]", strlen("[1,2,3]"), &lim, &e), 0);
	json_free(&doc);
	expect_fail_n("[1,2,3] ", 8, &lim, "json.too_large", "8 bytes, over the limit of 7");
}

static void
test_value_count_limit(void **state)
{
	struct json_limits lim = json_default_limits;
	struct json_doc doc;
	struct err e = {0};

	lim.max_values = 4; /* the array and its three elements */
	assert_int_equal(parse_n(&doc, "[1,2,3]", strlen("[1,2,3]"), &lim, &e), 0);
	json_free(&doc);
	expect_fail_n("[1,2,3,4]", 9, &lim, "json.too_large", "1:8: more than 4 values");
	/* Keys are not values. */
	lim.max_values = 3;
	assert_int_equal(parse_n(&doc, "{\"a\":1,\"b\":2}", strlen("{\"a\":1,\"b\":2}"), &lim, &e), 0);
	json_free(&doc);
	expect_fail_n("{\"a\":1,\"b\":[2]}", 15, &lim, "json.too_large", NULL);
}

static void
test_many_values(void **state)
{
	size_t n = 500000, i, len;
	char *buf = malloc(2 * n + 2);
	struct json_doc doc;
	struct err e = {0};
	struct json_limits lim = json_default_limits;

	assert_non_null(buf);
	buf[0] = '[';
	for (i = 0; i < n; i++) {
		buf[1 + 2 * i] = (char)('0' + i % 10);
		buf[2 + 2 * i] = ',';
	}
	buf[2 * n] = ']';
	len = 2 * n + 1;
	assert_int_equal(parse_n(&doc, buf, len, NULL, &e), 0);
	assert_int_equal(doc.root->u.arr.n, n);
	assert_int_equal(doc.root->u.arr.v[n - 1].u.num.i, (int64_t)((n - 1) % 10));
	/* Bounded: about a json_val and a number text per value. */
	assert_true(json_test_arena_bytes(&doc) < n * (sizeof(struct json_val) + 2) * 2 + (1u << 20));
	json_free(&doc);
	lim.max_values = n;
	expect_fail_n(buf, len, &lim, "json.too_large", NULL);
	lim.max_values = n + 1;
	assert_int_equal(parse_n(&doc, buf, len, &lim, &e), 0);
	json_free(&doc);
	free(buf);
}

static void
test_huge_string(void **state)
{
	size_t n = 8u << 20, i;
	char *buf = malloc(n + 2);
	struct json_doc doc;
	struct err e = {0};
	struct json_limits lim = json_default_limits;

	assert_non_null(buf);
	buf[0] = '"';
	for (i = 1; i <= n; i++)
		buf[i] = (char)('a' + i % 26);
	buf[n + 1] = '"';
	assert_int_equal(parse_n(&doc, buf, n + 2, NULL, &e), 0);
	assert_int_equal(doc.root->u.str.len, n);
	assert_int_equal(strlen(doc.root->u.str.s), n);
	assert_int_equal(doc.root->u.str.s[n - 1], buf[n]);
	/* The arena holds the string once, plus small change. */
	assert_true(json_test_arena_bytes(&doc) < n + 64 * 1024);
	json_free(&doc);
	/* Escapes all the way. */
	for (i = 1; i + 1 < n; i += 2)
		memcpy(buf + i, "\\n", 2);
	buf[i] = 'x';
	assert_int_equal(parse_n(&doc, buf, n + 2, NULL, &e), 0);
	assert_int_equal(doc.root->u.str.len, n / 2 + 1); /* n/2-1 escapes, "x", one letter */
	json_free(&doc);
	lim.max_bytes = n + 1;
	expect_fail_n(buf, n + 2, &lim, "json.too_large", NULL);
	/* Unterminated: the error is at the end. */
	expect_fail_n(buf, n + 1, NULL, "json.syntax", NULL);
	free(buf);
}

static void
test_duplicate_keys(void **state)
{
	struct json_limits lim = json_default_limits;
	struct json_doc doc;
	struct err e = {0};
	const struct json_val *v;

	expect_fail("{\"a\":1,\n \"b\":2, \"a\":3}", "json.syntax", "2:9: duplicate key \"a\"");
	expect_fail("{\"x\":{\"k\":1,\"k\":2}}", "json.syntax", "1:13: duplicate key \"k\"");
	/* Escapes decode before comparing. */
	expect_fail("{\"\\u0041\":1,\"A\":2}", "json.syntax", "1:13: duplicate key \"A\"");
	/* A key may not hold U+0000: "argv" and "argv\u0000" would be two keys
	 * to the duplicate rule and one key to a loader reading a C string. The
	 * error points at the escape. Values may still hold it. */
	expect_fail("{\"a\\u0000b\":1,\"a\\u0000c\":2,\"a\":3}", "json.syntax",
	            "1:4: \\u0000 in an object key, keys may not hold NUL");
	expect_fail("{\"argv\":1,\n \"argv\\u0000\":2}", "json.syntax",
	            "2:7: \\u0000 in an object key, keys may not hold NUL");
	expect_fail("{\"x\":[{\"\\u0000\":0}]}", "json.syntax",
	            "1:9: \\u0000 in an object key, keys may not hold NUL");
	lim.reject_dup_keys = 0;
	expect_fail_n("{\"k\\u0000\":1}", 13, &lim, "json.syntax",
	              "1:4: \\u0000 in an object key, keys may not hold NUL");
	lim.reject_dup_keys = 1;
	assert_int_equal(parse_n(&doc, "{\"a\":\"x\\u0000y\",\"\\u0001\":1}",
	                         strlen("{\"a\":\"x\\u0000y\",\"\\u0001\":1}"), NULL, &e),
	                 0);
	v = json_get(doc.root, "a");
	assert_non_null(v);
	assert_int_equal(v->u.str.len, 3);
	assert_non_null(json_get(doc.root, "\x01"));
	json_free(&doc);

	/* Allowed: the caller asks per object; the first repeat wins. */
	lim.reject_dup_keys = 0;
	assert_int_equal(parse_n(&doc, "{\"a\":1,\"b\":2,\"b\":3,\"a\":4,\"c\":{\"d\":1,\"d\":2}}",
	                         strlen("{\"a\":1,\"b\":2,\"b\":3,\"a\":4,\"c\":{\"d\":1,\"d\":2}}"), &lim,
	                         &e),
	                 0);
	assert_string_equal(json_dup_key(doc.root), "b");
	assert_int_equal(json_get(doc.root, "a")->u.num.i, 1); /* first match */
	assert_string_equal(json_dup_key(json_get(doc.root, "c")), "d");
	assert_null(json_dup_key(json_get(doc.root, "a")));
	assert_null(json_dup_key(NULL));
	json_free(&doc);
	assert_int_equal(parse_n(&doc, "{}", strlen("{}"), &lim, &e), 0);
	assert_null(json_dup_key(doc.root));
	json_free(&doc);
}

/* An object with n keys "k0".."k<n-1>", then extra members. */
static char *
big_object(size_t n, const char *extra)
{
	size_t cap = n * 24 + strlen(extra) + 16, len = 0, i;
	char *buf = malloc(cap);

	assert_non_null(buf);
	buf[len++] = '{';
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s\"k%zu\":%zu", i ? "," : "", i, i);
	len += (size_t)snprintf(buf + len, cap - len, "%s}", extra);
	return buf;
}

static void
dup_many(size_t n)
{
	struct json_limits lim = json_default_limits;
	struct json_doc doc;
	struct err e = {0};
	char *buf;

	buf = big_object(n, "");
	assert_int_equal(parse_n(&doc, buf, strlen(buf), NULL, &e), 0);
	assert_int_equal(doc.root->u.obj.n, n);
	assert_null(json_dup_key(doc.root));
	json_free(&doc);
	free(buf);

	buf = big_object(n, ",\"k7\":1,\"k12345\":2,\"k7\":3");
	expect_fail_n(buf, strlen(buf), NULL, "json.syntax", NULL);
	assert_int_equal(parse_n(&doc, buf, strlen(buf), NULL, &e), -1);
	assert_non_null(strstr(e.msg, ": duplicate key \"k7\""));
	lim.reject_dup_keys = 0;
	assert_int_equal(parse_n(&doc, buf, strlen(buf), &lim, &e), 0);
	assert_string_equal(json_dup_key(doc.root), "k7");
	json_free(&doc);
	free(buf);

	/* The earliest repetition wins, whatever the sort order. */
	buf = big_object(100, ",\"k99\":1,\"k0\":2");
	lim.reject_dup_keys = 0;
	assert_int_equal(parse_n(&doc, buf, strlen(buf), &lim, &e), 0);
	assert_string_equal(json_dup_key(doc.root), "k99");
	json_free(&doc);
	expect_fail_n(buf, strlen(buf), NULL, "json.syntax", NULL);
	free(buf);
}

/* Both detection paths (pairwise up to 16 keys, sorted above) against brute
 * force: object of n keys where key j repeats key i. */
static void
test_duplicate_keys_many(void **state)
{
	dup_many(200000);
}

static void
dup_every_position(void)
{
	struct json_limits lim = json_default_limits;
	struct json_doc doc;
	struct err e = {0};
	char buf[2048], want[64];
	size_t n, i, j, k, len, col;

	for (n = 2; n <= 40; n++) {
		for (i = 0; i < n; i++) {
			for (j = i + 1; j < n; j++) {
				len = 0;
				col = 0;
				buf[len++] = '{';
				for (k = 0; k < n; k++) {
					if (k)
						buf[len++] = ',';
					if (k == j)
						col = len + 1;
					len += (size_t)snprintf(buf + len, sizeof(buf) - len,
					                        "\"key%zu\":%zu", k == j ? i : k, k);
				}
				buf[len++] = '}';
				snprintf(want, sizeof(want), "1:%zu: duplicate key \"key%zu\"", col, i);
				expect_fail_n(buf, len, NULL, "json.syntax", want);
				lim.reject_dup_keys = 0;
				assert_int_equal(parse_n(&doc, buf, len, &lim, &e), 0);
				snprintf(want, sizeof(want), "key%zu", i);
				assert_string_equal(json_dup_key(doc.root), want);
				json_free(&doc);
			}
		}
	}
}

static void
test_duplicate_keys_every_position(void **state)
{
	dup_every_position();
	/* Every key in one hash bucket, then in two: runs of colliding keys
	 * go through the pairwise check and the sort by key. */
	json_test_hash_bits = 0;
	dup_every_position();
	json_test_hash_bits = 1;
	dup_every_position();
	json_test_hash_bits = 32;
}

static void
test_duplicate_keys_colliding_hashes(void **state)
{
	json_test_hash_bits = 0;
	test_duplicate_keys(state);
	dup_many(20000);
	json_test_hash_bits = 32;
}

static void
test_all_escapes(void **state)
{
	struct json_doc doc;
	struct err e = {0};
	const char *in = "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20AC\\uD83D\\uDE00\\u0000z\"";
	const char want[] = "\"\\/\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\0z";

	assert_int_equal(parse_n(&doc, in, strlen(in), NULL, &e), 0);
	assert_int_equal(doc.root->type, JSON_STRING);
	assert_int_equal(doc.root->u.str.len, sizeof(want) - 1);
	assert_memory_equal(doc.root->u.str.s, want, sizeof(want));
	json_free(&doc);
	/* Boundaries of \u: U+FFFF, U+10FFFF, U+0080, U+07FF, U+0800. */
	assert_int_equal(
	    parse_n(&doc, "[\"\\uffff\",\"\\udbff\\udfff\",\"\\u0080\",\"\\u07ff\",\"\\u0800\"]",
	            strlen("[\"\\uffff\",\"\\udbff\\udfff\",\"\\u0080\",\"\\u07ff\",\"\\u0800\"]"), NULL, &e),
	    0);
	assert_string_equal(doc.root->u.arr.v[0].u.str.s, "\xef\xbf\xbf");
	assert_string_equal(doc.root->u.arr.v[1].u.str.s, "\xf4\x8f\xbf\xbf");
	assert_string_equal(doc.root->u.arr.v[2].u.str.s, "\xc2\x80");
	assert_string_equal(doc.root->u.arr.v[3].u.str.s, "\xdf\xbf");
	assert_string_equal(doc.root->u.arr.v[4].u.str.s, "\xe0\xa0\x80");
	json_free(&doc);
}

static void
test_numbers(void **state)
{
	struct json_doc doc;
	struct err e = {0};
	const struct json_val *a;
	const char *in =
	    "[0,-0,42,-42,9223372036854775807,-9223372036854775808,9223372036854775808,"
	    "-9223372036854775809,1.5,1e2,1E-2,-0.0,123456789012345678901234567890,9007199254740993,"
	    "1e-400,0.1]";

	assert_int_equal(parse_n(&doc, in, strlen(in), NULL, &e), 0);
	a = doc.root->u.arr.v;
	assert_int_equal(doc.root->u.arr.n, 16);
	assert_true(a[0].u.num.is_int && a[0].u.num.i == 0 && !signbit(a[0].u.num.d));
	assert_true(a[1].u.num.is_int && a[1].u.num.i == 0 && signbit(a[1].u.num.d));
	assert_string_equal(a[1].u.num.text, "-0");
	assert_true(a[2].u.num.is_int && a[2].u.num.i == 42 && a[2].u.num.d == 42.0);
	assert_true(a[3].u.num.is_int && a[3].u.num.i == -42);
	assert_true(a[4].u.num.is_int && a[4].u.num.i == INT64_MAX);
	assert_true(a[5].u.num.is_int && a[5].u.num.i == INT64_MIN);
	assert_false(a[6].u.num.is_int);
	assert_true(a[6].u.num.d == 9223372036854775808.0);
	assert_false(a[7].u.num.is_int);
	assert_false(a[8].u.num.is_int);
	assert_true(a[8].u.num.d == 1.5);
	assert_false(a[9].u.num.is_int); /* an exponent is not an integer */
	assert_true(a[9].u.num.d == 100.0);
	assert_true(a[10].u.num.d == 0.01);
	assert_string_equal(a[10].u.num.text, "1E-2");
	assert_false(a[11].u.num.is_int);
	assert_true(signbit(a[11].u.num.d));
	assert_false(a[12].u.num.is_int);
	assert_true(a[12].u.num.d > 1.23e29 && a[12].u.num.d < 1.24e29);
	assert_true(a[13].u.num.is_int && a[13].u.num.i == 9007199254740993LL);
	assert_true(a[13].u.num.d == 9007199254740992.0); /* nearest double */
	assert_true(a[14].u.num.d == 0.0);                /* underflow is fine */
	assert_true(a[15].u.num.d == 0.1);
	assert_int_equal(a[15].line, 1);
	json_free(&doc);
}

static void
test_positions_of_values(void **state)
{
	struct json_doc doc;
	struct err e = {0};
	const char *in = "{\n  \"a\": [1,\n    \"x\"],\n\t\"b\": {}\n}";
	const struct json_val *a, *b;

	assert_int_equal(parse_n(&doc, in, strlen(in), NULL, &e), 0);
	assert_int_equal(doc.root->line, 1);
	assert_int_equal(doc.root->col, 1);
	a = json_get(doc.root, "a");
	assert_int_equal(a->line, 2);
	assert_int_equal(a->col, 8);
	assert_int_equal(a->u.arr.v[0].col, 9);
	assert_int_equal(a->u.arr.v[1].line, 3);
	assert_int_equal(a->u.arr.v[1].col, 5);
	b = json_get(doc.root, "b");
	assert_int_equal(b->line, 4);
	assert_int_equal(b->col, 7);
	json_free(&doc);
}

/* JSONTestSuite-style cases (y_ must parse, n_ must not), written inline. */
static void
test_suite_y(void **state)
{
	static const char *y[] = {
	    "[]",
	    "{}",
	    "[[]   ]",
	    "[\"\"]",
	    "[\"a\"]",
	    "[false]",
	    "[null, 1, \"1\", {}]",
	    "[null]",
	    "[1\n]",
	    "  [1]",
	    "[1,null,null,null,2]",
	    "[2] ",
	    "[0e+1]",
	    "[0e1]",
	    "[ 4]",
	    "[-0.000000000000000000000000000000000000000000000000000000000000000000000000000001]\n",
	    "[20e1]",
	    "[-0]",
	    "[-1]",
	    "[-123]",
	    "[1E22]",
	    "[1E-2]",
	    "[1E+2]",
	    "[123e45]",
	    "[123.456e78]",
	    "[1e-2]",
	    "[1e+2]",
	    "[123]",
	    "[123.456789]",
	    "[100000000000000000000]",
	    "{\"asd\":\"sdf\", \"dfg\":\"fgh\"}",
	    "{\"asd\":\"sdf\"}",
	    "{\"a\":[]}",
	    "{\"\":0}",
	    "{ \"min\": -1.0e+28, \"max\": 1.0e+28 }",
	    ("{\"x\":[{\"id\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}], \"id\": "
	     "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"),
	    "[\"\\u0060\\u012a\\u12AB\"]",
	    "[\"\\uD801\\udc37\"]",
	    "[\"\\ud83d\\ude39\\ud83d\\udc8d\"]",
	    "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]",
	    "[\"\\\\u0000\"]",
	    "[\"\\\"\"]",
	    "[\"a/*b*/c/*d//e\"]",
	    "[\"\\\\a\"]",
	    "[\"\\\\n\"]",
	    "[\"\\u0012\"]",
	    "[\"\\uFFFF\"]",
	    "[\"asd\"]",
	    "[ \"asd\"]",
	    "[\"\\uDBFF\\uDFFF\"]",
	    "[\"new\\u00A0line\"]",
	    "[\"\xf4\x8f\xbf\xbf\"]",
	    "[\"\xef\xbf\xbf\"]",
	    "[\"\\u0000\"]",
	    "[\"\\u002c\"]",
	    "[\"\xcf\x80\"]",
	    "[\"\xf0\x9b\xbf\xbf\"]",
	    "[\"asd \"]",
	    "\" \"",
	    "[\"\\uD834\\uDd1e\"]",
	    "[\"\\u0821\"]",
	    "[\"\\u0123\"]",
	    "[\"\xe2\x80\xa8\"]",
	    "[\"\xe2\x80\xa9\"]",
	    "[\"\\u0061\\u30af\\u30EA\\u30b9\"]",
	    "[\"new\\u000Aline\"]",
	    "[\"\x7f\"]",
	    "[\"\\uA66D\"]",
	    "[\"\\u005C\"]",
	    "[\"\\u0022\"]",
	    "[\"\\uDBFF\\uDFFE\"]",
	    "[\"\xe2\x82\xac\xf0\x9d\x84\x9e\"]",
	    "[\"\\uFDD0\"]",
	    "[\"\\uFFFE\"]",
	    "[\"\\u22FF\"]",
	    "[true]",
	    "false",
	    "42",
	    "-0.1",
	    "null",
	    "\"asd\"",
	    "true",
	    "\"\"",
	    "[\"a\"]\n",
	    "[true]",
	    " [] ",
	    "\t\r\n[\r\n]\t\r\n",
	    "[1e0]",
	    "[0.0]",
	    "[-0.0e-0]",
	    "{\"a\":{\"b\":{\"c\":[[[[{}]]]]}}}",
	};
	size_t i;
	struct json_doc doc;
	struct err e = {0};

	for (i = 0; i < sizeof(y) / sizeof(y[0]); i++) {
		if (parse_n(&doc, y[i], strlen(y[i]), NULL, &e) != 0)
			fail_msg("y[%zu] %s: %s %s", i, y[i], e.code, e.msg);
		json_free(&doc);
	}
}

static void
test_suite_n(void **state)
{
	static const char *n[] = {
	    "[1 true]",
	    "[a\xe5]",
	    "[\"\": 1]",
	    "[\"\"],",
	    "[,1]",
	    "[1,,2]",
	    "[\"x\",,]",
	    "[\"x\"]]",
	    "[\"\",]",
	    "[\"x\"",
	    "[x",
	    "[3[4]]",
	    "[\xff]",
	    "[1:2]",
	    "[\xa5]",
	    "[\"a\",\n4\n,1,",
	    "[1,]",
	    "[1,,]",
	    "[\"\x0b\"a\"\\f\"]",
	    "[*]",
	    "[\"\"",
	    "[1,",
	    "[1,\n1\n,1",
	    "[{}",
	    "[fals]",
	    "[nul]",
	    "[tru]",
	    "[++1234]",
	    "[+1]",
	    "[+Inf]",
	    "[-01]",
	    "[-1.0.]",
	    "[-2.]",
	    "[-NaN]",
	    "[.-1]",
	    "[.2e-3]",
	    "[0.1.2]",
	    "[0.3e+]",
	    "[0.3e]",
	    "[0.e1]",
	    "[0E+]",
	    "[0E]",
	    "[0e+]",
	    "[0e]",
	    "[1.0e+]",
	    "[1.0e-]",
	    "[1.0e]",
	    "[1 000.0]",
	    "[1eE2]",
	    "[2.e+3]",
	    "[2.e-3]",
	    "[2.e3]",
	    "[9.e+]",
	    "[Inf]",
	    "[NaN]",
	    "[\xef\xbc\x91]",
	    "[1+2]",
	    "[0x1]",
	    "[0x42]",
	    "[Infinity]",
	    "[0e+-1]",
	    "[-123.123foo]",
	    "[123\xe5]",
	    "[1e1\xe5]",
	    "[0\xe5]",
	    "[-Infinity]",
	    "[-foo]",
	    "[- 1]",
	    "[-012]",
	    "[-.123]",
	    "[-]",
	    "[1ea]",
	    "[1.]",
	    "[.123]",
	    "[\xe5]",
	    "[1.2a-3]",
	    "[1.8011670033376514H-308]",
	    "[012]",
	    "[\"x\", truth]",
	    "{[: \"x\"}\n",
	    "{\"x\", null}",
	    "{\"x\"::\"b\"}",
	    "{\xf0\x9f\x87\xa8\xf0\x9f\x87\xad}",
	    "{\"a\":\"a\" 123}",
	    "{key: 'value'}",
	    "{\"\xb9\":\"0\",}",
	    "{\"a\" b}",
	    "{:\"b\"}",
	    "{\"a\" \"b\"}",
	    "{\"a\":",
	    "{\"a\"",
	    "{1:1}",
	    "{9999E9999:1}",
	    "{null:null,null:null}",
	    "{\"id\":0,,,,,}",
	    "{'a':0}",
	    "{\"id\":0,}",
	    "{\"a\":\"b\"}/**/",
	    "{\"a\":\"b\"}/**//",
	    "{\"a\":\"b\"}//",
	    "{\"a\":\"b\"}/",
	    "{\"a\":\"b\",,\"c\":\"d\"}",
	    "{a: \"b\"}",
	    "{\"foo\\u0000bar\": 42}",
	    "{\"a\":\"a",
	    "{ \"foo\" : \"bar\", \"a\" }",
	    "{\"a\":\"b\"}#",
	    " ",
	    "[\"\\uD800\\\"]",
	    "[\"\\uD800\\u\"]",
	    "[\"\\uD800\\u1\"]",
	    "[\"\\uD800\\u1x\"]",
	    "[\xc3\xa9]",
	    "[\"\\x00\"]",
	    "[\"\\\\\\\"]",
	    "[\"\\\t\"]",
	    "[\"\\\xf0\x9f\x8c\x80\"]",
	    "[\"\\\"]",
	    "[\"\\u00A\"]",
	    "[\"\\uD834\\uDd\"]",
	    "[\"\\uD800\\uD800\\x\"]",
	    "[\"\\u\xe5\"]",
	    "[\"\\a\"]",
	    "[\"\\uqqqq\"]",
	    "[\"\\\xe5\"]",
	    "[\\u0020\"asd\"]",
	    "[\\n]",
	    "\"",
	    "['single quote']",
	    "abc",
	    "[\"\\",
	    "[\"new\nline\"]",
	    "[\"\t\"]",
	    "\"\\UA66D\"",
	    "\"\"x",
	    "[\xe2\x81\xa0]",
	    "\xef\xbb\xbf",
	    "<.>",
	    "[<null>]",
	    "[1]x",
	    "[1]]",
	    "[\"asd]",
	    "a\xc3\xa5",
	    "[True]",
	    "1]",
	    "{\"x\": true,",
	    "[][]",
	    "]",
	    "\xef\xbb\xbf{}",
	    "\xe5",
	    "[",
	    "",
	    "2@",
	    "{}}",
	    "{\"\":",
	    "{\"a\":/*comment*/\"b\"}",
	    "{\"a\": true} \"x\"",
	    "['",
	    "[,",
	    "[{",
	    "[\"a",
	    "[\"a\"",
	    "{",
	    "{]",
	    "{,",
	    "{[",
	    "{\"a",
	    "{'a'",
	    "[\"\\{[\"\\{[\"\\{[\"\\{",
	    "\xe9",
	    "*",
	    "{\"a\":\"b\"}#{}",
	    "[\\u000A\"\"]",
	    "[1",
	    "[ false, nul",
	    "[ true, fals",
	    "[ false, tru",
	    "{\"asd\":\"asd\"",
	    "\xc3\xa5",
	    "[\x0c]",
	    "[\"\xed\xa0\x80\"]",
	    "[\"\xc0\x80\"]",
	    "[\"\xf8\x88\x80\x80\x80\"]",
	    "[\"\\ud800\"]",
	    "[\"\\udc00\\ud800\"]",
	    "[\"\\ud800abc\"]",
	    "[1e9999]",
	    "[-1e9999]",
	};
	size_t i;
	struct json_doc doc;
	struct err e = {0};

	for (i = 0; i < sizeof(n) / sizeof(n[0]); i++) {
		if (parse_n(&doc, n[i], strlen(n[i]), NULL, &e) == 0) {
			json_free(&doc);
			fail_msg("n[%zu] %s parsed", i, n[i]);
		}
		assert_true(e.msg[0] >= '1' && e.msg[0] <= '9');
	}
}

static void
test_accessors(void **state)
{
	struct json_doc doc;
	struct err e = {0};
	const char *in = "{\"s\":\"str\",\"n\":1,\"o\":{\"k\":\"v\"}}";

	assert_int_equal(parse_n(&doc, in, strlen(in), NULL, &e), 0);
	assert_string_equal(json_get_str(doc.root, "s"), "str");
	assert_null(json_get_str(doc.root, "n"));
	assert_null(json_get_str(doc.root, "missing"));
	assert_string_equal(json_get_str(json_get(doc.root, "o"), "k"), "v");
	assert_null(json_get(json_get(doc.root, "s"), "x"));
	assert_null(json_get(NULL, "x"));
	assert_null(json_str(NULL));
	assert_true(json_is(json_get(doc.root, "n"), JSON_NUMBER));
	assert_false(json_is(json_get(doc.root, "n"), JSON_STRING));
	assert_false(json_is(NULL, JSON_NULL));
	json_free(&doc);
	json_free(NULL);
}

/* ---- files ---- */

static const char *
tmpfile_with(const char *name, const char *text, size_t len)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/abx_test_json_%d_%s", (int)getpid(), name);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	fclose(f);
	return path;
}

static void
test_parse_file(void **state)
{
	struct json_limits lim = json_default_limits;
	struct json_doc doc;
	struct err e = {0};
	const char *p;
	char want[600];

	p = tmpfile_with("ok.json", "{\"a\": [1, 2]}\n", 14);
	assert_int_equal(json_parse_file(&doc, p, NULL, &e), 0);
	assert_int_equal(json_get(doc.root, "a")->u.arr.n, 2);
	json_free(&doc);

	lim.max_bytes = 13;
	assert_int_equal(json_parse_file(&doc, p, &lim, &e), -1);
	assert_string_equal(e.code, "json.too_large");
	snprintf(want, sizeof(want), "%s: 14 bytes, over the limit of 13", p);
	assert_string_equal(e.msg, want);
	assert_null(doc.root);
	unlink(p);

	p = tmpfile_with("bad.json", "{\"a\":\n  [1 2]}", 14);
	assert_int_equal(json_parse_file(&doc, p, NULL, &e), -1);
	assert_string_equal(e.code, "json.syntax");
	snprintf(want, sizeof(want), "%s:2:6: unexpected '2', expected ',' or ']'", p);
	assert_string_equal(e.msg, want);
	unlink(p);

	p = tmpfile_with("empty.json", "", 0);
	assert_int_equal(json_parse_file(&doc, p, NULL, &e), -1);
	snprintf(want, sizeof(want), "%s:1:1: unexpected end of input, expected a value", p);
	assert_string_equal(e.msg, want);
	unlink(p);

	assert_int_equal(json_parse_file(&doc, "/nonexistent/x.json", NULL, &e), -1);
	assert_string_equal(e.code, "io.error");
	assert_string_equal(e.msg, "/nonexistent/x.json: No such file or directory");
	assert_int_equal(json_parse_file(&doc, "/tmp", NULL, &e), -1);
	assert_string_equal(e.code, "io.error");
	assert_string_equal(e.msg, "/tmp is not a regular file (a directory)");
}

static void
test_parse_file_not_regular(void **state)
{
	/* Every file parsed is an operator's input, which must be a regular
	 * file: a pipe is refused at once, even with its writer still open and
	 * silent (reading it, or opening a FIFO, would wait forever). */
	struct json_doc doc;
	struct err e = {0};
	char path[256];
	int fds[2];

	assert_int_equal(pipe(fds), 0);
	snprintf(path, sizeof(path), "/dev/fd/%d", fds[0]);
	assert_int_equal(json_parse_file(&doc, path, NULL, &e), -1);
	assert_string_equal(e.code, "io.error");
	assert_non_null(strstr(e.msg, "is not a regular file (a FIFO)"));
	assert_null(doc.root);
	close(fds[0]);
	close(fds[1]);
}

/* ---- writer ---- */

static void
test_writer_structure(void **state)
{
	struct json_w w;

	json_w_init(&w, 4096);
	assert_string_equal(w.buf, "");
	json_w_obj(&w);
	json_w_kstr(&w, "s", "x");
	json_w_kint(&w, "i", -42);
	json_w_kbool(&w, "t", 1);
	json_w_kbool(&w, "f", 0);
	json_w_key(&w, "a");
	json_w_arr(&w);
	json_w_int(&w, INT64_MIN);
	json_w_int(&w, INT64_MAX);
	json_w_null(&w);
	json_w_str(&w, NULL);
	json_w_raw(&w, "{\"pre\":1}");
	json_w_obj(&w);
	json_w_end(&w);
	json_w_arr(&w);
	json_w_end(&w);
	json_w_end(&w);
	json_w_key(&w, "d");
	json_w_double(&w, 0.5);
	json_w_end(&w);
	assert_false(w.overflow);
	assert_string_equal(w.buf,
	                    "{\"s\":\"x\",\"i\":-42,\"t\":true,\"f\":false,\"a\":[-9223372036854775808,"
	                    "9223372036854775807,null,null,{\"pre\":1},{},[]],\"d\":0.5}");
	assert_int_equal(w.len, strlen(w.buf));
	/* A second top-level value: JSON lines. */
	json_w_int(&w, 1);
	assert_non_null(strstr(w.buf, "}\n1"));
	json_w_free(&w);
	json_w_free(&w);
}

static void
test_writer_escaping(void **state)
{
	struct json_w w;
	char in[40];
	int i;

	json_w_init(&w, 4096);
	for (i = 0; i < 32; i++)
		in[i] = (char)(i + 1 == 32 ? 0x7f : i + 1);
	in[31] = '\0';
	json_w_str(&w, in);
	assert_string_equal(w.buf,
	                    "\"\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r"
	                    "\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018"
	                    "\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\"");
	json_w_free(&w);

	json_w_init(&w, 4096);
	json_w_arr(&w);
	json_w_str(&w, "q\"b\\s/ \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f");
	/* Invalid UTF-8: one U+FFFD per bad byte, the rest kept. */
	json_w_str(&w, "a\xff"
	               "b\xc0\xaf"
	               "c\xed\xa0\x80"
	               "d\xe2\x82");
	json_w_strn(&w, "x\0y", 3);
	json_w_end(&w);
	assert_false(w.overflow);
	assert_string_equal(w.buf, "[\"q\\\"b\\\\s/ \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f\","
	                           "\"a\xef\xbf\xbd"
	                           "b\xef\xbf\xbd\xef\xbf\xbd"
	                           "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
	                           "d\xef\xbf\xbd\xef\xbf\xbd\",\"x\\u0000y\"]");
	json_w_free(&w);
}

static void
test_writer_doubles(void **state)
{
	static const double vals[] = {0.1,
	                              1.0 / 3,
	                              1e300,
	                              -2.5e-308,
	                              4.9e-324,
	                              123456.789,
	                              1e21,
	                              9007199254740993.0,
	                              1.7976931348623157e308,
	                              -1e-7};
	struct json_w w;
	struct json_doc doc;
	struct err e = {0};
	size_t i;

	json_w_init(&w, 4096);
	json_w_arr(&w);
	json_w_double(&w, 3.0);
	json_w_double(&w, -0.0);
	json_w_double(&w, 0.0);
	json_w_double(&w, 0.1);
	json_w_double(&w, NAN);
	json_w_double(&w, INFINITY);
	json_w_double(&w, -INFINITY);
	json_w_double(&w, 9007199254740992.0);
	json_w_double(&w, -123.0);
	json_w_end(&w);
	assert_string_equal(w.buf, "[3,-0,0,0.1,null,null,null,9007199254740992,-123]");
	json_w_free(&w);

	for (i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		json_w_init(&w, 100);
		json_w_double(&w, vals[i]);
		assert_false(w.overflow);
		assert_int_equal(parse_n(&doc, w.buf, w.len, NULL, &e), 0);
		if (doc.root->u.num.d != vals[i])
			fail_msg("%.17g written as %s", vals[i], w.buf);
		json_free(&doc);
		json_w_free(&w);
	}
}

static void
test_writer_overflow_and_misuse(void **state)
{
	struct json_w w;
	int i;

	json_w_init(&w, 10);
	json_w_str(&w, "12345678"); /* 10 bytes with quotes: fits */
	assert_false(w.overflow);
	assert_int_equal(w.len, 10);
	json_w_free(&w);

	json_w_init(&w, 10);
	json_w_str(&w, "123456789");
	assert_true(w.overflow);
	assert_true(w.len <= 10);
	json_w_int(&w, 1); /* dropped */
	assert_true(w.len <= 10);
	assert_int_equal(strlen(w.buf), w.len);
	json_w_free(&w);

	json_w_init(&w, 1 << 20);
	for (i = 0; i < JSON_W_MAX_DEPTH; i++)
		json_w_arr(&w);
	assert_false(w.overflow);
	json_w_arr(&w);
	assert_true(w.overflow);
	json_w_free(&w);

	json_w_init(&w, 100);
	json_w_obj(&w);
	json_w_int(&w, 1); /* no key */
	assert_true(w.overflow);
	json_w_free(&w);

	json_w_init(&w, 100);
	json_w_key(&w, "k"); /* not in an object */
	assert_true(w.overflow);
	json_w_free(&w);

	json_w_init(&w, 100);
	json_w_end(&w); /* nothing open */
	assert_true(w.overflow);
	json_w_free(&w);

	json_w_init(&w, 100);
	json_w_obj(&w);
	json_w_key(&w, "k");
	json_w_end(&w); /* key without value */
	assert_true(w.overflow);
	json_w_free(&w);

	json_w_init(&w, 100);
	json_w_arr(&w);
	json_w_key(&w, "k"); /* key in an array */
	assert_true(w.overflow);
	json_w_free(&w);
}

/* json_w_members takes the members of an object another writer wrote into
 * the object open here, with the commas right; anything but an object, or
 * no object open, is misuse. json_w_reset starts over on the same memory. */
static void
test_writer_members_and_reset(void **state)
{
	struct json_w w, m;
	struct json_doc d;
	struct err e = {0};
	char *mem;

	json_w_init(&m, 256);
	json_w_obj(&m);
	json_w_kstr(&m, "path", "/q\"b\\s\n\001");
	json_w_kint(&m, "n", 7);
	json_w_end(&m);

	json_w_init(&w, 256);
	json_w_obj(&w);
	json_w_kint(&w, "seq", 1);
	json_w_members(&w, m.buf);
	json_w_members(&w, "{}");
	json_w_members(&w, NULL);
	json_w_kbool(&w, "last", 1);
	json_w_end(&w);
	assert_false(w.overflow);
	assert_string_equal(w.buf, "{\"seq\":1,\"path\":\"/q\\\"b\\\\s\\n\\u0001\",\"n\":7,\"last\":true}");
	assert_int_equal(json_parse(&d, w.buf, w.len, NULL, &e), 0);
	assert_string_equal(json_get_str(d.root, "path"), "/q\"b\\s\n\001");
	json_free(&d);

	/* first in an empty object: no leading comma */
	mem = w.buf;
	json_w_reset(&w);
	assert_ptr_equal(w.buf, mem);
	assert_string_equal(w.buf, "");
	json_w_obj(&w);
	json_w_members(&w, m.buf);
	json_w_end(&w);
	assert_string_equal(w.buf, m.buf);

	json_w_reset(&w);
	json_w_members(&w, m.buf); /* no object open */
	assert_true(w.overflow);
	json_w_reset(&w);
	json_w_arr(&w);
	json_w_members(&w, m.buf); /* an array open */
	assert_true(w.overflow);
	json_w_reset(&w);
	json_w_obj(&w);
	json_w_members(&w, "[1]"); /* not an object */
	assert_true(w.overflow);
	json_w_reset(&w);
	json_w_obj(&w);
	json_w_key(&w, "k");
	json_w_members(&w, m.buf); /* a key waits for its value */
	assert_true(w.overflow);
	json_w_free(&w);
	json_w_free(&m);
}

static void
test_json_escape(void **state)
{
	char buf[16];

	assert_int_equal(json_escape(buf, sizeof(buf), "a\"b\n"), 8);
	assert_string_equal(buf, "\"a\\\"b\\n\"");
	assert_int_equal(json_escape(buf, 9, "a\"b\n"), 8);
	assert_int_equal(json_escape(buf, 8, "a\"b\n"), -1);
	assert_string_equal(buf, "");
	assert_int_equal(json_escape(buf, sizeof(buf), NULL), 2);
	assert_string_equal(buf, "\"\"");
	assert_int_equal(json_escape(buf, 0, "x"), -1);
}

/* json_escaped_prefix agrees with the writer: at every max, the prefix it
 * gives is written in at most max bytes and one more input unit would not
 * fit; a UTF-8 sequence is never split. */
static void
test_escaped_prefix(void **state)
{
	static const struct {
		const char *s;
		size_t n;
	} cases[] = {
	    {"plain", 5},         {"\0\0\0\0", 4},
	    {"a\nb\"c\\d\te", 9}, {"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9},
	    {"\xff\x80x\x01", 4},
	};
	size_t i, max, k, len;
	struct json_w w;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_w_init(&w, 1024);
		json_w_strn(&w, cases[i].s, cases[i].n);
		len = w.len - 2;
		json_w_free(&w);
		assert_int_equal(json_escaped_prefix(cases[i].s, cases[i].n, len), cases[i].n);
		assert_int_equal(json_escaped_prefix(cases[i].s, cases[i].n, (size_t)-1), cases[i].n);
		for (max = 0; max < len; max++) {
			k = json_escaped_prefix(cases[i].s, cases[i].n, max);
			assert_true(k < cases[i].n);
			json_w_init(&w, 1024);
			json_w_strn(&w, cases[i].s, k);
			assert_true(w.len - 2 <= max);
			json_w_free(&w);
			json_w_init(&w, 1024);
			json_w_strn(&w, cases[i].s, k + 1);
			/* one byte more either overflows max or splits a sequence
			 * (written as U+FFFD, 3 bytes, where the whole was fewer) */
			assert_true(w.len - 2 > max || (unsigned char)cases[i].s[k] >= 0x80);
			json_w_free(&w);
		}
	}
	assert_int_equal(json_escaped_prefix("\xe2\x82\xac", 3, 2), 0);
	assert_int_equal(json_escaped_prefix("\0\0", 2, 11), 1);
}

/* ---- round trip ---- */

static void
test_round_trip(void **state)
{
	char *once, *twice;

	once = rewrite_n(sample, strlen(sample), NULL);
	twice = rewrite_n(once, strlen(once), NULL);
	assert_string_equal(once, twice);
	assert_string_equal(
	    once, "{\"name\":\"caf\xc3\xa9 \xf0\x9f\x98\x80 \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\","
	          "\"esc\":\"\\\"\\\\/\\b\\f\\n\\r\\t\\u0000\","
	          "\"nums\":[0,-0,1,-1,12.5e-3,1E+2,9223372036854775807,-9223372036854775808],"
	          "\"lits\":[true,false,null],\"nested\":{\"a\":[{},[],[[{\"b\":\"\"}]]]},\"empty\":\"\"}");
	free(once);
	free(twice);
	expect_rewrite(" [ 1 , \"\\u001F\" ] ", "[1,\"\\u001f\"]");
	expect_rewrite("\"\\u2028\"", "\"\xe2\x80\xa8\"");
	expect_rewrite("{}", "{}");
}

/* ---- allocation failures ---- */

static void
test_alloc_failure_parse(void **state)
{
	struct json_limits lim = json_default_limits;
	char *big =
	    big_object(3000, ",\"s\":\"\\u00e9\\ud83d\\ude00 long long long long\",\"a\":[[[1.5]],{}]");
	struct json_doc doc;
	struct err e = {0};
	long n;
	int ok = 0;

	for (n = 1; n < 100000 && !ok; n++) {
		base_test_alloc_fail = n;
		err_clear(&e);
		if (json_parse(&doc, big, strlen(big), &lim, &e) == 0) {
			ok = 1;
			assert_int_equal(doc.root->u.obj.n, 3002);
			json_free(&doc);
			break;
		}
		assert_string_equal(e.code, "internal");
		assert_null(doc.root);
		assert_null(doc.arena);
	}
	base_test_alloc_fail = 0;
	assert_true(ok);
	assert_true(n > 10); /* the loop did fail some allocations */
	free(big);
}

static void
test_alloc_failure_file_and_writer(void **state)
{
	const char *p = tmpfile_with("alloc.json", "[1,{\"a\":\"b\"},[[]]]", 18);
	struct json_doc doc;
	struct json_w w;
	struct err e = {0};
	long n;
	int ok;

	for (n = 1, ok = 0; n < 1000 && !ok; n++) {
		base_test_alloc_fail = n;
		if (json_parse_file(&doc, p, NULL, &e) == 0) {
			ok = 1;
			json_free(&doc);
		} else {
			assert_string_equal(e.code, "internal");
			assert_non_null(strstr(e.msg, p));
		}
	}
	base_test_alloc_fail = 0;
	assert_true(ok);
	unlink(p);

	for (n = 1, ok = 0; n < 1000 && !ok; n++) {
		int i;

		json_w_init(&w, 1 << 20);
		base_test_alloc_fail = n;
		json_w_arr(&w);
		for (i = 0; i < 300; i++)
			json_w_str(&w, "some text to grow the buffer");
		json_w_end(&w);
		base_test_alloc_fail = 0;
		ok = !w.overflow;
		assert_int_equal(strlen(w.buf), w.len);
		json_w_free(&w);
	}
	assert_true(ok);
	assert_true(n > 3);
}

static void
test_dup_key_alloc_failure_falls_back(void **state)
{
	struct json_limits lim = json_default_limits;
	char *big = big_object(100, ",\"k5\":0");
	struct json_doc doc;
	struct err e = {0};

	lim.reject_dup_keys = 0;
	assert_int_equal(json_parse(&doc, big, strlen(big), &lim, &e), 0);
	base_test_alloc_fail = 1;
	assert_string_equal(json_dup_key(doc.root), "k5");
	base_test_alloc_fail = 0;
	json_free(&doc);
	free(big);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_truncated_at_every_offset),
	    cmocka_unit_test(test_every_prefix_of_scalars),
	    cmocka_unit_test(test_syntax_errors_with_position),
	    cmocka_unit_test(test_encoding_errors_with_position),
	    cmocka_unit_test(test_numbers_out_of_range_and_limits),
	    cmocka_unit_test(test_depth_limit),
	    cmocka_unit_test(test_deep_nesting_does_not_recurse),
	    cmocka_unit_test(test_size_limit),
	    cmocka_unit_test(test_value_count_limit),
	    cmocka_unit_test(test_many_values),
	    cmocka_unit_test(test_huge_string),
	    cmocka_unit_test(test_duplicate_keys),
	    cmocka_unit_test(test_duplicate_keys_many),
	    cmocka_unit_test(test_duplicate_keys_every_position),
	    cmocka_unit_test(test_duplicate_keys_colliding_hashes),
	    cmocka_unit_test(test_alloc_failure_parse),
	    cmocka_unit_test(test_alloc_failure_file_and_writer),
	    cmocka_unit_test(test_dup_key_alloc_failure_falls_back),
	    cmocka_unit_test(test_all_escapes),
	    cmocka_unit_test(test_numbers),
	    cmocka_unit_test(test_positions_of_values),
	    cmocka_unit_test(test_suite_y),
	    cmocka_unit_test(test_suite_n),
	    cmocka_unit_test(test_accessors),
	    cmocka_unit_test(test_parse_file),
	    cmocka_unit_test(test_parse_file_not_regular),
	    cmocka_unit_test(test_writer_structure),
	    cmocka_unit_test(test_writer_escaping),
	    cmocka_unit_test(test_writer_doubles),
	    cmocka_unit_test(test_writer_overflow_and_misuse),
	    cmocka_unit_test(test_writer_members_and_reset),
	    cmocka_unit_test(test_json_escape),
	    cmocka_unit_test(test_escaped_prefix),
	    cmocka_unit_test(test_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
