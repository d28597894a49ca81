#include "base/buf.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

void *
buf_room(struct buf *b, size_t len)
{
	if (b->over || len > b->max - b->len) {
		b->over = 1;
		return NULL;
	}
	if (b->len + len + 1 > b->cap) {
		size_t ncap = b->cap ? b->cap : 1024;
		unsigned char *np;

		while (ncap < b->len + len + 1)
			ncap *= 2;
		if (ncap > b->max + 1)
			ncap = b->max + 1;
		if ((np = realloc(b->p, ncap)) == NULL) {
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
