/*
 * Artifacts: a verified copy from the caches and mirror directories, else
 * downloaded (mirror URLs first) into the cache, hashed as it arrives.
 */
#include "install/install_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pkg/cache.h"
#include "base/clock.h"
#include "base/digest.h"
#include "base/fs.h"
#include "net/hostrule.h"
#include "net/http.h"
#include "net/oci.h"
#include "base/json.h"

void
install_fetch_failed(struct err *e, const manifest_t *m, const char *url, const char *msg)
{
	const char *under = e->code ? e->code : "internal";

	/* a failed install is install.failed with its phase; the
	 * client's code (http.*, tls.*) says what happened, in the message
	 * and in details.code */
	if (url != NULL)
		err_wrap(e, "install.failed", "%s %s: fetching %s: %s: %s", m->name, m->version, url, under,
		         msg);
	else
		err_wrap(e, "install.failed", "%s %s: fetch: %s: %s", m->name, m->version, under, msg);
	err_detail_str(e, "phase", "fetch");
	err_detail_str(e, "code", under);
	if (url != NULL)
		err_detail_str(e, "url", url);
	if (strcmp(under, "http.too_large") == 0)
		err_detail_str(e, "hint",
		               "install.max_download_mb caps each download (artifact or npm package)");
}

#ifdef ABX_TEST
void (*install_test_hashed_fn)(const char *path);
#endif

/* ---- fetching ------------------------------------------------------------ */

struct dl {
	struct cache_put put;
	struct install_progress_state *ps;
	const struct http_response *rs; /* its length is known at the first write */
	const struct install_env *c;
	int paused;
};

static int
dl_sink(void *arg, const void *buf, size_t len, struct err *e)
{
	struct dl *d = arg;

	if (cache_put_write(&d->put, buf, len, e) < 0)
		return -1;
	if (d->ps != NULL) {
		d->ps->cur.bytes = d->ps->base + d->put.bytes;
		d->ps->cur.total = d->ps->base + (d->rs->content_length > 0 ? (uint64_t)d->rs->content_length
		                                                            : d->put.bytes);
		install_progress_write(d->ps, "download", 0);
	}
	if (!d->paused) {
		d->paused = 1;
		install_test_pause(d->c, "download");
	}
	return 0;
}

/* Is <dir>/<sha> a file whose content hashes to sha? 1 yes (*fdp the
 * descriptor it was hashed through), 0 no (a mismatching file is said on
 * stderr and removed where it may be), -1 with e when the entry is there
 * and refused (cache.unsafe_entry). own: the server's own cache, whose
 * entries must be the server user's; a mirror or another tools directory's
 * cache is a read-only source, hashed whoever owns it. */
static int
cache_hit(const char *dir, int own, const char *sha, int *fdp, char *path, size_t cap, struct err *e)
{
	struct digest want;

	if (digest_parse_hex(DIGEST_SHA256, sha, &want, "install.manifest_invalid", e) < 0)
		return -1;
	return cache_get(dir, own, &want, NULL, NULL, fdp, path, cap, e);
}

/* A mirror entry as a local directory ("/dir" or "file:///dir"), or NULL. */
const char *
install_mirror_dir(const char *mirror)
{
	if (mirror[0] == '/')
		return mirror;
	if (strncmp(mirror, "file://", 7) == 0)
		return mirror + 7;
	return NULL;
}

/* Where a verified copy of sha may already be: the cache, every chain
 * directory's cache, local mirror directories. 1 (*fdp), 0, or -1 with e. */
static int
find_local(struct install_env *c, const char *sha, int *fdp, char *path, size_t cap, struct err *e)
{
	char dir[PATH_MAX];
	int i, rc;

	if (c->cache_dir[0] && (rc = cache_hit(c->cache_dir, 1, sha, fdp, path, cap, e)) != 0)
		return rc;
	for (i = 0; i < c->chain.n; i++) {
		if (fs_path_join(dir, sizeof(dir), c->chain.d[i].path, ".cache", NULL) == 0 &&
		    strcmp(dir, c->cache_dir) != 0 && (rc = cache_hit(dir, 0, sha, fdp, path, cap, e)) != 0)
			return rc;
	}
	for (i = 0; i < c->cfg->install.tarball_mirrors.n; i++) {
		const char *d = install_mirror_dir(c->cfg->install.tarball_mirrors.v[i]);
		if (d != NULL && (rc = cache_hit(d, 0, sha, fdp, path, cap, e)) != 0)
			return rc;
	}
	return 0;
}

/* Only checks that a file of that name exists (for the network probe
 * decision; the real lookup hashes). */
int
install_maybe_local(struct install_env *c, const char *sha)
{
	char p[PATH_MAX];
	int i;

	if (c->cache_dir[0] && fs_path_join(p, sizeof(p), c->cache_dir, sha, NULL) == 0 &&
	    access(p, R_OK) == 0)
		return 1;
	for (i = 0; i < c->chain.n; i++)
		if (fs_path_join(p, sizeof(p), c->chain.d[i].path, ".cache", NULL) == 0 &&
		    fs_path_join(p, sizeof(p), p, sha, NULL) == 0 && access(p, R_OK) == 0)
			return 1;
	for (i = 0; i < c->cfg->install.tarball_mirrors.n; i++) {
		const char *d = install_mirror_dir(c->cfg->install.tarball_mirrors.v[i]);
		if (d != NULL && fs_path_join(p, sizeof(p), d, sha, NULL) == 0 && access(p, R_OK) == 0)
			return 1;
	}
	return 0;
}

/* Expand a mirror URL template: {host} = the original host (with :port when
 * the URL named one), {path} = the original path without its leading '/'. */
int
install_mirror_url(const char *tmpl, const char *url, char *out, size_t cap, char *mhost, size_t mcap)
{
	struct http_url u, mu;
	char host[HTTP_HOST_MAX + 8];
	const char *s;
	size_t off = 0;

	if (http_url_parse(url, &u, NULL) < 0)
		return -1;
	if (u.port_explicit)
		snprintf(host, sizeof(host), "%s:%d", u.host, u.port);
	else
		snprintf(host, sizeof(host), "%s", u.host);
	for (s = tmpl; *s && off + 1 < cap; s++) {
		const char *ins = NULL;
		if (strncmp(s, "{host}", 6) == 0)
			ins = host, s += 5;
		else if (strncmp(s, "{path}", 6) == 0)
			ins = u.target + 1, s += 5;
		if (ins != NULL) {
			size_t n = strlen(ins);
			if (off + n >= cap)
				return -1;
			memcpy(out + off, ins, n);
			off += n;
		} else {
			out[off++] = *s;
		}
	}
	out[off] = '\0';
	if (strstr(tmpl, "{path}") == NULL) {
		/* a bare base URL: append host and path */
		if ((size_t)snprintf(out + off, cap - off, "%s%s%s", off && out[off - 1] == '/' ? "" : "/",
		                     host, u.target) >= cap - off)
			return -1;
	}
	if (http_url_parse(out, &mu, NULL) < 0)
		return -1;
	snprintf(mhost, mcap, "%s", mu.host);
	return 0;
}

/* ---- extraction while downloading ------------------------------------------
 *
 * The extractor (install_stream.run, on its own thread) reads each chunk
 * of the download as it is handed to the cache pipe's worker: libarchive
 * parses bytes before their digest is known. Accepted, as npm itself
 * does: they arrived over TLS from an allowed host, libarchive is fuzzed,
 * and what it writes goes to a private staging directory that is used only
 * once the digest of every byte (the same bytes, in the same memory)
 * matched; on a mismatch, a cut connection or an extraction error the
 * staged tree is discarded (reset) and the error is the one the download
 * or the extraction gives without streaming. */

struct xrun {
	struct install_stream *xs;
	struct cache_pipe *p;
	pthread_t th;
	int started, rc;
	struct err e;
	char details[ERR_DETAILS_MAX]; /* e's */
};

static ssize_t
xrun_read(void *ctx, const void **out)
{
	return cache_pipe_next(ctx, out);
}

static void *
xrun_main(void *arg)
{
	struct xrun *x = arg;

	err_keep_details(&x->e, x->details, sizeof(x->details));
	x->rc = x->xs->run(x->xs->arg, xrun_read, x->p, &x->e);
	cache_pipe_unfollow(x->p);
	return NULL;
}

/* Follow the download of put with an extractor, if xs asks: a thread that
 * cannot start leaves the download alone (extracted afterwards). */
static void
xrun_start(struct xrun *x, struct install_stream *xs, struct cache_put *put)
{
	pthread_attr_t at;

	memset(x, 0, sizeof(*x));
	if (xs == NULL || cache_pipe_follow(put->pipe) != 0)
		return;
	x->xs = xs;
	x->p = put->pipe;
	pthread_attr_init(&at);
	/* arc keeps its buffers on the heap (as for npm's workers) */
	pthread_attr_setstacksize(&at, 256 << 10);
	x->started = pthread_create(&x->th, &at, xrun_main, x) == 0;
	pthread_attr_destroy(&at);
	if (!x->started)
		cache_pipe_unfollow(x->p);
}

/* Wait for the extractor (the download has ended: finished or abandoned);
 * what it staged is discarded unless the download was sound (ok) and the
 * extraction too. 0, or -1 with e (the extraction's error). */
static int
xrun_join(struct xrun *x, int ok, struct err *e)
{
	int64_t t0 = clock_us();

	if (!x->started)
		return 0;
	pthread_join(x->th, NULL);
	x->started = 0;
	x->xs->tail_us = clock_us() - t0;
	if (ok && x->rc == 0) {
		x->xs->done = 1;
		return 0;
	}
	x->xs->reset(x->xs->arg);
	if (ok) {
		err_copy(e, &x->e);
		return -1;
	}
	return 0;
}

/* Download url into dir/<sha> (via a temporary name), hashing while it
 * arrives, extracting it too with xs. Returns 0 (path set, *fdp the
 * descriptor the hashed bytes were written to), -1 with e. *mismatch is set on a digest
 * mismatch (and e says expected/actual). want_sha "" = unpinned: the file
 * is kept under the digest it has. -2 with e: downloaded and verified, but
 * its extraction (xs) failed: no other mirror is tried. With oci the bytes
 * are the registry's blob want_sha instead (url only names it in
 * messages), through the same sink and the same check; *status gets the
 * final HTTP status (404: the registry has no such blob). */
static int
download_from(struct install_env *c, const manifest_t *m, const char *url, const char *extra_host,
              const char *dir, const char *want_sha, struct install_progress_state *ps,
              struct install_stream *xs, int *fdp, char *path, size_t cap, char *got_sha,
              struct oci_client *oci, int *status, struct err *e)
{
	struct xrun x;
	struct http_request rq;
	struct http_response rs;
	struct hostrule hr;
	const char *mh[MANIFEST_MAX_HOSTS], *ah[CFG_HOSTS_MAX], *xh[1] = {extra_host};
	struct dl d;
	struct digest dg, want, sha;
	char hex[DIGEST_HEX_MAX];
	int64_t remaining, cpu0;
	int i, rc;

	if (c->http == NULL && (c->http = config_http_client(e)) == NULL)
		return -1;
	if (want_sha[0] != '\0' &&
	    digest_parse_hex(DIGEST_SHA256, want_sha, &want, "install.manifest_invalid", e) < 0)
		return -1;
	/* the manifest's hosts, the mirror's own, install.allow_hosts */
	/* plain http only for a mirror the configuration allowed it for (a
	 * pinned download: install_get_artifact never sends an unpinned one
	 * there) */
	hostrule_init(&hr,
	              !(c->cfg->install.allow_http_mirrors && strncmp(url, "http://", 7) == 0 && want_sha[0]),
	              "the manifest's hosts nor install.allow_hosts");
	for (i = 0; i < m->nhosts; i++)
		mh[i] = m->hosts[i];
	for (i = 0; i < c->cfg->install.allow_hosts.n; i++)
		ah[i] = c->cfg->install.allow_hosts.v[i];
	hostrule_add(&hr, mh, m->nhosts);
	hostrule_add(&hr, xh, extra_host != NULL && extra_host[0] ? 1 : 0);
	hostrule_add(&hr, ah, c->cfg->install.allow_hosts.n);
	memset(&d, 0, sizeof(d));
	d.c = c;
	/* a blob nobody keeps is not written when the extractor follows */
	if (cache_put_open(&d.put, xs != NULL && c->drop_downloads ? NULL : dir, DIGEST_SHA256, e) < 0)
		return -1;
	cpu0 = clock_thread_cpu_us();
	xrun_start(&x, xs, &d.put);
	if (d.put.fd < 0 && !x.started) {
		cache_put_abort(&d.put);
		if (cache_put_open(&d.put, dir, DIGEST_SHA256, e) < 0)
			return -1;
	}
	d.ps = ps;
	http_request_init(&rq, url);
	rq.host_ok = hostrule_check;
	rq.host_arg = &hr;
	rq.sink = dl_sink;
	rq.sink_arg = &d;
	rq.limits.max_body = (int64_t)c->cfg->install.max_download_mb << 20;
	remaining = (int64_t)c->cfg->install.timeout * 1000;
	rq.limits.total_ms = remaining > 0x7fffffff ? 0x7fffffff : (int)remaining;
	memset(&rs, 0, sizeof(rs));
	d.rs = &rs;
	if (ps != NULL && ps->cur.count == 0)
		ps->cur.count = 1;
	c->n.downloads++;
	if ((oci != NULL ? oci_blob_get(oci, want_sha, dl_sink, &d, &rq.limits, &rs, e)
	                 : http_request(c->http, &rq, &rs, e)) < 0) {
		if (status != NULL)
			*status = rs.status;
		cache_put_abort(&d.put);
		xrun_join(&x, 0, e);
		return -1;
	}
	c->n.bytes_downloaded += d.put.bytes;
	if (ps != NULL) {
		ps->base += d.put.bytes;
		ps->cur.bytes = ps->cur.total = ps->base;
	}
	rc = cache_put_commit(&d.put, want_sha[0] ? &want : NULL, 1, &dg, &sha, fdp, path, cap, e);
	if (ps != NULL && ps->cpu != NULL) {
		ps->cpu[INSTALL_CPU_RECV] += clock_thread_cpu_us() - cpu0;
		ps->cpu[INSTALL_CPU_DIGEST] += d.put.cpu.digest_us;
		ps->cpu[INSTALL_CPU_BLOB] += d.put.cpu.write_us;
	}
	if (xrun_join(&x, rc > 0, e) < 0) {
		if (*fdp >= 0)
			close(*fdp);
		*fdp = -1;
		return -2;
	}
	if (rc < 0)
		return -1;
	if (xs != NULL)
		xs->bytes = d.put.bytes;
	digest_hex(&dg, hex);
	snprintf(got_sha, 65, "%.64s", hex); /* sha256: 64 digits */
	if (rc == 0) {
		char tagged[8 + DIGEST_HEX_MAX];

		err_set(e, "install.checksum_mismatch", "%s %s %s: %s: expected sha256 %s, got %s", m->name,
		        m->version, c->platform, url, want_sha, hex);
		err_detail_str(e, "phase", "fetch");
		snprintf(tagged, sizeof(tagged), "sha256:%s", want_sha);
		err_detail_str(e, "expected", tagged);
		snprintf(tagged, sizeof(tagged), "sha256:%s", hex);
		err_detail_str(e, "actual", tagged);
		return -1;
	}
	return 0;
}

static int
download(struct install_env *c, const manifest_t *m, const char *url, const char *extra_host, const char *dir,
         const char *want_sha, struct install_progress_state *ps, struct install_stream *xs, int *fdp,
         char *path, size_t cap, char *got_sha, struct err *e)
{
	return download_from(c, m, url, extra_host, dir, want_sha, ps, xs, fdp, path, cap, got_sha, NULL,
	                     NULL, e);
}

/* The OCI mirror's blob for the pinned sha256 of a, as download gives it
 * (0, -1, -2); 1 when the registry has no such blob. */
static int
from_oci(struct install_env *c, const manifest_t *m, const struct manifest_artifact *a, const char *dl_dir,
         struct install_progress_state *ps, struct install_stream *xs, int *fdp, char *path, size_t cap,
         char *got_sha, struct err *e)
{
	struct oci_client *o;
	char ref[HTTP_URL_MAX];
	int status = 0, rc;

	if ((o = install_oci_client(c, e)) == NULL)
		return -1;
	snprintf(ref, sizeof(ref), "%s@sha256:%s", c->cfg->install.oci_mirror, a->sha256);
	rc =
	    download_from(c, m, ref, NULL, dl_dir, a->sha256, ps, xs, fdp, path, cap, got_sha, o, &status, e);
	if (rc == -1 && status == 404 && e->code != NULL && strcmp(e->code, "http.status") == 0)
		return 1;
	return rc;
}

/* Where the artifact got_sha came from, for its marker's SBOM row: a
 * then b, and the digest after a "@sha256:" b. */
static void
note_source(struct install_env *c, const char *got_sha, const char *a, const char *b)
{
	snprintf(c->src_sha, sizeof(c->src_sha), "%s", got_sha);
	snprintf(c->src, sizeof(c->src), "%s%s%s", a, b, strcmp(b, "@sha256:") == 0 ? got_sha : "");
}

/*
 * Make a verified copy of artifact a available: local caches and mirror
 * directories first, the OCI mirror next (offline too: it is the fleet's
 * shared cache), then (unless offline) mirror URL templates and the
 * original URL. dl_dir is where a download goes (the cache, or staging).
 */
int
install_get_artifact(struct install_env *c, const manifest_t *m, const struct manifest_artifact *a,
                     const char *dl_dir, struct install_progress_state *ps, struct install_stream *xs,
                     int *fdp, char *path, size_t cap, char *got_sha, struct err *e)
{
	struct err last = {0}, mism = {0};
	char url[HTTP_URL_MAX], mhost[HTTP_HOST_MAX], lastd[ERR_DETAILS_MAX], mismd[ERR_DETAILS_MAX];
	int i, rc, have_mismatch = 0;

	err_keep_details(&last, lastd, sizeof(lastd));
	err_keep_details(&mism, mismd, sizeof(mismd));
	*fdp = -1;
	if (a->sha256[0] != '\0' && (rc = find_local(c, a->sha256, fdp, path, cap, e)) != 0) {
		if (rc < 0)
			return -1;
		snprintf(got_sha, 65, "%s", a->sha256);
		note_source(c, got_sha, "cache:", path);
		install_test_hashed(path);
		return 0;
	}
	if (a->sha256[0] != '\0' && c->cfg->install.oci_mirror[0] != '\0' && dl_dir != NULL &&
	    dl_dir[0] != '\0') {
		rc = from_oci(c, m, a, dl_dir, ps, xs, fdp, path, cap, got_sha, &last);
		if (rc == 0) {
			note_source(c, got_sha, c->cfg->install.oci_mirror, "@sha256:");
			install_test_hashed(path);
			return 0;
		}
		if (rc == 1)
			err_clear(&last);
		if (rc == -2) {
			err_copy(e, &last);
			return -1;
		}
		if (rc < 0 && last.code && strcmp(last.code, "install.checksum_mismatch") == 0) {
			err_copy(&mism, &last);
			have_mismatch = 1;
		}
	}
	if (c->cfg->install.mode == CFG_MODE_OFFLINE) {
		const char *om = c->cfg->install.oci_mirror;
		char det[80], src[CFG_PATH_MAX + 16];
		struct json_w w;

		if (have_mismatch) {
			err_copy(e, &mism);
			return -1;
		}
		if (last.code != NULL) {
			/* the registry failed (not a miss): that is the cause */
			err_copy(e, &last);
			if (strncmp(e->code, "install.", 8) != 0)
				install_fetch_failed(e, m, om, e->msg);
			return -1;
		}
		err_set(e, "install.disabled",
		        "%s %s %s: mode offline (%s) and sha256:%s is not in the cache (%s) nor "
		        "any mirror directory%s%s%s",
		        m->name, m->version, c->platform,
		        config_source(c->cfg, CK_INSTALL_MODE, src, sizeof(src)),
		        a->sha256[0] ? a->sha256 : "(unpinned)", c->cache_dir[0] ? c->cache_dir : "none",
		        om[0] ? ", nor the OCI mirror " : "", om, om[0] ? " (no such blob)" : "");
		snprintf(det, sizeof(det), "sha256:%s", a->sha256);
		json_w_init(&w, ERR_DETAILS_MAX);
		json_w_arr(&w);
		json_w_str(&w, det);
		json_w_end(&w);
		if (!w.overflow)
			err_detail_json(e, "missing", w.buf);
		json_w_free(&w);
		return -1;
	}
	if (dl_dir == NULL || dl_dir[0] == '\0')
		return err_set(e, "install.read_only", "no writable place for the download of %s", m->name);
	for (i = 0; i <= c->cfg->install.tarball_mirrors.n; i++) {
		const char *u = a->url, *extra = NULL;
		if (i < c->cfg->install.tarball_mirrors.n) {
			if (install_mirror_dir(c->cfg->install.tarball_mirrors.v[i]) != NULL)
				continue;
			if (install_mirror_url(c->cfg->install.tarball_mirrors.v[i], a->url, url, sizeof(url),
			                       mhost, sizeof(mhost)) < 0)
				continue;
			/* a plain http mirror serves only what is pinned */
			if (strncmp(url, "http://", 7) == 0 && a->sha256[0] == '\0')
				continue;
			u = url;
			extra = mhost;
		}
		rc = download(c, m, u, extra, dl_dir, a->sha256, ps, xs, fdp, path, cap, got_sha, &last);
		if (rc == 0) {
			note_source(c, got_sha, u, "");
			install_test_hashed(path);
			return 0;
		}
		if (rc == -2) {
			err_copy(e, &last);
			return -1;
		}
		if (last.code && strcmp(last.code, "install.checksum_mismatch") == 0) {
			err_copy(&mism, &last);
			have_mismatch = 1;
		}
	}
	err_copy(e, have_mismatch ? &mism : &last);
	if (!have_mismatch && (e->code == NULL || strncmp(e->code, "install.", 8) != 0))
		install_fetch_failed(e, m, a->url, e->msg);
	return -1;
}

int
install_cache_artifact(struct install_env *c, const struct install_req *rq, const manifest_t *m,
                       const struct manifest_artifact *a, char *path, size_t cap, struct install_counts *n,
                       struct err *e)
{
	char got[65];
	int fd, rc;

	if (c->cache_dir[0] == '\0')
		return err_set(e, "install.read_only", "no writable cache directory (use --cache DIR)");
	if (install_mkdir(c->cache_dir, 0755, e) < 0)
		return -1;
	install_collect_stale(c->cache_dir, ".tmp-");
	if (a->sha256[0] == '\0')
		return err_set(e, "install.manifest_invalid", "%s: %s has no pinned sha256", m->name,
		               a->platform);
	install_call_begin(c, rq);
	rc = install_get_artifact(c, m, a, c->cache_dir, NULL, NULL, &fd, path, cap, got, e);
	install_call_end(c, n);
	if (fd >= 0)
		close(fd);
	return rc;
}
