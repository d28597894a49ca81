/*
 * libFuzzer target for the policy loader (core/server/policy.h): the
 * input is a policy file, loaded on top of a preset principal. Properties:
 * - loading never crashes, leaks or reads out of bounds;
 * - a refusal is json.* or config.invalid with a message;
 * - what loads stays within the limits (principals, rules, tokens), every
 *   rule's pattern passes policy_pattern_check, every token digest leads back
 *   to its principal, and deciding on a few op ids gives a named rule. Deny
 *   wins: a principal whose rules deny "**" is denied everything;
 * - an accepted policy has no key a strcmp would misread (fuzz_keys.h).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "fuzz_keys.h"
#include "server/policy.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const ids[] = {"agents.codex.run", "agents.codex.install",
	                                  "agents.codex.sessions.get", "tests.run", "a"};
	static const char *const inst[] = {"codex"};
	static struct policy p;
	static struct pol_decision d;
	struct err e;
	int i, j, k, denyall;

	policy_init(&p);
	err_clear(&e);
	FUZZ_CHECK(policy_add_preset(&p, "default", "agents", "preset agents", &e) == 0);
	if (policy_load_file(&p, fuzz_file(data, size), &e) != 0) {
		FUZZ_CHECK(e.code != NULL);
		FUZZ_CHECK(strncmp(e.code, "json.", 5) == 0 || strcmp(e.code, "config.invalid") == 0);
		FUZZ_CHECK(e.msg[0] != '\0');
		return 0;
	}
	FUZZ_CHECK(p.n >= 1 && p.n <= POL_MAX_PRINCIPALS);
	fuzz_check_keys(data, size);
	for (i = 0; i < p.n; i++) {
		const struct pol_principal *pr = &p.p[i];

		FUZZ_CHECK(pr->name[0] != '\0' && memchr(pr->name, '\0', sizeof(pr->name)) != NULL);
		FUZZ_CHECK(policy_find(&p, pr->name) == pr);
		FUZZ_CHECK(pr->nrules >= 0 && pr->nrules <= POL_MAX_RULES);
		FUZZ_CHECK(pr->ntokens >= 0 && pr->ntokens <= POL_MAX_TOKENS);
		denyall = 0;
		for (j = 0; j < pr->nrules; j++) {
			FUZZ_CHECK(policy_pattern_check(pr->rules[j].pattern, &e) == 0);
			if (pr->rules[j].effect == POL_DENY && strcmp(pr->rules[j].pattern, "**") == 0)
				denyall = 1;
		}
		for (j = 0; j < pr->ntokens; j++)
			FUZZ_CHECK(policy_principal_for_digest(&p, pr->token_sha256[j]) == pr);
		for (k = 0; k < (int)(sizeof(ids) / sizeof(ids[0])); k++) {
			FUZZ_CHECK(policy_decide(&p, pr->name, ids[k], inst, 1, &d) == d.allowed);
			FUZZ_CHECK(memchr(d.rule, '\0', sizeof(d.rule)) != NULL);
			if (denyall)
				FUZZ_CHECK(!d.allowed);
			if (!d.allowed)
				FUZZ_CHECK(!d.install_permitted);
		}
	}
	return 0;
}
