#include "base/buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

#ifdef ABX_TEST
long base_test_alloc_fail;
#endif

void *
buf_realloc(void *p, size_t n)
{
#ifdef ABX_TEST
	if (base_test_alloc_fail > 0 && --base_test_alloc_fail == 0)
		return NULL;
#endif
	return realloc(p, n);
}

void *
buf_room(struct buf *b, size_t len)
{
	if (b->over || len > b->max - b->len) {
		b->over = 1;
		return NULL;
	}
	if (b->len + len + 1 > b->cap) {
		/* Powers of two from 1 KiB (at most max + 1): a session's stage
		 * and journal, filled in rounds of mixed sizes, then reallocate
		 * rarely (tools/bench/sessions.sh's rows measure it). */
		size_t ncap = b->cap == 0 ? 1024 : b->cap;
		unsigned char *np;

		while (ncap < b->len + len + 1)
			ncap = ncap > SIZE_MAX / 2 ? SIZE_MAX : ncap * 2;
		if (ncap > b->max + 1)
			ncap = b->max + 1;
		if ((np = buf_realloc(b->p, ncap)) == NULL) {
			b->over = 1;
			return NULL;
		}
		b->p = np;
		b->cap = ncap;
	}
	return b->p + b->len;
}

int
buf_put(struct buf *b, const void *data, size_t len)
{
	unsigned char *at = buf_room(b, len);

	if (at == NULL)
		return -1;
	if (len > 0)
		memcpy(at, data, len);
	b->len += len;
	b->p[b->len] = '\0';
	return 0;
}

void
buf_reset(struct buf *b)
{
	b->len = 0;
	b->over = 0;
	if (b->p != NULL)
		b->p[0] = '\0';
}

void
buf_free(struct buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
	b->over = 0;
}

int
buf_http_sink(void *arg, const void *data, size_t len, struct err *e)
{
	struct buf *b = arg;

	if (!b->over && len > b->max - b->len) {
		b->over = 1;
		return err_set(e, "http.too_large", "body larger than %zu bytes", b->max);
	}
	if (buf_put(b, data, len) != 0)
		return err_set(e, "internal", "out of memory");
	return 0;
}

int
vec_reserve(struct vec *v, size_t k)
{
	size_t ncap;
	void *np;

	if (k > v->max - v->n)
		return -1;
	if (v->n + k <= v->cap)
		return 0;
	ncap = v->cap ? v->cap : 16;
	while (ncap < v->n + k)
		ncap = ncap > v->max / 2 ? v->max : ncap * 2;
	if (ncap > v->max)
		ncap = v->max;
	if (v->size == 0 || ncap > SIZE_MAX / v->size || (np = buf_realloc(v->p, ncap * v->size)) == NULL)
		return -1;
	v->p = np;
	v->cap = ncap;
	return 0;
}

void *
vec_push(struct vec *v)
{
	unsigned char *at;

	if (vec_reserve(v, 1) != 0)
		return NULL;
	at = (unsigned char *)v->p + v->n * v->size;
	memset(at, 0, v->size);
	v->n++;
	return at;
}

int
vec_full(const struct vec *v)
{
	return v->n >= v->max;
}

void
vec_free(struct vec *v)
{
	free(v->p);
	v->p = NULL;
	v->n = v->cap = 0;
}
