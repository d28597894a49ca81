/* fuzz_dechunk: the chunked-decoder driver both HTTP fuzz targets use. */
#ifndef ABX_FUZZ_DECHUNK_H
#define ABX_FUZZ_DECHUNK_H
#include <stdlib.h>
#include <string.h>

#include "net/http_parse.h"

/* Decode in[0..len) in pieces of at most step bytes into out (room for len
 * bytes). Returns the bytes consumed or -1. Aborts when a call consumes
 * nothing or past its piece, hands out data outside it, fails without a
 * 400/413 and a reason, or when the decoded total passes the cap or
 * disagrees with what was handed out. */
static long
fuzz_dechunk(struct http_chunked *c, const unsigned char *in, size_t len, size_t step, unsigned char *out,
             size_t *nout)
{
	const unsigned char *d;
	size_t off = 0, dl, lim;
	long k;

	*nout = 0;
	while (off < len && !c->done) {
		lim = len - off < step ? len - off : step;
		k = http_chunked_step(c, in + off, lim, &d, &dl);
		if (k < 0) {
			if (c->why == NULL || (c->status != 400 && c->status != 413))
				abort();
			return -1;
		}
		if (k == 0 || (size_t)k > lim || (dl > 0 && (d < in + off || d + dl > in + off + lim)))
			abort();
		memcpy(out + *nout, d, dl);
		*nout += dl;
		off += (size_t)k;
	}
	if (c->total > c->max_body || c->total != *nout)
		abort();
	return (long)off;
}

#endif
