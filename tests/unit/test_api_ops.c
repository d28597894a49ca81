/* core/server/api_ops.c through the API, as serve runs it (tests/unit/api_fixture.h):
 * command ops answered inline and by the runner, hostile requests refused
 * before anything runs, policy, the output cap, timeouts, the concurrency
 * limit, the environment allow-list, programs that cannot run. */
#include "api_fixture.h"

static const char cmds[] =
    "[{\"id\": \"echo.args\", \"argv\": [\"/bin/echo\", \"{a}\", \"{b}\"],"
    "  \"params\": {\"a\": {\"type\": \"string\", \"required\": true}, \"b\": {\"type\": \"string\"}}},"
    " {\"id\": \"echo.num\", \"argv\": [\"/bin/echo\", \"{n}\"],"
    "  \"params\": {\"n\": {\"type\": \"integer\", \"required\": true}}},"
    " {\"id\": \"true\", \"argv\": [\"true\"]},"
    " {\"id\": \"gone\", \"argv\": [\"/nonexistent/abx/prog\"]},"
    " {\"id\": \"notexec\", \"argv\": [\"/etc/passwd\"]},"
    " {\"id\": \"dir\", \"argv\": [\"/tmp\"]},"
    " {\"id\": \"flood\", \"argv\": [\"/bin/sh\", \"-c\","
    "   \"head -c 5000 /dev/zero | tr -c x x; echo err >&2; exit 3\"]},"
    " {\"id\": \"slow\", \"argv\": [\"/bin/sh\", \"-c\", \"sleep 30; echo never\"], \"timeout\": 1},"
    " {\"id\": \"one\", \"argv\": [\"/bin/sh\", \"-c\", \"touch \\\"$0\\\"; sleep 3\", \"{m}\"],"
    "  \"concurrency\": 1, \"params\": {\"m\": {\"type\": \"string\", \"required\": true}}},"
    " {\"id\": \"env.show\", \"argv\": [\"/usr/bin/env\"], \"env\": [\"FX_ALLOWED\"]}]";

static int
setup(void **state)
{
	setenv("FX_ALLOWED", "visible", 1);
	setenv("FX_SECRET", "hidden", 1);
	return fx_start("\"server\": {\"max_output_bytes\": 1024}", cmds, NULL);
}

static int
teardown(void **state)
{
	fx_stop();
	return 0;
}

static void
test_op_runs_and_answers(void **state)
{
	char body[65536];
	struct json_doc d;
	const struct json_val *r;

	/* Hostile values stay one argv word each. */
	assert_int_equal(
	    fx_call("POST", "/v1/ops/echo.args", "{\"a\": \"x y\", \"b\": \"$(id);*\"}", body, sizeof(body)),
	    200);
	r = fx_parse(&d, body);
	assert_string_equal(json_get_str(r, "stdout"), "x y $(id);*\n");
	assert_string_equal(json_get_str(r, "stderr"), "");
	assert_int_equal(json_get(r, "exit_code")->u.num.i, 0);
	assert_int_equal(json_get(r, "truncated")->type, JSON_FALSE);
	assert_null(json_get(r, "timed_out"));
	json_free(&d);
	/* A bare name through serve's start PATH. */
	assert_int_equal(fx_call("POST", "/v1/ops/true", "", body, sizeof(body)), 200);
	json_free(&d);
	/* An integer parameter. */
	assert_int_equal(fx_call("POST", "/v1/ops/echo.num", "{\"n\": -42}", body, sizeof(body)), 200);
	r = fx_parse(&d, body);
	assert_string_equal(json_get_str(r, "stdout"), "-42\n");
	json_free(&d);
}

/* A bad request answers 4xx with its code, and nothing runs. */
static void
test_op_bad_requests(void **state)
{
	char body[65536];

	assert_int_equal(fx_call("POST", "/v1/ops/no.such.op", "{}", body, sizeof(body)), 404);
	fx_assert_code(body, "not_found");
	assert_int_equal(fx_call("POST", "/v1/ops/echo.args", "{}", body, sizeof(body)), 400);
	fx_assert_code(body, "request.invalid");
	assert_non_null(strstr(body, "missing required parameter a"));
	assert_int_equal(
	    fx_call("POST", "/v1/ops/echo.args", "{\"a\": \"x\", \"zz\": 1}", body, sizeof(body)), 400);
	assert_non_null(strstr(body, "unknown parameter"));
	assert_int_equal(fx_call("POST", "/v1/ops/echo.args", "{\"a\": 5}", body, sizeof(body)), 400);
	fx_assert_code(body, "request.invalid");
	assert_int_equal(fx_call("POST", "/v1/ops/echo.num", "{\"n\": \"5\"}", body, sizeof(body)), 400);
	assert_int_equal(fx_call("POST", "/v1/ops/echo.num", "{\"n\": 1.5}", body, sizeof(body)), 400);
	assert_int_equal(fx_call("POST", "/v1/ops/echo.args", "[\"a\"]", body, sizeof(body)), 400);
	fx_assert_code(body, "request.invalid");
	assert_int_equal(fx_call("POST", "/v1/ops/echo.args", "{\"a\": ", body, sizeof(body)), 400);
	assert_int_equal(
	    fx_call("POST", "/v1/ops/echo.args", "{\"a\": \"x\", \"a\": \"y\"}", body, sizeof(body)), 400);
	assert_int_equal(fx_call("POST", "/v1/ops/echo.args", "{\"a\": \"x\\u0000y\"}", body, sizeof(body)),
	                 400);
	assert_int_equal(fx_call("GET", "/v1/ops/echo.args", NULL, body, sizeof(body)), 405);
	/* Authentication comes before routing. */
	assert_int_equal(
	    fx_req("POST", "/v1/ops/echo.args", NULL, "{\"a\": \"x\"}", body, sizeof(body), NULL, 0), 401);
	assert_int_equal(fx_req("POST", "/v1/ops/no.such.op", "wrong", "{}", body, sizeof(body), NULL, 0),
	                 401);
}

/* Policy: bob may run echo.* only. */
static void
test_op_policy(void **state)
{
	char body[65536];

	assert_int_equal(
	    fx_req("POST", "/v1/ops/echo.args", FX_TOKEN_BOB, "{\"a\": \"hi\"}", body, sizeof(body), NULL, 0),
	    200);
	assert_int_equal(fx_req("POST", "/v1/ops/true", FX_TOKEN_BOB, "", body, sizeof(body), NULL, 0), 403);
	fx_assert_code(body, "policy.denied");
}

/* Output past server.max_output_bytes is read and dropped: the answer
 * keeps the first 1024 bytes and says truncated; stderr and the exit code
 * still come. */
static void
test_op_output_capped(void **state)
{
	char body[65536];
	struct json_doc d;
	const struct json_val *r;

	assert_int_equal(fx_call("POST", "/v1/ops/flood", "", body, sizeof(body)), 200);
	r = fx_parse(&d, body);
	assert_int_equal(strlen(json_get_str(r, "stdout")), 1024);
	assert_int_equal(json_get(r, "truncated")->type, JSON_TRUE);
	assert_string_equal(json_get_str(r, "stderr"), "err\n");
	assert_int_equal(json_get(r, "exit_code")->u.num.i, 3);
	json_free(&d);
}

/* An op over its timeout is killed and answered by the runner. */
static void
test_op_timeout(void **state)
{
	char body[65536];
	struct json_doc d;
	const struct json_val *r;
	time_t t0 = time(NULL);

	assert_int_equal(fx_call("POST", "/v1/ops/slow", "", body, sizeof(body)), 200);
	assert_true(time(NULL) - t0 < 15);
	r = fx_parse(&d, body);
	assert_int_equal(json_get(r, "timed_out")->type, JSON_TRUE);
	assert_string_equal(json_get_str(r, "stdout"), "");
	json_free(&d);
}

struct bg {
	char marker[512];
	int status;
};

static void *
bg_one(void *arg)
{
	struct bg *b = arg;
	char json[600], body[4096];

	snprintf(json, sizeof(json), "{\"m\": \"%s\"}", b->marker);
	b->status = fx_call("POST", "/v1/ops/one", json, body, sizeof(body));
	return NULL;
}

/* concurrency 1: a second run while one runs is 429 with Retry-After; once
 * the first ends the op runs again. */
static void
test_op_concurrency(void **state)
{
	char body[4096], head[4096], json[600];
	struct bg b;
	pthread_t th;
	int i;

	snprintf(b.marker, sizeof(b.marker), "%s/running", fx.dir);
	assert_int_equal(pthread_create(&th, NULL, bg_one, &b), 0);
	for (i = 0; i < 1000 && access(b.marker, F_OK) != 0; i++)
		usleep(10000);
	assert_int_equal(access(b.marker, F_OK), 0);
	snprintf(json, sizeof(json), "{\"m\": \"%s/second\"}", fx.dir);
	assert_int_equal(
	    fx_req("POST", "/v1/ops/one", FX_TOKEN, json, body, sizeof(body), head, sizeof(head)), 429);
	fx_assert_code(body, "request.rate_limited");
	assert_non_null(strstr(head, "Retry-After: "));
	pthread_join(th, NULL);
	assert_int_equal(b.status, 200);
	snprintf(json, sizeof(json), "{\"m\": \"%s/third\"}", fx.dir);
	assert_int_equal(fx_call("POST", "/v1/ops/one", json, body, sizeof(body)), 200);
}

/* Only the op's allow-listed variables of serve's start environment. */
static void
test_op_environment(void **state)
{
	char body[65536];

	assert_int_equal(fx_call("POST", "/v1/ops/env.show", "", body, sizeof(body)), 200);
	assert_non_null(strstr(body, "FX_ALLOWED=visible"));
	assert_null(strstr(body, "FX_SECRET"));
	assert_null(strstr(body, "hidden"));
}

/* A program that is not there, or not executable: command.unavailable. */
static void
test_op_program_unusable(void **state)
{
	char body[65536];

	assert_true(fx_call("POST", "/v1/ops/gone", "", body, sizeof(body)) >= 400);
	fx_assert_code(body, "command.unavailable");
	assert_non_null(strstr(body, "/nonexistent/abx/prog"));
	assert_true(fx_call("POST", "/v1/ops/notexec", "", body, sizeof(body)) >= 400);
	fx_assert_code(body, "command.unavailable");
	assert_non_null(strstr(body, "is not executable"));
	assert_true(fx_call("POST", "/v1/ops/dir", "", body, sizeof(body)) >= 400);
	fx_assert_code(body, "command.unavailable");
	assert_non_null(strstr(body, "not a regular file"));
}

/* The metrics count what ran (the text built in the bounded buffer):
 * answers by route and status, ops run and timed out, 429s, policy
 * denials. Runs last: the earlier tests made these. */
static void
test_metrics_count_ops(void **state)
{
	char body[65536];
	const char *sum;

	assert_int_equal(fx_call("GET", "/metrics", NULL, body, sizeof(body)), 200);
	assert_non_null(strstr(body, "abx_http_requests_total{route=\"ops_run\",status=\"200\"} "));
	assert_non_null(strstr(body, "abx_http_requests_total{route=\"ops_run\",status=\"429\"} 1\n"));
	assert_non_null(
	    strstr(body, "abx_http_request_duration_seconds_bucket{route=\"ops_run\",le=\"+Inf\"} "));
	/* bounds as %g printed them; the sum in seconds with six decimals */
	assert_non_null(
	    strstr(body, "abx_http_request_duration_seconds_bucket{route=\"ops_run\",le=\"0.0005\"} "));
	assert_non_null(
	    strstr(body, "abx_http_request_duration_seconds_bucket{route=\"ops_run\",le=\"0.0025\"} "));
	assert_non_null(
	    strstr(body, "abx_http_request_duration_seconds_bucket{route=\"ops_run\",le=\"5\"} "));
	sum = strstr(body, "abx_http_request_duration_seconds_sum{route=\"ops_run\"} ");
	assert_non_null(sum);
	sum = strchr(sum, '}') + 2;
	assert_true(strspn(sum, "0123456789") >= 1 && sum[strspn(sum, "0123456789")] == '.');
	assert_int_equal(strspn(sum + strspn(sum, "0123456789") + 1, "0123456789"), 6);
	assert_non_null(strstr(body, "abx_ops_timeouts_total 1\n"));
	assert_non_null(strstr(body, "abx_ops_rejected_total 1\n"));
	assert_non_null(strstr(body, "abx_policy_denials_total 1\n"));
	assert_non_null(strstr(body, "abx_install_jobs_running 0\n"));
	assert_null(strstr(body, "abx_ops_runs_total 0\n"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_op_runs_and_answers), cmocka_unit_test(test_op_bad_requests),
	    cmocka_unit_test(test_op_policy),           cmocka_unit_test(test_op_output_capped),
	    cmocka_unit_test(test_op_timeout),          cmocka_unit_test(test_op_concurrency),
	    cmocka_unit_test(test_op_environment),      cmocka_unit_test(test_op_program_unusable),
	    cmocka_unit_test(test_metrics_count_ops),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
