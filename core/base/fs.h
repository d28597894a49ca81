#ifndef ABX_FS_H
#define ABX_FS_H
/*
 * Filesystem helpers for the install engine: directories, atomic writes,
 * bounded reads, safe tree removal, tree digests, free space, directory
 * safety and the noexec probe.
 *
 * Every function returns 0 on success and -1 with e set (code io.error
 * unless said otherwise; the message names the path and strerror), never
 * exits, never prints. Nothing here changes the current directory or the
 * umask, so all of it is safe in a threaded server.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/err.h"

/* A tree walk refuses to go deeper than this: a hostile tree cannot exhaust
 * file descriptors (one open directory per level) or the stack. Node.js's
 * deepest path is about 15 levels. */
#define FS_MAX_DEPTH 128
/* The one entry cap. An archive extracts at most this many entries
 * (ARC_DEFAULT_MAX_ENTRIES is this number), so no directory of a tree it made
 * holds more; the walks that sort one directory's names in memory for the
 * digests stop at the same number, never below it (they stopped at 65,536 and
 * 100,000, failing trees the extractor had accepted). */
#define FS_MAX_DIR_ENTRIES 200000
/* A digest as lowercase hex, with its NUL. */
#define FS_HEX_LEN 65

/* mkdir -p: create path and its missing parents with mode (umask applies,
 * as for mkdir(2)). An existing directory is fine; an existing non-directory
 * is an error. */
int fs_mkdir_p(const char *path, mode_t mode, struct err *e);

/* Write buf[0..n) to path atomically: a temporary file in the same directory
 * (O_EXCL, mode), write, fsync, rename over path, fsync the directory. A
 * reader sees the old content or the new, never a mix; after a power cut
 * the same holds. On failure the temporary file is removed. */
int fs_write_atomic(const char *path, const void *buf, size_t n, mode_t mode, struct err *e);

/* Write all of buf[0..n) to fd, again after EINTR and a short write: at
 * offset off with pwrite when off >= 0 (the file position untouched), else
 * at the file position. Returns 0, or -1 with errno (EIO when the kernel
 * wrote nothing and gave no error). */
int fs_write_all(int fd, const void *buf, size_t n, int64_t off);

/* Read the whole of path (a regular file, not followed if a symlink: O_NOFOLLOW)
 * into buf of cap bytes and NUL-terminate it. Returns the length, or -1: a
 * file of cap bytes or more is an error (never a truncated read). A missing
 * file gives e->code "not_found" so callers can tell absence from failure. */
ssize_t fs_read_small(const char *path, char *buf, size_t cap, struct err *e);

/* Open an operator-provided input (configuration, policy, commands file,
 * manifests and their lockfiles) for reading: symbolic links are followed
 * (Kubernetes ConfigMap mounts are "..data" symlinks), the open never blocks
 * (O_NONBLOCK: a FIFO is refused, not waited on), and it must be a regular
 * file. Returns the fd with *sb filled, or -1 (not_found, io.error). Inside
 * tool trees use fs_read_small/fs_read_alloc, which never follow. */
int fs_open_input(const char *path, struct stat *sb, struct err *e);
/* The same without following a symbolic link: how a file the server reads
 * from a directory others may write (a cache, a mirror, a key) is opened,
 * so a FIFO or a link put there is refused at once, never waited on. The fd
 * keeps O_NONBLOCK (no effect on a regular file). */
int fs_open_file(const char *path, struct stat *sb, struct err *e);

/* Like fs_read_small into a malloc'd buffer of at most max bytes (+1 for the
 * NUL). On success *out is owned by the caller (free()), *len the length.
 * A file over max is io.error with e->sys EFBIG. */
int fs_read_alloc(const char *path, size_t max, char **out, size_t *len, struct err *e);
/* fs_read_alloc for an operator-provided input: opened as fs_open_input. */
int fs_read_input(const char *path, size_t max, char **out, size_t *len, struct err *e);

/* Remove path and everything under it without following any symlink (a
 * symlink is removed, never its target), using openat/unlinkat relative to
 * directory fds so a concurrent rename cannot redirect it. A missing path is
 * success. Directories without write/search permission for us are chmod'ed
 * u+rwx first (a 0555 directory inside a staged tree must be removable).
 * A tree deeper than FS_MAX_DEPTH is an error (arc never creates one). */
int fs_rm_tree(const char *path, struct err *e);

/* The same for the entry name inside the open directory dirfd. */
int fs_rm_treeat(int dirfd, const char *name, struct err *e);

/* fsync the directory path (so a rename or create in it survives a power cut). */
int fs_fsync_dir(const char *path, struct err *e);

/* syncfs(2) the filesystem holding path: one call that makes a whole staged
 * tree durable before it is renamed into place, cheaper than an fsync per
 * file. */
int fs_syncfs(const char *path, struct err *e);

/*
 * Start the writeback of fd's dirty pages (sync_file_range WRITE: no wait,
 * no disk flush, not durability) when a file is written (FS_WRITEBACK_EVERY
 * bytes of a large one, then its end), so the disk writes what we staged
 * while the rest is staged and the final syncfs before a rename finds
 * little left; the kernel starts none before vm.dirty_background_ratio
 * (gigabytes) or 30 s. Only our own pages: another writer on the same
 * filesystem is neither waited for nor made durable. A hint, so errors are
 * ignored (a pipe, tmpfs, a closed fd) and errno is left as it was.
 */
#define FS_WRITEBACK_EVERY (8u << 20)
void fs_writeback_start(int fd);
/* n more bytes written to fd, *pending counting those since the last
 * start: the writeback is started (and *pending reset) once they reach
 * FS_WRITEBACK_EVERY. 1 when it was, else 0. */
int fs_writeback_every(int fd, uint64_t *pending, uint64_t n);

/* dir, "/" and name into buf (cap bytes): the one way a path is joined,
 * so a cut path is an error, never a different file. 0, or -1 when it
 * does not fit (buf then ""), with e (may be NULL) io.error naming both.
 * dir may be buf itself (a path joined onto in place). */
int fs_path_join(char *buf, size_t cap, const char *dir, const char *name, struct err *e);

/* The directory part of path into buf (cap bytes), "." if none. Returns 0,
 * or -1 when it does not fit. */
int fs_dirname(const char *path, char *buf, size_t cap);

/*
 * The one tree walk (the listing, the proof list, the tree cache's copies,
 * removal): every entry under the directory rootfd (itself excluded), depth
 * first, each directory's names sorted bytewise, a directory's own entry
 * before its entries and, with FS_WALK_POST, visited again after them (as
 * toybox's dirtree calls again with DIRTREE_COMEAGAIN: a mode set once a
 * directory is filled, a directory removed once emptied).
 *
 * A directory is opened (openat, O_NOFOLLOW) before its first visit and
 * its st is the fstat of that descriptor, the one its entries are then read
 * through: what the visitor checks is what the walk enters. Any other
 * entry's st is its lstat, never followed.
 *
 * visit(arg, ent, e) returns 0 to go on, FS_WALK_SKIP (from a directory's
 * first visit) not to enter it, or -1 with e set to stop the walk. fs_walk
 * returns 0, or -1 with e: the visitor's error, io.error naming what could
 * not be read, or limit_code for a directory deeper than FS_MAX_DEPTH, one
 * of more than FS_MAX_DIR_ENTRIES names, or a path of PATH_MAX. Recursion
 * costs about 200 bytes of stack per level; the path lives on the heap.
 */
struct fs_ent {
	int dfd;          /* the directory holding the entry */
	const char *name; /* its name in dfd */
	const char *rel;  /* its path below the root ("a/b") */
	struct stat st;
	int fd;    /* a directory's descriptor (valid in both visits), else -1 */
	int depth; /* 1 for the root's own entries */
	int post;  /* 1 in the visit after a directory's entries */
	/* A descriptor of the visitor's for a directory (a copy's
	 * destination), set in its first visit: its entries see it as
	 * parent->aux; fs_walk closes it when the directory is done, however
	 * the walk ends. -1 until set. */
	int aux;
	/* The directory holding it, NULL for the root's entries; its rel is
	 * not its own (one path buffer: it reads as the entry's). */
	const struct fs_ent *parent;
};
typedef int (*fs_visit_fn)(void *arg, struct fs_ent *ent, struct err *e);

#define FS_WALK_POST 1 /* visit each directory again after its entries */
/* The walk of a removal: a directory we may not read, search or write is
 * made u+rwx first (through its descriptor, or one of O_PATH), and an
 * entry gone before it is reached is passed over. */
#define FS_WALK_REMOVE 2
/* Entries other than directories are not stat'ed where readdir tells
 * their type (toybox's DIRTREE_STATLESS): st holds only that type. */
#define FS_WALK_STATLESS 4
#define FS_WALK_SKIP 1 /* a visitor's answer: do not enter this directory */

int fs_walk(int rootfd, int flags, const char *limit_code, fs_visit_fn visit, void *arg, struct err *e);

/* The names in the open directory dfd ("." and ".." left out), sorted
 * bytewise, read through a new descriptor from its start: *names (n
 * pointers, then the strings, in one block the caller free()s; the byte
 * before each name is its dirent d_type). dfd AT_FDCWD: the directory is
 * the path display. 0, or -1 with e: limit_code for more than
 * FS_MAX_DIR_ENTRIES, io.error naming display (e->sys its errno), internal
 * (memory). The one reader of a directory's entries, with fs_walk. */
int fs_dir_names(int dfd, const char *display, const char *limit_code, char ***names, size_t *n,
                 struct err *e);

/* What name in dirfd (AT_FDCWD: a path) takes on the disk, itself and
 * everything below it: *bytes the blocks allocated (st_blocks x 512, as du
 * counts them; a file with several names counted at each), *files the
 * entries. A missing name is 0 and 0. 0, or -1 with e (io.error). */
int fs_du(int dirfd, const char *name, uint64_t *bytes, uint64_t *files, struct err *e);

/* Bytes available to an unprivileged user on the filesystem holding path
 * (statvfs f_bavail × f_frsize) into *out. */
int fs_free_bytes(const char *path, uint64_t *out, struct err *e);

/*
 * Mark dir a "top directory" (chattr +T): ext2/3/4 then place each
 * directory created in it as they place top-level ones (Orlov: in a block
 * group with room and few directories) instead of beside its parent, so
 * what is made under it takes its inodes from a quiet part of the disk
 * (a file goes to its directory's group). It matters on ext4 without a
 * journal: there a new inode skips every inode of its group deleted in the
 * last minutes (recently_deleted() in Linux's ext4 inode allocator), and where other work has just
 * deleted thousands of files each new file cost up to a millisecond more.
 * Best effort: other filesystems refuse the ioctl and nothing changes.
 */
void fs_mark_topdir(const char *dir);

/* A state or tools directory is safe when it is a directory (a symlink to
 * one is followed), owned by us (euid) or root, and not group- or
 * world-writable. Unsafe → -1 with config.state_dir_unsafe naming the path,
 * its owner and mode; missing → not_found; other failures → io.error. */
int fs_dir_safe(const char *path, struct err *e);

/*
 * Open the directory path (absolute) that a process writes secrets and
 * records in, even when it runs as root under a tree another user owns
 * (serve --base-dir /home/user): each component is opened relative to its
 * parent with O_NOFOLLOW, except under a parent that only we (euid) or root
 * can write, where a symbolic link was made by one of them and is followed.
 * With create, a missing component is made with mkdirat (mode 0700). The
 * directory itself must be owned by euid and not group- or world-writable.
 * Returns an O_DIRECTORY|O_CLOEXEC descriptor the caller closes, or -1 with
 * config.state_dir_unsafe (a link another user could have made, another
 * owner, a writable mode: the message says which), not_found (missing,
 * without create) or io.error.
 */
int fs_dir_open_safe(const char *path, int create, struct err *e);

/* Open (with create, make: mode 0700) the directory name under dirfd
 * without following a link; it must be owned by euid and not group- or
 * world-writable. display names it in errors. Returns a descriptor or -1
 * with e as fs_dir_open_safe. */
int fs_subdir_open_safe(int dirfd, const char *name, int create, const char *display, struct err *e);

/* fs_write_atomic relative to dirfd: name.tmp.<random> is written (no
 * link followed) and renamed to name within dirfd. display names it in
 * errors. */
int fs_write_atomic_at(int dirfd, const char *name, const void *buf, size_t n, mode_t mode,
                       const char *display, struct err *e);

/*
 * Can files in dir be executed? Writes a one-byte file (mode 0700) there and
 * execve()s it in a spawned child: a filesystem that allows exec answers
 * ENOEXEC (not a valid executable; no shell, no ELF needed, so it works on
 * scratch images), a noexec mount answers EACCES. The file is removed.
 * Returns 0 when exec is allowed; -1 with install.noexec naming the mount
 * point (from /proc/self/mountinfo) when not; -1 with io.error when the file
 * cannot be written (read-only directory: the caller tries the next one).
 */
int fs_noexec_probe(const char *dir, struct err *e);

/* The mount point of the filesystem holding path, from /proc/self/mountinfo
 * (the longest mount point that is a prefix of path's real path and has the
 * same device). Returns 0, or -1 when it cannot be told (buf = path). */
int fs_mount_point(const char *path, char *buf, size_t cap);

/* nbytes (at most 16) random bytes as 2*nbytes lower-case hex digits and a
 * NUL into out: names of staging directories, job and session ids. Without
 * getrandom they are not secret, only distinct (pid, clock and a counter). */
void fs_rand_hex(char *out, int nbytes);

#endif
