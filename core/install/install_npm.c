/*
 * The npm-lock installer hook of the install engine: load the manifest's lockfile for the platform being
 * installed, then fetch, verify and extract every package with core/pkg/npm.c into the staged tree, and link
 * the root package's bins.
 *
 * Hosts that may be contacted: the manifest's hosts, the npm mirror's host
 * (install.mirrors.npm / ABX_INSTALL_NPM_REGISTRY) and install.allow_hosts.
 * Lockfile `resolved` URLs must be on the manifest's hosts or the mirror.
 */
#include "pkg/cache.h"
#include "net/http.h"
#include "base/clock.h"
#include "config/config.h"
#include "install/install_int.h"
#include "install/install_int.h"
#include "base/json.h"
#include "pkg/npm.h"
#include "pkg/npmlock.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Hosts handed to the fetcher: the manifest's, the mirror, allow_hosts. */
#define NPM_HOSTS_MAX (MANIFEST_MAX_HOSTS + 1 + CFG_HOSTS_MAX)

struct npm_hosts {
	const char *h[NPM_HOSTS_MAX];
	size_t n, nmanifest;
	char mirror[300]; /* host[:port] of the npm mirror */
};

/* The host[:port] of an https URL into out ("" when not one). */
static void
url_hostport(const char *url, char *out, size_t cap)
{
	const char *p, *end;
	size_t n;

	out[0] = '\0';
	if (url == NULL || (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0))
		return;
	p = url + (url[4] == 's' ? 8 : 7);
	end = p + strcspn(p, "/?#");
	n = (size_t)(end - p);
	if (n == 0 || n >= cap || memchr(p, '@', n) != NULL)
		return;
	memcpy(out, p, n);
	out[n] = '\0';
}

static void
collect_hosts(const struct install_env *c, const manifest_t *m, struct npm_hosts *h)
{
	int i;

	memset(h, 0, sizeof(*h));
	for (i = 0; i < m->nhosts && h->n < NPM_HOSTS_MAX; i++)
		h->h[h->n++] = m->hosts[i];
	h->nmanifest = h->n;
	url_hostport(c->cfg->install.npm_mirror, h->mirror, sizeof(h->mirror));
	if (h->mirror[0] != '\0' && h->n < NPM_HOSTS_MAX)
		h->h[h->n++] = h->mirror;
	for (i = 0; i < c->cfg->install.allow_hosts.n && h->n < NPM_HOSTS_MAX; i++)
		h->h[h->n++] = c->cfg->install.allow_hosts.v[i];
}

struct prog {
	struct install_env *c;
	const char *name;
};

static void
progress(void *arg, uint64_t bytes, uint64_t total, size_t done, size_t count)
{
	struct prog *p = arg;
	struct install_progress pg = {bytes, total > bytes ? total : bytes, (uint32_t)done, (uint32_t)count};

	if (p->c->obs != NULL && p->c->obs->progress != NULL)
		p->c->obs->progress(p->c->obs->arg, p->name, "fetch", &pg);
}

/* The length of "node_modules/<name>" (<name> "a" or "@s/a") that starts
 * bin, or 0 (node_modules/.bin, the tree's own paths). */
static size_t
bin_package_len(const char *b)
{
	const char *p = b + 13;

	if (strncmp(b, "node_modules/", 13) != 0 || *p == '.' ||
	    (*p == '@' && (p = strchr(p, '/')) == NULL) || (p = strchr(p + 1, '/')) == NULL)
		return 0;
	return (size_t)(p - b);
}

/* Load m's lockfile for platform (NULL = every platform). */
static int
load_lock(struct install_env *c, const manifest_t *m, const char *platform, struct npm_hosts *h,
          struct npmlock *l, char lock_sha[65], struct err *e)
{
	struct npmlock_opts lo;
	char *text = NULL, only[NPMLOCK_PATH_MAX] = "";
	const char *b = m->source.bin;
	size_t len = 0, k;
	int rc;

	if (manifest_read_sibling(m, m->source.lock, JSON_MAX_BYTES_DEFAULT, &text, &len, e) < 0)
		return -1;
	if (lock_sha != NULL) {
		struct digest d;
		char hex[DIGEST_HEX_MAX];
		digest_buf(DIGEST_SHA256, text, len, &d);
		digest_hex(&d, hex);
		memcpy(lock_sha, hex, 64);
		lock_sha[64] = '\0';
	}
	memset(&lo, 0, sizeof(lo));
	lo.package = m->source.package;
	lo.hosts = h->h;
	lo.nhosts = h->nmanifest;
	lo.mirror_host = h->mirror[0] ? h->mirror : NULL;
	lo.os = "linux";
	lo.cpu = platform ? npmlock_cpu_for(platform) : NULL;
	lo.libc = platform ? npmlock_detect_libc(NULL) : NULL;
	/* A bin inside another package than the tool's: that package is the
	 * build this machine runs, the only optional one installed. */
	k = bin_package_len(b);
	if (platform != NULL && k > 13 && k < sizeof(only) &&
	    (k - 13 != strlen(m->source.package) || strncmp(b + 13, m->source.package, k - 13) != 0)) {
		memcpy(only, b, k);
		only[k] = '\0';
		lo.only = only;
	}
	rc = npmlock_load(l, text, len, &lo, e);
	free(text);
	if (rc == 0 && lo.only != NULL) {
		for (k = 0; k < l->npkgs && strcmp(l->pkgs[k].path, only) != 0; k++)
			;
		if (k == l->npkgs) {
			npmlock_free(l);
			rc = err_set(e, "install.image_unsupported",
			             "%s: lockfile %s has no %s for %s (C library %s): run `lock %s` where "
			             "the registry has that build, or see the README's table of agents",
			             m->file, m->source.lock, only + 13, platform, lo.libc, m->name);
			err_detail_str(e, "tool", m->name);
			err_detail_str(e, "package", only + 13);
			return rc;
		}
	}
	if (rc < 0)
		err_wrap(e, e->code, "%s: lockfile %s: %s", m->file, m->source.lock, e->msg);
	return rc;
}

/* The lockfile of m for platform, parsed once per environment: the network
 * probe, the install and the marker's SBOM read the same parse. Keyed by
 * the manifest's digest (which covers the lockfile's bytes) and the
 * platform, so a manifest changed since is parsed again. */
struct install_npm_lock {
	char name[MANIFEST_NAME_MAX];
	char manifest_sha[65];
	char platform[16]; /* "" = every platform */
	char lock_sha[65];
	struct npmlock l;
	/* where each package's bytes came from in the last install or fetch
	 * (npm_opts.sources), for the marker's SBOM rows */
	char (*src)[NPM_SOURCE_MAX];
};

void
install_npm_lock_free(struct install_env *c)
{
	if (c->npm_lock == NULL)
		return;
	npmlock_free(&c->npm_lock->l);
	free(c->npm_lock->src);
	free(c->npm_lock);
	c->npm_lock = NULL;
}

static const struct npmlock *
lock_of(struct install_env *c, const manifest_t *m, const char *platform, struct npm_hosts *h,
        char lock_sha[65], struct err *e)
{
	struct install_npm_lock *k = c->npm_lock;
	const char *pf = platform ? platform : "";

	if (k == NULL || strcmp(k->name, m->name) != 0 || strcmp(k->manifest_sha, m->sha256) != 0 ||
	    strcmp(k->platform, pf) != 0) {
		install_npm_lock_free(c);
		if ((k = calloc(1, sizeof(*k))) == NULL) {
			err_set(e, "internal", "out of memory");
			return NULL;
		}
		if (load_lock(c, m, platform, h, &k->l, k->lock_sha, e) < 0) {
			free(k);
			return NULL;
		}
		snprintf(k->name, sizeof(k->name), "%s", m->name);
		snprintf(k->manifest_sha, sizeof(k->manifest_sha), "%s", m->sha256);
		snprintf(k->platform, sizeof(k->platform), "%s", pf);
		c->npm_lock = k;
	}
	if (lock_sha != NULL)
		memcpy(lock_sha, k->lock_sha, 65);
	return &k->l;
}

static void
on_file(void *arg, const char *pkgpath, const char *name, const struct stat *st,
        const unsigned char sha256[32])
{
	install_known_add(arg, pkgpath, name, st, sha256);
}

static int
run(struct install_env *c, const manifest_t *m, const char *platform, const char *tree,
    const char *fallback_cache, struct install_known *known, struct install_npm_info *info, struct err *e)
{
	struct npm_hosts h;
	const struct npmlock *l;
	struct npm_opts o;
	struct npm_stats st;
	struct prog pr = {c, m->name};
	char cache[PATH_MAX], kf[PATH_MAX], auth[HTTP_URL_MAX + 32], from[CFG_PATH_MAX + 48];
	const char *jobs = config_env("ABX_INSTALL_NPM_JOBS"), *ro[1 + CFG_LIST_MAX], *d;
	size_t nro = 0;
	int rc, i;

	memset(&o, 0, sizeof(o));
	collect_hosts(c, m, &h);
	if ((l = lock_of(c, m, platform, &h, info ? info->lock_sha256 : NULL, e)) == NULL)
		return -1;
	if (c->npm_lock->src == NULL)
		c->npm_lock->src = calloc(l->npkgs ? l->npkgs : 1, sizeof(*c->npm_lock->src));
	else
		memset(c->npm_lock->src, 0, l->npkgs * sizeof(*c->npm_lock->src));
	o.sources = c->npm_lock->src; /* NULL (no memory): rows without a source */
	snprintf(cache, sizeof(cache), "%s", c->cache_dir);
	if (cache[0] == '\0' || (mkdir(cache, 0755) != 0 && access(cache, W_OK) != 0) ||
	    access(cache, W_OK) != 0) {
		if (fallback_cache == NULL) {
			err_set(e, "install.read_only", "no writable cache directory for %s", m->name);
			return -1;
		}
		snprintf(cache, sizeof(cache), "%s", fallback_cache);
		/* what a cache we cannot write holds is still served */
		if (c->cache_dir[0] != '\0' && access(c->cache_dir, R_OK | X_OK) == 0)
			ro[nro++] = c->cache_dir;
	} else {
		/* trees only in a cache that outlives this install, and
		 * only where they are wanted (install_setup.keep_no_trees) */
		o.keep_trees = tree != NULL && !c->keep_no_trees;
	}
	for (i = 0; i < c->cfg->install.tarball_mirrors.n && nro < sizeof(ro) / sizeof(ro[0]); i++)
		if ((d = install_mirror_dir(c->cfg->install.tarball_mirrors.v[i])) != NULL)
			ro[nro++] = d;
	o.caches_ro = ro;
	o.ncaches_ro = nro;
	o.lock = l;
	o.staging = tree;
	if (strncmp(m->source.bin, "node_modules/.bin/", 18) != 0)
		o.exec_bin = m->source.bin;
	o.cache = cache;
	install_cache_key(c, kf, sizeof(kf));
	o.cache_key = kf;
	o.registry = c->cfg->install.npm_mirror[0] ? c->cfg->install.npm_mirror : NULL;
	o.hosts = h.h;
	o.nhosts = h.n;
	o.jobs = jobs ? atoi(jobs) : 0;
	o.offline = c->cfg->install.mode == CFG_MODE_OFFLINE;
	o.allow_http =
	    c->cfg->install.allow_http_mirrors && strncmp(c->cfg->install.npm_mirror, "http://", 7) == 0;
	o.fetch_only = tree == NULL;
	o.max_bytes =
	    c->cfg->install.max_download_mb > 0 ? (int64_t)c->cfg->install.max_download_mb << 20 : 0;
	o.deadline_ms =
	    c->cfg->install.timeout > 0 ? clock_ms() + (int64_t)c->cfg->install.timeout * 1000 : 0;
	o.progress = progress;
	o.progress_arg = &pr;
	if (known != NULL) {
		o.on_file = on_file;
		o.file_arg = known;
	}
	memset(&st, 0, sizeof(st));
	/* the mirror's secret is read per install, kept on this stack only */
	rc = o.offline ? 0 : config_npm_auth(c->cfg, auth, sizeof(auth), from, sizeof(from), e);
	if (rc < 0)
		return -1;
	o.auth = rc == 1 ? auth : NULL;
	o.auth_from = from;
	rc = install_oci_npm(c, m, l, cache, &o, e);
	if (rc == 0)
		rc = npm_install(&o, &st, e);
	install_oci_npm_end(c, &o);
	memset(auth, 0, sizeof(auth));
	if (rc == 0)
		install_known_settle(known);
	if (st.placed > 0)
		note_line(
		    "%s %s: %zu of %zu packages placed from the extracted trees in %s/trees (%zu proved "
		    "unchanged by their stat proofs and copied, %zu hashed against their sealed listings%s)",
		    m->name, m->version, st.placed, st.placed + st.fetched + st.cached, cache,
		    st.placed_proved, st.placed - st.placed_proved,
		    st.placed_resealed > 0 ? " and given a stat proof for the next placement" : "");
	if (st.kept > 0)
		note_line("%s %s: kept the extracted trees of %zu packages in %s/trees", m->name, m->version,
		          st.kept, cache);
	if (info != NULL) {
		info->downloaded = st.bytes;
		info->bytes = st.bytes + st.cached_bytes;
		info->packages = st.fetched + st.cached + st.placed;
		info->fetched = st.fetched;
		info->cached = st.cached;
		info->skipped = l->nskipped;
		info->cpu[INSTALL_CPU_RECV] = st.cpu_recv_us;
		info->cpu[INSTALL_CPU_DIGEST] = st.cpu_digest_us;
		info->cpu[INSTALL_CPU_BLOB] = st.cpu_blob_us;
		info->cpu[INSTALL_CPU_DECOMPRESS] = st.cpu_decompress_us;
		info->cpu[INSTALL_CPU_TREE] = st.cpu_tree_us;
	}
	if (rc == 0) {
		c->n.downloads += (int)st.fetched;
		c->n.bytes_downloaded += st.bytes;
	} else if (e->code && strcmp(e->code, "install.disabled") == 0) {
		err_set(e, "install.disabled", "%s %s: mode offline: %s", m->name, m->version, e->msg);
	} else if (e->code && (strncmp(e->code, "http.", 5) == 0 || strncmp(e->code, "tls.", 4) == 0)) {
		install_fetch_failed(e, m, NULL, e->msg);
	}
	return rc;
}

int
install_npm_stage(struct install_env *c, const manifest_t *m, const char *tree, struct install_known *known,
                  struct install_npm_info *info, struct err *e)
{
	char fallback[PATH_MAX];

	/* With no writable cache the downloads go beside the tree, in staging,
	 * and disappear with it. */
	if (fs_path_join(fallback, sizeof(fallback), tree, "../npm-cache", e) < 0)
		return -1;
	return run(c, m, c->platform, tree, fallback, known, info, e);
}

int
install_npm_fetch(struct install_env *c, const struct install_req *rq, const manifest_t *m,
                  const char *platform, struct install_npm_info *info, struct install_counts *n,
                  struct err *e)
{
	int rc;

	install_call_begin(c, rq);
	rc = run(c, m, platform != NULL && strcmp(platform, "all") == 0 ? NULL : platform, NULL, NULL, NULL,
	         info, e);
	install_call_end(c, n);
	return rc;
}

int
install_npm_probe_url(struct install_env *c, const manifest_t *m, char *url, size_t cap)
{
	struct npm_hosts h;
	const struct npmlock *l;
	struct err e = {0};
	char hex[DIGEST_HEX_MAX], p[PATH_MAX], reg[HTTP_URL_MAX], key[CACHE_KEY_MAX];
	size_t i, n;
	int found = 0;

	collect_hosts(c, m, &h);
	if ((l = lock_of(c, m, c->platform, &h, NULL, &e)) == NULL)
		return 0;
	snprintf(reg, sizeof(reg), "%s", c->cfg->install.npm_mirror);
	n = strlen(reg);
	while (n > 0 && reg[n - 1] == '/')
		reg[--n] = '\0';
	for (i = 0; i < l->npkgs && !found; i++) {
		const struct npmlock_pkg *pk = &l->pkgs[i];
		if (pk->in_bundle || pk->resolved == NULL || pk->resolved[0] == '\0')
			continue;
		/* the index names the file: present means cached (the install
		 * re-hashes it; a damaged one is a download the probe missed) */
		if (c->cache_dir[0] && cache_tree_key(&pk->digest, NPM_TREE_VARIANT, key) == 0 &&
		    cache_tree_has(c->cache_dir, key))
			continue;
		if (c->cache_dir[0] && cache_sha256_of(c->cache_dir, &pk->digest, hex) &&
		    fs_path_join(p, sizeof(p), c->cache_dir, hex, NULL) == 0 && access(p, R_OK) == 0)
			continue;
		if (reg[0] != '\0' && pk->url_path != NULL)
			snprintf(url, cap, "%s%s", reg, pk->url_path);
		else
			snprintf(url, cap, "%s", pk->resolved);
		found = 1;
	}
	return found;
}

void
install_npm_sbom(struct install_env *c, const manifest_t *m, struct json_w *w)
{
	struct npm_hosts h;
	const struct npmlock *l;
	struct err e = {0};
	char purl[2 * NPMLOCK_NAME_MAX + 300], hex[DIGEST_HEX_MAX];
	size_t i;

	collect_hosts(c, m, &h);
	if ((l = lock_of(c, m, c->platform, &h, NULL, &e)) == NULL)
		return; /* the install's own parse, kept in c */
	for (i = 0; i < l->npkgs; i++) {
		const struct npmlock_pkg *p = &l->pkgs[i];
		if (p->in_bundle)
			continue; /* inside its parent's tarball, which has its row */
		json_w_obj(w);
		json_w_kstr(w, "name", p->name);
		json_w_kstr(w, "version", p->version);
		if (npm_purl(p, purl, sizeof(purl)) > 0)
			json_w_kstr(w, "purl", purl);
		json_w_kstr(w, "path", p->path);
		json_w_kstr(w, "integrity", p->integrity);
		if (c->cache_dir[0] && cache_sha256_of(c->cache_dir, &p->digest, hex))
			json_w_kstr(w, "sha256", hex);
		json_w_kstr(w, "url", p->resolved);
		if (c->npm_lock->src != NULL && c->npm_lock->src[i][0] != '\0')
			json_w_kstr(w, "source", c->npm_lock->src[i]);
		json_w_end(w);
	}
}

int
install_npm_blobs(struct install_env *c, const manifest_t *m, const char *platform,
                  void (*fn)(void *arg, const struct npmlock_pkg *p, const char *hex), void *arg,
                  struct err *e)
{
	struct npm_hosts h;
	const struct npmlock *l;
	char hex[DIGEST_HEX_MAX];
	size_t i;
	int missing = 0;

	collect_hosts(c, m, &h);
	if ((l = lock_of(c, m, platform != NULL && strcmp(platform, "all") == 0 ? NULL : platform, &h, NULL,
	                 e)) == NULL)
		return -1;
	for (i = 0; i < l->npkgs; i++) {
		const struct npmlock_pkg *p = &l->pkgs[i];
		if (p->in_bundle)
			continue; /* inside its parent's tarball */
		if (c->cache_dir[0] && cache_sha256_of(c->cache_dir, &p->digest, hex))
			fn(arg, p, hex);
		else
			missing++;
	}
	return missing;
}

int
install_npm_digests(struct install_env *c, const manifest_t *m, void (*fn)(void *arg, const struct digest *d),
                    void *arg, struct err *e)
{
	struct npm_hosts h;
	const struct npmlock *l;
	size_t i;

	collect_hosts(c, m, &h);
	if ((l = lock_of(c, m, NULL, &h, NULL, e)) == NULL)
		return -1;
	for (i = 0; i < l->npkgs; i++)
		if (!l->pkgs[i].in_bundle)
			fn(arg, &l->pkgs[i].digest);
	return 0;
}
