/*
 * The npm-lock part of manifest validation (SPEC §4). The npm-lock installer
 * (issue 5) extends this file: it may parse the lockfile into its own
 * structure, attach it to m->source.npm and free it in manifest_npm_free.
 * What is here is the load-time contract every npm-lock manifest must meet
 * even before that installer exists: the fields, allow_scripts false, and a
 * lockfile whose every package entry has an integrity and a resolved https
 * URL on one of the manifest's hosts.
 */
#include "manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INVALID "install.manifest_invalid"

static const char *const npm_keys[] = {"type", "package", "lock", "package_json", "bin", "allow_scripts", NULL};

static int
str_field(manifest_t *m, const struct json_val *src, const char *key, char *dst, size_t cap, struct err *e)
{
	const struct json_val *x = json_get(src, key);

	if (x == NULL)
		return err_set(e, INVALID, "%s: $.source.%s: missing", m->file, key);
	if (x->type != JSON_STRING || strlen(x->u.str.s) != x->u.str.len || x->u.str.len == 0)
		return err_set(e, INVALID, "%s: $.source.%s: expected a non-empty string", m->file, key);
	if (x->u.str.len >= cap)
		return err_set(e, INVALID, "%s: $.source.%s: longer than %zu bytes", m->file, key, cap - 1);
	memcpy(dst, x->u.str.s, x->u.str.len + 1);
	return 0;
}

static int
rel_ok(const char *s)
{
	return s[0] != '/' && strstr(s, "..") == NULL && strchr(s, '\\') == NULL;
}

int
manifest_npm_validate(manifest_t *m, const struct json_val *src, struct err *e)
{
	const struct json_val *x;
	size_t i;
	int k;

	for (i = 0; i < src->u.obj.n; i++) {
		for (k = 0; npm_keys[k] != NULL; k++)
			if (strcmp(npm_keys[k], src->u.obj.m[i].key) == 0)
				break;
		if (npm_keys[k] == NULL)
			return err_set(e, INVALID, "%s: $.source.%.60s: unknown field", m->file, src->u.obj.m[i].key);
	}
	if (str_field(m, src, "package", m->source.package, sizeof(m->source.package), e) < 0 ||
	    str_field(m, src, "lock", m->source.lock, sizeof(m->source.lock), e) < 0 ||
	    str_field(m, src, "package_json", m->source.package_json, sizeof(m->source.package_json), e) < 0 ||
	    str_field(m, src, "bin", m->source.bin, sizeof(m->source.bin), e) < 0)
		return -1;
	if (!rel_ok(m->source.lock))
		return err_set(e, INVALID, "%s: $.source.lock: not a relative path beside the manifest", m->file);
	if (!rel_ok(m->source.package_json))
		return err_set(e, INVALID, "%s: $.source.package_json: not a relative path beside the manifest",
			       m->file);
	if (!rel_ok(m->source.bin))
		return err_set(e, INVALID, "%s: $.source.bin: not a relative path inside the tree", m->file);
	x = json_get(src, "allow_scripts");
	if (x != NULL && x->type != JSON_FALSE)
		return err_set(e, INVALID, "%s: $.source.allow_scripts: must be false (lifecycle scripts never run)",
			       m->file);
	return 0;
}

/* The host of an https URL, for the hosts check. */
static int
https_host(const char *url, char *host, size_t cap, int *port)
{
	const char *p, *end, *colon;
	size_t n;

	if (strncmp(url, "https://", 8) != 0)
		return -1;
	p = url + 8;
	end = p + strcspn(p, "/?#");
	if (memchr(p, '@', (size_t)(end - p)) != NULL || *p == '[')
		return -1;
	colon = memchr(p, ':', (size_t)(end - p));
	n = (size_t)((colon ? colon : end) - p);
	if (n == 0 || n >= cap)
		return -1;
	memcpy(host, p, n);
	host[n] = '\0';
	*port = colon ? atoi(colon + 1) : 443;
	return 0;
}

int
manifest_npm_check_lock(manifest_t *m, const char *lock, size_t len, struct err *e)
{
	struct json_doc doc = {0};
	const struct json_val *v, *pk;
	size_t i;
	char lf[300];

	snprintf(lf, sizeof(lf), "%s", m->source.lock);
	if (json_parse(&doc, lock, len, NULL, e) < 0) {
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", e->msg);
		return err_set(e, INVALID, "%s: lockfile %s: %s", m->file, lf, msg);
	}
	v = json_get(doc.root, "lockfileVersion");
	if (v == NULL || v->type != JSON_NUMBER || !v->u.num.is_int || (v->u.num.i != 2 && v->u.num.i != 3)) {
		{
			int rc_ = err_set(e, INVALID, "%s: lockfile %s: $.lockfileVersion: must be 2 or 3", m->file, lf);
			json_free(&doc);
			return rc_;
		}
	}
	pk = json_get(doc.root, "packages");
	if (pk == NULL || pk->type != JSON_OBJECT) {
		{
			int rc_ = err_set(e, INVALID, "%s: lockfile %s: $.packages: missing", m->file, lf);
			json_free(&doc);
			return rc_;
		}
	}
	for (i = 0; i < pk->u.obj.n; i++) {
		const struct json_member *p = &pk->u.obj.m[i];
		const char *res, *integ;
		char host[256];
		int port;

		if (p->key[0] == '\0')
			continue; /* the root project itself */
		if (p->val.type != JSON_OBJECT) {
			{
				int rc_ = err_set(e, INVALID, "%s: lockfile %s: $.packages[\"%.80s\"]: expected an object",
				       m->file, lf, p->key);
				json_free(&doc);
				return rc_;
			}
		}
		if (json_get(&p->val, "inBundle") != NULL && json_get(&p->val, "inBundle")->type == JSON_TRUE)
			continue; /* arrives inside its parent's tarball */
		integ = json_get_str(&p->val, "integrity");
		res = json_get_str(&p->val, "resolved");
		if (integ == NULL || *integ == '\0') {
			{
				int rc_ = err_set(e, INVALID, "%s: lockfile %s: $.packages[\"%.80s\"].integrity: missing",
				       m->file, lf, p->key);
				json_free(&doc);
				return rc_;
			}
		}
		if (res == NULL || https_host(res, host, sizeof(host), &port) < 0) {
			{
				int rc_ = err_set(e, INVALID,
				       "%s: lockfile %s: $.packages[\"%.80s\"].resolved: missing or not https",
				       m->file, lf, p->key);
				json_free(&doc);
				return rc_;
			}
		}
		if (!manifest_host_allowed_m(m, host, port)) {
			{
				int rc_ = err_set(e, INVALID,
				       "%s: lockfile %s: $.packages[\"%.80s\"].resolved: host %s is not in hosts",
				       m->file, lf, p->key, host);
				json_free(&doc);
				return rc_;
			}
		}
	}
	json_free(&doc);
	return 0;
}

void
manifest_npm_free(manifest_t *m)
{
	m->source.npm = NULL;
}
