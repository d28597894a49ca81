#ifndef ABX_MANIFESTS_EMBED_H
#define ABX_MANIFESTS_EMBED_H
/* Files embedded at build time by tools/embed.sh: those of manifests/
 * (embedded_manifests, in two gzip streams: the manifests; the files of
 * their subdirectories) and, for the applets only, their help texts
 * (applets/help/, in applets/opts.c's table); embedded_text() gives a
 * file's bytes. */
#include <stddef.h>

#include "base/err.h"

/* Private to embedded_text(): one stream and the .bss it inflates into. */
struct embedded_group {
	const unsigned char *gz; /* gzip -9n of the group's files, each then a NUL */
	size_t gzlen;
	unsigned char *text; /* len + 1 bytes */
	size_t len;
	int ready; /* text holds the group (under embedded_text's lock) */
};

struct embedded_file {
	const char *path;             /* relative to its directory, as lock names it */
	size_t len;                   /* the file's length */
	struct embedded_group *group; /* the stream that holds it */
	size_t off;                   /* where it starts in its group's text */
};

/* Terminated by an entry whose path is NULL. */
extern struct embedded_file embedded_manifests[];

/* The bytes of f, f->len of them and then a NUL, its group inflated on
 * first use (thread-safe; a shim that reads the top-level manifests never
 * inflates the lockfiles). They live
 * as long as the process. No allocation: NULL with e set ("internal") only
 * when the embedded bytes do not inflate (a corrupt build). */
const char *embedded_text(struct embedded_file *f, struct err *e);

#endif
