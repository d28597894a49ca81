/*
 * libFuzzer target for the server's request parser and chunked decoder.
 * Besides crashes it checks the contracts callers rely on: a successful
 * parse consumes at most len bytes and every shorter prefix answers "need
 * more"; the chunked decoder gives the same bytes when fed one shot or in two
 * pieces split at a point the input chooses.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"

static struct http_req r1, r2;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct http_req_chunked c1, c2;
	size_t split, n1, n2, m;
	char *o1, *o2;
	int rc, a, b;

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
	}

	/* The rest (or everything) as a chunked body, one shot vs split. */
	if (rc > 0) {
		s += rc;
		size -= (size_t)rc;
	}
	o1 = malloc(size + 1);
	o2 = malloc(size + 1);
	if (o1 == NULL || o2 == NULL)
		goto out;
	http_req_chunked_init(&c1, 4096);
	http_req_chunked_init(&c2, 4096);
	a = http_req_chunked_decode(&c1, s, size, o1, &n1);
	split = size ? (unsigned char)s[size / 2] % (size + 1) : 0;
	b = http_req_chunked_decode(&c2, s, split, o2, &n2);
	if (b >= 0 && !c2.done) {
		if (b != (int)split)
			abort();
		b = http_req_chunked_decode(&c2, s + split, size - split, o2 + n2, &m);
		if (b >= 0) {
			b += (int)split;
			n2 += m;
		}
	}
	if ((a < 0) != (b < 0))
		abort();
	if (a >= 0 && (a != b || n1 != n2 || memcmp(o1, o2, n1) != 0 || c1.done != c2.done))
		abort();
	if (a < 0 && c1.status != c2.status)
		abort();
out:
	free(o1);
	free(o2);
	return 0;
}
