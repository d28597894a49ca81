/*
 * libFuzzer target for the agents' JSON lines (core/server/dialect.h). The
 * first byte picks the dialect (its value modulo 4: raw, codex,
 * claude-code, gemini); the rest is the agent's stdout, lines split at
 * '\n', fed to one stream. The last line is also the prompt of a turn.
 * Properties:
 * - dialect_line never fails on its input (only when the callback does),
 *   never crashes, leaks or reads out of bounds;
 * - every record has a known kind; its strings are NUL-terminated (an id
 *   is the agent's, from the line, or made up under DIALECT_ID_MAX + 16
 *   bytes), its text has len readable bytes;
 * - a raw record is the line itself (less a trailing '\r'), and a line
 *   gives a raw record or records of the dialect, never both;
 * - the raw dialect gives one raw record per line;
 * - dialect_argv gives at most DIALECT_ARGV_MAX words ending with NULL, each
 *   from the turn or inside buf, or fails with request.invalid or
 *   request.too_large.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "server/dialect.h"

struct seen {
	const char *line;
	size_t len;
	int raw, other;
};

static int
check_rec(void *arg, const struct dialect_rec *r, struct err *e)
{
	struct seen *s = arg;
	volatile char sink = 0;

	(void)e;
	FUZZ_CHECK(r->kind >= DIALECT_REC_RAW && r->kind <= DIALECT_REC_TURN_FAILED);
	FUZZ_CHECK(r->text != NULL || r->len == 0);
	for (size_t i = 0; i < r->len; i++)
		sink ^= r->text[i];
	if (r->item_id != NULL)
		FUZZ_CHECK(strlen(r->item_id) < s->len + DIALECT_ID_MAX + 16);
	if (r->name != NULL)
		sink ^= r->name[strlen(r->name)];
	if (r->detail != NULL)
		sink ^= r->detail[strlen(r->detail)];
	if (r->kind == DIALECT_REC_RAW) {
		FUZZ_CHECK(r->text == s->line && r->len <= s->len && s->len - r->len <= 1);
		s->raw++;
	} else {
		s->other++;
	}
	(void)sink;
	return 0;
}

static void
check_argv(enum dialect d, const char *prompt)
{
	static char buf[512];
	const char *argv[DIALECT_ARGV_MAX + 1];
	struct dialect_turn t = {.bin = "agent", .prompt = prompt, .model = "m"};
	struct err e;
	int n;

	t.conversation = prompt[0] != '\0' && prompt[0] < 'M' ? prompt : NULL;
	t.instructions = d != DIALECT_GEMINI && prompt[0] != '\0' && prompt[0] < '4' ? prompt : NULL;
	err_clear(&e);
	n = dialect_argv(d, &t, argv, buf, sizeof(buf), &e);
	if (n < 0) {
		FUZZ_CHECK(strcmp(e.code, "request.invalid") == 0 ||
		           strcmp(e.code, "request.too_large") == 0);
		return;
	}
	FUZZ_CHECK(d != DIALECT_RAW && n >= 3 && n <= DIALECT_ARGV_MAX && argv[n] == NULL);
	for (int i = 0; i < n; i++) {
		FUZZ_CHECK(argv[i] != NULL);
		if (argv[i] >= buf && argv[i] < buf + sizeof(buf))
			FUZZ_CHECK(argv[i] + strlen(argv[i]) < buf + sizeof(buf));
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dialect_stream st;
	enum dialect d;
	struct err e;
	const char *p, *end, *nl;
	char *prompt;

	if (size == 0)
		return 0;
	d = (enum dialect)(data[0] % 4);
	dialect_stream_init(&st, d);
	p = (const char *)data + 1;
	end = (const char *)data + size;
	for (; p <= end; p = nl + 1) {
		struct seen s;

		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		s = (struct seen){p, (size_t)(nl - p), 0, 0};
		FUZZ_CHECK(dialect_line(&st, p, s.len, check_rec, &s, &e) == 0);
		FUZZ_CHECK(s.raw == 0 || s.other == 0);
		FUZZ_CHECK(s.raw <= 1);
		if (d == DIALECT_RAW)
			FUZZ_CHECK(s.raw == 1);
		if (nl == end) {
			prompt = strndup(p, s.len);
			FUZZ_CHECK(prompt != NULL);
			check_argv(d, prompt);
			free(prompt);
			break;
		}
	}
	return 0;
}
