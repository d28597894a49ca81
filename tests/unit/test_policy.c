#include "dir_fixture.h"
#include "server/policy.h"
#include "base/digest.h"

#define D1 "1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "2222222222222222222222222222222222222222222222222222222222222222"

static int
load_text(struct policy *p, const char *text, struct err *e)
{
	policy_init(p);
	return policy_load_file(p, write_file("policy.json", text), e);
}

/* --- hostile input first --- */

static void
test_bad_patterns(void **state)
{
	static const char *const bad[] = {"",     ".",    "a..b", "a.",  ".a",  "**.x", "a.**.b",
	                                  "a.b*", "a.*b", "a b",  "a/b", "***", "a.$"};
	struct err e = {0};
	size_t i;
	char big[POL_PATTERN_MAX + 2];

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (policy_pattern_check(bad[i], &e) == 0)
			fail_msg("pattern \"%s\" accepted", bad[i]);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(policy_pattern_check(big, &e), -1);
	assert_int_equal(policy_pattern_check("agents.*.sessions.**", &e), 0);
	assert_int_equal(policy_pattern_check("**", &e), 0);
	assert_int_equal(policy_pattern_check("tests.run-all_2", &e), 0);
}

static void
test_bad_policy_files(void **state)
{
	static const struct {
		const char *text, *code, *needle;
	} cases[] = {
	    {"{\"principals\": {\"a\": {}},}", "json.syntax", ""},
	    {"{\"principals\": {\"a\": {}, \"a\": {}}}", "json.syntax", "duplicate"},
	    /* A hidden second preset or principal: the parser refuses a key with
	     * NUL, so "preset\u0000" cannot stand in for "preset". */
	    {"{\"principals\": {\"ro\": {\"preset\": \"readonly\", \"preset\\u0000\": \"admin\"}}}",
	     "json.syntax", "policy.json:1:53: \\u0000 in an object key"},
	    {"{\"principals\": {\"a\": {\"preset\": \"readonly\"}, \"a\\u0000\": {\"preset\": \"admin\"}}}",
	     "json.syntax", "\\u0000 in an object key"},
	    {"[]", "config.invalid", "expected an object"},
	    {"{\"principal\": {}}", "config.invalid", "principal: unknown key (did you mean principals?)"},
	    {"{\"principals\": []}", "config.invalid", "principals: expected an object"},
	    {"{\"principals\": {\"a b\": {}}}", "config.invalid", "principal name"},
	    {"{\"principals\": {\"a\": {\"alow\": []}}}", "config.invalid",
	     "principals.a.alow: unknown key (did you mean principals.a.allow?)"},
	    {"{\"principals\": {\"a\": {\"allow\": [\"a..b\"]}}}", "config.invalid", "principals.a.allow[0]"},
	    {"{\"principals\": {\"a\": {\"allow\": \"**\"}}}", "config.invalid", "expected an array"},
	    {"{\"principals\": {\"a\": {\"token_sha256\": \"abc\"}}}", "config.invalid", "64 hex digits"},
	    {"{\"principals\": {\"a\": {\"token_sha256\": [\"" D1 "\"]}, \"b\": {\"token_sha256\": \"" D1
	     "\"}}}",
	     "config.invalid", "already belongs to principal a"},
	    {"{\"principals\": {\"a\": {\"preset\": \"root\"}}}", "config.invalid", "not one of readonly"},
	    {"{\"principals\": {\"a\": {\"token_sha256\": \"" D1 "\", \"allow\": [1]}}}", "config.invalid",
	     "expected a string"},
	};
	struct policy p;
	struct err e = {0};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = load_text(&p, cases[i].text, &e);
		if (rc != -1 || strcmp(e.code, cases[i].code) != 0 || strstr(e.msg, cases[i].needle) == NULL)
			fail_msg("case %zu: rc %d code %s msg %s", i, rc, e.code, e.msg);
	}
}

static void
test_match(void **state)
{
	assert_true(policy_match("**", "agents.codex.run"));
	assert_true(policy_match("**", "x"));
	assert_true(policy_match("agents.*.run", "agents.codex.run"));
	assert_false(policy_match("agents.*.run", "agents.codex.sessions.create"));
	assert_false(policy_match("agents.*", "agents.codex.run"));
	assert_true(policy_match("agents.**", "agents.codex.run"));
	assert_true(policy_match("agents.codex.**", "agents.codex.sessions.create"));
	assert_false(policy_match("agents.codex.**", "agents.codex"));
	assert_false(policy_match("agents.codex.**", "agents.codexx.run"));
	assert_false(policy_match("agents.codex.run", "agents.codex.run.x"));
	assert_false(policy_match("agents.codex.run.x", "agents.codex.run"));
	assert_true(policy_match("*", "tests"));
	assert_false(policy_match("*", "tests.run"));
	assert_false(policy_match("tests", "test"));
}

static void
test_presets(void **state)
{
	struct policy p;
	struct pol_decision d;
	struct err e = {0};
	const char *inst[] = {"codex"};

	policy_init(&p);
	assert_int_equal(policy_add_preset(&p, "ro", "readonly", "preset readonly", &e), 0);
	assert_int_equal(policy_add_preset(&p, "ag", "agents", "preset agents", &e), 0);
	assert_int_equal(policy_add_preset(&p, "ad", "admin", "preset admin", &e), 0);
	assert_int_equal(policy_add_preset(&p, "x", "superuser", "", &e), -1);
	p.mode = CFG_MODE_LAZY;

	assert_true(policy_decide(&p, "ro", "agents.codex.sessions.get", NULL, 0, &d));
	assert_true(policy_decide(&p, "ro", "agents.codex.status", NULL, 0, &d));
	assert_false(policy_decide(&p, "ro", "agents.codex.run", inst, 1, &d));
	assert_false(policy_decide(&p, "ro", "agents.codex.sessions.send_event", NULL, 0, &d));
	assert_false(policy_decide(&p, "ro", "agents.codex.install", inst, 1, &d));
	assert_non_null(strstr(d.rule, "ro: deny agents.*.install (preset readonly)"));
	assert_false(policy_decide(&p, "ro", "tests.run", NULL, 0, &d));

	assert_true(policy_decide(&p, "ag", "agents.codex.run", inst, 1, &d));
	assert_true(d.install_permitted);
	assert_non_null(strstr(d.rule, "ag: allow agents.*.run (preset agents)"));
	assert_true(policy_decide(&p, "ag", "agents.codex.sessions.create", inst, 1, &d));
	assert_true(policy_decide(&p, "ag", "agents.codex.sessions.send_event", NULL, 0, &d));
	assert_false(d.install_permitted);
	assert_false(policy_decide(&p, "ag", "agents.codex.install", inst, 1, &d));
	assert_non_null(strstr(d.rule, "no allow rule matches agents.codex.install"));
	assert_false(policy_decide(&p, "ag", "tests.run", NULL, 0, &d));

	assert_true(policy_decide(&p, "ad", "agents.codex.install", inst, 1, &d));
	assert_true(policy_decide(&p, "ad", "tests.run", NULL, 0, &d));
	assert_false(policy_decide(&p, "nobody", "tests.run", NULL, 0, &d));
	assert_non_null(strstr(d.rule, "no such principal"));
}

static void
test_deny_wins_and_install_admission(void **state)
{
	struct policy p;
	struct pol_decision d;
	struct err e = {0};
	const char *codex[] = {"codex"}, *gem[] = {"gemini"};

	assert_int_equal(
	    load_text(&p,
	              "{\"principals\": {\"boss\": {\"preset\": \"admin\","
	              " \"deny\": [\"agents.codex.install\"]},"
	              " \"ci\": {\"allow\": [\"tests.*\", \"agents.**\"], \"deny\": [\"tests.nuke\"]}}}",
	              &e),
	    0);
	p.mode = CFG_MODE_LAZY;
	/* an admin whose install is denied cannot start codex, even by run */
	assert_false(policy_decide(&p, "boss", "agents.codex.run", codex, 1, &d));
	assert_non_null(strstr(d.rule, "install admission"));
	assert_non_null(strstr(d.rule, "deny agents.codex.install (policy)"));
	assert_false(policy_decide(&p, "boss", "agents.codex.sessions.create", codex, 1, &d));
	assert_false(policy_decide(&p, "boss", "agents.codex.install", codex, 1, &d));
	/* nor a command that installs codex */
	assert_false(policy_decide(&p, "boss", "lint", codex, 1, &d));
	/* reading is fine; other agents are fine */
	assert_true(policy_decide(&p, "boss", "agents.codex.sessions.get", NULL, 0, &d));
	assert_true(policy_decide(&p, "boss", "agents.gemini.run", gem, 1, &d));
	/* deny wins over an earlier, broader allow */
	assert_true(policy_decide(&p, "ci", "tests.unit", NULL, 0, &d));
	assert_false(policy_decide(&p, "ci", "tests.nuke", NULL, 0, &d));
	assert_non_null(strstr(d.rule, "ci: deny tests.nuke (policy)"));
}

static void
test_mode_and_install_permitted(void **state)
{
	struct policy p;
	struct pol_decision d;
	struct err e = {0};
	const char *codex[] = {"codex"};

	policy_init(&p);
	assert_int_equal(policy_add_preset(&p, "a", "admin", "preset admin", &e), 0);
	p.mode = CFG_MODE_BUILD;
	assert_true(policy_decide(&p, "a", "agents.codex.run", codex, 1, &d));
	assert_false(d.install_permitted);
	p.mode = CFG_MODE_OFF;
	assert_true(policy_decide(&p, "a", "agents.codex.run", codex, 1, &d));
	assert_false(d.install_permitted);
	p.mode = CFG_MODE_OFFLINE;
	assert_true(policy_decide(&p, "a", "agents.codex.run", codex, 1, &d));
	assert_true(d.install_permitted);
}

static void
test_tokens(void **state)
{
	struct policy p;
	struct err e = {0};
	unsigned char d1[32], d2[32], d3[32];

	assert_int_equal(load_text(&p,
	                           "{\"principals\": {\"a\": {\"token_sha256\": [\"" D1 "\"]},"
	                           " \"b\": {\"token_sha256\": \"" D2 "\"}}}",
	                           &e),
	                 0);
	assert_int_equal(hex_decode(D1, d1, 32), 0);
	assert_int_equal(hex_decode(D2, d2, 32), 0);
	assert_string_equal(policy_principal_for_digest(&p, d1)->name, "a");
	assert_string_equal(policy_principal_for_digest(&p, d2)->name, "b");
	memset(d3, 0x33, 32);
	assert_null(policy_principal_for_digest(&p, d3));
	assert_int_equal(policy_add_token_digest(&p, "default", d3, &e), 0);
	assert_string_equal(policy_principal_for_digest(&p, d3)->name, "default");
	assert_int_equal(policy_add_token_digest(&p, "default", d1, &e), -1);
	assert_string_equal(e.code, "config.invalid");
	assert_int_equal(policy_add_token_digest(&p, "default", d3, &e), 0); /* idempotent */
}

static void
test_setup(void **state)
{
	struct config c;
	struct policy p;
	struct pol_decision d;
	struct err e = {0};

	/* nothing configured: default is admin */
	config_defaults(&c);
	assert_int_equal(policy_setup(&p, &c, &e), 0);
	assert_true(policy_decide(&p, "default", "anything.at.all", NULL, 0, &d));
	assert_non_null(strstr(d.rule, "default preset admin"));
	/* a preset */
	snprintf(c.preset, sizeof(c.preset), "readonly");
	assert_int_equal(policy_setup(&p, &c, &e), 0);
	assert_false(policy_decide(&p, "default", "anything.at.all", NULL, 0, &d));
	/* a policy file without default: default may call nothing */
	c.preset[0] = '\0';
	snprintf(c.policy, sizeof(c.policy), "%s",
	         write_file("p.json", "{\"principals\": {\"ci\": {\"preset\": \"agents\"}}}"));
	assert_int_equal(policy_setup(&p, &c, &e), 0);
	assert_non_null(policy_find(&p, "default"));
	assert_false(policy_decide(&p, "default", "agents.codex.status", NULL, 0, &d));
	assert_true(policy_decide(&p, "ci", "agents.codex.status", NULL, 0, &d));
	/* a file with default plus a preset: refused */
	snprintf(c.policy, sizeof(c.policy), "%s",
	         write_file("p2.json", "{\"principals\": {\"default\": {\"preset\": \"agents\"}}}"));
	snprintf(c.preset, sizeof(c.preset), "admin");
	assert_int_equal(policy_setup(&p, &c, &e), -1);
	assert_string_equal(e.code, "config.invalid");
	/* a missing policy file is an error */
	snprintf(c.policy, sizeof(c.policy), "%s/missing.json", dir);
	assert_int_equal(policy_setup(&p, &c, &e), -1);
	assert_string_equal(e.code, "io.error");
}

static void
test_op_ids(void **state)
{
	assert_true(policy_op_id_valid("agents.codex.run"));
	assert_true(policy_op_id_valid("t"));
	assert_false(policy_op_id_valid(""));
	assert_false(policy_op_id_valid("a..b"));
	assert_false(policy_op_id_valid("a.*"));
	assert_false(policy_op_id_valid("a."));
	assert_false(policy_op_id_valid("a/b"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_patterns),
	    cmocka_unit_test(test_bad_policy_files),
	    cmocka_unit_test(test_match),
	    cmocka_unit_test(test_presets),
	    cmocka_unit_test(test_deny_wins_and_install_admission),
	    cmocka_unit_test(test_mode_and_install_permitted),
	    cmocka_unit_test(test_tokens),
	    cmocka_unit_test(test_setup),
	    cmocka_unit_test(test_op_ids),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
