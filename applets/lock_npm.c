/*
 * lock for npm-lock sources: npm itself resolves the version and writes
 * the lockfile (`npm install --package-lock-only --ignore-scripts` in a
 * scratch directory, every platform's optional packages recorded); the
 * lockfile is then held to the same loader and rules as installs before it
 * and its package.json are written beside the manifest. --check needs no
 * npm: the registry's latest version is asked by our own client.
 */
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "base/buf.h"
#include "base/fs.h"
#include "net/http.h"
#include "pkg/npmlock.h"
#include "base/proc.h"
#include "lock.h"

/* Output of `npm view` kept (one version per line for a range). */
#define LOCK_NPM_OUT_MAX 4096
/* Variables of ours npm sees (the rest of the environment is dropped, so
 * no npm_config_* of the caller changes what is resolved). */
#define LOCK_NPM_ENV_MAX 28
/* npm's arguments: ours plus the config and CA flags. */
#define LOCK_NPM_ARGS_MAX 30

/* One npm-lock run: the source fields, the hosts the lockfile may name, and
 * a scratch directory with empty npmrc files (--globalconfig, --userconfig). */
struct npm_job {
	struct doc *d;
	const char *pkg, *lockrel, *pjrel;
	struct hosts h;
	char reg[512];
	const struct config *cfg; /* install.mirrors.npm and its credential */
	char scratch[32];
	char rc[PATH_MAX], grc[PATH_MAX];
};

/* What npm_sink keeps: stdout for the caller, the tail of stderr (where
 * npm says why it failed) for run_npm. */
struct npm_out {
	struct proc_capture *c; /* NULL: stdout is not wanted */
	char err[2048];
	size_t nerr;
};

/* npm's stdout into the capture (when the caller wants it), everything
 * else to our stderr as it comes, so npm's progress and errors are seen,
 * and its last bytes kept. */
static void
npm_sink(void *arg, enum proc_stream s, const char *data, size_t len)
{
	struct npm_out *o = arg;
	size_t k;

	if (s == PROC_STDOUT) {
		if (o->c != NULL)
			proc_capture_sink(o->c, s, data, len);
		return;
	}
	k = len < sizeof(o->err) - 1 ? len : sizeof(o->err) - 1;
	if (o->nerr + k > sizeof(o->err) - 1) {
		size_t drop = o->nerr + k - (sizeof(o->err) - 1);
		memmove(o->err, o->err + drop, o->nerr - drop);
		o->nerr -= drop;
	}
	memcpy(o->err + o->nerr, data + len - k, k);
	o->nerr += k;
	o->err[o->nerr] = '\0';
	(void)!fs_write_all(2, data, len, -1);
}

/* The caller's environment reduced to what npm needs to reach the registry,
 * plus NODE_EXTRA_CA_CERTS from SSL_CERT_FILE (extra holds it). */
static void
npm_env(char **env, char *extra, size_t cap)
{
	static const char *keep[] = {
	    "PATH=",       "HOME=",     "HTTPS_PROXY=", "HTTP_PROXY=", "NO_PROXY=", "https_proxy=",
	    "http_proxy=", "no_proxy=", "LANG=",        "TMPDIR=",     NULL};
	int i, k, n = 0;

	for (i = 0; environ[i] != NULL && n < LOCK_NPM_ENV_MAX; i++)
		for (k = 0; keep[k] != NULL; k++)
			if (strncmp(environ[i], keep[k], strlen(keep[k])) == 0)
				env[n++] = environ[i];
	if (config_env("SSL_CERT_FILE") != NULL) {
		snprintf(extra, cap, "NODE_EXTRA_CA_CERTS=%s", config_env("SSL_CERT_FILE"));
		env[n++] = extra;
	}
	env[n] = NULL;
}

/* Run npm (ABX_NPM, else npm on PATH) with args in the scratch directory,
 * a scrubbed environment, stdout captured into out (when not NULL). Returns
 * its exit status (128 + signal when killed), or -1 with e when it could
 * not start, or (with e404) -1 with not_found naming what npm's E404 says
 * the registry lacks. */
static int
run_npm(const struct npm_job *j, char *const args[], char *out, size_t cap, int e404, struct err *e)
{
	char *env[LOCK_NPM_ENV_MAX + 2], *argv[LOCK_NPM_ARGS_MAX + 10], extra[PATH_MAX + 32], prog[PATH_MAX];
	const char *npm = config_env("ABX_NPM"), *cafile = config_env("SSL_CERT_FILE");
	struct proc_capture c;
	struct proc_spec spec;
	struct npm_out *o;
	const char *q, *b;
	char what[400];
	struct proc p;
	int i, k, rc;

	if (out != NULL)
		out[0] = '\0';
	npm = npm != NULL && *npm != '\0' ? npm : "npm";
	if (proc_which(npm, config_env("PATH"), prog, sizeof(prog), e) != 0)
		return err_set(e, "io.error", "cannot run %s: %s (set ABX_NPM or install npm)", npm,
		               e->code != NULL && strcmp(e->code, "not_found") == 0 ? "not found on PATH"
		                                                                    : e->msg);
	npm_env(env, extra, sizeof(extra));
	argv[0] = prog;
	for (i = 0; args[i] != NULL && i < LOCK_NPM_ARGS_MAX; i++)
		argv[i + 1] = args[i];
	k = i + 1;
	/* Neither the user's nor the machine's npmrc: a global `cafile`
	 * would hide NODE_EXTRA_CA_CERTS, a user `omit-lockfile-registry-
	 * resolved` would drop the URLs we check. With SSL_CERT_FILE set our
	 * own client trusts only that file; npm then does the same. */
	argv[k++] = "--globalconfig";
	argv[k++] = (char *)j->grc;
	argv[k++] = "--userconfig";
	argv[k++] = (char *)j->rc;
	if (cafile != NULL && *cafile != '\0') {
		argv[k++] = "--cafile";
		argv[k++] = (char *)cafile;
	}
	argv[k] = NULL;
	memset(&spec, 0, sizeof(spec));
	spec.argv = argv;
	spec.envp = env;
	spec.cwd = j->scratch;
	if (proc_spawn(&p, &spec, e) != 0) {
		return err_set(e, "io.error", "%s (set ABX_NPM or install npm)", e->msg);
	}
	memset(&c, 0, sizeof(c));
	c.cap = cap > 0 ? cap - 1 : 0;
	proc_capture_begin(&c);
	o = calloc(1, sizeof(*o));
	if (o != NULL)
		o->c = out != NULL ? &c : NULL;
	while (proc_step(&p, -1, npm_sink, o) == 1)
		;
	proc_close(&p);
	if (out != NULL)
		snprintf(out, cap, "%s", c.out != NULL ? c.out : "");
	proc_capture_free(&c);
	rc = proc_exit_code(&p);
	/* npm's E404 names what the registry lacks in quotes ("404 'pkg@ver'
	 * is not in this registry", or "The requested resource 'pkg@ver'
	 * could not be found") */
	if (e404 && rc != 0 && o != NULL && (q = strstr(o->err, "E404")) != NULL) {
		snprintf(what, sizeof(what), "%s", j->pkg);
		if ((b = strchr(q, '\'')) != NULL && (q = strchr(b + 1, '\'')) != NULL && q - b > 1)
			snprintf(what, sizeof(what), "%.*s", (int)(q - b - 1), b + 1);
		free(o);
		return err_set(e, "not_found",
		               "the registry %s has no %s (npm E404): check the package name and version "
		               "(npm view %s versions --registry %s)",
		               j->reg, what, j->pkg, j->reg);
	}
	free(o);
	return rc;
}

/*
 * The registry's latest version of pkg (its dist-tags.latest), asked by our
 * own client, so --check needs no npm: from the npm mirror when the
 * configuration names one (install.mirrors.npm; its host is then allowed),
 * else from the manifest's first host.
 */
static int
registry_latest(const char *pkg, const struct config *cfg, struct hosts *h, char *out, size_t cap,
                struct err *e)
{
	static char mhost[256];
	char url[HTTP_URL_MAX], base[512], auth[HTTP_URL_MAX + 32], from[CFG_PATH_MAX + 48];
	const char *mirror = cfg->install.npm_mirror;
	const char *hdrs[3] = {"Accept: application/vnd.npm.install-v1+json", NULL, NULL};
	struct http_client *hc;
	struct buf g = BUF_INIT(JSON_MAX_BYTES_DEFAULT);
	struct json_doc j;
	const char *latest;
	size_t i, n;
	int rc, status = 0;

	if (*mirror != '\0') {
		if (strncmp(mirror, "https://", 8) != 0)
			return err_set(e, "config.invalid", "install.mirrors.npm %s: not an https URL",
			               mirror);
		n = strcspn(mirror + 8, "/?#");
		if (n == 0 || n >= sizeof(mhost) || h->n >= LOCK_HOSTS_MAX)
			return err_set(e, "config.invalid", "install.mirrors.npm %s: no host", mirror);
		memcpy(mhost, mirror + 8, n);
		mhost[n] = '\0';
		h->h[h->n++] = mhost;
		snprintf(base, sizeof(base), "%s", mirror);
	} else {
		snprintf(base, sizeof(base), "https://%s", h->h[0]);
	}
	n = strlen(base);
	while (n > 0 && base[n - 1] == '/')
		base[--n] = '\0';
	snprintf(url, sizeof(url), "%s/", base);
	for (i = 0, n = strlen(url); pkg[i] != '\0' && n + 4 < sizeof(url); i++)
		n += (size_t)snprintf(url + n, sizeof(url) - n, pkg[i] == '/' ? "%%2f" : "%c", pkg[i]);
	if ((rc = config_npm_auth(cfg, auth, sizeof(auth), from, sizeof(from), e)) < 0)
		return -1;
	hdrs[1] = rc == 1 ? auth : NULL;
	if ((hc = config_http_client(e)) == NULL)
		return -1;
	lock_say("%s: asking %s for the latest version\n", pkg, url);
	rc = lock_get(hc, url, h, hdrs, buf_http_sink, &g, JSON_MAX_BYTES_DEFAULT, &status, e);
	memset(auth, 0, sizeof(auth));
	http_client_free(hc);
	if (rc != 0 && *mirror != '\0' && (status == 401 || status == 403))
		err_set(e, "install.npm_auth", "the npm mirror %s (install.mirrors.npm) answered %d: %s%s",
		        mirror, status, hdrs[1] != NULL ? "it refused the credential from " : "",
		        hdrs[1] != NULL
		            ? from
		            : "it asks for a credential and none is set (install.mirrors.npm_auth_file "
		              "or ABX_INSTALL_NPM_TOKEN)");
	if (rc != 0 || json_parse(&j, g.p ? (const char *)g.p : "", g.len, NULL, e) != 0) {
		buf_free(&g);
		return -1;
	}
	latest = json_get_str(json_get(j.root, "dist-tags"), "latest");
	if (latest == NULL)
		rc = err_set(e, "install.failed", "%s: no dist-tags.latest in the registry's answer", url);
	else
		snprintf(out, cap, "%s", latest);
	json_free(&j);
	buf_free(&g);
	return rc;
}

static void
rm_scratch(const char *dir)
{
	static const char *files[] = {"package.json", "package-lock.json", "npmrc", "npmrc-global", NULL};
	char p[PATH_MAX];
	int i;

	for (i = 0; files[i]; i++) {
		if (fs_path_join(p, sizeof(p), dir, files[i], NULL) == 0)
			unlink(p);
	}
	rmdir(dir);
}

/* The source's package, lock and package_json (paths beside the manifest),
 * the hosts, and the scratch directory with its empty npmrc files. On
 * success the caller ends with rm_scratch(j->scratch). */
static int
job_open(struct npm_job *j, struct doc *d, struct err *e)
{
	const struct json_val *src = json_get(d->j.root, "source");

	memset(j, 0, sizeof(*j));
	j->d = d;
	j->pkg = json_get_str(src, "package");
	j->lockrel = json_get_str(src, "lock");
	j->pjrel = json_get_str(src, "package_json");
	if (j->pkg == NULL || j->lockrel == NULL || j->pjrel == NULL)
		return err_set(e, "install.manifest_invalid",
		               "%s: $.source: package, lock and package_json needed", d->path);
	if (!npmlock_name_ok(j->pkg, strlen(j->pkg)))
		return err_set(e, "install.manifest_invalid", "%s: $.source.package: not an npm package name",
		               d->path);
	if (strstr(j->lockrel, "..") || j->lockrel[0] == '/' || strstr(j->pjrel, "..") || j->pjrel[0] == '/')
		return err_set(e, "install.manifest_invalid",
		               "%s: $.source.lock: not a path beside the manifest", d->path);
	if (lock_load_hosts(d, &j->h, e) != 0)
		return -1;
	snprintf(j->reg, sizeof(j->reg), "https://%s/", j->h.h[0]);
	snprintf(j->scratch, sizeof(j->scratch), "/tmp/abx-lock.XXXXXX");
	if (mkdtemp(j->scratch) == NULL)
		return err_sys(e, "io.error", errno, "mkdtemp: %s", strerror(errno));
	snprintf(j->rc, sizeof(j->rc), "%s/npmrc", j->scratch);
	snprintf(j->grc, sizeof(j->grc), "%s/npmrc-global", j->scratch);
	if (lock_write_atomic(j->rc, "", 0, e) != 0 || lock_write_atomic(j->grc, "", 0, e) != 0) {
		rm_scratch(j->scratch);
		return -1;
	}
	return 0;
}

/* text as a lockfile of the job's package, by the installs' own loader
 * (cpu and libc unknown: every entry, for every platform, must pass). */
static int
load_lockfile(const struct npm_job *j, struct npmlock *l, const char *text, size_t len, struct err *e)
{
	struct npmlock_opts lo;

	memset(&lo, 0, sizeof(lo));
	lo.package = j->pkg;
	lo.hosts = j->h.h;
	lo.nhosts = j->h.n;
	return npmlock_load(l, text, len, &lo, e);
}

/* --check: the registry has nothing newer than old, and the committed
 * lockfile still loads and pins old; otherwise *stale and a line why. */
static int
check_npm(struct npm_job *j, const char *dir, const char *old, int *stale, struct err *e)
{
	char latest[LOCK_NPM_OUT_MAX], lockpath[PATH_MAX];
	struct npmlock l;
	char *text = NULL;
	size_t len;

	if (registry_latest(j->pkg, j->cfg, &j->h, latest, sizeof(latest), e) != 0)
		return -1;
	if (strcmp(latest, old) != 0) {
		*stale = 1;
		printf("%s: newer version %s (manifest has %s)\n", j->pkg, latest, old);
	}
	if (strcmp(dir, LOCK_EMBEDDED) == 0)
		snprintf(lockpath, sizeof(lockpath), "%s%s", LOCK_EMBEDDED, j->lockrel);
	else if (fs_path_join(lockpath, sizeof(lockpath), dir, j->lockrel, e) != 0)
		return -1;
	if (lock_read_file(lockpath, JSON_MAX_BYTES_DEFAULT, &text, &len, e) != 0)
		return -1;
	if (load_lockfile(j, &l, text, len, e) != 0) {
		*stale = 1;
		printf("%s: stale lockfile: %s\n", j->lockrel, e->msg);
	} else {
		if (strcmp(l.root->version, old) != 0) {
			*stale = 1;
			printf("%s: pins %s %s, manifest says %s\n", j->lockrel, j->pkg, l.root->version,
			       old);
		}
		npmlock_free(&l);
	}
	free(text);
	return 0;
}

/* The last version of `npm view pkg@want version`'s answer (one "pkg@v 'v'"
 * line per match for a range, a bare "v" for one version) into spec. */
static int
last_version(char *out, const struct npm_job *j, const char *want, char *spec, size_t cap, struct err *e)
{
	char *last = NULL, *q, *sv = NULL;

	for (q = strtok_r(out, "\r\n", &sv); q; q = strtok_r(NULL, "\r\n", &sv))
		last = q;
	if (last && strrchr(last, ' '))
		last = strrchr(last, ' ') + 1;
	if (last == NULL || *last == '\0')
		return err_set(
		    e, "not_found",
		    "no version of %s matches %s; choose one the registry has: npm view %s versions", j->pkg,
		    want, j->pkg);
	if (*last == '\'')
		last++;
	last[strcspn(last, "'")] = '\0';
	snprintf(spec, cap, "%s", last);
	return 0;
}

/* A tag or range ("latest", "^1") becomes the exact version first, so
 * package.json, the lockfile's root and the manifest agree. */
static int
resolve_version(const struct npm_job *j, const char *want, char *spec, size_t cap, struct err *e)
{
	char what[400], out[LOCK_NPM_OUT_MAX];
	char *va[] = {"view", what, "version", "--registry", (char *)j->reg, NULL};
	int rc;

	snprintf(what, sizeof(what), "%s@%s", j->pkg, want);
	rc = run_npm(j, va, out, sizeof(out), 0, e);
	if (rc > 0) {
		/* npm answers a missing version (E404) like any other
		 * failure; the package alone tells them apart. */
		char *pa[] = {"view", (char *)j->pkg, "version", "--registry", (char *)j->reg, NULL};

		if ((rc = run_npm(j, pa, out, sizeof(out), 1, e)) == 0) {
			out[strcspn(out, "\r\n")] = '\0';
			return err_set(
			    e, "not_found",
			    "no version of %s matches %s (latest: %s); choose one the registry has: "
			    "npm view %s versions",
			    j->pkg, want, out, j->pkg);
		}
		if (rc < 0 && e->code != NULL && strcmp(e->code, "not_found") == 0)
			return err_set(e, "not_found",
			               "the registry %s has no package %s (npm E404), so no %s: check the "
			               "manifest's source.package",
			               j->reg, j->pkg, what);
		if (rc < 0)
			return -1;
		return err_set(e, "install.failed", "npm view %s failed (exit %d)", what, rc);
	}
	if (rc != 0)
		return -1;
	return last_version(out, j, want, spec, cap, e);
}

/* The package.json that depends on exactly pkg@version, into pj ("" when
 * it does not fit). */
static void
package_json(const struct npm_job *j, const char *version, char *pj, size_t cap)
{
	const char *name = json_get_str(j->d->j.root, "name");
	char self[300];
	struct json_w w;

	snprintf(self, sizeof(self), "abx-lock-%s", name ? name : "tool");
	json_w_init(&w, cap - 2);
	json_w_obj(&w);
	json_w_kstr(&w, "name", self);
	json_w_kstr(&w, "version", "0.0.0");
	json_w_kbool(&w, "private", 1);
	json_w_key(&w, "dependencies");
	json_w_obj(&w);
	json_w_kstr(&w, j->pkg, version);
	json_w_end(&w);
	json_w_end(&w);
	snprintf(pj, cap, "%s\n", w.overflow ? "" : w.buf);
	json_w_free(&w);
}

/* npm writes the lockfile for spec in the scratch directory; it is read
 * into *text (malloc'd) and must load by the installs' rules. The version
 * it pins goes into newver. */
static int
make_lockfile(const struct npm_job *j, const char *spec, char **text, size_t *len, char *newver, size_t cap,
              struct err *e)
{
	/* Every platform's optional packages are recorded whatever this
	 * machine is: npm writes the whole ideal tree into the lockfile and
	 * only skips inapplicable optionals when reifying, which
	 * --package-lock-only never does. */
	char *ia[] = {"install",
	              "--package-lock-only",
	              "--ignore-scripts",
	              "--no-audit",
	              "--no-fund",
	              "--save-exact",
	              "--lockfile-version=3",
	              "--omit-lockfile-registry-resolved=false",
	              "--registry",
	              (char *)j->reg,
	              NULL};
	char pj[1024], p[PATH_MAX];
	struct npmlock l;
	int rc;

	package_json(j, spec, pj, sizeof(pj));
	snprintf(p, sizeof(p), "%s/package.json", j->scratch);
	if (lock_write_atomic(p, pj, strlen(pj), e) != 0)
		return -1;
	lock_say("%s: npm install --package-lock-only %s@%s\n", j->d->path, j->pkg, spec);
	rc = run_npm(j, ia, NULL, 0, 1, e);
	if (rc > 0)
		return err_set(e, "install.failed", "npm install --package-lock-only failed (exit %d)", rc);
	if (rc != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/package-lock.json", j->scratch);
	if (lock_read_file(p, JSON_MAX_BYTES_DEFAULT, text, len, e) != 0)
		return -1;
	if (load_lockfile(j, &l, *text, *len, e) != 0)
		return err_set(e, e->code, "the lockfile npm produced is refused: %s", e->msg);
	snprintf(newver, cap, "%s", l.root->version);
	lock_say("%s: %s@%s locked: %zu packages for linux, %zu optional ones for other systems\n",
	         j->d->path, j->pkg, newver, l.npkgs, l.nskipped);
	npmlock_free(&l);
	return 0;
}

/* The lockfile and a package.json recording the exact version it pins,
 * beside the manifest in dir. */
static int
write_beside(const struct npm_job *j, const char *dir, const char *text, size_t len, const char *newver,
             struct err *e)
{
	char pj[1024], dst[PATH_MAX];

	package_json(j, newver, pj, sizeof(pj));
	if (fs_path_join(dst, sizeof(dst), dir, j->lockrel, e) != 0 || lock_mkdir_parents(dst) != 0 ||
	    lock_write_atomic(dst, text, len, e) != 0)
		return -1;
	if (fs_path_join(dst, sizeof(dst), dir, j->pjrel, e) != 0 || lock_mkdir_parents(dst) != 0 ||
	    lock_write_atomic(dst, pj, strlen(pj), e) != 0)
		return -1;
	return 0;
}

/* Each platform's unpacked size, measured from the lockfile text, into
 * $.unpacked_size. A failure is an error with --sizes (the only thing
 * asked), else said and left out: the lockfile is still what was asked. */
static int
record_sizes(struct npm_job *j, const char *text, size_t len, int sizes, struct err *e)
{
	const struct json_val *pl = json_get(j->d->j.root, "platforms");
	struct lock_npm_sizes z = {
	    j->d->path, text, len,    j->pkg, json_get_str(json_get(j->d->j.root, "source"), "bin"),
	    &j->h,      NULL, {NULL}, 0};
	char plat[4][16];
	uint64_t bytes[4];
	struct err me = {0};
	size_t i;
	int n = 0, rc;

	for (i = 0; pl != NULL && pl->type == JSON_ARRAY && i < pl->u.arr.n && z.nplatforms < 4; i++)
		if (pl->u.arr.v[i].type == JSON_STRING)
			z.platforms[z.nplatforms++] = pl->u.arr.v[i].u.str.s;
	err_clear(&me);
	if (z.bin == NULL)
		rc = err_set(&me, "install.manifest_invalid", "%s: $.source.bin: missing", j->d->path);
	else if ((z.hc = config_http_client(&me)) == NULL)
		rc = -1;
	else
		rc = lock_npm_sizes(&z, plat, bytes, &n, &me);
	if (z.hc != NULL)
		http_client_free(z.hc);
	if (rc == 0)
		return n > 0 ? lock_set_unpacked(j->d, plat, bytes, n, e) : 0;
	if (sizes) {
		err_copy(e, &me);
		return -1;
	}
	fprintf(stderr, "agent-sandbox-server: %s: unpacked_size not recorded: %s\n", j->d->path, me.msg);
	return 0;
}

int
lock_npm(struct doc *d, const char *dir, const struct config *cfg, const char *old, const char *want,
         int check, int *stale, struct err *e)
{
	struct npm_job j;
	char spec[300], newver[128], path[PATH_MAX];
	char *text = NULL;
	size_t len = 0;
	int rc, sizes = check & LOCK_NPM_SIZES;

	check &= 1;
	if (job_open(&j, d, e) != 0)
		return -1;
	j.cfg = cfg;
	if (check)
		rc = check_npm(&j, dir, old, stale, e);
	else if (sizes)
		rc = fs_path_join(path, sizeof(path), dir, j.lockrel, e) != 0
		         ? -1
		         : lock_read_file(path, JSON_MAX_BYTES_DEFAULT, &text, &len, e);
	else if ((rc = resolve_version(&j, want, spec, sizeof(spec), e)) == 0 &&
	         (rc = make_lockfile(&j, spec, &text, &len, newver, sizeof(newver), e)) == 0 &&
	         (rc = write_beside(&j, dir, text, len, newver, e)) == 0)
		rc = lock_edit_version(d, old, newver, e);
	if (rc == 0 && !check)
		rc = record_sizes(&j, text, len, sizes, e);
	free(text);
	rm_scratch(j.scratch);
	return rc;
}
