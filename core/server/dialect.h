#ifndef ABX_DIALECT_H
#define ABX_DIALECT_H
/*
 * The agents' JSON streams, one line at a time, as normalized records, and
 * the argv of one turn of each agent.
 *
 * Dialects (what the agent prints on stdout in its non-interactive mode):
 *   raw          any text: every line is a raw record
 *   codex        `codex exec --json`: JSONL of thread.started, turn.*,
 *                item.started/updated/completed (agent_message, reasoning,
 *                command_execution, file_change, mcp_tool_call, web_search,
 *                todo_list, error), error
 *   claude-code  `claude -p --output-format stream-json --verbose`: system
 *                (init), assistant and user messages (text, thinking,
 *                tool_use, tool_result blocks), result (stream_event
 *                lines, which --include-partial-messages adds, are raw)
 *   gemini       `gemini -p --output-format stream-json`: init, message,
 *                tool_use, tool_result, error, result
 *
 * A line that is not JSON, is longer than DIALECT_LINE_MAX, or is JSON of a
 * type the dialect does not know is one DIALECT_RAW record holding the line:
 * nothing is dropped. A line of a known type that carries nothing to report
 * (codex turn.started is reported; claude's message_start is not) gives no
 * record. Parsing uses core/base/json.h with dialect-specific limits
 * (DIALECT_LINE_MAX bytes, DIALECT_VALUES_MAX values, depth 64): a line's
 * memory is bounded by its length and freed before dialect_line returns.
 *
 * Claude's and gemini's tool calls carry the tool's name only on the call,
 * and the result names the call by id: struct dialect_stream remembers the
 * last DIALECT_PENDING_MAX calls, so a result of a shell tool ends a
 * command and a result of an edit tool reports a file change.
 */
#include <stddef.h>

#include "base/err.h"
#include "base/json.h"

enum dialect {
	DIALECT_RAW,
	DIALECT_CODEX,
	DIALECT_CLAUDE,
	DIALECT_GEMINI,
};

/* Longest line parsed as JSON: a command's whole output rides in one codex
 * item.completed line; 1 MiB holds any a session keeps (the journal holds
 * 4 MiB by default). A longer line is raw. */
#define DIALECT_LINE_MAX (1u << 20)
/* Values per line: a line of DIALECT_LINE_MAX bytes of "[0,0,..." has half
 * a million; no real event has more than a few hundred. */
#define DIALECT_VALUES_MAX 65536
/* Tool calls remembered for their results (claude, gemini): calls run one
 * or a few at a time. */
#define DIALECT_PENDING_MAX 8
/* Ids the stream keeps (tool call ids, claude message ids, gemini's made-up
 * item ids); a longer id is cut, which keeps it stable all the same. */
#define DIALECT_ID_MAX 64
/* A file path a pending edit call names, reported when its result comes;
 * a longer path makes the result a plain tool result. */
#define DIALECT_PATH_MAX 256
/* argv words dialect_argv writes, the NULL after them not counted. */
#define DIALECT_ARGV_MAX 16

/* "raw", "codex", "claude-code", "gemini". */
const char *dialect_name(enum dialect d);
/* The dialect named name; -1 when none is. */
int dialect_from_name(const char *name, enum dialect *d);

enum dialect_kind {
	DIALECT_REC_RAW,            /* text: the line as it came */
	DIALECT_REC_CONVERSATION,   /* text: the agent's id of the conversation, for the next turn */
	DIALECT_REC_TURN_STARTED,   /* - (codex says so; the others start with the process) */
	DIALECT_REC_MESSAGE,        /* item_id, text (delta: a piece to append) */
	DIALECT_REC_REASONING,      /* item_id, text (delta as for a message) */
	DIALECT_REC_COMMAND_START,  /* item_id, name: the command line */
	DIALECT_REC_COMMAND_OUTPUT, /* item_id, text: output so far (delta: the new piece) */
	DIALECT_REC_COMMAND_DONE,   /* item_id, name, text: whole output, exit_code (has_exit),
	                               is_error */
	DIALECT_REC_FILE_CHANGE,    /* item_id, name: path, detail: "add" / "delete" / "update" */
	DIALECT_REC_TOOL_CALL,      /* item_id, name: the tool, value: its arguments (or NULL) */
	DIALECT_REC_TOOL_RESULT,    /* item_id, name (when known), text: output, is_error */
	DIALECT_REC_ERROR,          /* text: a warning the agent reported; the turn goes on */
	DIALECT_REC_TURN_COMPLETED, /* value: usage as the agent reports it (or NULL), text: the
	                               final answer when the agent repeats it (claude, or NULL) */
	DIALECT_REC_TURN_FAILED,    /* text: the reason */
};

/* One record. Every pointer lives only during the callback (into the
 * parsed line or the stream); text may hold U+0000 (use len). */
struct dialect_rec {
	enum dialect_kind kind;
	const char *item_id;          /* stable within the turn: the agent's id or one made up; NULL for
	                                 records that are no item */
	const char *text;             /* NULL when absent */
	size_t len;                   /* text's bytes */
	const char *name;             /* command, tool name or path; NULL when absent */
	const char *detail;           /* file change kind; NULL when absent */
	const struct json_val *value; /* tool arguments or usage; NULL when absent */
	int delta; /* text is a piece to append to item_id's text (else the whole text so far) */
	int done;  /* the item is complete (message, reasoning, tool call, command) */
	int has_exit, exit_code; /* a command's exit status, when the agent gave one */
	int is_error;            /* the command, tool or file change failed */
};

/* Return 0 to go on, -1 (with e set) to stop: dialect_line returns -1. */
typedef int (*dialect_cb)(void *arg, const struct dialect_rec *r, struct err *e);

/* What a stream remembers between lines; the caller owns it (no heap). */
struct dialect_stream {
	enum dialect d;
	/* Private: */
	int have_conversation;       /* a DIALECT_REC_CONVERSATION was reported */
	unsigned seq;                /* made-up item ids: the next number */
	unsigned nblocks;            /* claude: content blocks seen of message msg_id */
	char msg_id[DIALECT_ID_MAX]; /* claude: the message being streamed; gemini: the open
	                                message item ("" when none) */
	unsigned next;               /* pending: the slot the next call takes (round robin) */
	struct {
		char id[DIALECT_ID_MAX]; /* "" = free */
		int kind;
		char path[DIALECT_PATH_MAX];
		const char *change; /* "add" / "update" */
	} pending[DIALECT_PENDING_MAX];
};

/* A fresh stream for one turn (or one process) of dialect d. */
void dialect_stream_init(struct dialect_stream *s, enum dialect d);

/* One line of the agent's stdout, without its '\n' (a trailing '\r' is
 * ignored): zero or more records to cb, in order. Returns 0, or -1 when cb
 * did (e as cb set it). Never fails on its input. */
int dialect_line(struct dialect_stream *s, const char *line, size_t len, dialect_cb cb, void *arg,
                 struct err *e);

/* Whether line is, byte for byte, codex's
 * {"type":"item.completed","item":{"id":"ID","type":"agent_message","text":"TEXT"}}
 * with ID of printable ASCII but '"' and '\\', and TEXT of those, valid
 * UTF-8 and the escapes \" \\ \b \f \n \r \t: then dialect_line would
 * report one done DIALECT_REC_MESSAGE of that id and text, which the JSON
 * writer writes back as the bytes *id, *il and *text, *tl (as they are in
 * line: no parse). */
int dialect_codex_message(const char *line, size_t len, const char **id, size_t *il, const char **text,
                          size_t *tl);

/* One turn of an agent. */
struct dialect_turn {
	const char *bin;          /* the agent's entry */
	const char *prompt;       /* the user's message */
	const char *model;        /* NULL: the agent's default */
	const char *instructions; /* NULL: none */
	const char *cwd;          /* the working directory (the child also runs there) */
	const char *conversation; /* from an earlier turn's DIALECT_REC_CONVERSATION; NULL on the
	                             first turn */
	const char *const *extra; /* nextra words put before the prompt: the operator's options
	                             (permission modes, sandbox flags); may be NULL */
	int nextra;
};

/* The argv of turn t of an agent speaking d, into argv[0..n) and argv[n] =
 * NULL; words point into t or string constants, or into buf (cap bytes) for
 * the words dialect_argv composes; argv has room for DIALECT_ARGV_MAX + 1.
 * Values go after '=' in one word or after "--", so a prompt, model or id
 * starting with '-' is never read as an option. Returns n, or -1 with e
 * set: request.too_large when buf is too small or the words would be more
 * than DIALECT_ARGV_MAX; request.invalid for the raw dialect (it has no
 * turns), an empty conversation id, or instructions for gemini (its only
 * way to take them, GEMINI_SYSTEM_MD, replaces its whole system prompt). */
int dialect_argv(enum dialect d, const struct dialect_turn *t, const char **argv, char *buf, size_t cap,
                 struct err *e);

/* 1 when the process of a turn started with dialect_argv's argv takes
 * further user messages on its stdin while it runs; 0 when a message sent
 * during a turn must be refused (409) until the turn ends. 0 for every
 * dialect today: codex exec reads no messages once started; claude could
 * with --input-format stream-json and gemini -p cannot, but dialect_argv
 * starts claude with the prompt as an argument. */
int dialect_can_steer(enum dialect d);

#endif
