/*
 * libFuzzer target for the server's request parser and chunked decoder.
 * Besides crashes it checks the contracts callers rely on: a successful
 * parse consumes at most len bytes and every shorter prefix answers "need
 * more"; the chunked decoder gives the same bytes and the same verdict when
 * fed in one shot or in pieces of a size the input chooses, and never passes
 * its body cap; every field the head parser took is a field line to
 * http_field_check too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_dechunk.h"
#include "net/http_parse.h"

static struct http_req r1, r2;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct http_chunked c1, c2;
	size_t split, n1, n2;
	char *o1, *o2;
	long a, b;
	int rc, i;

	rc = http_req_parse(&r1, s, size);
	if (rc > (int)size || rc < -1)
		abort();
	if (rc == -1 && r1.status == 0)
		abort();
	if (rc > 0) {
		split = size ? data[0] % (size_t)rc : 0;
		if (http_req_parse(&r2, s, split) != 0)
			abort();
		if (r1.path.n > (size_t)rc || r1.nfields > HTTP_REQ_MAX_FIELDS)
			abort();
		/* the fast path of the head parser and the byte machine
		 * behind http_field_check agree on every field it took */
		for (i = 0; i < r1.nfields; i++) {
			const char *f = r1.fields[i].name.p, *e = r1.fields[i].value.p + r1.fields[i].value.n;

			if (e < f + r1.fields[i].name.n + 1 || http_field_check(f, (size_t)(e - f)) != NULL)
				abort();
		}
	}

	/* The rest (or everything) as a chunked body, one shot vs in pieces
	 * whose size the input chooses. */
	if (rc > 0) {
		s += rc;
		size -= (size_t)rc;
	}
	o1 = malloc(size + 1);
	o2 = malloc(size + 1);
	if (o1 == NULL || o2 == NULL)
		goto out;
	http_chunked_init(&c1, 4096, 0);
	http_chunked_init(&c2, 4096, 0);
	a = fuzz_dechunk(&c1, (const unsigned char *)s, size, size ? size : 1, (unsigned char *)o1, &n1);
	split = size ? (unsigned char)s[size / 2] % 17 + 1 : 1;
	b = fuzz_dechunk(&c2, (const unsigned char *)s, size, split, (unsigned char *)o2, &n2);
	if ((a < 0) != (b < 0))
		abort();
	if (a >= 0 && (a != b || n1 != n2 || memcmp(o1, o2, n1) != 0 || c1.done != c2.done))
		abort();
	if (a < 0 && (c1.status != c2.status || c1.why == NULL))
		abort();
	if (c1.total > 4096)
		abort();
out:
	free(o1);
	free(o2);
	return 0;
}
