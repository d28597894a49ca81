#ifndef ABX_MANIFESTS_EMBED_H
#define ABX_MANIFESTS_EMBED_H
/* The files of manifests/ embedded at build time by tools/embed.sh. */
#include <stddef.h>

struct embedded_file {
	const char *path;          /* relative to manifests/, e.g. "manifests/codex.json" */
	const unsigned char *data; /* NUL-terminated after len bytes */
	size_t len;
};

/* Terminated by an entry whose path is NULL. */
extern const struct embedded_file embedded_manifests[];

#endif
