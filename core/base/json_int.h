#ifndef ABX_JSON_INT_H
#define ABX_JSON_INT_H
/* What the parser (json.c) and the writer (json_write.c) share. */
#include <stddef.h>
#include <stdint.h>

struct json_member;

/* Below this many members a plain double loop beats sorting. */
#define DUP_LINEAR_MAX 16

/* A key's hash and its member: the entries json_find_dup sorts. */
struct keyent {
	uint32_t h;
	const struct json_member *m;
};

/* Whether two members have the same key. */
int json_key_eq(const struct json_member *a, const struct json_member *b);

/* The hash json_find_dup sorts keys by (a filter in front of memcmp). */
uint32_t json_key_hash(const char *k, size_t n);

/*
 * Index of the earliest member whose key appeared before it, or n. Members
 * are at base + i * stride. ents holds 2n entries, the first n filled in
 * (hash, member) in document order; NULL means no room, so compare pairwise.
 */
size_t json_find_dup(const void *base, size_t stride, size_t n, struct keyent *ents);

/* A key for an error message, into buf[0..cap) (cap > 4): escaped, cut to
 * about 60 bytes with "..." marking the cut. */
void json_short_key(char *buf, size_t cap, const char *key, size_t keylen);

#endif
