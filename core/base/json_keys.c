/*
 * Object keys (see json.h): duplicate detection, for the parser and for
 * json_dup_key, and member look-up.
 */
#include "base/json.h"
#include "base/buf.h"
#include "base/json_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- duplicate keys ---- */

/* FNV-1a: only a filter in front of memcmp. Keys are radix-sorted by hash
 * and a run of equal hashes longer than DUP_LINEAR_MAX is sorted by key, so
 * the O(n log n) bound holds whatever the hash does: crafted collisions
 * cost memcmps, not time quadratic in n (no hash flooding). */
uint32_t
json_key_hash(const char *k, size_t n)
{
	const unsigned char *p = (const unsigned char *)k;
	uint32_t h = 2166136261u;

	while (n-- > 0)
		h = (h ^ *p++) * 16777619u;
#ifdef ABX_TEST
	if (json_test_hash_bits < 32)
		h &= (UINT32_C(1) << json_test_hash_bits) - 1;
#endif
	return h;
}

int
json_key_eq(const struct json_member *a, const struct json_member *b)
{
	return a->keylen == b->keylen && memcmp(a->key, b->key, a->keylen) == 0;
}

static int
ent_cmp(const void *pa, const void *pb)
{
	const struct keyent *a = pa, *b = pb;
	int c;

	if (a->h != b->h)
		return a->h < b->h ? -1 : 1;
	if (a->m->keylen != b->m->keylen)
		return a->m->keylen < b->m->keylen ? -1 : 1;
	c = memcmp(a->m->key, b->m->key, a->m->keylen);
	if (c != 0)
		return c;
	/* Equal keys in document order, so a group's second entry is its
	 * first repetition. */
	return a->m < b->m ? -1 : a->m > b->m;
}

#define MEMBER_AT(base, stride, i)                                                                           \
	((const struct json_member *)((const unsigned char *)(base) + (size_t)(i) * (stride)))

/* Stable LSD radix sort of ents[0..n) by h through tmp[0..n): four passes
 * of 8 bits, O(n). (musl's qsort took 1.2 s for 900k keys.) */
static void
radix_sort(struct keyent *ents, struct keyent *tmp, size_t n)
{
	size_t count[256], i, sum, c;
	struct keyent *src = ents, *dst = tmp, *t;
	int shift;

	for (shift = 0; shift < 32; shift += 8) {
		memset(count, 0, sizeof(count));
		for (i = 0; i < n; i++)
			count[(src[i].h >> shift) & 255]++;
		for (sum = 0, i = 0; i < 256; i++) {
			c = count[i];
			count[i] = sum;
			sum += c;
		}
		for (i = 0; i < n; i++)
			dst[count[(src[i].h >> shift) & 255]++] = src[i];
		t = src;
		src = dst;
		dst = t;
	}
	/* An even number of passes: the result is back in ents. */
}

/* Earliest repetition among ents[0..n), all with one hash and in document
 * order; returns the index (by base/stride) or SIZE_MAX. */
static size_t
run_dup(struct keyent *ents, size_t n, const void *base, size_t stride)
{
	size_t a, b, best = SIZE_MAX, idx;

	if (n <= DUP_LINEAR_MAX) {
		for (a = 1; a < n; a++)
			for (b = 0; b < a; b++)
				if (json_key_eq(ents[a].m, ents[b].m))
					return (size_t)((const unsigned char *)ents[a].m -
					                (const unsigned char *)base) /
					       stride;
		return SIZE_MAX;
	}
	/* Many keys with one hash (crafted collisions): sort by key, then
	 * document order, so a group's second entry is its first repeat. */
	qsort(ents, n, sizeof(*ents), ent_cmp);
	for (a = 1; a < n; a++) {
		if (!json_key_eq(ents[a].m, ents[a - 1].m))
			continue;
		if (a >= 2 && json_key_eq(ents[a - 1].m, ents[a - 2].m))
			continue; /* a third or later occurrence */
		idx = (size_t)((const unsigned char *)ents[a].m - (const unsigned char *)base) / stride;
		if (idx < best)
			best = idx;
	}
	return best;
}

/* (json_int.h) */
size_t
json_find_dup(const void *base, size_t stride, size_t n, struct keyent *ents)
{
	size_t i, j, best = n, idx;

	if (ents == NULL) {
		for (i = 1; i < n; i++)
			for (j = 0; j < i; j++)
				if (json_key_eq(MEMBER_AT(base, stride, i), MEMBER_AT(base, stride, j)))
					return i;
		return n;
	}
	radix_sort(ents, ents + n, n);
	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && ents[j].h == ents[i].h; j++)
			;
		if (j - i < 2)
			continue;
		idx = run_dup(ents + i, j - i, base, stride);
		if (idx < best)
			best = idx;
	}
	return best;
}

const char *
json_dup_key(const struct json_val *obj)
{
	struct keyent *ents = NULL;
	const struct json_member *m;
	size_t n, i;

	if (obj == NULL || obj->type != JSON_OBJECT || obj->u.obj.n < 2)
		return NULL;
	n = obj->u.obj.n;
	m = obj->u.obj.m;
	if (n > DUP_LINEAR_MAX && n < SIZE_MAX / 2 / sizeof(*ents))
		ents = buf_realloc(NULL, 2 * n * sizeof(*ents)); /* NULL: fall back to pairs */
	for (i = 0; ents != NULL && i < n; i++) {
		ents[i].h = json_key_hash(m[i].key, m[i].keylen);
		ents[i].m = &m[i];
	}
	i = json_find_dup(m, sizeof(*m), n, ents);
	free(ents);
	return i < n ? m[i].key : NULL;
}

/* ---- accessors ---- */

const struct json_val *
json_get(const struct json_val *obj, const char *key)
{
	size_t i, n;

	if (obj == NULL || obj->type != JSON_OBJECT || key == NULL)
		return NULL;
	n = strlen(key);
	for (i = 0; i < obj->u.obj.n; i++)
		if (obj->u.obj.m[i].keylen == n && memcmp(obj->u.obj.m[i].key, key, n) == 0)
			return &obj->u.obj.m[i].val;
	return NULL;
}

int
json_key_is(const struct json_member *m, const char *name)
{
	size_t n = strlen(name);

	return m->keylen == n && memcmp(m->key, name, n) == 0;
}

const char *
json_str(const struct json_val *v)
{
	return v != NULL && v->type == JSON_STRING ? v->u.str.s : NULL;
}

const char *
json_get_str(const struct json_val *obj, const char *key)
{
	return json_str(json_get(obj, key));
}

int
json_is(const struct json_val *v, enum json_type t)
{
	return v != NULL && v->type == t;
}
