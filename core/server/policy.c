/*
 * Policy: op-id pattern matching, presets, the policy file and decisions.
 */
#include "server/policy.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/digest.h"
#include "base/json.h"

static const char *const preset_readonly_allow[] = {
    "agents.*.status",          "agents.*.sessions.get",   "agents.*.sessions.list",
    "agents.*.sessions.events", "agents.*.sessions.items", NULL,
};
static const char *const preset_readonly_deny[] = {"agents.*.install", NULL};
static const char *const preset_agents_allow[] = {"agents.*.run", "agents.*.sessions.**", "agents.*.status",
                                                  NULL};
static const char *const preset_admin_allow[] = {"**", NULL};
static const char *const preset_none[] = {NULL};

static const struct {
	const char *name;
	const char *const *allow, *const *deny;
} presets[] = {
    {"readonly", preset_readonly_allow, preset_readonly_deny},
    {"agents", preset_agents_allow, preset_none},
    {"admin", preset_admin_allow, preset_none},
};

static int
seg_char(int ch)
{
	return isalnum(ch) || ch == '_' || ch == '-';
}

int
policy_op_id_valid(const char *id)
{
	size_t i, n = strlen(id);

	if (n == 0 || n >= OP_ID_MAX || id[0] == '.' || id[n - 1] == '.')
		return 0;
	for (i = 0; i < n; i++) {
		if (id[i] == '.') {
			if (id[i + 1] == '.')
				return 0;
		} else if (!seg_char((unsigned char)id[i])) {
			return 0;
		}
	}
	return 1;
}

int
policy_pattern_check(const char *pat, struct err *e)
{
	const char *s = pat, *dot;
	size_t n = strlen(pat), len, i;

	if (n == 0 || n >= POL_PATTERN_MAX)
		return err_set(e, "config.invalid", "pattern \"%.60s\": empty or longer than %d bytes", pat,
		               POL_PATTERN_MAX - 1);
	for (;;) {
		dot = strchr(s, '.');
		len = dot ? (size_t)(dot - s) : strlen(s);
		if (len == 0)
			return err_set(e, "config.invalid", "pattern \"%.60s\": empty segment", pat);
		if (len == 2 && s[0] == '*' && s[1] == '*') {
			if (dot != NULL)
				return err_set(e, "config.invalid",
				               "pattern \"%.60s\": ** must be the last segment", pat);
		} else if (!(len == 1 && s[0] == '*')) {
			for (i = 0; i < len; i++)
				if (!seg_char((unsigned char)s[i]))
					return err_set(
					    e, "config.invalid",
					    "pattern \"%.60s\": a segment is a name, * or a final **", pat);
		}
		if (dot == NULL)
			return 0;
		s = dot + 1;
	}
}

int
policy_match(const char *pat, const char *id)
{
	const char *pd, *id_dot;
	size_t pl, il;

	for (;;) {
		pd = strchr(pat, '.');
		pl = pd ? (size_t)(pd - pat) : strlen(pat);
		if (pl == 2 && pat[0] == '*' && pat[1] == '*')
			return *id != '\0'; /* one or more remaining segments */
		if (*id == '\0')
			return 0;
		id_dot = strchr(id, '.');
		il = id_dot ? (size_t)(id_dot - id) : strlen(id);
		if (!(pl == 1 && pat[0] == '*') && (pl != il || memcmp(pat, id, pl) != 0))
			return 0;
		if (pd == NULL)
			return id_dot == NULL;
		if (id_dot == NULL)
			return 0;
		pat = pd + 1;
		id = id_dot + 1;
	}
}

void
policy_init(struct policy *p)
{
	memset(p, 0, sizeof(*p));
}

const struct pol_principal *
policy_find(const struct policy *p, const char *name)
{
	int i;

	for (i = 0; i < p->n; i++)
		if (strcmp(p->p[i].name, name) == 0)
			return &p->p[i];
	return NULL;
}

static int
valid_principal(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n >= POL_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._-@", s[i]))
			return 0;
	return 1;
}

static struct pol_principal *
get_or_add(struct policy *p, const char *name, struct err *e)
{
	struct pol_principal *pp = (struct pol_principal *)policy_find(p, name);

	if (pp != NULL)
		return pp;
	if (!valid_principal(name)) {
		err_set(e, "config.invalid", "principal \"%.60s\": a name of [A-Za-z0-9._@-], 1 to %d bytes",
		        name, POL_NAME_MAX - 1);
		return NULL;
	}
	if (p->n >= POL_MAX_PRINCIPALS) {
		err_set(e, "config.invalid", "more than %d principals", POL_MAX_PRINCIPALS);
		return NULL;
	}
	pp = &p->p[p->n++];
	memset(pp, 0, sizeof(*pp));
	snprintf(pp->name, sizeof(pp->name), "%s", name);
	return pp;
}

static int
add_rule(struct pol_principal *pp, enum pol_effect eff, const char *pattern, const char *origin,
         struct err *e)
{
	struct pol_rule *r;

	if (policy_pattern_check(pattern, e) != 0)
		return -1;
	if (pp->nrules >= POL_MAX_RULES)
		return err_set(e, "config.invalid", "principal %s: more than %d rules", pp->name,
		               POL_MAX_RULES);
	r = &pp->rules[pp->nrules++];
	r->effect = eff;
	snprintf(r->pattern, sizeof(r->pattern), "%s", pattern);
	snprintf(r->origin, sizeof(r->origin), "%s", origin);
	return 0;
}

int
policy_add_preset(struct policy *p, const char *name, const char *preset, const char *origin, struct err *e)
{
	struct pol_principal *pp;
	size_t i;
	int j;

	for (i = 0; i < sizeof(presets) / sizeof(presets[0]); i++) {
		if (strcmp(presets[i].name, preset) != 0)
			continue;
		if ((pp = get_or_add(p, name, e)) == NULL)
			return -1;
		for (j = 0; presets[i].allow[j] != NULL; j++)
			if (add_rule(pp, POL_ALLOW, presets[i].allow[j], origin, e) != 0)
				return -1;
		for (j = 0; presets[i].deny[j] != NULL; j++)
			if (add_rule(pp, POL_DENY, presets[i].deny[j], origin, e) != 0)
				return -1;
		return 0;
	}
	return err_set(e, "config.invalid", "preset \"%.40s\": not one of readonly, agents, admin", preset);
}

static int
digest_owner(const struct policy *p, const unsigned char d[32])
{
	int i, j;

	for (i = 0; i < p->n; i++)
		for (j = 0; j < p->p[i].ntokens; j++)
			if (memcmp(p->p[i].token_sha256[j], d, 32) == 0)
				return i;
	return -1;
}

int
policy_add_token_digest(struct policy *p, const char *name, const unsigned char digest[32], struct err *e)
{
	struct pol_principal *pp;
	int owner = digest_owner(p, digest);

	if ((pp = get_or_add(p, name, e)) == NULL)
		return -1;
	if (owner >= 0 && &p->p[owner] != pp)
		return err_set(e, "config.invalid", "principal %s: a token digest already belongs to %s",
		               name, p->p[owner].name);
	if (owner >= 0)
		return 0;
	if (pp->ntokens >= POL_MAX_TOKENS)
		return err_set(e, "config.invalid", "principal %s: more than %d tokens", name,
		               POL_MAX_TOKENS);
	memcpy(pp->token_sha256[pp->ntokens++], digest, 32);
	return 0;
}

const struct pol_principal *
policy_principal_for_digest(const struct policy *p, const unsigned char digest[32])
{
	const struct pol_principal *found = NULL;
	int i, j;

	/* Every digest is compared in full, whatever matched before: the time
	 * taken says nothing about which byte differed or who matched. */
	for (i = 0; i < p->n; i++)
		for (j = 0; j < p->p[i].ntokens; j++) {
			if (ct_equal(p->p[i].token_sha256[j], digest, 32))
				found = &p->p[i];
		}
	return found;
}

/* --- the policy file --- */

static int perr(struct err *e, const char *file, const struct json_val *v, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
perr(struct err *e, const char *file, const struct json_val *v, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	json_verr_at(e, "config.invalid", file, v, fmt, ap);
	va_end(ap);
	return -1;
}

static int
unknown_key(struct err *e, const char *file, const struct json_val *v, const char *path, const char *key,
            const char *const *known, int n)
{
	const char *s = config_did_you_mean(key, known, n);

	if (s != NULL)
		return perr(e, file, v, "%s%s: unknown key (did you mean %s%s?)", path, key, path, s);
	return perr(e, file, v, "%s%s: unknown key", path, key);
}

static int
string_list(struct pol_principal *pp, enum pol_effect eff, const char *file, const char *path,
            const struct json_val *v, struct err *e)
{
	size_t i;

	if (v->type != JSON_ARRAY)
		return perr(e, file, v, "%s: expected an array of patterns", path);
	for (i = 0; i < v->u.arr.n; i++) {
		const struct json_val *it = &v->u.arr.v[i];
		if (it->type != JSON_STRING || strlen(it->u.str.s) != it->u.str.len)
			return perr(e, file, it, "%s[%zu]: expected a string", path, i);
		if (add_rule(pp, eff, it->u.str.s, "policy", e) != 0)
			return perr(e, file, it, "%s[%zu]: %s", path, i, e->msg);
	}
	return 0;
}

static int
token_digest(struct policy *p, struct pol_principal *pp, const char *file, const char *path,
             const struct json_val *it, struct err *e)
{
	unsigned char d[32];
	int owner;

	if (it->type != JSON_STRING || strlen(it->u.str.s) != 64 || hex_decode(it->u.str.s, d, 32) != 0)
		return perr(e, file, it, "%s: expected the sha256 of a token as 64 hex digits", path);
	owner = digest_owner(p, d);
	if (owner >= 0)
		return perr(e, file, it, "%s: this digest already belongs to principal %s", path,
		            p->p[owner].name);
	if (pp->ntokens >= POL_MAX_TOKENS)
		return perr(e, file, it, "%s: more than %d tokens", path, POL_MAX_TOKENS);
	memcpy(pp->token_sha256[pp->ntokens++], d, 32);
	return 0;
}

static int
load_principal(struct policy *p, const char *file, const struct json_member *m, struct err *e)
{
	static const char *const known[] = {"token_sha256", "preset", "allow", "deny", "description"};
	const struct json_val *v = &m->val;
	struct pol_principal *pp;
	char path[POL_NAME_MAX + 64], sub[POL_NAME_MAX + 96];
	size_t i, j;

	snprintf(path, sizeof(path), "principals.%s", m->key);
	if (strlen(m->key) != m->keylen || !valid_principal(m->key))
		return perr(e, file, v, "%.80s: a principal name is 1 to %d bytes of [A-Za-z0-9._@-]", path,
		            POL_NAME_MAX - 1);
	if (policy_find(p, m->key) != NULL)
		return perr(e, file, v, "%s: defined twice", path);
	if (v->type != JSON_OBJECT)
		return perr(e, file, v, "%s: expected an object", path);
	if ((pp = get_or_add(p, m->key, e)) == NULL)
		return perr(e, file, v, "%s", e->msg);
	for (i = 0; i < v->u.obj.n; i++) {
		const struct json_member *f = &v->u.obj.m[i];
		snprintf(sub, sizeof(sub), "%s.%.20s", path, f->key);
		if (json_key_is(f, "token_sha256")) {
			if (f->val.type == JSON_STRING) {
				if (token_digest(p, pp, file, sub, &f->val, e) != 0)
					return -1;
			} else if (f->val.type == JSON_ARRAY) {
				for (j = 0; j < f->val.u.arr.n; j++)
					if (token_digest(p, pp, file, sub, &f->val.u.arr.v[j], e) != 0)
						return -1;
			} else {
				return perr(e, file, &f->val, "%s: expected a digest or an array of digests",
				            sub);
			}
		} else if (json_key_is(f, "preset")) {
			char origin[48];
			if (f->val.type != JSON_STRING)
				return perr(e, file, &f->val, "%s: expected a preset name", sub);
			snprintf(origin, sizeof(origin), "preset %.40s", f->val.u.str.s);
			if (policy_add_preset(p, pp->name, f->val.u.str.s, origin, e) != 0)
				return perr(e, file, &f->val, "%s: %s", sub, e->msg);
		} else if (json_key_is(f, "allow")) {
			if (string_list(pp, POL_ALLOW, file, sub, &f->val, e) != 0)
				return -1;
		} else if (json_key_is(f, "deny")) {
			if (string_list(pp, POL_DENY, file, sub, &f->val, e) != 0)
				return -1;
		} else if (json_key_is(f, "description")) {
			if (f->val.type != JSON_STRING)
				return perr(e, file, &f->val, "%s: expected a string", sub);
		} else {
			char pre[POL_NAME_MAX + 80];
			snprintf(pre, sizeof(pre), "%s.", path);
			return unknown_key(e, file, &f->val, pre, f->key, known, 5);
		}
	}
	return 0;
}

int
policy_load_file(struct policy *p, const char *path, struct err *e)
{
	static const char *const known[] = {"principals"};
	struct json_limits lim = json_default_limits;
	struct json_doc doc;
	const struct json_val *root;
	size_t i;
	int rc = -1;

	lim.max_bytes = CFG_FILE_MAX;
	lim.max_depth = 8;
	lim.reject_dup_keys = 1;
	if (json_parse_file(&doc, path, &lim, e) != 0)
		return -1;
	root = doc.root;
	if (root->type != JSON_OBJECT) {
		perr(e, path, root, "policy: expected an object with \"principals\"");
		goto out;
	}
	for (i = 0; i < root->u.obj.n; i++) {
		const struct json_member *m = &root->u.obj.m[i];
		size_t j;
		if (!json_key_is(m, "principals")) {
			unknown_key(e, path, &m->val, "", m->key, known, 1);
			goto out;
		}
		if (m->val.type != JSON_OBJECT) {
			perr(e, path, &m->val, "principals: expected an object of principal names");
			goto out;
		}
		for (j = 0; j < m->val.u.obj.n; j++)
			if (load_principal(p, path, &m->val.u.obj.m[j], e) != 0)
				goto out;
	}
	snprintf(p->file, sizeof(p->file), "%s", path);
	rc = 0;
out:
	json_free(&doc);
	return rc;
}

int
policy_setup(struct policy *p, const struct config *c, struct err *e)
{
	const char *file = c->policy[0] ? c->policy : NULL;
	char origin[48];

	policy_init(p);
	p->mode = c->install.mode;
	if (file == NULL && access(CONFIG_DEFAULT_POLICY, F_OK) == 0)
		file = CONFIG_DEFAULT_POLICY;
	if (file != NULL && policy_load_file(p, file, e) != 0)
		return -1;
	if (c->preset[0] != '\0') {
		if (policy_find(p, "default") != NULL)
			return err_set(
			    e, "config.invalid",
			    "preset %s and the policy file %s both define principal default; keep one",
			    c->preset, file);
		snprintf(origin, sizeof(origin), "preset %.40s", c->preset);
		if (policy_add_preset(p, "default", c->preset, origin, e) != 0)
			return -1;
		snprintf(p->summary, sizeof(p->summary), "%s%s; principal default: preset %s",
		         file ? "policy file " : "no policy file", file ? file : "", c->preset);
	} else if (file == NULL) {
		if (policy_add_preset(p, "default", "admin", "default preset admin", e) != 0)
			return -1;
		snprintf(p->summary, sizeof(p->summary),
		         "no policy file and no preset; principal default: preset admin");
	} else if (policy_find(p, "default") == NULL) {
		if (get_or_add(p, "default", e) == NULL)
			return -1;
		snprintf(p->summary, sizeof(p->summary), "policy file %s; principal default: no rules", file);
	} else {
		snprintf(p->summary, sizeof(p->summary), "policy file %s", file);
	}
	return 0;
}

/* The first rule of effect eff in pp matching id, or NULL. */
static const struct pol_rule *
first_match(const struct pol_principal *pp, enum pol_effect eff, const char *id)
{
	int i;

	for (i = 0; i < pp->nrules; i++)
		if (pp->rules[i].effect == eff && policy_match(pp->rules[i].pattern, id))
			return &pp->rules[i];
	return NULL;
}

int
policy_decide(const struct policy *p, const char *principal, const char *op_id, const char *const *installs,
              int ninstalls, struct pol_decision *d)
{
	const struct pol_principal *pp = policy_find(p, principal);
	const struct pol_rule *r;
	char inst[OP_ID_MAX + 80];
	int i;

	memset(d, 0, sizeof(*d));
	if (pp == NULL) {
		snprintf(d->rule, sizeof(d->rule), "%.60s: no such principal", principal);
		return 0;
	}
	if ((r = first_match(pp, POL_DENY, op_id)) != NULL) {
		snprintf(d->rule, sizeof(d->rule), "%s: deny %s (%s)", pp->name, r->pattern, r->origin);
		return 0;
	}
	for (i = 0; i < ninstalls; i++) {
		snprintf(inst, sizeof(inst), "agents.%s.install", installs[i]);
		if ((r = first_match(pp, POL_DENY, inst)) != NULL) {
			snprintf(d->rule, sizeof(d->rule), "%s: install admission: %s denied by deny %s (%s)",
			         pp->name, inst, r->pattern, r->origin);
			return 0;
		}
	}
	if ((r = first_match(pp, POL_ALLOW, op_id)) == NULL) {
		snprintf(d->rule, sizeof(d->rule), "%s: no allow rule matches %s (default deny)", pp->name,
		         op_id);
		return 0;
	}
	snprintf(d->rule, sizeof(d->rule), "%s: allow %s (%s)", pp->name, r->pattern, r->origin);
	d->allowed = 1;
	d->install_permitted = ninstalls > 0 && config_mode_installs_at_runtime(p->mode);
	return 1;
}
