#include "dir_fixture.h"
#include "server/ops.h"
#include "base/json.h"

static int
known_tool(const char *name, void *ctx)
{
	return strcmp(name, "node-runtime") == 0 || strcmp(name, "codex") == 0 ||
	       strcmp(name, "ripgrep") == 0;
}

static enum ops_agent_state
agent_lookup(const char *name, void *ctx, char *hint, size_t cap)
{
	if (strcmp(name, "codex") == 0 || strcmp(name, "gemini") == 0)
		return OPS_AGENT_OK;
	if (strcmp(name, "node-runtime") == 0)
		return OPS_AGENT_NOT_AGENT;
	return OPS_AGENT_UNKNOWN;
}

static int
load_text(struct ops *o, const char *text, struct err *e)
{
	ops_free(o);
	assert_int_equal(ops_init(o, e), 0);
	return ops_load_commands(o, write_file("commands.json", text), known_tool, NULL, e);
}

/* --- hostile first --- */

static void
test_bad_commands(void **state)
{
	static const struct {
		const char *text, *code, *needle;
	} cases[] = {
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/true\"]},]", "json.syntax", ""},
	    {"{}", "config.invalid", "expected an array"},
	    {"[1]", "config.invalid", "[0]: expected a command object"},
	    {"[{\"argv\": [\"/bin/true\"]}]", "config.invalid", "missing \"id\""},
	    {"[{\"id\": \"a b\", \"argv\": [\"/bin/true\"]}]", "config.invalid", "op id"},
	    {"[{\"id\": \"agents.codex.run\", \"argv\": [\"/bin/true\"]}]", "config.invalid", "reserved"},
	    {"[{\"id\": \"a\"}]", "config.invalid", "a: missing \"argv\""},
	    {"[{\"id\": \"a\", \"argv\": []}]", "config.invalid", "non-empty"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/true\"]}, {\"id\": \"a\", \"argv\": [\"/bin/true\"]}]",
	     "config.invalid", "defined twice"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/true\"], \"tiemout\": 5}]", "config.invalid",
	     "a.tiemout: unknown key (did you mean a.timeout?)"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/echo\", \"{x}\"]}]", "config.invalid",
	     "{x} is not a declared"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/echo\"], \"params\": {\"x\": {}}}]", "config.invalid",
	     "declared but not used"},
	    {"[{\"id\": \"a\", \"argv\": [\"{x}\"], \"params\": {\"x\": {}}}]", "config.invalid", "argv[0]"},
	    {"[{\"id\": \"a\", \"argv\": [\"bin/x\"]}]", "config.invalid", "not a relative path"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/echo\", \"{x\"], \"params\": {\"x\": {}}}]",
	     "config.invalid", "unterminated"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/echo\", \"x}\"]}]", "config.invalid", "lone }"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/echo\", \"{}\"]}]", "config.invalid", "empty placeholder"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/echo\", 1]}]", "config.invalid", "every word is a string"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/echo\", \"a\\u0000b\"]}]", "config.invalid", "every word"},
	    /* A hidden second argv: the parser refuses a key holding NUL, with its
	     * place, before any loader could take "argv\u0000" for "argv". */
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/echo\", \"{x}\"], \"params\": {\"x\": {}},\n"
	     " \"argv\\u0000\": [\"/bin/sh\", \"-c\", \"{x}\"]}]",
	     "json.syntax", "commands.json:2:7: \\u0000 in an object key"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/echo\"], \"params\\u0000\": {}}]", "json.syntax",
	     "\\u0000 in an object key"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/true\"], \"install\": [\"nosuch\"]}]", "config.invalid",
	     "no manifest named nosuch"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/true\"], \"install\": \"codex\"}]", "config.invalid",
	     "expected an array of tool names"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/true\"], \"timeout\": 0}]", "config.invalid", "a.timeout"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/true\"], \"cwd\": \"rel\"}]", "config.invalid",
	     "absolute path"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/true\"], \"env\": [\"lower\"]}]", "config.invalid",
	     "variable name"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/true\"], \"env\": [\"ABX_SERVER_TOKEN\"]}]",
	     "config.invalid", "never passed"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/e\", \"{x}\"], \"params\": {\"x\": {\"type\": \"str\"}}}]",
	     "config.invalid", "is not string"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/e\", \"{x}\"], \"params\": {\"x\": {\"requird\": true}}}]",
	     "config.invalid", "did you mean a.params.x.required?"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/e\", \"{x}\"], \"params\": {\"x\": {\"type\": \"integer\", "
	     "\"default\": \"3\"}}}]",
	     "config.invalid", "default: not a integer"},
	    {"[{\"id\": \"a\", \"argv\": [\"/bin/e\", \"{X}\"], \"params\": {\"X\": {}}}]", "config.invalid",
	     "parameter name"},
	};
	struct ops o;
	struct err e = {0};
	size_t i;

	assert_int_equal(ops_init(&o, &e), 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = load_text(&o, cases[i].text, &e);
		if (rc != -1 || strcmp(e.code, cases[i].code) != 0 || strstr(e.msg, cases[i].needle) == NULL)
			fail_msg("case %zu: rc %d code %s msg %s", i, rc, e.code, e.msg);
	}
	ops_free(&o);
}

static void
test_agent_ops(void **state)
{
	struct ops o;
	struct err e = {0};
	const struct op *op;

	assert_int_equal(ops_init(&o, &e), 0);
	assert_int_equal(ops_add_agent(&o, "codex", agent_lookup, NULL, &e), 0);
	assert_int_equal(ops_n(&o), 11);
	op = ops_find(&o, "agents.codex.run");
	assert_non_null(op);
	assert_int_equal(op->ninstall, 1);
	assert_string_equal(op->install[0], "codex");
	op = ops_find(&o, "agents.codex.sessions.create");
	assert_int_equal(op->ninstall, 1);
	op = ops_find(&o, "agents.codex.install");
	assert_int_equal(op->ninstall, 1);
	/* reading ops install nothing */
	op = ops_find(&o, "agents.codex.sessions.events");
	assert_int_equal(op->ninstall, 0);
	assert_true(op->reading);
	assert_int_equal(ops_find(&o, "agents.codex.sessions.get")->ninstall, 0);
	assert_int_equal(ops_find(&o, "agents.codex.sessions.list")->ninstall, 0);
	assert_int_equal(ops_find(&o, "agents.codex.sessions.send_event")->ninstall, 0);
	assert_int_equal(ops_find(&o, "agents.codex.status")->ninstall, 0);
	assert_int_equal(ops_add_agent(&o, "codex", agent_lookup, NULL, &e), -1);
	assert_int_equal(ops_add_agent(&o, "nosuch", agent_lookup, NULL, &e), -1);
	assert_non_null(strstr(e.msg, "no manifest"));
	assert_int_equal(ops_add_agent(&o, "node-runtime", agent_lookup, NULL, &e), -1);
	assert_non_null(strstr(e.msg, "no run block"));
	ops_free(&o);
}

static void
test_build_from_config(void **state)
{
	struct config c;
	struct ops o;
	struct err e = {0};

	config_defaults(&c);
	c.agents.n = 2;
	snprintf(c.agents.v[0], CFG_NAME_MAX, "codex");
	snprintf(c.agents.v[1], CFG_NAME_MAX, "gemini");
	snprintf(
	    c.commands, sizeof(c.commands), "%s",
	    write_file("c.json",
	               "[{\"id\": \"lint\", \"argv\": [\"rg\", \"TODO\"], \"install\": [\"ripgrep\"]}]"));
	assert_int_equal(ops_init(&o, &e), 0);
	assert_int_equal(ops_build(&o, &c, agent_lookup, known_tool, NULL, &e), 0);
	assert_int_equal(ops_n(&o), 23);
	assert_string_equal(ops_find(&o, "lint")->install[0], "ripgrep");
	assert_int_equal(ops_find(&o, "lint")->timeout, 60);
	ops_free(&o);
}

static void
test_many_commands_grow(void **state)
{
	char *text = malloc(OPS_MAX * 64 + 16);
	size_t len = 0;
	struct ops o;
	struct err e = {0};
	int i;

	len += sprintf(text + len, "[");
	for (i = 0; i < OPS_MAX + 1; i++)
		len += sprintf(text + len, "%s{\"id\": \"c%d\", \"argv\": [\"/bin/true\"]}", i ? "," : "", i);
	sprintf(text + len, "]");
	memset(&o, 0, sizeof(o));
	assert_int_equal(load_text(&o, text, &e), -1);
	assert_non_null(strstr(e.msg, "more than"));
	free(text);
	ops_free(&o);
}

/* --- expansion --- */

static const char cmds[] =
    "[{\"id\": \"grep\", \"argv\": [\"/bin/grep\", \"-e\", \"{pattern}\", \"--max-count={count}\", "
    "\"{{literal}}\","
    " \"{path}\"],"
    " \"params\": {\"pattern\": {\"type\": \"string\", \"required\": true},"
    "  \"count\": {\"type\": \"integer\", \"default\": 5},"
    "  \"path\": {\"type\": \"string\"}},"
    " \"env\": [\"HOME\"], \"timeout\": 10, \"cwd\": \"/tmp\", \"description\": \"search\"}]";

static int
expand(const struct op *op, const char *body, char **argv, char *buf, size_t cap, struct err *e)
{
	struct json_doc doc;
	int rc;

	if (body == NULL)
		return ops_expand_argv(op, NULL, argv, buf, cap, e);
	assert_int_equal(json_parse(&doc, body, strlen(body), NULL, e), 0);
	rc = ops_expand_argv(op, doc.root, argv, buf, cap, e);
	json_free(&doc);
	return rc;
}

static void
test_expand_hostile(void **state)
{
	struct ops o;
	struct err e = {0};
	char *argv[OP_ARGV_MAX + 1], buf[OP_EXPAND_MAX];
	const struct op *op;

	memset(&o, 0, sizeof(o));
	assert_int_equal(load_text(&o, cmds, &e), 0);
	op = ops_find(&o, "grep");
	assert_int_equal(expand(op, "{}", argv, buf, sizeof(buf), &e), -1);
	assert_string_equal(e.code, "request.invalid");
	assert_non_null(strstr(e.msg, "missing required parameter pattern"));
	assert_int_equal(expand(op, NULL, argv, buf, sizeof(buf), &e), -1);
	assert_int_equal(expand(op, "[]", argv, buf, sizeof(buf), &e), -1);
	assert_int_equal(expand(op, "{\"pattern\": 1}", argv, buf, sizeof(buf), &e), -1);
	assert_non_null(strstr(e.msg, "must be a string"));
	assert_int_equal(expand(op, "{\"pattern\": \"x\", \"count\": 1.5}", argv, buf, sizeof(buf), &e), -1);
	assert_int_equal(expand(op, "{\"pattern\": \"x\", \"evil\": \"y\"}", argv, buf, sizeof(buf), &e), -1);
	assert_non_null(strstr(e.msg, "unknown parameter"));
	assert_int_equal(expand(op, "{\"pattern\": \"a\\u0000b\"}", argv, buf, sizeof(buf), &e), -1);
	assert_non_null(strstr(e.msg, "U+0000"));
	assert_int_equal(expand(op, "{\"pattern\": null}", argv, buf, sizeof(buf), &e), -1);
	/* a buffer too small is request.too_large, not an overflow */
	assert_int_equal(expand(op, "{\"pattern\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}", argv, buf, 20, &e),
	                 -1);
	assert_string_equal(e.code, "request.too_large");
	ops_free(&o);
}

static void
test_expand_plain_argv(void **state)
{
	struct ops o;
	struct err e = {0};
	char *argv[OP_ARGV_MAX + 1], buf[OP_EXPAND_MAX];
	const struct op *op;

	memset(&o, 0, sizeof(o));
	assert_int_equal(load_text(&o, cmds, &e), 0);
	op = ops_find(&o, "grep");
	assert_int_equal(op->nenv, 1);
	assert_int_equal(op->timeout, 10);
	assert_string_equal(op->cwd, "/tmp");
	/* hostile values stay one argument each, verbatim */
	assert_int_equal(expand(op, "{\"pattern\": \"; rm -rf / $(id) `x`\\nnext\", \"path\": \"a b\"}", argv,
	                        buf, sizeof(buf), &e),
	                 6);
	assert_string_equal(argv[0], "/bin/grep");
	assert_string_equal(argv[1], "-e");
	assert_string_equal(argv[2], "; rm -rf / $(id) `x`\nnext");
	assert_string_equal(argv[3], "--max-count=5");
	assert_string_equal(argv[4], "{literal}");
	assert_string_equal(argv[5], "a b");
	assert_null(argv[6]);
	/* an absent optional without default drops its word */
	assert_int_equal(expand(op, "{\"pattern\": \"{path}\", \"count\": 2}", argv, buf, sizeof(buf), &e),
	                 5);
	assert_string_equal(argv[2], "{path}"); /* a value is never expanded again */
	assert_string_equal(argv[3], "--max-count=2");
	assert_string_equal(argv[4], "{literal}");
	assert_null(argv[5]);
	ops_free(&o);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_commands),      cmocka_unit_test(test_many_commands_grow),
	    cmocka_unit_test(test_expand_hostile),    cmocka_unit_test(test_agent_ops),
	    cmocka_unit_test(test_build_from_config), cmocka_unit_test(test_expand_plain_argv),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
