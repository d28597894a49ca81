/*
 * The cache's extracted trees (cache.h): a tree kept under trees/<key> with
 * a listing sealed by the cache's own key, stored by reflink or a copy that
 * takes extraction's digests (placed by cache_place.c; sealed notes are
 * cache_note.c's).
 */
#include "pkg/cache.h"

#include "base/fs.h"
#include "base/proof.h"
#include "pkg/cache_int.h"

#include <bearssl_hmac.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- extracted trees ------------------------------------------------------ */

struct cache_sum {
	char *rel;
	struct stat st;
	unsigned char sha[32];
	char copy[24]; /* extraction's copy in s->copies, or "" */
};

void
cache_sums_add(struct cache_sums *s, const char *rel, const struct stat *st, const unsigned char sha256[32])
{
	cache_sums_add_copy(s, rel, st, sha256, NULL);
}

int
cache_sums_copies(struct cache_sums *s, const char *cache)
{
	char p[4200], rnd[17];

	/* the copies (a file each, all in one directory, made on the
	 * extraction's critical path) and the kept trees take their inodes
	 * from a quiet block group (fs_mark_topdir) */
	fs_mark_topdir(cache);
	fs_rand_hex(rnd, 8);
	if ((size_t)snprintf(p, sizeof(p), "%s/.tmp-tree-copies-%s", cache, rnd) >= sizeof(p) ||
	    mkdir(p, 0700) != 0)
		return -1;
	s->copies_fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s->copies_fd < 0 || (s->copies = strdup(p)) == NULL) {
		if (s->copies_fd >= 0)
			close(s->copies_fd);
		rmdir(p);
		return -1;
	}
	return s->copies_fd;
}

/* The copy extraction made of the file st (the record cache_sums_get just
 * matched), when it is whole: its name in s->copies, else NULL (then the
 * file is copied). */
static const char *
copy_ready(struct cache_sums *s, const struct stat *st)
{
	struct stat cs;

	if (s->copies == NULL || s->last == NULL || s->last->copy[0] == '\0' ||
	    fstatat(s->copies_fd, s->last->copy, &cs, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(cs.st_mode) ||
	    cs.st_size != st->st_size)
		return NULL;
	return s->last->copy;
}

/* Move copy (size bytes) from cfd to dst/rel with mode: 0, or -1. */
static int
take_copy(int cfd, const char *copy, int dst, const char *rel, off_t size, mode_t mode)
{
	struct stat cs;
	int fd, rc = -1;

	if (renameat(cfd, copy, dst, rel) != 0)
		return -1;
	fd = openat(dst, rel, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &cs) == 0 && S_ISREG(cs.st_mode) && cs.st_size == size &&
	    fchmod(fd, mode) == 0)
		rc = 0;
	if (fd >= 0)
		close(fd);
	return rc;
}

void
cache_sums_add_copy(struct cache_sums *s, const char *rel, const struct stat *st,
                    const unsigned char sha256[32], const char *copy)
{
	struct cache_sum *r;
	char *dup;

	if (s->v.size == 0)
		s->v = (struct vec)VEC_INIT(sizeof(struct cache_sum), CACHE_SUMS_MAX);
	if ((dup = strdup(rel)) == NULL)
		return;
	if ((r = vec_push(&s->v)) == NULL) {
		free(dup);
		return;
	}
	r->rel = dup;
	r->st = *st;
	memcpy(r->sha, sha256, 32);
	snprintf(r->copy, sizeof(r->copy), "%s", copy != NULL ? copy : "");
	s->sorted = 0;
}

static int
cmp_sum(const void *a, const void *b)
{
	return strcmp(((const struct cache_sum *)a)->rel, ((const struct cache_sum *)b)->rel);
}

int
cache_sums_get(void *arg, const char *rel, const struct stat *st, unsigned char sha256[32])
{
	struct cache_sums *s = arg;
	struct cache_sum k, *r;

	if (!s->sorted && s->v.n > 1)
		qsort(s->v.p, s->v.n, sizeof(k), cmp_sum);
	s->sorted = 1;
	k.rel = (char *)rel;
	r = s->v.n ? bsearch(&k, s->v.p, s->v.n, sizeof(k), cmp_sum) : NULL;
	s->last = NULL;
	if (r == NULL || r->st.st_ino != st->st_ino || r->st.st_dev != st->st_dev ||
	    r->st.st_size != st->st_size || r->st.st_mode != st->st_mode ||
	    r->st.st_mtim.tv_sec != st->st_mtim.tv_sec || r->st.st_mtim.tv_nsec != st->st_mtim.tv_nsec ||
	    r->st.st_ctim.tv_sec != st->st_ctim.tv_sec || r->st.st_ctim.tv_nsec != st->st_ctim.tv_nsec)
		return 0;
	memcpy(sha256, r->sha, 32);
	s->last = r;
	return 1;
}

void
cache_sums_free(struct cache_sums *s)
{
	struct cache_sum *v = s->v.p;
	size_t i;

	for (i = 0; i < s->v.n; i++)
		free(v[i].rel);
	vec_free(&s->v);
	if (s->copies != NULL) {
		struct err e = {0};
		close(s->copies_fd);
		fs_rm_tree(s->copies, &e);
		free(s->copies);
	}
	memset(s, 0, sizeof(*s));
}

int
cache_tree_key(const struct digest *d, const char *variant, char out[CACHE_KEY_MAX])
{
	char hex[DIGEST_HEX_MAX];
	int n;

	if (strchr(variant, '/') || strchr(variant, ' ') || strchr(variant, '\n'))
		return -1;
	n = snprintf(out, CACHE_KEY_MAX, "%s-%s-%s", digest_name(d->alg), digest_hex(d, hex), variant);
	return n < 0 || n >= CACHE_KEY_MAX ? -1 : 0;
}

int
cache_seal_key(const char *keyfile, unsigned char key[KEY_LEN], const char **why)
{
	char dir[4096], tmp[4200], hex[2 * KEY_LEN + 2], rnd[17], leaf[32];
	struct stat st;
	struct err e = {0};
	ssize_t n;
	int fd, i;

	if (keyfile == NULL || keyfile[0] != '/') {
		*why = "no state directory for its key (the key is kept outside the cache)";
		return -1;
	}
	for (i = 0; i < 2; i++) {
		err_clear(&e);
		/* never a link, never a FIFO waited on, a regular file of ours
		 * that nobody else can read */
		fd = fs_open_file(keyfile, &st, &e);
		if (fd >= 0) {
			n = read(fd, hex, sizeof(hex));
			close(fd);
			if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
				*why = "its key file is not this user's alone (mode 0600)";
				return -1;
			}
			if (n < 2 * KEY_LEN) {
				*why = "its key file is unreadable or short";
				return -1;
			}
			if (hex_decode(hex, key, KEY_LEN) != 0) {
				*why = "its key file is not hex";
				return -1;
			}
			return 0;
		}
		if (e.code == NULL || strcmp(e.code, "not_found") != 0) {
			*why = "its key file is not a regular file (a link, a FIFO, a directory)";
			return -1;
		}
		if (i > 0)
			break;
		if (fs_dirname(keyfile, dir, sizeof(dir)) != 0 || fs_mkdir_p(dir, 0700, &e) != 0)
			break;
		if (getrandom(key, KEY_LEN, 0) != KEY_LEN) {
			*why = "no random bytes for its key";
			return -1;
		}
		hex_encode(key, KEY_LEN, hex);
		hex[2 * KEY_LEN] = '\n';
		fs_rand_hex(rnd, 8);
		snprintf(leaf, sizeof(leaf), ".tmp-key-%s", rnd);
		if (fs_path_join(tmp, sizeof(tmp), dir, leaf, NULL) < 0)
			break;
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			break;
		n = write(fd, hex, 2 * KEY_LEN + 1);
		close(fd);
		/* link(2) never replaces: of two first users one key wins and
		 * both read it */
		if (n != 2 * KEY_LEN + 1 || (link(tmp, keyfile) != 0 && errno != EEXIST)) {
			unlink(tmp);
			break;
		}
		unlink(tmp);
	}
	*why = "its key file cannot be read or made";
	return -1;
}

void
cache_seal(const unsigned char key[KEY_LEN], const void *text, size_t len, char out[65])
{
	br_hmac_key_context kc;
	br_hmac_context hc;
	unsigned char mac[32];

	br_hmac_key_init(&kc, &br_sha256_vtable, key, KEY_LEN);
	br_hmac_init(&hc, &kc, 0);
	br_hmac_update(&hc, text, len);
	br_hmac_out(&hc, mac);
	hex_encode(mac, 32, out);
}

/* One copy of a tree being kept: source and destination directories, the
 * listing made of what was written, and which side an error came from. */
struct walk {
	struct buf lines;
	unsigned char *io; /* COPY_BUF bytes */
	cache_sum_fn sum;  /* digests from extraction */
	void *sum_arg;
	uint64_t files, summed; /* files copied; of them, not hashed again */
	int dst_err;            /* the failure was the destination's */
	struct err *e;
	int dst; /* the copy of the root */
	/* what cache_tree_store_end does, in walk order (a directory's mode
	 * after its content) */
	struct vec later; /* struct later; an archive's entries at most (FS_MAX_DIR_ENTRIES) */
};

/* A copy to move to rel (copy set), or the mode of the directory rel. */
struct later {
	char *rel;
	char copy[24];
	mode_t mode;
	off_t size;
};

static int
push_later(struct walk *w, const char *rel, const char *copy, const struct stat *st)
{
	struct later *l = vec_push(&w->later);

	if (l == NULL)
		return err_set(w->e, "internal", "%s",
		               vec_full(&w->later) ? "more entries than an archive holds" : "out of memory");
	if ((l->rel = strdup(rel)) == NULL) {
		w->later.n--;
		return err_set(w->e, "internal", "out of memory");
	}
	snprintf(l->copy, sizeof(l->copy), "%s", copy);
	l->mode = st->st_mode & 07777;
	l->size = st->st_size;
	return 0;
}

/* Copy in to out and the sha256 of what out then holds: a reflink where
 * the filesystem shares blocks (then out is read back and hashed), else a
 * read, hash and write in one pass (on two threads for a large file): the
 * digest is of the very bytes written, with one read fewer than an
 * in-kernel copy read back. */
int
cache_copy_hash(unsigned char *io, int in, int out, off_t size, unsigned char sha[32], int *dst_err)
{
	struct digest_ctx c;
	struct digest d;
	off_t off = 0;
	ssize_t n;

	digest_init(&c, DIGEST_SHA256);
	if (size > 0 && ioctl(out, CACHE_FICLONE, in) == 0) {
		while ((n = pread(out, io, COPY_BUF, off)) > 0) {
			digest_update(&c, io, (size_t)n);
			off += n;
		}
		if (n < 0)
			return -1;
	} else if (size >= PIPE_MIN) {
		/* a large file: read here, hashed and written on a second
		 * thread (the digest is still of the very bytes written) */
		struct cache_pipe *p = cache_pipe_new(out, DIGEST_SHA256, DIGEST_NONE);
		if (p == NULL)
			return -1;
		while ((n = read(in, io, COPY_BUF)) > 0)
			if (cache_pipe_write(p, io, (size_t)n) < 0)
				break;
		if (n < 0) {
			cache_pipe_free(p);
			return -1;
		}
		if (cache_pipe_finish(p, &d, NULL) < 0 || n > 0) {
			*dst_err = 1;
			return -1;
		}
		memcpy(sha, d.v, 32);
		return 0;
	} else {
		while ((n = read(in, io, COPY_BUF)) > 0) {
			digest_update(&c, io, (size_t)n);
			if (fs_write_all(out, io, (size_t)n, -1) != 0) {
				*dst_err = 1;
				return -1;
			}
		}
		if (n < 0)
			return -1;
	}
	digest_final(&c, &d);
	memcpy(sha, d.v, 32);
	return 0;
}

/* Copy in to out whole, unhashed (the caller has the digest): in the
 * kernel where it can (a reflink where the filesystem shares blocks), else
 * through io (COPY_BUF bytes). */
int
cache_copy_plain(unsigned char *io, int in, int out, int *dst_err)
{
	ssize_t n;
	uint64_t unkicked = 0;

	while ((n = copy_file_range(in, NULL, out, NULL, COPY_BUF << 4, 0)) > 0)
		fs_writeback_every(out, &unkicked, (uint64_t)n);
	if (n == 0)
		return 0;
	if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP) {
		/* the errors only a destination gives (a source's read
		 * error is EIO) */
		*dst_err = errno == ENOSPC || errno == EDQUOT || errno == EROFS || errno == EFBIG ||
		           errno == ETXTBSY;
		return -1;
	}
	/* restart from the start: a failed call may have copied part */
	if (lseek(in, 0, SEEK_SET) != 0 || lseek(out, 0, SEEK_SET) != 0 || ftruncate(out, 0) != 0)
		return -1;
	while ((n = read(in, io, COPY_BUF)) > 0) {
		if (fs_write_all(out, io, (size_t)n, -1) != 0) {
			*dst_err = 1;
			return -1;
		}
	}
	return n < 0 ? -1 : 0;
}

int
cache_line(struct buf *b, struct err *e, const char *fmt, ...)
{
	char l[8400];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(l, sizeof(l), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(l) || buf_put(b, l, (size_t)n) < 0)
		return err_set(e, "io.error", "tree listing too large");
	return 0;
}

#define line(w, ...) cache_line(&(w)->lines, (w)->e, __VA_ARGS__)

int
cache_entry_name(const struct fs_ent *ent, struct err *e)
{
	if (strchr(ent->name, '\n') || strstr(ent->name, " -> "))
		return err_set(e, "io.error", "%s: a name the listing cannot hold", ent->rel);
	return 0;
}

int
cache_read_link(int src, const char *name, const char *rel, char *target, size_t cap, struct err *e)
{
	ssize_t n = readlinkat(src, name, target, cap - 1);

	if (n < 0 || (size_t)n >= cap - 1 || memchr(target, '\n', (size_t)n))
		return err_set(e, "io.error", "%s: an unreadable link", rel);
	target[n] = '\0';
	return 0;
}

static int
walk_file(struct walk *w, int src, int dst, const char *name, const char *rel, const struct stat *st)
{
	unsigned char sha[32];
	char hex[65], target[4096];
	const char *copy;
	struct stat ds;
	int in, out, rc;

	if (S_ISLNK(st->st_mode)) {
		if (cache_read_link(src, name, rel, target, sizeof(target), w->e) < 0)
			return -1;
		if (symlinkat(target, dst, name) != 0) {
			w->dst_err = 1;
			return err_sys(w->e, "io.error", errno, "%s: %s", rel, strerror(errno));
		}
		return line(w, "l %s -> %s\n", rel, target);
	}
	if (!S_ISREG(st->st_mode))
		return err_set(w->e, "io.error", "%s: not a file, directory or link", rel);
	/* the copy extraction wrote of the very bytes it hashed (and the
	 * stat says the file is the one it hashed) takes its place, moved in
	 * by cache_tree_store_end: nothing of the tree is read after this walk */
	if (w->sum == cache_sums_get && w->sum(w->sum_arg, rel, st, sha) == 1 &&
	    (copy = copy_ready(w->sum_arg, st)) != NULL) {
		if (push_later(w, rel, copy, st) < 0)
			return -1;
		w->summed++;
		ds = *st;
		goto listed;
	}
	in = openat(src, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return err_sys(w->e, "io.error", errno, "%s: %s", rel, strerror(errno));
	out = openat(dst, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		close(in);
		w->dst_err = 1;
		return err_sys(w->e, "io.error", errno, "%s: %s", rel, strerror(errno));
	}
	/* a file extraction just wrote and hashed (the stat says it is
	 * unchanged since) is copied, not hashed again; placement hashes
	 * every copy it makes unless the entry's proof shows the tree
	 * unchanged since it was kept */
	if (w->sum != NULL && w->sum(w->sum_arg, rel, st, sha) == 1) {
		rc = cache_copy_plain(w->io, in, out, &w->dst_err);
		w->summed += rc == 0;
	} else {
		rc = cache_copy_hash(w->io, in, out, st->st_size, sha, &w->dst_err);
	}
	close(in);
	if (rc < 0 || fchmod(out, st->st_mode & 07777) != 0 || fstat(out, &ds) != 0) {
		close(out);
		w->dst_err = w->dst_err || rc == 0;
		return err_sys(w->e, "io.error", errno, "%s: copying: %s", rel, strerror(errno));
	}
	fs_writeback_start(out); /* core/base/fs.h: the disk writes it while the next is copied */
	close(out);
listed:
	hex_encode(sha, 32, hex);
	w->files++;
	return line(w, "f %04o %lld %s %s\n", (unsigned)(st->st_mode & 07777), (long long)ds.st_size, hex,
	            rel);
}

/* fs_walk's visitor: each entry of the tree copied into the copy of its
 * directory (w->dst for the root's entries), names in bytewise order,
 * depth first: the listing is the same for the same tree. */
static int
walk_visit(void *arg, struct fs_ent *ent, struct err *e)
{
	struct walk *w = arg;
	int dst = ent->parent != NULL ? ent->parent->aux : w->dst;
	unsigned mode = (unsigned)(ent->st.st_mode & 07777);

	if (!S_ISDIR(ent->st.st_mode))
		return cache_entry_name(ent, e) < 0
		           ? -1
		           : walk_file(w, ent->dfd, dst, ent->name, ent->rel, &ent->st);
	if (ent->post) {
		/* the mode last: a read-only directory is filled first (with
		 * extraction's copies, once they are moved in) */
		if (w->sum_arg != NULL && w->sum == cache_sums_get)
			return push_later(w, ent->rel, "", &ent->st);
		if (fchmod(ent->aux, mode) != 0) {
			w->dst_err = 1;
			return err_sys(e, "io.error", errno, "%s: %s", ent->rel, strerror(errno));
		}
		return 0;
	}
	if (cache_entry_name(ent, e) < 0)
		return -1;
	if (mkdirat(dst, ent->name, 0700) != 0 ||
	    (ent->aux = openat(dst, ent->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		w->dst_err = 1;
		return err_sys(e, "io.error", errno, "%s: %s", ent->rel, strerror(errno));
	}
	return line(w, "d %04o %s\n", mode, ent->rel);
}

static int
walk_init(struct walk *w, struct err *e)
{
	memset(w, 0, sizeof(*w));
	w->lines.max = MANIFEST_MAX;
	w->later.size = sizeof(struct later);
	w->later.max = FS_MAX_DIR_ENTRIES;
	w->e = e;
	if ((w->io = malloc(COPY_BUF)) == NULL)
		return err_set(e, "internal", "out of memory");
	return 0;
}

static void
walk_free(struct walk *w)
{
	size_t i;

	for (i = 0; i < w->later.n; i++)
		free(((struct later *)w->later.p)[i].rel);
	vec_free(&w->later);
	buf_free(&w->lines);
	free(w->io);
}

/* A store between its two steps (cache.h). */
struct cache_store {
	struct walk w;
	struct err e;
	unsigned char sk[KEY_LEN];
	char dir[4200], tmp[4200], *label, *key, *meta;
	int tfd;
};

/* The end of a store, s freed: 1 kept, 0 not (said). */
static int
store_close(struct cache_store *s, int rc)
{
	if (s->tfd >= 0)
		close(s->tfd);
	if (rc != 0) {
		warnx_line("cache: not keeping the extracted tree of %s: %s", s->label, s->e.msg);
		fs_rm_tree(s->tmp, &s->e);
	} else if (access(s->tmp, F_OK) == 0) {
		fs_rm_tree(s->tmp, &s->e); /* another process kept it first */
	}
	walk_free(&s->w);
	free(s->label);
	free(s->key);
	free(s->meta);
	free(s);
	return rc == 0;
}

struct cache_store *
cache_tree_store_begin(const char *cache, const char *keyfile, const char *key, int dirfd, const char *meta,
                       const char *label, cache_sum_fn sum, void *sum_arg, int *kept)
{
	char trees[4096], rnd[17], leaf[32], mf[4300];
	const char *why = NULL;
	struct cache_store *s;

	*kept = 0;
	if (strchr(meta, ' ') || strchr(meta, '\n') || (s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->tfd = -1;
	err_clear(&s->e);
	if (fs_path_join(trees, sizeof(trees), cache, "trees", &s->e) != 0 ||
	    fs_path_join(s->dir, sizeof(s->dir), trees, key, &s->e) != 0) {
		warnx_line("cache: not keeping the extracted tree of %s: %s", label, s->e.msg);
		free(s);
		return NULL;
	}
	if ((s->label = strdup(label)) == NULL || walk_init(&s->w, &s->e) < 0) {
		free(s->label);
		free(s);
		return NULL;
	}
	if (access(s->dir, F_OK) == 0) {
		*kept = 1;
		store_close(s, 0);
		return NULL;
	}
	/* a key kept inside the cache by an earlier version travels with
	 * every copy of it: never read, removed */
	if (fs_path_join(mf, sizeof(mf), trees, ".key", NULL) == 0)
		unlink(mf);
	if ((mkdir(trees, 0755) != 0 && errno != EEXIST) || cache_seal_key(keyfile, s->sk, &why) < 0) {
		warnx_line("cache: not keeping the extracted tree of %s in %s: %s", label, trees,
		           why ? why : strerror(errno));
		s->tmp[0] = '\0';
		store_close(s, 0);
		return NULL;
	}
	fs_rand_hex(rnd, 8);
	snprintf(leaf, sizeof(leaf), ".tmp-tree-%s", rnd);
	s->w.sum = sum;
	s->w.sum_arg = sum_arg;
	if (fs_path_join(s->tmp, sizeof(s->tmp), cache, leaf, &s->e) < 0 ||
	    fs_path_join(mf, sizeof(mf), s->tmp, "tree", &s->e) < 0) {
		store_close(s, -1);
		return NULL;
	}
	if (mkdir(s->tmp, 0755) != 0 || mkdir(mf, 0755) != 0 ||
	    (s->tfd = open(mf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		err_sys(&s->e, "io.error", errno, "%s: %s", s->tmp, strerror(errno));
		store_close(s, -1);
		return NULL;
	}
	s->w.dst = s->tfd;
	if (fs_walk(dirfd, FS_WALK_POST, "io.error", walk_visit, &s->w, &s->e) < 0) {
		store_close(s, -1);
		return NULL;
	}
	if ((s->meta = strdup(meta)) == NULL || (s->key = strdup(key)) == NULL) {
		err_set(&s->e, "internal", "out of memory");
		store_close(s, -1);
		return NULL;
	}
	return s;
}

/* One thing left for the end: a copy moved in, or a directory's mode. */
static int
later_do(struct cache_store *s, struct cache_sums *sums, const struct later *l)
{
	int fd, rc;

	if (l->copy[0] != '\0')
		return sums == NULL ? -1
		                    : take_copy(sums->copies_fd, l->copy, s->tfd, l->rel, l->size, l->mode);
	if ((fd = openat(s->tfd, l->rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -1;
	rc = fchmod(fd, l->mode);
	close(fd);
	return rc;
}

/* Write n bytes as the new file path (no fsync: an entry torn by a power
 * cut fails its seal or its listing, and is re-extracted). 0, or -1 with e. */
static int
put_new(const char *path, const void *p, size_t n, struct err *e)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	ssize_t w = fd >= 0 ? write(fd, p, n) : -1;
	int er = errno;

	if (fd >= 0 && close(fd) != 0 && w == (ssize_t)n)
		w = -1, er = errno;
	if (w == (ssize_t)n)
		return 0;
	if (fd >= 0)
		unlink(path);
	return err_sys(e, "io.error", er, "%s: %s", path, w >= 0 ? "short write" : strerror(er));
}

int
cache_proof_put(const char *path, const char *pl, size_t len, char hex[65], struct err *e)
{
	struct digest d;

	if (put_new(path, pl, len, e) < 0)
		return -1;
	digest_buf(DIGEST_SHA256, pl, len, &d);
	digest_hex(&d, hex);
	return 0;
}

int
cache_manifest_put(const char *path, const unsigned char sk[KEY_LEN], const char *key, const char *proof,
                   const char *meta, size_t metalen, const void *body, size_t blen, struct err *e)
{
	struct buf t = BUF_INIT(MANIFEST_MAX + 200);
	char mac[65];
	int rc;

	buf_put(&t, "abx-tree 2 ", 11);
	buf_put(&t, key, strlen(key));
	buf_put(&t, " ", 1);
	buf_put(&t, proof[0] ? proof : "-", proof[0] ? strlen(proof) : 1);
	buf_put(&t, " ", 1);
	buf_put(&t, meta, metalen);
	buf_put(&t, "\n", 1);
	buf_put(&t, body, blen);
	if (!t.over) {
		cache_seal(sk, t.p, t.len, mac);
		buf_put(&t, "mac ", 4);
		buf_put(&t, mac, 64);
		buf_put(&t, "\n", 1);
	}
	rc = t.over ? err_set(e, "io.error", "tree listing too large") : put_new(path, t.p, t.len, e);
	buf_free(&t);
	return rc;
}

/*
 * The proof list of the finished tree as <tmp>/proof: hex its sha256, or ""
 * when there is none (the entry is then placed by hashing, and that
 * placement gives it a proof). Quick: a tree written within the clock's
 * last tick even after 20 ms (one-second timestamps) is kept without one,
 * quietly; a failure to make or write one is said.
 */
static void
store_proof(struct cache_store *s, char hex[65])
{
	char tree[4300], path[4300];
	struct err e = {0};
	char *pl = NULL;
	size_t len = 0;
	int rc;

	hex[0] = '\0';
	err_clear(&e);
	if (fs_path_join(tree, sizeof(tree), s->tmp, "tree", &e) < 0 ||
	    fs_path_join(path, sizeof(path), s->tmp, PROOF_FILE, &e) < 0)
		rc = -1;
	else
		rc = proof_make_quick(tree, "io.error", &pl, &len, &e);
	if (rc < 0 || (rc == 0 && cache_proof_put(path, pl, len, hex, &e) < 0)) {
		hex[0] = '\0';
		warnx_line("cache: keeping the extracted tree of %s without its stat proof (%s): its next "
		           "placement hashes every file",
		           s->label, e.msg);
	}
	free(pl);
}

int
cache_tree_store_end(struct cache_store *s)
{
	struct cache_sums *sums = s->w.sum == cache_sums_get ? s->w.sum_arg : NULL;
	char mf[4300], phex[65];
	size_t i;

	for (i = 0; i < s->w.later.n; i++)
		if (later_do(s, sums, (struct later *)s->w.later.p + i) < 0) {
			err_sys(&s->e, "io.error", errno, "%s: %s", ((struct later *)s->w.later.p)[i].rel,
			        strerror(errno));
			return store_close(s, -1);
		}
	/* the tree is whole and final: its proof, so that a placement can
	 * show it unchanged by one stat per entry instead of hashing it */
	store_proof(s, phex);
	if (fs_path_join(mf, sizeof(mf), s->tmp, "manifest", &s->e) < 0 ||
	    cache_manifest_put(mf, s->sk, s->key, phex, s->meta, strlen(s->meta), s->w.lines.p,
	                       s->w.lines.len, &s->e) < 0)
		return store_close(s, -1);
	if (rename(s->tmp, s->dir) != 0 && errno != EEXIST && errno != ENOTEMPTY) {
		err_sys(&s->e, "io.error", errno, "%s: %s", s->dir, strerror(errno));
		return store_close(s, -1);
	}
	return store_close(s, 0);
}

int
cache_tree_store(const char *cache, const char *keyfile, const char *key, int dirfd, const char *meta,
                 const char *label, cache_sum_fn sum, void *sum_arg)
{
	struct cache_store *s;
	int kept;

	s = cache_tree_store_begin(cache, keyfile, key, dirfd, meta, label, sum, sum_arg, &kept);
	return s != NULL ? cache_tree_store_end(s) : kept;
}
