/* core/server/api_sessions.c and core/server/api_wire.c through the API,
 * as serve runs them (tests/unit/api_fixture.h): routing and its
 * refusals (the old /v1/agents/<a>/sessions paths are no route), bodies
 * refused before an install starts, the working directory and environment
 * rules, agents.<a>.run's timeout, and a session whose install fails
 * ending failed with its events readable. */
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

/* Paths of the sessions wire: unknown ids, methods, authentication; the
 * paths of no session API are the API's ordinary 404. */
static void
test_routing(void **state)
{
	static const char *const gone[][2] = {
	    {"GET", "/v1/agents/fake/sessions"},
	    {"POST", "/v1/agents/fake/sessions"},
	    {"GET", "/v1/agents/fake/sessions/as_0000000000000000"},
	    {"GET", "/v1/agents/fake/sessions/as_0000000000000000/events"},
	    {"POST", "/v1/agents/fake/sessions/as_0000000000000000/cancel"},
	};
	char body[65536];
	struct json_doc d;
	const struct json_val *r;
	size_t i;

	assert_int_equal(fx_call("GET", "/v1/agents/sessions", NULL, body, sizeof(body)), 200);
	r = fx_parse(&d, body);
	assert_string_equal(json_get_str(r, "object"), "list");
	assert_int_equal(json_get(r, "data")->u.arr.n, 0);
	json_free(&d);
	assert_int_equal(fx_call("GET", "/v1/agents/sessions/as_0000000000000000", NULL, body, sizeof(body)),
	                 404);
	fx_assert_code(body, "not_found");
	assert_int_equal(
	    fx_call("GET", "/v1/agents/sessions/as_0000000000000000/events", NULL, body, sizeof(body)), 404);
	assert_int_equal(fx_call("DELETE", "/v1/agents/sessions", NULL, body, sizeof(body)), 405);
	fx_assert_code(body, "request.method");
	for (i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
		assert_int_equal(fx_call(gone[i][0], gone[i][1], "{\"prompt\": \"x\"}", body, sizeof(body)),
		                 404);
		fx_assert_code(body, "not_found");
		assert_non_null(strstr(body, "no such resource"));
	}
	/* Authentication first, whatever the path. */
	assert_int_equal(fx_req("GET", "/v1/agents/sessions", NULL, NULL, body, sizeof(body), NULL, 0), 401);
	assert_int_equal(fx_req("GET", "/v1/agents/fake/sessions", "bad", NULL, body, sizeof(body), NULL, 0),
	                 401);
}

/* A body agents.<a>.run refuses is refused before an install starts: no
 * job, no session. */
static void
test_run_bad_bodies(void **state)
{
	static const char *const bad[] = {
	    "[1]",                                                /* not an object */
	    "{\"prompt\": ",                                      /* truncated */
	    "{}",                                                 /* prompt is required */
	    "{\"prompt\": [1]}",                                  /* a placeholder's value is a scalar */
	    "{\"prompt\": \"a\\u0000b\"}",                        /* NUL */
	    "{\"prompt\": \"x\", \"nope\": 1}",                   /* not a parameter */
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
		int status = fx_call("POST", "/v1/ops/agents.fake.run", bad[i], body, sizeof(body));

		if (status != 400) {
			fprintf(stderr, "%s: %d %s\n", bad[i], status, body);
			fail();
		}
	}
	/* Inside the state directory (journals, the token): refused. */
	snprintf(path, sizeof(path), "{\"prompt\": \"x\", \"cwd\": \"%s/state\"}", fx.dir);
	assert_int_equal(fx_call("POST", "/v1/ops/agents.fake.run", path, body, sizeof(body)), 400);
	assert_non_null(strstr(body, "inside the state directory"));
	/* No install job was started for any of them. */
	snprintf(path, sizeof(path), "%s/tools/fake", fx.dir);
	assert_int_not_equal(stat(path, &st), 0);
	assert_int_equal(fx_call("GET", "/v1/agents/sessions", NULL, body, sizeof(body)), 200);
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

/* A session whose install fails: created in_progress at once, then it
 * ends failed; its events say so, in order; Last-Event-ID and ?after= are
 * event ids; it takes no message and a cancellation finds no turn. */
/* api_test_created: wait until the session's thread has taken it past
 * in_progress (its install failed), before create answers. */
static void
until_not_in_progress(struct sessions *S, const char *id)
{
	struct session_view v;
	int i;

	for (i = 0; i < 600 && sessions_get(S, NULL, id, &v) == 0 && v.status == SESSION_IN_PROGRESS; i++)
		usleep(50000);
}

static void
test_session_install_fails(void **state)
{
	static const char *const bad[] = {"?after=x", "?after=-1", "?after=4294967295",
	                                  "?after=", "?after=1e3"};
	char body[65536], target[256], id[64];
	struct json_doc d;
	const struct json_val *r;
	const char *st = NULL;
	size_t k;
	int i;

	/* The answer is the session as created, in_progress, even when its
	 * thread has already taken it further (here: failed) by then. */
	api_test_created = until_not_in_progress;
	assert_int_equal(fx_call("POST", "/v1/agents/sessions",
	                         "{\"agent_id\": \"fake\", \"environment\": {\"type\": \"self_hosted\"}, "
	                         "\"input\": \"hi\"}",
	                         body, sizeof(body)),
	                 200);
	api_test_created = NULL;
	r = fx_parse(&d, body);
	assert_non_null(json_get_str(r, "id"));
	snprintf(id, sizeof(id), "%s", json_get_str(r, "id"));
	assert_string_equal(json_get_str(r, "status"), "in_progress");
	json_free(&d);
	snprintf(target, sizeof(target), "/v1/agents/sessions/%s", id);
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
	/* Its events, as the stream of an ended session: pending, then
	 * failed, and the stream ends. */
	snprintf(target, sizeof(target), "/v1/agents/sessions/%s/events", id);
	assert_int_equal(fx_call("GET", target, NULL, body, sizeof(body)), 200);
	assert_non_null(strstr(body, "event: agent.session.environment.pending"));
	assert_non_null(strstr(body, "event: agent.session.environment.failed"));
	assert_true(strstr(body, "environment.pending") < strstr(body, "environment.failed"));
	snprintf(target, sizeof(target), "/v1/agents/sessions/%s/events?after=1000", id);
	assert_int_equal(fx_call("GET", target, NULL, body, sizeof(body)), 200);
	assert_null(strstr(body, "agent.session."));
	for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		snprintf(target, sizeof(target), "/v1/agents/sessions/%s/events%s", id, bad[k]);
		if (fx_call("GET", target, NULL, body, sizeof(body)) != 400) {
			fprintf(stderr, "%s: %s\n", target, body);
			fail();
		}
		fx_assert_code(body, "request.invalid");
	}
	/* A cancellation finds no turn running; a message finds it failed. */
	snprintf(target, sizeof(target), "/v1/agents/sessions/%s/events", id);
	assert_int_equal(fx_call("POST", target, "{\"events\": [{\"type\": \"agent.session.input.cancel\"}]}",
	                         body, sizeof(body)),
	                 409);
	assert_int_equal(fx_call("POST", target,
	                         "{\"events\": [{\"type\": \"agent.session.input.message\", \"input\": "
	                         "\"x\"}]}",
	                         body, sizeof(body)),
	                 409);
	fx_assert_code(body, "session.closed");
	/* It is listed. */
	assert_int_equal(fx_call("GET", "/v1/agents/sessions", NULL, body, sizeof(body)), 200);
	assert_non_null(strstr(body, id));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_routing),
	    cmocka_unit_test(test_run_bad_bodies),
	    cmocka_unit_test(test_run_timeout_bounds),
	    cmocka_unit_test(test_session_install_fails),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
