#ifndef ABX_POLICY_H
#define ABX_POLICY_H
/*
 * Policy: principals, each with sha256 digests of its
 * tokens and allow/deny lists of op-id patterns. A pattern is dot-separated
 * segments: a literal, `*` (exactly one segment) or, as the last segment
 * only, `**` (one or more remaining segments). Deny wins over allow; no
 * matching allow is a deny. Every decision names the rule that made it.
 *
 * Install admission: an op that installs tools (agents.<a>.run,
 * agents.<a>.sessions.create, a command with install: [...]) is denied when
 * agents.<t>.install is denied for the principal for any tool t it installs.
 * A deny of install is absolute ("never download for this principal"): it
 * holds for an otherwise-admin principal and even when the tool is already
 * installed. An allow of agents.<a>.install is needed only for the admin
 * endpoint itself. Whether the mode lets the op install at runtime is
 * reported in install_permitted, not decided here: a missing tool under mode
 * build is install.required (424), not policy.denied.
 *
 * Presets:
 *   readonly  allow agents.*.status, agents.*.sessions.{get,list,events};
 *             deny agents.*.install
 *   agents    allow agents.*.run, agents.*.sessions.**, agents.*.status
 *   admin     allow **
 *
 * Which principals exist: those of the policy file (config `policy`, else
 * /etc/agent-sandbox/server-policy.json when it exists), plus `default`
 * (the principal of ABX_SERVER_TOKEN and of the generated token) when the
 * file does not define it. `default` gets the configured preset; with no
 * policy file and no preset, `admin` (one token owns the sandbox); with a
 * policy file and no preset, no rules (it may call nothing). A preset and a
 * file that both define `default` is config.invalid.
 *
 * Loading reads the policy file only; token digests are configuration, the
 * tokens themselves are never read here.
 */
#include <stddef.h>

#include "config/config.h"
#include "base/err.h"

/* Why these numbers: a sandbox has a handful of callers (platform, CI, an
 * operator); 64 rules per principal is several screens of policy. */
#define POL_MAX_PRINCIPALS 32
#define POL_MAX_RULES 64
#define POL_MAX_TOKENS 8
#define POL_PATTERN_MAX 128
#define POL_NAME_MAX 64
#define POL_RULE_TEXT_MAX 512
#define OP_ID_MAX 128

enum pol_effect {
	POL_ALLOW,
	POL_DENY,
};

struct pol_rule {
	enum pol_effect effect;
	char pattern[POL_PATTERN_MAX];
	char origin[48]; /* "preset agents", "policy", "default preset admin" */
};

struct pol_principal {
	char name[POL_NAME_MAX];
	int ntokens;
	unsigned char token_sha256[POL_MAX_TOKENS][32];
	int nrules;
	struct pol_rule rules[POL_MAX_RULES];
};

struct policy {
	int n;
	struct pol_principal p[POL_MAX_PRINCIPALS];
	enum cfg_mode mode;               /* for install_permitted */
	char file[CFG_PATH_MAX];          /* the policy file read, "" = none */
	char summary[CFG_PATH_MAX + 160]; /* how the principals came to be, for check-config */
};

struct pol_decision {
	int allowed;
	int install_permitted;        /* allowed, installs something, and the mode installs at runtime */
	char rule[POL_RULE_TEXT_MAX]; /* "alice: deny agents.*.install (policy)" */
};

/* 0 when pattern is a valid op-id pattern, else -1 with config.invalid. */
int policy_pattern_check(const char *pattern, struct err *e);

/* 0 when id is a valid op id (segments of [A-Za-z0-9_-], at most
 * OP_ID_MAX-1 bytes), else -1. */
int policy_op_id_valid(const char *id);

/* Whether pattern matches op id. Patterns are assumed valid. */
int policy_match(const char *pattern, const char *op_id);

void policy_init(struct policy *p);

/* Add the rules of a preset ("readonly", "agents", "admin") to principal
 * name (created if missing). origin goes into each rule. */
int policy_add_preset(struct policy *p, const char *name, const char *preset, const char *origin,
                      struct err *e);

/* Parse a policy file and add its principals. Errors: json.* for syntax,
 * config.invalid naming the JSON path (unknown keys with a did-you-mean,
 * bad patterns, bad digests, a digest given to two principals). */
int policy_load_file(struct policy *p, const char *path, struct err *e);

/* The whole setup from an effective configuration, as described above. */
int policy_setup(struct policy *p, const struct config *c, struct err *e);

/* Add a token digest to principal name (created without rules if
 * missing); for serve's ABX_SERVER_TOKEN and generated token. A digest
 * already held by another principal is config.invalid. */
int policy_add_token_digest(struct policy *p, const char *name, const unsigned char digest[32],
                            struct err *e);

/* The principal holding digest, compared in constant time against every
 * configured digest (no early exit), or NULL. */
const struct pol_principal *policy_principal_for_digest(const struct policy *p,
                                                        const unsigned char digest[32]);

const struct pol_principal *policy_find(const struct policy *p, const char *name);

/* Decide whether principal may call op_id, which installs the tools
 * installs[0..ninstalls). Returns d->allowed. */
int policy_decide(const struct policy *p, const char *principal, const char *op_id,
                  const char *const *installs, int ninstalls, struct pol_decision *d);

#endif
