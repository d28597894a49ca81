#include "server/dialect.h"

#include <stdio.h>
#include <string.h>

static const char *const names[] = {"raw", "codex", "claude-code", "gemini"};

/* Duplicate keys are kept (the first wins): an agent's line is read, never
 * refused, so json_get's first match is as good as any. */
static const struct json_limits line_limits = {DIALECT_LINE_MAX, 64, DIALECT_VALUES_MAX, 0};

enum pending_kind { PENDING_TOOL = 1, PENDING_SHELL, PENDING_FILE };

struct ctx {
	struct dialect_stream *s;
	dialect_cb cb;
	void *arg;
	struct err *e;
};

const char *
dialect_name(enum dialect d)
{
	return (unsigned)d < sizeof(names) / sizeof(names[0]) ? names[d] : "?";
}

int
dialect_from_name(const char *name, enum dialect *d)
{
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(name, names[i]) == 0) {
			*d = (enum dialect)i;
			return 0;
		}
	}
	return -1;
}

void
dialect_stream_init(struct dialect_stream *s, enum dialect d)
{
	memset(s, 0, sizeof(*s));
	s->d = d;
}

int
dialect_can_steer(enum dialect d)
{
	(void)d;
	return 0;
}

/* r's text from v when v is a string; 1 when it was. */
static int
text(struct dialect_rec *r, const struct json_val *v)
{
	if (!json_is(v, JSON_STRING))
		return 0;
	r->text = v->u.str.s;
	r->len = v->u.str.len;
	return 1;
}

static int
out(struct ctx *c, struct dialect_rec *r)
{
	return c->cb(c->arg, r, c->e) == 0 ? 1 : -1;
}

static int
rec(struct ctx *c, enum dialect_kind kind, const char *item_id, const struct json_val *t)
{
	struct dialect_rec r = {.kind = kind, .item_id = item_id};

	text(&r, t);
	return out(c, &r);
}

static int
conversation(struct ctx *c, const struct json_val *id)
{
	if (!json_is(id, JSON_STRING) || id->u.str.len == 0)
		return 0;
	c->s->have_conversation = 1;
	return rec(c, DIALECT_REC_CONVERSATION, NULL, id);
}

static int
str_is(const struct json_val *obj, const char *key, const char *want)
{
	const char *s = json_get_str(obj, key);

	return s != NULL && strcmp(s, want) == 0;
}

static void
copy_id(char *dst, size_t cap, const char *id)
{
	snprintf(dst, cap, "%s", id);
}

/*
 * A tool call of claude or gemini: a shell tool starts a command, an edit
 * tool is remembered so that its result reports the file change, any other
 * tool is a tool call. The call is remembered by id for its result.
 */
static int
tool_call(struct ctx *c, const char *id, const char *name, const struct json_val *args)
{
	struct dialect_stream *s = c->s;
	static const char *const edits[] = {"Write",        "add",    "write_file", "add",
	                                    "Edit",         "update", "MultiEdit",  "update",
	                                    "NotebookEdit", "update", "replace",    "update"};
	struct dialect_rec r = {.item_id = id, .name = name, .value = args};
	const char *path = json_get_str(args, "file_path");
	unsigned slot = s->next++ % DIALECT_PENDING_MAX;
	int kind = PENDING_TOOL;

	if (path == NULL)
		path = json_get_str(args, "notebook_path");
	s->pending[slot].change = NULL;
	for (unsigned i = 0; i < sizeof(edits) / sizeof(edits[0]); i += 2) {
		if (strcmp(name, edits[i]) == 0 && path != NULL && strlen(path) < DIALECT_PATH_MAX) {
			kind = PENDING_FILE;
			s->pending[slot].change = edits[i + 1];
		}
	}
	if (strcmp(name, "Bash") == 0 || strcmp(name, "run_shell_command") == 0)
		kind = PENDING_SHELL;
	copy_id(s->pending[slot].id, DIALECT_ID_MAX, id);
	s->pending[slot].kind = kind;
	copy_id(s->pending[slot].path, DIALECT_PATH_MAX,
	        kind == PENDING_FILE   ? path
	        : kind == PENDING_TOOL ? name
	                               : "");
	if (kind == PENDING_FILE)
		return 1;
	if (kind == PENDING_SHELL) {
		r.kind = DIALECT_REC_COMMAND_START;
		r.name = json_get_str(args, "command");
		r.value = NULL;
	} else {
		r.kind = DIALECT_REC_TOOL_CALL;
	}
	return out(c, &r);
}

/* The result of a remembered call (or of one that fell out of the table:
 * then a plain tool result). res is the output: a string, or claude's
 * array of content blocks (its first text block is the text). */
static int
tool_result(struct ctx *c, const char *id, const struct json_val *res, int is_error)
{
	struct dialect_stream *s = c->s;
	struct dialect_rec r = {
	    .kind = DIALECT_REC_TOOL_RESULT, .item_id = id, .done = 1, .is_error = is_error};
	char key[DIALECT_ID_MAX];
	int rc;

	if (!text(&r, res) && json_is(res, JSON_ARRAY)) {
		r.value = res;
		for (size_t i = 0; i < res->u.arr.n && r.text == NULL; i++)
			text(&r, json_get(&res->u.arr.v[i], "text"));
	}
	copy_id(key, sizeof(key), id);
	for (unsigned i = 0; i < DIALECT_PENDING_MAX; i++) {
		if (s->pending[i].id[0] == '\0' || strcmp(s->pending[i].id, key) != 0)
			continue;
		if (s->pending[i].kind == PENDING_SHELL) {
			r.kind = DIALECT_REC_COMMAND_DONE;
		} else if (s->pending[i].kind == PENDING_FILE) {
			r.kind = DIALECT_REC_FILE_CHANGE;
			r.name = s->pending[i].path;
			r.detail = s->pending[i].change;
		} else {
			r.name = s->pending[i].path;
		}
		rc = out(c, &r);
		s->pending[i].id[0] = '\0';
		return rc;
	}
	return out(c, &r);
}

/* codex exec --json: item.started / item.updated / item.completed. */
static int
codex_item(struct ctx *c, const struct json_val *item, int phase)
{
	const char *id = json_get_str(item, "id"), *type = json_get_str(item, "type");
	struct dialect_rec r = {.item_id = id, .done = phase == 2};
	const struct json_val *v, *err = json_get(item, "error");
	const char *status = json_get_str(item, "status");
	int rc = 1;

	if (id == NULL || type == NULL)
		return 0;
	r.is_error = status != NULL && (strcmp(status, "failed") == 0 || strcmp(status, "declined") == 0);
	if (strcmp(type, "agent_message") == 0 || strcmp(type, "reasoning") == 0) {
		r.kind = type[0] == 'a' ? DIALECT_REC_MESSAGE : DIALECT_REC_REASONING;
		text(&r, json_get(item, "text"));
	} else if (strcmp(type, "command_execution") == 0) {
		r.kind = phase == 0   ? DIALECT_REC_COMMAND_START
		         : phase == 1 ? DIALECT_REC_COMMAND_OUTPUT
		                      : DIALECT_REC_COMMAND_DONE;
		r.name = json_get_str(item, "command");
		text(&r, json_get(item, "aggregated_output"));
		v = json_get(item, "exit_code");
		if (json_is(v, JSON_NUMBER) && v->u.num.is_int) {
			r.has_exit = 1;
			r.exit_code = (int)v->u.num.i;
			r.is_error |= r.exit_code != 0;
		}
	} else if (strcmp(type, "file_change") == 0) {
		v = json_get(item, "changes");
		if (phase != 2 || !json_is(v, JSON_ARRAY))
			return 1;
		r.kind = DIALECT_REC_FILE_CHANGE;
		for (size_t i = 0; i < v->u.arr.n && rc > 0; i++) {
			r.name = json_get_str(&v->u.arr.v[i], "path");
			r.detail = json_get_str(&v->u.arr.v[i], "kind");
			if (r.name != NULL)
				rc = out(c, &r);
		}
		return rc;
	} else if (strcmp(type, "mcp_tool_call") == 0 || strcmp(type, "web_search") == 0 ||
	           strcmp(type, "todo_list") == 0) {
		if (phase == 1 && type[0] != 't')
			return 1;
		r.kind = phase == 2 && type[0] != 't' ? DIALECT_REC_TOOL_RESULT : DIALECT_REC_TOOL_CALL;
		r.name = type[0] == 'm' ? json_get_str(item, "tool") : type;
		r.value = json_get(item, type[0] == 't' ? "items" : phase == 2 ? "result" : "arguments");
		text(&r, type[0] == 'w' ? json_get(item, "query") : json_get(err, "message"));
	} else if (strcmp(type, "error") == 0) {
		r = (struct dialect_rec){.kind = DIALECT_REC_ERROR, .item_id = id};
		text(&r, json_get(item, "message"));
	} else {
		return 0;
	}
	return out(c, &r);
}

static int
codex_line(struct ctx *c, const struct json_val *root, const char *type)
{
	static const char *const phases[] = {"item.started", "item.updated", "item.completed"};

	if (strcmp(type, "thread.started") == 0)
		return conversation(c, json_get(root, "thread_id"));
	if (strcmp(type, "turn.started") == 0)
		return rec(c, DIALECT_REC_TURN_STARTED, NULL, NULL);
	if (strcmp(type, "turn.completed") == 0) {
		struct dialect_rec r = {.kind = DIALECT_REC_TURN_COMPLETED, .value = json_get(root, "usage")};
		return out(c, &r);
	}
	if (strcmp(type, "turn.failed") == 0)
		return rec(c, DIALECT_REC_TURN_FAILED, NULL, json_get(json_get(root, "error"), "message"));
	if (strcmp(type, "error") == 0)
		return rec(c, DIALECT_REC_ERROR, NULL, json_get(root, "message"));
	for (int i = 0; i < 3; i++) {
		if (strcmp(type, phases[i]) == 0)
			return codex_item(c, json_get(root, "item"), i);
	}
	return 0;
}

/* claude: the content blocks of one assistant message line. */
static int
claude_assistant(struct ctx *c, const struct json_val *msg)
{
	struct dialect_stream *s = c->s;
	const struct json_val *content = json_get(msg, "content");
	const char *mid = json_get_str(msg, "id");
	char key[DIALECT_ID_MAX], item[DIALECT_ID_MAX + 16];
	int rc = 1;

	if (!json_is(content, JSON_ARRAY))
		return 0;
	copy_id(key, sizeof(key), mid != NULL ? mid : "msg");
	if (strcmp(key, s->msg_id) != 0) {
		memcpy(s->msg_id, key, sizeof(key));
		s->nblocks = 0;
	}
	for (size_t i = 0; i < content->u.arr.n && rc > 0; i++) {
		const struct json_val *b = &content->u.arr.v[i];
		struct dialect_rec r = {.item_id = item, .done = 1};
		const char *id = json_get_str(b, "id"), *name = json_get_str(b, "name");

		snprintf(item, sizeof(item), "%s:%u", s->msg_id, s->nblocks++);
		if (str_is(b, "type", "text") && text(&r, json_get(b, "text"))) {
			r.kind = DIALECT_REC_MESSAGE;
			rc = out(c, &r);
		} else if (str_is(b, "type", "thinking") && text(&r, json_get(b, "thinking"))) {
			r.kind = DIALECT_REC_REASONING;
			rc = out(c, &r);
		} else if (str_is(b, "type", "tool_use") && id != NULL && name != NULL) {
			rc = tool_call(c, id, name, json_get(b, "input"));
		}
	}
	return rc;
}

/* claude --include-partial-messages: the deltas of the message streamed. */
static int
claude_partial(struct ctx *c, const struct json_val *ev)
{
	const struct json_val *delta = json_get(ev, "delta"), *index = json_get(ev, "index");
	struct dialect_rec r = {.delta = 1};
	char item[DIALECT_ID_MAX + 16];

	if (str_is(ev, "type", "message_start")) {
		copy_id(c->s->msg_id, DIALECT_ID_MAX, json_get_str(json_get(ev, "message"), "id") ?: "msg");
		c->s->nblocks = 0;
		return 1;
	}
	if (!str_is(ev, "type", "content_block_delta") || !json_is(index, JSON_NUMBER))
		return 1;
	snprintf(item, sizeof(item), "%s:%lld", c->s->msg_id, (long long)index->u.num.i);
	r.item_id = item;
	if (str_is(delta, "type", "text_delta") && text(&r, json_get(delta, "text")))
		r.kind = DIALECT_REC_MESSAGE;
	else if (str_is(delta, "type", "thinking_delta") && text(&r, json_get(delta, "thinking")))
		r.kind = DIALECT_REC_REASONING;
	else
		return 1;
	return out(c, &r);
}

static int
claude_line(struct ctx *c, const struct json_val *root, const char *type)
{
	const struct json_val *content, *v;
	int rc = 1;

	if (strcmp(type, "system") == 0)
		return str_is(root, "subtype", "init") ? conversation(c, json_get(root, "session_id")) : 1;
	if (strcmp(type, "assistant") == 0)
		return claude_assistant(c, json_get(root, "message"));
	if (strcmp(type, "stream_event") == 0)
		return claude_partial(c, json_get(root, "event"));
	if (strcmp(type, "user") == 0) {
		content = json_get(json_get(root, "message"), "content");
		for (size_t i = 0; json_is(content, JSON_ARRAY) && i < content->u.arr.n && rc > 0; i++) {
			const struct json_val *b = &content->u.arr.v[i];
			const char *id = json_get_str(b, "tool_use_id");

			if (str_is(b, "type", "tool_result") && id != NULL)
				rc = tool_result(c, id, json_get(b, "content"),
				                 json_is(json_get(b, "is_error"), JSON_TRUE));
		}
		return rc;
	}
	if (strcmp(type, "result") != 0) {
		static const char *const quiet[] = {"auth_status",       "conversation_reset",
		                                    "prompt_suggestion", "rate_limit_event",
		                                    "tool_progress",     "tool_use_summary"};

		for (unsigned i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
			if (strcmp(type, quiet[i]) == 0)
				return 1;
		}
		return 0;
	}
	if (!c->s->have_conversation && conversation(c, json_get(root, "session_id")) < 0)
		return -1;
	if (str_is(root, "subtype", "success") && !json_is(json_get(root, "is_error"), JSON_TRUE)) {
		struct dialect_rec r = {.kind = DIALECT_REC_TURN_COMPLETED, .value = json_get(root, "usage")};
		text(&r, json_get(root, "result"));
		return out(c, &r);
	}
	v = json_get(root, "result");
	if (!json_is(v, JSON_STRING) || v->u.str.len == 0) {
		v = json_get(root, "errors");
		v = json_is(v, JSON_ARRAY) && v->u.arr.n > 0 ? &v->u.arr.v[0] : json_get(root, "subtype");
	}
	return rec(c, DIALECT_REC_TURN_FAILED, NULL, v);
}

static int
gemini_line(struct ctx *c, const struct json_val *root, const char *type)
{
	struct dialect_stream *s = c->s;
	const struct json_val *err = json_get(root, "error");
	const char *id = json_get_str(root, "tool_id"), *name = json_get_str(root, "tool_name");
	struct dialect_rec r = {.kind = DIALECT_REC_MESSAGE, .item_id = s->msg_id};
	int rc;

	if (strcmp(type, "init") == 0)
		return conversation(c, json_get(root, "session_id"));
	if (strcmp(type, "message") == 0) {
		if (!str_is(root, "role", "assistant"))
			return str_is(root, "role", "user") ? 1 : 0;
		if (!text(&r, json_get(root, "content")))
			return 0;
		if (s->msg_id[0] == '\0')
			snprintf(s->msg_id, sizeof(s->msg_id), "msg_%u", s->seq++);
		r.delta = json_is(json_get(root, "delta"), JSON_TRUE);
		r.done = !r.delta;
		rc = out(c, &r);
		if (r.done)
			s->msg_id[0] = '\0';
		return rc;
	}
	s->msg_id[0] = '\0';
	if (strcmp(type, "tool_use") == 0)
		return id != NULL && name != NULL ? tool_call(c, id, name, json_get(root, "parameters")) : 0;
	if (strcmp(type, "tool_result") == 0 && id != NULL)
		return tool_result(c, id, json_get(root, "output") ?: json_get(err, "message"),
		                   str_is(root, "status", "error"));
	if (strcmp(type, "error") == 0)
		return rec(c, DIALECT_REC_ERROR, NULL, json_get(root, "message"));
	if (strcmp(type, "result") != 0)
		return 0;
	if (str_is(root, "status", "success")) {
		r = (struct dialect_rec){.kind = DIALECT_REC_TURN_COMPLETED,
		                         .value = json_get(root, "stats")};
		return out(c, &r);
	}
	return rec(c, DIALECT_REC_TURN_FAILED, NULL, json_get(err, "message"));
}

int
dialect_line(struct dialect_stream *s, const char *line, size_t len, dialect_cb cb, void *arg, struct err *e)
{
	static int (*const parse[])(struct ctx *, const struct json_val *,
	                            const char *) = {NULL, codex_line, claude_line, gemini_line};
	struct ctx c = {s, cb, arg, e};
	struct dialect_rec r = {.kind = DIALECT_REC_RAW, .text = line};
	struct json_doc doc = {0};
	struct err pe;
	const char *type;
	int rc = 0;

	if (len > 0 && line[len - 1] == '\r')
		len--;
	r.len = len;
	if ((unsigned)s->d < sizeof(parse) / sizeof(parse[0]) && parse[s->d] != NULL &&
	    len <= DIALECT_LINE_MAX && json_parse(&doc, line, len, &line_limits, &pe) == 0 &&
	    (type = json_get_str(doc.root, "type")) != NULL)
		rc = parse[s->d](&c, doc.root, type);
	if (rc == 0)
		rc = out(&c, &r);
	json_free(&doc);
	return rc < 0 ? -1 : 0;
}

/* The words of an argv being built; over: buf or argv ran out. */
struct words {
	const char **argv;
	int n, over;
	char *buf;
	size_t cap, used;
};

static void
word(struct words *w, const char *s)
{
	if (w->n < DIALECT_ARGV_MAX)
		w->argv[w->n] = s;
	else
		w->over = 1;
	w->n++;
}

/* pre and then val into buf as one word; toml: val as a TOML basic string
 * (codex reads a -c value as TOML). */
static void
compose(struct words *w, const char *pre, const char *val, int toml)
{
	char *start = w->buf + w->used, *p = start, *end = w->buf + w->cap;
	size_t n = strlen(pre);

	if (w->over || (size_t)(end - p) <= n) {
		w->over = 1;
		return;
	}
	memcpy(p, pre, n);
	p += n;
	if (toml && p < end)
		*p++ = '"';
	for (const unsigned char *v = (const unsigned char *)val; *v != '\0' && p < end; v++) {
		if (toml && (*v < 0x20 || *v == 0x7f || *v == '"' || *v == '\\'))
			p += snprintf(p, (size_t)(end - p), "\\u%04x", *v);
		else
			*p++ = (char)*v;
	}
	if (toml && p < end)
		*p++ = '"';
	if (p >= end) {
		w->over = 1;
		return;
	}
	*p++ = '\0';
	w->used = (size_t)(p - w->buf);
	word(w, start);
}

int
dialect_argv(enum dialect d, const struct dialect_turn *t, const char **argv, char *buf, size_t cap,
             struct err *e)
{
	struct words w = {argv, 0, 0, buf, cap, 0};
	const char *conv = t->conversation;

	if (d != DIALECT_CODEX && d != DIALECT_CLAUDE && d != DIALECT_GEMINI)
		return err_set(e, "request.invalid", "agents of dialect %s take no turns", dialect_name(d));
	if (conv != NULL && conv[0] == '\0')
		return err_set(e, "request.invalid", "the conversation id is empty");
	if (d == DIALECT_GEMINI && t->instructions != NULL)
		return err_set(e, "request.invalid",
		               "instructions: gemini has no option for them (GEMINI_SYSTEM_MD replaces its "
		               "whole system prompt)");
	word(&w, t->bin);
	if (d == DIALECT_CODEX) {
		word(&w, "exec");
		if (conv != NULL)
			word(&w, "resume");
		word(&w, "--json");
		word(&w, "--skip-git-repo-check");
	} else if (d == DIALECT_CLAUDE) {
		word(&w, "-p");
		word(&w, "--verbose");
	}
	if (d != DIALECT_CODEX) {
		word(&w, "--output-format");
		word(&w, "stream-json");
	}
	if (t->model != NULL)
		compose(&w, "--model=", t->model, 0);
	if (t->instructions != NULL && d == DIALECT_CODEX) {
		word(&w, "-c");
		compose(&w, "developer_instructions=", t->instructions, 1);
	} else if (t->instructions != NULL) {
		compose(&w, "--append-system-prompt=", t->instructions, 0);
	}
	if (conv != NULL && d != DIALECT_CODEX)
		compose(&w, "--resume=", conv, 0);
	for (int i = 0; i < t->nextra; i++)
		word(&w, t->extra[i]);
	if (d == DIALECT_GEMINI) {
		compose(&w, "--prompt=", t->prompt, 0);
	} else {
		word(&w, "--");
		if (conv != NULL && d == DIALECT_CODEX)
			word(&w, conv);
		word(&w, t->prompt);
	}
	if (w.over)
		return err_set(e, "request.too_large",
		               "the argv of a %s turn needs more than %d words or %zu bytes", dialect_name(d),
		               DIALECT_ARGV_MAX, cap);
	argv[w.n] = NULL;
	return w.n;
}
