/*
 * The configuration file layer: one JSON object walked against the schema
 * table (core/config/config_priv.h), every key known, an unknown one named with its
 * path and the closest known key.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config/config_priv.h"
#include "base/json.h"

/* --- the file layer --- */

static const char *
json_type_name(enum json_type t)
{
	static const char *const n[] = {"null",     "false",    "true",     "a number",
	                                "a string", "an array", "an object"};

	return (unsigned)t < 7 ? n[t] : "?";
}

struct fctx {
	struct config *c;
	const char *file;
	const char *base;
	struct err *e;
};

static int ferr(struct fctx *f, const struct json_val *v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A schema error with the file position appended. */
static int
ferr(struct fctx *f, const struct json_val *v, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	json_verr_at(f->e, "config.invalid", f->file, v, fmt, ap);
	va_end(ap);
	return -1;
}

static int
is_section(const char *path)
{
	int i;

	for (i = 0; i < CFG_NSECTIONS; i++)
		if (strcmp(cfg_sections[i], path) == 0)
			return 1;
	return 0;
}

/* Did-you-mean for an unknown key at prefix: the keys and sections under
 * the same parent first, then any key anywhere by its last segment (so a
 * top-level "mode" suggests install.mode). */
static const char *
suggest(const char *prefix, const char *key)
{
	static char out[128];
	const char *cand[CK_NKEYS + CFG_NSECTIONS], *full[CK_NKEYS + CFG_NSECTIONS], *s;
	size_t pl = strlen(prefix);
	int n = 0, i;

	for (i = 0; i < CK_NKEYS + CFG_NSECTIONS; i++) {
		const char *p = i < CK_NKEYS ? cfg_keys[i].path : cfg_sections[i - CK_NKEYS];
		const char *rest;
		if (pl > 0 && (strncmp(p, prefix, pl) != 0 || p[pl] != '.'))
			continue;
		rest = pl > 0 ? p + pl + 1 : p;
		if (strchr(rest, '.') != NULL)
			continue;
		full[n] = p;
		cand[n++] = rest;
	}
	if ((s = config_did_you_mean(key, cand, n)) != NULL) {
		for (i = 0; i < n; i++)
			if (cand[i] == s)
				return full[i];
	}
	n = 0;
	for (i = 0; i < CK_NKEYS; i++) {
		const char *dot = strrchr(cfg_keys[i].path, '.');
		full[n] = cfg_keys[i].path;
		cand[n++] = dot ? dot + 1 : cfg_keys[i].path;
	}
	if ((s = config_did_you_mean(key, cand, n)) != NULL && strlen(key) > 2) {
		for (i = 0; i < n; i++)
			if (cand[i] == s) {
				snprintf(out, sizeof(out), "%s", full[i]);
				return out;
			}
	}
	return NULL;
}

static int
apply_value(struct fctx *f, int k, const char *path, const struct json_val *v)
{
	const struct cfg_keydef *d = &cfg_keys[k];
	size_t i;

	if (cfg_is_list(k)) {
		if (v->type != JSON_ARRAY)
			return ferr(f, v, "%s: expected an array of strings, got %s", path,
			            json_type_name(v->type));
		cfg_list_clear(f->c, k);
		for (i = 0; i < v->u.arr.n; i++) {
			const struct json_val *it = &v->u.arr.v[i];
			char where[200];
			snprintf(where, sizeof(where), "%s[%zu]", path, i);
			if (it->type != JSON_STRING || strlen(it->u.str.s) != it->u.str.len)
				return ferr(f, it, "%s: expected a string, got %s", where,
				            json_type_name(it->type));
			if (cfg_list_add(f->c, k, it->u.str.s, where, f->e) != 0)
				return ferr(f, it, "%s", f->e->msg);
		}
		return 0;
	}
	switch (d->kind) {
	case K_INT:
		if (v->type != JSON_NUMBER || !v->u.num.is_int || v->u.num.i < d->min || v->u.num.i > d->max)
			return ferr(f, v, "%s: expected an integer from %d to %d", path, d->min, d->max);
		*(int *)cfg_field(f->c, k) = (int)v->u.num.i;
		return 0;
	case K_BOOL:
		if (v->type != JSON_TRUE && v->type != JSON_FALSE)
			return ferr(f, v, "%s: expected true or false, got %s", path,
			            json_type_name(v->type));
		*(int *)cfg_field(f->c, k) = v->type == JSON_TRUE;
		return 0;
	default:
		break;
	}
	if (v->type != JSON_STRING || strlen(v->u.str.s) != v->u.str.len)
		return ferr(f, v, "%s: expected a string, got %s", path, json_type_name(v->type));
	if (cfg_set_text(f->c, k, v->u.str.s, d->kind == K_PATH ? f->base : NULL, path, f->e) != 0)
		return ferr(f, v, "%s", f->e->msg);
	return 0;
}

static int
apply_object(struct fctx *f, const char *prefix, const struct json_val *obj)
{
	char path[160];
	size_t i;
	int k;

	if (obj->type != JSON_OBJECT)
		return ferr(f, obj, "%s: expected an object, got %s", prefix[0] ? prefix : "(top level)",
		            json_type_name(obj->type));
	for (i = 0; i < obj->u.obj.n; i++) {
		const struct json_member *m = &obj->u.obj.m[i];
		const char *s;
		if (strlen(m->key) != m->keylen || m->keylen > 64)
			return ferr(f, &m->val, "%s: a key with NUL or over 64 bytes",
			            prefix[0] ? prefix : "(top level)");
		snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", m->key);
		if (is_section(path)) {
			if (apply_object(f, path, &m->val) != 0)
				return -1;
			continue;
		}
		if ((k = config_key_find(path)) >= 0) {
			if (apply_value(f, k, path, &m->val) != 0)
				return -1;
			f->c->src[k] = CFG_SRC_FILE;
			f->c->src_detail[k][0] = '\0';
			continue;
		}
		if ((s = suggest(prefix, m->key)) != NULL)
			return ferr(f, &m->val, "%s: unknown key (did you mean %s?)", path, s);
		return ferr(f, &m->val, "%s: unknown key", path);
	}
	return 0;
}

int
config_apply_file(struct config *c, const char *path, struct err *e)
{
	struct json_limits lim = json_default_limits;
	struct json_doc doc;
	struct fctx f;
	char base[CFG_PATH_MAX], *slash;
	int rc;

	lim.max_bytes = CFG_FILE_MAX;
	lim.max_depth = 8;
	lim.reject_dup_keys = 1;
	if (json_parse_file(&doc, path, &lim, e) != 0)
		return -1;
	snprintf(base, sizeof(base), "%s", path);
	slash = strrchr(base, '/');
	if (slash == NULL)
		snprintf(base, sizeof(base), ".");
	else if (slash == base)
		base[1] = '\0';
	else
		*slash = '\0';
	f.c = c;
	f.file = path;
	f.base = base;
	f.e = e;
	rc = apply_object(&f, "", doc.root);
	json_free(&doc);
	if (rc == 0)
		snprintf(c->file, sizeof(c->file), "%s", path);
	return rc;
}
