#ifndef ABX_CACHE_H
#define ABX_CACHE_H
/*
 * The content-addressed download cache, for tarball artifacts and npm
 * packages alike. One directory, one layout:
 *
 *   <cache>/<sha256 hex>          a blob: the bytes of a download
 *   <cache>/<alg>-<hex>           an alias for a digest of another
 *                                 algorithm (an npm integrity, sha512):
 *                                 a small file holding the blob's sha256 hex
 *   <cache>/trees/<key>/          an extracted tree: tree/ and manifest
 *   <cache>/.tmp-*                a download or tree being made (a kill
 *                                 leaves only these; they are never read)
 *
 * A blob is written only by cache_put: the digests are computed while the
 * bytes stream in, and the file gets its name (rename) only when they match.
 * A blob is trusted only after cache_get hashed it again with the digest
 * asked for: the alias is a hint, the digest is the proof, so a damaged or
 * replaced entry is a miss (said on stderr, removed where it may be), never
 * an install of unverified bytes.
 *
 * A tree entry is what extracting a verified blob produced, kept so that a
 * new tools directory needs no decompression: tree/ holds the files and
 * manifest lists every entry of it (type, mode, size, sha256 of content,
 * link target, path) under a header naming the key (the artifact's digest
 * and how it was extracted), sealed by an HMAC-SHA256 with the cache's own
 * key (<cache>/trees/.key, 0600, random, made on first use). The seal binds
 * the listing to the artifact's digest: only a process that could read the
 * key, after verifying and extracting that artifact, could have written it,
 * and a cache copied from elsewhere has another key (its trees are then
 * re-extracted). cache_tree_place copies the entry into a fresh directory
 * (a reflink, then the copy read back and hashed; else read, hashed and
 * written in one pass, so the digest is of the bytes written: an in-kernel
 * copy_file_range would need a second read), hashes each copy (the bytes
 * that will be installed, not the cache's) and compares the listing
 * it made with the sealed one; any difference (a file changed, missing or
 * extra, a mode, the manifest itself) discards both the copy and the entry.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/digest.h"
#include "base/err.h"

/* Longest tree key (digest name, hex, variant). */
#define CACHE_KEY_MAX 200

/* The path a blob or alias for d has in cache: <cache>/<hex> for sha256,
 * <cache>/<alg>-<hex> otherwise. Returns 0, or -1 when it does not fit. */
int cache_path(const char *cache, const struct digest *d, char *out, size_t cap);

/*
 * A verified blob for want in cache: 1 with out = <cache>/<sha256 hex>, 0
 * when absent or damaged (a damaged one is said on stderr and unlinked), -1
 * with e when a path does not fit. With mem (not over, its max the most
 * worth keeping), a blob that fits is read into mem once, hashed there, and
 * *in_mem set: mem then holds exactly the verified bytes.
 */
int cache_get(const char *cache, const struct digest *want, struct buf *mem, int *in_mem, char *out,
              size_t cap, struct err *e);

/* The blob's sha256 hex an alias (or a sha256 d itself) names, without
 * hashing: 1, or 0 when the cache has no such name. For SBOM rows and the
 * network probe's "is it cached" guess. */
int cache_sha256_of(const char *cache, const struct digest *d, char hex[DIGEST_HEX_MAX]);

/*
 * Bytes hashed and written on a second thread: the caller's thread (the
 * one reading the connection) only copies them into a bounded ring of
 * chunks (4 x 128 KiB, allocated on the first write); the worker, started
 * once the first chunk is full (a small download costs no thread), hashes
 * each chunk with one or two algorithms and writes it to fd whole. Not
 * shared between threads other than these two.
 */
struct cache_pipe;
/* A pipe into fd hashing with a and b (DIGEST_NONE: only a). NULL when out
 * of memory. */
struct cache_pipe *cache_pipe_new(int fd, enum digest_alg a, enum digest_alg b);
/* Append: 0, or -1 with errno (a write the worker failed, reported on a
 * later call; the bytes after it are neither hashed nor written). */
int cache_pipe_write(struct cache_pipe *p, const void *data, size_t len);
/* Write what is left, wait for the worker, put the digests in a and b (b
 * may be NULL) and free p: 0, or -1 with errno when a write failed. */
int cache_pipe_finish(struct cache_pipe *p, struct digest *a, struct digest *b);
/* Abandon: stop the worker and free p (NULL is fine). */
void cache_pipe_free(struct cache_pipe *p);

/* A download on its way into the cache. */
struct cache_put {
	int fd;
	char tmp[4096];
	struct cache_pipe *pipe; /* hashes (alg, and sha256 beside another) and writes */
	enum digest_alg alg;
	uint64_t bytes;
};

/* Start a download into dir (the cache, or a staging directory): alg is
 * the algorithm of the digest it must match. Returns 0 or -1 (io.error). */
int cache_put_open(struct cache_put *p, const char *dir, enum digest_alg alg, struct err *e);
/* Append bytes (hashed and written through a cache_pipe). Returns 0 or -1
 * (install.failed). */
int cache_put_write(struct cache_put *p, const void *data, size_t len, struct err *e);
/*
 * Finish: *got receives the digest with the put's algorithm and sha256 the
 * blob's sha256. When want is NULL (unpinned) or equal to *got, the file is
 * renamed to <dir>/<sha256 hex> (out), an alias written for a non-sha256
 * want, and 1 is returned. On a mismatch the file is removed and 0
 * returned (the caller names both digests). -1 with e on an I/O error.
 * fsync: sync the blob before it gets its name.
 */
int cache_put_commit(struct cache_put *p, const struct digest *want, int fsync_it, struct digest *got,
                     struct digest *sha256, char *out, size_t cap, struct err *e);
/* Abandon the download (the temporary file is removed). */
void cache_put_abort(struct cache_put *p);

/* ---- extracted trees --------------------------------------------------- */

/* Called for every regular file placed: its path in the placed tree, its
 * fstat once complete, the sha256 of its content. */
typedef void (*cache_file_fn)(void *arg, const char *name, const struct stat *st,
                              const unsigned char sha256[32]);

/* The key of the tree that extracting the artifact with digest d the way
 * variant names (no '/', no space) gives. Returns 0 or -1. */
int cache_tree_key(const struct digest *d, const char *variant, char out[CACHE_KEY_MAX]);

/* Is there an entry named key (not yet checked)? 1 or 0. */
int cache_tree_has(const char *cache, const char *key);

/*
 * Place the tree entry key as parentfd/name (name absent, or an empty
 * directory it replaces): copied into parentfd/.abx-place-* and each copy
 * hashed and compared with the sealed manifest, then renamed to name, so a
 * kill leaves no half tree under name. Returns 1 (placed; meta, if not NULL,
 * receives the header's meta text), 0 when the cache has no sound entry (a
 * damaged one is said on stderr and removed, and nothing is left under
 * parentfd), -1 with e on an I/O error in the destination (nothing left
 * either). label names the tool or package in messages.
 */
int cache_tree_place(const char *cache, const char *key, int parentfd, const char *name, const char *label,
                     cache_file_fn fn, void *arg, char *meta, size_t metacap, uint64_t *files, struct err *e);

/* The sha256 extraction computed for the regular file rel of the tree
 * being kept, when st still describes the file it hashed: 1 (sha256 set),
 * else 0 (the file is then hashed as it is copied). */
typedef int (*cache_sum_fn)(void *arg, const char *rel, const struct stat *st, unsigned char sha256[32]);

/* The digests one extraction computed, for a cache_sum_fn: added as the
 * extractor reports each file (one thread), then looked up (sorted on the
 * first lookup). A record that cannot be stored (memory) is dropped: that
 * file is hashed again. */
struct cache_sums {
	struct cache_sum *v;
	size_t n, cap;
	int sorted;
	struct cache_sum *last; /* the record cache_sums_get found */
	char *copies;           /* extraction's copies (cache_sums_copies), or NULL */
	int copies_fd;
};
void cache_sums_add(struct cache_sums *s, const char *rel, const struct stat *st,
                    const unsigned char sha256[32]);
/*
 * A directory in the cache for the copies an extraction writes of its files
 * (arc_opts.copy_dirfd), removed by cache_sums_free with what is left in it:
 * its fd, or -1 (no copies; the tree is then copied when kept). A record
 * added with the name of its whole copy there (cache_sums_add_copy) is kept
 * by cache_tree_store by renaming that copy into the tree: the bytes the
 * extraction wrote and hashed, with no copy on the install's path.
 */
int cache_sums_copies(struct cache_sums *s, const char *cache);
void cache_sums_add_copy(struct cache_sums *s, const char *rel, const struct stat *st,
                         const unsigned char sha256[32], const char *copy);
/* A cache_sum_fn over a struct cache_sums: the record for rel whose inode,
 * size, mode, mtime and ctime equal st's. */
int cache_sums_get(void *sums, const char *rel, const struct stat *st, unsigned char sha256[32]);
void cache_sums_free(struct cache_sums *s);

/*
 * Keep a copy of the tree at dirfd (just extracted from a verified
 * artifact, not yet run) as entry key, with meta (no space or newline) in
 * its header. A file sum (if not NULL) knows is copied by the kernel and
 * listed with that digest, not read and hashed again (the stat match says
 * it is the file extraction hashed), or, with sum cache_sums_get and the
 * record's copy (cache_sums_add_copy), takes that copy by a rename; any
 * other is hashed as it is copied.
 * Placement hashes every copy against the listing either way. Made in
 * <cache>/.tmp-* and renamed, so it appears whole or not at all. A tree
 * that cannot be kept (no space, a name with a newline, a file type other
 * than file, directory or link) is said on stderr and not kept; the
 * install goes on. Returns 1 kept (the caller says so), 0 not.
 */
int cache_tree_store(const char *cache, const char *key, int dirfd, const char *meta, const char *label,
                     cache_sum_fn sum, void *sum_arg);

#endif
