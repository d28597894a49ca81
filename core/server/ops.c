/*
 * The op registry: agent ops derived from the enabled agents, command ops
 * from the commands file, and the one place argv templates are expanded.
 */
#include "server/ops.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json.h"

static const struct {
	const char *action;
	int installs;
	int reading;
} agent_actions[] = {
    {"run", 1, 0},
    {"sessions.create", 1, 0},
    {"sessions.get", 0, 1},
    {"sessions.list", 0, 1},
    {"sessions.events", 0, 1},
    {"status", 0, 1},
    {"install", 1, 0},
    {"sessions.send_event", 0, 0},
    {"sessions.items", 0, 1},
    {"sessions.update", 0, 0},
    {"sessions.delete", 0, 0},
};
#define NACTIONS ((int)(sizeof(agent_actions) / sizeof(agent_actions[0])))

int
ops_init(struct ops *o, struct err *e)
{
	memset(o, 0, sizeof(*o));
	o->all = (struct vec)VEC_INIT(sizeof(struct op), OPS_MAX);
	if (vec_reserve(&o->all, 16) != 0)
		return err_set(e, "internal", "out of memory");
	return 0;
}

static void
op_release(struct op *op)
{
	int i;

	for (i = 0; i < op->argc; i++)
		free(op->argv[i]);
	op->argc = 0;
}

void
ops_free(struct ops *o)
{
	int i;

	for (i = 0; i < ops_n(o); i++)
		op_release((struct op *)o->all.p + i);
	vec_free(&o->all);
	memset(o, 0, sizeof(*o));
}

const struct op *
ops_find(const struct ops *o, const char *id)
{
	int i;

	for (i = 0; i < ops_n(o); i++)
		if (strcmp(ops_at(o, i)->id, id) == 0)
			return ops_at(o, i);
	return NULL;
}

/* A zeroed new slot, or NULL with e set. */
static struct op *
new_op(struct ops *o, const char *id, struct err *e)
{
	struct op *op;

	if (ops_find(o, id) != NULL) {
		err_set(e, "config.invalid", "op %s: defined twice", id);
		return NULL;
	}
	if (vec_full(&o->all)) {
		err_set(e, "config.invalid", "more than %d ops", OPS_MAX);
		return NULL;
	}
	/* op stays past all.n until its caller counts it (o->all.n++) */
	if (vec_reserve(&o->all, 1) != 0) {
		err_set(e, "internal", "out of memory");
		return NULL;
	}
	op = (struct op *)o->all.p + o->all.n;
	memset(op, 0, sizeof(*op));
	snprintf(op->id, sizeof(op->id), "%s", id);
	return op;
}

int
ops_program_usable(const char *op_id, const char *path, struct err *e)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return err_sys(e, "command.unavailable", errno, "%s: program %s: %s", op_id, path,
		               strerror(errno));
	if (!S_ISREG(st.st_mode))
		return err_set(e, "command.unavailable", "%s: program %s is not a regular file", op_id, path);
	if (access(path, X_OK) != 0)
		return err_sys(e, "command.unavailable", errno, "%s: program %s is not executable: %s", op_id,
		               path, strerror(errno));
	return 0;
}

int
ops_add_agent(struct ops *o, const char *agent, ops_agent_lookup lookup, void *ctx, struct err *e)
{
	char id[OP_ID_MAX], hint[512] = "";
	int i;

	if (lookup != NULL) {
		switch (lookup(agent, ctx, hint, sizeof(hint))) {
		case OPS_AGENT_UNKNOWN:
			return err_set(e, "config.invalid", "agents: %s: no manifest of that name%s%s", agent,
			               hint[0] ? " " : "", hint);
		case OPS_AGENT_NOT_AGENT:
			return err_set(e, "config.invalid",
			               "agents: %s: its manifest has no run block, so it is not an agent",
			               agent);
		default:
			break;
		}
	}
	for (i = 0; i < NACTIONS; i++) {
		struct op *op;
		if (snprintf(id, sizeof(id), "agents.%s.%s", agent, agent_actions[i].action) >=
		        (int)sizeof(id) ||
		    !policy_op_id_valid(id))
			return err_set(e, "config.invalid", "agents: %.60s: not usable in an op id", agent);
		if ((op = new_op(o, id, e)) == NULL)
			return -1;
		op->kind = OP_AGENT;
		snprintf(op->agent, sizeof(op->agent), "%s", agent);
		op->action = agent_actions[i].action;
		op->reading = agent_actions[i].reading;
		if (agent_actions[i].installs) {
			op->ninstall = 1;
			snprintf(op->install[0], sizeof(op->install[0]), "%s", agent);
		}
		o->all.n++;
	}
	return 0;
}

/* --- the commands file --- */

struct cctx {
	const char *file;
	struct err *e;
	ops_tool_lookup tool;
	void *ctx;
};

static int cerr(struct cctx *c, const struct json_val *v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
cerr(struct cctx *c, const struct json_val *v, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	json_verr_at(c->e, "config.invalid", c->file, v, fmt, ap);
	va_end(ap);
	return -1;
}

static int
plain_string(const struct json_val *v)
{
	return v->type == JSON_STRING && strlen(v->u.str.s) == v->u.str.len;
}

static int
valid_param_name(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n >= OP_PARAM_NAME_MAX || !(islower((unsigned char)s[0]) || s[0] == '_'))
		return 0;
	for (i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '_')
			return 0;
	return 1;
}

static int
valid_env_name(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n >= OP_ENV_NAME_MAX || isdigit((unsigned char)s[0]))
		return 0;
	for (i = 0; i < n; i++)
		if (!isupper((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '_')
			return 0;
	return 1;
}

static const struct op_param *
find_param(const struct op *op, const char *name, size_t len)
{
	int i;

	for (i = 0; i < op->nparams; i++)
		if (strlen(op->params[i].name) == len && memcmp(op->params[i].name, name, len) == 0)
			return &op->params[i];
	return NULL;
}

/*
 * Walk template word t: literal runs and placeholders. For each placeholder
 * calls fn(name, len, arg). {{ and }} are literal braces. Returns 0, or -1
 * with a reason in *why for an unbalanced brace or an empty name.
 */
typedef int (*tpl_fn)(const char *name, size_t len, void *arg);

static int
tpl_walk(const char *t, tpl_fn fn, void *arg, const char **why)
{
	const char *p = t, *q;

	while (*p != '\0') {
		if (p[0] == '{' && p[1] == '{') {
			p += 2;
		} else if (p[0] == '}' && p[1] == '}') {
			p += 2;
		} else if (*p == '}') {
			*why = "a lone } (write }} for a literal brace)";
			return -1;
		} else if (*p == '{') {
			q = strchr(p + 1, '}');
			if (q == NULL) {
				*why = "an unterminated { (write {{ for a literal brace)";
				return -1;
			}
			if (q == p + 1) {
				*why = "an empty placeholder {}";
				return -1;
			}
			if (fn != NULL && fn(p + 1, (size_t)(q - p - 1), arg) != 0)
				return -1;
			p = q + 1;
		} else {
			p++;
		}
	}
	return 0;
}

struct use_ctx {
	struct op *op;
	int used[OP_PARAMS_MAX];
	char bad[OP_PARAM_NAME_MAX + 8];
};

static int
mark_use(const char *name, size_t len, void *arg)
{
	struct use_ctx *u = arg;
	const struct op_param *p = find_param(u->op, name, len);

	if (p == NULL) {
		snprintf(u->bad, sizeof(u->bad), "%.*s",
		         (int)(len > OP_PARAM_NAME_MAX ? OP_PARAM_NAME_MAX : len), name);
		return -1;
	}
	u->used[p - u->op->params] = 1;
	return 0;
}

static int
count_use(const char *name, size_t len, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

static int
load_params(struct cctx *c, struct op *op, const char *path, const struct json_val *v)
{
	static const char *const known[] = {"type", "required", "description", "default"};
	static const char *const types[] = {"string", "integer", "number", "boolean"};
	size_t i, j;
	int t;

	if (v->type != JSON_OBJECT)
		return cerr(c, v, "%s.params: expected an object of parameter declarations", path);
	if (v->u.obj.n > OP_PARAMS_MAX)
		return cerr(c, v, "%s.params: more than %d parameters", path, OP_PARAMS_MAX);
	for (i = 0; i < v->u.obj.n; i++) {
		const struct json_member *m = &v->u.obj.m[i];
		struct op_param *p = &op->params[op->nparams];
		const struct json_val *def = NULL;
		if (strlen(m->key) != m->keylen || !valid_param_name(m->key))
			return cerr(c, &m->val,
			            "%s.params.%.40s: a parameter name is [a-z_][a-z0-9_]*, at most %d bytes",
			            path, m->key, OP_PARAM_NAME_MAX - 1);
		if (m->val.type != JSON_OBJECT)
			return cerr(c, &m->val, "%s.params.%s: expected an object {type, required}", path,
			            m->key);
		snprintf(p->name, sizeof(p->name), "%s", m->key);
		p->type = PARAM_STRING;
		for (j = 0; j < m->val.u.obj.n; j++) {
			const struct json_member *f = &m->val.u.obj.m[j];
			if (json_key_is(f, "type")) {
				if (!plain_string(&f->val))
					return cerr(c, &f->val, "%s.params.%s.type: expected a string", path,
					            m->key);
				for (t = 0; t < 4 && strcmp(types[t], f->val.u.str.s) != 0; t++)
					;
				if (t == 4)
					return cerr(c, &f->val,
					            "%s.params.%s.type: \"%.20s\" is not string, integer, "
					            "number or boolean",
					            path, m->key, f->val.u.str.s);
				p->type = (enum op_param_type)t;
			} else if (json_key_is(f, "required")) {
				if (f->val.type != JSON_TRUE && f->val.type != JSON_FALSE)
					return cerr(c, &f->val,
					            "%s.params.%s.required: expected true or false", path,
					            m->key);
				p->required = f->val.type == JSON_TRUE;
			} else if (json_key_is(f, "description")) {
				if (!plain_string(&f->val))
					return cerr(c, &f->val, "%s.params.%s.description: expected a string",
					            path, m->key);
			} else if (json_key_is(f, "default")) {
				def = &f->val;
			} else {
				const char *s = config_did_you_mean(f->key, known, 4);
				if (s != NULL)
					return cerr(
					    c, &f->val,
					    "%s.params.%s.%.40s: unknown key (did you mean %s.params.%s.%s?)",
					    path, m->key, f->key, path, m->key, s);
				return cerr(c, &f->val, "%s.params.%s.%.40s: unknown key", path, m->key,
				            f->key);
			}
		}
		if (def != NULL) {
			int okt =
			    (p->type == PARAM_STRING && plain_string(def)) ||
			    (p->type == PARAM_INTEGER && def->type == JSON_NUMBER && def->u.num.is_int) ||
			    (p->type == PARAM_NUMBER && def->type == JSON_NUMBER) ||
			    (p->type == PARAM_BOOLEAN && (def->type == JSON_TRUE || def->type == JSON_FALSE));
			if (!okt)
				return cerr(c, def, "%s.params.%s.default: not a %s", path, m->key,
				            types[p->type]);
			if (p->required)
				return cerr(c, def,
				            "%s.params.%s: a required parameter cannot have a default", path,
				            m->key);
			if (def->type == JSON_STRING) {
				if (def->u.str.len >= sizeof(p->def))
					return cerr(c, def, "%s.params.%s.default: longer than %zu bytes",
					            path, m->key, sizeof(p->def) - 1);
				snprintf(p->def, sizeof(p->def), "%s", def->u.str.s);
			} else if (def->type == JSON_NUMBER) {
				snprintf(p->def, sizeof(p->def), "%s", def->u.num.text);
			} else {
				snprintf(p->def, sizeof(p->def), "%s",
				         def->type == JSON_TRUE ? "true" : "false");
			}
			p->has_default = 1;
		}
		op->nparams++;
	}
	return 0;
}

/* "install": the tools the command needs, each a known manifest, once. */
static int
load_install(struct cctx *c, struct op *op, const char *path, const struct json_val *f)
{
	size_t j;
	int k;

	if (f->type != JSON_ARRAY)
		return cerr(c, f, "%s.install: expected an array of tool names", path);
	if (f->u.arr.n > OP_INSTALL_MAX)
		return cerr(c, f, "%s.install: more than %d tools", path, OP_INSTALL_MAX);
	for (j = 0; j < f->u.arr.n; j++) {
		const struct json_val *t = &f->u.arr.v[j];
		if (!plain_string(t) || !cfg_valid_name(t->u.str.s))
			return cerr(c, t, "%s.install[%zu]: expected a tool name ([a-z0-9._-])", path, j);
		if (c->tool != NULL && !c->tool(t->u.str.s, c->ctx))
			return cerr(c, t, "%s.install[%zu]: no manifest named %s", path, j, t->u.str.s);
		for (k = 0; k < op->ninstall; k++)
			if (strcmp(op->install[k], t->u.str.s) == 0)
				return cerr(c, t, "%s.install[%zu]: %s listed twice", path, j, t->u.str.s);
		snprintf(op->install[op->ninstall++], CFG_NAME_MAX, "%s", t->u.str.s);
	}
	return 0;
}

/* "env": the names of the caller's variables the command receives; never
 * the server's own token. */
static int
load_env(struct cctx *c, struct op *op, const char *path, const struct json_val *f)
{
	size_t j;

	if (f->type != JSON_ARRAY)
		return cerr(c, f, "%s.env: expected an array of variable names", path);
	if (f->u.arr.n > OP_ENV_MAX)
		return cerr(c, f, "%s.env: more than %d variables", path, OP_ENV_MAX);
	for (j = 0; j < f->u.arr.n; j++) {
		const struct json_val *t = &f->u.arr.v[j];
		if (!plain_string(t) || !valid_env_name(t->u.str.s))
			return cerr(c, t, "%s.env[%zu]: expected a variable name ([A-Z_][A-Z0-9_]*)", path,
			            j);
		if (strcmp(t->u.str.s, "ABX_SERVER_TOKEN") == 0)
			return cerr(c, t,
			            "%s.env[%zu]: ABX_SERVER_TOKEN is a secret of the server "
			            "and is never passed",
			            path, j);
		snprintf(op->env[op->nenv++], OP_ENV_NAME_MAX, "%s", t->u.str.s);
	}
	return 0;
}

/* One member of a command object other than id, argv and params (those two
 * are kept in *argv and *params for after the loop). */
static int
load_command_field(struct cctx *c, struct op *op, const char *path, const struct json_member *m,
                   const struct json_val **argv, const struct json_val **params)
{
	static const char *const known[] = {"id",  "argv",        "install", "timeout",    "cwd",
	                                    "env", "description", "params",  "concurrency"};
	const struct json_val *f = &m->val;
	const char *s;

	if (json_key_is(m, "id"))
		return 0;
	if (json_key_is(m, "argv")) {
		*argv = f;
	} else if (json_key_is(m, "params")) {
		*params = f;
	} else if (json_key_is(m, "install")) {
		return load_install(c, op, path, f);
	} else if (json_key_is(m, "env")) {
		return load_env(c, op, path, f);
	} else if (json_key_is(m, "timeout")) {
		if (f->type != JSON_NUMBER || !f->u.num.is_int || f->u.num.i < 1 || f->u.num.i > 86400)
			return cerr(c, f, "%s.timeout: expected seconds from 1 to 86400", path);
		op->timeout = (int)f->u.num.i;
	} else if (json_key_is(m, "concurrency")) {
		if (f->type != JSON_NUMBER || !f->u.num.is_int || f->u.num.i < 1 || f->u.num.i > 4096)
			return cerr(c, f, "%s.concurrency: expected an integer from 1 to 4096", path);
		op->concurrency = (int)f->u.num.i;
	} else if (json_key_is(m, "cwd")) {
		if (!plain_string(f) || f->u.str.s[0] != '/' || f->u.str.len >= CFG_PATH_MAX)
			return cerr(c, f, "%s.cwd: expected an absolute path", path);
		snprintf(op->cwd, sizeof(op->cwd), "%s", f->u.str.s);
	} else if (json_key_is(m, "description")) {
		if (!plain_string(f))
			return cerr(c, f, "%s.description: expected a string", path);
		snprintf(op->description, sizeof(op->description), "%s", f->u.str.s);
	} else if ((s = config_did_you_mean(m->key, known, 9)) != NULL) {
		return cerr(c, f, "%s.%.40s: unknown key (did you mean %s.%s?)", path, m->key, path, s);
	} else {
		return cerr(c, f, "%s.%.40s: unknown key", path, m->key);
	}
	return 0;
}

/* argv[0]: a fixed program (no placeholder, no brace, not empty), an
 * absolute path or a bare name, never a relative path. */
static int
check_program(struct cctx *c, const char *path, const struct json_val *w)
{
	const char *why = NULL;
	int n = 0;

	tpl_walk(w->u.str.s, count_use, &n, &why);
	if (n > 0 || w->u.str.s[0] == '\0' || strchr(w->u.str.s, '{') || strchr(w->u.str.s, '}'))
		return cerr(c, w, "%s.argv[0]: the program is fixed: no placeholder or brace, not empty",
		            path);
	if (strchr(w->u.str.s, '/') != NULL && w->u.str.s[0] != '/')
		return cerr(c, w, "%s.argv[0]: an absolute path or a bare name, not a relative path", path);
	return 0;
}

/* "argv": words that are strings, placeholders only of declared
 * parameters, and every declared parameter used. Copies the words into op
 * (released by the caller on error). */
static int
load_argv(struct cctx *c, struct op *op, const char *path, const struct json_val *v,
          const struct json_val *argv, const struct json_val *params)
{
	struct use_ctx u;
	const char *why = NULL;
	size_t j;

	if (argv == NULL)
		return cerr(c, v, "%s: missing \"argv\"", path);
	if (argv->type != JSON_ARRAY || argv->u.arr.n == 0)
		return cerr(c, argv, "%s.argv: expected a non-empty array of strings", path);
	if (argv->u.arr.n > OP_ARGV_MAX)
		return cerr(c, argv, "%s.argv: more than %d words", path, OP_ARGV_MAX);
	memset(&u, 0, sizeof(u));
	u.op = op;
	for (j = 0; j < argv->u.arr.n; j++) {
		const struct json_val *w = &argv->u.arr.v[j];
		if (!plain_string(w) || w->u.str.len >= OP_ARG_MAX)
			return cerr(c, argv, "%s.argv: every word is a string without NUL, under %d bytes",
			            path, OP_ARG_MAX);
		if (tpl_walk(w->u.str.s, mark_use, &u, &why) != 0) {
			if (why != NULL)
				return cerr(c, w, "%s.argv[%zu]: %s", path, j, why);
			return cerr(c, w, "%s.argv[%zu]: {%s} is not a declared parameter", path, j, u.bad);
		}
		if (j == 0 && check_program(c, path, w) != 0)
			return -1;
		if ((op->argv[op->argc] = strdup(w->u.str.s)) == NULL)
			return err_set(c->e, "internal", "out of memory");
		op->argc++;
	}
	for (j = 0; j < (size_t)op->nparams; j++)
		if (!u.used[j])
			return cerr(c, params, "%s.params.%s: declared but not used in argv", path,
			            op->params[j].name);
	return 0;
}

/* The command's id at v: dot-separated segments, not under "agents", not
 * defined before. Into path; returns it, or NULL with c->e set. */
static const struct json_val *
command_id(struct cctx *c, struct ops *o, size_t idx, const struct json_val *v, char *path, size_t cap)
{
	const struct json_val *id;

	snprintf(path, cap, "[%zu]", idx);
	if (v->type != JSON_OBJECT)
		return cerr(c, v, "%s: expected a command object", path), NULL;
	if ((id = json_get(v, "id")) == NULL)
		return cerr(c, v, "%s: missing \"id\"", path), NULL;
	if (!plain_string(id) || !policy_op_id_valid(id->u.str.s))
		return cerr(c, id,
		            "%s.id: an op id is dot-separated segments of [A-Za-z0-9_-], at most %d bytes",
		            path, OP_ID_MAX - 1),
		       NULL;
	if (strcmp(id->u.str.s, "agents") == 0 || strncmp(id->u.str.s, "agents.", 7) == 0)
		return cerr(c, id, "%s.id: \"%s\": the segment \"agents\" is reserved for agent ops", path,
		            id->u.str.s),
		       NULL;
	snprintf(path, cap, "%s", id->u.str.s);
	if (ops_find(o, id->u.str.s) != NULL)
		return cerr(c, id, "%s: a command with this id is defined twice", path), NULL;
	return id;
}

static int
load_command(struct cctx *c, struct ops *o, size_t idx, const struct json_val *v)
{
	const struct json_val *id, *argv = NULL, *params = NULL;
	char path[OP_ID_MAX + 32];
	struct op *op;
	size_t i;

	if ((id = command_id(c, o, idx, v, path, sizeof(path))) == NULL)
		return -1;
	if ((op = new_op(o, id->u.str.s, c->e)) == NULL)
		return cerr(c, id, "%s", c->e->msg);
	op->kind = OP_COMMAND;
	op->action = "command";
	op->timeout = 60;
	/* op stays outside o->all.n until it validates, so an error leaks nothing
	 * the caller can see; its argv strings are released here on error. */
	for (i = 0; i < v->u.obj.n; i++)
		if (load_command_field(c, op, path, &v->u.obj.m[i], &argv, &params) != 0)
			return -1;
	if (params != NULL && load_params(c, op, path, params) != 0)
		return -1;
	if (load_argv(c, op, path, v, argv, params) != 0) {
		op_release(op);
		return -1;
	}
	o->all.n++;
	return 0;
}

int
ops_load_commands(struct ops *o, const char *path, ops_tool_lookup tool, void *ctx, struct err *e)
{
	struct json_limits lim = json_default_limits;
	struct json_doc doc;
	struct cctx c = {path, e, tool, ctx};
	size_t i;
	int rc = 0;

	lim.max_bytes = CFG_FILE_MAX;
	lim.max_depth = 8;
	lim.reject_dup_keys = 1;
	if (json_parse_file(&doc, path, &lim, e) != 0)
		return -1;
	if (doc.root->type != JSON_ARRAY) {
		rc = cerr(&c, doc.root, "commands: expected an array of command objects");
	} else {
		for (i = 0; i < doc.root->u.arr.n && rc == 0; i++)
			rc = load_command(&c, o, i, &doc.root->u.arr.v[i]);
	}
	json_free(&doc);
	if (rc == 0)
		snprintf(o->commands_file, sizeof(o->commands_file), "%s", path);
	return rc;
}

int
ops_build(struct ops *o, const struct config *c, ops_agent_lookup agent, ops_tool_lookup tool, void *ctx,
          struct err *e)
{
	int i;

	for (i = 0; i < c->agents.n; i++)
		if (ops_add_agent(o, c->agents.v[i], agent, ctx, e) != 0)
			return -1;
	if (c->commands[0] != '\0' && ops_load_commands(o, c->commands, tool, ctx, e) != 0)
		return -1;
	return 0;
}

/* --- expansion --- */

struct exp_ctx {
	const struct op *op;
	const struct json_val *body;
	char *out;
	size_t len, cap;
	int missing; /* a placeholder whose optional parameter is absent */
	struct err *e;
};

/* The text of parameter p for this request into buf, or NULL when absent. */
static const char *
param_text(const struct exp_ctx *x, const struct op_param *p, char *buf, size_t cap)
{
	const struct json_val *v = x->body ? json_get(x->body, p->name) : NULL;

	if (v == NULL || v->type == JSON_NULL)
		return p->has_default ? p->def : NULL;
	switch (v->type) {
	case JSON_STRING:
		return v->u.str.s;
	case JSON_NUMBER:
		return v->u.num.text;
	case JSON_TRUE:
		return "true";
	case JSON_FALSE:
		return "false";
	default:
		break;
	}
	(void)buf, (void)cap;
	return NULL;
}

static int
put(struct exp_ctx *x, const char *s, size_t n)
{
	if (x->len + n >= x->cap)
		return err_set(x->e, "request.too_large",
		               "the expanded command line is longer than %zu bytes", x->cap);
	memcpy(x->out + x->len, s, n);
	x->len += n;
	return 0;
}

static int
subst(const char *name, size_t len, void *arg)
{
	struct exp_ctx *x = arg;
	const struct op_param *p = find_param(x->op, name, len);
	const char *v;

	if (p == NULL)
		return err_set(x->e, "internal", "undeclared placeholder");
	v = param_text(x, p, NULL, 0);
	if (v == NULL) {
		x->missing = 1;
		return 0;
	}
	return put(x, v, strlen(v));
}

/* Expand one template word: literal text and placeholders in order. */
static int
expand_word(struct exp_ctx *x, const char *t)
{
	const char *p = t, *q;

	while (*p != '\0') {
		if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
			if (put(x, p, 1) != 0)
				return -1;
			p += 2;
		} else if (*p == '{') {
			q = strchr(p + 1, '}');
			if (q == NULL || subst(p + 1, (size_t)(q - p - 1), x) != 0)
				return -1;
			p = q + 1;
		} else {
			if (put(x, p, 1) != 0)
				return -1;
			p++;
		}
	}
	return 0;
}

int
ops_expand_argv(const struct op *op, const struct json_val *body, char **argv, char *buf, size_t cap,
                struct err *e)
{
	struct exp_ctx x = {op, body, buf, 0, cap, 0, e};
	size_t i;
	int j, n = 0;

	if (op->kind != OP_COMMAND)
		return err_set(e, "internal", "%s is not a command op", op->id);
	if (body != NULL && body->type == JSON_NULL)
		body = x.body = NULL;
	if (body != NULL && body->type != JSON_OBJECT)
		return err_set(e, "request.invalid", "%s: the body must be a JSON object of parameters",
		               op->id);
	for (i = 0; body != NULL && i < body->u.obj.n; i++) {
		const struct json_member *m = &body->u.obj.m[i];
		const struct op_param *p = find_param(op, m->key, m->keylen);
		const struct json_val *v = &m->val;
		int okt;
		if (p == NULL)
			return err_set(e, "request.invalid", "%s: unknown parameter \"%.40s\"", op->id,
			               m->key);
		if (v->type == JSON_NULL && !p->required)
			continue;
		okt = (p->type == PARAM_STRING && v->type == JSON_STRING) ||
		      (p->type == PARAM_INTEGER && v->type == JSON_NUMBER && v->u.num.is_int) ||
		      (p->type == PARAM_NUMBER && v->type == JSON_NUMBER) ||
		      (p->type == PARAM_BOOLEAN && (v->type == JSON_TRUE || v->type == JSON_FALSE));
		if (!okt)
			return err_set(e, "request.invalid", "%s: parameter %s must be %s", op->id, p->name,
			               p->type == PARAM_STRING    ? "a string"
			               : p->type == PARAM_INTEGER ? "an integer"
			               : p->type == PARAM_NUMBER  ? "a number"
			                                          : "true or false");
		/* An argument is one C string: a NUL inside would silently cut it. */
		if (v->type == JSON_STRING && strlen(v->u.str.s) != v->u.str.len)
			return err_set(e, "request.invalid", "%s: parameter %s contains U+0000", op->id,
			               p->name);
		if (v->type == JSON_STRING && v->u.str.len >= OP_ARG_MAX)
			return err_set(e, "request.too_large", "%s: parameter %s is longer than %d bytes",
			               op->id, p->name, OP_ARG_MAX - 1);
	}
	for (j = 0; j < op->nparams; j++) {
		const struct json_val *v = body ? json_get(body, op->params[j].name) : NULL;
		if (op->params[j].required && (v == NULL || v->type == JSON_NULL))
			return err_set(e, "request.invalid", "%s: missing required parameter %s", op->id,
			               op->params[j].name);
	}
	for (j = 0; j < op->argc; j++) {
		size_t start = x.len;
		x.missing = 0;
		if (expand_word(&x, op->argv[j]) != 0)
			return -1;
		if (x.missing) {
			x.len = start;
			continue;
		}
		if (put(&x, "", 1) != 0)
			return -1;
		argv[n++] = buf + start;
	}
	argv[n] = NULL;
	return n;
}
