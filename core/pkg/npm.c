/*
 * The native npm-lock installer; the contract is in npm.h.
 *
 * Scheduling: one shared table of packages, sorted by path, under one
 * mutex. A worker takes the next package in that order, gets its verified
 * bytes (cache or download), waits until the package whose node_modules
 * holds it is extracted (sorted order puts that one earlier, so it is done
 * or in another worker's hands), and extracts it. With keep_trees, a
 * package whose extracted tree the cache holds is placed from there after
 * the same wait, with no bytes fetched (a damaged entry: fetched and
 * extracted as before), and an extracted package is kept as a tree. Each
 * worker is a whole download-verify-extract pipeline, so downloads and
 * extraction overlap across workers and a tarball never waits in a queue.
 *
 * One read of the bytes: a tarball of at most NPM_MEM_MAX bytes is kept in
 * its worker's buffer while it is downloaded (or read once from the cache)
 * and hashed, and extracted from there: the bytes extracted are the bytes
 * verified, with no second read and no window for the cache file to change.
 * A larger one is streamed to the cache and extracted from the descriptor
 * it was hashed through (never its name), hashed again as it is read.
 */
#include "pkg/npm.h"
#include "pkg/npm_int.h"

#include "base/buf.h"
#include "pkg/arc.h"
#include "pkg/cache.h"
#include "base/clock.h"
#include "config/config.h"
#include "base/digest.h"
#include "net/hostrule.h"
#include "net/http.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FAILED "install.failed"

/* A worker's in-memory tarball (see above). 8 workers hold at most 8 MiB;
 * npm tarballs are mostly a few KiB (jest's 268: p99 200 KiB). */
#define NPM_MEM_MAX (1u << 20)

/* A worker's tarball in memory: b holds it, ok when b is the whole
 * verified tarball. */
struct mem {
	struct buf b;
	int ok;
};

enum pstate { P_NEW, P_FETCHING, P_FETCHED, P_EXTRACTING, P_DONE };

/* One package of the lockfile on its way from the registry into the tree. */
struct pkg_fetch {
	const struct npmlock_pkg *p;
	enum pstate st;
	int parent;      /* index of the package holding it, or -1 */
	char file[4096]; /* verified cache file */
	int fd;          /* the descriptor it was verified through (do_one's), or -1 */
	uint64_t size;   /* the tarball's bytes */
};

struct run {
	const struct npm_opts *o;
	struct pkg_fetch *jobs;
	size_t n, done;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int failed;
	struct err err;                /* the first failure */
	char details[ERR_DETAILS_MAX]; /* err's */
	struct npm_stats st;
	uint64_t announced;
	size_t next;            /* the next job to take */
	char reg[HTTP_URL_MAX]; /* mirror base without a trailing slash */
};

static int fail_phase(struct err *e, const char *phase, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
fail_phase(struct err *e, const char *phase, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err_setv(e, FAILED, fmt, ap);
	va_end(ap);
	err_detail_str(e, "phase", phase);
	return -1;
}

/* ---- fetch ------------------------------------------------------------ */

/*
 * A package too large for memory whose parent is extracted already is
 * extracted as it downloads, on a thread of its own reading the download's
 * chunks (cache_pipe_follow). libarchive then parses bytes before their digest is
 * known. Accepted, as npm itself does: they arrived over TLS from an
 * allowed host, libarchive is fuzzed, and the tree goes to the install's
 * private staging, used only once the digest of every byte (the memory the
 * extractor read) matched: a mismatch, a cut connection or another
 * package's failure fails the install, whose staging is then discarded,
 * with the error the download gives without streaming. A cached tarball is
 * extracted as before.
 */
struct stream {
	struct run *r;
	struct pkg_fetch *j;
	int rootfd;
	struct cache_pipe *p;
	pthread_t th;
	int started, abandon; /* abandon: r->mu */
	/* the extractor's results, read once it is joined */
	int rc, dfd;
	struct cache_sums sums;
	struct arc_stats as;
	struct err e;
	char details[ERR_DETAILS_MAX]; /* e's */
};

static void stream_start(struct stream *x, struct cache_put *put);
static void stream_join(struct stream *x, int ok);
static int parent_done(const struct run *r, const struct pkg_fetch *j);

struct sink {
	struct run *r;
	struct buf *b; /* NULL: not kept in memory */
	struct cache_put put;
	uint64_t bytes;
	const struct http_response *rs; /* its length is known at the first write */
	struct stream *xs;              /* extracts as it downloads, if large; NULL: never */
};

static int
sink_write(void *arg, const void *buf, size_t len, struct err *e)
{
	struct sink *s = arg;

	if (__atomic_load_n(&s->r->failed, __ATOMIC_RELAXED))
		return err_set(e, FAILED, "cancelled: another package failed");
	if (s->bytes == 0 && s->xs != NULL && s->rs->content_length > (int64_t)NPM_MEM_MAX) {
		int ready;
		/* only when it can be extracted at once: the connection is read
		 * at the extractor's pace, never held while another package is
		 * extracted (then it is extracted from the cache, as before) */
		pthread_mutex_lock(&s->r->mu);
		ready = parent_done(s->r, s->xs->j);
		pthread_mutex_unlock(&s->r->mu);
		if (ready)
			stream_start(s->xs, &s->put);
		if (s->xs->started)
			s->b = NULL;
	}
	if (cache_put_write(&s->put, buf, len, e) < 0)
		return fail_phase(e, "fetch", "%s", e->msg);
	if (s->b != NULL)
		buf_put(s->b, buf, len);
	pthread_mutex_lock(&s->r->mu);
	/* a package counts in the total once its response announces it,
	 * not when it is complete (the total lagged the bytes) */
	if (s->bytes == 0 && s->rs->content_length > 0)
		s->r->announced += (uint64_t)s->rs->content_length;
	s->bytes += len;
	s->r->st.bytes += len;
	if (s->r->o->progress)
		s->r->o->progress(s->r->o->progress_arg, s->r->st.bytes, s->r->announced, s->r->done,
		                  s->r->n);
	pthread_mutex_unlock(&s->r->mu);
	return 0;
}

/* j's slot in o->sources, or NULL. Each is written only by the worker
 * holding its job. */
static char *
source_of(const struct run *r, const struct pkg_fetch *j)
{
	return r->o->sources != NULL ? r->o->sources[j->p - r->o->lock->pkgs] : NULL;
}

static int
offline_miss(const struct npmlock_pkg *p, struct err *e)
{
	return err_set(e, "install.disabled", "offline and not in the cache: %s@%s (%s)", p->name, p->version,
	               p->integrity);
}

/* Get j's verified bytes: from the cache, else downloaded (into m when
 * small; extracted as they arrive with xs, when large: xs->started). */
static int
fetch_one(struct run *r, struct http_client *hc, struct pkg_fetch *j, struct mem *m, struct stream *xs,
          struct err *e)
{
	const struct npm_opts *o = r->o;
	const struct npmlock_pkg *p = j->p;
	char url[HTTP_URL_MAX], from[HTTP_URL_MAX], want[DIGEST_SRI_MAX], got[DIGEST_SRI_MAX];
	struct http_request rq;
	struct http_response *rs;
	struct hostrule hr;
	struct sink s;
	struct digest dw, d256;
	int64_t cpu0;
	char *src;
	int rc;

	buf_reset(&m->b);
	m->ok = 0;
	if ((rc = cache_get_any(o->caches_ro, o->ncaches_ro, o->cache, &p->digest,
	                        o->fetch_only ? NULL : &m->b, &m->ok, o->fetch_only ? NULL : &j->fd, j->file,
	                        sizeof(j->file), e)) != 0) {
		if (rc > 0) {
			struct stat cs;
			uint64_t sz = j->fd >= 0 && fstat(j->fd, &cs) == 0 ? (uint64_t)cs.st_size
			              : m->ok                              ? m->b.len
			                                                   : 0;
			j->size = sz;
			if ((src = source_of(r, j)) != NULL && src[0] == '\0')
				npm_source_set(src, NPM_SOURCE_MAX, "cache:", j->file);
			pthread_mutex_lock(&r->mu);
			r->st.cached++;
			r->st.cached_bytes += sz;
			pthread_mutex_unlock(&r->mu);
		}
		return rc < 0 ? -1 : 0;
	}
	if (o->offline && o->source == NULL)
		return offline_miss(p, e);
	if (r->reg[0] != '\0')
		rc = snprintf(url, sizeof(url), "%s%s", r->reg, p->url_path);
	else
		rc = snprintf(url, sizeof(url), "%s", p->resolved);
	if (rc < 0 || (size_t)rc >= sizeof(url))
		return err_set(e, "http.url", "URL too long for %s", p->path);

	cpu0 = clock_thread_cpu_us();
	memset(&s, 0, sizeof(s));
	buf_reset(&m->b);
	s.r = r;
	s.b = o->fetch_only ? NULL : &m->b;
	s.xs = o->fetch_only ? NULL : xs;
	if (cache_put_open(&s.put, o->cache, p->digest.alg, e) < 0)
		return fail_phase(e, "fetch", "%s", e->msg);
	if ((rs = calloc(1, sizeof(*rs))) == NULL) {
		cache_put_abort(&s.put);
		return err_set(e, "internal", "out of memory");
	}
	hostrule_init(&hr, !o->allow_http, "the manifest's hosts or the allowed mirrors");
	hostrule_add(&hr, o->hosts, (int)o->nhosts);
	http_request_init(&rq, url);
	rq.host_ok = hostrule_check;
	rq.host_arg = &hr;
	if (r->reg[0] != '\0' && o->auth != NULL)
		rq.headers[rq.nheaders++] = o->auth;
	rq.sink = sink_write;
	rq.sink_arg = &s;
	if (o->max_bytes > 0)
		rq.limits.max_body = o->max_bytes;
	if (o->deadline_ms > 0) {
		int64_t left = o->deadline_ms - clock_ms();
		if (left <= 0)
			left = 1;
		rq.limits.total_ms = left > 0x7fffffff ? 0x7fffffff : (int)left;
	}
	s.rs = rs;
	from[0] = '\0';
	rc = o->source != NULL
	         ? o->source(o->source_arg, hc, p, sink_write, &s, &rq.limits, rs, from, sizeof(from), e)
	         : 1;
	if (rc > 0)
		rc = o->offline ? offline_miss(p, e) : http_request(hc, &rq, rs, e);
	else if (rc == 0) /* the bytes are named by where they came from */
		snprintf(url, sizeof(url), "%s", from);
	/* the mirror's own answer, not a redirect target's (a CDN's 403) */
	if (rc != 0 && r->reg[0] != '\0' && (rs->status == 401 || rs->status == 403) &&
	    strncmp(rs->url, r->reg, strlen(r->reg)) == 0)
		err_set(e, "install.npm_auth",
		        "%s@%s: the npm mirror %s (install.mirrors.npm) answered %d: %s%s", p->name,
		        p->version, r->reg, rs->status,
		        o->auth != NULL ? "it refused the credential from " : "",
		        o->auth != NULL
		            ? o->auth_from
		            : "it asks for a credential and none is set (install.mirrors.npm_auth_file "
		              "or ABX_INSTALL_NPM_TOKEN)");
	if (rc != 0) {
		/* the host it failed on, unless the message names the URL */
		const char *u = rs->url[0] ? rs->url : url, *h = strstr(u, "://");
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", e->msg);
		if (e->code && (strncmp(e->code, "http.", 5) == 0 || strncmp(e->code, "tls.", 4) == 0) &&
		    err_details_text(e)[0] == '\0' && strstr(msg, "://") == NULL && h != NULL)
			err_set(e, e->code, "%s@%s from %.*s: %s", p->name, p->version,
			        (int)strcspn(h + 3, "/"), h + 3, msg);
		else if (e->code && strncmp(e->code, "http.", 5) == 0 && err_details_text(e)[0] == '\0')
			err_set(e, e->code, "%s@%s: %s", p->name, p->version, msg);
		free(rs);
		cache_put_abort(&s.put);
		stream_join(xs, 0);
		return -1;
	}
	free(rs);
	/* No fsync: every use of a cache entry re-hashes it against the
	 * integrity first, so an entry torn by a power cut is a miss, never an
	 * install of wrong bytes; 300 fsyncs would cost more than the rest. */
	rc = cache_put_commit(&s.put, &p->digest, 0, &dw, &d256, o->fetch_only ? NULL : &j->fd, j->file,
	                      sizeof(j->file), e);
	stream_join(xs, rc > 0);
	if (rc < 0)
		return fail_phase(e, "fetch", "%s", e->msg);
	if (rc == 0)
		return err_set(e, "install.checksum_mismatch", "%s@%s (%s): expected %s, got %s", p->name,
		               p->version, url, digest_sri(&p->digest, want), digest_sri(&dw, got));
	m->ok = s.b != NULL && !s.b->over;
	j->size = s.put.bytes;
	if ((src = source_of(r, j)) != NULL)
		npm_source_set(src, NPM_SOURCE_MAX, "", url);
	pthread_mutex_lock(&r->mu);
	r->st.fetched++;
	r->st.cpu_recv_us += clock_thread_cpu_us() - cpu0;
	r->st.cpu_digest_us += s.put.cpu.digest_us;
	r->st.cpu_blob_us += s.put.cpu.write_us;
	pthread_mutex_unlock(&r->mu);
	return 0;
}

/* ---- extract ------------------------------------------------------------ */

struct file_tap {
	const struct npm_opts *o;
	const char *pkgpath;
	struct cache_sums *sums; /* extraction's digests for the tree cache, or NULL */
	char copy[24];           /* the copy of the file reported next (arc_copy_fn) */
};

static void
copy_tap(void *arg, const char *name, const char *copy)
{
	struct file_tap *t = arg;

	snprintf(t->copy, sizeof(t->copy), "%s", copy);
}

static void
file_tap(void *arg, const char *name, const struct stat *st, const unsigned char sha256[32])
{
	struct file_tap *t = arg;

	if (t->sums != NULL)
		cache_sums_add_copy(t->sums, name, st, sha256, t->copy);
	t->copy[0] = '\0';
	if (t->o->on_file != NULL)
		t->o->on_file(t->o->file_arg, t->pkgpath, name, st, sha256);
}

/* The tree cache's key for a package: its integrity, extracted ARC_NPM. */
static int
tree_key(const struct pkg_fetch *j, char key[CACHE_KEY_MAX])
{
	return cache_tree_key(&j->p->digest, NPM_TREE_VARIANT, key);
}

/* Extract j's tarball into its directory (*dfdp, left open) from memory
 * (m->ok), from the download as it arrives (read), or from the verified
 * cache file. 0; -1 when the extractor failed (dfd open: the caller names
 * the package); -2 with e final (nothing left open). */
static int
extract_pkg(struct run *r, struct pkg_fetch *j, const struct mem *m, arc_read_fn read, void *rctx, int rootfd,
            int *dfdp, struct cache_sums *sums, struct arc_stats *as, struct err *e)
{
	struct file_tap tap = {r->o, j->p->path, r->o->keep_trees ? sums : NULL, ""};
	char key[CACHE_KEY_MAX];
	struct digest_ctx tee;
	struct arc_opts ao;
	int afd = -1, dfd, rc, from_file = !m->ok && read == NULL;

	*dfdp = -1;
	/* the descriptor the blob was hashed through, never its name (renamed
	 * over by anyone who can write the cache directory) */
	if (from_file) {
		afd = j->fd;
		j->fd = -1;
		if (afd < 0 || lseek(afd, 0, SEEK_SET) != 0) {
			fail_phase(e, "extract", "%s: %s", j->file, afd < 0 ? "not open" : strerror(errno));
			if (afd >= 0)
				close(afd);
			return -2;
		}
	}
	dfd = npm_dir_open(rootfd, j->p->path, e);
	if (dfd < 0) {
		if (afd >= 0)
			close(afd);
		return -2;
	}
	arc_opts_init(&ao, ARC_FMT_TAR_GZ);
	ao.flags = ARC_NPM;
	/* Too large to keep in memory: the file was verified when it entered
	 * the cache or when it was looked up, but the cache directory may be
	 * shared, so what the extractor reads is hashed as it reads it and
	 * checked before the package counts (or is kept): a mismatch fails
	 * the install, whose staging is then discarded, unpublished. (Read as
	 * it downloads, it is the memory the download's digest covers.) */
	if (from_file) {
		digest_init(&tee, j->p->digest.alg);
		ao.tee = &tee;
	}
	if (r->o->on_file != NULL || tap.sums != NULL) {
		ao.on_file = file_tap;
		ao.file_ctx = &tap;
	}
	/* the tree to keep is written by the extraction itself, beside the
	 * package (the bytes it hashes, in the cache), and renamed into the
	 * kept entry: no second pass over the package's bytes (streamed, the
	 * copies go with the staging when the digest does not match) */
	if (tap.sums != NULL && tap.sums->copies == NULL && tree_key(j, key) == 0 &&
	    !cache_tree_has(r->o->cache, key)) {
		ao.copy_dirfd = cache_sums_copies(tap.sums, r->o->cache);
		ao.on_copy = copy_tap;
	}
	memset(as, 0, sizeof(*as));
	if (m->ok)
		rc = arc_extract_mem(m->b.p, m->b.len, dfd, &ao, as, e);
	else if (read != NULL)
		rc = arc_extract_read(read, rctx, dfd, &ao, as, e);
	else
		rc = arc_extract_fd(afd, dfd, &ao, as, e);
	if (afd >= 0)
		close(afd);
	*dfdp = dfd;
	if (rc == 0 && ao.tee != NULL) {
		struct digest got;
		digest_final(&tee, &got);
		if (!digest_equal(&got, &j->p->digest)) {
			close(dfd);
			*dfdp = -1;
			err_set(e, "install.checksum_mismatch",
			        "%s@%s: the cache entry %s changed after verification", j->p->name,
			        j->p->version, j->file);
			return -2;
		}
	}
	return rc < 0 ? -1 : 0;
}

/* After extract_pkg (rc): the package kept as a tree and counted, or its
 * error named. Closes dfd, frees sums. 0 or -1 with e. */
static int
finish_pkg(struct run *r, struct pkg_fetch *j, const struct mem *m, int dfd, struct cache_sums *sums,
           const struct arc_stats *as, int rc, struct err *e)
{
	char key[CACHE_KEY_MAX], meta[64], label[2 * NPMLOCK_NAME_MAX + 80];
	int kept = 0;

	if (rc == -2) {
		cache_sums_free(sums);
		return -1;
	}
	/* Kept before anything else runs in the tree (the packages it holds
	 * are extracted only once this one is done). */
	if (rc == 0 && r->o->keep_trees && tree_key(j, key) == 0) {
		uint64_t sz = m->ok ? m->b.len : j->size;
		/* the tarball's size: a placed package still counts its bytes */
		snprintf(meta, sizeof(meta), "size=%llu", (unsigned long long)sz);
		snprintf(label, sizeof(label), "%s@%s", j->p->name, j->p->version);
		kept = cache_tree_store(r->o->cache, r->o->cache_key, key, dfd, meta, label, cache_sums_get,
		                        sums);
	}
	cache_sums_free(sums);
	close(dfd);
	if (rc != 0)
		return fail_phase(e, "extract", "%s@%s: %s", j->p->name, j->p->version, e->msg);
	pthread_mutex_lock(&r->mu);
	r->st.extracted++;
	r->st.kept += (size_t)kept;
	r->st.files += as->entries;
	r->st.cpu_decompress_us += as->cpu_read_us;
	r->st.cpu_tree_us += as->cpu_write_us;
	pthread_mutex_unlock(&r->mu);
	return 0;
}

static int
extract_one(struct run *r, struct pkg_fetch *j, const struct mem *m, int rootfd, struct err *e)
{
	struct cache_sums sums = {0};
	struct arc_stats as;
	int dfd, rc = extract_pkg(r, j, m, NULL, NULL, rootfd, &dfd, &sums, &as, e);

	return finish_pkg(r, j, m, dfd, &sums, &as, rc, e);
}

static ssize_t
stream_read(void *ctx, const void **out)
{
	return cache_pipe_next(ctx, out);
}

/* The extractor's thread: j's tarball from the download's chunks into its
 * directory (the package holding j is extracted: checked again here, and
 * given up with the download or the install). */
static void *
stream_main(void *arg)
{
	struct stream *x = arg;
	struct run *r = x->r;
	static const struct mem none = {BUF_INIT(0), 0};
	int go;

	err_keep_details(&x->e, x->details, sizeof(x->details));
	pthread_mutex_lock(&r->mu);
	while (!r->failed && !x->abandon && !parent_done(r, x->j))
		pthread_cond_wait(&r->cv, &r->mu);
	go = !r->failed && !x->abandon;
	pthread_mutex_unlock(&r->mu);
	if (go)
		x->rc = extract_pkg(r, x->j, &none, stream_read, x->p, x->rootfd, &x->dfd, &x->sums, &x->as,
		                    &x->e);
	else {
		err_set(&x->e, FAILED, "cancelled: the download or another package failed");
		x->rc = -2;
	}
	cache_pipe_unfollow(x->p);
	return NULL;
}

/* Follow put's download with the extractor (before its first byte). A
 * thread that cannot start leaves the download as it was (kept in the
 * cache, extracted from there). */
static void
stream_start(struct stream *x, struct cache_put *put)
{
	pthread_attr_t at;

	if (cache_pipe_follow(put->pipe) != 0)
		return;
	x->p = put->pipe;
	x->dfd = -1;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 256 << 10);
	x->started = pthread_create(&x->th, &at, stream_main, x) == 0;
	pthread_attr_destroy(&at);
	if (!x->started)
		cache_pipe_unfollow(x->p);
}

/* Wait for the extractor once the download ended (ok: complete and
 * verified); unless ok, what it leaves open is let go (its staging is the
 * install's, discarded with the failure). */
static void
stream_join(struct stream *x, int ok)
{
	if (x == NULL || !x->started)
		return;
	if (!ok) {
		/* it may still wait for the parent */
		pthread_mutex_lock(&x->r->mu);
		x->abandon = 1;
		pthread_cond_broadcast(&x->r->cv);
		pthread_mutex_unlock(&x->r->mu);
	}
	pthread_join(x->th, NULL);
	if (!ok) {
		if (x->dfd >= 0)
			close(x->dfd);
		x->dfd = -1;
		cache_sums_free(&x->sums);
		x->started = 0;
	}
}

/* Place the package from the tree cache: 1, 0 not (extract it), -1 with e. */
static int
place_one(struct run *r, struct pkg_fetch *j, int rootfd, struct err *e)
{
	struct file_tap tap = {r->o, j->p->path, NULL, ""};
	char key[CACHE_KEY_MAX], label[2 * NPMLOCK_NAME_MAX + 80], meta[64] = "";
	const char *base = strrchr(j->p->path, '/');
	struct cache_placed pd = {0};
	int dfd, pfd, rc;

	if (tree_key(j, key) != 0)
		return 0;
	base = base ? base + 1 : j->p->path;
	if ((dfd = npm_dir_open(rootfd, j->p->path, e)) < 0)
		return -1;
	/* ".." of a directory opened without following links is its parent */
	pfd = openat(dfd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(dfd);
	if (pfd < 0)
		return fail_phase(e, "extract", "%s: %s", j->p->path, strerror(errno));
	snprintf(label, sizeof(label), "%s@%s", j->p->name, j->p->version);
	rc = cache_tree_place(r->o->cache, r->o->cache_key, key, pfd, base, label,
	                      r->o->on_file ? file_tap : NULL, &tap, meta, sizeof(meta), &pd, e);
	close(pfd);
	if (rc < 0)
		return fail_phase(e, "extract", "%s: %s", label, e->msg);
	if (rc > 0) {
		char *src = source_of(r, j);
		/* the tree, not the blob it was made from: the bytes installed
		 * are the tree's (checked against its sealed listing), and its
		 * blob may be gone from the cache */
		if (src != NULL) {
			char tp[PATH_MAX];
			if (fs_path_join(tp, sizeof(tp), r->o->cache, "trees", NULL) == 0 &&
			    fs_path_join(tp, sizeof(tp), tp, key, NULL) == 0)
				npm_source_set(src, NPM_SOURCE_MAX, "tree:", tp);
		}
		pthread_mutex_lock(&r->mu);
		r->st.placed++;
		r->st.placed_proved += pd.proved;
		r->st.placed_resealed += pd.resealed;
		r->st.files += pd.files;
		if (strncmp(meta, "size=", 5) == 0)
			r->st.cached_bytes += strtoull(meta + 5, NULL, 10);
		pthread_mutex_unlock(&r->mu);
	}
	return rc;
}

/* ---- workers ------------------------------------------------------------ */

struct worker {
	struct run *r;
	int rootfd;
};

static int
parent_done(const struct run *r, const struct pkg_fetch *j)
{
	return j->parent < 0 || r->jobs[j->parent].st == P_DONE;
}

/* Wait (r->mu held) until pick's parent is done; 0, or -1 once another
 * package failed. The parent was taken earlier (sorted order): it is done
 * or being worked on, never waiting for us. */
static int
wait_parent(struct run *r, struct pkg_fetch *pick)
{
	while (!r->failed && !parent_done(r, pick))
		pthread_cond_wait(&r->cv, &r->mu);
	return r->failed ? -1 : 0;
}

/* One package (r->mu not held): placed from the tree cache, or fetched
 * and extracted. */
static int
do_one(struct worker *w, struct pkg_fetch *pick, struct http_client **hc, struct mem *m, struct err *e)
{
	struct run *r = w->r;
	struct stream xs;
	char key[CACHE_KEY_MAX];
	int rc, waited = 0;

	if (!r->o->fetch_only && r->o->keep_trees && tree_key(pick, key) == 0 &&
	    cache_tree_has(r->o->cache, key)) {
		pthread_mutex_lock(&r->mu);
		pick->st = P_FETCHED;
		rc = wait_parent(r, pick);
		pthread_mutex_unlock(&r->mu);
		if (rc < 0 || (rc = place_one(r, pick, w->rootfd, e)) != 0)
			return rc < 0 ? -1 : 0;
		waited = 1;
	}
	if (*hc == NULL && (*hc = config_http_client(e)) == NULL)
		return -1;
	memset(&xs, 0, sizeof(xs));
	xs.r = r;
	xs.j = pick;
	xs.rootfd = w->rootfd;
	if (fetch_one(r, *hc, pick, m, &xs, e) != 0)
		return -1;
	if (r->o->fetch_only)
		return 0;
	pthread_mutex_lock(&r->mu);
	pick->st = P_FETCHED;
	rc = waited || xs.started ? 0 : wait_parent(r, pick);
	pick->st = P_EXTRACTING;
	pthread_mutex_unlock(&r->mu);
	if (xs.started) {
		/* extracted as it downloaded (its parent first) */
		if (xs.rc != 0)
			err_copy(e, &xs.e);
		return finish_pkg(r, pick, m, xs.dfd, &xs.sums, &xs.as, xs.rc, e);
	}
	return rc < 0 ? -1 : extract_one(r, pick, m, w->rootfd, e);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->r;
	struct http_client *hc = NULL;
	struct mem m = {BUF_INIT(NPM_MEM_MAX), 0};
	struct err e = {0};
	char details[ERR_DETAILS_MAX];

	err_keep_details(&e, details, sizeof(details));
	pthread_mutex_lock(&r->mu);
	while (!r->failed && r->next < r->n) {
		struct pkg_fetch *pick = &r->jobs[r->next++];
		int rc;

		pick->st = P_FETCHING;
		pthread_mutex_unlock(&r->mu);
		rc = do_one(w, pick, &hc, &m, &e);
		if (pick->fd >= 0)
			close(pick->fd);
		pick->fd = -1;
		pthread_mutex_lock(&r->mu);
		if (rc != 0) {
			if (!r->failed) {
				/* sink_write reads it without the lock */
				__atomic_store_n(&r->failed, 1, __ATOMIC_RELAXED);
				err_copy(&r->err, &e);
			}
		} else {
			pick->st = P_DONE;
			r->done++;
			if (r->o->progress)
				r->o->progress(r->o->progress_arg, r->st.bytes, r->announced, r->done, r->n);
		}
		pthread_cond_broadcast(&r->cv);
	}
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	http_client_free(hc);
	buf_free(&m.b);
	return NULL;
}

static int
cmp_path(const void *a, const void *b)
{
	const struct pkg_fetch *x = a, *y = b;

	return strcmp(x->p->path, y->p->path);
}

/* The package whose node_modules holds j: the longest proper prefix of j's
 * path that ends before a "/node_modules/" and is itself a job. jobs is
 * sorted by path, so each candidate is a binary search. */
static int
find_parent(struct pkg_fetch *jobs, size_t n, const struct pkg_fetch *j)
{
	const char *path = j->p->path, *s;
	char pre[NPMLOCK_PATH_MAX];
	int best = -1;

	for (s = strstr(path, "/node_modules/"); s != NULL; s = strstr(s + 1, "/node_modules/")) {
		size_t len = (size_t)(s - path), lo = 0, hi = n;
		if (len >= sizeof(pre))
			break;
		memcpy(pre, path, len);
		pre[len] = '\0';
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			int c = strcmp(jobs[mid].p->path, pre);
			if (c == 0) {
				best = (int)mid;
				break;
			}
			if (c < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
	return best;
}

int
npm_install(const struct npm_opts *o, struct npm_stats *st, struct err *e)
{
	struct run r;
	pthread_t th[NPM_JOBS_MAX];
	struct worker w;
	size_t i, n = 0;
	int jobs = o->jobs > 0 ? o->jobs : NPM_JOBS_DEFAULT, started = 0, rc = 0;

	if (jobs > NPM_JOBS_MAX)
		jobs = NPM_JOBS_MAX;
	memset(&r, 0, sizeof(r));
	err_keep_details(&r.err, r.details, sizeof(r.details));
	if (st)
		memset(st, 0, sizeof(*st));
	r.o = o;
	if (o->registry != NULL && *o->registry != '\0') {
		size_t l = strlen(o->registry);
		while (l > 0 && o->registry[l - 1] == '/')
			l--;
		if (l >= sizeof(r.reg) || !NPM_REGISTRY_SCHEME_OK(o))
			return err_set(e, "config.invalid", "npm registry mirror: not an https URL: %.200s",
			               o->registry);
		memcpy(r.reg, o->registry, l);
		r.reg[l] = '\0';
	}
	if (mkdir(o->cache, 0700) != 0 && errno != EEXIST)
		return fail_phase(e, "fetch", "%s: %s", o->cache, strerror(errno));

	r.jobs = calloc(o->lock->npkgs ? o->lock->npkgs : 1, sizeof(*r.jobs));
	if (r.jobs == NULL)
		return err_set(e, "internal", "out of memory");
	for (i = 0; i < o->lock->npkgs; i++)
		if (!o->lock->pkgs[i].in_bundle)
			r.jobs[n++].p = &o->lock->pkgs[i];
	r.n = n;
	qsort(r.jobs, n, sizeof(*r.jobs), cmp_path);
	for (i = 0; i < n; i++) {
		r.jobs[i].parent = find_parent(r.jobs, n, &r.jobs[i]);
		r.jobs[i].fd = -1;
	}

	w.r = &r;
	w.rootfd = -1;
	if (!o->fetch_only) {
		w.rootfd = open(o->staging, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (w.rootfd < 0) {
			free(r.jobs);
			return fail_phase(e, "extract", "%s: %s", o->staging, strerror(errno));
		}
	}
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	/* one download ring per worker, kept from package to package */
	cache_pipe_pool(1);
	if ((size_t)jobs > n)
		jobs = n ? (int)n : 1;
	for (i = 0; i < (size_t)jobs; i++) {
		pthread_attr_t at;
		pthread_attr_init(&at);
		/* arc and the TLS engine keep their buffers on the heap; 256 KiB
		 * is ample and keeps 32 threads' stacks small. */
		pthread_attr_setstacksize(&at, 256 << 10);
		if (pthread_create(&th[i], &at, worker_main, &w) == 0)
			started++;
		pthread_attr_destroy(&at);
	}
	if (started == 0) {
		err_set(e, "internal", "cannot start download threads");
		rc = -1;
	}
	for (i = 0; i < (size_t)started; i++)
		pthread_join(th[i], NULL);
	cache_pipe_pool(0);
	if (rc == 0 && r.failed) {
		err_copy(e, &r.err);
		rc = -1;
	}
	if (rc == 0 && !o->fetch_only && o->exec_bin != NULL && npm_bin_exec(o->staging, o->exec_bin, e) != 0)
		rc = -1;
	if (rc == 0 && !o->fetch_only && npm_link_bins(o->lock, o->staging, e) != 0)
		rc = -1;
	if (st)
		*st = r.st;
	pthread_mutex_destroy(&r.mu);
	pthread_cond_destroy(&r.cv);
	if (w.rootfd >= 0)
		close(w.rootfd);
	free(r.jobs);
	return rc;
}
