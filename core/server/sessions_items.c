/*
 * An agent's JSON lines (core/server/dialect.h) as the wire's items and
 * events, the objects of the SDK's type definitions: a message, reasoning
 * and a command execution are items of their own type; a file change is a
 * function_call named file_change ({path, kind}); a tool call a
 * function_call and its result a function_call_output. An item that starts
 * before it ends is agent.session.turn.item.added, then .item.done; pieces
 * of text are output_text, reasoning_summary_text or
 * command_execution_output deltas. The agent's conversation id is kept
 * (agent.session.thread, for the next turn's resume); warnings and lines
 * that do not parse are output events.
 */
#include "server/sessions_int.h"

#include "base/decimal.h"

#include <stdio.h>
#include <string.h>

/* Text bytes an item carries: its event stays under JOURNAL_LINE_MAX
 * even when every byte is escaped (6x). */
#define ITEM_TEXT_MAX SESSION_EVENT_DATA_MAX

/* What a record kind becomes: the item's type (NULL: a delta or no item)
 * and the delta event with its index member. */
static const struct {
	const char *type, *delta, *index;
} kinds[] = {
    [DIALECT_REC_MESSAGE] = {"message", "agent.session.turn.output_text.delta", "content_index"},
    [DIALECT_REC_REASONING] = {"reasoning", "agent.session.turn.reasoning_summary_text.delta",
                               "summary_index"},
    [DIALECT_REC_COMMAND_START] = {"command_execution", NULL, NULL},
    [DIALECT_REC_COMMAND_OUTPUT] = {NULL, "agent.output.command_execution_output.delta", NULL},
    [DIALECT_REC_COMMAND_DONE] = {"command_execution", NULL, NULL},
    [DIALECT_REC_FILE_CHANGE] = {"function_call", NULL, NULL},
    [DIALECT_REC_TOOL_CALL] = {"function_call", NULL, NULL},
    [DIALECT_REC_TOOL_RESULT] = {"function_call_output", NULL, NULL},
};

static size_t
text_cut(const struct dialect_rec *r)
{
	size_t n = r->len < ITEM_TEXT_MAX ? r->len : ITEM_TEXT_MAX;

	while (n > 0 && n < r->len && ((unsigned char)r->text[n] & 0xc0) == 0x80)
		n--;
	return n;
}

static void
ktext(struct json_w *w, const char *key, const struct dialect_rec *r)
{
	json_w_key(w, key);
	if (r->text != NULL)
		json_w_strn(w, r->text, text_cut(r));
	else
		json_w_null(w);
}

/* The item of record r (its kind's type) into w. */
static void
item_json(struct json_w *w, struct slot *s, const struct dialect_rec *r, const char *type, const char *id,
          const char *turn, const char *status)
{
	json_w_obj(w);
	json_w_kstr(w, "id", id);
	json_w_kstr(w, "type", type);
	json_w_kstr(w, "turn_id", turn);
	json_w_kstr(w, "status", status);
	switch (r->kind) {
	case DIALECT_REC_MESSAGE:
	case DIALECT_REC_REASONING:
		json_w_key(w, r->kind == DIALECT_REC_MESSAGE ? "content" : "summary");
		json_w_arr(w);
		json_w_obj(w);
		json_w_kstr(w, "type", r->kind == DIALECT_REC_MESSAGE ? "output_text" : "summary_text");
		json_w_key(w, "text");
		json_w_strn(w, r->text != NULL ? r->text : "", r->text != NULL ? text_cut(r) : 0);
		json_w_end(w);
		json_w_end(w);
		if (r->kind == DIALECT_REC_MESSAGE) {
			json_w_kstr(w, "role", "assistant");
			json_w_key(w, "phase");
			json_w_null(w);
		}
		break;
	case DIALECT_REC_COMMAND_START:
	case DIALECT_REC_COMMAND_DONE:
		json_w_kstr(w, "command", r->name != NULL ? r->name : "");
		json_w_kstr(w, "cwd", s->cwd != NULL ? s->cwd : "/");
		json_w_key(w, "duration_ms");
		json_w_null(w);
		ktext(w, "output", r);
		json_w_key(w, "exit_code");
		if (r->has_exit)
			json_w_int(w, r->exit_code);
		else
			json_w_null(w);
		break;
	case DIALECT_REC_FILE_CHANGE:
		json_w_kstr(w, "name", "file_change");
		json_w_kstr(w, "call_id", id);
		json_w_key(w, "arguments");
		json_w_obj(w);
		json_w_kstr(w, "path", r->name != NULL ? r->name : "");
		json_w_kstr(w, "kind", r->detail != NULL ? r->detail : "update");
		json_w_end(w);
		break;
	case DIALECT_REC_TOOL_CALL:
		json_w_kstr(w, "name", r->name != NULL ? r->name : "");
		json_w_kstr(w, "call_id", id);
		json_w_key(w, "arguments");
		if (r->value != NULL)
			json_w_val(w, r->value);
		else
			json_w_null(w);
		break;
	default: /* DIALECT_REC_TOOL_RESULT */
		json_w_kstr(w, "call_id", id + 4);
		ktext(w, "output", r);
		json_w_key(w, "error");
		if (r->is_error)
			json_w_str(w, "the tool failed");
		else
			json_w_null(w);
		break;
	}
	json_w_end(w);
}

/* One record of the agent's stdout (dialect_line's callback). */
static int
on_rec(void *arg, const struct dialect_rec *r, struct err *e)
{
	struct slot *s = arg;
	const char *type, *src;
	char turn[32], id[DIALECT_ID_MAX + 40];
	struct dialect_rec joined;
	struct json_w w, *iw = &s->iw;
	size_t head, tl, k;
	int ends, delta, closing = 0;

	switch (r->kind) {
	case DIALECT_REC_RAW:
		sessions_emit_text(s, PROC_STDOUT, r->text, r->len);
		return 0;
	case DIALECT_REC_ERROR:
		sessions_emit_text(s, PROC_STDERR, r->text, r->len);
		return 0;
	case DIALECT_REC_CONVERSATION:
		pthread_mutex_lock(&s->S->mu);
		snprintf(s->v.thread, sizeof(s->v.thread), "%.*s", (int)r->len, r->text);
		pthread_mutex_unlock(&s->S->mu);
		json_w_init(&w, sizeof(s->v.thread) * 6 + 32);
		json_w_obj(&w);
		json_w_kstr(&w, "thread", s->v.thread);
		json_w_end(&w);
		sessions_emit(s, "agent.session.thread", w.buf, -1);
		json_w_free(&w);
		return 0;
	case DIALECT_REC_TURN_STARTED:
		return 0;
	case DIALECT_REC_TURN_COMPLETED:
	case DIALECT_REC_TURN_FAILED:
		s->dend = r->kind == DIALECT_REC_TURN_COMPLETED ? 1 : 2;
		snprintf(s->dwhy, sizeof(s->dwhy), "%.*s", r->text != NULL ? (int)text_cut(r) : 0,
		         r->text != NULL ? r->text : "");
		return 0;
	default:
		break;
	}
	if ((size_t)r->kind >= sizeof(kinds) / sizeof(kinds[0]))
		return 0;
	if (r->kind == DIALECT_REC_MESSAGE) {
		/* deltas kept for the end of their message, which has no text
		 * of its own when the agent streams (dialect.c, gemini) */
		if (r->delta && r->text != NULL && s->acc.len < ITEM_TEXT_MAX)
			(void)buf_put(&s->acc, r->text,
			              r->len < ITEM_TEXT_MAX - s->acc.len ? r->len
			                                                  : ITEM_TEXT_MAX - s->acc.len);
		else if (!r->delta && r->text == NULL && r->done) {
			joined = *r;
			joined.text = s->acc.len > 0 ? (const char *)s->acc.p : "";
			joined.len = s->acc.len;
			r = &joined;
			closing = 1;
		} else if (!r->delta)
			buf_reset(&s->acc); /* a message of its own, or one that opens */
	}
	/* The turn's id and the item's, [out_]turn_N_ITEM, by hand (two
	 * snprintf calls were a tenth of an item event's cost). */
	memcpy(turn, "turn_", 5);
	tl = 5 + dec_fixed(s->v.turns, 0, 0, turn + 5, sizeof(turn) - 5);
	k = r->kind == DIALECT_REC_TOOL_RESULT ? 4 : 0;
	memcpy(id, "out_", k);
	memcpy(id + k, turn, tl);
	k += tl;
	id[k++] = '_';
	src = r->item_id != NULL ? r->item_id : "item";
	tl = strnlen(src, sizeof(id) - k - 1);
	memcpy(id + k, src, tl);
	id[k + tl] = '\0';
	delta = r->delta || r->kind == DIALECT_REC_COMMAND_OUTPUT;
	if (delta && (!r->delta || r->text == NULL))
		return 0; /* the whole output so far: the item's end has it */
	/* a command's start is an item of its own; its end is that item done */
	ends = r->kind != DIALECT_REC_COMMAND_START && r->kind != DIALECT_REC_TOOL_CALL
	           ? r->done || r->kind >= DIALECT_REC_COMMAND_DONE
	           : r->done && r->kind == DIALECT_REC_TOOL_CALL;
	/* The whole event in the thread's writer (kept from line to line). */
	sessions_event_head(s, iw,
	                    delta  ? kinds[r->kind].delta
	                    : ends ? "agent.session.turn.item.done"
	                           : "agent.session.turn.item.added");
	head = iw->len;
	json_w_kstr(iw, "turn_id", turn);
	if (delta) {
		json_w_kstr(iw, "item_id", id + (r->kind == DIALECT_REC_TOOL_RESULT ? 4 : 0));
		json_w_kint(iw, "output_index", s->nitems > 0 ? s->nitems - 1 : 0); /* its item's */
		if (kinds[r->kind].index != NULL)
			json_w_kint(iw, kinds[r->kind].index, 0);
		ktext(iw, "delta", r);
	} else {
		type = kinds[r->kind].type;
		json_w_kint(iw, "output_index", s->nitems - closing);
		if (r->kind != DIALECT_REC_COMMAND_DONE && !closing)
			s->nitems++;
		json_w_key(iw, "item");
		item_json(iw, s, r, type, id, turn,
		          !ends         ? "in_progress"
		          : r->is_error ? "failed"
		                        : "completed");
	}
	sessions_emit_limited(s, iw, head);
	if (closing)
		buf_reset(&s->acc);
	(void)e;
	return 0;
}

/* Appends n bytes at o; the end. */
static char *
put(char *o, const char *p, size_t n)
{
	memcpy(o, p, n);
	return o + n;
}
#define LIT(o, lit) put(o, lit, sizeof(lit) - 1)

/* A codex agent message (dialect_codex_message) as the event dialect_line
 * and on_rec make of it, written in place: no parse, no writer. 0, or 1
 * when the line takes the general way (nothing was added). */
static int
message_fast(struct slot *s, const char *p, size_t n)
{
	const char *id, *text, *head;
	size_t il, xl, tl;
	char turn[32], *line, *o;

	if (s->ds.d != DIALECT_CODEX || !dialect_codex_message(p, n, &id, &il, &text, &xl) ||
	    il > DIALECT_ID_MAX || xl > ITEM_TEXT_MAX)
		return 1;
	memcpy(turn, "turn_", 5);
	tl = 5 + dec_fixed(s->v.turns, 0, 0, turn + 5, sizeof(turn) - 5);
	o = sessions_place_head(s, "agent.session.turn.item.done", 3 * tl + il + xl + 256, &line);
	if (o == NULL)
		return 1;
	head = o;
	o = put(LIT(o, ",\"turn_id\":\""), turn, tl);
	o = LIT(o, "\",\"output_index\":");
	o += dec_fixed((uint64_t)s->nitems, 0, 0, o, 48);
	o = put(LIT(o, ",\"item\":{\"id\":\""), turn, tl);
	*o++ = '_';
	o = LIT(put(o, id, il), "\",\"type\":\"message\",\"turn_id\":\"");
	o = LIT(put(o, turn, tl),
	        "\",\"status\":\"completed\",\"content\":[{\"type\":\"output_text\",\"text\":\"");
	o = LIT(put(o, text, xl), "\"}],\"role\":\"assistant\",\"phase\":null}");
	if (sessions_place_end(s, line, head, o) != 0)
		return 1;
	s->nitems++;
	buf_reset(&s->acc);
	return 0;
}

/* A whole line of the agent's stdout (without its newline). */
static void
line(struct slot *s, const char *p, size_t n)
{
	struct err e = {0};

	if (message_fast(s, p, n) != 0)
		(void)dialect_line(&s->ds, p, n, on_rec, s, &e);
}

void
sessions_on_dialect(void *arg, enum proc_stream st, const char *data, size_t len)
{
	struct slot *s = ((struct sink_ctx *)arg)->s;
	struct buf *b = &s->dl;
	const char *p = data, *end = data + len, *nl;
	size_t k;

	if (st != PROC_STDOUT) {
		sessions_on_output(arg, st, data, len);
		return;
	}
	sessions_stage(s, 1);
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		k = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
		if (b->len == 0 && nl != NULL) {
			line(s, p, k); /* a whole line in the chunk: no copy */
			p = nl + 1;
			continue;
		}
		/* A line longer than the dialect parses goes as it is (raw). */
		if (b->len + k > DIALECT_LINE_MAX)
			k = DIALECT_LINE_MAX - b->len;
		if (buf_put(b, p, k) != 0)
			b->over = 0;
		p += k;
		if (nl != NULL && p == nl)
			p++;
		else if (b->len < DIALECT_LINE_MAX)
			continue;
		line(s, (const char *)b->p, b->len);
		buf_reset(b);
	}
	sessions_stage(s, 0);
}
