/*
 * The install engine: ensure(). The order of the steps is the contract:
 * nothing is locked or written before the fast path has said "not ready",
 * nothing is published that was not fully fetched, verified, extracted and
 * checked, and a kill at any point leaves only staging directories and
 * .cache/.tmp- files. The steps live in the files install_int.h lists.
 */
#include "install/install_int.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/json.h"
#include "net/http.h"
#include "pkg/npmlock.h"

/* Map an error code to the ensure state. */
static enum install_state
state_of(const struct err *e)
{
	const char *c = e->code ? e->code : "";

	if (strcmp(c, "install.read_only") == 0)
		return INSTALL_READ_ONLY;
	if (strcmp(c, "install.disabled") == 0)
		return INSTALL_DISABLED;
	if (strcmp(c, "install.required") == 0)
		return INSTALL_MISSING;
	if (strcmp(c, "install.network_unreachable") == 0)
		return INSTALL_NETWORK_UNREACHABLE;
	return INSTALL_FAILED;
}

/* ensure() with a minimum version for a require (NULL = none); a check
 * of a tool's requires and the requires themselves recurse into it. */
static int install_ensure_inner(struct install_env *c, const char *name, const char *min, unsigned flags,
                                struct install_result *r, struct err *e);

static int
fail_state(struct install_result *r, struct err *e)
{
	r->state = state_of(e);
	return -1;
}

/* Why m is about to be installed, from the first marker of the chain:
 * "missing", "manifest changed: ..." or "drift: ..." (a tree whose marker
 * matches the manifest but whose content does not). */
static void
install_why(struct install_env *c, const manifest_t *m, char *buf, size_t cap)
{
	struct install_marker mk;
	struct err e = {0};
	int i;

	for (i = 0; i < c->chain.n; i++) {
		if (!c->chain.d[i].exists || install_marker_read(c->chain.d[i].path, m->name, &mk, &e) < 0)
			continue;
		if (strcmp(mk.manifest_sha256, m->sha256) != 0 || strcmp(mk.version, m->version) != 0) {
			snprintf(buf, cap, "manifest changed: %s has %s %s from another manifest than %s",
			         c->chain.d[i].path, m->name, mk.version,
			         m->file[0] ? m->file : "the built-in one");
			return;
		}
		if (strcmp(mk.platform, c->platform) != 0)
			continue;
		snprintf(buf, cap, "drift: %s/%s/%s differs from what was installed", c->chain.d[i].path,
		         m->name, mk.tree);
		return;
	}
	snprintf(buf, cap, "missing");
}

/* A default directory earlier in the chain than w that exists but cannot
 * be written (a read-only /opt/agent-sandbox/tools) is passed over for w:
 * said where the install is announced, appended to buf. Only a default one
 * can be: an explicit one is refused instead (tools_chain_build). */
static void
why_fallback(const struct install_env *c, const char *w, char *buf, size_t cap)
{
	size_t n = strlen(buf);
	int i;

	for (i = 0; i < c->chain.n && strcmp(c->chain.d[i].path, w) != 0; i++)
		if (c->chain.d[i].exists && !c->chain.d[i].writable) {
			snprintf(buf + n, cap - n, "; %s is passed over: %.512s", c->chain.d[i].path,
			         c->chain.d[i].why);
			return;
		}
}

/* The chain names an explicit directory (--tools-dir, ABX_TOOLS_DIR) that
 * does not exist yet: an installer creates it (tools_chain_build). */
static int
explicit_missing(const struct tools_chain *ch)
{
	int i;

	for (i = 0; i < ch->n; i++)
		if (ch->d[i].explicit_ && !ch->d[i].exists)
			return 1;
	return 0;
}

/* The network is needed unless every artifact is already local. */
static const char *
needs_network(struct install_env *c, const manifest_t *m)
{
	const struct manifest_artifact *a;
	int i;

	if (m->source.type != MANIFEST_SRC_TARBALL) {
		/* the first package not in the cache, through the mirror if
		 * one is set: the host a download would contact first */
		static __thread char nu[HTTP_URL_MAX];
		if (install_npm_probe_url(c, m, nu, sizeof(nu)) != 1)
			return NULL;
		/* the registry is asked first */
		install_oci_probe_url(c, nu, sizeof(nu));
		return nu;
	}
	a = manifest_artifact(m, c->platform);
	if (a == NULL || (a->sha256[0] && install_maybe_local(c, a->sha256)))
		return NULL;
	if (a->sha256[0]) {
		/* the registry is asked first */
		static __thread char ou[HTTP_URL_MAX];
		if (install_oci_probe_url(c, ou, sizeof(ou)))
			return ou;
	}
	for (i = 0; i < c->cfg->install.tarball_mirrors.n; i++)
		if (install_mirror_dir(c->cfg->install.tarball_mirrors.v[i]) == NULL) {
			static __thread char u[HTTP_URL_MAX];
			char h[HTTP_HOST_MAX];
			if (install_mirror_url(c->cfg->install.tarball_mirrors.v[i], a->url, u, sizeof(u), h,
			                       sizeof(h)) == 0 &&
			    (a->sha256[0] || strncmp(u, "http://", 7) != 0))
				return u;
		}
	return a->url;
}

/* Base images that have each loader, named in a refusal (the fix line is
 * one text for every tool and cannot say which). */
#define GLIBC_IMAGES "Debian, Ubuntu, distroless/base"
/* distroless/base has no libstdc++: a tool that needs shared libraries
 * beside the loader (node-runtime) is named the images that have them */
#define GLIBC_LIBS_IMAGES "Debian, Ubuntu, distroless/cc"
#define MUSL_IMAGES "Alpine"

/*
 * Can m run in this image? Its manifest's "libc" names the C libraries whose
 * program interpreter its native code can use; the image has the one
 * npmlock_detect_libc finds (or none). Known before any download, so a tool
 * that cannot run is refused with what is missing instead of failing at
 * verify after hundreds of MiB. Only for this machine's platform (fetch
 * fills caches for others).
 */
int
install_image_fits(const manifest_t *m, const char *platform, struct err *e)
{
	const char *libc, *g = npmlock_libc_loader("glibc"), *mu = npmlock_libc_loader("musl");
	char env[MANIFEST_NAME_MAX + 16], need[200];
	struct json_w w;

	if (platform != NULL && strcmp(platform, manifest_platform_self()) != 0)
		return 0;
	install_tool_env_name(m->name, env, sizeof(env));
	/* install.cpu_level v3 on a CPU without AVX2: the build it names would
	 * stop at its first AVX2 instruction */
	if (m->source.cpu_levels && strcmp(manifest_platform_self(), MANIFEST_PLATFORM_X64) == 0 &&
	    config_cpu_level() == 2 && !manifest_cpu_avx2()) {
		err_set(e, "install.image_unsupported",
		        "%s cannot run on this CPU: install.cpu_level v3 chooses its build for CPUs with "
		        "AVX2, which this one lacks; set install.cpu_level to auto or baseline "
		        "(ABX_INSTALL_CPU_LEVEL), or set %s or put %s on PATH",
		        m->name, env, m->binary);
		err_detail_str(e, "tool", m->name);
		err_detail_str(e, "cpu_level", "v3");
		err_detail_str(e, "env", env);
		return -1;
	}
	if (m->libc == 0)
		return 0;
	libc = npmlock_detect_libc(NULL);
	if ((strcmp(libc, "glibc") == 0 && (m->libc & MANIFEST_LIBC_GLIBC)) ||
	    (strcmp(libc, "musl") == 0 && (m->libc & MANIFEST_LIBC_MUSL))) {
		int i;

		for (i = 0; i < m->nlibs; i++)
			if (!npmlock_lib_present(NULL, libc, m->libs[i])) {
				err_set(e, "install.image_unsupported",
				        "%s cannot run in this image: it needs the shared library %s, in no "
				        "library "
				        "directory here (C library: %s); or set %s or put %s on PATH",
				        m->name, m->libs[i], libc, env, m->binary);
				err_detail_str(e, "tool", m->name);
				err_detail_str(e, "libc", libc);
				err_detail_str(e, "library", m->libs[i]);
				err_detail_str(e, "env", env);
				return -1;
			}
		return 0;
	}
	if (m->libc == (MANIFEST_LIBC_GLIBC | MANIFEST_LIBC_MUSL))
		snprintf(need, sizeof(need), "the glibc loader %s (%s) or the musl loader %s (%s)", g,
		         m->nlibs > 0 ? GLIBC_LIBS_IMAGES : GLIBC_IMAGES, mu, MUSL_IMAGES);
	else if (m->libc & MANIFEST_LIBC_GLIBC)
		snprintf(need, sizeof(need), "the glibc loader %s (%s)", g,
		         m->nlibs > 0 ? GLIBC_LIBS_IMAGES : GLIBC_IMAGES);
	else
		snprintf(need, sizeof(need), "the musl loader %s (%s)", mu, MUSL_IMAGES);
	/* Under ERR_MSG_MAX with a "gemini requires node-runtime: " prefix. */
	err_set(e, "install.image_unsupported",
	        "%s cannot run in this image: it needs %s (C library of this image: %s); "
	        "or set %s or put %s on PATH",
	        m->name, need, libc, env, m->binary);
	json_w_init(&w, ERR_DETAILS_MAX);
	json_w_arr(&w);
	if (m->libc & MANIFEST_LIBC_GLIBC)
		json_w_str(&w, "glibc");
	if (m->libc & MANIFEST_LIBC_MUSL)
		json_w_str(&w, "musl");
	json_w_end(&w);
	err_detail_str(e, "tool", m->name);
	err_detail_str(e, "libc", libc);
	if (!w.overflow)
		err_detail_json(e, "needs", w.buf);
	err_detail_str(e, "env", env);
	json_w_free(&w);
	return -1;
}

/* install_image_fits for m and every tool it requires that is not already there
 * (installed, ABX_TOOL_<NAME>, PATH). */
static int
image_check(struct install_env *c, const manifest_t *m, struct err *e)
{
	int i, rc;

	if (install_image_fits(m, c->platform, e) < 0)
		return -1;
	for (i = 0; i < m->nrequires; i++) {
		struct install_result *rr = malloc(sizeof(*rr));
		struct err sub = {0};
		char subd[ERR_DETAILS_MAX];

		if (rr == NULL)
			return err_set(e, "internal", "out of memory");
		err_keep_details(&sub, subd, sizeof(subd));
		c->depth++;
		rc = install_ensure_inner(c, m->requires[i].name, m->requires[i].min, INSTALL_F_CHECK, rr,
		                          &sub);
		c->depth--;
		free(rr);
		if (rc < 0 && sub.code != NULL && strcmp(sub.code, "not_found") != 0) {
			err_set(e, sub.code, "%s requires %s: %s", m->name, m->requires[i].name, sub.msg);
			e->sys = sub.sys;
			e->cause = sub.cause;
			err_details(e, subd);
			return -1;
		}
	}
	return 0;
}

/* Already there (ABX_TOOL_<NAME>, the tools chain, PATH)?
 * 1 yes (r filled), 0 no, -1 it cannot be (e set). */
static int
ensure_found(struct install_env *c, const manifest_t *m, const char *min, unsigned flags,
             struct install_result *r, struct err *e)
{
	/* resolution order: ABX_TOOL_<NAME>, tools, PATH, install */
	if (install_found(c, m, min, !(flags & INSTALL_F_NO_PATH), r, e))
		return 1;
	/* Not there: before anything else, whether it could run here at all
	 * (also for a check, so every caller learns it before a download). */
	if (image_check(c, m, e) < 0)
		return -1;
	if (flags & INSTALL_F_CHECK) {
		err_set(e, "not_found", "%s is not installed", m->name);
		return -1;
	}
	return 0;
}

/* May the mode install now? 0, or -1 with install.disabled / required. */
static int
mode_allows(struct install_env *c, const manifest_t *m, struct err *e)
{
	char why[INSTALL_WHY_MAX], src[CFG_PATH_MAX + 16];

	if (c->cfg->install.mode != CFG_MODE_OFF && (c->cfg->install.mode != CFG_MODE_BUILD || c->building))
		return 0;
	install_why(c, m, why, sizeof(why));
	config_source(c->cfg, CK_INSTALL_MODE, src, sizeof(src));
	if (c->cfg->install.mode == CFG_MODE_OFF)
		return err_set(e, "install.disabled", "%s %s: %s, and install mode is off (%s)", m->name,
		               m->version, why, src);
	return err_set(e, "install.required", "%s %s: %s, and install mode is build (%s)", m->name,
	               m->version, why, src);
}

/* The writable tools directory's .cache, unless a cache directory was given
 * ("" when no directory is writable). 0, or -1 with io.error when the path
 * does not fit. */
static int
cache_default(struct install_env *c, struct err *e)
{
	if (c->cache_given)
		return 0;
	c->cache_dir[0] = '\0';
	if (c->chain.writable < 0)
		return 0;
	return fs_path_join(c->cache_dir, sizeof(c->cache_dir), c->chain.d[c->chain.writable].path, ".cache",
	                    e);
}

/* The tools directory installs go to, creating the explicit or per-user one
 * when it is missing; NULL with install.read_only naming what was tried. */
static const char *
writable_dir(struct install_env *c, const char *name, struct err *e)
{
	char tried[1024];

	if (c->chain.writable < 0 || explicit_missing(&c->chain)) {
		/* an explicit directory that does not exist yet comes before a
		 * later writable one of the chain */
		if (tools_chain_build(&c->chain, c->cfg, 1, e) < 0)
			return NULL;
		if (c->prefer[0] != '\0')
			tools_chain_prefer(&c->chain, c->prefer);
		if (cache_default(c, e) < 0)
			return NULL;
	}
	if (c->chain.writable >= 0)
		return c->chain.d[c->chain.writable].path;
	tools_chain_tried_text(&c->chain, tried, sizeof(tried));
	err_set(e, "install.read_only", "%s is not installed and no tools directory is writable; tried %s",
	        name, tried);
	tools_chain_detail_tried(&c->chain, e);
	return NULL;
}

/* A recent failure holds the tool back (prepare --force clears it). 0, or
 * -1 with install.backoff and r->retry_after. */
static int
backoff_gate(struct install_env *c, const char *name, struct install_result *r, struct err *e)
{
	int left;

	if (c->force) {
		install_backoff_clear(c, name);
		return 0;
	}
	if ((left = install_backoff_left(c, name)) <= 0)
		return 0;
	err_set(e, "install.backoff",
	        "%s failed recently; next attempt in %d s (prepare --force retries now)", name, left);
	err_detail_int(e, "retry_after", left);
	r->retry_after = left;
	return -1;
}

/* Before staging: the staging directory can hold executables and the network
 * answers (unless everything is local). 0, or -1 with e (a backoff is
 * recorded where retrying soon cannot help). */
static int
ensure_probes(struct install_env *c, const manifest_t *m, const char *w, struct err *e)
{
	char staging_root[PATH_MAX];
	const char *url;

	if (fs_path_join(staging_root, sizeof(staging_root), w, ".staging", e) < 0 ||
	    install_mkdir(staging_root, 0700, e) < 0)
		return -1;
	if (install_exec_probe(c, staging_root, e) < 0) {
		if (e->code && strcmp(e->code, "install.noexec") == 0)
			install_backoff_record(c, m->name, e);
		else
			err_set(e, "install.read_only", "%s: cannot write a probe file in %s", m->name,
			        staging_root);
		return -1;
	}
	if (c->cfg->install.mode != CFG_MODE_OFFLINE && (url = needs_network(c, m)) != NULL &&
	    install_net_probe(c, m, url, e) < 0) {
		install_backoff_record(c, m->name, e);
		return -1;
	}
	return 0;
}

/* m's requires, in name order (deadlock-free: requires form a DAG
 * and every process takes locks along it); each outcome to the observer's required. */
static int
ensure_requires(struct install_env *c, const manifest_t *m, unsigned flags, struct err *e)
{
	const struct manifest_require *q[MANIFEST_MAX_REQUIRES], *t;
	int n = m->nrequires, i, j, rc;

	for (i = 0; i < n; i++)
	q[i] = &m->requires[i];
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && strcmp(q[j - 1]->name, q[j]->name) > 0; j--) {
			t = q[j];
			q[j] = q[j - 1];
			q[j - 1] = t;
		}
	for (i = 0; i < n; i++) {
		struct install_result rr;
		c->depth++;
		rc = install_ensure_inner(c, q[i]->name, q[i]->min, flags & ~INSTALL_F_NO_PATH, &rr, e);
		c->depth--;
		if (c->obs != NULL && c->obs->required != NULL)
			c->obs->required(c->obs->arg, q[i]->name, rc, &rr, e);
		if (rc < 0)
			return err_wrap(e, e->code, "%s requires %s: %s", m->name, q[i]->name, e->msg);
	}
	return 0;
}

/*
 * m's requires, ensured beside m's install: on a thread of their own with a
 * clone of the environment while m is staged (staging runs nothing of theirs:
 * no package script, no program of the tree), waited for by
 * install_requires_join before m's verify.argv, which may need them. So a
 * require is published before its dependent, and a kill at any point never
 * leaves a published dependent without it. Once they are ready the thread
 * moves their kept trees' copies into the cache (keep_later) while m goes
 * on, and is joined when m's install ends.
 */
static void *
requires_main(void *arg)
{
	struct install_reqs *q = arg;

	q->rc = ensure_requires(&q->sub, q->m, q->flags, &q->e);
	pthread_mutex_lock(&q->mu);
	q->ready = 1;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	install_tree_keeps_end(&q->sub);
	return NULL;
}

/* Start m's requires beside its install; where no thread can
 * start, ensure them here first, as before. 0, or -1 with e (only then). */
static int
requires_start(struct install_env *c, const manifest_t *m, unsigned flags, struct err *e)
{
	struct install_reqs *q;
	pthread_attr_t at;
	sigset_t all, old;
	struct err ce = {0};
	int rc = -1;

	if (m->nrequires == 0)
		return 0;
	if (c->reqs != NULL || (q = calloc(1, sizeof(*q))) == NULL)
		return ensure_requires(c, m, flags, e);
	if (install_env_copy(&q->sub, c, &ce) < 0) {
		free(q);
		return ensure_requires(c, m, flags, e);
	}
	q->m = m;
	q->flags = flags;
	q->sub.keep_later = 1;
	err_keep_details(&q->e, q->details, sizeof(q->details));
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	sigfillset(&all);
	if (pthread_attr_init(&at) == 0) {
		pthread_attr_setstacksize(&at, INSTALL_THREAD_STACK);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		rc = pthread_create(&q->th, &at, requires_main, q);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&at);
	}
	if (rc != 0) {
		pthread_mutex_destroy(&q->mu);
		pthread_cond_destroy(&q->cv);
		install_env_fini(&q->sub);
		free(q);
		return ensure_requires(c, m, flags, e);
	}
	q->running = 1;
	c->reqs = q;
	return 0;
}

/* After m's install, success or not: its requires joined and released. 1
 * when one of them failed (e: that failure, which is the answer: m's
 * staging would not have started had they run first), else 0. */
static int
requires_end(struct install_env *c, struct err *e)
{
	struct install_reqs *q = c->reqs;
	int failed;

	if (q == NULL)
		return 0;
	failed = install_requires_join(c, NULL, e) < 0;
	if (q->running)
		pthread_join(q->th, NULL); /* its kept trees' copies moved in */
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->cv);
	install_env_fini(&q->sub);
	free(q);
	c->reqs = NULL;
	return failed;
}

static int
install_ensure_inner(struct install_env *c, const char *name, const char *min, unsigned flags,
                     struct install_result *r, struct err *e)
{
	const manifest_t *m;
	const char *w, *from;
	char why[INSTALL_WHY_MAX + PATH_MAX + 600];
	int fd, rc;
	int64_t tp, probe_us;

	memset(r, 0, sizeof(*r));
	if (c->depth > MANIFEST_MAX_DEPTH)
		return err_set(e, "install.manifest_invalid", "requires nested too deeply"), fail_state(r, e);
	if ((m = manifest_get(c->ms, name, e)) == NULL)
		return fail_state(r, e);
	if (!manifest_supports(m, c->platform)) {
		err_set(e, "install.failed", "%s is not available for %s", name, c->platform);
		return fail_state(r, e);
	}
	if ((rc = ensure_found(c, m, min, flags, r, e)) != 0) {
		if (rc > 0)
			return 0;
		if (flags & INSTALL_F_CHECK && e->code != NULL && strcmp(e->code, "not_found") == 0) {
			r->state = INSTALL_MISSING;
			return -1;
		}
		return fail_state(r, e);
	}
	if (mode_allows(c, m, e) < 0 || (w = writable_dir(c, name, e)) == NULL ||
	    backoff_gate(c, name, r, e) < 0)
		return fail_state(r, e);
	tp = clock_us();
	if (ensure_probes(c, m, w, e) < 0)
		return fail_state(r, e);
	probe_us = clock_us() - tp;
	/* the lock, in the writable directory only */
	if ((fd = install_lock_tool(c, w, m, e)) < 0)
		return fail_state(r, e);
	/* under the lock: another process may have finished meanwhile */
	if (install_fast_path(c, m, r, e) == 1) {
		close(fd);
		return 0;
	}
	install_audit_event(c, "install.start", m, NULL);
	if (requires_start(c, m, flags, e) < 0) {
		close(fd);
		return fail_state(r, e);
	}
	/* the install itself (install_one), announced first: nothing is downloaded or replaced
	 * silently (the shim prints it) */
	if (c->obs != NULL && c->obs->announce != NULL) {
		install_why(c, m, why, sizeof(why));
		why_fallback(c, w, why, sizeof(why));
		/* where its bytes come from: not asked in mode offline */
		from = NULL;
		if (c->cfg->install.mode != CFG_MODE_OFFLINE && (from = needs_network(c, m)) == NULL)
			from = "";
		c->obs->announce(c->obs->arg, m, why, w, from);
	}
	c->probe_us = probe_us;
	rc = install_one(c, m, w, r, e);
	if (requires_end(c, e))
		rc = -1; /* a require's failure: m's own backoff stays as it was */
	else if (rc < 0)
		install_backoff_record(c, name, e); /* a failure backs off */
	else
		install_backoff_clear(c, name);
	close(fd);
	return rc < 0 ? fail_state(r, e) : 0;
}

int
install_ensure(struct install_env *c, const char *name, const struct install_req *rq,
               struct install_result *r, struct err *e)
{
	struct install_counts n = {0};
	int rc;

	install_call_begin(c, rq);
	rc = install_ensure_inner(c, name, NULL, rq->flags, r, e);
	install_call_end(c, &n);
	r->n = n;
	return rc;
}

int
install_env_init(struct install_env *c, struct manifest_set *ms, const struct config *cfg,
                 const char *platform, const char *cache_dir, struct err *e)
{
	char buf[PATH_MAX];
	ssize_t n;

	memset(c, 0, sizeof(*c));
	c->mcache = calloc(INSTALL_MARKER_CACHE, sizeof(*c->mcache));
	if (c->mcache == NULL)
		return err_set(e, "internal", "out of memory");
	c->ms = ms;
	c->cfg = cfg;
	snprintf(c->platform, sizeof(c->platform), "%s", platform ? platform : manifest_platform_self());
	/* nothing is created here: the fast path writes nothing */
	if (tools_chain_build(&c->chain, cfg, 0, e) < 0)
		return -1;
	c->cache_given = cache_dir != NULL && cache_dir[0] != '\0';
	if (c->cache_given) {
		if (strlen(cache_dir) >= sizeof(c->cache_dir))
			return err_set(e, "io.error", "path too long: %s", cache_dir);
		memcpy(c->cache_dir, cache_dir, strlen(cache_dir) + 1);
	} else if (cache_default(c, e) < 0) {
		return -1;
	}
	n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		snprintf(c->self, sizeof(c->self), "%s", buf);
	}
	return 0;
}

int
install_env_new(struct install_env **env, struct manifest_set *ms, const struct config *cfg,
                const struct install_setup *s, struct err *e)
{
	static const struct install_setup none;
	struct install_env *c;

	if (s == NULL)
		s = &none;
	/* large (paths, probe caches): heap, not a worker's stack */
	if ((*env = c = calloc(1, sizeof(*c))) == NULL)
		return err_set(e, "internal", "out of memory");
	if (install_env_init(c, ms, cfg, s->platform, s->cache_dir, e) < 0) {
		install_env_free(c);
		*env = NULL;
		return -1;
	}
	c->keep_no_trees = s->keep_no_trees;
	c->drop_downloads = s->drop_downloads;
	return 0;
}

int
install_env_reuse(struct install_env *c, struct err *e)
{
	install_call_end(c, NULL);
	c->src_sha[0] = '\0';
	if (tools_chain_build(&c->chain, c->cfg, 0, e) < 0)
		return -1;
	if (c->prefer[0] != '\0')
		tools_chain_prefer(&c->chain, c->prefer);
	return cache_default(c, e);
}

void
install_env_prefer(struct install_env *c, const char *dir)
{
	snprintf(c->prefer, sizeof(c->prefer), "%s", dir);
	tools_chain_prefer(&c->chain, dir);
	(void)cache_default(c, NULL); /* "" (no cache) when it does not fit */
}

int
install_env_copy(struct install_env *dst, const struct install_env *src, struct err *e)
{
	*dst = *src;
	dst->http = NULL;
	dst->oci = NULL;
	dst->npm_lock = NULL;
	dst->reqs = NULL;
	dst->kept = NULL;
	memset(&dst->n, 0, sizeof(dst->n));
	dst->src_sha[0] = '\0';
	dst->mcache = calloc(INSTALL_MARKER_CACHE, sizeof(*dst->mcache));
	if (dst->mcache == NULL)
		return err_set(e, "internal", "out of memory");
	return 0;
}

int
install_env_clone(struct install_env **dst, const struct install_env *src, struct err *e)
{
	if ((*dst = malloc(sizeof(**dst))) == NULL)
		return err_set(e, "internal", "out of memory");
	if (install_env_copy(*dst, src, e) < 0) {
		free(*dst);
		*dst = NULL;
		return -1;
	}
	return 0;
}

void
install_env_free(struct install_env *c)
{
	if (c == NULL)
		return;
	install_env_fini(c);
	free(c);
}

const struct tools_chain *
install_env_chain(const struct install_env *c)
{
	return &c->chain;
}

const char *
install_env_cache_dir(const struct install_env *c)
{
	return c->cache_dir;
}

const char *
install_env_self(const struct install_env *c)
{
	return c->self;
}

void
install_env_fini(struct install_env *c)
{
	int i;

	install_tree_keeps_end(c);
	if (c->http != NULL)
		http_client_free(c->http);
	c->http = NULL;
	install_oci_free(c);
	install_npm_lock_free(c);
	if (c->mcache != NULL)
		for (i = 0; i < INSTALL_MARKER_CACHE; i++)
			install_proof_cache_put(c->mcache[i].proof_ref);
	free(c->mcache);
	c->mcache = NULL;
}
