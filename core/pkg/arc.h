#ifndef ABX_ARC_H
#define ABX_ARC_H
/*
 * Safe archive extraction (the install's extract step): tar, tar.gz/.tgz and zip into a
 * staging directory, refusing anything that could reach outside it.
 *
 * libarchive only reads; the entries are written by our own code with
 * openat()/mkdirat()/symlinkat()/linkat() relative to a directory fd of the
 * staging root, never through a path string and never through a symlink
 * (O_NOFOLLOW on every component). archive_write_disk is not used: it
 * resolves names relative to the process's current directory (chdir is
 * process-wide, wrong in a threaded server) and, even with every SECURE flag,
 * still creates a symlink whose target points outside the tree.
 *
 * The policy, enforced for every entry before anything is created:
 *  - names: no absolute path, no ".." component, no backslash, no empty name;
 *    "." and empty components ("a//b", "./a") are dropped; total length at
 *    most max_path, each component at most ARC_NAME_MAX, at most
 *    ARC_MAX_DEPTH components;
 *  - no entry is created through an earlier symlink (each parent component
 *    is opened O_NOFOLLOW|O_DIRECTORY);
 *  - types: regular files, directories, symlinks and hard links only;
 *    device nodes, FIFOs and sockets refuse the archive (ARC_NPM: dropped);
 *  - symlink targets: not absolute; ".." only as leading components and no
 *    more of them than the link's depth below the root, so the target,
 *    resolved from the link's own directory, stays inside the root even
 *    when later components are themselves (checked) symlinks;
 *  - hard-link targets: a name inside the root (same name rules), already
 *    extracted, and a regular file (never a link to a symlink or directory);
 *    a hard link carrying data (pax allows it) is refused;
 *  - modes: setuid, setgid or sticky on a file refuse the archive (on a
 *    directory they are cleared: they grant nothing there and occur in
 *    tarballs made in shared directories); group/world write
 *    bits are cleared (mode & 0755) — they never reach the disk; with
 *    ARC_STRICT_MODES they refuse the archive instead. Owner read (and
 *    search, for directories) is always added: the engine hashes the tree
 *    as its owner. Owners are never set;
 *    files belong to the extracting user. Directories get their final mode
 *    after all entries are written (so a 0555 directory can be filled);
 *  - duplicates: a second entry for an existing name refuses the archive,
 *    except a directory repeated as a directory (mode updated) and, with
 *    ARC_NPM, a regular file replacing a regular file (as npm does);
 *  - every libarchive warning is fatal;
 *  - caps: total bytes written, entry count, one entry's size (declared and
 *    actual), name length. A decompression bomb stops at the first cap.
 *
 * Nothing is cleaned up on failure: the caller owns the staging directory and
 * removes it (fs_rm_tree). Nothing outside the root is ever created.
 *
 * Errors: install.failed with details {"phase":"extract"} and a message
 * naming the entry and the rule ("entry 'a/../b': '..' component"); the
 * archive's own corruption also gives install.failed; I/O errors on the
 * staging side give install.failed too (with errno text), so the engine sees
 * one code for the extract phase.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <archive.h>

#include "base/err.h"
#include "base/fs.h"

struct digest_ctx;

/*
 * The one set of secure-extraction rules. We do not hand it to
 * archive_write_disk (see above); it names the libarchive semantics our
 * writer implements, and the checks in arc.c test these bits so the policy is
 * stated in one place. Deliberately absent: ARCHIVE_EXTRACT_OWNER (never
 * chown), ARCHIVE_EXTRACT_PERM's setuid handling (setuid/setgid/sticky refuse
 * the archive).
 */
#define ARC_SAFE_FLAGS                                                                                       \
	(ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |                                 \
	 ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_NO_OVERWRITE)

/* Default caps. Node.js (the largest artifact we install) unpacks to about
 * 200 MiB in ~6k entries; the caps leave an order of magnitude of room while
 * keeping a bomb from filling a disk. */
#define ARC_DEFAULT_MAX_TOTAL (2ULL << 30)                     /* 2 GiB written in all */
#define ARC_DEFAULT_MAX_ENTRIES ((uint64_t)FS_MAX_DIR_ENTRIES) /* entries read, incl. skipped */
#define ARC_DEFAULT_MAX_ENTRY (1ULL << 30)                     /* 1 GiB for one file */
#define ARC_DEFAULT_MAX_PATH 4096                              /* PATH_MAX on Linux */
#define ARC_NAME_MAX 255                                       /* NAME_MAX: one component */
/* Components in one name. Every later walk of the tree (digest, proof,
 * removal) stops at FS_MAX_DEPTH (128) levels; npm trees put packages inside
 * packages, so one archive gets half of that. */
#define ARC_MAX_DEPTH 64

/* The file data read before the writing and hashing of the entries move to
 * a second thread (arc_opts.threads): an npm package of a few KiB costs no
 * thread, a large archive decompresses on one core while the other writes
 * and hashes. */
#define ARC_THREAD_MIN (1u << 20)

/* A regular file of at least this size has its writeback started as it is
 * closed (fs_writeback_start; FS_WRITEBACK_EVERY bytes of a large one as it
 * is written): the disk writes it while the rest is extracted. A smaller
 * one is left to the syncfs before the tree is published. */
#define ARC_WRITEBACK_MIN (128u << 10)

/* Progress is reported at most every ARC_PROGRESS_STEP bytes written (and
 * once at the end), so a callback that writes .progress.json stays cheap. */
#define ARC_PROGRESS_STEP (4u << 20)

enum arc_format {
	ARC_FMT_NONE = 0, /* not recognised */
	ARC_FMT_TAR,      /* uncompressed tar (ustar, pax, GNU) */
	ARC_FMT_TAR_GZ,   /* gzip-compressed tar; only zlib, never gzip(1) */
	ARC_FMT_ZIP,      /* zip (stored, deflate) */
};

/* Option flags. */
enum {
	/* npm-style extraction (pacote): strip the first component whatever
	 * its name (in addition to strip_components), drop symlinks, hard
	 * links and special files silently, normalise modes to 0644/0755
	 * (0755 when any exec bit is set; setuid/setgid/sticky dropped), and
	 * let a regular file replace an earlier one with the same name. */
	ARC_NPM = 1 << 0,
	/* Refuse group/world-writable modes instead of clearing those bits. */
	ARC_STRICT_MODES = 1 << 1,
};

/* Called with bytes written so far and compressed bytes read so far. */
typedef void (*arc_progress_fn)(void *ctx, uint64_t bytes_out, uint64_t bytes_in);

struct stat;
/* Called for every regular file written, once it has its final mode and
 * times: its name relative to the root, its fstat, and the sha256 of its
 * content computed while it was written (so a listing of the tree need not
 * read it back). Not called for a sparse entry (its holes were not hashed).
 * Called from the writing thread (see arc_opts.threads), one file at a time,
 * in the archive's order. */
typedef void (*arc_file_fn)(void *ctx, const char *name, const struct stat *st,
                            const unsigned char sha256[32]);

/* Called (from the writing thread) just before on_file for a file whose
 * copy in copy_dirfd is whole: its name, and the copy's name there. */
typedef void (*arc_copy_fn)(void *ctx, const char *name, const char *copy);

struct arc_opts {
	enum arc_format format;
	unsigned flags;           /* ARC_NPM | ARC_STRICT_MODES */
	int strip_components;     /* leading components removed; entries
	                           * with no more than that are skipped */
	uint64_t max_total;       /* 0 = ARC_DEFAULT_MAX_TOTAL */
	uint64_t max_entries;     /* 0 = ARC_DEFAULT_MAX_ENTRIES */
	uint64_t max_entry;       /* 0 = ARC_DEFAULT_MAX_ENTRY */
	size_t max_path;          /* 0 = ARC_DEFAULT_MAX_PATH */
	arc_progress_fn progress; /* NULL = none */
	void *progress_ctx;
	arc_file_fn on_file; /* NULL = none */
	void *file_ctx;
	/* NULL = none. Else every byte of archive_fd from its offset to its
	 * end (the bytes after the archive's end too) is also hashed into tee,
	 * so a caller checks what was extracted against a digest without
	 * reading the file twice (a tar or tar.gz from an fd only). */
	struct digest_ctx *tee;
	/* ARC_THREADS_AUTO (0): the reader (libarchive, decompression) hands
	 * each file's data to a writer (write, sha256, on_file) on a second
	 * thread once ARC_THREAD_MIN bytes were read, through a bounded ring
	 * (about 1 MiB); ARC_THREADS_ONE: all on the calling thread;
	 * ARC_THREADS_TWO: the second thread from the first entry. The rules
	 * and results are the same: the writer writes only what the reader
	 * checked, and a failure on either side fails the archive. */
	int threads;
	/* -1 (arc_opts_init) = none. Else the writer also writes the data of
	 * every file it reports to on_file into a new file of this directory
	 * (mode 0600, named "0", "1", ... in the archive's order), from the
	 * very bytes it writes and hashes, and tells on_copy (file_ctx) of it
	 * before on_file. A copy that cannot be written whole is removed and
	 * the extraction goes on: the copy is a cache's, never the install's. */
	int copy_dirfd;
	arc_copy_fn on_copy;
};

/* Supplies an archive's bytes to arc_extract_read: sets *out to the next
 * ones (valid until the next call) and returns their count; 0 at the end;
 * -1 with errno. Called on the extracting thread only. */
typedef ssize_t (*arc_read_fn)(void *ctx, const void **out);

enum { ARC_THREADS_AUTO = 0, ARC_THREADS_ONE, ARC_THREADS_TWO };

struct arc_stats {
	uint64_t bytes;    /* regular-file bytes written */
	uint64_t entries;  /* entries created (files, dirs, links) */
	uint64_t skipped;  /* entries skipped (strip_components, ARC_NPM drops) */
	uint64_t bytes_in; /* archive bytes read (compressed) */
	/* CPU microseconds: the calling thread's (reading, decompressing,
	 * checking; writing too until a writer thread starts) and the writer
	 * thread's (write, sha256, the cache's copies) */
	int64_t cpu_read_us, cpu_write_us;
};

/* Zero o and set its format; every cap at its default. */
void arc_opts_init(struct arc_opts *o, enum arc_format format);

/* The format a file name or URL implies: ".tar" → TAR, ".tar.gz"/".tgz" →
 * TAR_GZ, ".zip" → ZIP (case-insensitive; a URL's query/fragment ignored);
 * anything else → ARC_FMT_NONE. */
enum arc_format arc_format_from_name(const char *name);

/* The format the first bytes of the file open at fd show (read with
 * pread: its offset stays), or ARC_FMT_NONE. */
enum arc_format arc_format_of_fd(int fd);

/* "tar", "tar.gz", "zip" or "none". Static string. */
const char *arc_format_name(enum arc_format f);

/*
 * Extract the archive read from archive_fd (not closed; a tar is read from
 * the current offset to the end, a zip through its central directory, so
 * only from a regular file: a zip on a pipe is refused) into the directory root_dirfd (not closed;
 * normally an empty staging directory, but it may hold earlier content, e.g. other npm packages, which links
 * may not reach: the root is root_dirfd itself). st (may be NULL) receives the counts, also on failure (what
 * was done before the refusal). Returns 0, or -1 with e set (see above). Thread-safe: no global state, no
 * chdir, no umask change.
 */
int arc_extract_fd(int archive_fd, int root_dirfd, const struct arc_opts *o, struct arc_stats *st,
                   struct err *e);

/* The same for an archive held in memory (buf, len bytes; not copied, must
 * stay valid during the call): a zip is read through its central directory. */
int arc_extract_mem(const void *buf, size_t len, int root_dirfd, const struct arc_opts *o,
                    struct arc_stats *st, struct err *e);

/* The same for an archive whose bytes come from read (a tar or tar.gz, read
 * as a stream; not o->tee): how an archive is extracted while it downloads.
 * An error from read is install.failed ("reading the archive: ..."). */
int arc_extract_read(arc_read_fn read, void *ctx, int root_dirfd, const struct arc_opts *o,
                     struct arc_stats *st, struct err *e);

/* The same with paths: opens archive_path and root_dir (which must exist and
 * be a directory, not a symlink). */
int arc_extract(const char *archive_path, const char *root_dir, const struct arc_opts *o,
                struct arc_stats *st, struct err *e);

#endif
