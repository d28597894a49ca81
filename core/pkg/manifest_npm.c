/*
 * The npm-lock part of manifest validation: the load-time contract every
 * npm-lock manifest must meet: the fields, allow_scripts false, and a
 * lockfile whose every package entry has an integrity and a resolved https
 * URL on one of the manifest's hosts. The parse checked here is for every
 * platform and is not kept: an install parses for its platform once, in
 * its context (core/install/install_npm.c).
 */
#include "pkg/manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "config/config.h"
#include "pkg/npmlock.h"

#define INVALID "install.manifest_invalid"

static const char *const npm_keys[] = {"type", "package",       "lock", "package_json",
                                       "bin",  "allow_scripts", NULL};

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
manifest_cpu_avx2(void)
{
	const char *v = config_env("ABX_INSTALL_AVX2");

	if (strcmp(manifest_platform_self(), MANIFEST_PLATFORM_X64) != 0)
		return 0;
	return v != NULL ? strcmp(v, "0") != 0 : cpu_has_avx2();
}

int
manifest_cpu_baseline(void)
{
	int level = config_cpu_level();

	if (strcmp(manifest_platform_self(), MANIFEST_PLATFORM_X64) != 0 || level == 2)
		return 0;
	return level == 1 || !manifest_cpu_avx2();
}

/*
 * npm-lock bins may name the platform package that holds a native binary
 * (Claude Code ships one per platform and libc and copies it into place with
 * a postinstall script, which never runs here): "{platform}" is this
 * machine's platform (linux-x64), "{cpu}" its processor as npm names it
 * (x64, arm64), "{arch}" as target triples name it (x86_64, aarch64:
 * Codex's vendor/<triple>/bin/codex), "{musl}" is "-musl" on a musl system
 * (see npmlock_detect_libc) and "" otherwise, "{linux}" is "linuxmusl" there
 * and "linux" otherwise (Copilot's package names), "{baseline}" is
 * "-baseline" when manifest_cpu_baseline() chooses the build for CPUs
 * without AVX2 (opencode, Droid, Kilo) and "" otherwise. Expanded once, at
 * load.
 */
int
manifest_bin_expand(const char *tmpl, const char *platform, int musl, int baseline, char *out, size_t cap)
{
	static const char *const names[] = {"{platform}", "{cpu}",      "{arch}", "{musl}",
	                                    "{linux}",    "{baseline}", NULL};
	int arm = strcmp(platform, MANIFEST_PLATFORM_ARM64) == 0, k, levels = 0;
	const char *p = tmpl, *rep;
	size_t o = 0, n, skip;

	while (*p) {
		rep = NULL;
		for (k = 0; names[k] != NULL; k++)
			if (strncmp(p, names[k], strlen(names[k])) == 0)
				break;
		switch (k) {
		case 0:
			rep = platform;
			break;
		case 1:
			rep = arm ? "arm64" : "x64";
			break;
		case 2:
			rep = arm ? "aarch64" : "x86_64";
			break;
		case 3:
			rep = musl ? "-musl" : "";
			break;
		case 4:
			rep = musl ? "linuxmusl" : "linux";
			break;
		case 5:
			rep = baseline ? "-baseline" : "";
			levels = 1;
			break;
		default:
			if (*p == '{' || *p == '}')
				return -1;
		}
		skip = rep != NULL ? strlen(names[k]) : 1;
		if (rep == NULL)
			rep = p, n = 1;
		else
			n = strlen(rep);
		if (o + n >= cap)
			return -2;
		memcpy(out + o, rep, n);
		o += n;
		p += skip;
	}
	out[o] = '\0';
	return levels;
}

/* The bin of m for this machine, expanded once, at load. */
static int
expand_bin(manifest_t *m, struct err *e)
{
	char out[MANIFEST_RELPATH_MAX];
	const char *b = m->source.bin;
	int rc;

	if (strpbrk(b, "{}") == NULL)
		return 0;
	rc =
	    manifest_bin_expand(b, manifest_platform_self(), strcmp(npmlock_detect_libc(NULL), "musl") == 0,
	                        strstr(b, "{baseline}") != NULL && manifest_cpu_baseline(), out, sizeof(out));
	if (rc == -1)
		return err_set(e, INVALID,
		               "%s: $.source.bin: unknown placeholder (known: {platform}, "
		               "{cpu}, {arch}, {musl}, {linux}, {baseline})",
		               m->file);
	if (rc < 0)
		return err_set(e, INVALID, "%s: $.source.bin: too long", m->file);
	m->source.cpu_levels = rc;
	memcpy(m->source.bin, out, strlen(out) + 1);
	return 0;
}

int
manifest_npm_validate(manifest_t *m, const struct json_val *src, struct err *e)
{
	const struct json_val *x;
	size_t i;
	int k;

	for (i = 0; i < src->u.obj.n; i++) {
		for (k = 0; npm_keys[k] != NULL; k++)
			if (json_key_is(&src->u.obj.m[i], npm_keys[k]))
				break;
		if (npm_keys[k] == NULL)
			return err_set(e, INVALID, "%s: $.source.%.60s: unknown field", m->file,
			               src->u.obj.m[i].key);
	}
	if (str_field(m, src, "package", m->source.package, sizeof(m->source.package), e) < 0 ||
	    str_field(m, src, "lock", m->source.lock, sizeof(m->source.lock), e) < 0 ||
	    str_field(m, src, "package_json", m->source.package_json, sizeof(m->source.package_json), e) <
	        0 ||
	    str_field(m, src, "bin", m->source.bin, sizeof(m->source.bin), e) < 0)
		return -1;
	if (!rel_ok(m->source.lock))
		return err_set(e, INVALID, "%s: $.source.lock: not a relative path beside the manifest",
		               m->file);
	if (!rel_ok(m->source.package_json))
		return err_set(e, INVALID,
		               "%s: $.source.package_json: not a relative path beside the manifest", m->file);
	if (!rel_ok(m->source.bin))
		return err_set(e, INVALID, "%s: $.source.bin: not a relative path inside the tree", m->file);
	if (expand_bin(m, e) < 0)
		return -1;
	x = json_get(src, "allow_scripts");
	if (x != NULL && x->type != JSON_FALSE)
		return err_set(e, INVALID,
		               "%s: $.source.allow_scripts: must be false (lifecycle scripts never run)",
		               m->file);
	return 0;
}

/*
 * The lockfile must pass the strict loader (core/pkg/npmlock.h) for every
 * platform at once (cpu and libc unknown: each entry is checked, none is
 * skipped): keys, duplicate keys, link entries, integrity (sha1-only
 * refused), resolved URLs on the manifest's hosts (or the configuration's
 * npm mirror, install.mirrors.npm) naming the entry's package, the root package
 * present, its bins inside it. Installs load it again for their platform.
 */
int
manifest_npm_check_lock(manifest_t *m, const char *lock, size_t len, const char *mirror, struct err *e)
{
	const char *hosts[MANIFEST_MAX_HOSTS];
	char mhost[MANIFEST_HOST_MAX] = "";
	struct npmlock_opts lo;
	struct npmlock l;
	char lf[300];
	int i;

	snprintf(lf, sizeof(lf), "%s", m->source.lock);
	for (i = 0; i < m->nhosts; i++)
		hosts[i] = m->hosts[i];
	if (mirror != NULL && strncmp(mirror, "https://", 8) == 0) {
		size_t n = strcspn(mirror + 8, "/?#");
		if (n > 0 && n < sizeof(mhost)) {
			memcpy(mhost, mirror + 8, n);
			mhost[n] = '\0';
		}
	}
	memset(&lo, 0, sizeof(lo));
	lo.package = m->source.package;
	lo.hosts = hosts;
	lo.nhosts = (size_t)m->nhosts;
	lo.mirror_host = mhost[0] ? mhost : NULL;
	lo.os = "linux";
	if (npmlock_load(&l, lock, len, &lo, e) < 0) {
		const char *code = e->code;
		/* "not JSON" keeps its json.* code; every rule is manifest_invalid */
		return err_set(e, strncmp(code, "json.", 5) == 0 ? code : INVALID, "%s: lockfile %s: %s",
		               m->file, lf, e->msg);
	}
	npmlock_free(&l);
	return 0;
}
