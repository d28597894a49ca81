#ifndef ABX_PKG_CACHE_INT_H
#define ABX_PKG_CACHE_INT_H

/* What cache_tree.c and cache_seal.c share and nothing else uses. */
#include <stddef.h>

#define CACHE_SEAL_KEY_LEN 32

/* The cache's sealing key: read <trees>/.key, or make it. Returns 0, or
 * -1 with why set (the tree cache is then not used). */
int cache_seal_key(const char *trees, unsigned char key[CACHE_SEAL_KEY_LEN], const char **why);
/* The HMAC-SHA256 of text under key, as 64 hex digits. */
void cache_seal(const unsigned char key[CACHE_SEAL_KEY_LEN], const void *text, size_t len, char out[65]);

#endif
