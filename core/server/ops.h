#ifndef ABX_OPS_H
#define ABX_OPS_H
/*
 * The op registry: every operation serve can mount, with what it installs.
 *
 * Command ops come from the commands file (config `commands`, --commands):
 * a JSON array of
 *   {"id": "tests.run",                      op id; the segment "agents" is reserved
 *    "argv": ["/usr/bin/make", "-C", "{dir}", "test"],
 *    "install": ["node-runtime"],            tools ensure()d before the run
 *    "timeout": 60,                          seconds, 1..86400 (default 60)
 *    "cwd": "/workspace",                    absolute (default: serve's cwd)
 *    "env": ["HOME", "LANG"],                names passed from serve's environment
 *    "description": "…",
 *    "concurrency": 4,                       runs at once (default server.op_concurrency)
 *    "params": {"dir": {"type": "string", "required": true, "description": "…"}}}
 * validated strictly: unknown keys (with a did-you-mean), duplicate ids, a
 * placeholder that is not declared or a declared parameter that is never
 * used, a placeholder in argv[0], env names that are not [A-Z_][A-Z0-9_]* or
 * that name a secret of ours (ABX_SERVER_TOKEN). In argv, `{name}` is a
 * placeholder and `{{` / `}}` are literal braces. argv[0] is an absolute
 * path or a bare name serve resolves (tools bin, then PATH); it is never
 * taken from the request.
 *
 * Agent ops come from the enabled agents (config `agents`), for each agent a:
 *   agents.<a>.run                 installs a
 *   agents.<a>.sessions.create     installs a
 *   agents.<a>.sessions.send_event a message or a cancellation
 *   agents.<a>.sessions.get        reads
 *   agents.<a>.sessions.list       reads
 *   agents.<a>.sessions.events     reads
 *   agents.<a>.sessions.items      reads
 *   agents.<a>.sessions.update     installs nothing
 *   agents.<a>.sessions.delete     installs nothing
 *   agents.<a>.status              reads (GET /v1/agents/runtimes/<a>)
 *   agents.<a>.install             installs a (the admin endpoint)
 * An agent must name a known manifest with a `run` block (the lookup
 * callback answers that; check-config and prepare pass the manifest loader).
 */
#include <stddef.h>

#include "config/config.h"
#include "base/buf.h"
#include "base/err.h"
#include "server/policy.h"

struct json_val;

/* Why these numbers: a sandbox exposes tens of commands, not thousands; an
 * argv of 64 words and 4 KiB per word covers any real command line while a
 * request can never make serve build an unbounded one. */
#define OPS_MAX 256
#define OP_ARGV_MAX 64
#define OP_ARG_MAX 4096
#define OP_INSTALL_MAX 8
#define OP_PARAMS_MAX 32
#define OP_PARAM_NAME_MAX 32
#define OP_ENV_MAX 32
#define OP_ENV_NAME_MAX 64
#define OP_DESC_MAX 256
#define OP_EXPAND_MAX (64u << 10) /* all expanded argv bytes of one run */

enum op_kind {
	OP_COMMAND,
	OP_AGENT,
};

enum op_param_type {
	PARAM_STRING,
	PARAM_INTEGER,
	PARAM_NUMBER,
	PARAM_BOOLEAN,
};

struct op_param {
	char name[OP_PARAM_NAME_MAX];
	enum op_param_type type;
	int required;
	int has_default;
	char def[256]; /* the default as argv text */
};

struct op {
	char id[OP_ID_MAX];
	enum op_kind kind;
	char agent[CFG_NAME_MAX]; /* OP_AGENT: the agent */
	const char *action;       /* OP_AGENT: "run", "sessions.create", …; OP_COMMAND: "command" */
	int reading;              /* reads state only; never installs */
	int ninstall;
	char install[OP_INSTALL_MAX][CFG_NAME_MAX];
	/* OP_COMMAND only: */
	int argc;
	char *argv[OP_ARGV_MAX]; /* templates, each owned, at most OP_ARG_MAX-1 bytes */
	int timeout;
	char cwd[CFG_PATH_MAX]; /* "" = serve's cwd */
	int nenv;
	char env[OP_ENV_MAX][OP_ENV_NAME_MAX];
	char description[OP_DESC_MAX];
	int concurrency; /* 0 = server.op_concurrency */
	int nparams;
	struct op_param params[OP_PARAMS_MAX];
};
struct ops {
	struct vec all; /* struct op, at most OPS_MAX of them; owned; ops_free */
	char commands_file[CFG_PATH_MAX];
};

/* How many ops o holds, and op i of them (0 <= i < ops_n). */
static inline int
ops_n(const struct ops *o)
{
	return (int)o->all.n;
}
static inline const struct op *
ops_at(const struct ops *o, int i)
{
	return (const struct op *)o->all.p + i;
}

/* What the agent lookup answers. */
enum ops_agent_state {
	OPS_AGENT_UNKNOWN,   /* no manifest of that name */
	OPS_AGENT_NOT_AGENT, /* a manifest without a run block */
	OPS_AGENT_OK,
};

/* On OPS_AGENT_UNKNOWN the lookup may write a hint (did-you-mean, the
 * agents there are) into hint[0..cap), else leaves it "". */
typedef enum ops_agent_state (*ops_agent_lookup)(const char *name, void *ctx, char *hint, size_t cap);
/* 1 when a manifest of that name exists, else 0. */
typedef int (*ops_tool_lookup)(const char *name, void *ctx);

/* Is path (absolute) a regular file we may execute? 0, or -1 with
 * command.unavailable naming op_id, path and why (missing, not a regular
 * file, not executable). check-config and serve ask the same question. */
int ops_program_usable(const char *op_id, const char *path, struct err *e);

/* Allocate an empty registry. 0 or -1 (internal: out of memory). */
int ops_init(struct ops *o, struct err *e);
void ops_free(struct ops *o);

/* The eight ops of one agent. lookup may be NULL (no check). */
int ops_add_agent(struct ops *o, const char *agent, ops_agent_lookup lookup, void *ctx, struct err *e);

/* Parse and validate a commands file, adding its ops. tool may be NULL (no
 * check that install names are known manifests). Errors: json.* for syntax,
 * config.invalid naming the JSON path (file:line:col appended). */
int ops_load_commands(struct ops *o, const char *path, ops_tool_lookup tool, void *ctx, struct err *e);

/* The registry of an effective configuration: the agents, then the commands
 * file when configured. */
int ops_build(struct ops *o, const struct config *c, ops_agent_lookup agent, ops_tool_lookup tool, void *ctx,
              struct err *e);

const struct op *ops_find(const struct ops *o, const char *id);

/*
 * Expand a command op's argv for one request. body is the request's JSON
 * object (NULL = no parameters). Each value is checked against its declared
 * type; a missing required parameter or an undeclared one is request.invalid.
 * An optional parameter that is absent takes its default; with no default
 * every argv word that mentions it is dropped. Values are substituted into
 * their words only, never split or interpreted: "; rm -rf /" stays one
 * argument. argv[] (OP_ARGV_MAX + 1 slots) receives pointers into buf (cap
 * bytes); it is NULL-terminated. Returns argc, or -1 with e set.
 */
int ops_expand_argv(const struct op *op, const struct json_val *body, char **argv, char *buf, size_t cap,
                    struct err *e);

#endif
