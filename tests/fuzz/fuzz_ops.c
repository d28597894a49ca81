/*
 * libFuzzer target for the commands file and the op registry (core/server/ops.h):
 * ops_load_commands, then ops_expand_argv of every loaded command
 * with a request body. The input is the commands file, optionally followed by
 * a line "#body" and the request body (JSON). Properties:
 * - loading and expanding never crash, leak or read out of bounds;
 * - a refused commands file is json.* or config.invalid with a message, and
 *   leaves the registry as it was (no op half-added);
 * - every loaded op has a valid id outside agents.*, 1..OP_ARGV_MAX argv
 *   words under OP_ARG_MAX bytes, argv[0] not a placeholder, a timeout in
 *   1..86400, at most OP_INSTALL_MAX known tools;
 * - an expansion either fails with request.invalid / request.too_large or
 *   gives a NULL-terminated argv of at most OP_ARGV_MAX words, each inside
 *   the caller's buffer;
 * - an accepted commands file has no key a strcmp would misread (fuzz_keys.h).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "fuzz_keys.h"
#include "base/json.h"
#include "server/ops.h"

static int
known_tool(const char *name, void *ctx)
{
	(void)ctx;
	return strcmp(name, "node-runtime") == 0 || strcmp(name, "codex") == 0 ||
	       strcmp(name, "ripgrep") == 0;
}

static void
check_op(const struct op *op)
{
	int i;

	FUZZ_CHECK(policy_op_id_valid(op->id));
	FUZZ_CHECK(strncmp(op->id, "agents.", 7) != 0);
	FUZZ_CHECK(op->kind == OP_COMMAND);
	FUZZ_CHECK(op->argc >= 1 && op->argc <= OP_ARGV_MAX);
	for (i = 0; i < op->argc; i++)
		FUZZ_CHECK(op->argv[i] != NULL && strlen(op->argv[i]) < OP_ARG_MAX);
	FUZZ_CHECK(op->argv[0][0] != '\0' && strchr(op->argv[0], '{') == NULL);
	FUZZ_CHECK(op->timeout >= 1 && op->timeout <= 86400);
	FUZZ_CHECK(op->ninstall >= 0 && op->ninstall <= OP_INSTALL_MAX);
	for (i = 0; i < op->ninstall; i++)
		FUZZ_CHECK(known_tool(op->install[i], NULL));
	FUZZ_CHECK(op->nparams >= 0 && op->nparams <= OP_PARAMS_MAX);
	FUZZ_CHECK(op->nenv >= 0 && op->nenv <= OP_ENV_MAX);
	for (i = 0; i < op->nenv; i++)
		FUZZ_CHECK(strcmp(op->env[i], "ABX_SERVER_TOKEN") != 0);
}

static void
check_expand(const struct op *op, const struct json_val *body)
{
	static char buf[OP_EXPAND_MAX];
	char *argv[OP_ARGV_MAX + 1];
	struct err e;
	int n, i;

	err_clear(&e);
	n = ops_expand_argv(op, body, argv, buf, sizeof(buf), &e);
	if (n < 0) {
		FUZZ_CHECK(e.code != NULL);
		FUZZ_CHECK(strcmp(e.code, "request.invalid") == 0 ||
		           strcmp(e.code, "request.too_large") == 0);
		FUZZ_CHECK(e.msg[0] != '\0');
		return;
	}
	FUZZ_CHECK(n >= 1 && n <= OP_ARGV_MAX);
	FUZZ_CHECK(argv[n] == NULL);
	for (i = 0; i < n; i++) {
		FUZZ_CHECK(argv[i] >= buf && argv[i] < buf + sizeof(buf));
		FUZZ_CHECK(argv[i] + strlen(argv[i]) < buf + sizeof(buf));
	}
	FUZZ_CHECK(strcmp(argv[0], op->argv[0]) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char mark[] = "\n#body\n";
	const char *text = (const char *)data, *body = NULL;
	size_t flen = size, blen = 0;
	struct json_doc doc = {0};
	struct ops o;
	struct err e;
	int i, rc;

	for (size_t k = 0; k + sizeof(mark) - 1 <= size; k++) {
		if (memcmp(text + k, mark, sizeof(mark) - 1) == 0) {
			flen = k;
			body = text + k + sizeof(mark) - 1;
			blen = size - k - (sizeof(mark) - 1);
			break;
		}
	}
	err_clear(&e);
	FUZZ_CHECK(ops_init(&o, &e) == 0);
	rc = ops_load_commands(&o, fuzz_file(data, flen), known_tool, NULL, &e);
	if (rc != 0) {
		FUZZ_CHECK(e.code != NULL);
		FUZZ_CHECK(strncmp(e.code, "json.", 5) == 0 || strcmp(e.code, "config.invalid") == 0);
		FUZZ_CHECK(e.msg[0] != '\0');
		ops_free(&o);
		return 0;
	}
	FUZZ_CHECK(o.n >= 0 && o.n <= OPS_MAX);
	fuzz_check_keys(data, flen);
	for (i = 0; i < o.n; i++) {
		check_op(&o.v[i]);
		FUZZ_CHECK(ops_find(&o, o.v[i].id) == &o.v[i]);
	}
	if (body != NULL && json_parse(&doc, body, blen, NULL, &e) != 0)
		body = NULL;
	for (i = 0; i < o.n; i++)
		check_expand(&o.v[i], body != NULL ? doc.root : NULL);
	json_free(&doc);
	ops_free(&o);
	return 0;
}
