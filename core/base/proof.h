#ifndef ABX_PROOF_H
#define ABX_PROOF_H
/*
 * The proof list (proof.c): every entry of the tree under a root with its
 * inode, mode, size, ctime and mtime, so that a later check with one stat
 * per entry (no directory listed: a directory whose ctime is unchanged
 * holds the same names) proves the tree unchanged since it was made. The
 * install fast path keeps one per installed tree (<name>/.installed.proof,
 * bound to the marker by its sha256), the tree cache one per kept tree
 * (bound to the sealed manifest). The check runs on two threads when the
 * tree is large and two CPUs are online.
 *
 * proof_make walks root into *out (malloc'd, the caller frees) of *outlen
 * bytes; it may wait up to 2.5 s for the filesystem clock to pass the
 * newest timestamp it records. Returns 0 or -1 (e set; code is the caller's
 * for a tree too large or a walk that fails, io.error for root itself).
 * proof_make_quick waits at most 20 ms: 1 (no proof, no error) when
 * something in the tree changed within the clock's last tick by then (a
 * tree made just now on a filesystem with coarse timestamps).
 * proof_check answers 1 when every recorded entry stats the same (st_dev
 * equal to the root's), 0 when anything differs, buf is not a proof list,
 * or root cannot be read. buf must be 8-byte aligned (malloc'd).
 * proof_parse returns the entry count of a well-formed list or -1.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"

/* Entries and bytes of a proof list: 48 bytes per entry plus its path; a
 * Node.js tree is ~3300 entries (~250 KiB). */
#define PROOF_MAX_ENTRIES (1u << 20)
#define PROOF_MAX (64u << 20)

/*
 * Checking through descriptors: a caller that copies from the entries it
 * opens compares the fstat of each descriptor (not a stat of a path, which
 * a rename can point elsewhere between the check and the read) with the
 * entry the list records. A view holds no copy: buf must outlive it.
 * proof_view_open: 0, or -1 when buf is not a proof list. proof_view_same:
 * 1 when entry i (0 is the root, ".") has the path rel and st (an fstat,
 * with the root's st_dev dev) is what it records, else 0. Entries come in
 * fs_walk's order (bytewise, depth first, a directory before its entries).
 */
struct proof_view {
	const void *recs;
	const char *names;
	uint32_t n, nlen;
};
struct stat;
int proof_view_open(const void *buf, size_t len, struct proof_view *v);
int proof_view_same(const struct proof_view *v, uint32_t i, const char *rel, const struct stat *st,
                    dev_t dev);

/*
 * What a stat proof cannot see: a write through a writable shared mapping
 * whose page is dirty already moves no ctime (tmpfs moves none for any
 * mapped write). A file trusted on its stat is therefore read only under a
 * read lease on the descriptor it is read from (ours, opened read-only):
 * proof_lease_take answers 1 when the kernel granted one, which it does
 * only while nobody has the file open for writing (a mapping keeps it so),
 * else 0 (leases off: fs.leases-enable=0, unsupported, not permitted; the
 * caller then hashes the file, never trusts it). proof_lease_end answers 1
 * when the lease held to the end (an open for writing or a truncate
 * meanwhile breaks it; no owner is set, so no signal comes) and the fstat
 * of fd is still st, and releases it either way.
 */
int proof_lease_take(int fd);
int proof_lease_end(int fd, const struct stat *st);

int proof_make(const char *root, const char *code, char **out, size_t *outlen, struct err *e);
int proof_make_quick(const char *root, const char *code, char **out, size_t *outlen, struct err *e);
/* The same walking the open directory rootfd (root names it in messages),
 * and checking it: what a caller copying from rootfd proves, whatever a
 * rename has since put at root. */
int proof_make_quick_fd(int rootfd, const char *root, const char *code, char **out, size_t *outlen,
                        struct err *e);
int proof_check(const char *root, const void *buf, size_t len);
int proof_check_fd(int rootfd, const void *buf, size_t len);
int proof_parse(const void *buf, size_t len);

#endif
