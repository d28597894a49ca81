/*
 * Manifest loading and validation: one manifest file against schema 1. Every
 * check names the file and the JSON path of the offending value, so a
 * reviewer can go straight to it. Sets of manifests: core/pkg/manifest_set.c.
 */
#include "pkg/manifest.h"
#include "net/hostrule.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "base/digest.h"
#include "base/fs.h"
#include "pkg/manifests_embed.h"

#define INVALID "install.manifest_invalid"

/* Validation context: which file, and the JSON path of the current value. */
struct vctx {
	const char *file;
	struct err *e;
};

static int bad(struct vctx *v, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
bad(struct vctx *v, const char *path, const char *fmt, ...)
{
	char what[200];
	va_list ap;

	va_start(ap, fmt);
	err_fmtv(what, sizeof(what), fmt, ap);
	va_end(ap);
	return err_set(v->e, INVALID, "%s: %s: %s", v->file, path, what);
}

/* A tool name is validated by the configuration's name rule (agents name
 * manifests), so both limits are one. */
_Static_assert(MANIFEST_NAME_MAX == CFG_NAME_MAX, "tool names are agent names");

int
manifest_platform_known(const char *s)
{
	return s != NULL &&
	       (strcmp(s, MANIFEST_PLATFORM_X64) == 0 || strcmp(s, MANIFEST_PLATFORM_ARM64) == 0);
}

int
manifest_unpinned_allowed(const struct config *cfg, struct err *e)
{
	const char *u = config_env("ABX_INSTALL_UNPINNED");

	if (u == NULL || strcmp(u, "1") != 0)
		return 0;
	if (config_production(cfg))
		return err_set(
		    e, "config.invalid",
		    "ABX_INSTALL_UNPINNED=1 is refused in production (ABX_SERVER_ENV / environment)");
	return 1;
}

/* ---- small validators ------------------------------------------------- */

/* A relative path inside a tree: no leading '/', no "." or ".." component,
 * no empty component, no backslash or control byte. */
static int
relpath_ok(const char *s)
{
	const char *p = s, *q;
	size_t n;

	if (*s == '\0' || *s == '/' || strlen(s) >= MANIFEST_RELPATH_MAX)
		return 0;
	for (q = s; *q; q++)
		if ((unsigned char)*q < 0x20 || *q == '\\' || *q == 0x7f)
			return 0;
	while (*p) {
		q = strchr(p, '/');
		n = q ? (size_t)(q - p) : strlen(p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		p += n;
		if (*p == '/')
			p++;
	}
	return 1;
}

static int
hex64_ok(const char *s)
{
	int i;

	for (i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[64] == '\0';
}

/* Copy a string member into dst (cap bytes). Missing: 0 (dst untouched);
 * wrong type, NUL inside, or too long: -1 with e. */
static int
get_str(struct vctx *v, const struct json_val *obj, const char *key, const char *path, char *dst, size_t cap,
        int required)
{
	const struct json_val *x = json_get(obj, key);
	char p[160];

	snprintf(p, sizeof(p), "%s.%s", path, key);
	if (x == NULL)
		return required ? bad(v, p, "missing") : 0;
	if (x->type != JSON_STRING)
		return bad(v, p, "expected a string");
	if (strlen(x->u.str.s) != x->u.str.len)
		return bad(v, p, "contains a NUL character");
	if (x->u.str.len >= cap)
		return bad(v, p, "longer than %zu bytes", cap - 1);
	memcpy(dst, x->u.str.s, x->u.str.len + 1);
	return 1;
}

/* Refuse any member of obj not in allowed (NULL-terminated). */
static int
only_keys(struct vctx *v, const struct json_val *obj, const char *path, const char *const *allowed)
{
	size_t i;
	int k;

	for (i = 0; i < obj->u.obj.n; i++) {
		const char *key = obj->u.obj.m[i].key;
		for (k = 0; allowed[k] != NULL; k++)
			if (json_key_is(&obj->u.obj.m[i], allowed[k]))
				break;
		if (allowed[k] == NULL) {
			char p[200];
			snprintf(p, sizeof(p), "%s.%.60s", path, key);
			return bad(v, p, "unknown field");
		}
	}
	return 0;
}

/* An array of 1..MANIFEST_MAX_ARGV strings into a. */
static int
get_words(struct vctx *v, const struct json_val *x, const char *path, struct manifest_argv *a)
{
	size_t i;
	char p[200];

	if (x->type != JSON_ARRAY)
		return bad(v, path, "expected an array of strings");
	if (x->u.arr.n == 0)
		return bad(v, path, "empty");
	if (x->u.arr.n > MANIFEST_MAX_ARGV)
		return bad(v, path, "more than %d words", MANIFEST_MAX_ARGV);
	for (i = 0; i < x->u.arr.n; i++) {
		const struct json_val *w = &x->u.arr.v[i];
		snprintf(p, sizeof(p), "%s[%zu]", path, i);
		if (w->type != JSON_STRING)
			return bad(v, p, "expected a string");
		if (strlen(w->u.str.s) != w->u.str.len || w->u.str.len >= MANIFEST_ARG_MAX)
			return bad(v, p, "contains a NUL or is longer than %d bytes", MANIFEST_ARG_MAX - 1);
		memcpy(a->v[i], w->u.str.s, w->u.str.len + 1);
	}
	a->n = (int)x->u.arr.n;
	return 0;
}

static int
get_argv(struct vctx *v, const struct json_val *x, const char *path, struct manifest_argv *a)
{
	if (get_words(v, x, path, a) < 0)
		return -1;
	if (strcmp(a->v[0], "{bin}") != 0 && a->v[0][0] != '/')
		return bad(v, path, "the first word must be {bin} or an absolute path");
	return 0;
}

/* ---- versions, requires, hosts ---------------------------------------- */

int
manifest_version_in(const char *s, char *out, size_t cap)
{
	const char *p, *q;

	for (p = s; *p != '\0'; p++) {
		if (!isdigit((unsigned char)*p) || (p > s && (isalnum((unsigned char)p[-1]) && p[-1] != 'v')))
			continue;
		for (q = p; isdigit((unsigned char)*q) || (*q == '.' && isdigit((unsigned char)q[1])); q++)
			;
		if (memchr(p, '.', (size_t)(q - p)) == NULL)
			continue;
		if ((size_t)(q - p) >= cap)
			return -1;
		memcpy(out, p, (size_t)(q - p));
		out[q - p] = '\0';
		return 0;
	}
	return -1;
}

int
manifest_version_cmp(const char *a, const char *b)
{
	if (*a == 'v' || *a == 'V')
		a++;
	if (*b == 'v' || *b == 'V')
		b++;
	for (;;) {
		unsigned long long x = 0, y = 0;
		int ea = (*a == '\0' || *a == '-' || *a == '+'), eb = (*b == '\0' || *b == '-' || *b == '+');

		if (ea && eb)
			break;
		while (isdigit((unsigned char)*a))
			x = x * 10 + (unsigned)(*a++ - '0'), x = x > (1ULL << 60) ? (1ULL << 60) : x;
		while (isdigit((unsigned char)*b))
			y = y * 10 + (unsigned)(*b++ - '0'), y = y > (1ULL << 60) ? (1ULL << 60) : y;
		if (x != y)
			return x < y ? -1 : 1;
		/* skip to the next numeric field */
		while (*a && *a != '.' && *a != '-' && *a != '+')
			a++;
		while (*b && *b != '.' && *b != '-' && *b != '+')
			b++;
		if (*a == '.')
			a++;
		if (*b == '.')
			b++;
	}
	/* equal numbers: a pre-release sorts before the release */
	if (*a == '-' && *b != '-')
		return -1;
	if (*b == '-' && *a != '-')
		return 1;
	if (*a == '-' && *b == '-')
		return strcmp(a, b) < 0 ? -1 : strcmp(a, b) > 0;
	return 0;
}

int
manifest_parse_require(const char *s, struct manifest_require *r, struct err *e)
{
	const char *op = strstr(s, ">=");
	size_t n = op ? (size_t)(op - s) : strlen(s);

	memset(r, 0, sizeof(*r));
	if (n == 0 || n >= sizeof(r->name))
		return err_set(e, INVALID, "bad tool name");
	memcpy(r->name, s, n);
	if (!cfg_valid_name(r->name))
		return err_set(e, INVALID, "bad tool name '%s'", r->name);
	if (op != NULL) {
		if (strlen(op + 2) >= sizeof(r->min) || !manifest_version_ok(op + 2, sizeof(r->min)) ||
		    !isdigit((unsigned char)op[2]))
			return err_set(e, INVALID, "bad minimum version '%s'", op + 2);
		strcpy(r->min, op + 2);
	}
	return 0;
}

int
manifest_host_allowed_m(const manifest_t *m, const char *host, int port)
{
	const char *hs[MANIFEST_MAX_HOSTS];
	int i;

	for (i = 0; i < m->nhosts; i++)
		hs[i] = m->hosts[i];
	return hostrule_match(hs, m->nhosts, host, port);
}

/* Minimal URL split for validation (the HTTP client parses again, strictly,
 * when it fetches): https only, a host, an optional port, no userinfo. */
static int
url_host(const char *url, char *host, size_t cap, int *port)
{
	const char *p, *end, *colon;
	size_t n;

	if (strncmp(url, "https://", 8) != 0)
		return -1;
	p = url + 8;
	end = p + strcspn(p, "/?#");
	if (memchr(p, '@', (size_t)(end - p)) != NULL)
		return -1;
	*port = 443;
	if (*p == '[') {
		const char *rb = memchr(p, ']', (size_t)(end - p));
		if (rb == NULL)
			return -1;
		n = (size_t)(rb - p - 1);
		if (n == 0 || n >= cap)
			return -1;
		memcpy(host, p + 1, n);
		host[n] = '\0';
		if (rb[1] == ':')
			*port = atoi(rb + 2);
	} else {
		colon = memchr(p, ':', (size_t)(end - p));
		n = (size_t)((colon ? colon : end) - p);
		if (n == 0 || n >= cap)
			return -1;
		memcpy(host, p, n);
		host[n] = '\0';
		if (colon)
			*port = atoi(colon + 1);
	}
	for (p = url; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			return -1;
	return *port > 0 && *port < 65536 ? 0 : -1;
}

/* ---- the schema -------------------------------------------------------- */

static const char *const top_keys[] = {"schema", "name",  "binary", "version",   "description",   "requires",
                                       "source", "hosts", "verify", "platforms", "size_hint_mb",  "run",
                                       "path",   "env",   "libc",   "libs",      "unpacked_size", NULL};
static const char *const tarball_keys[] = {"type", "bin", "strip_components", "platforms", NULL};
static const char *const art_keys[] = {"url", "sha256", NULL};
static const char *const verify_keys[] = {"argv", "expect", "timeout", "env", NULL};
static const char *const path_keys[] = {"argv", "min", NULL};
static const char *const run_keys[] = {"argv", "dialect", "extra", NULL};
/* The dialects core/server/dialect.h parses (a manifest loads without it). */
static const char *const dialects[] = {"raw", "codex", "claude-code", "gemini", NULL};

static int
parse_tarball(struct vctx *v, manifest_t *m, const struct json_val *src, const struct manifest_opts *o)
{
	const struct json_val *x, *plats;
	size_t i;
	int k;
	char p[200];

	if (only_keys(v, src, "$.source", tarball_keys) < 0)
		return -1;
	if (get_str(v, src, "bin", "$.source", m->source.bin, sizeof(m->source.bin), 1) < 0)
		return -1;
	if (!relpath_ok(m->source.bin))
		return bad(v, "$.source.bin", "not a relative path inside the tree");
	if ((x = json_get(src, "strip_components")) != NULL) {
		if (x->type != JSON_NUMBER || !x->u.num.is_int || x->u.num.i < 0 || x->u.num.i > 8)
			return bad(v, "$.source.strip_components", "expected an integer 0..8");
		m->source.strip_components = (int)x->u.num.i;
	}
	plats = json_get(src, "platforms");
	if (plats == NULL)
		return bad(v, "$.source.platforms", "missing");
	if (plats->type != JSON_OBJECT || plats->u.obj.n == 0)
		return bad(v, "$.source.platforms", "expected an object of platform: {url, sha256}");
	if (plats->u.obj.n > MANIFEST_MAX_PLATFORMS)
		return bad(v, "$.source.platforms", "more than %d platforms", MANIFEST_MAX_PLATFORMS);
	for (i = 0; i < plats->u.obj.n; i++) {
		const struct json_member *pm = &plats->u.obj.m[i];
		struct manifest_artifact *a = &m->source.art[m->source.nart];
		char host[MANIFEST_HOST_MAX], base[120];
		int port, r;

		snprintf(base, sizeof(base), "$.source.platforms.%.40s", pm->key);
		if (!json_key_is(pm, MANIFEST_PLATFORM_X64) && !json_key_is(pm, MANIFEST_PLATFORM_ARM64))
			return bad(v, base, "unknown platform (known: linux-x64, linux-arm64)");
		if (pm->val.type != JSON_OBJECT)
			return bad(v, base, "expected an object {url, sha256}");
		if (only_keys(v, &pm->val, base, art_keys) < 0)
			return -1;
		snprintf(a->platform, sizeof(a->platform), "%s", pm->key);
		if (get_str(v, &pm->val, "url", base, a->url, sizeof(a->url), 1) < 0)
			return -1;
		snprintf(p, sizeof(p), "%s.url", base);
		if (url_host(a->url, host, sizeof(host), &port) != 0)
			return bad(v, p, "not an https:// URL with a host (no userinfo, no spaces)");
		if (!manifest_host_allowed_m(m, host, port))
			return bad(v, p, "host %s is not in hosts", host);
		r = get_str(v, &pm->val, "sha256", base, a->sha256, sizeof(a->sha256), 0);
		if (r < 0)
			return -1;
		snprintf(p, sizeof(p), "%s.sha256", base);
		if (r > 0 && !hex64_ok(a->sha256))
			return bad(v, p, "not 64 lowercase hex digits");
		m->source.nart++;
	}
	/* Every platform the manifest claims needs an artifact. */
	for (k = 0; k < m->nplatforms; k++)
		if (manifest_artifact(m, m->platforms[k]) == NULL) {
			snprintf(p, sizeof(p), "$.source.platforms.%s", m->platforms[k]);
			return bad(v, p, "missing (listed in $.platforms)");
		}
	/* No trust on first use: the digest of each platform to be installed
	 * must be pinned. */
	for (k = 0; k < m->source.nart; k++) {
		struct manifest_artifact *a = &m->source.art[k];
		int wanted = strcmp(o->platform, "all") == 0 || strcmp(o->platform, a->platform) == 0;

		if (a->sha256[0] != '\0' || !wanted)
			continue;
		if (!o->allow_unpinned) {
			snprintf(p, sizeof(p), "$.source.platforms.%s.sha256", a->platform);
			return bad(v, p,
			           "missing: there is no trust on first use; pin it with "
			           "`agent-sandbox-server lock %s`",
			           m->name);
		}
		m->unpinned = 1;
	}
	if (strcmp(o->platform, "all") != 0 && manifest_artifact(m, o->platform) == NULL)
		return bad(v, "$.source.platforms", "no artifact for this platform (%s)", o->platform);
	return 0;
}

static int
parse_requires(struct vctx *v, manifest_t *m, const struct json_val *x)
{
	size_t i;
	int k;
	char p[64];
	struct err sub = {0};

	if (x->type != JSON_ARRAY)
		return bad(v, "$.requires", "expected an array of \"name\" or \"name>=version\"");
	if (x->u.arr.n > MANIFEST_MAX_REQUIRES)
		return bad(v, "$.requires", "more than %d entries", MANIFEST_MAX_REQUIRES);
	for (i = 0; i < x->u.arr.n; i++) {
		const struct json_val *r = &x->u.arr.v[i];
		snprintf(p, sizeof(p), "$.requires[%zu]", i);
		if (r->type != JSON_STRING || strlen(r->u.str.s) != r->u.str.len)
			return bad(v, p, "expected a string");
		if (manifest_parse_require(r->u.str.s, &m->requires[m->nrequires], &sub) < 0)
			return bad(v, p, "%s", sub.msg);
		if (strcmp(m->requires[m->nrequires].name, m->name) == 0)
			return bad(v, p, "a tool cannot require itself");
		for (k = 0; k < m->nrequires; k++)
			if (strcmp(m->requires[k].name, m->requires[m->nrequires].name) == 0)
				return bad(v, p, "duplicate");
		m->nrequires++;
	}
	return 0;
}

static int
parse_strings(struct vctx *v, const struct json_val *x, const char *path, char *dst, size_t each, int cap,
              int *n)
{
	size_t i;
	char p[64];

	if (x->type != JSON_ARRAY)
		return bad(v, path, "expected an array of strings");
	if (x->u.arr.n > (size_t)cap)
		return bad(v, path, "more than %d entries", cap);
	for (i = 0; i < x->u.arr.n; i++) {
		const struct json_val *s = &x->u.arr.v[i];
		snprintf(p, sizeof(p), "%s[%zu]", path, i);
		if (s->type != JSON_STRING || strlen(s->u.str.s) != s->u.str.len || s->u.str.len == 0)
			return bad(v, p, "expected a non-empty string");
		if (s->u.str.len >= each)
			return bad(v, p, "longer than %zu bytes", each - 1);
		memcpy(dst + i * each, s->u.str.s, s->u.str.len + 1);
	}
	*n = (int)x->u.arr.n;
	return 0;
}

/* "libc": ["glibc", "musl"]: the loaders the tool's native code can use. */
static int
parse_libc(struct vctx *v, manifest_t *m, const struct json_val *x)
{
	size_t i;
	char p[32];

	if (x->type != JSON_ARRAY || x->u.arr.n == 0 || x->u.arr.n > 2)
		return bad(v, "$.libc", "expected an array of \"glibc\" and/or \"musl\"");
	for (i = 0; i < x->u.arr.n; i++) {
		const struct json_val *s = &x->u.arr.v[i];
		unsigned bit = 0;

		snprintf(p, sizeof(p), "$.libc[%zu]", i);
		if (s->type == JSON_STRING && strcmp(s->u.str.s, "glibc") == 0 && s->u.str.len == 5)
			bit = MANIFEST_LIBC_GLIBC;
		else if (s->type == JSON_STRING && strcmp(s->u.str.s, "musl") == 0 && s->u.str.len == 4)
			bit = MANIFEST_LIBC_MUSL;
		if (bit == 0)
			return bad(v, p, "expected \"glibc\" or \"musl\"");
		if (m->libc & bit)
			return bad(v, p, "duplicate");
		m->libc |= bit;
	}
	return 0;
}

/* "env": {"NAME": "value with {tree}" | null}. Names that change how
 * programs are found or loaded, or our own, are refused: a manifest says
 * what the vendor's launcher sets, nothing more. */
static int
parse_env(struct vctx *v, manifest_t *m, const struct json_val *x)
{
	size_t i, k;
	char p[MANIFEST_NAME_MAX + 16];

	if (x->type != JSON_OBJECT)
		return bad(v, "$.env", "expected an object of NAME: string or null");
	if (x->u.obj.n > MANIFEST_MAX_ENV)
		return bad(v, "$.env", "more than %d variables", MANIFEST_MAX_ENV);
	for (i = 0; i < x->u.obj.n; i++) {
		const struct json_member *mb = &x->u.obj.m[i];
		struct manifest_envvar *ev = &m->env[m->nenv];
		size_t n = strlen(mb->key);
		const char *t;

		snprintf(p, sizeof(p), "$.env.%.*s", MANIFEST_NAME_MAX - 1, mb->key);
		if (n == 0 || n >= MANIFEST_NAME_MAX || isdigit((unsigned char)mb->key[0]))
			return bad(v, p, "not a variable name ([A-Za-z_][A-Za-z0-9_]*)");
		for (k = 0; k < n; k++)
			if (!(isalnum((unsigned char)mb->key[k]) || mb->key[k] == '_'))
				return bad(v, p, "not a variable name ([A-Za-z_][A-Za-z0-9_]*)");
		if (strcmp(mb->key, "PATH") == 0 || strncmp(mb->key, "LD_", 3) == 0 ||
		    strncmp(mb->key, "ABX_", 4) == 0)
			return bad(v, p, "PATH, LD_* and ABX_* are not a manifest's to set");
		memcpy(ev->name, mb->key, n + 1);
		if (mb->val.type == JSON_NULL) {
			ev->unset = 1;
		} else if (mb->val.type == JSON_STRING && strlen(mb->val.u.str.s) == mb->val.u.str.len) {
			if (mb->val.u.str.len >= sizeof(ev->value))
				return bad(v, p, "longer than %zu bytes", sizeof(ev->value) - 1);
			for (t = strchr(mb->val.u.str.s, '{'); t != NULL; t = strchr(t + 1, '{'))
				if (strncmp(t, "{tree}", 6) != 0)
					return bad(v, p, "unknown placeholder (known: {tree})");
			memcpy(ev->value, mb->val.u.str.s, mb->val.u.str.len + 1);
		} else {
			return bad(v, p, "expected a string or null");
		}
		m->nenv++;
	}
	return 0;
}

/* The argv templates: verify (how a tree is checked), path (when a tool on
 * PATH is accepted), run (how an agent starts). */
static int
parse_commands(struct vctx *v, manifest_t *m, const struct json_val *root)
{
	const struct json_val *x;
	int k;

	if ((x = json_get(root, "verify")) != NULL) {
		const struct json_val *y;
		if (x->type != JSON_OBJECT)
			return bad(v, "$.verify", "expected an object {argv, expect, timeout, env}");
		if (only_keys(v, x, "$.verify", verify_keys) < 0)
			return -1;
		if ((y = json_get(x, "argv")) == NULL)
			return bad(v, "$.verify.argv", "missing");
		if (get_argv(v, y, "$.verify.argv", &m->verify.argv) < 0)
			return -1;
		if (get_str(v, x, "expect", "$.verify", m->verify.expect, sizeof(m->verify.expect), 0) < 0)
			return -1;
		m->verify.timeout = MANIFEST_VERIFY_TIMEOUT;
		if ((y = json_get(x, "timeout")) != NULL) {
			if (y->type != JSON_NUMBER || !y->u.num.is_int || y->u.num.i < 1 || y->u.num.i > 3600)
				return bad(v, "$.verify.timeout", "expected seconds 1..3600");
			m->verify.timeout = (int)y->u.num.i;
		}
		if ((y = json_get(x, "env")) != NULL && manifest_verify_env(m, y, v->file, v->e) < 0)
			return -1;
	}
	if ((x = json_get(root, "path")) != NULL) {
		const struct json_val *y;
		if (x->type != JSON_OBJECT)
			return bad(v, "$.path", "expected an object {argv, min}");
		if (only_keys(v, x, "$.path", path_keys) < 0)
			return -1;
		if ((y = json_get(x, "argv")) == NULL)
			return bad(v, "$.path.argv", "missing");
		if (get_argv(v, y, "$.path.argv", &m->path.argv) < 0)
			return -1;
		if (get_str(v, x, "min", "$.path", m->path.min, sizeof(m->path.min), 0) < 0)
			return -1;
		if (m->path.min[0] != '\0' && !manifest_version_ok(m->path.min, MANIFEST_VERSION_MAX))
			return bad(v, "$.path.min", "not a version");
	}
	if ((x = json_get(root, "run")) != NULL) {
		const struct json_val *y = x;
		if (x->type == JSON_OBJECT) {
			if (only_keys(v, x, "$.run", run_keys) < 0)
				return -1;
			if ((y = json_get(x, "argv")) == NULL)
				return bad(v, "$.run.argv", "missing");
			if (get_str(v, x, "dialect", "$.run", m->dialect, sizeof(m->dialect), 0) < 0)
				return -1;
			for (k = 0; m->dialect[0] != '\0' && dialects[k] != NULL; k++)
				if (strcmp(m->dialect, dialects[k]) == 0)
					break;
			if (m->dialect[0] != '\0' && dialects[k] == NULL)
				return bad(v, "$.run.dialect",
				           "unknown dialect '%s' (known: raw, codex, claude-code, gemini)",
				           m->dialect);
			if ((y = json_get(x, "extra")) != NULL &&
			    get_words(v, y, "$.run.extra", &m->run_extra) < 0)
				return -1;
			y = json_get(x, "argv");
		}
		if (get_argv(v, y, x == y ? "$.run" : "$.run.argv", &m->run) < 0)
			return -1;
	}
	return 0;
}

/* The source: a tarball per platform, or an npm lockfile. */
static int
parse_source(struct vctx *v, manifest_t *m, const struct json_val *root, const struct manifest_opts *o)
{
	const struct json_val *src;
	char type[32];

	src = json_get(root, "source");
	if (src == NULL)
		return bad(v, "$.source", "missing");
	if (src->type != JSON_OBJECT)
		return bad(v, "$.source", "expected an object");
	if (get_str(v, src, "type", "$.source", type, sizeof(type), 1) < 0)
		return -1;
	if (strcmp(type, "tarball") == 0) {
		m->source.type = MANIFEST_SRC_TARBALL;
		return parse_tarball(v, m, src, o);
	}
	if (strcmp(type, "npm-lock") == 0) {
		m->source.type = MANIFEST_SRC_NPM_LOCK;
		return manifest_npm_validate(m, src, v->e);
	}
	return bad(v, "$.source.type", "unknown source type '%s' (known: tarball, npm-lock)", type);
}

/* "unpacked_size": {"linux-x64": bytes, ...}, each a platform of the
 * manifest's (a key given twice is refused by the parser). */
static int
parse_unpacked(struct vctx *v, manifest_t *m, const struct json_val *x)
{
	const struct json_member *p;
	char path[64];
	size_t i;

	if (x->type != JSON_OBJECT)
		return bad(v, "$.unpacked_size", "expected an object of platform: bytes");
	if (x->u.obj.n > MANIFEST_MAX_PLATFORMS)
		return bad(v, "$.unpacked_size", "more than %d platforms", MANIFEST_MAX_PLATFORMS);
	for (i = 0; i < x->u.obj.n; i++) {
		p = &x->u.obj.m[i];
		snprintf(path, sizeof(path), "$.unpacked_size.%.24s", p->key);
		if (!manifest_platform_known(p->key) || !manifest_supports(m, p->key))
			return bad(v, path, "not a platform of the manifest");
		if (p->val.type != JSON_NUMBER || !p->val.u.num.is_int || p->val.u.num.i < 1 ||
		    (uint64_t)p->val.u.num.i > MANIFEST_UNPACKED_MAX)
			return bad(v, path, "expected an integer number of bytes 1..%llu",
			           (unsigned long long)MANIFEST_UNPACKED_MAX);
		snprintf(m->unpacked[m->nunpacked].platform, sizeof(m->unpacked[0].platform), "%s", p->key);
		m->unpacked[m->nunpacked++].bytes = (uint64_t)p->val.u.num.i;
	}
	return 0;
}

static int
parse_doc(struct vctx *v, manifest_t *m, const struct json_val *root, const struct manifest_opts *o)
{
	const struct json_val *x;
	int i, k;

	if (root->type != JSON_OBJECT)
		return bad(v, "$", "expected an object");
	if (only_keys(v, root, "$", top_keys) < 0)
		return -1;
	x = json_get(root, "schema");
	if (x == NULL)
		return bad(v, "$.schema", "missing");
	if (x->type != JSON_NUMBER || !x->u.num.is_int || x->u.num.i != 1)
		return bad(v, "$.schema", "unsupported schema (this binary reads schema 1)");
	if (get_str(v, root, "name", "$", m->name, sizeof(m->name), 1) < 0)
		return -1;
	if (!cfg_valid_name(m->name))
		return bad(v, "$.name", "must match [a-z0-9][a-z0-9._-]* (at most %d bytes)",
		           MANIFEST_NAME_MAX - 1);
	if (get_str(v, root, "binary", "$", m->binary, sizeof(m->binary), 1) < 0)
		return -1;
	if (!cfg_valid_name(m->binary))
		return bad(v, "$.binary", "must match [a-z0-9][a-z0-9._-]*");
	if (get_str(v, root, "version", "$", m->version, sizeof(m->version), 1) < 0)
		return -1;
	if (!manifest_version_ok(m->version, MANIFEST_VERSION_MAX))
		return bad(v, "$.version", "not a version (letters, digits, . - + _)");
	if (get_str(v, root, "description", "$", m->description, sizeof(m->description), 0) < 0)
		return -1;
	if ((x = json_get(root, "hosts")) == NULL)
		return bad(v, "$.hosts", "missing");
	if (parse_strings(v, x, "$.hosts", &m->hosts[0][0], MANIFEST_HOST_MAX, MANIFEST_MAX_HOSTS,
	                  &m->nhosts) < 0)
		return -1;
	if (m->nhosts == 0)
		return bad(v, "$.hosts", "empty");
	for (i = 0; i < m->nhosts; i++)
		for (k = 0; m->hosts[i][k]; k++)
			if (!(isalnum((unsigned char)m->hosts[i][k]) || strchr(".-:[]", m->hosts[i][k]))) {
				char p[32];
				snprintf(p, sizeof(p), "$.hosts[%d]", i);
				return bad(v, p, "not a host name or host:port");
			}
	if ((x = json_get(root, "platforms")) != NULL) {
		if (parse_strings(v, x, "$.platforms", &m->platforms[0][0], sizeof(m->platforms[0]),
		                  MANIFEST_MAX_PLATFORMS, &m->nplatforms) < 0)
			return -1;
		for (i = 0; i < m->nplatforms; i++)
			if (!manifest_platform_known(m->platforms[i])) {
				char p[32];
				snprintf(p, sizeof(p), "$.platforms[%d]", i);
				return bad(v, p, "unknown platform (known: linux-x64, linux-arm64)");
			}
	}
	if ((x = json_get(root, "requires")) != NULL && parse_requires(v, m, x) < 0)
		return -1;
	if ((x = json_get(root, "libc")) != NULL && parse_libc(v, m, x) < 0)
		return -1;
	if ((x = json_get(root, "env")) != NULL && parse_env(v, m, x) < 0)
		return -1;
	if ((x = json_get(root, "libs")) != NULL) {
		if (m->libc == 0)
			return bad(v, "$.libs",
			           "only with $.libc (a tool that needs no loader needs no library)");
		if (parse_strings(v, x, "$.libs", &m->libs[0][0], MANIFEST_NAME_MAX, MANIFEST_MAX_LIBS,
		                  &m->nlibs) < 0)
			return -1;
		for (i = 0; i < m->nlibs; i++) {
			char p[32];

			snprintf(p, sizeof(p), "$.libs[%d]", i);
			for (k = 0; m->libs[i][k]; k++)
				if (!(isalnum((unsigned char)m->libs[i][k]) || strchr("._+-", m->libs[i][k])))
					return bad(v, p, "not a library file name (like libstdc++.so.6)");
			if (strstr(m->libs[i], ".so") == NULL)
				return bad(v, p, "not a library file name (like libstdc++.so.6)");
		}
	}
	if ((x = json_get(root, "size_hint_mb")) != NULL) {
		if (x->type != JSON_NUMBER || !x->u.num.is_int || x->u.num.i < 0 || x->u.num.i > 1000000)
			return bad(v, "$.size_hint_mb", "expected an integer 0..1000000");
		m->size_hint_mb = (long)x->u.num.i;
	}
	if ((x = json_get(root, "unpacked_size")) != NULL && parse_unpacked(v, m, x) < 0)
		return -1;
	if (parse_commands(v, m, root) < 0)
		return -1;
	return parse_source(v, m, root, o);
}

int
manifest_parse(manifest_t *m, const char *file, const char *dir, const char *text, size_t len,
               const struct manifest_opts *o, struct err *e)
{
	struct json_limits lim = json_default_limits;
	struct json_doc doc = {0};
	struct vctx v = {file, e};
	struct digest d;
	int rc;

	memset(m, 0, sizeof(*m));
	snprintf(m->file, sizeof(m->file), "%s", file);
	snprintf(m->dir, sizeof(m->dir), "%s", dir ? dir : "");
	m->embedded = dir == NULL;
	if (len > MANIFEST_MAX_BYTES)
		return err_set(e, INVALID, "%s: larger than %u bytes", file, MANIFEST_MAX_BYTES);
	lim.max_bytes = MANIFEST_MAX_BYTES;
	lim.reject_dup_keys = 1;
	if (json_parse(&doc, text, len, &lim, e) < 0) {
		/* keep the json.* code; say which file */
		err_set(e, e->code, "%s:%s", file, e->msg);
		return -1;
	}
	digest_buf(DIGEST_SHA256, text, len, &d);
	digest_hex(&d, m->sha256);
	rc = parse_doc(&v, m, doc.root, o);
	json_free(&doc);
	if (rc < 0) {
		return -1;
	}
	if (m->verify.argv.n == 0) {
		/* a tool that cannot be checked is not installed */
		return bad(&v, "$.verify", "missing");
	}
	if (m->source.type == MANIFEST_SRC_NPM_LOCK) {
		char *lock = NULL;
		size_t n = 0;
		struct digest_ctx c;

		if (manifest_read_sibling(m, m->source.lock, JSON_MAX_BYTES_DEFAULT, &lock, &n, e) < 0)
			return err_set(e, INVALID, "%s: $.source.lock: %s", file, e->msg);
		rc = manifest_npm_check_lock(m, lock, n, o->npm_mirror, e);
		/* the identity covers the lockfile too: a changed lockfile is a
		 * changed tool, and the fast path must notice */
		digest_init(&c, DIGEST_SHA256);
		digest_update(&c, text, len);
		digest_update(&c, lock, n);
		digest_final(&c, &d);
		digest_hex(&d, m->sha256);
		digest_buf(DIGEST_SHA256, lock, n, &d);
		digest_hex(&d, m->source.lock_sha256);
		free(lock);
		if (rc < 0) {
			return -1;
		}
	}
	return 0;
}

int
manifest_load_file(manifest_t *m, const char *path, const struct manifest_opts *o, struct err *e)
{
	char *text = NULL, dir[4096];
	size_t len = 0;
	int rc;

	if (fs_read_input(path, MANIFEST_MAX_BYTES, &text, &len, e) < 0) {
		if (e && e->code && strcmp(e->code, "not_found") == 0)
			err_set(e, INVALID, "%s: no such file", path);
		else if (e && e->code && strcmp(e->code, "io.error") == 0 && e->sys == EFBIG)
			err_set(e, INVALID, "%s: larger than %u bytes", path, MANIFEST_MAX_BYTES);
		return -1;
	}
	if (fs_dirname(path, dir, sizeof(dir)) < 0)
		snprintf(dir, sizeof(dir), ".");
	rc = manifest_parse(m, path, dir, text, len, o, e);
	free(text);
	return rc;
}

const struct manifest_artifact *
manifest_artifact(const manifest_t *m, const char *platform)
{
	int i;

	for (i = 0; i < m->source.nart; i++)
		if (strcmp(m->source.art[i].platform, platform) == 0)
			return &m->source.art[i];
	return NULL;
}

uint64_t
manifest_unpacked_size(const manifest_t *m, const char *platform)
{
	int i;

	for (i = 0; i < m->nunpacked; i++)
		if (strcmp(m->unpacked[i].platform, platform) == 0)
			return m->unpacked[i].bytes;
	return 0;
}

int
manifest_supports(const manifest_t *m, const char *platform)
{
	int i;

	if (m->nplatforms == 0)
		return 1;
	for (i = 0; i < m->nplatforms; i++)
		if (strcmp(m->platforms[i], platform) == 0)
			return 1;
	return 0;
}

int
manifest_read_sibling(const manifest_t *m, const char *rel, size_t max, char **out, size_t *len,
                      struct err *e)
{
	char path[8192];
	int i;

	if (!relpath_ok(rel))
		return err_set(e, INVALID, "'%s' is not a relative path", rel);
	if (!m->embedded) {
		if (fs_path_join(path, sizeof(path), m->dir, rel, NULL) != 0)
			return err_set(e, INVALID, "path too long");
		return fs_read_input(path, max, out, len, e);
	}
	for (i = 0; embedded_manifests[i].path != NULL; i++) {
		struct embedded_file *f = &embedded_manifests[i];
		const char *text;
		if (strcmp(f->path, rel) != 0)
			continue;
		if (f->len > max)
			return err_set(e, INVALID, "%s: larger than %zu bytes", rel, max);
		if ((text = embedded_text(f, e)) == NULL)
			return -1;
		*out = malloc(f->len + 1);
		if (*out == NULL)
			return err_set(e, "internal", "out of memory");
		memcpy(*out, text, f->len);
		(*out)[f->len] = '\0';
		*len = f->len;
		return 0;
	}
	return err_set(e, "not_found", "%s: not among the embedded files", rel);
}
