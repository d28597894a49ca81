/*
 * libFuzzer target for the schema layers above the JSON parser: the
 * configuration file, the policy file and the commands file (with an argv
 * expansion of whatever loads). The first byte picks the loader. Properties:
 * - nothing crashes, leaks or reads out of bounds (ASan/UBSan);
 * - every refusal carries config.invalid or a json.* code, never none;
 * - a configuration that loads has every value within its schema
 *   (the mode is one of four, the port within 0..65535);
 * - an expansion never yields more words than the template has;
 * - what loads has no key a strcmp would misread (fuzz_keys.h).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "fuzz_keys.h"

#include "config/config.h"
#include "base/json.h"
#include "server/ops.h"
#include "server/policy.h"

static char path[64];

static void
refusal_ok(const struct err *e)
{
	FUZZ_CHECK(e->code != NULL);
	FUZZ_CHECK(strcmp(e->code, "config.invalid") == 0 || strncmp(e->code, "json.", 5) == 0 ||
	           strcmp(e->code, "internal") == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct config c;
	static struct policy p;
	struct ops o;
	struct err e;
	FILE *f;

	if (size < 1 || size > (64u << 10))
		return 0;
	if (path[0] == '\0')
		snprintf(path, sizeof(path), "/tmp/fuzz_config.%d.json", (int)getpid());
	f = fopen(path, "w");
	if (f == NULL)
		return 0;
	fwrite(data + 1, 1, size - 1, f);
	fclose(f);
	switch (data[0] % 3) {
	case 0:
		config_defaults(&c);
		if (config_apply_file(&c, path, &e) != 0) {
			refusal_ok(&e);
		} else {
			FUZZ_CHECK((unsigned)c.install.mode <= CFG_MODE_OFF);
			FUZZ_CHECK(c.server.port >= 0 && c.server.port <= 65535);
			FUZZ_CHECK(c.agents.n >= 0 && c.agents.n <= CFG_LIST_MAX);
			fuzz_check_keys(data + 1, size - 1);
		}
		break;
	case 1:
		policy_init(&p);
		if (policy_load_file(&p, path, &e) != 0) {
			refusal_ok(&e);
		} else {
			struct pol_decision d;
			int i;
			fuzz_check_keys(data + 1, size - 1);
			for (i = 0; i < p.n; i++)
				policy_decide(&p, p.p[i].name, "agents.codex.run", NULL, 0, &d);
		}
		break;
	default:
		if (ops_init(&o, &e) != 0)
			return 0;
		if (ops_load_commands(&o, path, NULL, NULL, &e) != 0) {
			refusal_ok(&e);
		} else {
			static const char body_text[] = "{\"a\":\"x y\",\"n\":3,\"b\":true}";
			char *argv[OP_ARGV_MAX + 1];
			static char buf[OP_EXPAND_MAX];
			struct json_doc doc;
			int i, n;
			fuzz_check_keys(data + 1, size - 1);
			if (json_parse(&doc, body_text, sizeof(body_text) - 1, NULL, &e) == 0) {
				for (i = 0; i < o.n; i++) {
					n = ops_expand_argv(&o.v[i], doc.root, argv, buf, sizeof(buf), &e);
					FUZZ_CHECK(n <= o.v[i].argc);
					if (n >= 0)
						FUZZ_CHECK(argv[n] == NULL);
				}
				json_free(&doc);
			}
		}
		ops_free(&o);
		break;
	}
	return 0;
}
