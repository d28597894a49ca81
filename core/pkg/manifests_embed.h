#ifndef ABX_MANIFESTS_EMBED_H
#define ABX_MANIFESTS_EMBED_H
/* The files of manifests/ embedded at build time by tools/embed.sh, each
 * gzip-compressed; embedded_text() gives a file's bytes. */
#include <stddef.h>

#include "base/err.h"

struct embedded_file {
	const char *path; /* relative to manifests/, as lock names it */
	size_t len;       /* the file's length */
	/* Private to embedded_text(): */
	const unsigned char *gz; /* the file, gzip -9n */
	size_t gzlen;
	unsigned char *text; /* len + 1 bytes in .bss, inflated on first use */
	int ready;           /* text holds the file (under embedded_text's lock) */
};

/* Terminated by an entry whose path is NULL. */
extern struct embedded_file embedded_manifests[];

/* The bytes of f, f->len of them and then a NUL, inflated on first use
 * (thread-safe; a file not asked for is never inflated, so a shim that
 * reads the top-level manifests does not pay for the lockfiles). They live
 * as long as the process. No allocation: NULL with e set ("internal") only
 * when the embedded bytes do not inflate (a corrupt build). */
const char *embedded_text(struct embedded_file *f, struct err *e);

#endif
