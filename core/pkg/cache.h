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
 *   <cache>/trees/<key>/          an extracted tree: tree/, manifest, proof
 *   <cache>/.tmp-*                a download or tree being made (a kill
 *                                 leaves only these; they are never read)
 *
 * and, outside it, the key that seals its trees (CACHE_KEY_FILE in the
 * state directory of the user on this machine).
 *
 * A blob is written only by cache_put: the digests are computed while the
 * bytes stream in, and the file gets its name (rename) only when they match.
 * A blob is trusted only after cache_get hashed it again with the digest
 * asked for: the alias is a hint, the digest is the proof, so a damaged or
 * replaced entry is a miss (said on stderr, removed where it may be; an
 * alias naming another artifact's sound blob loses only the alias), never
 * an install of unverified bytes. The bytes are then read through the
 * descriptor they were hashed through (cache_get and cache_put_commit hand
 * it over), never by name: whoever can rename in the cache or a mirror
 * directory cannot swap a file between the hash and the read, and the
 * extractor hashes what it reads once more and refuses a mismatch (the
 * file's owner could write it in between). Every blob, alias and key file
 * is opened O_NOFOLLOW|O_NONBLOCK and refused unless a regular file
 * (cache.unsafe_entry: a FIFO there never hangs an install); in the
 * server's own cache, unless also the server user's.
 *
 * A tree entry is what extracting a verified blob produced, kept so that a
 * new tools directory needs no decompression: tree/ holds the files and
 * manifest lists every entry of it (type, mode, size, sha256 of content,
 * link target, path) under a header naming the key (the artifact's digest
 * and how it was extracted), sealed by an HMAC-SHA256 with the key of the
 * user on this machine (CACHE_KEY_FILE in the state directory: 0600,
 * random, made on first use, opened O_NOFOLLOW, refused unless a regular
 * file of that user's that nobody else can read). The key never lives in
 * the cache: a cache copied with cp -a, restored by CI or baked into an
 * image carries its trees but not their key, so each fails its seal and is
 * extracted again from the blob, verified against the pin (a key an
 * earlier version left in trees/.key is never read, and is removed). An
 * image built with its state directory shares that key with every
 * container run from it: they share the cache the key sealed, too.
 *
 * cache_tree_place opens the entry's tree once and reads it only through
 * that descriptor and those opened under it (openat), never by path, and
 * refuses an entry with anything not owned by this user. It copies the
 * tree into a fresh directory and compares the listing it made with the
 * sealed one; any difference (a file changed, missing or extra, a mode,
 * the manifest itself) discards both the copy and the entry. Each entry
 * holds a stat proof (base/proof.h) of its tree. A file whose descriptor's
 * fstat is what the proof records (inode, mode, size, mtime, ctime) is the
 * one the listing's digest is of, except under a writable shared mapping
 * whose page is dirty already (its writes move no ctime): so it is copied
 * in the kernel (copy_file_range: a reflink where blocks can be shared)
 * and takes the sealed digest, unread, only under a read lease (granted
 * only while nobody has the file open for writing, a mapping included;
 * broken by any open for writing meanwhile) held to the end of its copy,
 * with its fstat unchanged then. Any other file (no proof, a mismatch, no
 * lease: leases off, unsupported, not permitted) is hashed as it is copied
 * (a reflink read back, else read, hashed and written in one pass, so the
 * digest is of the bytes written). A placement that hashed makes a proof
 * through the same descriptor first and seals it into the entry only if
 * every descriptor copied from matched it under its lease. The trust is the
 * install fast path's: any change through the filesystem moves a ctime or
 * breaks a lease and is seen; bit rot under an unchanged inode is not.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/digest.h"
#include "base/err.h"

/* The sealing key's file in the state directory (cache.h's header): one
 * per user and machine, never inside a cache. */
#define CACHE_KEY_FILE "tree-cache.key"

/* Longest tree key (digest name, hex, variant). */
#define CACHE_KEY_MAX 200

/* The path a blob or alias for d has in cache: <cache>/<hex> for sha256,
 * <cache>/<alg>-<hex> otherwise. Returns 0, or -1 when it does not fit. */
int cache_path(const char *cache, const struct digest *d, char *out, size_t cap);

/*
 * A verified blob for want in cache: 1 with out = <cache>/<sha256 hex> and,
 * with fdp, *fdp the descriptor it was hashed through (at offset 0; the
 * caller closes it and reads the blob through it, never by out: a name can
 * be renamed over after the hash). 0 when absent or damaged (a damaged one
 * is said on stderr and unlinked; through an alias naming a blob sound for
 * its own digest, only the alias is). -1 with e: a path does not fit, or
 * (cache.unsafe_entry) the blob or alias is not a regular file or, with own
 * (the server's own cache, not a mirror directory), not the server user's.
 * With mem (not over, its max the most worth keeping), a blob that fits is
 * read into mem once, hashed there, and *in_mem set: mem then holds exactly
 * the verified bytes.
 */
int cache_get(const char *cache, int own, const struct digest *want, struct buf *mem, int *in_mem, int *fdp,
              char *out, size_t cap, struct err *e);

/* cache_get in each of the n caches ro (caches read, never written: an
 * image's layer we may not write, a directory mirror), then in cache; the
 * first hit answers. */
int cache_get_any(const char *const *ro, size_t n, const char *cache, const struct digest *want,
                  struct buf *mem, int *in_mem, int *fdp, char *out, size_t cap, struct err *e);

/* The blob's sha256 hex an alias (or a sha256 d itself) names, without
 * hashing: 1, or 0 when the cache has no such name. For SBOM rows and the
 * network probe's "is it cached" guess. */
int cache_sha256_of(const char *cache, const struct digest *d, char hex[DIGEST_HEX_MAX]);

/*
 * Bytes hashed and written beside the caller's thread: the caller (the
 * thread reading the connection) only copies them into a bounded ring of
 * chunks (4 x 256 KiB, allocated on the first write); once the first chunk
 * is full (a small download costs no thread) each digest (one or two
 * algorithms) and the write to fd get a thread of their own, so they run
 * side by side and the slowest sets the pace. The writer starts the
 * writeback of fd's dirty pages every 8 MiB and cache_pipe_finish that of
 * the tail (fs_writeback_start, no wait), so an fsync or syncfs after it
 * has little left to wait for. Not shared
 * between threads other than these.
 */
struct cache_pipe;
/* A pipe into fd hashing with a and b (DIGEST_NONE: only a); fd -1: hashing
 * only (for a follower), nothing written. NULL when out of memory. */
struct cache_pipe *cache_pipe_new(int fd, enum digest_alg a, enum digest_alg b);
/* Append: 0, or -1 with errno (a write the worker failed, reported on a
 * later call; the bytes after it are neither hashed nor written). */
int cache_pipe_write(struct cache_pipe *p, const void *data, size_t len);
/* Write what is left, wait for the worker, put the digests in a and b (b
 * may be NULL) and free p: 0, or -1 with errno when a write failed. */
int cache_pipe_finish(struct cache_pipe *p, struct digest *a, struct digest *b);
/* The same, adding to cpu the CPU microseconds the digest threads and the
 * write thread used (the last partial chunk is the caller's). */
struct cache_pipe_cpu {
	int64_t digest_us, write_us;
};
int cache_pipe_finish_cpu(struct cache_pipe *p, struct digest *a, struct digest *b,
                          struct cache_pipe_cpu *cpu);
/* Abandon: stop the worker and free p (NULL is fine). */
void cache_pipe_free(struct cache_pipe *p);
/* Hold (1) or let go (0) of the pool of rings: while one caller holds it,
 * a finished pipe's ring is kept (at most 8) for the next pipe instead of
 * freed; the last to let go frees them. For a caller making many small
 * downloads at once (npm_install). */
void cache_pipe_pool(int hold);
/*
 * Extract while downloading: a follower (another thread, at most one, set
 * before the first write) reads every chunk in the ring once it is handed
 * over, the same memory the worker hashes, so what it reads is what the
 * digest covers. The writer waits for it as for the worker (the ring grows
 * to 8 chunks, 2 MiB: memory stays bounded and the connection is read at
 * the follower's pace when it is slower). p stays valid for the follower
 * after cache_pipe_finish or cache_pipe_free until it lets go. 0, or -1
 * (EINVAL: already following or written to).
 */
int cache_pipe_follow(struct cache_pipe *p);
/* The follower's next bytes: *out points to them (valid until the next
 * call), their count returned; 0 once cache_pipe_finish handed over the
 * last byte; -1 with errno ECANCELED when the pipe was abandoned (or its
 * writes failed). Waits (a condition variable) for the writer. */
ssize_t cache_pipe_next(struct cache_pipe *p, const void **out);
/* The follower reads no more (at the end or not): the writer stops waiting
 * for it, and p is freed if its owner let go already. */
void cache_pipe_unfollow(struct cache_pipe *p);

/* A download on its way into the cache. */
struct cache_put {
	int fd;
	char tmp[4096];
	struct cache_pipe *pipe; /* hashes (alg, and sha256 beside another) and writes */
	enum digest_alg alg;
	uint64_t bytes;
	struct cache_pipe_cpu cpu; /* set by cache_put_commit */
};

/* Start a download into dir (the cache, or a staging directory): alg is
 * the algorithm of the digest it must match. Returns 0 or -1 (io.error).
 * dir NULL: the bytes are hashed (and handed to a follower) but no file is
 * written; the commit then names no blob (out "", *fdp -1), for a caller
 * that extracts while downloading and keeps nothing. */
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
 * fsync: sync the blob before it gets its name. fdp (may be NULL): the
 * descriptor the hashed bytes were written to, for the caller to read
 * them through (lseek to 0 first) and close. A put opened without a dir
 * answers the same with no blob: out "" and *fdp -1.
 */
int cache_put_commit(struct cache_put *p, const struct digest *want, int fsync_it, struct digest *got,
                     struct digest *sha256, int *fdp, char *out, size_t cap, struct err *e);
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
 * directory it replaces): copied into parentfd/.abx-place-* (the files by
 * this thread and one helper; fn is called on this one, in listing order,
 * once all are copied) and each copy hashed, or the entry's proof held,
 * and compared with the sealed manifest, then renamed to name, so a kill
 * leaves no half tree under name; *out (if not NULL) says how.
 * Returns 1 (placed; meta, if not NULL, receives the header's meta text), 0
 * when the cache has no sound entry (a damaged one is said on stderr and
 * removed, and nothing is left under parentfd), -1 with e on an I/O error
 * in the destination (nothing left either). label names the tool or
 * package in messages.
 */
struct cache_placed {
	uint64_t files; /* regular files placed */
	int proved;     /* the entry's proof showed it unchanged: copied, not hashed */
	int resealed;   /* hashed, and the entry sealed with a new proof for next time */
};
int cache_tree_place(const char *cache, const char *keyfile, const char *key, int parentfd, const char *name,
                     const char *label, cache_file_fn fn, void *arg, char *meta, size_t metacap,
                     struct cache_placed *out, struct err *e);

#ifdef ABX_TEST
/* Tests: called with the entry's directory once its tree was opened, before
 * its proof is checked (a test renames entries there). */
extern void (*cache_test_place_fn)(const char *entry);
#endif

/* The sha256 extraction computed for the regular file rel of the tree
 * being kept, when st still describes the file it hashed: 1 (sha256 set),
 * else 0 (the file is then hashed as it is copied). */
typedef int (*cache_sum_fn)(void *arg, const char *rel, const struct stat *st, unsigned char sha256[32]);

/* The digests one extraction computed, for a cache_sum_fn: added as the
 * extractor reports each file (one thread), then looked up (sorted on the
 * first lookup). A record that cannot be stored (memory, or past
 * CACHE_SUMS_MAX) is dropped: that file is hashed again. Zero-filled is
 * empty. */
/* A ceiling, not a limit on trees: past it a file's digest is computed
 * again as it is kept, never wrong. A million records is five archives at
 * arc's entry ceiling (ARC_DEFAULT_MAX_ENTRIES) in one tree. */
#define CACHE_SUMS_MAX 1000000
struct cache_sums {
	struct vec v; /* struct cache_sum, set up by the first add */
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
int cache_tree_store(const char *cache, const char *keyfile, const char *key, int dirfd, const char *meta,
                     const char *label, cache_sum_fn sum, void *sum_arg);
/*
 * cache_tree_store in two steps, for a tree that is to run in between:
 * _begin reads the tree at dirfd (its walk and listing, its directories and
 * links made, any file copied) and nothing of it is read after; _end moves
 * extraction's copies in (sum_arg, cache_sums_get's, must live until
 * then), gives the directories their modes and names the entry, and
 * answers as cache_tree_store does. _begin returns NULL when there is no
 * end to call, with *kept the answer (1: kept already).
 */
struct cache_store;
struct cache_store *cache_tree_store_begin(const char *cache, const char *keyfile, const char *key, int dirfd,
                                           const char *meta, const char *label, cache_sum_fn sum,
                                           void *sum_arg, int *kept);
int cache_tree_store_end(struct cache_store *s);

/*
 * Sealed notes: a small text (no NUL) the cache vouches for, as
 * <cache>/trees/<name> under a header naming it and sealed with the trees'
 * key, so a note edited, renamed from another name or copied from another
 * cache reads as bad. name: a file name (no '/', space or newline, not
 * hidden). cache_note_put writes it whole (a temporary file renamed):
 * 1 written, 0 not (no key, no room: nothing to say, the note is an
 * optimisation). cache_note_get: 1 with body (cap bytes, NUL-terminated),
 * 0 when there is none, -1 with why when it is there but not sound (the
 * caller says so; a put replaces it).
 */
#define CACHE_NOTE_MAX (16u << 10)
int cache_note_put(const char *cache, const char *keyfile, const char *name, const char *body, size_t len);
int cache_note_get(const char *cache, const char *keyfile, const char *name, char *body, size_t cap,
                   const char **why);

#endif
