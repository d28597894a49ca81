/*
 * libFuzzer target: the HTTP response head parser and the chunked decoder
 * (core/net/http_parse.c, with the client's HTTP_LF_OK). The first byte picks how the input is split into
 * pieces for the chunked decoder, so framing split at any point is explored; the rest is a response.
 * Invariants checked: the head parser consumes no more than it was given and only through a blank line; field
 * views stay inside the input; the decoder consumes at least one byte per call, never past its input, and its
 * data views stay inside it; every field the head parser took is a field line to http_field_check too.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_head h;
	struct http_chunked c;
	const unsigned char *d, *in;
	size_t step, off, dl, lim, n;
	int r, i;
	long k;
	char *copy;

	if (size < 1)
		return 0;
	step = (size_t)data[0] % 17 + 1;
	data++;
	size--;
	/* An exact-size copy so ASan sees any read past the end. */
	copy = malloc(size ? size : 1);
	memcpy(copy, data, size);
	r = http_parse_head(copy, size, &h);
	if (r < 0 && h.why == NULL)
		abort();
	if (r > 0) {
		if ((size_t)r > size || copy[r - 1] != '\n')
			abort();
		for (i = 0; i < h.nfields; i++) {
			if (h.fields[i].name < copy || h.fields[i].value + h.fields[i].value_len > copy + r)
				abort();
			if (http_field_check(h.fields[i].name,
			                     (size_t)(h.fields[i].value + h.fields[i].value_len -
			                              h.fields[i].name)) != NULL)
				abort();
		}
		(void)http_head_get(&h, "Content-Length");
	}
	n = r > 0 ? (size_t)r : 0;
	in = (const unsigned char *)copy + n;
	http_chunked_init(&c, UINT64_MAX, HTTP_LF_OK);
	for (off = 0; off < size - n && !c.done;) {
		lim = size - n - off < step ? size - n - off : step;
		k = http_chunked_step(&c, in + off, lim, &d, &dl);
		if (k < 0)
			break;
		if (k == 0 || (size_t)k > lim)
			abort();
		if (dl > 0 && (d < in + off || d + dl > in + off + lim))
			abort();
		off += (size_t)k;
	}
	free(copy);
	return 0;
}
