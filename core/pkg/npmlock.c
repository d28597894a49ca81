/*
 * The strict package-lock.json loader; the rules are listed in npmlock.h.
 */
#include "pkg/npmlock.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "config/config.h"
#include "pkg/manifest.h"

#define BAD "install.manifest_invalid"

/* JSON path prefix for messages about one entry. Keys are bounded by the
 * path check before they are printed whole; a rejected key is cut. */
static int entry_err(struct err *e, const char *key, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
entry_err(struct err *e, const char *key, const char *field, const char *fmt, ...)
{
	char what[ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	err_fmtv(what, sizeof(what), fmt, ap);
	va_end(ap);
	return err_set(e, BAD, "$.packages[\"%.120s\"]%s%s: %s", key, field ? "." : "", field ? field : "",
	               what);
}

static int
is_name_char(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

/* One unscoped name part: [A-Za-z0-9._~-]+, not starting with '.', not "."
 * or "..", no percent-encoding or other URL-special bytes. Upper case is
 * allowed because old packages on the registry have it. */
static int
part_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > NPMLOCK_NAME_MAX || s[0] == '.')
		return 0;
	for (i = 0; i < n; i++)
		if (!is_name_char((unsigned char)s[i]))
			return 0;
	return 1;
}

int
npmlock_name_ok(const char *name, size_t len)
{
	const char *slash;

	if (name == NULL || len == 0 || len > NPMLOCK_NAME_MAX || memchr(name, '\0', len))
		return 0;
	if (name[0] != '@')
		return part_ok(name, len);
	slash = memchr(name, '/', len);
	if (slash == NULL)
		return 0;
	return part_ok(name + 1, (size_t)(slash - name - 1)) &&
	       part_ok(slash + 1, len - (size_t)(slash - name) - 1);
}

int
npmlock_path_ok(const char *key, const char **folder)
{
	static const char nm[] = "node_modules/";
	const char *p = key, *start, *end;
	size_t n;

	if (key == NULL || strlen(key) > NPMLOCK_PATH_MAX - 1 || *p == '\0')
		return 0;
	for (;;) {
		if (strncmp(p, nm, sizeof(nm) - 1) != 0)
			return 0;
		p += sizeof(nm) - 1;
		start = p;
		end = strchr(p, '/');
		if (*p == '@') {
			/* scoped: @scope/name, the slash belongs to the name */
			if (end == NULL)
				return 0;
			end = strchr(end + 1, '/');
		}
		n = end ? (size_t)(end - start) : strlen(start);
		if (!npmlock_name_ok(start, n))
			return 0;
		if (end == NULL) {
			if (folder)
				*folder = start;
			return 1;
		}
		p = end + 1;
	}
}

/* npm-install-checks' checkList: "any" alone matches; the value must match
 * none of the negated entries and one of the plain ones, if there are any. */
static int
list_match(const char *const *items, size_t n, const char *value)
{
	size_t i, negated = 0;
	int match = 0;

	if (n == 1 && strcmp(items[0], "any") == 0)
		return 1;
	for (i = 0; i < n; i++) {
		if (items[i][0] == '!') {
			negated++;
			if (value != NULL && strcmp(items[i] + 1, value) == 0)
				return 0;
		} else if (value != NULL && strcmp(items[i], value) == 0) {
			match = 1;
		}
	}
	return match || negated == n;
}

/* A platform list longer than this is malformed: the real lists name one or
 * two values. */
#define PLATFORM_LIST_MAX 32

int
npmlock_platform_match(const struct json_val *list, const char *value)
{
	const char *items[PLATFORM_LIST_MAX];
	size_t i, n = 0;

	if (list == NULL)
		return 1;
	if (list->type == JSON_STRING) {
		items[n++] = list->u.str.s;
	} else if (list->type == JSON_ARRAY) {
		if (list->u.arr.n > PLATFORM_LIST_MAX)
			return -1;
		for (i = 0; i < list->u.arr.n; i++) {
			if (list->u.arr.v[i].type != JSON_STRING)
				return -1;
			items[n++] = list->u.arr.v[i].u.str.s;
		}
		if (n == 0)
			return 1; /* npm: an empty list restricts nothing */
	} else {
		return -1;
	}
	/* value NULL: the caller does not know it (e.g. every cpu is wanted,
	 * as `lock` wants); everything applies. */
	if (value == NULL)
		return 1;
	return list_match(items, n, value);
}

const char *
npmlock_cpu_for(const char *platform)
{
	if (platform == NULL)
		return NULL;
	if (strcmp(platform, "linux-x64") == 0)
		return "x64";
	if (strcmp(platform, "linux-arm64") == 0)
		return "arm64";
	return NULL;
}

/* The program interpreters (PT_INTERP) a dynamically linked program of
 * this machine's architecture names: the exact paths the kernel opens. */
#if defined(__aarch64__)
#define LOADER_GLIBC "/lib/ld-linux-aarch64.so.1"
#define LOADER_MUSL "/lib/ld-musl-aarch64.so.1"
#define MULTIARCH "aarch64-linux-gnu"
#define MUSL_PATH "/etc/ld-musl-aarch64.path"
#else
#define LOADER_GLIBC "/lib64/ld-linux-x86-64.so.2"
#define LOADER_MUSL "/lib/ld-musl-x86_64.so.1"
#define MULTIARCH "x86_64-linux-gnu"
#define MUSL_PATH "/etc/ld-musl-x86_64.path"
#endif
/* A configuration file of library directories is a few lines; more than
 * this is not read (the library then counts as missing only if it is in
 * none of the standard directories either). */
#define LIBDIR_FILE_MAX 8192

const char *
npmlock_libc_loader(const char *libc)
{
	if (libc != NULL && strcmp(libc, "glibc") == 0)
		return LOADER_GLIBC;
	if (libc != NULL && strcmp(libc, "musl") == 0)
		return LOADER_MUSL;
	return NULL;
}

/* path under root exists (through symlinks, which are resolved on the
 * host: a root built for a test holds relative or root-local links). */
static int
loader_present(const char *root, const char *path)
{
	char p[1024];
	struct stat st;

	if ((size_t)snprintf(p, sizeof(p), "%s%s", root, path) >= sizeof(p))
		return 0;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* soname in dir under root: 1 or 0. */
static int
lib_in(const char *root, const char *dir, size_t dlen, const char *soname)
{
	char p[1024];

	if (dlen == 0 || dir[0] != '/' ||
	    (size_t)snprintf(p, sizeof(p), "%s%.*s/%s", root, (int)dlen, dir, soname) >= sizeof(p))
		return 0;
	return loader_present("", p);
}

/* soname in one of the directories listed in file (one per line, or
 * separated by ':' as musl's path file allows; '#' starts a comment). */
static int
lib_in_listed(const char *root, const char *file, const char *soname)
{
	char p[1024], buf[LIBDIR_FILE_MAX + 1];
	const char *s, *e;
	ssize_t n;
	int fd, found = 0;

	if ((size_t)snprintf(p, sizeof(p), "%s%s", root, file) >= sizeof(p) ||
	    (fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, LIBDIR_FILE_MAX);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	for (s = buf; !found && *s; s = *e ? e + 1 : e) {
		e = s + strcspn(s, "\n:#");
		found = lib_in(root, s, (size_t)(e - s), soname);
		if (*e == '#')
			e += strcspn(e, "\n");
	}
	return found;
}

int
npmlock_lib_present(const char *root, const char *libc, const char *soname)
{
	static const char *const glibc_dirs[] = {"/lib/" MULTIARCH, "/usr/lib/" MULTIARCH, "/lib", "/usr/lib",
	                                         "/lib64",          "/usr/lib64",          NULL};
	static const char *const musl_dirs[] = {"/lib", "/usr/local/lib", "/usr/lib", NULL};
	const char *const *d;
	char p[1024], **names;
	size_t count, i;
	struct err e = {0};
	int found = 0;

	if (root == NULL || *root == '\0' || strcmp(root, "/") == 0)
		root = "";
	if (strchr(soname, '/') != NULL)
		return 0;
	for (d = strcmp(libc, "musl") == 0 ? musl_dirs : glibc_dirs; *d != NULL; d++)
		if (lib_in(root, *d, strlen(*d), soname))
			return 1;
	if (strcmp(libc, "musl") == 0)
		return lib_in_listed(root, MUSL_PATH, soname);
	/* the directory's names, not glob(3): glob costs the static binary 20 KiB */
	if (fs_path_join(p, sizeof(p), root, "etc/ld.so.conf.d", NULL) < 0 ||
	    fs_dir_names(AT_FDCWD, p, "io.error", &names, &count, &e) != 0)
		return 0;
	for (i = 0; !found && i < count; i++) {
		size_t n = strlen(names[i]);
		char f[300];

		if (n > 5 && strcmp(names[i] + n - 5, ".conf") == 0 && names[i][0] != '.' &&
		    (size_t)snprintf(f, sizeof(f), "/etc/ld.so.conf.d/%s", names[i]) < sizeof(f))
			found = lib_in_listed(root, f, soname);
	}
	free(names);
	return found;
}

const char *
npmlock_detect_libc(const char *root)
{
	const char *env = config_env("ABX_INSTALL_LIBC");

	if (env != NULL &&
	    (strcmp(env, "glibc") == 0 || strcmp(env, "musl") == 0 || strcmp(env, "none") == 0))
		return strcmp(env, "musl") == 0 ? "musl" : strcmp(env, "none") == 0 ? "none" : "glibc";
	if (root == NULL || *root == '\0' || strcmp(root, "/") == 0)
		root = "";
	/* Both present (a Debian host with the musl package): the distribution's
	 * own is glibc, and a glibc build is what its other programs use. */
	if (loader_present(root, LOADER_GLIBC))
		return "glibc";
	if (loader_present(root, LOADER_MUSL))
		return "musl";
	return "none";
}

/* Optional boolean member: 0/1, or -1 when present and not a boolean. */
static int
get_bool(const struct json_val *obj, const char *key)
{
	const struct json_val *v = json_get(obj, key);

	if (v == NULL)
		return 0;
	if (v->type == JSON_TRUE)
		return 1;
	if (v->type == JSON_FALSE)
		return 0;
	return -1;
}

/* A string member that must be a string without NUL when present. */
static int
get_string(const struct json_val *obj, const char *key, const char **out)
{
	const struct json_val *v = json_get(obj, key);

	*out = NULL;
	if (v == NULL)
		return 0;
	if (v->type != JSON_STRING || strlen(v->u.str.s) != v->u.str.len)
		return -1;
	*out = v->u.str.s;
	return 0;
}

static int
host_allowed(const char *host, size_t hlen, const char *port, size_t plen, const struct npmlock_opts *o)
{
	size_t i, n;
	const char *h;

	for (i = 0; i <= o->nhosts; i++) {
		h = i < o->nhosts ? o->hosts[i] : o->mirror_host;
		if (h == NULL)
			continue;
		n = strcspn(h, ":");
		if (n != hlen || strncasecmp(h, host, hlen) != 0)
			continue;
		if (h[n] == '\0')
			return 1; /* any port */
		if (plen == strlen(h + n + 1) && strncmp(h + n + 1, port, plen) == 0)
			return 1;
	}
	return 0;
}

/* resolved must be https://host[:port]<prefix>/<name>/-/<unscoped>-<version>.tgz
 * with the host allowed; *path receives where the "/<name>/-/" part starts. */
static int
check_resolved(const char *key, const char *url, const char *name, const char *version,
               const struct npmlock_opts *o, const char **path, struct err *e)
{
	const char *auth, *slash, *colon, *p, *unscoped;
	char tail[2 * NPMLOCK_NAME_MAX + 300], tail_enc[sizeof(tail) + 2];
	size_t alen, plen, tlen, i;

	if (strncmp(url, "https://", 8) != 0)
		return entry_err(e, key, "resolved", "not an https URL: %.80s", url);
	if (strlen(url) > 2048)
		return entry_err(e, key, "resolved", "URL too long");
	for (p = url; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f || *p == '\\' || *p == '?' ||
		    *p == '#')
			return entry_err(e, key, "resolved",
			                 "URL has a space, control, query or fragment byte");
	auth = url + 8;
	slash = strchr(auth, '/');
	if (slash == NULL)
		return entry_err(e, key, "resolved", "URL has no path");
	alen = (size_t)(slash - auth);
	if (memchr(auth, '@', alen))
		return entry_err(e, key, "resolved", "URL has user information");
	colon = memchr(auth, ':', alen);
	plen = colon ? (size_t)(slash - colon - 1) : 0;
	if (colon) {
		if (plen == 0 || plen > 5)
			return entry_err(e, key, "resolved", "bad port");
		for (i = 0; i < plen; i++)
			if (!isdigit((unsigned char)colon[1 + i]))
				return entry_err(e, key, "resolved", "bad port");
		alen = (size_t)(colon - auth);
	}
	if (alen == 0)
		return entry_err(e, key, "resolved", "URL has no host");
	if (!host_allowed(auth, alen, colon ? colon + 1 : "", plen, o))
		return entry_err(e, key, "resolved",
		                 "host %.*s is not in hosts (the manifest's hosts or the npm mirror)",
		                 (int)alen, auth);
	/* A ".." or "." segment in the path could make the registry serve another
	 * package than the one the name check below saw. */
	if (strstr(slash, "/../") || strstr(slash, "/./") || strstr(slash, "//"))
		return entry_err(e, key, "resolved", "URL path has a dot or empty segment");

	unscoped = name[0] == '@' ? strchr(name, '/') + 1 : name;
	tlen = (size_t)snprintf(tail, sizeof(tail), "/%s/-/%s-%s.tgz", name, unscoped, version);
	if (tlen >= sizeof(tail))
		return entry_err(e, key, "resolved", "name or version too long");
	/* Scoped names may be written with the slash encoded (%2f), as some
	 * registries answer them. */
	tail_enc[0] = '\0';
	if (name[0] == '@') {
		size_t sl = (size_t)(strchr(name, '/') - name);
		snprintf(tail_enc, sizeof(tail_enc), "/%.*s%%2f%s/-/%s-%s.tgz", (int)sl, name, name + sl + 1,
		         unscoped, version);
	}
	plen = strlen(slash);
	if (plen >= tlen && strcmp(slash + plen - tlen, tail) == 0) {
		*path = slash + plen - tlen;
		return 0;
	}
	if (tail_enc[0] != '\0') {
		size_t el = strlen(tail_enc);
		if (plen >= el && strcasecmp(slash + plen - el, tail_enc) == 0) {
			*path = slash + plen - el;
			return 0;
		}
	}
	return entry_err(e, key, "resolved", "URL does not name %s@%s (expected a path ending in %s)", name,
	                 version, tail);
}

/* npm's join('/', x).slice(1): collapse "." and empty segments, resolve "..";
 * a ".." above the top is refused (npm would silently re-root it). Returns 0,
 * -1 on escape or overflow; out empty when nothing remains. */
static int
normalise_rel(const char *in, char *out, size_t cap)
{
	size_t o = 0, n;
	const char *p = in, *q;

	out[0] = '\0';
	while (*p) {
		while (*p == '/' || *p == '\\')
			p++;
		if (*p == '\0')
			break;
		for (q = p; *q && *q != '/' && *q != '\\'; q++)
			;
		n = (size_t)(q - p);
		if (n == 1 && p[0] == '.') {
			/* nothing */
		} else if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (o == 0)
				return -1;
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--; /* the slash */
			out[o] = '\0';
		} else {
			if (o + (o ? 1 : 0) + n + 1 > cap)
				return -1;
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
			out[o] = '\0';
		}
		p = q;
	}
	return 0;
}

/* The bin link name: npm's basename(key with '\\' and ':' read as '/'); ""
 * (dropped) for ".", ".." and empty names. */
static void
bin_name(const char *key, char *out, size_t cap)
{
	const char *b = key, *p;
	size_t n;

	for (p = key; *p; p++)
		if (*p == '/' || *p == '\\' || *p == ':')
			b = p + 1;
	n = strlen(b);
	out[0] = '\0';
	if (n == 0 || n >= cap || strcmp(b, ".") == 0 || strcmp(b, "..") == 0)
		return;
	memcpy(out, b, n + 1);
}

static int
add_bin(struct npmlock *l, const char *key, const char *name, const char *target, struct err *e)
{
	struct npmlock_bin *b;
	size_t i;
	char nm[NPMLOCK_NAME_MAX + 1];

	bin_name(name, nm, sizeof(nm));
	if (nm[0] == '\0')
		return 0;
	if (l->nbins >= NPMLOCK_BINS_MAX)
		return entry_err(e, key, "bin", "more than %d bins", NPMLOCK_BINS_MAX);
	b = &l->bins[l->nbins];
	if (normalise_rel(target, b->target, sizeof(b->target)) != 0)
		return entry_err(e, key, "bin", "%.60s: target %.80s leaves the package", nm, target);
	if (b->target[0] == '\0')
		return 0;
	for (i = 0; i < l->nbins; i++)
		if (strcmp(l->bins[i].name, nm) == 0)
			return entry_err(e, key, "bin", "two bins named %s", nm);
	memcpy(b->name, nm, strlen(nm) + 1);
	l->nbins++;
	return 0;
}

static int
load_bins(struct npmlock *l, const char *key, const struct json_val *entry, const char *name, struct err *e)
{
	const struct json_val *bin = json_get(entry, "bin");
	size_t i;

	if (bin == NULL)
		return 0;
	l->bins = calloc(NPMLOCK_BINS_MAX, sizeof(*l->bins));
	if (l->bins == NULL)
		return err_set(e, "internal", "out of memory");
	if (bin->type == JSON_STRING) {
		if (strlen(bin->u.str.s) != bin->u.str.len)
			return entry_err(e, key, "bin", "NUL byte");
		return add_bin(l, key, name, bin->u.str.s, e);
	}
	if (bin->type != JSON_OBJECT)
		return entry_err(e, key, "bin", "neither a string nor an object");
	for (i = 0; i < bin->u.obj.n; i++) {
		const struct json_member *m = &bin->u.obj.m[i];
		if (strlen(m->key) != m->keylen)
			return entry_err(e, key, "bin", "NUL byte in a name");
		if (m->val.type != JSON_STRING)
			continue; /* npm drops non-string targets */
		if (strlen(m->val.u.str.s) != m->val.u.str.len)
			return entry_err(e, key, "bin", "NUL byte in a target");
		if (add_bin(l, key, m->key, m->val.u.str.s, e) != 0)
			return -1;
	}
	return 0;
}

/* 1 when path lies strictly below prefix ("a" and "a/node_modules/b"). */
static int
below(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	return strncmp(path, prefix, n) == 0 && path[n] == '/';
}

enum { SEL_NO = 0, SEL_YES, SEL_SKIP, SEL_DEV };

static int
load_entry(struct npmlock *l, const struct json_member *m, const struct npmlock_opts *o, int *sel,
           struct err *e)
{
	const struct json_val *v = &m->val;
	struct npmlock_pkg *p = &l->pkgs[l->npkgs];
	const char *folder, *os = o->os ? o->os : "linux";
	int b, bundle, optional, dev, devopt, rc;
	static const char *const plat_keys[] = {"os", "cpu", "libc"};
	const char *plat_vals[3];
	size_t i;

	*sel = SEL_NO;
	if (strlen(m->key) != m->keylen || !npmlock_path_ok(m->key, &folder))
		return entry_err(
		    e, m->key, NULL,
		    "not a node_modules/<name> path (no \"..\", \".\", empty segments, backslashes, "
		    "absolute paths or workspaces)");
	if (v->type != JSON_OBJECT)
		return entry_err(e, m->key, NULL, "not an object");
	if ((b = get_bool(v, "link")) != 0)
		return b < 0 ? entry_err(e, m->key, "link", "not a boolean")
		             : entry_err(e, m->key, "link",
		                         "link entries point outside the locked tree; lock a registry "
		                         "version instead");
	if ((bundle = get_bool(v, "inBundle")) < 0 || (optional = get_bool(v, "optional")) < 0 ||
	    (dev = get_bool(v, "dev")) < 0 || (devopt = get_bool(v, "devOptional")) < 0)
		return entry_err(e, m->key, NULL, "inBundle/optional/dev/devOptional must be booleans");

	memset(p, 0, sizeof(*p));
	p->path = m->key;
	p->folder = folder;
	p->in_bundle = bundle;
	p->optional = optional;
	if (get_string(v, "name", &p->name) != 0)
		return entry_err(e, m->key, "name", "not a string");
	if (p->name == NULL)
		p->name = folder;
	else if (!npmlock_name_ok(p->name, strlen(p->name)))
		return entry_err(e, m->key, "name", "not a valid package name");
	if (get_string(v, "version", &p->version) != 0 || get_string(v, "resolved", &p->resolved) != 0 ||
	    get_string(v, "integrity", &p->integrity) != 0)
		return entry_err(e, m->key, NULL, "version/resolved/integrity must be strings");

	/* Platform first: a package that does not apply need not be fetchable. */
	plat_vals[0] = os;
	plat_vals[1] = o->cpu;
	plat_vals[2] = o->libc;
	for (i = 0; i < 3; i++) {
		const struct json_val *lst = json_get(v, plat_keys[i]);
		/* npm reads libc only on linux, where we always are. */
		rc = npmlock_platform_match(lst, plat_vals[i]);
		if (rc < 0)
			return entry_err(e, m->key, plat_keys[i], "not a string or a list of strings");
		if (rc == 0) {
			if (dev || devopt) {
				*sel = SEL_DEV;
				return 0;
			}
			if (!optional)
				return entry_err(e, m->key, plat_keys[i],
				                 "the package does not support %s (%s) and is not optional",
				                 plat_vals[i], plat_keys[i]);
			*sel = SEL_SKIP;
			return 0;
		}
	}
	if (dev || devopt) {
		*sel = SEL_DEV;
		return 0;
	}
	if (o->only != NULL && optional && folder == m->key + 13 && strcmp(m->key, o->only) != 0) {
		*sel = SEL_SKIP;
		return 0;
	}
	if (bundle) {
		/* Arrives inside its parent's tarball; whatever resolved says is
		 * not fetched, so it is not checked either. */
		p->resolved = p->integrity = NULL;
		*sel = SEL_YES;
		return 0;
	}
	if (p->version == NULL || !manifest_version_ok(p->version, NPMLOCK_VERSION_MAX))
		return entry_err(e, m->key, "version", p->version ? "not a plain version" : "missing");
	if (p->resolved == NULL)
		return entry_err(e, m->key, "resolved",
		                 "missing: every package must name its https download URL");
	if (p->integrity == NULL)
		return entry_err(e, m->key, "integrity",
		                 "missing: every package must be pinned by an integrity hash");
	if (digest_parse_sri(p->integrity, &p->digest, BAD, e) != 0)
		return entry_err(e, m->key, "integrity", "%s", e->msg);
	if (p->digest.alg == DIGEST_SHA1)
		return entry_err(
		    e, m->key, "integrity",
		    "sha1 only; re-lock with a current npm so the registry's sha512 is recorded");
	if (check_resolved(m->key, p->resolved, p->name, p->version, o, &p->url_path, e) != 0)
		return -1;
	*sel = SEL_YES;
	return 0;
}

int
npmlock_load(struct npmlock *l, const char *text, size_t len, const struct npmlock_opts *o, struct err *e)
{
	const struct json_val *root, *ver, *pk;
	struct json_limits lim = json_default_limits;
	unsigned char *sel = NULL;
	size_t i, j, n, nsel;
	char rootpath[NPMLOCK_PATH_MAX];

	memset(l, 0, sizeof(*l));
	lim.reject_dup_keys = 1;
	if (json_parse(&l->doc, text, len, &lim, e) != 0)
		return -1;
	root = l->doc.root;
	if (root->type != JSON_OBJECT) {
		err_set(e, BAD, "$: not a JSON object");
		goto fail;
	}
	ver = json_get(root, "lockfileVersion");
	pk = json_get(root, "packages");
	if (ver == NULL || ver->type != JSON_NUMBER || !ver->u.num.is_int) {
		err_set(e, BAD, "$.lockfileVersion: missing or not an integer");
		goto fail;
	}
	if (ver->u.num.i == 1 || pk == NULL) {
		err_set(e, BAD,
		        "$.lockfileVersion: version 1 lockfiles have no packages map; regenerate with "
		        "`agent-sandbox-server lock NAME` (npm 7 or newer)");
		goto fail;
	}
	if (ver->u.num.i != 2 && ver->u.num.i != 3) {
		err_set(e, BAD, "$.lockfileVersion: %lld is not supported (2 or 3)", (long long)ver->u.num.i);
		goto fail;
	}
	l->version = (int)ver->u.num.i;
	if (pk->type != JSON_OBJECT) {
		err_set(e, BAD, "$.packages: not an object");
		goto fail;
	}
	if (o == NULL || o->package == NULL || !npmlock_name_ok(o->package, strlen(o->package))) {
		err_set(e, BAD, "source.package: not a valid npm package name");
		goto fail;
	}
	n = pk->u.obj.n;
	if (n > NPMLOCK_PKGS_MAX) {
		err_set(e, BAD, "$.packages: more than %d entries", NPMLOCK_PKGS_MAX);
		goto fail;
	}
	l->pkgs = calloc(n ? n : 1, sizeof(*l->pkgs));
	sel = calloc(n ? n : 1, 1);
	if (l->pkgs == NULL || sel == NULL) {
		err_set(e, "internal", "out of memory");
		goto fail;
	}

	/* Pass 1: every entry on its own. l->pkgs is filled densely with the
	 * selected ones; skipped paths are remembered in sel by member index. */
	for (i = 0; i < n; i++) {
		const struct json_member *m = &pk->u.obj.m[i];
		int s;

		if (m->keylen == 0) {
			if (m->val.type != JSON_OBJECT) {
				err_set(e, BAD, "$.packages[\"\"]: not an object");
				goto fail;
			}
			continue; /* the wrapper project itself */
		}
		if (load_entry(l, m, o, &s, e) != 0)
			goto fail;
		sel[i] = (unsigned char)s;
		if (s == SEL_YES)
			l->npkgs++;
	}

	/* Pass 2: nothing is installed below a skipped package; an inBundle
	 * entry needs a selected ancestor that is not itself bundled-only
	 * (somebody's tarball must bring it). */
	nsel = 0;
	for (i = 0, j = 0; i < n; i++) {
		const struct json_member *m = &pk->u.obj.m[i];
		size_t k;
		int drop = 0;

		if (sel[i] == SEL_NO)
			continue;
		for (k = 0; k < n && !drop; k++)
			if ((sel[k] == SEL_SKIP || sel[k] == SEL_DEV) && below(m->key, pk->u.obj.m[k].key))
				drop = 1;
		if (sel[i] == SEL_SKIP || (drop && sel[i] == SEL_YES))
			l->nskipped++;
		else if (sel[i] == SEL_DEV)
			l->ndev++;
		if (sel[i] == SEL_YES) {
			if (!drop)
				l->pkgs[nsel++] = l->pkgs[j];
			j++;
		}
	}
	l->npkgs = nsel;
	for (i = 0; i < l->npkgs; i++) {
		const struct npmlock_pkg *p = &l->pkgs[i];
		int has_parent = 0;

		if (!p->in_bundle)
			continue;
		for (j = 0; j < l->npkgs; j++)
			if (!l->pkgs[j].in_bundle && below(p->path, l->pkgs[j].path))
				has_parent = 1;
		if (!has_parent) {
			entry_err(e, p->path, "inBundle", "no installed parent package brings it");
			goto fail;
		}
	}

	snprintf(rootpath, sizeof(rootpath), "node_modules/%s", o->package);
	for (i = 0; i < l->npkgs; i++)
		if (strcmp(l->pkgs[i].path, rootpath) == 0)
			l->root = &l->pkgs[i];
	if (l->root == NULL || l->root->in_bundle) {
		err_set(e, BAD, "$.packages[\"%s\"]: missing (the lockfile does not install %s)", rootpath,
		        o->package);
		goto fail;
	}
	for (i = 0; i < n; i++)
		if (json_key_is(&pk->u.obj.m[i], rootpath) &&
		    load_bins(l, rootpath, &pk->u.obj.m[i].val, l->root->name, e) != 0)
			goto fail;
	free(sel);
	return 0;
fail:
	free(sel);
	npmlock_free(l);
	return -1;
}

void
npmlock_free(struct npmlock *l)
{
	if (l == NULL)
		return;
	json_free(&l->doc);
	free(l->pkgs);
	free(l->bins);
	memset(l, 0, sizeof(*l));
}
