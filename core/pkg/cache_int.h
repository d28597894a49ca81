#ifndef ABX_CACHE_INT_H
#define ABX_CACHE_INT_H
/*
 * Private to the tree cache (cache_tree.c keeps a tree, cache_place.c
 * places one): the sealing key, the hashed copy and the walk's rules for
 * names and links, one copy of each for both.
 */
#include "base/fs.h"
#include "pkg/cache.h"

#include <stddef.h>
#include <sys/types.h>

/* FICLONE from <linux/fs.h>, spelt out to need no kernel header. */
#define CACHE_FICLONE _IOW(0x94, 9, int)
#define COPY_BUF (128u << 10) /* one read/write of a copy */
/* Files from this size up are copied through a cache_pipe. */
#define PIPE_MIN (4u << 20)
#define MANIFEST_MAX (64u << 20)
#define KEY_LEN 32

/* The sealing key: read keyfile (outside the cache, cache.h), or make it
 * (and its directory, 0700). Returns 0, or -1 with why set (the tree cache
 * is then not used). */
int cache_seal_key(const char *keyfile, unsigned char key[KEY_LEN], const char **why);
/* The HMAC-SHA256 of text under key, hex. */
void cache_seal(const unsigned char key[KEY_LEN], const void *text, size_t len, char out[65]);

/* Copy in to out (size bytes) and the sha256 of what out then holds, io a
 * COPY_BUF buffer of the caller's (one per thread). 0, or -1 with errno
 * and *dst_err set when the destination failed. */
int cache_copy_hash(unsigned char *io, int in, int out, off_t size, unsigned char sha[32], int *dst_err);

/* Copy in to out whole, unhashed (the caller has the digest): in the
 * kernel where it can (copy_file_range: a reflink where the filesystem
 * shares blocks), else read and written through io. 0, or -1 with errno
 * and *dst_err set when the destination failed. */
int cache_copy_plain(unsigned char *io, int in, int out, int *dst_err);

/* The proof list of a kept tree: <entry>/proof, its sha256 in the sealed
 * manifest's header ("abx-tree 2 <key> <proof sha256> <meta>"; version 1
 * has no proof and is placed by hashing). */
#define PROOF_FILE "proof"
/* Write the proof list pl (len bytes) as the new file path, hex its
 * sha256: 0, or -1 with e (nothing left at path). */
int cache_proof_put(const char *path, const char *pl, size_t len, char hex[65], struct err *e);
/* Write the manifest of entry key as the new file path: the header (proof
 * hex, "" for none; meta), the listing body, the seal with sk. 0, or -1
 * with e (nothing left at path). */
int cache_manifest_put(const char *path, const unsigned char sk[KEY_LEN], const char *key, const char *proof,
                       const char *meta, size_t metalen, const void *body, size_t blen, struct err *e);

/* A name the listing can hold (no newline, no " -> "): 0, or -1 with e. */
int cache_entry_name(const struct fs_ent *ent, struct err *e);
/* The target of link name in src (cap 4096), or -1 with e. */
int cache_read_link(int src, const char *name, const char *rel, char *target, size_t cap, struct err *e);
/* Append a listing line to b, or -1 with e (too large). */
int cache_line(struct buf *b, struct err *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
