#ifndef ABX_BUF_H
#define ABX_BUF_H
/*
 * The one growable byte buffer: appended to, never more than max bytes.
 * p[0..len) holds what was put, followed by a NUL (so text can be read as a
 * C string). A put that would pass max, or that runs out of memory, sets
 * over and leaves the contents as they were; later puts do nothing until
 * buf_reset. Zero-filled with max set (BUF_INIT) is an empty buffer.
 */
#include <stddef.h>

struct err;

struct buf {
	unsigned char *p; /* NULL until the first put */
	size_t len, cap;
	size_t max; /* the ceiling of len, below SIZE_MAX (the NUL is one more) */
	int over;   /* a put did not fit (or memory ran out) */
};

#define BUF_INIT(max)                                                                                        \
	{                                                                                                    \
		NULL, 0, 0, (max), 0                                                                         \
	}

/* Append data[0..len). Returns 0, or -1 with over set. */
int buf_put(struct buf *b, const void *data, size_t len);

/* Room for len more bytes past b->len (len unchanged), within max: a
 * pointer to them (len bytes, then one more for the NUL), valid until the
 * next put; the caller writes there and then adds to b->len. NULL with over
 * set when they would pass max or memory runs out. */
void *buf_room(struct buf *b, size_t len);

/* Empty b (len 0, over cleared), keeping its memory. */
void buf_reset(struct buf *b);

/* Release b's memory; b is then an empty buffer with the same max. */
void buf_free(struct buf *b);

/* An http_sink (core/net/http.h) into the struct buf at arg: a body over its max
 * is http.too_large, no memory is internal. */
int buf_http_sink(void *arg, const void *data, size_t len, struct err *e);

/*
 * The one growable array: n elements of size bytes each at p, never more
 * than max of them. It grows by doubling (checked against max and against
 * overflow of cap x size), so an element's address is valid until the next
 * push. Zero-filled with size and max set (VEC_INIT) is an empty array.
 * Element type T: ((T *)v.p)[i].
 */
struct vec {
	void *p; /* NULL until the first push */
	size_t n, cap;
	size_t size; /* bytes per element */
	size_t max;  /* the ceiling of n */
};

#define VEC_INIT(size, max)                                                                                  \
	{                                                                                                    \
		NULL, 0, 0, (size), (max)                                                                    \
	}

/* Room for one more element at the end, zero-filled, n counting it: a
 * pointer to it, or NULL (n unchanged) when max are held or memory runs
 * out (vec_full tells which). */
void *vec_push(struct vec *v);

/* Room for k more elements past n (n unchanged): 0, or -1 as vec_push. */
int vec_reserve(struct vec *v, size_t k);

/* 1 when max elements are held. */
int vec_full(const struct vec *v);

/* Release v's memory; v is then an empty array of the same size and max. */
void vec_free(struct vec *v);

/* realloc (malloc when p is NULL), the one allocator of buf and vec; other
 * code whose allocation failures tests inject (the JSON arena) calls it
 * too. Free with free(). */
void *buf_realloc(void *p, size_t n);

#ifdef ABX_TEST
/* Test-only allocation failure (SQLite's countdown): when set to N > 0, the
 * Nth buf_realloc from now on fails; 0 = never. */
extern long base_test_alloc_fail;
#endif

#endif
