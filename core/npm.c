/*
 * The native npm-lock installer; the contract is in npm.h.
 *
 * Scheduling: one shared table of packages, sorted by path, under one
 * mutex. A worker takes the next package in that order, gets its verified
 * bytes (cache or download), waits until the package whose node_modules
 * holds it is extracted (sorted order puts that one earlier, so it is done
 * or in another worker's hands), and extracts it. Each worker is a whole
 * download-verify-extract pipeline, so downloads and extraction overlap
 * across workers and a tarball is never waiting in a queue.
 *
 * One read of the bytes: a tarball of at most NPM_MEM_MAX bytes is kept in
 * its worker's buffer while it is downloaded (or read once from the cache)
 * and hashed, and extracted from that buffer: the bytes extracted are the
 * bytes verified, with no second read and no window in which the cache file
 * could change. A larger one is streamed to the cache and re-read from the
 * file, hashed again, then extracted.
 */
#include "npm.h"

#include "arc.h"
#include "clock.h"
#include "digest.h"
#include "hostrule.h"
#include "http.h"

#include <errno.h>
#include <fcntl.h>
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

struct wbuf {
	unsigned char *p;
	size_t len, cap;
	int ok;                     /* p[0..len) is the whole verified tarball */
	int over;                   /* it does not fit: use the cache file */
};

static void
wbuf_reset(struct wbuf *b, int off)
{
	b->len = 0;
	b->ok = 0;
	b->over = off;
}

/* Make room for need bytes in all; on failure the file is used instead. */
static int
wbuf_room(struct wbuf *b, size_t need)
{
	size_t cap;
	unsigned char *p;

	if (b->over || need > NPM_MEM_MAX) {
		b->over = 1;
		return 0;
	}
	if (need <= b->cap)
		return 1;
	cap = b->cap ? b->cap : 64u << 10;
	while (cap < need)
		cap *= 2;
	if (cap > NPM_MEM_MAX)
		cap = NPM_MEM_MAX;
	if ((p = realloc(b->p, cap)) == NULL) {
		b->over = 1;
		return 0;
	}
	b->p = p;
	b->cap = cap;
	return 1;
}

static void
wbuf_put(struct wbuf *b, const void *data, size_t len)
{
	if (wbuf_room(b, b->len + len)) {
		memcpy(b->p + b->len, data, len);
		b->len += len;
	}
}

enum pstate { P_NEW, P_FETCHING, P_FETCHED, P_EXTRACTING, P_DONE };

struct job {
	const struct npmlock_pkg *p;
	enum pstate st;
	int parent;                 /* index of the package holding it, or -1 */
	char file[4096];            /* verified cache file */
};

struct run {
	const struct npm_opts *o;
	struct job *jobs;
	size_t n, done;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int failed;
	struct err err;             /* the first failure */
	struct npm_stats st;
	uint64_t announced;
	size_t next;                /* the next job to take */
	char reg[HTTP_URL_MAX];     /* mirror base without a trailing slash */
	unsigned seq;               /* temporary file names */
};


static int
fail_phase(struct err *e, const char *phase, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
fail_phase(struct err *e, const char *phase, const char *fmt, ...)
{
	va_list ap;
	char d[64];

	va_start(ap, fmt);
	err_setv(e, FAILED, fmt, ap);
	va_end(ap);
	snprintf(d, sizeof(d), "{\"phase\":\"%s\"}", phase);
	err_details(e, d);
	return -1;
}

/* ---- cache ------------------------------------------------------------ */

static int
index_path(const char *cache, const struct digest *d, char *out, size_t cap)
{
	char hex[DIGEST_HEX_MAX];

	return (size_t)snprintf(out, cap, "%s/npm/%s-%s", cache, digest_name(d->alg), digest_hex(d, hex)) < cap ? 0
														  : -1;
}

/* Hash fd from the start with integrity's algorithm; 1 when it matches. */
static int
fd_matches(int fd, const struct digest *want, struct digest *got)
{
	struct digest_ctx c;
	unsigned char buf[65536];
	ssize_t r;

	if (lseek(fd, 0, SEEK_SET) != 0)
		return 0;
	digest_init(&c, want->alg);
	while ((r = read(fd, buf, sizeof(buf))) > 0)
		digest_update(&c, buf, (size_t)r);
	if (r < 0)
		return 0;
	digest_final(&c, got);
	return digest_equal(want, got);
}

/* Read fd (size bytes by fstat) into b and check it against want: 1 when
 * it matched, 0 when not, -1 when it did not fit (b->over; fd is then at an
 * unknown offset). */
static int
buf_matches(int fd, size_t size, struct wbuf *b, const struct digest *want)
{
	struct digest got;
	ssize_t r;

	/* one byte more than announced tells a file that grew */
	if (!wbuf_room(b, size + 1))
		return -1;
	while ((r = read(fd, b->p + b->len, b->cap - b->len)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return 0;
		b->len += (size_t)r;
		if (b->len == b->cap) {
			b->over = 1;
			b->len = 0;
			return -1;
		}
	}
	digest_buf(want->alg, b->p, b->len, &got);
	if (!digest_equal(want, &got))
		return 0;
	b->ok = 1;
	return 1;
}

/* npm_cache_lookup; with b, a hit that fits is left verified in b. */
static int
cache_get(const char *cache, const struct digest *integrity, struct wbuf *b, char *out, size_t cap, struct err *e)
{
	char idx[4096], hex[80];
	struct digest got;
	struct stat sb;
	ssize_t n;
	int fd, ok;

	if (index_path(cache, integrity, idx, sizeof(idx)) != 0)
		return err_set(e, FAILED, "cache path too long");
	fd = open(idx, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, hex, sizeof(hex) - 1);
	close(fd);
	if (n < 64)
		return 0;
	hex[64] = '\0';
	if (strspn(hex, "0123456789abcdef") != 64)
		return 0;
	if ((size_t)snprintf(out, cap, "%s/%s", cache, hex) >= cap)
		return err_set(e, FAILED, "cache path too long");
	fd = open(out, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (b != NULL && !b->over && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
	    (ok = buf_matches(fd, (size_t)sb.st_size, b, integrity)) >= 0) {
		close(fd);
		return ok;
	}
	ok = fd_matches(fd, integrity, &got);
	close(fd);
	return ok ? 1 : 0;
}

int
npm_cache_lookup(const char *cache, const struct digest *integrity, char *out, size_t cap, struct err *e)
{
	return cache_get(cache, integrity, NULL, out, cap, e);
}

int
npm_cache_sha256(const char *cache, const struct digest *integrity, char hex[DIGEST_HEX_MAX])
{
	char idx[4096];
	ssize_t n;
	int fd;

	if (index_path(cache, integrity, idx, sizeof(idx)) != 0)
		return 0;
	fd = open(idx, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, hex, 64);
	close(fd);
	if (n != 64)
		return 0;
	hex[64] = '\0';
	return strspn(hex, "0123456789abcdef") == 64;
}

/* ---- fetch ------------------------------------------------------------ */

struct sink {
	struct run *r;
	struct wbuf *b;
	int fd;
	struct digest_ctx want, sha256;
	uint64_t bytes;
	const struct http_response *rs; /* its length is known at the first write */
	struct err *e;
};

static int
sink_write(void *arg, const void *buf, size_t len, struct err *e)
{
	struct sink *s = arg;
	const char *p = buf;
	size_t left = len;
	ssize_t w;

	if (__atomic_load_n(&s->r->failed, __ATOMIC_RELAXED))
		return err_set(e, FAILED, "cancelled: another package failed");
	digest_update(&s->want, buf, len);
	digest_update(&s->sha256, buf, len);
	wbuf_put(s->b, buf, len);
	while (left > 0) {
		w = write(s->fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return fail_phase(e, "fetch", "writing the cache: %s", strerror(errno));
		p += w;
		left -= (size_t)w;
	}
	pthread_mutex_lock(&s->r->mu);
	/* a package counts in the total once its response announces it,
	 * not when it is complete (the total lagged the bytes) */
	if (s->bytes == 0 && s->rs->content_length > 0)
		s->r->announced += (uint64_t)s->rs->content_length;
	s->bytes += len;
	s->r->st.bytes += len;
	if (s->r->o->progress)
		s->r->o->progress(s->r->o->progress_arg, s->r->st.bytes, s->r->announced, s->r->done, s->r->n);
	pthread_mutex_unlock(&s->r->mu);
	return 0;
}

static int
fetch_one(struct run *r, struct http_client *hc, struct job *j, struct wbuf *b, struct err *e)
{
	const struct npm_opts *o = r->o;
	const struct npmlock_pkg *p = j->p;
	char url[HTTP_URL_MAX], tmp[4096], idx[4096], hex[DIGEST_HEX_MAX], want[DIGEST_SRI_MAX], got[DIGEST_SRI_MAX];
	struct http_request rq;
	struct http_response *rs;
	struct hostrule hr;
	struct sink s;
	struct digest dw, d256;
	unsigned seq;
	int rc;

	wbuf_reset(b, o->fetch_only);
	if ((rc = cache_get(o->cache, &p->digest, b, j->file, sizeof(j->file), e)) != 0) {
		if (rc > 0) {
			struct stat cs;
			uint64_t sz = stat(j->file, &cs) == 0 ? (uint64_t)cs.st_size : 0;
			pthread_mutex_lock(&r->mu);
			r->st.cached++;
			r->st.cached_bytes += sz;
			pthread_mutex_unlock(&r->mu);
		}
		return rc < 0 ? -1 : 0;
	}
	if (o->offline)
		return err_set(e, "install.disabled", "offline and not in the cache: %s@%s (%s)", p->name, p->version,
			       p->integrity);
	if (r->reg[0] != '\0')
		rc = snprintf(url, sizeof(url), "%s%s", r->reg, p->url_path);
	else
		rc = snprintf(url, sizeof(url), "%s", p->resolved);
	if (rc < 0 || (size_t)rc >= sizeof(url))
		return err_set(e, "http.url", "URL too long for %s", p->path);

	pthread_mutex_lock(&r->mu);
	seq = r->seq++;
	pthread_mutex_unlock(&r->mu);
	snprintf(tmp, sizeof(tmp), "%s/.tmp-npm-%d-%u", o->cache, (int)getpid(), seq);
	memset(&s, 0, sizeof(s));
	wbuf_reset(b, o->fetch_only);
	s.r = r;
	s.b = b;
	s.e = e;
	s.fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (s.fd < 0)
		return fail_phase(e, "fetch", "%s: %s", tmp, strerror(errno));
	digest_init(&s.want, p->digest.alg);
	digest_init(&s.sha256, DIGEST_SHA256);

	rs = malloc(sizeof(*rs));
	if (rs == NULL) {
		close(s.fd);
		unlink(tmp);
		return err_set(e, "internal", "out of memory");
	}
	hostrule_init(&hr, 1, "the manifest's hosts or the allowed mirrors");
	hostrule_add(&hr, o->hosts, (int)o->nhosts);
	http_request_init(&rq, url);
	rq.host_ok = hostrule_check;
	rq.host_arg = &hr;
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
	rc = http_request(hc, &rq, rs, e);
	free(rs);
	if (rc != 0) {
		char m[ERR_MSG_MAX];
		snprintf(m, sizeof(m), "%s", e->msg);
		if (e->code && strncmp(e->code, "http.", 5) == 0 && e->details[0] == '\0')
			err_set(e, e->code, "%s@%s: %s", p->name, p->version, m);
		close(s.fd);
		unlink(tmp);
		return -1;
	}
	digest_final(&s.want, &dw);
	digest_final(&s.sha256, &d256);
	b->ok = !b->over && digest_equal(&dw, &p->digest);
	if (!digest_equal(&dw, &p->digest)) {
		close(s.fd);
		unlink(tmp);
		err_set(e, "install.checksum_mismatch", "%s@%s (%s): expected %s, got %s", p->name, p->version, url,
			digest_sri(&p->digest, want), digest_sri(&dw, got));
		return -1;
	}
	/* No fsync: every use of a cache entry re-hashes it against the
	 * integrity first, so an entry torn by a power cut is a miss, never an
	 * install of wrong bytes; 300 fsyncs would cost more than the rest. */
	if (close(s.fd) != 0) {
		unlink(tmp);
		return fail_phase(e, "fetch", "%s: %s", tmp, strerror(errno));
	}
	snprintf(j->file, sizeof(j->file), "%s/%s", o->cache, digest_hex(&d256, hex));
	if (rename(tmp, j->file) != 0) {
		unlink(tmp);
		return fail_phase(e, "fetch", "%s: %s", j->file, strerror(errno));
	}
	/* The index is written after the entry, atomically, so a reader never
	 * finds an index naming a half-written file. */
	if (index_path(o->cache, &p->digest, idx, sizeof(idx)) == 0) {
		char itmp[4200];
		int fd;
		snprintf(itmp, sizeof(itmp), "%s.tmp%d-%u", idx, (int)getpid(), seq);
		fd = open(itmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0) {
			int okw = write(fd, hex, 64) == 64 && write(fd, "\n", 1) == 1;
			close(fd);
			if (!okw || rename(itmp, idx) != 0)
				unlink(itmp);
		}
	}
	pthread_mutex_lock(&r->mu);
	r->st.fetched++;
	pthread_mutex_unlock(&r->mu);
	return 0;
}

/* ---- extract ------------------------------------------------------------ */

/* mkdir -p of rel (a lockfile path) under the root fd; returns an fd of the
 * last directory, opened without following symlinks at any step. */
static int
open_dir_path(int rootfd, const char *rel, struct err *e)
{
	char part[NPMLOCK_PATH_MAX];
	const char *p = rel, *q;
	int fd = dup(rootfd), nfd;
	size_t n;

	if (fd < 0)
		return fail_phase(e, "extract", "dup: %s", strerror(errno));
	while (*p) {
		q = strchr(p, '/');
		n = q ? (size_t)(q - p) : strlen(p);
		if (n == 0 || n >= sizeof(part)) {
			close(fd);
			return fail_phase(e, "extract", "bad path %s", rel);
		}
		memcpy(part, p, n);
		part[n] = '\0';
		if (mkdirat(fd, part, 0755) != 0 && errno != EEXIST) {
			close(fd);
			return fail_phase(e, "extract", "%s: %s", rel, strerror(errno));
		}
		nfd = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (nfd < 0)
			return fail_phase(e, "extract", "%s: %s", rel, strerror(errno));
		fd = nfd;
		p = q ? q + 1 : p + n;
	}
	return fd;
}

struct file_tap {
	const struct npm_opts *o;
	const char *pkgpath;
};

static void
file_tap(void *arg, const char *name, const struct stat *st, const unsigned char sha256[32])
{
	struct file_tap *t = arg;

	t->o->on_file(t->o->file_arg, t->pkgpath, name, st, sha256);
}

static int
extract_one(struct run *r, struct job *j, const struct wbuf *b, int rootfd, struct err *e)
{
	struct file_tap tap = {r->o, j->p->path};
	struct arc_opts ao;
	struct arc_stats as;
	struct digest got;
	int afd = -1, dfd, rc;

	if (!b->ok) {
		afd = open(j->file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (afd < 0)
			return fail_phase(e, "extract", "%s: %s", j->file, strerror(errno));
		/* Too large to keep in memory: the file was verified when it
		 * entered the cache or when it was looked up; it is ours, but
		 * check again what the extractor will read: the cache directory
		 * may be shared. */
		if (!fd_matches(afd, &j->p->digest, &got) || lseek(afd, 0, SEEK_SET) != 0) {
			close(afd);
			return err_set(e, "install.checksum_mismatch",
				       "%s@%s: the cache entry %s changed after verification", j->p->name, j->p->version,
				       j->file);
		}
	}
	dfd = open_dir_path(rootfd, j->p->path, e);
	if (dfd < 0) {
		if (afd >= 0)
			close(afd);
		return -1;
	}
	arc_opts_init(&ao, ARC_FMT_TAR_GZ);
	ao.flags = ARC_NPM;
	if (r->o->on_file != NULL) {
		ao.on_file = file_tap;
		ao.file_ctx = &tap;
	}
	memset(&as, 0, sizeof(as));
	if (b->ok)
		rc = arc_extract_mem(b->p, b->len, dfd, &ao, &as, e);
	else
		rc = arc_extract_fd(afd, dfd, &ao, &as, e);
	if (afd >= 0)
		close(afd);
	close(dfd);
	if (rc != 0) {
		char m[ERR_MSG_MAX];
		snprintf(m, sizeof(m), "%s", e->msg);
		fail_phase(e, "extract", "%s@%s: %s", j->p->name, j->p->version, m);
		return -1;
	}
	pthread_mutex_lock(&r->mu);
	r->st.extracted++;
	r->st.files += as.entries;
	pthread_mutex_unlock(&r->mu);
	return 0;
}

/* ---- workers ------------------------------------------------------------ */

struct worker {
	struct run *r;
	int rootfd;
};

static int
parent_done(const struct run *r, const struct job *j)
{
	return j->parent < 0 || r->jobs[j->parent].st == P_DONE;
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->r;
	struct http_client *hc = NULL;
	struct wbuf b;
	struct err e;

	err_clear(&e);
	memset(&b, 0, sizeof(b));
	pthread_mutex_lock(&r->mu);
	while (!r->failed && r->next < r->n) {
		struct job *pick = &r->jobs[r->next++];
		int rc;

		pick->st = P_FETCHING;
		pthread_mutex_unlock(&r->mu);
		if (hc == NULL && (hc = http_client_new(&e)) == NULL)
			rc = -1;
		else
			rc = fetch_one(r, hc, pick, &b, &e);
		pthread_mutex_lock(&r->mu);
		if (rc == 0 && !r->o->fetch_only) {
			/* The parent was taken earlier (sorted order): it is
			 * done or being worked on, never waiting for us. */
			pick->st = P_FETCHED;
			while (!r->failed && !parent_done(r, pick))
				pthread_cond_wait(&r->cv, &r->mu);
			if (r->failed)
				break;
			pick->st = P_EXTRACTING;
			pthread_mutex_unlock(&r->mu);
			rc = extract_one(r, pick, &b, w->rootfd, &e);
			pthread_mutex_lock(&r->mu);
		}
		if (rc != 0) {
			if (!r->failed) {
				r->failed = 1;
				r->err = e;
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
	free(b.p);
	return NULL;
}

static int
cmp_path(const void *a, const void *b)
{
	const struct job *x = a, *y = b;

	return strcmp(x->p->path, y->p->path);
}

/* The package whose node_modules holds j: the longest proper prefix of j's
 * path that ends before a "/node_modules/" and is itself a job. jobs is
 * sorted by path, so each candidate is a binary search. */
static int
find_parent(struct job *jobs, size_t n, const struct job *j)
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
	char dir[4096];

	if (jobs > NPM_JOBS_MAX)
		jobs = NPM_JOBS_MAX;
	memset(&r, 0, sizeof(r));
	if (st)
		memset(st, 0, sizeof(*st));
	r.o = o;
	if (o->registry != NULL && *o->registry != '\0') {
		size_t l = strlen(o->registry);
		while (l > 0 && o->registry[l - 1] == '/')
			l--;
		if (l >= sizeof(r.reg) || strncmp(o->registry, "https://", 8) != 0)
			return err_set(e, "config.invalid", "npm registry mirror: not an https URL: %.200s", o->registry);
		memcpy(r.reg, o->registry, l);
		r.reg[l] = '\0';
	}
	snprintf(dir, sizeof(dir), "%s/npm", o->cache);
	if (mkdir(o->cache, 0700) != 0 && errno != EEXIST)
		return fail_phase(e, "fetch", "%s: %s", o->cache, strerror(errno));
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return fail_phase(e, "fetch", "%s: %s", dir, strerror(errno));

	r.jobs = calloc(o->lock->npkgs ? o->lock->npkgs : 1, sizeof(*r.jobs));
	if (r.jobs == NULL)
		return err_set(e, "internal", "out of memory");
	for (i = 0; i < o->lock->npkgs; i++)
		if (!o->lock->pkgs[i].in_bundle)
			r.jobs[n++].p = &o->lock->pkgs[i];
	r.n = n;
	qsort(r.jobs, n, sizeof(*r.jobs), cmp_path);
	for (i = 0; i < n; i++)
		r.jobs[i].parent = find_parent(r.jobs, n, &r.jobs[i]);

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
	if (rc == 0 && r.failed) {
		*e = r.err;
		rc = -1;
	}
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

/* ---- bins ----------------------------------------------------------------- */

int
npm_link_bins(const struct npmlock *l, const char *staging, struct err *e)
{
	char pkgdir[4096], bindir[4096], link[4096], target[4096], full[8192];
	struct stat sb;
	size_t i;
	int rootfd, pfd;

	if (l->root == NULL || l->nbins == 0)
		return 0;
	snprintf(pkgdir, sizeof(pkgdir), "%s", l->root->path);
	snprintf(bindir, sizeof(bindir), "%s/node_modules/.bin", staging);
	rootfd = open(staging, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0)
		return fail_phase(e, "extract", "%s: %s", staging, strerror(errno));
	pfd = open_dir_path(rootfd, pkgdir, e);
	close(rootfd);
	if (pfd < 0)
		return -1;
	if (mkdir(bindir, 0755) != 0 && errno != EEXIST) {
		close(pfd);
		return fail_phase(e, "extract", "%s: %s", bindir, strerror(errno));
	}
	for (i = 0; i < l->nbins; i++) {
		const struct npmlock_bin *b = &l->bins[i];
		/* Every component of the target is checked without following
		 * links: extraction drops links, so a link here is foreign. */
		char part[NPMLOCK_PATH_MAX], *q;
		int fd = dup(pfd), nfd;
		snprintf(part, sizeof(part), "%s", b->target);
		q = part;
		for (;;) {
			char *s = strchr(q, '/');
			if (s)
				*s = '\0';
			nfd = openat(fd, q, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (s ? O_DIRECTORY : 0));
			close(fd);
			fd = nfd;
			if (fd < 0 || !s)
				break;
			q = s + 1;
		}
		if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
			if (fd >= 0)
				close(fd);
			close(pfd);
			return fail_phase(e, "extract", "bin %s: %s/%s is not a regular file in the package", b->name,
					  l->root->name, b->target);
		}
		if (fchmod(fd, 0755) != 0) {
			close(fd);
			close(pfd);
			return fail_phase(e, "extract", "bin %s: chmod: %s", b->name, strerror(errno));
		}
		close(fd);
		/* node_modules/.bin/<name> -> ../<package>/<target> */
		if ((size_t)snprintf(target, sizeof(target), "../%s/%s", l->root->path + strlen("node_modules/"),
				     b->target) >= sizeof(target) ||
		    (size_t)snprintf(link, sizeof(link), "%s/%s", bindir, b->name) >= sizeof(link) ||
		    (size_t)snprintf(full, sizeof(full), "%s.tmp%d", link, (int)getpid()) >= sizeof(full)) {
			close(pfd);
			return fail_phase(e, "extract", "bin %s: path too long", b->name);
		}
		unlink(full);
		if (symlink(target, full) != 0 || rename(full, link) != 0) {
			unlink(full);
			close(pfd);
			return fail_phase(e, "extract", "bin %s: %s", b->name, strerror(errno));
		}
	}
	close(pfd);
	return 0;
}

int
npm_purl(const struct npmlock_pkg *p, char *buf, size_t cap)
{
	int n;

	if (p->name[0] == '@')
		n = snprintf(buf, cap, "pkg:npm/%%40%s@%s", p->name + 1, p->version ? p->version : "");
	else
		n = snprintf(buf, cap, "pkg:npm/%s@%s", p->name, p->version ? p->version : "");
	return n < 0 || (size_t)n >= cap ? -1 : n;
}

int
npm_js_entry(const char *path, char *buf, size_t cap, char **flags, int *nflags)
{
	const char *dot;
	char *p, *tok, *save = NULL;
	ssize_t n;
	int fd, js = 0, after = 0;

	*nflags = 0;
	if (cap < 3)
		return -1;
	dot = strrchr(path, '.');
	if (dot && strchr(dot, '/') == NULL && (strcmp(dot, ".js") == 0 || strcmp(dot, ".mjs") == 0 || strcmp(dot, ".cjs") == 0))
		js = 1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	if (n < 2 || buf[0] != '#' || buf[1] != '!')
		return js;
	buf[strcspn(buf, "\r\n")] = '\0';
	/* A shebang naming another interpreter (sh, python) runs directly, even
	 * for a .js name: the kernel knows what to do with it. */
	for (tok = strtok_r(buf + 2, " \t", &save); tok != NULL; tok = strtok_r(NULL, " \t", &save)) {
		if (after) {
			if (*nflags < NPM_NODE_FLAGS_MAX)
				flags[(*nflags)++] = tok;
			continue;
		}
		p = strrchr(tok, '/');
		p = p ? p + 1 : tok;
		if (strcmp(p, "node") == 0 || strcmp(p, "nodejs") == 0)
			after = 1;
	}
	return after;
}
