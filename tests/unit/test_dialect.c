/* core/server/dialect.c: the agents' JSON lines as records, and the argv of
 * their turns. The sample lines have the shapes the agents print (codex
 * exec --json, claude -p --output-format stream-json --verbose, gemini -p
 * --output-format stream-json). */
#include "unit.h"

#include "base/buf.h"
#include "base/proc.h"
#include "pkg/manifest.h"
#include "server/dialect.h"

static const char *const kinds[] = {"raw",         "conversation", "turn_started", "message", "reasoning",
                                    "cmd_start",   "cmd_output",   "cmd_done",     "file",    "tool_call",
                                    "tool_result", "error",        "completed",    "failed"};

/* Each record as one line: kind, then the fields it has. */
static char got[3u << 20]; /* a raw line of DIALECT_LINE_MAX bytes and more */
static int fail_at = -1, nrec;

static int
render(void *arg, const struct dialect_rec *r, struct err *e)
{
	size_t n = strlen(got);
	char *p = got + n;
	size_t cap = sizeof(got) - n;
	struct json_w w;

	(void)arg;
	if (nrec++ == fail_at)
		return err_set(e, "internal", "stop");
	n = (size_t)snprintf(p, cap, "%s", kinds[r->kind]);
	if (r->item_id != NULL)
		n += (size_t)snprintf(p + n, cap - n, " id=%s", r->item_id);
	if (r->name != NULL)
		n += (size_t)snprintf(p + n, cap - n, " name=%s", r->name);
	if (r->detail != NULL)
		n += (size_t)snprintf(p + n, cap - n, " detail=%s", r->detail);
	if (r->text != NULL && r->len + 7 < cap - n) { /* memcpy: the text may hold U+0000 */
		memcpy(p + n, " text=", 6);
		memcpy(p + n + 6, r->text, r->len);
		n += 6 + r->len;
	}
	if (r->has_exit)
		n += (size_t)snprintf(p + n, cap - n, " exit=%d", r->exit_code);
	if (r->value != NULL) {
		json_w_init(&w, 4096);
		json_w_val(&w, r->value);
		n += (size_t)snprintf(p + n, cap - n, " value=%s", w.buf);
		json_w_free(&w);
	}
	snprintf(p + n, cap - n, "%s%s%s\n", r->delta ? " delta" : "", r->done ? " done" : "",
	         r->is_error ? " error" : "");
	return 0;
}

/* The records of lines (NULL-terminated) fed to one stream of d. */
static const char *
feed(enum dialect d, const char *const *lines)
{
	struct dialect_stream s;
	struct err e = {0};

	got[0] = '\0';
	nrec = 0;
	dialect_stream_init(&s, d);
	for (; *lines != NULL; lines++)
		assert_int_equal(dialect_line(&s, *lines, strlen(*lines), render, NULL, &e), 0);
	return got;
}

/* The first record of a line, written back by the JSON writer: its item id
 * and text as JSON strings, with the kind and whether it is done. */
static char rec_id[256], rec_text[256];
static int rec_n, rec_kind, rec_done;

static int
keep(void *arg, const struct dialect_rec *r, struct err *e)
{
	struct json_w w;

	(void)arg;
	(void)e;
	if (rec_n++ > 0)
		return 0;
	rec_kind = (int)r->kind;
	rec_done = r->done;
	json_w_init(&w, sizeof(rec_id) - 1);
	json_w_str(&w, r->item_id != NULL ? r->item_id : "(none)");
	snprintf(rec_id, sizeof(rec_id), "%s", w.overflow ? "(over)" : w.buf);
	json_w_free(&w);
	json_w_init(&w, sizeof(rec_text) - 1);
	json_w_strn(&w, r->text != NULL ? r->text : "", r->len);
	snprintf(rec_text, sizeof(rec_text), "%s", w.overflow ? "(over)" : w.buf);
	json_w_free(&w);
	return 0;
}

/* dialect_codex_message takes a line only when the parse would give one
 * done message whose id and text the writer writes back as the line's own
 * bytes (core/server/sessions_items.c then writes them as they are). */
static void
test_codex_message_shape(void **state)
{
#define M(id, text)                                                                                          \
	"{\"type\":\"item.completed\",\"item\":{\"id\":\"" id                                                \
	"\",\"type\":\"agent_message\",\"text\":\"" text "\"}}"
	static const struct {
		const char *line;
		int ok;
	} cases[] = {
	    {M("i0", "plain text"), 1},
	    {M("i1", "tab\\t \\\"q\\\" back\\\\ \\n \\r \\b \\f"), 1},
	    {M("i2", "caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80"), 1},
	    {M("", ""), 1},
	    {M("i3", "ab\\\"}}"), 1},
	    {M("i4", "slash \\/"), 0},     /* the writer writes '/' */
	    {M("i5", "u \\u00e9"), 0},     /* the writer writes the UTF-8 */
	    {M("i6", "raw \x01 byte"), 0}, /* not JSON */
	    {M("i7", "del \x7f"), 0},
	    {M("i8", "bad \xc3\x28 utf8"), 0},
	    {M("i9", "cut \xe2\x82"), 0},
	    {M("i\\\"d", "escaped id"), 0},
	    {M("i10", "bad \\q escape"), 0},
	    {M("i11", "ends in \\"), 0}, /* the string does not end */
	    {M("i12", "cr") "\r", 0},
	    {M("i13", "space") " ", 0},
	    {"{\"type\": "
	     "\"item.completed\",\"item\":{\"id\":\"i14\",\"type\":\"agent_message\",\"text\":\"x\"}}",
	     0},
	    {"{\"type\":\"item.started\",\"item\":{\"id\":\"i15\",\"type\":\"agent_message\",\"text\":\"x\"}"
	     "}",
	     0},
	    {"{\"type\":\"item.completed\",\"item\":{\"id\":\"i16\",\"type\":\"reasoning\",\"text\":\"x\"}}",
	     0},
	    {"{\"type\":\"item.completed\",\"item\":{\"id\":\"i17\",\"type\":\"agent_message\"}}", 0},
	};
#undef M
	const char *id, *text;
	char want[256];
	size_t il, tl, n;
	struct dialect_stream s;
	struct err e = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		n = strlen(cases[i].line);
		assert_int_equal(dialect_codex_message(cases[i].line, n, &id, &il, &text, &tl), cases[i].ok);
		if (!cases[i].ok)
			continue;
		dialect_stream_init(&s, DIALECT_CODEX);
		rec_n = 0;
		assert_int_equal(dialect_line(&s, cases[i].line, n, keep, NULL, &e), 0);
		assert_int_equal(rec_n, 1);
		assert_int_equal(rec_kind, DIALECT_REC_MESSAGE);
		assert_true(rec_done);
		snprintf(want, sizeof(want), "\"%.*s\"", (int)il, id);
		assert_string_equal(rec_id, want);
		snprintf(want, sizeof(want), "\"%.*s\"", (int)tl, text);
		assert_string_equal(rec_text, want);
	}
}

static void
test_names(void **state)
{
	enum dialect d;

	for (int i = DIALECT_RAW; i <= DIALECT_GEMINI; i++) {
		assert_int_equal(dialect_from_name(dialect_name((enum dialect)i), &d), 0);
		assert_int_equal(d, i);
	}
	assert_string_equal(dialect_name(DIALECT_CLAUDE), "claude-code");
	assert_int_equal(dialect_from_name("claude", &d), -1);
	assert_int_equal(dialect_from_name("", &d), -1);
	assert_int_equal(dialect_can_steer(DIALECT_CLAUDE), 0);
}

/* A first turn as codex 0.171.0 printed it against a scripted model. */
static void
test_codex_turn(void **state)
{
	static const char *const lines[] = {
	    "{\"type\":\"thread.started\",\"thread_id\":\"01a248a2-991b-76d1-ab33-da36051771cc\"}",
	    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_0\",\"type\":\"error\",\"message\":"
	    "\"Model metadata for `scripted` not found.\"}}",
	    "{\"type\":\"turn.started\"}",
	    "{\"type\":\"item.started\",\"item\":{\"id\":\"item_1\",\"type\":\"command_execution\","
	    "\"command\":\"/bin/bash -lc 'cat secret.txt'\",\"aggregated_output\":\"\",\"exit_code\":"
	    "null,\"status\":\"in_progress\"}}",
	    "{\"type\":\"item.updated\",\"item\":{\"id\":\"item_1\",\"type\":\"command_execution\","
	    "\"command\":\"/bin/bash -lc 'cat secret.txt'\",\"aggregated_output\":\"abx\",\"exit_code\":"
	    "null,\"status\":\"in_progress\"}}",
	    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_1\",\"type\":\"command_execution\","
	    "\"command\":\"/bin/bash -lc 'cat secret.txt'\",\"aggregated_output\":\"abx-secret-b1\\n\","
	    "\"exit_code\":0,\"status\":\"completed\"}}",
	    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_2\",\"type\":\"reasoning\",\"text\":"
	    "\"**Reading**\"}}",
	    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_3\",\"type\":\"file_change\","
	    "\"changes\":[{\"path\":\"/w/a.txt\",\"kind\":\"add\"},{\"path\":\"/w/b.txt\",\"kind\":"
	    "\"update\"}],\"status\":\"completed\"}}",
	    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_4\",\"type\":\"agent_message\","
	    "\"text\":\"The command printed abx-secret-b1.\"}}",
	    "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":20,\"cached_input_tokens\":0,"
	    "\"output_tokens\":10}}",
	    NULL};

	assert_string_equal(
	    feed(DIALECT_CODEX, lines),
	    "conversation text=01a248a2-991b-76d1-ab33-da36051771cc\n"
	    "error id=item_0 text=Model metadata for `scripted` not found. done\n"
	    "turn_started\n"
	    "cmd_start id=item_1 name=/bin/bash -lc 'cat secret.txt' text=\n"
	    "cmd_output id=item_1 name=/bin/bash -lc 'cat secret.txt' text=abx\n"
	    "cmd_done id=item_1 name=/bin/bash -lc 'cat secret.txt' text=abx-secret-b1\n exit=0 done\n"
	    "reasoning id=item_2 text=**Reading** done\n"
	    "file id=item_3 name=/w/a.txt detail=add done\n"
	    "file id=item_3 name=/w/b.txt detail=update done\n"
	    "message id=item_4 text=The command printed abx-secret-b1. done\n"
	    "completed value={\"input_tokens\":20,\"cached_input_tokens\":0,\"output_tokens\":10}\n");
}

/* Failures, tools and a failed turn; a declined or non-zero command is an error. */
static void
test_codex_failures(void **state)
{
	static const char *const lines[] = {
	    "{\"type\":\"item.completed\",\"item\":{\"id\":\"i0\",\"type\":\"command_execution\","
	    "\"command\":\"false\",\"aggregated_output\":\"\",\"exit_code\":1,\"status\":\"failed\"}}",
	    "{\"type\":\"item.completed\",\"item\":{\"id\":\"i1\",\"type\":\"command_execution\","
	    "\"command\":\"rm -rf /\",\"aggregated_output\":\"\",\"exit_code\":null,\"status\":"
	    "\"declined\"}}",
	    "{\"type\":\"item.started\",\"item\":{\"id\":\"i2\",\"type\":\"mcp_tool_call\",\"server\":"
	    "\"s\",\"tool\":\"t\",\"arguments\":{\"q\":1},\"result\":null,\"error\":null,\"status\":"
	    "\"in_progress\"}}",
	    "{\"type\":\"item.completed\",\"item\":{\"id\":\"i2\",\"type\":\"mcp_tool_call\",\"server\":"
	    "\"s\",\"tool\":\"t\",\"arguments\":{\"q\":1},\"result\":null,\"error\":{\"message\":"
	    "\"boom\"},\"status\":\"failed\"}}",
	    "{\"type\":\"item.started\",\"item\":{\"id\":\"i3\",\"type\":\"web_search\",\"query\":"
	    "\"musl\"}}",
	    "{\"type\":\"item.updated\",\"item\":{\"id\":\"i4\",\"type\":\"todo_list\",\"items\":[{"
	    "\"text\":\"a\",\"completed\":false}]}}",
	    "{\"type\":\"error\",\"message\":\"Reconnecting... 1/5\"}",
	    "{\"type\":\"turn.failed\",\"error\":{\"message\":\"stream disconnected\"}}",
	    NULL};

	assert_string_equal(feed(DIALECT_CODEX, lines),
	                    "cmd_done id=i0 name=false text= exit=1 done error\n"
	                    "cmd_done id=i1 name=rm -rf / text= done error\n"
	                    "tool_call id=i2 name=t value={\"q\":1}\n"
	                    "tool_result id=i2 name=t text=boom value=null done error\n"
	                    "tool_call id=i3 name=web_search text=musl\n"
	                    "tool_call id=i4 name=todo_list value=[{\"text\":\"a\",\"completed\":false}]\n"
	                    "error text=Reconnecting... 1/5\n"
	                    "failed text=stream disconnected\n");
}

/* Lines that are not the dialect's JSON are raw records holding the line:
 * text, broken JSON, JSON without a type, unknown types and item types,
 * a known type without its fields, and the raw dialect itself. */
static void
test_raw_lines(void **state)
{
	static const char *const lines[] = {
	    "Reading additional input from stdin...",
	    "{\"type\":\"turn.started\"",
	    "[1,2]",
	    "{\"thread_id\":\"x\"}",
	    "{\"type\":\"item.plan.delta\",\"item_id\":\"p\",\"delta\":\"x\"}",
	    "{\"type\":\"item.completed\",\"item\":{\"id\":\"i\",\"type\":\"collab_tool_call\"}}",
	    "{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"no id\"}}",
	    "{\"type\":\"thread.started\",\"thread_id\":7}",
	    "{\"type\":\"turn.started\"}\r",
	    "",
	    NULL};
	static const char *const text[] = {"plain", "{\"type\":\"turn.started\"}", NULL};

	assert_string_equal(
	    feed(DIALECT_CODEX, lines),
	    "raw text=Reading additional input from stdin...\n"
	    "raw text={\"type\":\"turn.started\"\n"
	    "raw text=[1,2]\n"
	    "raw text={\"thread_id\":\"x\"}\n"
	    "raw text={\"type\":\"item.plan.delta\",\"item_id\":\"p\",\"delta\":\"x\"}\n"
	    "raw text={\"type\":\"item.completed\",\"item\":{\"id\":\"i\",\"type\":\"collab_tool_call\"}}\n"
	    "raw text={\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"no "
	    "id\"}}\n"
	    "raw text={\"type\":\"thread.started\",\"thread_id\":7}\n"
	    "turn_started\n"
	    "raw text=\n");
	assert_string_equal(feed(DIALECT_RAW, text),
	                    "raw text=plain\nraw text={\"type\":\"turn.started\"}\n");
}

/* A line over DIALECT_LINE_MAX is raw without being parsed, a NUL byte
 * inside the line is kept, and the values limit makes a line raw. */
static void
test_limits(void **state)
{
	static const char pre[] = "{\"type\":\"item.completed\",\"item\":{\"id\":\"i\",\"type\":"
	                          "\"agent_message\",\"text\":\"";
	static const char nul[] = "{\"type\":\"item.completed\",\"item\":{\"id\":\"i\",\"type\":"
	                          "\"agent_message\",\"text\":\"a\\u0000b\"}}";
	static const char many[] = "raw text={\"type\":\"turn.started\",\"x\":[0,0,";
	struct dialect_stream s;
	struct err e = {0};
	size_t n = DIALECT_LINE_MAX + 1, i;
	char *big = malloc(n);

	assert_non_null(big);
	memcpy(big, pre, sizeof(pre) - 1);
	memset(big + sizeof(pre) - 1, 'a', n - (sizeof(pre) - 1));
	memcpy(big + n - 3, "\"}}", 3);
	dialect_stream_init(&s, DIALECT_CODEX);
	got[0] = '\0';
	assert_int_equal(dialect_line(&s, big, n, render, NULL, &e), 0);
	assert_int_equal(strncmp(got, "raw text={\"type\"", 16), 0);
	assert_int_equal(strlen(got), strlen("raw text=\n") + n);
	/* The same message one byte shorter is parsed. */
	memcpy(big + n - 4, "\"}}", 3);
	got[0] = '\0';
	assert_int_equal(dialect_line(&s, big, n - 1, render, NULL, &e), 0);
	assert_int_equal(strncmp(got, "message id=i text=aaa", 21), 0);
	/* The object, "turn.started", the array and its zeros: DIALECT_VALUES_MAX
	 * values are parsed, one more is raw. */
	memcpy(big, "{\"type\":\"turn.started\",\"x\":[", 28);
	for (i = 28; i < 28 + 2 * (size_t)(DIALECT_VALUES_MAX - 3); i += 2)
		memcpy(big + i, "0,", 2);
	memcpy(big + i - 1, "]}", 2);
	got[0] = '\0';
	assert_int_equal(dialect_line(&s, big, i + 1, render, NULL, &e), 0);
	assert_string_equal(got, "turn_started\n");
	memcpy(big + i, "0]}", 3);
	big[i - 1] = ',';
	got[0] = '\0';
	assert_int_equal(dialect_line(&s, big, i + 3, render, NULL, &e), 0);
	assert_int_equal(strncmp(got, many, strlen(many)), 0);
	free(big);
	/* U+0000 inside a text is kept, with its length. */
	got[0] = '\0';
	assert_int_equal(dialect_line(&s, nul, sizeof(nul) - 1, render, NULL, &e), 0);
	assert_memory_equal(got, "message id=i text=a\0b done\n", 27);
}

/* A callback that fails stops the line: dialect_line returns -1 with its
 * error, and the records after it are not sent. */
static void
test_callback_stops(void **state)
{
	static const char line[] = "{\"type\":\"item.completed\",\"item\":{\"id\":\"c\",\"type\":"
	                           "\"file_change\",\"changes\":[{\"path\":\"a\",\"kind\":\"add\"},{"
	                           "\"path\":\"b\",\"kind\":\"add\"}],\"status\":\"completed\"}}";
	struct dialect_stream s;
	struct err e = {0};

	for (int at = 0; at < 2; at++) {
		dialect_stream_init(&s, DIALECT_CODEX);
		got[0] = '\0';
		nrec = 0;
		fail_at = at;
		err_clear(&e);
		assert_int_equal(dialect_line(&s, line, sizeof(line) - 1, render, NULL, &e), -1);
		assert_string_equal(e.code, "internal");
		assert_int_equal(nrec, at + 1);
		fail_at = -1;
	}
	dialect_stream_init(&s, DIALECT_CODEX);
	fail_at = 0;
	nrec = 0;
	assert_int_equal(dialect_line(&s, "not json", 8, render, NULL, &e), -1);
	fail_at = -1;
}

/* claude -p --output-format stream-json --verbose: init, one content block
 * per assistant line, tool results in user lines, the result. Bash is a
 * command, Write and Edit are file changes, other tools are tool calls. */
static void
test_claude_turn(void **state)
{
	static const char *const lines[] = {
	    "{\"type\":\"system\",\"subtype\":\"init\",\"cwd\":\"/w\",\"session_id\":\"5f0c-11\","
	    "\"tools\":[\"Bash\"],\"model\":\"claude-x\"}",
	    "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_01\",\"role\":\"assistant\",\"content\":"
	    "[{\"type\":\"thinking\",\"thinking\":\"Run it.\",\"signature\":\"s\"}]},"
	    "\"parent_tool_use_id\":null,\"session_id\":\"5f0c-11\"}",
	    "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_01\",\"content\":[{\"type\":\"tool_use\","
	    "\"id\":\"toolu_1\",\"name\":\"Bash\",\"input\":{\"command\":\"cat secret.txt\","
	    "\"description\":\"d\"}}]},\"session_id\":\"5f0c-11\"}",
	    "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":[{\"tool_use_id\":\"toolu_1\","
	    "\"type\":\"tool_result\",\"content\":\"abx-secret-1\",\"is_error\":false}]}}",
	    "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_02\",\"content\":[{\"type\":\"tool_use\","
	    "\"id\":\"toolu_2\",\"name\":\"Write\",\"input\":{\"file_path\":\"/w/n.txt\",\"content\":"
	    "\"x\"}},{\"type\":\"tool_use\",\"id\":\"toolu_3\",\"name\":\"Edit\",\"input\":{"
	    "\"file_path\":\"/w/o.txt\"}},{\"type\":\"tool_use\",\"id\":\"toolu_4\",\"name\":\"Grep\","
	    "\"input\":{\"pattern\":\"x\"}}]}}",
	    "{\"type\":\"user\",\"message\":{\"content\":[{\"tool_use_id\":\"toolu_3\",\"type\":"
	    "\"tool_result\",\"content\":\"no match\",\"is_error\":true},{\"tool_use_id\":\"toolu_2\","
	    "\"type\":\"tool_result\",\"content\":[{\"type\":\"text\",\"text\":\"written\"}]},{"
	    "\"tool_use_id\":\"toolu_4\",\"type\":\"tool_result\",\"content\":\"a:x\"},{"
	    "\"tool_use_id\":\"toolu_9\",\"type\":\"tool_result\",\"content\":\"?\"}]}}",
	    "{\"type\":\"rate_limit_event\",\"rate_limit_info\":{}}",
	    "{\"type\":\"system\",\"subtype\":\"compact_boundary\"}",
	    "{\"type\":\"system\",\"subtype\":\"api_retry\",\"attempt\":1,\"max_retries\":10,"
	    "\"retry_delay_ms\":500,\"error_status\":null,\"error\":\"unknown\"}",
	    "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"the prompt\"}}",
	    "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_03\",\"content\":[{\"type\":\"text\","
	    "\"text\":\"It printed abx-secret-1.\"}]}}",
	    "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"It printed "
	    "abx-secret-1.\",\"session_id\":\"5f0c-11\",\"usage\":{\"input_tokens\":3}}",
	    NULL};

	assert_string_equal(feed(DIALECT_CLAUDE, lines),
	                    "conversation text=5f0c-11\n"
	                    "reasoning id=msg_01:0 text=Run it. done\n"
	                    "cmd_start id=toolu_1 name=cat secret.txt\n"
	                    "cmd_done id=toolu_1 name=cat secret.txt text=abx-secret-1 done\n"
	                    "tool_call id=toolu_4 name=Grep value={\"pattern\":\"x\"}\n"
	                    "file id=toolu_3 name=/w/o.txt detail=update text=no match done error\n"
	                    "file id=toolu_2 name=/w/n.txt detail=add text=written value=[{\"type\":"
	                    "\"text\",\"text\":\"written\"}] done\n"
	                    "tool_result id=toolu_4 name=Grep text=a:x done\n"
	                    "tool_result id=toolu_9 text=? done\n"
	                    "error text=unknown\n"
	                    "message id=msg_03:0 text=It printed abx-secret-1. done\n"
	                    "completed text=It printed abx-secret-1. value={\"input_tokens\":3}\n");
}

/* Stream events (--include-partial-messages, which a turn does not ask
 * for) are raw; a failed result fails the turn and gives the conversation when no init
 * did; unknown types are raw. */
static void
test_claude_partial_and_failure(void **state)
{
	static const char *const lines[] = {
	    "{\"type\":\"stream_event\",\"event\":{\"type\":\"content_block_delta\",\"index\":1,"
	    "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}}",
	    "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_7\",\"content\":[{\"type\":\"thinking\","
	    "\"thinking\":\"hm\"}]}}",
	    "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_7\",\"content\":[{\"type\":\"text\","
	    "\"text\":\"Hello\"}]}}",
	    "{\"type\":\"control_request\",\"request_id\":\"r\"}",
	    "{\"type\":\"result\",\"subtype\":\"error_max_turns\",\"is_error\":true,\"session_id\":"
	    "\"s-2\",\"errors\":[\"max turns\"]}",
	    "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":true,\"result\":\"API Error: 500\","
	    "\"session_id\":\"s-2\"}",
	    "{\"type\":\"result\",\"subtype\":\"error_during_execution\",\"is_error\":true}",
	    NULL};

	assert_string_equal(feed(DIALECT_CLAUDE, lines),
	                    "raw text={\"type\":\"stream_event\",\"event\":{\"type\":\"content_block_delta\","
	                    "\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}}\n"
	                    "reasoning id=msg_7:0 text=hm done\n"
	                    "message id=msg_7:1 text=Hello done\n"
	                    "raw text={\"type\":\"control_request\",\"request_id\":\"r\"}\n"
	                    "conversation text=s-2\n"
	                    "failed text=max turns\n"
	                    "failed text=API Error: 500\n"
	                    "failed text=error_during_execution\n");
}

/* gemini -p --output-format stream-json: the assistant's deltas are one
 * message item, opened by the first and closed by the next other line; run_shell_command is a command,
 * write_file and replace are file changes. */
static void
test_gemini_turn(void **state)
{
	static const char *const lines[] = {
	    "{\"type\":\"init\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"session_id\":\"c0ffee-1\","
	    "\"model\":\"gemini-x\"}",
	    "{\"type\":\"message\",\"timestamp\":\"t\",\"role\":\"user\",\"content\":\"the prompt\"}",
	    "{\"type\":\"message\",\"timestamp\":\"t\",\"role\":\"assistant\",\"content\":\"Let me \","
	    "\"delta\":true}",
	    "{\"type\":\"message\",\"timestamp\":\"t\",\"role\":\"assistant\",\"content\":\"look.\","
	    "\"delta\":true}",
	    "{\"type\":\"tool_use\",\"timestamp\":\"t\",\"tool_name\":\"run_shell_command\",\"tool_id\":"
	    "\"run_shell_command-1\",\"parameters\":{\"command\":\"cat secret.txt\"}}",
	    "{\"type\":\"tool_result\",\"timestamp\":\"t\",\"tool_id\":\"run_shell_command-1\","
	    "\"status\":\"success\",\"output\":\"abx-secret-2\"}",
	    "{\"type\":\"tool_use\",\"timestamp\":\"t\",\"tool_name\":\"write_file\",\"tool_id\":\"w-2\","
	    "\"parameters\":{\"file_path\":\"/w/g.txt\",\"content\":\"x\"}}",
	    "{\"type\":\"tool_result\",\"timestamp\":\"t\",\"tool_id\":\"w-2\",\"status\":\"error\","
	    "\"error\":{\"type\":\"e\",\"message\":\"denied\"}}",
	    "{\"type\":\"tool_use\",\"timestamp\":\"t\",\"tool_name\":\"google_web_search\",\"tool_id\":"
	    "\"s-3\",\"parameters\":{\"query\":\"q\"}}",
	    "{\"type\":\"tool_result\",\"timestamp\":\"t\",\"tool_id\":\"s-3\",\"status\":\"success\"}",
	    "{\"type\":\"error\",\"timestamp\":\"t\",\"severity\":\"warning\",\"message\":\"loop\"}",
	    "{\"type\":\"message\",\"timestamp\":\"t\",\"role\":\"assistant\",\"content\":\"It is "
	    "abx-secret-2.\",\"delta\":true}",
	    "{\"type\":\"result\",\"timestamp\":\"t\",\"status\":\"success\",\"stats\":{"
	    "\"total_tokens\":9}}",
	    "{\"type\":\"result\",\"timestamp\":\"t\",\"status\":\"error\",\"error\":{\"type\":\"x\","
	    "\"message\":\"quota\"}}",
	    "{\"type\":\"message\",\"role\":\"system\",\"content\":\"?\"}",
	    NULL};

	assert_string_equal(feed(DIALECT_GEMINI, lines),
	                    "conversation text=c0ffee-1\n"
	                    "message id=msg_0\n"
	                    "message id=msg_0 text=Let me  delta\n"
	                    "message id=msg_0 text=look. delta\n"
	                    "message id=msg_0 done\n"
	                    "cmd_start id=run_shell_command-1 name=cat secret.txt\n"
	                    "cmd_done id=run_shell_command-1 name=cat secret.txt text=abx-secret-2 done\n"
	                    "file id=w-2 name=/w/g.txt detail=add text=denied done error\n"
	                    "tool_call id=s-3 name=google_web_search value={\"query\":\"q\"}\n"
	                    "tool_result id=s-3 name=google_web_search done\n"
	                    "error text=loop\n"
	                    "message id=msg_1\n"
	                    "message id=msg_1 text=It is abx-secret-2. delta\n"
	                    "message id=msg_1 done\n"
	                    "completed value={\"total_tokens\":9}\n"
	                    "failed text=quota\n"
	                    "raw text={\"type\":\"message\",\"role\":\"system\",\"content\":\"?\"}\n");
}

/* More calls than the stream remembers: the oldest result is a plain tool
 * result; an edit with a path too long to keep is a plain tool call. */
static void
test_pending_bounded(void **state)
{
	struct dialect_stream s;
	struct err e = {0};
	char line[1024], path[DIALECT_PATH_MAX + 8];

	dialect_stream_init(&s, DIALECT_GEMINI);
	for (int i = 0; i <= DIALECT_PENDING_MAX; i++) {
		snprintf(line, sizeof(line),
		         "{\"type\":\"tool_use\",\"tool_name\":\"run_shell_command\",\"tool_id\":\"t%d\","
		         "\"parameters\":{\"command\":\"c\"}}",
		         i);
		assert_int_equal(dialect_line(&s, line, strlen(line), render, NULL, &e), 0);
	}
	got[0] = '\0';
	for (int i = 0; i <= DIALECT_PENDING_MAX; i += DIALECT_PENDING_MAX) {
		snprintf(line, sizeof(line),
		         "{\"type\":\"tool_result\",\"tool_id\":\"t%d\",\"status\":\"success\"}", i);
		assert_int_equal(dialect_line(&s, line, strlen(line), render, NULL, &e), 0);
	}
	assert_string_equal(got, "tool_result id=t0 done\ncmd_done id=t8 name=c done\n");
	memset(path, 'p', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	snprintf(line, sizeof(line),
	         "{\"type\":\"tool_use\",\"tool_name\":\"replace\",\"tool_id\":\"r\",\"parameters\":{"
	         "\"file_path\":\"%s\"}}",
	         path);
	got[0] = '\0';
	assert_int_equal(dialect_line(&s, line, strlen(line), render, NULL, &e), 0);
	assert_int_equal(strncmp(got, "tool_call id=r name=replace value={\"file_path\":\"ppp", 49), 0);
}

/* Lines as gemini 0.61.0 and claude-code 2.1.332 printed them in a first
 * turn against a scripted model (gemini's whole turn; claude's tool call,
 * its result and the answer). */
static void
test_recorded_lines(void **state)
{
	static const char *const gemini[] = {
	    "{\"type\":\"init\",\"timestamp\":\"2026-12-06T00:25:38.464Z\",\"session_id\":\"aeab8df4-d2f2-"
	    "4cdc-bdc9-b064d0c6c1e2\",\"model\":\"gemini-scripted\"}",
	    "{\"type\":\"message\",\"timestamp\":\"2026-12-06T00:25:38.477Z\",\"role\":\"user\",\"content\":"
	    "\"Run the command you are asked to run.\"}",
	    "{\"type\":\"tool_use\",\"timestamp\":\"2026-12-06T00:25:38.960Z\",\"tool_name\":\"run_shell_"
	    "command\",\"tool_id\":\"run_shell_command__run_shell_command_1796516738680_0\",\"parameters\":{"
	    "\"command\":\"cat secret.txt\",\"description\":\"Read the test's file\"}}",
	    "{\"type\":\"tool_result\",\"timestamp\":\"2026-12-06T00:25:40.182Z\",\"tool_id\":\"run_shell_"
	    "command__run_shell_command_1796516738680_0\",\"status\":\"success\",\"output\":\"abx-secret-"
	    "6950bdb8e360\"}",
	    "{\"type\":\"message\",\"timestamp\":\"2026-12-06T00:25:40.411Z\",\"role\":\"assistant\","
	    "\"content\":\"The command printed ab\",\"delta\":true}",
	    "{\"type\":\"message\",\"timestamp\":\"2026-12-06T00:25:40.444Z\",\"role\":\"assistant\","
	    "\"content\":\"x-secret-6950bdb8e360.\",\"delta\":true}",
	    "{\"type\":\"result\",\"timestamp\":\"2026-12-06T00:25:40.448Z\",\"status\":\"success\","
	    "\"stats\":{\"total_tokens\":30,\"input_tokens\":20,\"output_tokens\":10,\"cached\":0,\"input\":"
	    "20,\"duration_ms\":1985,\"tool_calls\":1,\"models\":{\"gemini-scripted\":{\"total_tokens\":30,"
	    "\"input_tokens\":20,\"output_tokens\":10,\"cached\":0,\"input\":20}}}}",
	    NULL};
	static const char *const claude[] = {
	    "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_04\",\"type\":\"message\",\"role\":"
	    "\"assistant\",\"model\":\"claude-scripted-1\",\"content\":[{\"type\":\"tool_use\",\"id\":"
	    "\"toolu_04\",\"name\":\"Bash\",\"input\":{\"command\":\"cat secret.txt\",\"description\":\"Read "
	    "the test's "
	    "file\"}}],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_"
	    "tokens\":1,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0},\"context_"
	    "management\":null},\"parent_tool_use_id\":null,\"session_id\":\"3915f79e-59bf-424f-9f42-"
	    "817a85878e49\",\"uuid\":\"e4ae8b0d-effa-4498-b44e-cea7c1367adf\",\"timestamp\":\"2026-12-06T00:"
	    "24:52.924Z\"}",
	    "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":[{\"tool_use_id\":\"toolu_04\","
	    "\"type\":\"tool_result\",\"content\":\"abx-secret-6950bdb8e360\",\"is_error\":false}]},\"parent_"
	    "tool_use_id\":null,\"session_id\":\"3915f79e-59bf-424f-9f42-817a85878e49\",\"uuid\":\"1640a4de-"
	    "06b1-4b60-a752-4cc040b684f3\",\"timestamp\":\"2026-12-06T00:24:53.514Z\",\"tool_use_result\":{"
	    "\"stdout\":\"abx-secret-6950bdb8e360\",\"stderr\":\"\",\"interrupted\":false,\"isImage\":false,"
	    "\"noOutputExpected\":false},\"tool_result_meta\":[{\"id\":\"toolu_04\",\"permission_decision\":{"
	    "\"decision\":\"accept\",\"source\":\"config\",\"reason_type\":\"rule\"}}]}",
	    "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_05\",\"type\":\"message\",\"role\":"
	    "\"assistant\",\"model\":\"claude-scripted-1\",\"content\":[{\"type\":\"text\",\"text\":\"The "
	    "command printed "
	    "abx-secret-6950bdb8e360.\"}],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_"
	    "tokens\":10,\"output_tokens\":1,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0}"
	    ",\"context_management\":null},\"parent_tool_use_id\":null,\"session_id\":\"3915f79e-59bf-424f-"
	    "9f42-817a85878e49\",\"uuid\":\"98b59340-b9f1-49f3-8232-29b2a5ad8046\",\"timestamp\":\"2026-12-"
	    "06T00:24:53.671Z\"}",
	    NULL};

	assert_string_equal(
	    feed(DIALECT_GEMINI, gemini),
	    "conversation text=aeab8df4-d2f2-4cdc-bdc9-b064d0c6c1e2\n"
	    "cmd_start id=run_shell_command__run_shell_command_1796516738680_0 name=cat secret.txt\n"
	    "cmd_done id=run_shell_command__run_shell_command_1796516738680_0 "
	    "name=cat secret.txt text=abx-secret-6950bdb8e360 done\n"
	    "message id=msg_0\n"
	    "message id=msg_0 text=The command printed ab delta\n"
	    "message id=msg_0 text=x-secret-6950bdb8e360. delta\n"
	    "message id=msg_0 done\n"
	    "completed value={\"total_tokens\":30,\"input_tokens\":20,\"output_tokens\":10,"
	    "\"cached\":0,\"input\":20,\"duration_ms\":1985,\"tool_calls\":1,\"models\":{"
	    "\"gemini-scripted\":{\"total_tokens\":30,\"input_tokens\":20,\"output_tokens\":10,"
	    "\"cached\":0,\"input\":20}}}\n");
	assert_string_equal(feed(DIALECT_CLAUDE, claude),
	                    "cmd_start id=toolu_04 name=cat secret.txt\n"
	                    "cmd_done id=toolu_04 name=cat secret.txt text=abx-secret-6950bdb8e360 done\n"
	                    "message id=msg_05:0 text=The command printed abx-secret-6950bdb8e360. done\n");
}

static const char *
joined(const char **argv, int n)
{
	static char out[4096];
	size_t len = 0;

	out[0] = '\0';
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(out + len, sizeof(out) - len, "%s%s", i ? "|" : "", argv[i]);
	assert_null(argv[n]);
	return out;
}

static void
test_argv(void **state)
{
	const char *argv[DIALECT_ARGV_MAX + 1], *extra[] = {"--yolo"};
	struct dialect_turn t = {.bin = "/t/codex", .prompt = "-rf please", .cwd = "/w"};
	char buf[256];
	struct err e = {0};
	int n;

	n = dialect_argv(DIALECT_CODEX, &t, argv, buf, sizeof(buf), &e);
	assert_string_equal(joined(argv, n), "/t/codex|exec|--json|--skip-git-repo-check|--|-rf please");
	t.model = "gpt-5.5";
	t.instructions = "Say \"hi\"\\\n";
	t.conversation = "01a2-b";
	n = dialect_argv(DIALECT_CODEX, &t, argv, buf, sizeof(buf), &e);
	assert_string_equal(joined(argv, n),
	                    "/t/codex|exec|resume|--json|--skip-git-repo-check|--model=gpt-5.5|-c|"
	                    "developer_instructions=\"Say \\u0022hi\\u0022\\u005c\\u000a\"|--|01a2-b|"
	                    "-rf please");
	t.bin = "/t/claude";
	n = dialect_argv(DIALECT_CLAUDE, &t, argv, buf, sizeof(buf), &e);
	assert_string_equal(joined(argv, n), "/t/claude|-p|--verbose|--output-format|stream-json|"
	                                     "--model=gpt-5.5|--append-system-prompt=Say \"hi\"\\\n|"
	                                     "--resume=01a2-b|--|-rf please");
	t.conversation = NULL;
	t.instructions = NULL;
	t.bin = "/t/gemini";
	t.extra = extra;
	t.nextra = 1;
	n = dialect_argv(DIALECT_GEMINI, &t, argv, buf, sizeof(buf), &e);
	assert_string_equal(joined(argv, n), "/t/gemini|--output-format|stream-json|--model=gpt-5.5|"
	                                     "--yolo|--prompt=-rf please");
	t.conversation = "c0ffee";
	n = dialect_argv(DIALECT_GEMINI, &t, argv, buf, sizeof(buf), &e);
	assert_string_equal(joined(argv, n), "/t/gemini|--output-format|stream-json|--model=gpt-5.5|"
	                                     "--resume=c0ffee|--yolo|--prompt=-rf please");
}

static void
test_argv_refused(void **state)
{
	const char *argv[DIALECT_ARGV_MAX + 1], *extra[DIALECT_ARGV_MAX];
	struct dialect_turn t = {.bin = "b", .prompt = "p", .instructions = "i"};
	char buf[64];
	struct err e = {0};

	assert_int_equal(dialect_argv(DIALECT_RAW, &t, argv, buf, sizeof(buf), &e), -1);
	assert_string_equal(e.code, "request.invalid");
	assert_int_equal(dialect_argv(DIALECT_GEMINI, &t, argv, buf, sizeof(buf), &e), -1);
	assert_string_equal(e.code, "request.invalid");
	assert_non_null(strstr(e.msg, "instructions"));
	t.instructions = NULL;
	t.conversation = "";
	assert_int_equal(dialect_argv(DIALECT_CLAUDE, &t, argv, buf, sizeof(buf), &e), -1);
	assert_string_equal(e.code, "request.invalid");
	/* buf one byte short, then just right: "--prompt=" + 54 bytes + NUL. */
	t.conversation = NULL;
	t.prompt = "123456789012345678901234567890123456789012345678901234";
	assert_int_equal(dialect_argv(DIALECT_GEMINI, &t, argv, buf, sizeof(buf) - 1, &e), -1);
	assert_string_equal(e.code, "request.too_large");
	assert_int_equal(dialect_argv(DIALECT_GEMINI, &t, argv, buf, sizeof(buf), &e), 4);
	assert_string_equal(argv[3] + 9, t.prompt);
	/* The words: the codex turn has 6 of its own. */
	for (int i = 0; i < DIALECT_ARGV_MAX; i++)
		extra[i] = "-x";
	t.extra = extra;
	t.nextra = DIALECT_ARGV_MAX - 6;
	assert_int_equal(dialect_argv(DIALECT_CODEX, &t, argv, buf, sizeof(buf), &e), DIALECT_ARGV_MAX);
	t.nextra++;
	assert_int_equal(dialect_argv(DIALECT_CODEX, &t, argv, buf, sizeof(buf), &e), -1);
	assert_string_equal(e.code, "request.too_large");
}

/* The built-in agent manifests name their dialects, by names
 * dialect_from_name knows. */
static void
test_manifest_dialects(void **state)
{
	static const char *const agents[] = {"codex",       "codex",  "claude-code",
	                                     "claude-code", "gemini", "gemini"};
	struct manifest_opts all = {.platform = "all"};
	struct manifest_set set;
	const manifest_t *m;
	enum dialect d;
	struct err e = {0};

	assert_int_equal(manifest_set_open(&set, NULL, &all, &e), 0);
	for (int i = 0; i < 6; i += 2) {
		assert_non_null(m = manifest_get(&set, agents[i], &e));
		assert_string_equal(m->dialect, agents[i + 1]);
		assert_int_equal(dialect_from_name(m->dialect, &d), 0);
	}
	manifest_set_close(&set);
}

/* The fake agent (tests/fixtures/fakeagent.c), built here with the host's
 * cc into dir, with dir/home its HOME and dir/w its working directory. */
static char fake_dir[64];

static int
fake_setup(void **state)
{
	char cmd[512];

	if (unit_mkdtemp(fake_dir, sizeof(fake_dir), "dialect") != 0)
		return -1;
	snprintf(cmd, sizeof(cmd),
	         "cc -O1 -o %1$s/fake tests/fixtures/fakeagent.c 2>/dev/null && mkdir %1$s/home %1$s/w "
	         "&& echo s3cr3t >%1$s/w/secret.txt",
	         fake_dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int
fake_teardown(void **state)
{
	return unit_rmtree(fake_dir);
}

/* One turn of the fake agent speaking d: its exit code; the records in got,
 * the conversation id in conv. */
static int
fake_turn(enum dialect d, const char *prompt, const char *model, const char *instructions, char *conv,
          size_t cap)
{
	char bin[128], home[128], cwd[128], buf[1024], *envp[] = {home, "PATH=/usr/bin:/bin", NULL};
	const char *argv[DIALECT_ARGV_MAX + 1];
	struct dialect_turn t = {
	    .bin = bin, .prompt = prompt, .model = model, .instructions = instructions, .cwd = cwd};
	struct proc_spec sp = {.envp = envp, .cwd = cwd, .timeout_ms = 20000};
	struct proc_capture c = {.cap = 1 << 20};
	struct dialect_stream s;
	struct proc p;
	struct err e = {0};
	const char *l, *nl;

	snprintf(bin, sizeof(bin), "%s/fake", fake_dir);
	snprintf(home, sizeof(home), "HOME=%s/home", fake_dir);
	snprintf(cwd, sizeof(cwd), "%s/w", fake_dir);
	t.conversation = conv[0] != '\0' ? conv : NULL;
	assert_true(dialect_argv(d, &t, argv, buf, sizeof(buf), &e) > 0);
	sp.argv = (char *const *)argv;
	assert_int_equal(proc_run(&p, &sp, &c, &e), 0);
	got[0] = '\0';
	dialect_stream_init(&s, d);
	for (l = c.out; l != NULL && *l != '\0'; l = nl + 1) {
		nl = strchr(l, '\n');
		assert_non_null(nl);
		assert_int_equal(dialect_line(&s, l, (size_t)(nl - l), render, NULL, &e), 0);
	}
	proc_capture_free(&c);
	if ((l = strstr(got, "conversation text=")) != NULL)
		snprintf(conv, cap, "%.*s", (int)strcspn(l + 18, "\n"), l + 18);
	return proc_exit_code(&p);
}

/* Each dialect end to end: the argv dialect_argv builds starts the fake
 * agent's turn in that dialect, and its lines give the records: a command
 * that really ran with its output, the file it wrote, a line that is not
 * JSON, the answer; the next turn resumes the conversation by its id and
 * answers from the first turn's command; a turn that dies mid-way has no
 * end record; an unknown conversation fails. */
static void
test_fake_agents(void **state)
{
	char conv[128], want[512];

	for (int d = DIALECT_CODEX; d <= DIALECT_GEMINI; d++) {
		const char *instr = d == DIALECT_GEMINI ? NULL : "be \"brief\"";

		conv[0] = '\0';
		assert_int_equal(fake_turn((enum dialect)d, "`cat secret.txt` write:new.txt raw", "m1", instr,
		                           conv, sizeof(conv)),
		                 0);
		assert_non_null(strstr(got, "conversation text=fake-"));
		assert_non_null(strstr(got, "name=cat secret.txt"));
		assert_non_null(strstr(got, d == DIALECT_CODEX ? " text=s3cr3t\n exit=0 done\n"
		                                               : " text=s3cr3t\n done\n"));
		snprintf(want, sizeof(want), "file id=%s name=%s/w/new.txt detail=add",
		         d == DIALECT_CODEX    ? "item_1"
		         : d == DIALECT_CLAUDE ? "toolu_1"
		                               : "t-1",
		         fake_dir);
		assert_non_null(strstr(got, want));
		assert_non_null(strstr(got, "raw text=fakeagent: a line that is not JSON\n"));
		snprintf(want, sizeof(want), "text=turn 1 (model m1%s%s): The command printed s3cr3t.",
		         instr ? ", instructions " : "", instr ? instr : "");
		assert_non_null(strstr(got, want));
		assert_non_null(strstr(got, "\ncompleted"));

		strcpy(want, conv);
		assert_int_equal(
		    fake_turn((enum dialect)d, "-what did it print?", NULL, NULL, conv, sizeof(conv)), 0);
		assert_string_equal(conv, want);
		assert_non_null(strstr(got, "text=turn 2: Earlier the command printed s3cr3t."));
		assert_null(strstr(got, "cmd_"));

		assert_int_equal(fake_turn((enum dialect)d, "die", NULL, NULL, conv, sizeof(conv)), 3);
		assert_null(strstr(got, "completed"));
		strcpy(conv, "fake-unknown");
		assert_int_equal(fake_turn((enum dialect)d, "hi", NULL, NULL, conv, sizeof(conv)), 1);
	}
}

int
main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_codex_turn),
	    cmocka_unit_test(test_codex_failures),
	    cmocka_unit_test(test_codex_message_shape),
	    cmocka_unit_test(test_raw_lines),
	    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_callback_stops),
	    cmocka_unit_test(test_claude_turn),
	    cmocka_unit_test(test_claude_partial_and_failure),
	    cmocka_unit_test(test_gemini_turn),
	    cmocka_unit_test(test_pending_bounded),
	    cmocka_unit_test(test_recorded_lines),
	    cmocka_unit_test(test_argv),
	    cmocka_unit_test(test_argv_refused),
	    cmocka_unit_test(test_manifest_dialects),
	    cmocka_unit_test_setup_teardown(test_fake_agents, fake_setup, fake_teardown),
	};
	/* clang-format on */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
