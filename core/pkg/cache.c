/*
 * The content-addressed download cache: blobs, aliases and extracted trees
 * (the layout and the rules are in cache.h).
 */
#include "pkg/cache.h"

#include "base/fs.h"

#include <bearssl_hmac.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* One read of a blob being hashed. */
#define COPY_BUF (128u << 10)

int
cache_path(const char *cache, const struct digest *d, char *out, size_t cap)
{
	char hex[DIGEST_HEX_MAX], name[DIGEST_HEX_MAX + 16];

	digest_hex(d, hex);
	if (d->alg == DIGEST_SHA256)
		return fs_path_join(out, cap, cache, hex, NULL);
	if ((size_t)snprintf(name, sizeof(name), "%s-%s", digest_name(d->alg), hex) >= sizeof(name))
		return -1;
	return fs_path_join(out, cap, cache, name, NULL);
}

/* Open a blob or alias of cache: a regular file (never a link, never
 * waited on as a FIFO would be) and, with own (the server's own cache, not
 * a mirror), the server user's. The fd with *st, -1 when it is absent
 * (nothing set), -2 with e (cache.unsafe_entry naming it) when it is there
 * and not to be read. */
static int
entry_open(const char *path, int own, struct stat *st, struct err *e)
{
	struct err oe = {0};
	int fd;

	err_clear(&oe);
	if ((fd = fs_open_file(path, st, &oe)) < 0) {
		if (oe.code != NULL && strcmp(oe.code, "not_found") == 0)
			return -1;
		err_set(e, "cache.unsafe_entry", "%s", oe.msg);
		return -2;
	}
	/* another user's entry in our cache: whoever put it there could
	 * hold it open for writing, so it is refused, not hashed and used */
	if (own && st->st_uid != geteuid()) {
		close(fd);
		err_set(e, "cache.unsafe_entry", "%s is owned by uid %u, not by this user (uid %u)", path,
		        (unsigned)st->st_uid, (unsigned)geteuid());
		return -2;
	}
	return fd;
}

/* The 64 hex digits an alias at path names: 1, 0 when absent or not an
 * alias, -1 with e when it is not to be read (entry_open). */
static int
alias_read(const char *path, int own, char hex[DIGEST_HEX_MAX], struct err *e)
{
	struct stat st;
	ssize_t n;
	int fd = entry_open(path, own, &st, e);

	if (fd < 0)
		return fd == -1 ? 0 : -1;
	n = read(fd, hex, 64);
	close(fd);
	if (n != 64)
		return 0;
	hex[64] = '\0';
	return strspn(hex, "0123456789abcdef") == 64;
}

int
cache_sha256_of(const char *cache, const struct digest *d, char hex[DIGEST_HEX_MAX])
{
	char p[4096];
	struct err e = {0};

	if (d->alg == DIGEST_SHA256) {
		digest_hex(d, hex);
		return cache_path(cache, d, p, sizeof(p)) == 0 && access(p, R_OK) == 0;
	}
	if (cache_path(cache, d, p, sizeof(p)) != 0)
		return 0;
	return alias_read(p, 0, hex, &e) == 1;
}

/* Hash fd from offset 0 with want's algorithm (pread: the offset stays
 * where it is): 1 when it matches. With mem, the bytes are kept there when
 * they fit (*in_mem set). */
static int
fd_matches(int fd, const struct digest *want, struct buf *mem, int *in_mem)
{
	struct digest_ctx c;
	struct digest got;
	unsigned char *b;
	off_t off = 0;
	ssize_t r;

	if ((b = malloc(COPY_BUF)) == NULL)
		return 0;
	if (mem != NULL)
		buf_reset(mem);
	digest_init(&c, want->alg);
	while ((r = pread(fd, b, COPY_BUF, off)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		digest_update(&c, b, (size_t)r);
		if (mem != NULL)
			buf_put(mem, b, (size_t)r);
		off += r;
	}
	free(b);
	if (r < 0)
		return 0;
	digest_final(&c, &got);
	if (mem != NULL && !mem->over && in_mem != NULL)
		*in_mem = 1;
	return digest_equal(want, &got);
}

/* Does the blob open at fd hold the bytes its name (hex) says? */
static int
blob_sound(int fd, const char *hex)
{
	struct digest d;
	struct err e = {0};

	return digest_parse_hex(DIGEST_SHA256, hex, &d, "internal", &e) == 0 &&
	       fd_matches(fd, &d, NULL, NULL);
}

int
cache_get(const char *cache, int own, const struct digest *want, struct buf *mem, int *in_mem, int *fdp,
          char *out, size_t cap, struct err *e)
{
	char hex[DIGEST_HEX_MAX], w[DIGEST_SRI_MAX], alias[4096];
	struct stat st;
	int fd, rc;

	if (in_mem != NULL)
		*in_mem = 0;
	if (fdp != NULL)
		*fdp = -1;
	alias[0] = '\0';
	if (want->alg == DIGEST_SHA256) {
		digest_hex(want, hex);
	} else {
		if (cache_path(cache, want, alias, sizeof(alias)) != 0)
			return err_set(e, "io.error", "cache path too long: %s", cache);
		if ((rc = alias_read(alias, own, hex, e)) <= 0)
			return rc;
	}
	if (fs_path_join(out, cap, cache, hex, NULL) != 0)
		return err_set(e, "io.error", "cache path too long: %s", cache);
	if ((fd = entry_open(out, own, &st, e)) < 0)
		return fd == -1 ? 0 : -1;
	if (fd_matches(fd, want, mem, in_mem)) {
		/* the caller reads the bytes hashed through this very fd: a
		 * name renamed over meanwhile changes nothing */
		if (fdp != NULL)
			*fdp = fd;
		else
			close(fd);
		return 1;
	}
	if (in_mem != NULL)
		*in_mem = 0;
	/* through an alias: the blob may be sound for its own digest (an
	 * alias naming another artifact's blob), and is then kept; only the
	 * alias, a hint, goes */
	if (alias[0] != '\0' && blob_sound(fd, hex)) {
		close(fd);
		warnx_line("cache: the alias %s names %s, which does not match %s: alias %s, blob kept",
		           alias, out, digest_sri(want, w), unlink(alias) == 0 ? "removed" : "left in place");
		return 0;
	}
	close(fd);
	/* never trusted; removed where we may (a mirror directory may be
	 * read-only), and the alias with it */
	warnx_line("cache: %s does not match %s: damaged, not used, %s", out, digest_sri(want, w),
	           unlink(out) == 0 ? "removed" : "left in place (not writable)");
	if (alias[0] != '\0')
		unlink(alias);
	return 0;
}

int
cache_get_any(const char *const *ro, size_t n, const char *cache, const struct digest *want, struct buf *mem,
              int *in_mem, int *fdp, char *out, size_t cap, struct err *e)
{
	size_t i;
	int rc;

	for (i = 0; i < n; i++)
		if ((rc = cache_get(ro[i], 0, want, mem, in_mem, fdp, out, cap, e)) != 0)
			return rc;
	return cache_get(cache, 1, want, mem, in_mem, fdp, out, cap, e);
}

/* ---- downloads ------------------------------------------------------------ */

int
cache_put_open(struct cache_put *p, const char *dir, enum digest_alg alg, struct err *e)
{
	char rnd[17];

	memset(p, 0, sizeof(*p));
	p->fd = -1;
	p->alg = alg;
	if (dir == NULL) {
		snprintf(p->tmp, sizeof(p->tmp), "(not written)");
		goto pipe;
	}
	fs_rand_hex(rnd, 8);
	if ((size_t)snprintf(p->tmp, sizeof(p->tmp), "%s/.tmp-%s", dir, rnd) >= sizeof(p->tmp)) {
		p->fd = -1;
		return err_set(e, "io.error", "path too long: %s", dir);
	}
	p->fd = open(p->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (p->fd < 0)
		return err_sys(e, "io.error", errno, "%s: %s", p->tmp, strerror(errno));
	/* held while the download lives: a partial one whose writer died
	 * (Ctrl-C, kill) is lockable, and the next install removes it */
	(void)flock(p->fd, LOCK_EX | LOCK_NB);
pipe:
	p->pipe = cache_pipe_new(p->fd, alg, alg == DIGEST_SHA256 ? DIGEST_NONE : DIGEST_SHA256);
	if (p->pipe == NULL) {
		cache_put_abort(p);
		return err_set(e, "internal", "out of memory");
	}
	return 0;
}

int
cache_put_write(struct cache_put *p, const void *data, size_t len, struct err *e)
{
	if (cache_pipe_write(p->pipe, data, len) < 0)
		return err_sys(e, "install.failed", errno, "writing the download %s: %s", p->tmp,
		               strerror(errno));
	p->bytes += len;
	return 0;
}

void
cache_put_abort(struct cache_put *p)
{
	cache_pipe_free(p->pipe);
	p->pipe = NULL;
	if (p->fd >= 0) {
		close(p->fd);
		unlink(p->tmp);
	}
	p->fd = -1;
}

/* The alias <dir>/<alg>-<hex> -> sha256 hex, written atomically (no fsync:
 * an alias is a hint; the blob it names is re-hashed on every use). */
static void
write_alias(const char *dir, const struct digest *d, const char *hex)
{
	char path[4096], tmp[4200], rnd[17], leaf[24];
	int fd, ok;

	fs_rand_hex(rnd, 8);
	snprintf(leaf, sizeof(leaf), ".tmp-%s", rnd);
	if (cache_path(dir, d, path, sizeof(path)) != 0 ||
	    fs_path_join(tmp, sizeof(tmp), dir, leaf, NULL) < 0)
		return;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	ok = write(fd, hex, 64) == 64 && write(fd, "\n", 1) == 1;
	if (close(fd) != 0 || !ok || rename(tmp, path) != 0)
		unlink(tmp);
}

int
cache_put_commit(struct cache_put *p, const struct digest *want, int fsync_it, struct digest *got,
                 struct digest *sha256, int *fdp, char *out, size_t cap, struct err *e)
{
	char hex[DIGEST_HEX_MAX], dir[4096];
	char *slash;
	int wr = cache_pipe_finish_cpu(p->pipe, got, sha256, &p->cpu);

	p->pipe = NULL;
	if (fdp != NULL)
		*fdp = -1;
	if (wr < 0) {
		int er = errno;
		cache_put_abort(p);
		return err_sys(e, "install.failed", er, "writing the download %s: %s", p->tmp, strerror(er));
	}
	if (p->alg == DIGEST_SHA256)
		*sha256 = *got;
	if (want != NULL && !digest_equal(want, got)) {
		cache_put_abort(p);
		return 0;
	}
	if (p->fd < 0) { /* hashed only: no blob */
		if (cap > 0)
			out[0] = '\0';
		return 1;
	}
	if (fsync_it && fsync(p->fd) != 0) {
		int er = errno;
		cache_put_abort(p);
		return err_sys(e, "io.error", er, "%s: %s", p->tmp, strerror(er));
	}
	snprintf(dir, sizeof(dir), "%s", p->tmp);
	if ((slash = strrchr(dir, '/')) != NULL)
		*slash = '\0';
	digest_hex(sha256, hex);
	if (fs_path_join(out, cap, dir, hex, e) != 0) {
		cache_put_abort(p);
		return -1;
	}
	if (rename(p->tmp, out) != 0) {
		int er = errno;
		cache_put_abort(p);
		return err_sys(e, "io.error", er, "%s: %s", out, strerror(er));
	}
	/* the caller reads the bytes just hashed through the fd they were
	 * written to, never the name (renamed over by anyone who can write
	 * the directory) */
	if (fdp != NULL)
		*fdp = p->fd;
	else if (close(p->fd) != 0) {
		p->fd = -1;
		return err_sys(e, "io.error", errno, "%s: %s", out, strerror(errno));
	}
	p->fd = -1;
	/* the alias after the blob: a reader never finds an alias naming a
	 * half-written file */
	if (p->alg != DIGEST_SHA256)
		write_alias(dir, got, hex);
	return 1;
}
