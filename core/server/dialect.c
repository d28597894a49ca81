#include "server/dialect.h"

#include <stdio.h>
#include <string.h>

static const char *const names[] = {"raw", "codex", "claude-code", "gemini"};

/* Duplicate keys are kept (the first wins): an agent's line is read, never
 * refused, so json_get's first match is as good as any. */
static const struct json_limits line_limits = {DIALECT_LINE_MAX, 64, DIALECT_VALUES_MAX, 0};

enum pending_kind { PENDING_TOOL = 1, PENDING_SHELL, PENDING_FILE };

/* A line type's record taken straight from its members: the paths of its
 * text and value (as at() reads them). QUIET: a known type that gives no
 * record. */
#define QUIET 0xff
struct row {
	unsigned char d, kind;
	const char *type, *text, *value;
};

static const struct row rows[] = {
    {DIALECT_CODEX, DIALECT_REC_CONVERSATION, "thread.started", "thread_id", NULL},
    {DIALECT_CODEX, DIALECT_REC_TURN_STARTED, "turn.started", NULL, NULL},
    {DIALECT_CODEX, DIALECT_REC_TURN_COMPLETED, "turn.completed", NULL, "usage"},
    {DIALECT_CODEX, DIALECT_REC_TURN_FAILED, "turn.failed", "error.message", NULL},
    {DIALECT_CODEX, DIALECT_REC_ERROR, "error", "message", NULL},
    {DIALECT_GEMINI, DIALECT_REC_CONVERSATION, "init", "session_id", NULL},
    {DIALECT_GEMINI, DIALECT_REC_ERROR, "error", "message", NULL},
    {DIALECT_CLAUDE, QUIET, "auth_status", NULL, NULL},
    {DIALECT_CLAUDE, QUIET, "conversation_reset", NULL, NULL},
    {DIALECT_CLAUDE, QUIET, "prompt_suggestion", NULL, NULL},
    {DIALECT_CLAUDE, QUIET, "rate_limit_event", NULL, NULL},
    {DIALECT_CLAUDE, QUIET, "tool_progress", NULL, NULL},
    {DIALECT_CLAUDE, QUIET, "tool_use_summary", NULL, NULL},
};

/* codex items: the record of each phase (started, updated, completed; QUIET
 * for none), the paths of text, name (NULL: the item type is the name; "":
 * no name) and value (value2 once completed). file_change is code of its
 * own: one record per changed file. */
struct item {
	const char *type;
	unsigned char kind[3];
	const char *text, *name, *value, *value2;
};

static const struct item items[] = {
    {"agent_message",
     {DIALECT_REC_MESSAGE, DIALECT_REC_MESSAGE, DIALECT_REC_MESSAGE},
     "text",
     "",
     NULL,
     NULL},
    {"reasoning",
     {DIALECT_REC_REASONING, DIALECT_REC_REASONING, DIALECT_REC_REASONING},
     "text",
     "",
     NULL,
     NULL},
    {"command_execution",
     {DIALECT_REC_COMMAND_START, DIALECT_REC_COMMAND_OUTPUT, DIALECT_REC_COMMAND_DONE},
     "aggregated_output",
     "command",
     NULL,
     NULL},
    {"mcp_tool_call",
     {DIALECT_REC_TOOL_CALL, QUIET, DIALECT_REC_TOOL_RESULT},
     "error.message",
     "tool",
     "arguments",
     "result"},
    {"web_search", {DIALECT_REC_TOOL_CALL, QUIET, DIALECT_REC_TOOL_RESULT}, "query", NULL, NULL, NULL},
    {"todo_list",
     {DIALECT_REC_TOOL_CALL, DIALECT_REC_TOOL_CALL, DIALECT_REC_TOOL_CALL},
     NULL,
     NULL,
     "items",
     "items"},
    {"error", {DIALECT_REC_ERROR, DIALECT_REC_ERROR, DIALECT_REC_ERROR}, "message", "", NULL, NULL},
};

/* claude's and gemini's tools that are a command or write a file; the
 * file's path is the argument file_path (or notebook_path). */
static const char *const tools[] = {
    "Bash", NULL,     "run_shell_command", NULL,     "Write",        "add",    "write_file", "add",
    "Edit", "update", "MultiEdit",         "update", "NotebookEdit", "update", "replace",    "update"};

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

/* v's member at path: a key, or "error.KEY" for KEY of v's error object. */
static const struct json_val *
at(const struct json_val *v, const char *path)
{
	if (path == NULL)
		return NULL;
	if (strncmp(path, "error.", 6) == 0)
		return json_get(json_get(v, "error"), path + 6);
	return json_get(v, path);
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
str_is(const struct json_val *obj, const char *key, const char *want)
{
	const char *s = json_get_str(obj, key);

	return s != NULL && strcmp(s, want) == 0;
}

static int
out(struct ctx *c, struct dialect_rec *r)
{
	if (r->kind == DIALECT_REC_CONVERSATION) {
		if (r->text == NULL || r->len == 0)
			return 0;
		c->s->have_conversation = 1;
	}
	return c->cb(c->arg, r, c->e) == 0 ? 1 : -1;
}

/* A record of kind with the text at path t of v and the value at path val. */
static int
rec(struct ctx *c, int kind, const char *item_id, const struct json_val *v, const char *t, const char *val)
{
	struct dialect_rec r = {.kind = (enum dialect_kind)kind, .item_id = item_id, .value = at(v, val)};

	text(&r, at(v, t));
	return out(c, &r);
}

/* The end of a claude or gemini turn: completed with usage (and claude's
 * final text) when ok, else failed with the reason. */
static int
finish(struct ctx *c, int ok, const struct json_val *usage, const struct json_val *t)
{
	struct dialect_rec r = {.kind = ok ? DIALECT_REC_TURN_COMPLETED : DIALECT_REC_TURN_FAILED,
	                        .value = ok ? usage : NULL};

	text(&r, t);
	return out(c, &r);
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
	struct dialect_rec r = {.kind = DIALECT_REC_TOOL_CALL, .item_id = id, .name = name, .value = args};
	const char *path = json_get_str(args, "file_path"), *keep = name;
	unsigned slot = s->next++ % DIALECT_PENDING_MAX, i;
	int kind = PENDING_TOOL;

	if (path == NULL)
		path = json_get_str(args, "notebook_path");
	for (i = 0; i < sizeof(tools) / sizeof(tools[0]) && strcmp(name, tools[i]) != 0; i += 2)
		;
	if (i < 4) {
		kind = PENDING_SHELL;
		r.kind = DIALECT_REC_COMMAND_START;
		r.name = json_get_str(args, "command");
		r.value = NULL;
	} else if (i < sizeof(tools) / sizeof(tools[0]) && path != NULL && strlen(path) < DIALECT_PATH_MAX) {
		kind = PENDING_FILE;
		keep = path;
		s->pending[slot].change = tools[i + 1];
	}
	if (kind == PENDING_SHELL && r.name != NULL)
		keep = r.name; /* the command, for its end (cut to DIALECT_PATH_MAX - 1) */
	snprintf(s->pending[slot].id, DIALECT_ID_MAX, "%s", id);
	snprintf(s->pending[slot].path, DIALECT_PATH_MAX, "%s", keep);
	s->pending[slot].kind = kind;
	return kind == PENDING_FILE ? 1 : out(c, &r);
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
	if (!text(&r, res) && json_is(res, JSON_ARRAY)) {
		r.value = res;
		for (size_t i = 0; i < res->u.arr.n && r.text == NULL; i++)
			text(&r, json_get(&res->u.arr.v[i], "text"));
	}
	for (unsigned i = 0; i < DIALECT_PENDING_MAX; i++) {
		/* The id as tool_call kept it: cut to DIALECT_ID_MAX - 1 bytes. */
		if (s->pending[i].id[0] == '\0' || strncmp(s->pending[i].id, id, DIALECT_ID_MAX - 1) != 0)
			continue;
		s->pending[i].id[0] = '\0';
		r.name = s->pending[i].path;
		if (s->pending[i].kind == PENDING_SHELL)
			r.kind = DIALECT_REC_COMMAND_DONE;
		if (s->pending[i].kind == PENDING_FILE) {
			r.kind = DIALECT_REC_FILE_CHANGE;
			r.detail = s->pending[i].change;
		}
		break;
	}
	return out(c, &r);
}

/* codex exec --json: item.started (phase 0), item.updated (1) and
 * item.completed (2). */
static int
codex_item(struct ctx *c, const struct json_val *item, int phase)
{
	const char *id = json_get_str(item, "id"), *type = json_get_str(item, "type");
	const char *status = json_get_str(item, "status");
	const struct json_val *v = json_get(item, "exit_code");
	struct dialect_rec r = {.item_id = id, .done = phase == 2};
	const struct item *it = items;
	int rc = 1;

	if (id == NULL || type == NULL)
		return 0;
	r.is_error = status != NULL && (strcmp(status, "failed") == 0 || strcmp(status, "declined") == 0);
	if (strcmp(type, "file_change") == 0) {
		v = json_get(item, "changes");
		r.kind = DIALECT_REC_FILE_CHANGE;
		for (size_t i = 0; phase == 2 && json_is(v, JSON_ARRAY) && i < v->u.arr.n && rc > 0; i++) {
			r.name = json_get_str(&v->u.arr.v[i], "path");
			r.detail = json_get_str(&v->u.arr.v[i], "kind");
			if (r.name != NULL)
				rc = out(c, &r);
		}
		return rc;
	}
	while (strcmp(type, it->type) != 0)
		if (++it == items + sizeof(items) / sizeof(items[0]))
			return 0;
	if (it->kind[phase] == QUIET)
		return 1;
	r.kind = (enum dialect_kind)it->kind[phase];
	text(&r, at(item, it->text));
	r.name = it->name == NULL ? type : it->name[0] != '\0' ? json_get_str(item, it->name) : NULL;
	r.value = at(item, phase == 2 ? it->value2 : it->value);
	if (json_is(v, JSON_NUMBER) && v->u.num.is_int) {
		r.has_exit = 1;
		r.exit_code = (int)v->u.num.i;
		r.is_error |= r.exit_code != 0;
	}
	return out(c, &r);
}

/* claude: the content blocks of one assistant message line. Each block's
 * item id is the message's id and the block's index. */
static int
claude_assistant(struct ctx *c, const struct json_val *msg)
{
	struct dialect_stream *s = c->s;
	const struct json_val *content = json_get(msg, "content");
	const char *mid = json_get_str(msg, "id");
	char item[DIALECT_ID_MAX + 16];
	int rc = 1;

	if (!json_is(content, JSON_ARRAY))
		return 0;
	if (mid == NULL)
		mid = "msg";
	if (strncmp(s->msg_id, mid, DIALECT_ID_MAX - 1) != 0) {
		snprintf(s->msg_id, DIALECT_ID_MAX, "%s", mid);
		s->nblocks = 0;
	}
	for (size_t i = 0; i < content->u.arr.n && rc > 0; i++) {
		const struct json_val *b = &content->u.arr.v[i];
		const char *id = json_get_str(b, "id"), *name = json_get_str(b, "name");
		int t = str_is(b, "type", "text");
		struct dialect_rec r = {
		    .kind = t ? DIALECT_REC_MESSAGE : DIALECT_REC_REASONING, .item_id = item, .done = 1};

		snprintf(item, sizeof(item), "%s:%u", s->msg_id, s->nblocks++);
		if ((t || str_is(b, "type", "thinking")) && text(&r, json_get(b, t ? "text" : "thinking")))
			rc = out(c, &r);
		else if (str_is(b, "type", "tool_use") && id != NULL && name != NULL)
			rc = tool_call(c, id, name, json_get(b, "input"));
	}
	return rc;
}

static int
claude_line(struct ctx *c, const struct json_val *root, const char *type)
{
	const struct json_val *content = json_get(json_get(root, "message"), "content"), *v;
	int rc = 1;

	if (strcmp(type, "system") == 0 && str_is(root, "subtype", "api_retry"))
		return rec(c, DIALECT_REC_ERROR, NULL, root, "error", NULL);
	if (strcmp(type, "system") == 0)
		return str_is(root, "subtype", "init")
		           ? rec(c, DIALECT_REC_CONVERSATION, NULL, root, "session_id", NULL)
		           : 1;
	if (strcmp(type, "assistant") == 0)
		return claude_assistant(c, json_get(root, "message"));
	if (strcmp(type, "user") == 0) {
		for (size_t i = 0; json_is(content, JSON_ARRAY) && i < content->u.arr.n && rc > 0; i++) {
			const struct json_val *b = &content->u.arr.v[i];
			const char *id = json_get_str(b, "tool_use_id");

			if (str_is(b, "type", "tool_result") && id != NULL)
				rc = tool_result(c, id, json_get(b, "content"),
				                 json_is(json_get(b, "is_error"), JSON_TRUE));
		}
		return rc;
	}
	if (strcmp(type, "result") != 0)
		return 0;
	if (!c->s->have_conversation && rec(c, DIALECT_REC_CONVERSATION, NULL, root, "session_id", NULL) < 0)
		return -1;
	v = json_get(root, "result");
	if (str_is(root, "subtype", "success") && !json_is(json_get(root, "is_error"), JSON_TRUE))
		return finish(c, 1, json_get(root, "usage"), v);
	if (!json_is(v, JSON_STRING) || v->u.str.len == 0) {
		v = json_get(root, "errors");
		v = json_is(v, JSON_ARRAY) && v->u.arr.n > 0 ? &v->u.arr.v[0] : json_get(root, "subtype");
	}
	return finish(c, 0, NULL, v);
}

/*
 * gemini streams an answer as deltas only: the first one opens the message
 * item (a record with no text and not done), any line but another delta of
 * it closes it (done with no text: the item's text is its deltas joined, as
 * core/server/sessions_items.c keeps them). A message sent whole is one
 * done record.
 */
static int
gemini_line(struct ctx *c, const struct json_val *root, const char *type)
{
	struct dialect_stream *s = c->s;
	const char *id = json_get_str(root, "tool_id"), *name = json_get_str(root, "tool_name");
	struct dialect_rec r = {.kind = DIALECT_REC_MESSAGE, .item_id = s->msg_id}, open = r;
	int rc = 1, delta = json_is(json_get(root, "delta"), JSON_TRUE);

	if (strcmp(type, "message") == 0 && !str_is(root, "role", "assistant"))
		return str_is(root, "role", "user");
	if (s->msg_id[0] != '\0' && (strcmp(type, "message") != 0 || !delta)) {
		open.done = 1;
		rc = out(c, &open);
		s->msg_id[0] = '\0';
	}
	if (rc < 0)
		return rc;
	if (strcmp(type, "message") == 0) {
		if (!text(&r, json_get(root, "content")))
			return 0;
		if (s->msg_id[0] == '\0') {
			snprintf(s->msg_id, sizeof(s->msg_id), "msg_%u", s->seq++);
			if (delta && out(c, &open) < 0)
				return -1;
		}
		r.delta = delta;
		r.done = !delta;
		rc = out(c, &r);
		if (r.done)
			s->msg_id[0] = '\0';
		return rc;
	}
	if (strcmp(type, "tool_use") == 0)
		return id != NULL && name != NULL ? tool_call(c, id, name, json_get(root, "parameters")) : 0;
	if (strcmp(type, "tool_result") == 0 && id != NULL)
		return tool_result(c, id, json_get(root, "output") ?: at(root, "error.message"),
		                   str_is(root, "status", "error"));
	if (strcmp(type, "result") != 0)
		return 0;
	return finish(c, str_is(root, "status", "success"), json_get(root, "stats"),
	              at(root, "error.message"));
}

int
dialect_line(struct dialect_stream *s, const char *line, size_t len, dialect_cb cb, void *arg, struct err *e)
{
	static int (*const parse[])(struct ctx *, const struct json_val *,
	                            const char *) = {NULL, NULL, claude_line, gemini_line};
	static const char *const phases[] = {"item.started", "item.updated", "item.completed"};
	struct ctx c = {s, cb, arg, e};
	struct dialect_rec r = {.kind = DIALECT_REC_RAW, .text = line};
	struct json_doc doc = {0};
	const struct json_val *root;
	const char *type;
	struct err pe = {0};
	int rc = 0;

	if (len > 0 && line[len - 1] == '\r')
		len--;
	r.len = len;
	if (s->d != DIALECT_RAW && len <= DIALECT_LINE_MAX &&
	    json_parse(&doc, line, len, &line_limits, &pe) == 0 &&
	    (type = json_get_str(root = doc.root, "type")) != NULL) {
		for (unsigned i = 0; i < sizeof(rows) / sizeof(rows[0]) && rc == 0; i++) {
			if (rows[i].d == s->d && strcmp(type, rows[i].type) == 0)
				rc = rows[i].kind == QUIET
				         ? 1
				         : rec(&c, rows[i].kind, NULL, root, rows[i].text, rows[i].value);
		}
		for (int i = 0; i < 3 && rc == 0 && s->d == DIALECT_CODEX; i++) {
			if (strcmp(type, phases[i]) == 0)
				rc = codex_item(&c, json_get(root, "item"), i);
		}
		if (rc == 0 && (unsigned)s->d < 4 && parse[s->d] != NULL)
			rc = parse[s->d](&c, root, type);
	}
	if (rc == 0)
		rc = out(&c, &r);
	json_free(&doc);
	return rc < 0 ? -1 : 0;
}

/* The printable ASCII bytes from p on but '"' and '\\': where they end. */
static const char *
plain_end(const char *p, const char *end)
{
	while (p < end && *p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\')
		p++;
	return p;
}

int
dialect_codex_message(const char *line, size_t len, const char **id, size_t *il, const char **text,
                      size_t *tl)
{
	static const char a[] = "{\"type\":\"item.completed\",\"item\":{\"id\":\"",
	                  b[] = "\",\"type\":\"agent_message\",\"text\":\"";
	const char *end = line + len - 3, *p, *why;
	size_t k;

	if (len < sizeof(a) + sizeof(b) + 1 || len > DIALECT_LINE_MAX ||
	    memcmp(line, a, sizeof(a) - 1) != 0 || memcmp(end, "\"}}", 3) != 0)
		return 0;
	*id = line + sizeof(a) - 1;
	p = plain_end(*id, end);
	*il = (size_t)(p - *id);
	if ((size_t)(end - p) < sizeof(b) - 1 || memcmp(p, b, sizeof(b) - 1) != 0)
		return 0;
	*text = p + sizeof(b) - 1;
	*tl = (size_t)(end - *text);
	for (p = *text; (p = plain_end(p, end)) < end; p += k) {
		/* escapes and UTF-8 the parser reads and the writer writes back
		 * byte for byte */
		k = (unsigned char)*p >= 0x80
		        ? (size_t)json_utf8_len((const unsigned char *)p, (const unsigned char *)end, &why)
		    : *p == '\\' && p + 1 < end && memchr("\"\\bfnrt", p[1], 7) != NULL ? 2
		                                                                        : 0;
		if (k == 0)
			return 0;
	}
	return 1;
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
