/* core/server/api_sessions.c through the API, as serve runs
 * them (tests/unit/api_fixture.h): routing and its refusals, bounds of the
 * query, bodies refused before an install starts, the working directory
 * and environment rules, agents.<a>.run's timeout, and a session whose
 * install fails ending failed with its events readable. */
#include "api_fixture.h"

/* An agent whose archive is on a port nothing listens on: its install fails
 * at once (connection refused), with nothing reaching the network. */
static const char man_fake[] =
    "{\"schema\":1,\"name\":\"fake\",\"binary\":\"fake\",\"version\":\"1.0.0\","
    " \"source\":{\"type\":\"tarball\",\"bin\":\"bin/fake\",\"strip_components\":1,"
    "  \"platforms\":{\"linux-x64\":{\"url\":\"https://127.0.0.1:1/fake.tgz\",\"sha256\":"
    "\"0000000000000000000000000000000000000000000000000000000000000000\"},"
    "   \"linux-arm64\":{\"url\":\"https://127.0.0.1:1/fake.tgz\",\"sha256\":"
    "\"0000000000000000000000000000000000000000000000000000000000000000\"}}},"
    " \"hosts\":[\"127.0.0.1\"],\"verify\":{\"argv\":[\"{bin}\"],\"expect\":\"fake 1.0.0\"},"
    " \"run\":[\"{bin}\",\"{prompt}\"],"
    " \"platforms\":[\"linux-x64\",\"linux-arm64\"],\"size_hint_mb\":1}";

static int
setup(void **state)
{
	static const char *mans[] = {"fake", man_fake, NULL};

	return fx_start("\"agents\": [\"fake\"], \"server\": {\"session_env\": [\"FX_OK\"]}", "[]", mans);
}

static int
teardown(void **state)
{
	fx_stop();
	return 0;
}

/* Paths of the sessions API: what is not one, unknown agents and ids, bad
 * segments, methods. */
static void
test_routing(void **state)
{
	char body[65536], head[4096];
	struct json_doc d;
	const struct json_val *r;

	assert_int_equal(fx_call("GET", "/v1/agents/fake/sessions", NULL, body, sizeof(body)), 200);
	r = fx_parse(&d, body);
	assert_string_equal(json_get_str(r, "object"), "list");
	assert_int_equal(json_get(r, "data")->type, JSON_ARRAY);
	assert_int_equal(json_get(r, "data")->u.arr.n, 0);
	json_free(&d);
	assert_int_equal(fx_call("GET", "/v1/agents/nope/sessions", NULL, body, sizeof(body)), 404);
	fx_assert_code(body, "not_found");
	assert_non_null(strstr(body, "no agent nope is enabled"));
	assert_int_equal(fx_call("POST", "/v1/agents/nope/sessions", "{}", body, sizeof(body)), 404);
	assert_int_equal(
	    fx_call("GET", "/v1/agents/fake/sessions/as_0000000000000000", NULL, body, sizeof(body)), 404);
	fx_assert_code(body, "not_found");
	assert_int_equal(fx_call("GET", "/v1/agents/fake/sessions/a.b", NULL, body, sizeof(body)), 404);
	assert_int_equal(
	    fx_call("GET", "/v1/agents/fake/sessions/as_0000000000000000/events", NULL, body, sizeof(body)),
	    404);
	assert_int_equal(
	    fx_call("POST", "/v1/agents/fake/sessions/as_0000000000000000/cancel", "", body, sizeof(body)),
	    404);
	/* Methods: Allow says which. */
	assert_int_equal(fx_req("DELETE", "/v1/agents/fake/sessions", FX_TOKEN, NULL, body, sizeof(body),
	                        head, sizeof(head)),
	                 405);
	fx_assert_code(body, "request.method");
	assert_non_null(strstr(head, "Allow: GET, POST"));
	assert_int_equal(fx_req("POST", "/v1/agents/fake/sessions/as_0000000000000000", FX_TOKEN, "", body,
	                        sizeof(body), head, sizeof(head)),
	                 405);
	assert_non_null(strstr(head, "Allow: GET"));
	/* Not the sessions API: the API's 404. */
	assert_int_equal(fx_call("GET", "/v1/agents/fake/sessionsx", NULL, body, sizeof(body)), 404);
	/* Authentication first, whatever the path. */
	assert_int_equal(fx_req("GET", "/v1/agents/fake/sessions", NULL, NULL, body, sizeof(body), NULL, 0),
	                 401);
	assert_int_equal(fx_req("GET", "/v1/agents/nope/sessions", "bad", NULL, body, sizeof(body), NULL, 0),
	                 401);
}

/* A request body refused is refused before an install starts: no job. */
static void
test_create_bad_bodies(void **state)
{
	static const char *const bad[] = {
	    "[1]",                                                /* not an object */
	    "{\"prompt\": ",                                      /* truncated */
	    "{}",                                                 /* prompt is required */
	    "{\"prompt\": [1]}",                                  /* a placeholder's value is a scalar */
	    "{\"prompt\": \"a\\u0000b\"}",                        /* NUL */
	    "{\"prompt\": \"x\", \"nope\": 1}",                   /* not a parameter */
	    "{\"prompt\": \"x\", \"timeout\": 5}",                /* run only */
	    "{\"prompt\": \"x\", \"cwd\": \"relative\"}",         /* cwd: absolute */
	    "{\"prompt\": \"x\", \"cwd\": \"/nonexistent/abx\"}", /* cwd: a directory */
	    "{\"prompt\": \"x\", \"cwd\": 7}",                    /* cwd: a string */
	    "{\"prompt\": \"x\", \"env\": {\"PATH\": \"/x\"}}",   /* not in server.session_env */
	    "{\"prompt\": \"x\", \"env\": {\"FX_OK\": 1}}",       /* a string */
	    "{\"prompt\": \"x\", \"env\": [\"FX_OK\"]}",          /* an object */
	};
	char body[65536], path[512];
	size_t i;
	struct stat st;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int status = fx_call("POST", "/v1/agents/fake/sessions", bad[i], body, sizeof(body));

		if (status != 400) {
			fprintf(stderr, "%s: %d %s\n", bad[i], status, body);
			fail();
		}
	}
	/* Inside the state directory (journals, the token): refused. */
	snprintf(path, sizeof(path), "{\"prompt\": \"x\", \"cwd\": \"%s/state\"}", fx.dir);
	assert_int_equal(fx_call("POST", "/v1/agents/fake/sessions", path, body, sizeof(body)), 400);
	assert_non_null(strstr(body, "inside the state directory"));
	/* No install job was started for any of them. */
	snprintf(path, sizeof(path), "%s/tools/fake", fx.dir);
	assert_int_not_equal(stat(path, &st), 0);
	assert_int_equal(fx_call("GET", "/v1/agents/fake/sessions", NULL, body, sizeof(body)), 200);
	assert_non_null(strstr(body, "\"data\":[]"));
}

/* agents.<a>.run: timeout is whole seconds 1..86400. */
static void
test_run_timeout_bounds(void **state)
{
	static const char *const bad[] = {
	    "{\"prompt\": \"x\", \"timeout\": 0}", "{\"prompt\": \"x\", \"timeout\": 86401}",
	    "{\"prompt\": \"x\", \"timeout\": 1.5}", "{\"prompt\": \"x\", \"timeout\": \"5\"}"};
	char body[65536];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(fx_call("POST", "/v1/ops/agents.fake.run", bad[i], body, sizeof(body)), 400);
		fx_assert_code(body, "request.invalid");
		assert_non_null(strstr(body, "1..86400"));
	}
}

/* The query of an events page: after and limit are numbers in range. */
static void
test_events_query_bounds(void **state)
{
	static const char *const bad[] = {"?after=x", "?after=-1",         "?after=4294967295",
	                                  "?limit=0", "?limit=1001",       "?limit=1e3",
	                                  "?after=",  "?limit=99999999999"};
	char body[65536], target[256];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(target, sizeof(target), "/v1/agents/fake/sessions/as_0000000000000000/events%s",
		         bad[i]);
		if (fx_call("GET", target, NULL, body, sizeof(body)) != 400) {
			fprintf(stderr, "%s: %s\n", target, body);
			fail();
		}
		fx_assert_code(body, "request.invalid");
	}
}

/* A session whose install fails: 201 with its Location at once, then it
 * ends failed; its events say so, in order, and a page of them obeys
 * limit. */
static void
test_session_install_fails(void **state)
{
	char body[65536], head[4096], target[256], id[64];
	struct json_doc d;
	const struct json_val *r;
	const char *st = NULL;
	int i;

	assert_int_equal(fx_req("POST", "/v1/agents/fake/sessions", FX_TOKEN, "{\"prompt\": \"hi\"}", body,
	                        sizeof(body), head, sizeof(head)),
	                 201);
	r = fx_parse(&d, body);
	assert_non_null(json_get_str(r, "id"));
	snprintf(id, sizeof(id), "%s", json_get_str(r, "id"));
	assert_string_equal(json_get_str(r, "status"), "in_progress");
	json_free(&d);
	snprintf(target, sizeof(target), "Location: /v1/agents/fake/sessions/%s", id);
	assert_non_null(strstr(head, target));
	snprintf(target, sizeof(target), "/v1/agents/fake/sessions/%s", id);
	for (i = 0; i < 600; i++) {
		assert_int_equal(fx_call("GET", target, NULL, body, sizeof(body)), 200);
		r = fx_parse(&d, body);
		st = json_get_str(r, "status");
		if (strcmp(st, "in_progress") != 0)
			break;
		json_free(&d);
		st = NULL;
		usleep(50000);
	}
	assert_non_null(st);
	assert_string_equal(st, "failed");
	json_free(&d);
	/* Another agent's path does not see it. */
	snprintf(target, sizeof(target), "/v1/agents/nope/sessions/%s", id);
	assert_int_equal(fx_call("GET", target, NULL, body, sizeof(body)), 404);
	/* Its events: pending, then failed; limit=1 gives one. */
	snprintf(target, sizeof(target), "/v1/agents/fake/sessions/%s/events", id);
	assert_int_equal(fx_call("GET", target, NULL, body, sizeof(body)), 200);
	assert_non_null(strstr(body, "agent.session.environment.pending"));
	assert_non_null(strstr(body, "agent.session.environment.failed"));
	assert_true(strstr(body, "environment.pending") < strstr(body, "environment.failed"));
	snprintf(target, sizeof(target), "/v1/agents/fake/sessions/%s/events?limit=1", id);
	assert_int_equal(fx_call("GET", target, NULL, body, sizeof(body)), 200);
	assert_non_null(strstr(body, "environment.pending"));
	assert_null(strstr(body, "environment.failed"));
	snprintf(target, sizeof(target), "/v1/agents/fake/sessions/%s/events?after=1000", id);
	assert_int_equal(fx_call("GET", target, NULL, body, sizeof(body)), 200);
	assert_null(strstr(body, "agent.session."));
	/* Cancelling what has ended changes nothing. */
	snprintf(target, sizeof(target), "/v1/agents/fake/sessions/%s/cancel", id);
	fx_call("POST", target, "", body, sizeof(body));
	assert_non_null(strstr(body, "\"status\":\"failed\""));
	/* It is listed. */
	assert_int_equal(fx_call("GET", "/v1/agents/fake/sessions", NULL, body, sizeof(body)), 200);
	assert_non_null(strstr(body, id));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_routing),
	    cmocka_unit_test(test_create_bad_bodies),
	    cmocka_unit_test(test_run_timeout_bounds),
	    cmocka_unit_test(test_events_query_bounds),
	    cmocka_unit_test(test_session_install_fails),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
