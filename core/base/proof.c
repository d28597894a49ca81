/*
 * The proof list: how a tree the server user can write is proved unchanged
 * since it was made (the install fast path, ensure's first, lock-free step;
 * a kept cache tree placed without hashing it again), with one stat per entry
 * and no directory opened or listed.
 *
 * Why it holds: every entry's inode, mode, size, mtime and ctime are
 * recorded at publish. Rewriting, truncating, chmod, chown, linking or
 * replacing an entry moves its ctime; adding, removing or renaming an entry
 * in a directory moves that directory's ctime; and no unprivileged writer
 * can set a ctime back (utimensat sets it to now). So when every recorded
 * entry, directories included, still stats the same, every directory still
 * holds the names it held and every name the inode it held, unchanged.
 * A mount over a directory shows up as another st_dev.
 *
 * The one gap is a change within the same tick of the filesystem clock as
 * the recorded ctime: proof_make closes it by starting its walk only
 * once the clock has moved past every ctime it records (a later change then
 * gets a later ctime). Any difference sends the caller to the content
 * digest, so a false "changed" costs time, never correctness.
 */
#include "base/proof.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/digest.h"
#include "base/fs.h"

/* On disk, native byte order (the file never leaves the machine; a foreign
 * one fails to match and costs one content digest):
 *   "ABXPRF2\n", u32 entries, u32 bytes of names,
 *   entries x struct proof_rec (entry 0 is the root, named "."),
 *   the names: paths relative to the root, each NUL-terminated. */
#define PROOF_MAGIC "ABXPRF2\n"
#define PROOF_HDR 16

struct proof_rec {
	uint64_t ino, size;
	int64_t ctime_s, mtime_s;
	uint32_t ctime_ns, mtime_ns, mode, name;
};
_Static_assert(sizeof(struct proof_rec) == 48, "proof_rec is packed by hand");

/* Below this many entries a second thread costs more than it saves (about
 * 30 µs to start and join against ~1.4 µs per stat). */
#define PROOF_THREAD_MIN 1024
/* The helper thread runs a flat loop. */
#define PROOF_THREAD_STACK 65536
/* proof_make waits at most this long for the clock to pass the
 * newest ctime (a filesystem with one-second timestamps needs up to 1 s),
 * and walks at most this many times when the tree keeps changing;
 * proof_make_quick at most PROOF_QUICK_MS (a few ticks of a kernel clock
 * at 100-1000 Hz), then gives up. */
#define PROOF_SETTLE_MS 2500
#define PROOF_QUICK_MS 20
#define PROOF_SETTLE_WALKS 4

/* ---- building ------------------------------------------------------------- */

struct pbuild {
	struct buf recs;        /* struct proof_rec, entry 0 the root */
	struct buf names;       /* NUL-terminated paths */
	struct timespec newest; /* newest ctime recorded */
	int any_ns;             /* some ctime has nanoseconds (else whole seconds) */
	const char *code;       /* the error code of a tree too large */
	int64_t settle_ms;      /* how long the clock may be waited for */
	int quick;              /* unsettled after settle_ms: no proof */
};

static void
pb_newest(struct pbuild *b, const struct timespec *t)
{
	if (t->tv_nsec != 0)
		b->any_ns = 1;
	if (t->tv_sec > b->newest.tv_sec || (t->tv_sec == b->newest.tv_sec && t->tv_nsec > b->newest.tv_nsec))
		b->newest = *t;
}

/* Record rel with st (fs_walk's visitor; the root is "."). */
static int
pb_add(void *arg, struct fs_ent *ent, struct err *e)
{
	struct pbuild *b = arg;
	const struct stat *st = &ent->st;
	const char *rel = ent->rel;
	struct proof_rec r;

	memset(&r, 0, sizeof(r));
	r.name = (uint32_t)b->names.len;
	r.ino = st->st_ino;
	r.size = (uint64_t)st->st_size;
	r.mode = st->st_mode;
	r.ctime_s = st->st_ctim.tv_sec;
	r.ctime_ns = (uint32_t)st->st_ctim.tv_nsec;
	r.mtime_s = st->st_mtim.tv_sec;
	r.mtime_ns = (uint32_t)st->st_mtim.tv_nsec;
	if (buf_put(&b->recs, &r, sizeof(r)) < 0 || buf_put(&b->names, rel, strlen(rel) + 1) < 0) {
		if (b->recs.len + sizeof(r) > b->recs.max)
			return err_set(e, b->code, "tree of more than %u entries", PROOF_MAX_ENTRIES);
		if (b->names.len + strlen(rel) + 1 > b->names.max)
			return err_set(e, b->code, "proof list larger than %u bytes", PROOF_MAX);
		return err_set(e, "internal", "out of memory");
	}
	/* ctimes only: they are what a later change must move, and an
	 * archive's mtimes may lie in the future */
	pb_newest(b, &st->st_ctim);
	return 0;
}

/* One walk: the root's record, then every entry's (fs_walk: a directory's
 * record before its entries', so a check meets a replaced directory before
 * the paths under it). */
static int
pb_once(struct pbuild *b, const char *root, int rootfd, struct err *e)
{
	struct fs_ent top = {.name = ".", .rel = ".", .fd = -1, .aux = -1};
	int dfd, rc;

	buf_reset(&b->recs);
	buf_reset(&b->names);
	b->any_ns = 0;
	b->newest.tv_sec = 0;
	b->newest.tv_nsec = 0;
	/* a new open of rootfd's directory, not a dup: the walk's reading
	 * leaves the caller's descriptor where it was */
	dfd = rootfd >= 0 ? openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
	                  : open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return err_sys(e, "io.error", errno, "%s: %s", root, strerror(errno));
	if (fstat(dfd, &top.st) != 0) {
		close(dfd);
		return err_sys(e, "io.error", errno, "%s: %s", root, strerror(errno));
	}
	top.dfd = top.fd = dfd;
	rc = pb_add(b, &top, e);
	if (rc == 0)
		rc = fs_walk(dfd, 0, b->code, pb_add, b, e);
	close(dfd);
	return rc;
}

/* Walk until the clock has passed every ctime recorded (b->settle_ms,
 * PROOF_SETTLE_WALKS). 1 when a quick build gives up. */
static int
pb_settle(struct pbuild *b, const char *root, int rootfd, struct err *e)
{
	struct timespec t0;
	int64_t start = clock_ms();
	int walks;

	for (walks = 1;; walks++) {
		clock_fs_now(&t0);
		if (pb_once(b, root, rootfd, e) < 0)
			return -1;
		if (clock_fs_after(&t0, &b->newest, !b->any_ns))
			return 0;
		if (walks >= PROOF_SETTLE_WALKS)
			return b->quick ? 1 : 0;
		/* wait (no walk) until the clock has passed what we saw; a
		 * clock that never gets there (a server's timestamps on a
		 * network filesystem) leaves the same-tick gap: a change in
		 * the tick of the newest ctime could go unseen */
		if (!clock_fs_wait_past(&b->newest, !b->any_ns, b->settle_ms - (clock_ms() - start))) {
			if (b->quick)
				return 1;
			walks = PROOF_SETTLE_WALKS - 1;
		}
	}
}

static int
make(const char *root, int rootfd, const char *code, int quick, char **out, size_t *outlen, struct err *e)
{
	struct pbuild b = {.recs = BUF_INIT((size_t)PROOF_MAX_ENTRIES * sizeof(struct proof_rec)),
	                   .names = BUF_INIT(PROOF_MAX),
	                   .code = code,
	                   .settle_ms = quick ? PROOF_QUICK_MS : PROOF_SETTLE_MS,
	                   .quick = quick};
	size_t total;
	char *buf = NULL;
	uint32_t u;
	int rc = -1;

	if ((rc = pb_settle(&b, root, rootfd, e)) != 0)
		goto out;
	rc = -1;
	total = PROOF_HDR + b.recs.len + b.names.len;
	if (total > PROOF_MAX || (buf = malloc(total)) == NULL) {
		err_set(e, code, "proof list larger than %u bytes", PROOF_MAX);
		goto out;
	}
	memcpy(buf, PROOF_MAGIC, 8);
	u = (uint32_t)(b.recs.len / sizeof(struct proof_rec));
	memcpy(buf + 8, &u, 4);
	u = (uint32_t)b.names.len;
	memcpy(buf + 12, &u, 4);
	memcpy(buf + PROOF_HDR, b.recs.p, b.recs.len);
	memcpy(buf + PROOF_HDR + b.recs.len, b.names.p, b.names.len);
	*out = buf;
	*outlen = total;
	rc = 0;
out:
	buf_free(&b.recs);
	buf_free(&b.names);
	return rc;
}

int
proof_make(const char *root, const char *code, char **out, size_t *outlen, struct err *e)
{
	return make(root, -1, code, 0, out, outlen, e);
}

int
proof_make_quick(const char *root, const char *code, char **out, size_t *outlen, struct err *e)
{
	return make(root, -1, code, 1, out, outlen, e);
}

int
proof_make_quick_fd(int rootfd, const char *root, const char *code, char **out, size_t *outlen, struct err *e)
{
	return make(root, rootfd, code, 1, out, outlen, e);
}

/* ---- checking --------------------------------------------------------------- */

struct pview {
	const struct proof_rec *recs;
	const char *names;
	uint32_t n, nlen;
};

/* A view of buf or -1: sizes add up, every name lies inside the names and
 * is relative, entry 0 is the root. O(entries), no name is scanned. */
static int
proof_view(const void *buf, size_t len, struct pview *v)
{
	const unsigned char *p = buf;
	uint32_t i;

	if (buf == NULL || len < PROOF_HDR || len > PROOF_MAX || ((uintptr_t)buf & 7) != 0 ||
	    memcmp(p, PROOF_MAGIC, 8) != 0)
		return -1;
	memcpy(&v->n, p + 8, 4);
	memcpy(&v->nlen, p + 12, 4);
	if (v->n == 0 || v->n > PROOF_MAX_ENTRIES || v->nlen == 0 ||
	    (uint64_t)PROOF_HDR + (uint64_t)v->n * sizeof(struct proof_rec) + v->nlen != len)
		return -1;
	v->recs = (const struct proof_rec *)(const void *)(p + PROOF_HDR);
	v->names = (const char *)(p + PROOF_HDR + (size_t)v->n * sizeof(struct proof_rec));
	if (v->names[v->nlen - 1] != '\0')
		return -1;
	for (i = 0; i < v->n; i++)
		if (v->recs[i].name >= v->nlen || v->names[v->recs[i].name] == '/' ||
		    v->names[v->recs[i].name] == '\0')
			return -1;
	if (strcmp(v->names + v->recs[0].name, ".") != 0 || !S_ISDIR(v->recs[0].mode))
		return -1;
	return 0;
}

int
proof_view_open(const void *buf, size_t len, struct proof_view *out)
{
	struct pview v;

	if (proof_view(buf, len, &v) < 0)
		return -1;
	out->recs = v.recs;
	out->names = v.names;
	out->n = v.n;
	out->nlen = v.nlen;
	return 0;
}

static int rec_same(const struct proof_rec *r, const struct stat *st, dev_t dev);

int
proof_view_same(const struct proof_view *v, uint32_t i, const char *rel, const struct stat *st, dev_t dev)
{
	const struct proof_rec *r;

	if (i >= v->n)
		return 0;
	r = (const struct proof_rec *)v->recs + i;
	return strcmp(v->names + r->name, rel) == 0 && rec_same(r, st, dev);
}

int
proof_parse(const void *buf, size_t len)
{
	struct pview v;

	return proof_view(buf, len, &v) < 0 ? -1 : (int)v.n;
}

static int
rec_same(const struct proof_rec *r, const struct stat *st, dev_t dev)
{
	return st->st_dev == dev && st->st_ino == r->ino && st->st_mode == r->mode &&
	       (uint64_t)st->st_size == r->size && st->st_ctim.tv_sec == r->ctime_s &&
	       st->st_ctim.tv_nsec == (long)r->ctime_ns && st->st_mtim.tv_sec == r->mtime_s &&
	       st->st_mtim.tv_nsec == (long)r->mtime_ns;
}

/* Entries are taken in chunks from a shared counter, so a helper thread the
 * scheduler starts late (a loaded machine) leaves its share to the caller
 * instead of holding it up; 64 entries are ~90 µs of work. */
#define PROOF_CHUNK 64

struct pchk {
	const struct pview *v;
	int rootfd;
	dev_t dev;
	uint32_t next; /* next entry to take (atomic) */
	int changed;   /* the first to see a difference stops both (atomic) */
};

static void *
pchk_run(void *arg)
{
	struct pchk *p = arg;
	uint32_t i, end;

	for (;;) {
		i = __atomic_fetch_add(&p->next, PROOF_CHUNK, __ATOMIC_RELAXED);
		if (i >= p->v->n || __atomic_load_n(&p->changed, __ATOMIC_RELAXED))
			return NULL;
		end = p->v->n - i < PROOF_CHUNK ? p->v->n : i + PROOF_CHUNK;
		for (; i < end; i++) {
			const struct proof_rec *r = &p->v->recs[i];
			struct stat st;

			if (fstatat(p->rootfd, p->v->names + r->name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
			    !rec_same(r, &st, p->dev)) {
				__atomic_store_n(&p->changed, 1, __ATOMIC_RELAXED);
				return NULL;
			}
		}
	}
}

static int
ncpu(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

int
proof_check(const char *root, const void *buf, size_t len)
{
	int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), rc;

	if (rootfd < 0)
		return 0;
	rc = proof_check_fd(rootfd, buf, len);
	close(rootfd);
	return rc;
}

int
proof_check_fd(int rootfd, const void *buf, size_t len)
{
	struct pview v;
	struct stat st;
	struct pchk p;
	pthread_t th;
	int threaded = 0;

	if (proof_view(buf, len, &v) < 0)
		return 0;
	if (fstat(rootfd, &st) != 0 || !rec_same(&v.recs[0], &st, st.st_dev))
		return 0;
	p = (struct pchk){&v, rootfd, st.st_dev, 1, 0};
	if (v.n >= PROOF_THREAD_MIN && ncpu() >= 2) {
		pthread_attr_t at;
		sigset_t all, old;

		/* the helper takes no signal meant for the caller's thread */
		sigfillset(&all);
		if (pthread_attr_init(&at) == 0) {
			pthread_attr_setstacksize(&at, PROOF_THREAD_STACK);
			pthread_sigmask(SIG_SETMASK, &all, &old);
			threaded = pthread_create(&th, &at, pchk_run, &p) == 0;
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			pthread_attr_destroy(&at);
		}
	}
	pchk_run(&p);
	if (threaded)
		pthread_join(th, NULL);
	return !p.changed;
}

/* ---- leases ------------------------------------------------------------------ */

/* Are a and b the same inode, unchanged (what a proof records)? */
static int
stat_same(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mode == b->st_mode &&
	       a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

int
proof_lease_take(int fd)
{
	return fcntl(fd, F_SETLEASE, F_RDLCK) == 0;
}

int
proof_lease_end(int fd, const struct stat *st)
{
	struct stat now;
	int held = fcntl(fd, F_GETLEASE) == F_RDLCK && fstat(fd, &now) == 0 && stat_same(&now, st);

	fcntl(fd, F_SETLEASE, F_UNLCK);
	return held;
}
