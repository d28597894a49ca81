/*
 * Placing a kept tree (cache.h, cache_tree_place): the walk (this thread)
 * makes the directories, links and empty copies of the files in bytewise
 * order, depth first, and queues each file open on both sides; this thread
 * and one helper copy and hash them (cache_copy_hash: the digest is of the
 * bytes written), the helper the large files first. A failure stops the
 * walk and the copies of the files after it, never those before it. Once
 * both are done the listing is made in walk order from what was written
 * and compared with the sealed one, and the caller's fn hears of each
 * file, in that order. A directory's mode is set once the walk has made
 * all in it (a read-only directory is filled first).
 */
#include "pkg/cache.h"

#include "base/digest.h"
#include "base/fs.h"
#include "base/proof.h"
#include "pkg/cache_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The helper starts once this many files wait (a small tree is copied on
 * this thread alone); without one the walk copies each file once this many
 * wait, with one once QUEUE_MAX do, so the descriptors held stay few. */
#define HELP_FILES 8
#define QUEUE_MAX 16

#ifdef ABX_TEST
void (*cache_test_place_fn)(const char *entry);
#endif

/* Helpers running in this process at most (npm places packages on several
 * threads at once): a placement with a helper holds up to 2 x QUEUE_MAX
 * descriptors of queued files, one without it 2 x HELP_FILES. */
#define HELPERS_MAX 8
static int helpers;

/* One entry of the listing, in walk order: 'd', 'l', 'f', or 'x' (an error
 * of the walk's own). */
struct pent {
	struct pent *next;  /* walk order */
	struct pent *qnext; /* the next file to copy */
	size_t seq;         /* its place in walk order */
	int in, out;        /* a queued file's source and its new copy */
	char type;
	unsigned mode;
	off_t size;
	const char *target;
	struct stat ds; /* a file's fstat once written */
	struct stat st; /* an entry's own fstat (a file's or directory's descriptor; a link's lstat) */
	int proved;     /* st is what the proof records (held through the copy, for a file) */
	int plain;      /* a file copied unhashed: its digest is the sealed listing's */
	unsigned char sha[32];
	int failed, dst_err;
	const char *code;
	int sys; /* the errno behind the failure, 0 if none */
	char *msg;
	char rel[]; /* then the target */
};

struct place {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* files queued, or the walk done */
	struct pent *head, **tail;
	struct pent *q[2], **qtail[2]; /* files to copy: small, large */
	size_t pending, seq;
	size_t stop; /* the first failed file's seq, or SIZE_MAX */
	int walked, oom, helper, no_helper;
	pthread_t th;
	unsigned char *io[2];
	const struct proof_view *pv; /* the proof the entries are checked against, or NULL */
	int dst;                     /* the copy of the root */
	int said;                    /* the walk was stopped by an entry that says why */
	dev_t dev;                   /* the tree's st_dev */
	int sealed;                  /* a proved file may be copied unhashed (the entry's own proof) */
};

static void pent_fail(struct pent *p, int dst, int sys, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void
pent_fail(struct pent *p, int dst, int sys, const char *code, const char *fmt, ...)
{
	char m[ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	err_fmtv(m, sizeof(m), fmt, ap);
	va_end(ap);
	p->failed = 1;
	p->dst_err = dst;
	p->code = code;
	p->sys = sys;
	free(p->msg);
	p->msg = strdup(m);
}

/* A new entry at the end of the listing (this thread only), or NULL. */
static struct pent *
add(struct place *pl, char type, const char *rel, const char *target)
{
	size_t rl = strlen(rel), tl = target ? strlen(target) : 0;
	struct pent *p = calloc(1, sizeof(*p) + rl + 1 + tl + 1);

	if (p == NULL) {
		pl->oom = 1;
		return NULL;
	}
	p->type = type;
	p->seq = pl->seq++;
	p->in = p->out = -1;
	memcpy(p->rel, rel, rl + 1);
	if (target != NULL) {
		memcpy(p->rel + rl + 1, target, tl + 1);
		p->target = p->rel + rl + 1;
	}
	*pl->tail = p;
	pl->tail = &p->next;
	return p;
}

/* The walk's own error at rel: an entry that says it (or the
 * out-of-memory mark). -1. */
static int walk_fail(struct place *pl, const char *rel, int dst, int sys, const char *code, const char *fmt,
                     ...) __attribute__((format(printf, 6, 7)));

static int
walk_fail(struct place *pl, const char *rel, int dst, int sys, const char *code, const char *fmt, ...)
{
	struct pent *p = add(pl, 'x', rel, NULL);
	char m[ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	err_fmtv(m, sizeof(m), fmt, ap);
	va_end(ap);
	if (p != NULL)
		pent_fail(p, dst, sys, code, "%s", m);
	return -1;
}

/*
 * Copy the queued file p with the buffer io (any thread); its descriptors
 * are closed. A file the proof vouches for (sealed: the entry's own proof)
 * is copied unhashed, its digest the sealed listing's, only under a read
 * lease held to the end and with its fstat unchanged; otherwise it is
 * copied again, hashed. Any other is hashed as it is copied (the digest
 * is of the bytes written), under a lease when it is to vouch for a new
 * proof (p->proved stays set only when the lease held).
 */
static void
copy_one(struct pent *p, unsigned char *io, int sealed)
{
	int rc, dst_err = 0, er, leased = p->proved && proof_lease_take(p->in), plain = leased && sealed;

	rc = plain ? cache_copy_plain(io, p->in, p->out, &dst_err)
	           : cache_copy_hash(io, p->in, p->out, p->size, p->sha, &dst_err);
	if (leased)
		leased = proof_lease_end(p->in, &p->st) && rc == 0;
	if (plain && rc == 0 && !leased) {
		/* opened for writing or changed while copied: copied again,
		 * hashed, so the digest is of the bytes written */
		if (lseek(p->in, 0, SEEK_SET) != 0 || lseek(p->out, 0, SEEK_SET) != 0 ||
		    ftruncate(p->out, 0) != 0)
			rc = -1, dst_err = 1;
		else
			rc = cache_copy_hash(io, p->in, p->out, p->size, p->sha, &dst_err);
	}
	p->proved = leased;
	p->plain = plain && leased;
	er = errno;
	close(p->in);
	if (rc == 0 && (fchmod(p->out, p->mode) != 0 || fstat(p->out, &p->ds) != 0))
		er = errno;
	else if (rc == 0)
		er = 0;
	if (rc == 0)
		fs_writeback_start(p->out); /* core/base/fs.h: the disk writes it while the next is copied */
	close(p->out);
	p->in = p->out = -1;
	if (er != 0 || rc < 0)
		pent_fail(p, dst_err || rc == 0, er, "io.error", "%s: copying: %s", p->rel, strerror(er));
}

/* Take a queued file and copy it (mu held, released meanwhile): a large
 * one first if large, else a small one first. A file after one that
 * failed is not copied; every file before it is, so the first failure in
 * walk order is the one a walk on one thread would have met. */
static void
take_one(struct place *pl, unsigned char *io, int large)
{
	int k = pl->q[large] != NULL ? large : !large;
	struct pent *p = pl->q[k];

	if ((pl->q[k] = p->qnext) == NULL)
		pl->qtail[k] = &pl->q[k];
	pl->pending--;
	if (p->seq > pl->stop) {
		close(p->in);
		close(p->out);
		p->in = p->out = -1;
		return;
	}
	pthread_mutex_unlock(&pl->mu);
	copy_one(p, io, pl->sealed);
	pthread_mutex_lock(&pl->mu);
	if (p->failed && p->seq < pl->stop)
		pl->stop = p->seq;
}

/* The helper takes the large files first: the walk, which copies when
 * too many wait, then takes small ones and does not stall on a large one
 * (a large file is itself copied on two more threads, cache_pipe). */
static void *
helper(void *arg)
{
	struct place *pl = arg;

	pthread_mutex_lock(&pl->mu);
	for (;;) {
		while (pl->pending == 0 && !pl->walked)
			pthread_cond_wait(&pl->cv, &pl->mu);
		if (pl->pending == 0)
			break;
		take_one(pl, pl->io[1], 1);
	}
	pthread_mutex_unlock(&pl->mu);
	return NULL;
}

/* Start the helper unless HELPERS_MAX run (mu held); without one this
 * thread copies alone. */
static void
start_helper(struct place *pl)
{
	pl->no_helper = 1;
	if (__atomic_add_fetch(&helpers, 1, __ATOMIC_SEQ_CST) > HELPERS_MAX ||
	    (pl->io[1] = malloc(COPY_BUF)) == NULL || pthread_create(&pl->th, NULL, helper, pl) != 0) {
		__atomic_sub_fetch(&helpers, 1, __ATOMIC_SEQ_CST);
		return;
	}
	pl->helper = 1;
}

/* Queue the file p (opened, its copy made); start the helper once enough
 * wait, copy some here while too many do. 0, or -1 once stopped. */
static int
queue(struct place *pl, struct pent *p)
{
	int k = p->size >= PIPE_MIN, stop;

	pthread_mutex_lock(&pl->mu);
	*pl->qtail[k] = p;
	pl->qtail[k] = &p->qnext;
	pl->pending++;
	if (!pl->helper && !pl->no_helper && pl->pending >= HELP_FILES)
		start_helper(pl);
	pthread_cond_signal(&pl->cv);
	while (pl->pending >= (pl->helper ? QUEUE_MAX : HELP_FILES))
		take_one(pl, pl->io[0], 0);
	stop = pl->stop != SIZE_MAX;
	pthread_mutex_unlock(&pl->mu);
	return stop ? -1 : 0;
}

/* An entry of another user's in our cache: whoever owns it could hold it
 * open for writing or change it in ways this user's proofs do not bind.
 * -1 (the walk's error). */
static int
not_ours(struct place *pl, const char *rel, const struct stat *st)
{
	return walk_fail(
	    pl, rel, 0, 0, "cache.unsafe_entry",
	    "%s is owned by uid %u, not by this user (uid %u): remove the entry, or chown it to this user",
	    rel, (unsigned)st->st_uid, (unsigned)geteuid());
}

/* Does the proof vouch for entry p (its st)? Set in p->proved. */
static void
vouch(struct place *pl, struct pent *p)
{
	/* group or world write never reaches a kept tree (arc.h): a file or
	 * directory that has it was not made by us, and is hashed */
	p->proved = pl->pv != NULL && (S_ISLNK(p->st.st_mode) || (p->st.st_mode & 022) == 0) &&
	            proof_view_same(pl->pv, (uint32_t)p->seq + 1, p->rel, &p->st, pl->dev);
}

/* The regular file name of src (at rel): opened (never a FIFO waited on),
 * checked through its descriptor (a rename after a stat of the name
 * changes nothing: what is copied is what was checked), its copy made in
 * dst here (one thread creates in a directory: no contention for its
 * lock), the copy queued. */
static int
place_file(struct place *pl, int src, int dst, const char *name, const char *rel)
{
	struct pent *p;
	int er;

	if ((p = add(pl, 'f', rel, NULL)) == NULL)
		return -1;
	p->in = openat(src, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (p->in < 0) {
		pent_fail(p, 0, errno, "io.error", "%s: %s", rel, strerror(errno));
		return -1;
	}
	if (fstat(p->in, &p->st) != 0 || !S_ISREG(p->st.st_mode)) {
		er = errno;
		close(p->in);
		p->in = -1;
		pent_fail(p, 0, er, "io.error", "%s: %s", rel,
		          er ? strerror(er) : "no longer a regular file");
		return -1;
	}
	if (p->st.st_uid != geteuid()) {
		close(p->in);
		p->in = -1;
		return not_ours(pl, rel, &p->st);
	}
	p->mode = p->st.st_mode & 07777;
	p->size = p->st.st_size;
	vouch(pl, p);
	p->out = openat(dst, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (p->out < 0) {
		er = errno;
		close(p->in);
		p->in = -1;
		pent_fail(p, 1, er, "io.error", "%s: %s", rel, strerror(er));
		return -1;
	}
	return queue(pl, p);
}

/* The directory ent (checked through the descriptor the walk reads it
 * by), made in dst and opened as ent->aux; its mode is set in its second
 * visit (a read-only directory is filled first: its files are all made by
 * then). */
static int
place_subdir(struct place *pl, int dst, struct fs_ent *ent)
{
	struct pent *p;

	if (ent->post) {
		if (fchmod(ent->aux, ent->st.st_mode & 07777) != 0)
			return walk_fail(pl, ent->rel, 1, errno, "io.error", "%s: %s", ent->rel,
			                 strerror(errno));
		return 0;
	}
	if ((p = add(pl, 'd', ent->rel, NULL)) == NULL)
		return -1;
	p->st = ent->st;
	if (p->st.st_uid != geteuid())
		return not_ours(pl, ent->rel, &p->st);
	p->mode = p->st.st_mode & 07777;
	vouch(pl, p);
	if (mkdirat(dst, ent->name, 0700) != 0 ||
	    (ent->aux = openat(dst, ent->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return walk_fail(pl, ent->rel, 1, errno, "io.error", "%s: %s", ent->rel, strerror(errno));
	return 0;
}

/* Each entry of the kept tree into the copy of its directory (pl->dst
 * for the root's entries). 0, or -1 (stop: an entry says why). */
static int
place_entry(struct place *pl, struct fs_ent *ent, struct err *e)
{
	int dst = ent->parent != NULL ? ent->parent->aux : pl->dst;
	const char *rel = ent->rel;
	char target[4096];
	struct pent *p;

	if (!ent->post && cache_entry_name(ent, e) < 0)
		return walk_fail(pl, rel, 0, e->sys, e->code, "%s", e->msg);
	if (S_ISDIR(ent->st.st_mode))
		return place_subdir(pl, dst, ent);
	if (S_ISREG(ent->st.st_mode))
		return place_file(pl, ent->dfd, dst, ent->name, rel);
	if (!S_ISLNK(ent->st.st_mode))
		return walk_fail(pl, rel, 0, 0, "io.error", "%s: not a file, directory or link", rel);
	if (ent->st.st_uid != geteuid())
		return not_ours(pl, rel, &ent->st);
	if (cache_read_link(ent->dfd, ent->name, rel, target, sizeof(target), e) < 0)
		return walk_fail(pl, rel, 0, e->sys, e->code, "%s", e->msg);
	if (symlinkat(target, dst, ent->name) != 0)
		return walk_fail(pl, rel, 1, errno, "io.error", "%s: %s", rel, strerror(errno));
	if ((p = add(pl, 'l', rel, target)) == NULL)
		return -1;
	/* a link's target is in the sealed listing: the proof only says
	 * whether the tree is the one it records */
	p->st = ent->st;
	vouch(pl, p);
	return 0;
}

/* fs_walk's visitor: entries in bytewise order, depth first, so the
 * listing is the same for the same tree (and in the order the proof
 * records it). */
static int
place_visit(void *arg, struct fs_ent *ent, struct err *e)
{
	struct place *pl = arg;
	int rc = place_entry(pl, ent, e);

	if (rc < 0)
		pl->said = 1;
	return rc;
}

/* The sha256 in line k of the sealed listing body (blen bytes), when it
 * is a file's ("f MODE SIZE SHA256 PATH"): 0, else -1 (sha zeroed, so the
 * listing made differs from the sealed one). */
static int
sealed_sha(const char *body, size_t blen, const size_t *off, size_t n, size_t k, unsigned char sha[32])
{
	const char *l, *end, *h;
	char hex[65];
	struct digest d;
	struct err e = {0};
	int f;

	memset(sha, 0, 32);
	if (k >= n)
		return -1;
	l = body + off[k];
	end = k + 1 < n ? body + off[k + 1] : body + blen;
	if (end - l < 2 || l[0] != 'f' || l[1] != ' ')
		return -1;
	for (h = l + 2, f = 0; f < 2; f++) {
		if ((h = memchr(h, ' ', (size_t)(end - h))) == NULL)
			return -1;
		h++;
	}
	if (end - h < 65 || h[64] != ' ')
		return -1;
	memcpy(hex, h, 64);
	hex[64] = '\0';
	if (digest_parse_hex(DIGEST_SHA256, hex, &d, "internal", &e) < 0)
		return -1;
	memcpy(sha, d.v, 32);
	return 0;
}

/* Where each line of body (blen bytes) starts: *off (n entries, the caller
 * frees), or -1 (memory). */
static int
line_starts(const char *body, size_t blen, size_t **off, size_t *n)
{
	size_t i, k = 0, cap = 1;

	for (i = 0; i < blen; i++)
		cap += body[i] == '\n';
	if ((*off = malloc(cap * sizeof(**off))) == NULL)
		return -1;
	for (i = 0; i < blen; i++)
		if (i == 0 || body[i - 1] == '\n')
			(*off)[k++] = i;
	*n = k;
	return 0;
}

/* Copy the tree src into dst (both open, left open): *lines the listing of
 * what was written, fn told of each file in walk order, *files their
 * count. Each entry is checked against pv (if not NULL) through its own
 * descriptor; with sealed (pv is the entry's own proof, its listing body
 * blen bytes) a file pv vouches for is copied by the kernel under a read
 * lease and takes its sealed line's digest; every other copy is hashed.
 * *vouched: pv recorded exactly the entries walked, each as its descriptor
 * showed it (and every file held its lease through its copy). 0, or -1
 * with e (*dst_err when the destination failed). */
static int
place_tree(int src, int dst, const struct proof_view *pv, const char *sealed, size_t blen, cache_file_fn fn,
           void *arg, struct buf *lines, uint64_t *files, int *vouched, int *dst_err, struct err *e)
{
	struct place pl;
	struct pent *p, *nx;
	struct stat rs;
	size_t *off = NULL, noff = 0;
	struct err we = {0};
	char hex[65];
	int rc = 0;

	memset(&pl, 0, sizeof(pl));
	*vouched = 0;
	if (fstat(src, &rs) != 0)
		return err_sys(e, "io.error", errno, "the kept tree: %s", strerror(errno));
	if (sealed != NULL && line_starts(sealed, blen, &off, &noff) < 0)
		return err_set(e, "internal", "out of memory");
	pl.pv = pv;
	pl.dev = rs.st_dev;
	pl.sealed = sealed != NULL && pv != NULL && proof_view_same(pv, 0, ".", &rs, rs.st_dev);
	*vouched = pl.sealed || (pv != NULL && proof_view_same(pv, 0, ".", &rs, rs.st_dev));
	pl.tail = &pl.head;
	pl.qtail[0] = &pl.q[0];
	pl.qtail[1] = &pl.q[1];
	pl.stop = SIZE_MAX;
	*dst_err = 0;
	*files = 0;
	if ((pl.io[0] = malloc(COPY_BUF)) == NULL) {
		free(off);
		return err_set(e, "internal", "out of memory");
	}
	pthread_mutex_init(&pl.mu, NULL);
	pthread_cond_init(&pl.cv, NULL);
	pl.dst = dst;
	err_clear(&we);
	if (fs_walk(src, FS_WALK_POST, "cache.unsafe_entry", place_visit, &pl, &we) < 0 && !pl.said)
		walk_fail(&pl, "", 0, we.sys, we.code, "%s", we.msg); /* the walk's own (a limit, a read) */
	pthread_mutex_lock(&pl.mu);
	pl.walked = 1;
	pthread_cond_broadcast(&pl.cv);
	while (pl.pending > 0)
		take_one(&pl, pl.io[0], 0);
	pthread_mutex_unlock(&pl.mu);
	if (pl.helper) {
		pthread_join(pl.th, NULL);
		__atomic_sub_fetch(&helpers, 1, __ATOMIC_SEQ_CST);
	}
	/* the first failure in walk order (every file before it was copied) */
	if (pv == NULL || pv->n != pl.seq + 1)
		*vouched = 0;
	for (p = pl.head; p != NULL && rc == 0; p = p->next) {
		*vouched = *vouched && p->proved;
		if (p->failed) {
			err_sys(e, p->code, p->sys, "%s", p->msg != NULL ? p->msg : "out of memory");
			*dst_err = p->dst_err;
			rc = -1;
		} else if (p->type == 'd') {
			rc = cache_line(lines, e, "d %04o %s\n", p->mode, p->rel);
		} else if (p->type == 'l') {
			rc = cache_line(lines, e, "l %s -> %s\n", p->rel, p->target);
		} else if (p->type == 'f') {
			if (p->plain)
				sealed_sha(sealed, blen, off, noff, p->seq, p->sha);
			hex_encode(p->sha, 32, hex);
			if (fn != NULL)
				fn(arg, p->rel, &p->ds, p->sha);
			(*files)++;
			rc = cache_line(lines, e, "f %04o %lld %s %s\n", p->mode, (long long)p->ds.st_size,
			                hex, p->rel);
		}
	}
	if (rc == 0 && pl.oom)
		rc = err_set(e, "internal", "out of memory");
	for (p = pl.head; p != NULL; p = nx) {
		nx = p->next;
		free(p->msg);
		free(p);
	}
	free(off);
	free(pl.io[0]);
	free(pl.io[1]);
	pthread_cond_destroy(&pl.cv);
	pthread_mutex_destroy(&pl.mu);
	return rc;
}

/* Remove the directory name of dirfd (a work directory of ours). */
static void
discard(int dirfd, const char *name)
{
	struct err e = {0};

	fs_rm_treeat(dirfd, name, &e);
}

/* The first line where a and b differ, for the message. */
static void
first_diff(const char *a, size_t alen, const char *b, size_t blen, char *out, size_t cap)
{
	size_t i = 0, s = 0, ea, eb;

	while (i < alen && i < blen && a[i] == b[i])
		if (a[i++] == '\n')
			s = i;
	for (ea = s; ea < alen && a[ea] != '\n'; ea++)
		;
	for (eb = s; eb < blen && b[eb] != '\n'; eb++)
		;
	snprintf(out, cap, "the manifest has \"%.*s\", the copy \"%.*s\"", (int)(ea - s > 300 ? 300 : ea - s),
	         a + s, (int)(eb - s > 300 ? 300 : eb - s), b + s);
	if (ea == s)
		snprintf(out, cap, "the copy has an extra \"%.*s\"", (int)(eb - s > 300 ? 300 : eb - s),
		         b + s);
	else if (eb == s)
		snprintf(out, cap, "the copy lacks \"%.*s\"", (int)(ea - s > 300 ? 300 : ea - s), a + s);
}

/* An entry's manifest, read and checked: meta and body point into text. */
struct mf {
	char *text; /* malloc'd */
	const char *meta, *body;
	size_t metalen, blen;
	char proof[65]; /* the sha256 hex of the entry's proof list, or "" */
};

/* Read and check the manifest of entry dir into *m (m->text for the
 * caller to free). Returns 0, or -1 with why. */
static int
read_manifest(const char *dir, const char *key, const unsigned char sk[KEY_LEN], struct mf *mf,
              const char **why)
{
	char path[4400], head[CACHE_KEY_MAX + 40], mac[65];
	size_t len, hl, ml;
	struct err e = {0};
	char *t, *nl, *m;
	int version;

	memset(mf, 0, sizeof(*mf));
	if (fs_path_join(path, sizeof(path), dir, "manifest", NULL) < 0 ||
	    fs_read_alloc(path, MANIFEST_MAX, &mf->text, &len, &e) < 0) {
		*why = "its manifest is missing or unreadable";
		return -1;
	}
	t = mf->text;
	/* "abx-tree 2 <key> <proof sha256 or -> <meta>\n" (version 1: no
	 * proof field) lines... "mac <hex>\n" */
	hl = (size_t)snprintf(head, sizeof(head), "abx-tree 2 %s ", key);
	ml = 4 + 64 + 1;
	for (version = 2; version >= 1; version--) {
		head[9] = (char)('0' + version);
		if (len >= hl && memcmp(t, head, hl) == 0)
			break;
	}
	if (version < 1 || len < hl + ml || (nl = memchr(t, '\n', len)) == NULL ||
	    memcmp(t + len - ml, "mac ", 4) != 0 || t[len - 1] != '\n') {
		*why = "its manifest does not name this artifact";
		return -1;
	}
	cache_seal(sk, t, len - ml, mac);
	if (!ct_equal(mac, t + len - ml + 4, 64)) {
		*why = "its manifest's seal does not match (edited, or sealed with another machine's or "
		       "user's key: "
		       "a copied or restored cache)";
		return -1;
	}
	m = t + hl;
	if (version == 2) {
		if (nl - m >= 65 && m[64] == ' ') {
			memcpy(mf->proof, m, 64);
			m += 65;
		} else if (nl - m >= 2 && m[0] == '-' && m[1] == ' ') {
			m += 2;
		} else {
			*why = "its manifest's header is malformed";
			return -1;
		}
	}
	mf->meta = m;
	mf->metalen = (size_t)(nl - m);
	mf->body = nl + 1;
	mf->blen = (size_t)(t + len - ml - (nl + 1));
	return 0;
}

/*
 * Seal the entry dir again with the proof list pl (made before a placement
 * that hashed every copy, still holding after it: it records the tree
 * those digests are of), so the next placement need not hash: the proof
 * takes its name first, then the manifest naming it (a reader in between
 * sees a proof its manifest does not name, and hashes). 1 done, 0 not
 * (nothing to say: the next placement hashes and tries again).
 */
static int
reseal(const char *dir, const char *key, const unsigned char sk[KEY_LEN], const struct mf *mf, const char *pl,
       size_t plen)
{
	char rnd[17], leaf[32], ptmp[4400], mtmp[4400], pf[4400], mfp[4400], hex[65];
	struct err e = {0};

	fs_rand_hex(rnd, 8);
	snprintf(leaf, sizeof(leaf), ".proof-%s", rnd);
	if (fs_path_join(ptmp, sizeof(ptmp), dir, leaf, NULL) < 0 ||
	    fs_path_join(pf, sizeof(pf), dir, PROOF_FILE, NULL) < 0 ||
	    fs_path_join(mfp, sizeof(mfp), dir, "manifest", NULL) < 0)
		return 0;
	snprintf(leaf, sizeof(leaf), ".manifest-%s", rnd);
	if (fs_path_join(mtmp, sizeof(mtmp), dir, leaf, NULL) < 0 ||
	    cache_proof_put(ptmp, pl, plen, hex, &e) < 0)
		return 0;
	if (cache_manifest_put(mtmp, sk, key, hex, mf->meta, mf->metalen, mf->body, mf->blen, &e) < 0 ||
	    rename(ptmp, pf) != 0) {
		unlink(ptmp);
		unlink(mtmp);
		return 0;
	}
	if (rename(mtmp, mfp) != 0) {
		unlink(mtmp);
		return 0;
	}
	return 1;
}

/*
 * The entry's proof list (dir/proof) when its sha256 is hex and it shows
 * the tree open at sfd unchanged since it was kept (a first look: each
 * entry is checked again through the descriptor it is copied from): 1 with
 * *pl (malloc'd, the caller frees), else 0 (the tree is then hashed as it
 * is copied).
 */
static int
load_proof(const char *dir, int sfd, const char *hex, char **pl, size_t *len)
{
	char path[4400], got[65];
	struct digest d;
	struct err e = {0};

	*pl = NULL;
	if (hex[0] == '\0')
		return 0;
	if (fs_path_join(path, sizeof(path), dir, PROOF_FILE, NULL) < 0 ||
	    fs_read_alloc(path, PROOF_MAX, pl, len, &e) < 0)
		return 0;
	digest_buf(DIGEST_SHA256, *pl, *len, &d);
	digest_hex(&d, got);
	if (!ct_equal(got, hex, 64) || proof_check_fd(sfd, *pl, *len) != 1) {
		free(*pl);
		*pl = NULL;
		return 0;
	}
	return 1;
}

int
cache_tree_has(const char *cache, const char *key)
{
	char dir[4400];

	return fs_path_join(dir, sizeof(dir), cache, "trees", NULL) == 0 &&
	       fs_path_join(dir, sizeof(dir), dir, key, NULL) == 0 && access(dir, F_OK) == 0;
}

int
cache_tree_place(const char *cache, const char *keyfile, const char *key, int parentfd, const char *name,
                 const char *label, cache_file_fn fn, void *arg, char *meta, size_t metacap,
                 struct cache_placed *out, struct err *e)
{
	char trees[4096], dir[4200], src[4300], tmp[64], rnd[17], diff[800];
	unsigned char sk[KEY_LEN];
	const char *why = NULL;
	struct mf mf = {0};
	char *pl = NULL;
	struct buf lines = BUF_INIT(MANIFEST_MAX);
	uint64_t nfiles = 0;
	struct err we = {0};
	size_t plen = 0;
	struct proof_view pv;
	struct stat st;
	int sfd, dfd, rc, dst_err = 0, proved, fresh = 0, held = 0;

	/* a path that does not fit is no entry: nothing was kept under it */
	if (fs_path_join(trees, sizeof(trees), cache, "trees", NULL) != 0 ||
	    fs_path_join(dir, sizeof(dir), trees, key, NULL) != 0 || access(dir, F_OK) != 0)
		return 0;
	if (cache_seal_key(keyfile, sk, &why) < 0) {
		warnx_line("cache: not using the extracted tree of %s in %s: %s", label, trees, why);
		return 0;
	}
	if (read_manifest(dir, key, sk, &mf, &why) < 0)
		goto damaged;
	if (meta != NULL)
		snprintf(meta, metacap, "%.*s", (int)mf.metalen, mf.meta);
	sfd = fs_path_join(src, sizeof(src), dir, "tree", NULL) < 0
	          ? -1
	          : open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0 || fstat(sfd, &st) != 0) {
		if (sfd >= 0)
			close(sfd);
		why = "its tree is missing";
		goto damaged;
	}
	if (st.st_uid != geteuid()) {
		close(sfd);
		snprintf(
		    diff, sizeof(diff),
		    "its tree is owned by uid %u, not by this user (uid %u): remove the entry, or chown it "
		    "to this user",
		    (unsigned)st.st_uid, (unsigned)geteuid());
		why = diff;
		goto damaged;
	}
#ifdef ABX_TEST
	if (cache_test_place_fn != NULL)
		cache_test_place_fn(dir);
#endif
	/* Everything from here on reads the tree through sfd and the
	 * descriptors opened under it, never by its path (an entry renamed
	 * meanwhile changes nothing). Unchanged since it was kept (one stat
	 * per entry): each file whose descriptor still shows what the proof
	 * records is copied by the kernel under a read lease, its digest the
	 * sealed one; else each copy hashed, with a proof made first (at most
	 * 20 ms for the clock) that, if every descriptor copied from matched
	 * it, is sealed for the next placement. */
	proved = load_proof(dir, sfd, mf.proof, &pl, &plen);
	if (!proved) {
		err_clear(&we);
		fresh = proof_make_quick_fd(sfd, src, "io.error", &pl, &plen, &we) == 0;
	}
	if ((proved || fresh) && proof_view_open(pl, plen, &pv) < 0)
		proved = fresh = 0;
	fs_rand_hex(rnd, 8);
	snprintf(tmp, sizeof(tmp), ".abx-place-%s", rnd);
	err_clear(&we);
	if (mkdirat(parentfd, tmp, 0700) != 0 ||
	    (dfd = openat(parentfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		close(sfd);
		free(mf.text);
		free(pl);
		return err_sys(e, "io.error", errno, "placing %s: %s", label, strerror(errno));
	}
	rc = place_tree(sfd, dfd, proved || fresh ? &pv : NULL, proved ? mf.body : NULL, mf.blen, fn, arg,
	                &lines, &nfiles, &held, &dst_err, &we);
	close(sfd);
	if (rc == 0 && fchmod(dfd, 0755) != 0)
		rc = err_sys(&we, "io.error", errno, "placing %s: %s", label, strerror(errno)), dst_err = 1;
	close(dfd);
	if (rc < 0 && dst_err) {
		err_copy(e, &we);
		discard(parentfd, tmp);
		buf_free(&lines);
		free(mf.text);
		free(pl);
		return -1;
	}
	if (rc < 0 || lines.len != mf.blen || memcmp(lines.p, mf.body, mf.blen) != 0) {
		if (rc < 0)
			snprintf(diff, sizeof(diff), "%.700s", we.msg);
		else
			first_diff(mf.body, mf.blen, (const char *)lines.p, lines.len, diff, sizeof(diff));
		why = diff;
		discard(parentfd, tmp);
		buf_free(&lines);
		free(pl);
		goto damaged;
	}
	/* whole, verified: it takes its name (an empty directory there is
	 * replaced; anything else stays, and extraction is used instead) */
	if (renameat(parentfd, tmp, parentfd, name) != 0) {
		int er = errno;
		discard(parentfd, tmp);
		buf_free(&lines);
		free(mf.text);
		free(pl);
		warnx_line("cache: not placing the extracted tree of %s: %s: %s; extracting instead", label,
		           name, strerror(er));
		return 0;
	}
	fresh = fresh && held && reseal(dir, key, sk, &mf, pl, plen);
	if (out != NULL) {
		out->files = nfiles;
		out->proved = proved && held;
		out->resealed = fresh;
	}
	buf_free(&lines);
	free(mf.text);
	free(pl);
	return 1;

damaged:
	free(mf.text);
	/* out of the way first (one rename: a concurrent reader sees the
	 * whole entry or none), then removed */
	fs_rand_hex(rnd, 8);
	snprintf(tmp, sizeof(tmp), ".tmp-bad-%s", rnd);
	if (fs_path_join(src, sizeof(src), cache, tmp, NULL) == 0 && rename(dir, src) == 0) {
		struct err de = {0};
		fs_rm_tree(src, &de);
	}
	warnx_line(
	    "cache: the extracted tree of %s (%s) is damaged: %s; discarded, extracting it again from the "
	    "verified artifact",
	    label, dir, why);
	return 0;
}
