#include "unit.h"
#include "net/http_parse.h"

static struct http_req R;

static int
parse(const char *s)
{
	return http_req_parse(&R, s, strlen(s));
}

/* Every strictly shorter prefix must answer 0 (need more) until the bytes
 * that decide arrive, and from then on the same answer as one shot: the
 * server feeds whatever read() returned, split anywhere. */
static void
same_when_fed_bytewise(const char *s, size_t len)
{
	struct http_req one;
	int full, k, got, decided = 0;

	full = http_req_parse(&one, s, len);
	for (k = 1; k <= (int)len; k++) {
		got = http_req_parse(&R, s, k);
		if (got == 0) {
			assert_int_equal(decided, 0);
			continue;
		}
		decided = 1;
		assert_int_equal(got, full);
		if (got < 0)
			assert_int_equal(R.status, one.status);
		else
			break;
	}
	assert_int_equal(decided || full == 0, 1);
}

static void
expect_status(const char *s, int status)
{
	int rc = parse(s);

	if (rc != -1)
		fail_msg("expected %d, parse returned %d for: %s", status, rc, s);
	if (R.status != status)
		fail_msg("expected %d, got %d (%s) for: %s", status, R.status, R.why, s);
	same_when_fed_bytewise(s, strlen(s));
}

static int
view_is(struct http_view v, const char *s)
{
	return v.n == strlen(s) && memcmp(v.p, s, v.n) == 0;
}

/* ---- hostile inputs first ---- */

static void
test_smuggling_shapes(void **state)
{
	expect_status("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
	              400);
	expect_status("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
	              400);
	expect_status("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", 400);
	expect_status("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400);
	expect_status("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n", 400);
	expect_status(
	    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
	    400);
	expect_status("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
	expect_status("POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 3\r\n\r\n", 400);
	expect_status("POST / HTTP/1.1\r\nHost: a\r\n Content-Length: 3\r\n\r\n", 400);
}

/* Framing fields, one by one, then the decision: the same rule for a
 * request (response 0) and a response (1). fields: "name: value" lines
 * joined by '|'. Returns what http_framing_end returns, or -1 at the field
 * refused; *status and *why as the framing left them. */
static int
framing(const char *fields, int minor, int response, int64_t *len, int *status, const char **why)
{
	struct http_framing f;
	const char *p = fields, *bar, *colon, *v;
	int rc = 0;

	http_framing_init(&f);
	while (*p != '\0' && rc == 0) {
		bar = strchr(p, '|');
		if (bar == NULL)
			bar = p + strlen(p);
		colon = memchr(p, ':', (size_t)(bar - p));
		assert_non_null(colon);
		for (v = colon + 1; *v == ' '; v++)
			;
		rc = http_framing_field(&f, p, (size_t)(colon - p), v, (size_t)(bar - v));
		p = *bar ? bar + 1 : bar;
	}
	if (rc == 0)
		rc = http_framing_end(&f, minor, response);
	*len = f.length;
	*status = f.status;
	*why = f.why;
	return rc;
}

static void
test_framing_both_sides(void **state)
{
	static const struct {
		const char *fields;
		int minor, status;
		const char *why;
	} bad[] = {
	    {"Content-Length: 5|Content-Length: 5", 1, 400, "repeated Content-Length"},
	    {"content-length: 5|CONTENT-LENGTH: 6", 1, 400, "repeated Content-Length"},
	    {"Content-Length: 5|Transfer-Encoding: chunked", 1, 400, "both"},
	    {"Transfer-Encoding: chunked|Content-Length: 5", 1, 400, "both"},
	    {"Transfer-Encoding: chunked|Transfer-Encoding: chunked", 1, 400, "repeated Transfer-Encoding"},
	    {"Transfer-Encoding: chunked|Transfer-Encoding: gzip", 1, 400, "repeated Transfer-Encoding"},
	    {"Transfer-Encoding: gzip, chunked", 1, 501, "unsupported"},
	    {"Transfer-Encoding: chunked", 0, 400, "HTTP/1.0"},
	    {"Content-Length: ", 1, 400, "malformed"},
	    {"Content-Length: -1", 1, 400, "malformed"},
	    {"Content-Length: 1234567890123456789", 1, 400, "malformed"},
	    {"Content-Length: 5, 5", 1, 400, "malformed"},
	};
	const char *why;
	int64_t len;
	int status, side;
	size_t i;

	for (side = 0; side < 2; side++) {
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			assert_int_equal(framing(bad[i].fields, bad[i].minor, side, &len, &status, &why), -1);
			assert_int_equal(status, bad[i].status);
			if (strstr(why, bad[i].why) == NULL)
				fail_msg("%s: '%s' lacks '%s'", bad[i].fields, why, bad[i].why);
		}
		assert_int_equal(
		    framing("Content-Length: 000123456789012345|Host: x", 1, side, &len, &status, &why),
		    HTTP_BODY_LENGTH);
		assert_int_equal(len, 123456789012345);
		assert_int_equal(framing("transfer-encoding: CHUNKED", 1, side, &len, &status, &why),
		                 HTTP_BODY_CHUNKED);
		assert_int_equal(len, -1);
		assert_int_equal(framing("Content-Length: 0", 0, side, &len, &status, &why),
		                 HTTP_BODY_LENGTH);
		assert_int_equal(len, 0);
	}
	/* Neither field: a request has no body, a response runs until close. */
	assert_int_equal(framing("Host: x", 1, 0, &len, &status, &why), HTTP_BODY_NONE);
	assert_int_equal(framing("", 1, 1, &len, &status, &why), HTTP_BODY_CLOSE);
	assert_int_equal(len, -1);
}

static void
test_bad_content_length(void **state)
{
	static const char *bad[] = {"abc", "-1", "+5", "0x10", "1 2", "1.0", "", "1234567890123456789", "5a"};
	char buf[256];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: %s\r\n\r\n",
		         bad[i]);
		expect_status(buf, 400);
	}
	assert_true(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 000123456789012345678\r\n\r\n") ==
	            -1);
	assert_true(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:  42 \r\n\r\n") > 0);
	assert_int_equal(R.content_length, 42);
}

static void
test_transfer_encoding_other_than_chunked_is_501(void **state)
{
	expect_status("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501);
	expect_status("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501);
	expect_status("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 501);
	expect_status("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", 501);
	assert_true(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ChunKed\r\n\r\n") > 0);
	assert_int_equal(R.chunked, 1);
}

static void
test_obs_fold_and_bad_fields(void **state)
{
	expect_status("GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n  continued\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n\tcontinued\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\r\nX(y): 1\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\r\n: novalue\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\r\nX-A: a\x01b\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\r\nX-A: a\x7f\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\r\nX-A: a\rb\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\nX-A: b\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\nHost: a\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\r\n\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\r\n\rX", 400);
	expect_status("\rGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	/* NUL inside a value */
	{
		static const char nul[] = "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\0b\r\n\r\n";
		assert_int_equal(http_req_parse(&R, nul, sizeof(nul) - 1), -1);
		assert_int_equal(R.status, 400);
		same_when_fed_bytewise(nul, sizeof(nul) - 1);
	}
}

static void
test_host_rules(void **state)
{
	expect_status("GET / HTTP/1.1\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: user@a\r\n\r\n", 400);
	assert_true(parse("GET / HTTP/1.1\r\nHost: [::1]:9000\r\n\r\n") > 0);
	assert_true(parse("GET / HTTP/1.1\r\nHost:\r\n\r\n") > 0);
	assert_true(parse("GET / HTTP/1.0\r\n\r\n") > 0);
}

static void
test_malformed_request_line(void **state)
{
	expect_status("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("GET /  HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status(" GET / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("GET /\r\nHost: a\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1 x\r\nHost: a\r\n\r\n", 400);
	expect_status("GET / http/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("GET / HTTP/1.x\r\nHost: a\r\n\r\n", 400);
	expect_status("GET / HTTP/11\r\nHost: a\r\n\r\n", 400);
	expect_status("GET / HTTP/1.10\r\nHost: a\r\n\r\n", 400);
	expect_status("G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("GET /a\x80 HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("GET a HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("GET /a%4 HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("GET /a<b> HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n", 400);
	expect_status("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505);
	expect_status("GET / HTTP/0.9\r\nHost: a\r\n\r\n", 505);
	expect_status("ABCDEFGHIJKLMNOPQRSTUVWXYZ / HTTP/1.1\r\nHost: a\r\n\r\n", 501);
}

/* http_req_parse_max: the configured limit replaces HTTP_REQ_HEAD_MAX, both
 * for a head that has not ended and for one that ends past it; limits out of
 * range are clamped. */
static void
test_head_max(void **state)
{
	static char buf[70000];
	size_t n, lim = 2048;

	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\nX-Big: ");
	memset(buf + n, 'b', lim - n - 4);
	memcpy(buf + lim - 4, "\r\n\r\n", 4);
	assert_int_equal(http_req_parse_max(&R, buf, lim, lim), (int)lim);
	/* one byte more in the field: complete, but over */
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\nX-Big: ");
	memset(buf + n, 'b', lim - n - 3);
	memcpy(buf + lim - 3, "\r\n\r\n", 4);
	assert_int_equal(http_req_parse_max(&R, buf, lim + 1, lim), -1);
	assert_int_equal(R.status, 431);
	/* not ended at the limit: 431 at once, need more just before */
	assert_int_equal(http_req_parse_max(&R, buf, lim - 1, lim), 0);
	assert_int_equal(http_req_parse_max(&R, buf, lim, lim), -1);
	assert_int_equal(R.status, 431);
	/* a larger limit accepts a head over the default */
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\nX-Big: ");
	memset(buf + n, 'b', 40000 - n - 4);
	memcpy(buf + 40000 - 4, "\r\n\r\n", 4);
	assert_int_equal(http_req_parse(&R, buf, 40000), -1);
	assert_int_equal(R.status, 431);
	assert_int_equal(http_req_parse_max(&R, buf, 40000, 65536), 40000);
	/* clamped: 10 means HTTP_REQ_HEAD_LIMIT_MIN */
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\nX-Big: ");
	memset(buf + n, 'b', 500);
	memcpy(buf + n + 500, "\r\n\r\n", 4);
	assert_int_equal(http_req_parse_max(&R, buf, n + 504, 10), (int)(n + 504));
}

static void
test_limits(void **state)
{
	static char buf[HTTP_REQ_HEAD_MAX + HTTP_REQ_TARGET_MAX + 256];
	size_t n;
	int i;

	/* target one byte over: 414 before the rest arrives */
	n = (size_t)snprintf(buf, sizeof(buf), "GET /");
	memset(buf + n, 'a', HTTP_REQ_TARGET_MAX);
	n += HTTP_REQ_TARGET_MAX;
	assert_int_equal(http_req_parse(&R, buf, n), -1);
	assert_int_equal(R.status, 414);
	/* exactly at the limit is fine */
	n = (size_t)snprintf(buf, sizeof(buf), "GET /");
	memset(buf + n, 'a', HTTP_REQ_TARGET_MAX - 1);
	n += HTTP_REQ_TARGET_MAX - 1;
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, " HTTP/1.1\r\nHost: a\r\n\r\n");
	assert_int_equal(http_req_parse(&R, buf, n), (int)n);
	assert_int_equal(R.path.n, HTTP_REQ_TARGET_MAX);

	/* head: one big field, never ending */
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\nX-Big: ");
	memset(buf + n, 'b', HTTP_REQ_HEAD_MAX - n);
	n = HTTP_REQ_HEAD_MAX;
	assert_int_equal(http_req_parse(&R, buf, n - 1), 0);
	assert_int_equal(http_req_parse(&R, buf, n), -1);
	assert_int_equal(R.status, 431);
	/* complete but over the limit by one byte */
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\nX-Big: ");
	memset(buf + n, 'b', HTTP_REQ_HEAD_MAX - n - 3);
	n = HTTP_REQ_HEAD_MAX - 3;
	memcpy(buf + n, "\r\n\r\n", 4);
	assert_int_equal(http_req_parse(&R, buf, n + 4), -1);
	assert_int_equal(R.status, 431);
	/* and exactly at it */
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\nX-Big: ");
	memset(buf + n, 'b', HTTP_REQ_HEAD_MAX - n - 4);
	n = HTTP_REQ_HEAD_MAX - 4;
	memcpy(buf + n, "\r\n\r\n", 4);
	assert_int_equal(http_req_parse(&R, buf, n + 4), HTTP_REQ_HEAD_MAX);

	/* field count: 100 fine (Host + 99), 101 is 431 */
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\n");
	for (i = 0; i < HTTP_REQ_MAX_FIELDS - 1; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "X-%d: v\r\n", i);
	memcpy(buf + n, "\r\n", 3);
	assert_int_equal(http_req_parse(&R, buf, n + 2), (int)n + 2);
	assert_int_equal(R.nfields, HTTP_REQ_MAX_FIELDS);
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "X-last: v\r\n\r\n");
	assert_int_equal(http_req_parse(&R, buf, n), -1);
	assert_int_equal(R.status, 431);
}

/* ---- well-formed requests ---- */

static void
test_simple_get(void **state)
{
	const char *s =
	    "GET /health?x=1&y HTTP/1.1\r\nHost: localhost:9000\r\nUser-Agent: t \r\nAccept:*/*\r\n\r\n";

	assert_int_equal(parse(s), (int)strlen(s));
	assert_true(view_is(R.method, "GET"));
	assert_true(view_is(R.target, "/health?x=1&y"));
	assert_true(view_is(R.path, "/health"));
	assert_true(view_is(R.query, "x=1&y"));
	assert_int_equal(R.has_query, 1);
	assert_int_equal(R.minor, 1);
	assert_int_equal(R.keep_alive, 1);
	assert_int_equal(R.content_length, -1);
	assert_int_equal(R.nfields, 3);
	assert_true(view_is(http_req_field(&R, "user-agent")->value, "t"));
	assert_true(view_is(http_req_field(&R, "ACCEPT")->value, "*/*"));
	assert_null(http_req_field(&R, "accept-encoding"));
	assert_int_equal(http_req_field_count(&R, "host"), 1);
	same_when_fed_bytewise(s, strlen(s));
}

static void
test_keep_alive_rules(void **state)
{
	assert_true(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n") > 0);
	assert_int_equal(R.keep_alive, 0);
	assert_true(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, CLOSE\r\n\r\n") > 0);
	assert_int_equal(R.keep_alive, 0);
	assert_true(parse("GET / HTTP/1.0\r\n\r\n") > 0);
	assert_int_equal(R.keep_alive, 0);
	assert_int_equal(R.minor, 0);
	assert_true(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n") > 0);
	assert_int_equal(R.keep_alive, 1);
	assert_true(parse("GET / HTTP/1.5\r\nHost: a\r\n\r\n") > 0);
	assert_int_equal(R.minor, 1);
	assert_true(parse("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n") >
	            0);
	assert_int_equal(R.expect_continue, 1);
}

static void
test_target_forms(void **state)
{
	assert_true(parse("GET http://example.com:9000/v1/ops?a=b HTTP/1.1\r\nHost: x\r\n\r\n") > 0);
	assert_true(view_is(R.path, "/v1/ops"));
	assert_true(view_is(R.query, "a=b"));
	assert_true(parse("GET HTTPS://example.com HTTP/1.1\r\nHost: x\r\n\r\n") > 0);
	assert_true(view_is(R.path, "/"));
	assert_int_equal(R.has_query, 0);
	assert_true(parse("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n") > 0);
	assert_true(view_is(R.path, "*"));
	assert_true(parse("GET /a%2Fb/%7e?q=%20 HTTP/1.1\r\nHost: x\r\n\r\n") > 0);
	assert_true(view_is(R.path, "/a%2Fb/%7e"));
	assert_true(parse("GET /? HTTP/1.1\r\nHost: x\r\n\r\n") > 0);
	assert_int_equal(R.has_query, 1);
	assert_int_equal(R.query.n, 0);
}

static void
test_leading_crlf_and_pipelining(void **state)
{
	const char *two = "\r\n\r\nGET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n";
	int n = parse(two);

	assert_int_equal(n, (int)(strlen(two) / 2 + 2));
	assert_true(view_is(R.path, "/a"));
	assert_int_equal(http_req_parse(&R, two + n, strlen(two) - n), (int)strlen(two) - n);
	assert_true(view_is(R.path, "/b"));
}

static void
test_every_prefix_needs_more(void **state)
{
	const char *s =
	    "POST /v1/ops/x?y=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nX-Access-Token: t\r\n\r\n";
	size_t k;

	for (k = 0; k < strlen(s); k++)
		assert_int_equal(http_req_parse(&R, s, k), 0);
	assert_int_equal(http_req_parse(&R, s, strlen(s)), (int)strlen(s));
	assert_int_equal(R.content_length, 5);
}

/* ---- chunked ---- */

/* Decode in[0..len) in pieces of at most step bytes; returns the bytes
 * consumed (through the end of the body) or -1. */
static int
decode_step(const char *in, size_t len, size_t step, char *out, size_t *olen, uint64_t max, unsigned flags,
            struct http_chunked *c)
{
	const unsigned char *d;
	size_t off = 0, dl, lim;
	long k;

	*olen = 0;
	http_chunked_init(c, max, flags);
	while (off < len && !c->done) {
		lim = len - off < step ? len - off : step;
		k = http_chunked_step(c, (const unsigned char *)in + off, lim, &d, &dl);
		if (k < 0)
			return -1;
		assert_true(k > 0 && (size_t)k <= lim);
		memcpy(out + *olen, d, dl);
		*olen += dl;
		off += (size_t)k;
	}
	return (int)off;
}

static int
decode_all(const char *in, size_t len, char *out, size_t *olen, uint64_t max, struct http_chunked *c)
{
	return decode_step(in, len, len, out, olen, max, 0, c);
}

static int
decode_bytewise(const char *in, size_t len, char *out, size_t *olen, uint64_t max, struct http_chunked *c)
{
	return decode_step(in, len, 1, out, olen, max, 0, c);
}

static void
chunk_ok(const char *in, const char *want, size_t want_used)
{
	struct http_chunked c;
	const unsigned char *d;
	char out[256], out2[256];
	size_t n, n2;

	if (want_used == 0)
		want_used = strlen(in);
	assert_int_equal(decode_all(in, strlen(in), out, &n, 1 << 20, &c), (int)want_used);
	assert_int_equal(c.done, 1);
	assert_int_equal(n, strlen(want));
	assert_memory_equal(out, want, n);
	assert_int_equal(decode_bytewise(in, strlen(in), out2, &n2, 1 << 20, &c), (int)want_used);
	assert_int_equal(c.done, 1);
	assert_int_equal(n2, n);
	assert_memory_equal(out2, want, n);
	/* the bytes after the body are left alone */
	assert_int_equal(http_chunked_step(&c, (const unsigned char *)"x", 1, &d, &n), 0);
}

static void
chunk_bad(const char *in, size_t len, int status, uint64_t max)
{
	struct http_chunked c;
	const unsigned char *d;
	char out[8192];
	size_t n;

	assert_int_equal(decode_all(in, len, out, &n, max, &c), -1);
	assert_int_equal(c.status, status);
	assert_int_equal(decode_bytewise(in, len, out, &n, max, &c), -1);
	assert_int_equal(c.status, status);
	assert_non_null(c.why);
	/* sticky */
	assert_int_equal(http_chunked_step(&c, (const unsigned char *)"0\r\n\r\n", 5, &d, &n), -1);
}

#define BAD(s, st) chunk_bad(s, sizeof(s) - 1, st, 1 << 20)

static void
test_chunked_good(void **state)
{
	chunk_ok("5\r\nhello\r\n0\r\n\r\n", "hello", 15);
	/* 0 below: the whole input */
	chunk_ok("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world", 0);
	chunk_ok("A\r\n0123456789\r\n0\r\n\r\n", "0123456789", 0);
	chunk_ok("a;name=val;x=\"q s\"\r\n0123456789\r\n0\r\n\r\n", "0123456789", 0);
	chunk_ok("3 ;x\r\nabc\r\n0\r\n\r\n", "abc", 0);
	chunk_ok("0\r\n\r\n", "", 0);
	chunk_ok("0000000000000003\r\nabc\r\n0\r\nX-Trailer: v\r\nY: \r\n\r\n", "abc", 0);
	/* what follows the body is the next request's */
	chunk_ok("2\r\nhi\r\n0\r\n\r\nGET / HTTP/1.1\r\n", "hi", 12);
}

static void
test_chunked_bad(void **state)
{
	static char longext[HTTP_CHUNK_LINE_MAX + 16];
	static char bigtrailer[HTTP_CHUNK_TRAILER_MAX + 64];
	char many[HTTP_CHUNK_TRAILERS_MAX * 8 + 64];
	size_t n;
	int i;

	BAD("\r\n", 400);
	BAD("x\r\n", 400);
	BAD(";x\r\n", 400);
	BAD("5 x\r\nhello\r\n0\r\n\r\n", 400);
	BAD("5\nhello\r\n0\r\n\r\n", 400);
	BAD("5\rhello\r\n0\r\n\r\n", 400);
	BAD("5\r\nhelloX\r\n0\r\n\r\n", 400);
	BAD("5\r\nhello\rX0\r\n\r\n", 400);
	BAD("5\r\nhello0\r\n\r\n", 400);
	BAD("5;a\x01\r\nhello\r\n0\r\n\r\n", 400);
	BAD("-5\r\nhello\r\n0\r\n\r\n", 400);
	BAD("0x5\r\nhello\r\n0\r\n\r\n", 400);
	BAD("10000000000000000\r\n", 400); /* 17 digits */
	BAD("1000000000000000\r\n", 400);  /* 2^60: over HTTP_CHUNK_SIZE_LIMIT */
	BAD("100001\r\n", 413);            /* under the limit, over max body */
	BAD("0\r\n X: y\r\n\r\n", 400);    /* obs-fold in trailers */
	BAD("0\r\nX y: z\r\n\r\n", 400);
	BAD("0\r\nX: a\x01\r\n\r\n", 400);
	BAD("0\r\nX: a\n\r\n", 400);
	BAD("0\r\n\rX", 400);
	chunk_bad("6\r\nabcdef\r\n0\r\n\r\n", 17, 413, 5);
	chunk_bad("3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n", 22, 413, 5);

	memset(longext, 'e', sizeof(longext));
	memcpy(longext, "5;", 2);
	chunk_bad(longext, sizeof(longext), 400, 1 << 20);

	memcpy(bigtrailer, "0\r\nX: ", 6);
	memset(bigtrailer + 6, 'v', sizeof(bigtrailer) - 6);
	chunk_bad(bigtrailer, sizeof(bigtrailer), 400, 1 << 20);

	n = (size_t)snprintf(many, sizeof(many), "0\r\n");
	for (i = 0; i <= HTTP_CHUNK_TRAILERS_MAX; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "X%d: v\r\n", i);
	chunk_bad(many, n, 400, 1 << 20);
}

/* One decoder for both sides: the server reads strict CRLF framing, a
 * client (HTTP_LF_OK) also takes bare LF line ends; everything else is
 * refused the same way. */
static void
test_chunked_lf_only_for_clients(void **state)
{
	static const char lf[] = "5;x=y\nhello\n0\nT: v\n\n";
	struct http_chunked c;
	char out[64];
	size_t n;

	assert_int_equal(decode_all(lf, sizeof(lf) - 1, out, &n, 1 << 20, &c), -1);
	assert_int_equal(c.status, 400);
	assert_int_equal(decode_step(lf, sizeof(lf) - 1, 1, out, &n, UINT64_MAX, HTTP_LF_OK, &c),
	                 (int)sizeof(lf) - 1);
	assert_true(c.done);
	assert_int_equal(n, 5);
	assert_int_equal(decode_step("5 x\nhello\n0\n\n", 15, 1, out, &n, UINT64_MAX, HTTP_LF_OK, &c), -1);
	assert_int_equal(decode_step("0\nX y: z\n\n", 11, 1, out, &n, UINT64_MAX, HTTP_LF_OK, &c), -1);
	assert_int_equal(decode_step("0\n X: y\n\n", 10, 1, out, &n, UINT64_MAX, HTTP_LF_OK, &c), -1);
}

/* Every caller-built field line goes through the same grammar. */
static void
test_field_check(void **state)
{
	assert_null(http_field_check("Authorization: Bearer x", 23));
	assert_null(http_field_check("X-Empty:", 8));
	assert_non_null(http_field_check(" X: y", 5));
	assert_non_null(http_field_check("X y: z", 6));
	assert_non_null(http_field_check(": z", 3));
	assert_non_null(http_field_check("NoColon", 7));
	assert_non_null(http_field_check("X: a\r\nY: b", 12));
	assert_non_null(http_field_check("X: a\x01", 5));
	assert_non_null(http_field_check("", 0));
}

static void
test_chunked_exact_limit(void **state)
{
	struct http_chunked c;
	char out[16];
	size_t n;

	assert_int_equal(decode_all("5\r\nhello\r\n0\r\n\r\n", 15, out, &n, 5, &c), 15);
	assert_int_equal(c.done, 1);
	assert_int_equal(c.total, 5);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_smuggling_shapes),
	    cmocka_unit_test(test_framing_both_sides),
	    cmocka_unit_test(test_bad_content_length),
	    cmocka_unit_test(test_transfer_encoding_other_than_chunked_is_501),
	    cmocka_unit_test(test_obs_fold_and_bad_fields),
	    cmocka_unit_test(test_host_rules),
	    cmocka_unit_test(test_malformed_request_line),
	    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_simple_get),
	    cmocka_unit_test(test_keep_alive_rules),
	    cmocka_unit_test(test_target_forms),
	    cmocka_unit_test(test_leading_crlf_and_pipelining),
	    cmocka_unit_test(test_every_prefix_needs_more),
	    cmocka_unit_test(test_chunked_good),
	    cmocka_unit_test(test_chunked_bad),
	    cmocka_unit_test(test_chunked_exact_limit),
	    cmocka_unit_test(test_chunked_lf_only_for_clients),
	    cmocka_unit_test(test_field_check),
	    cmocka_unit_test(test_head_max),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
