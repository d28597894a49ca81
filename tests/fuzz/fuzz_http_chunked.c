/*
 * libFuzzer target for the one chunked decoder (core/net/http_parse.c), in both
 * modes. The first byte picks the piece size and the body cap. Checked:
 * each mode gives the same bytes and the same verdict fed in one shot or in
 * pieces; every call consumes at least one byte and hands out data inside
 * its piece; the body never passes its cap; and the strict (server) mode
 * accepts a subset of what HTTP_LF_OK (client) mode accepts, with the same
 * data: whatever the server reads, a client reads the same way.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_dechunk.h"
#include "net/http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_chunked c;
	unsigned char *out[4];
	size_t n[4], step, i;
	uint64_t max;
	long r[4];
	unsigned mode;

	if (size < 1)
		return 0;
	step = (size_t)(data[0] & 15) + 1;
	max = data[0] & 16 ? 64 : UINT64_MAX;
	data++;
	size--;
	for (i = 0; i < 4; i++)
		if ((out[i] = malloc(size + 1)) == NULL)
			goto out;
	for (i = 0; i < 4; i++) {
		mode = i < 2 ? 0 : HTTP_LF_OK;
		http_chunked_init(&c, max, mode);
		r[i] = fuzz_dechunk(&c, data, size, i % 2 ? step : size + 1, out[i], &n[i]);
	}
	for (i = 0; i < 4; i += 2)
		if (r[i] != r[i + 1] || n[i] != n[i + 1] || memcmp(out[i], out[i + 1], n[i]) != 0)
			abort();
	/* strict accepted (or is still reading): the client reads the same */
	if (r[0] >= 0 && (r[2] != r[0] || n[2] != n[0] || memcmp(out[0], out[2], n[0]) != 0))
		abort();
out:
	for (i = 0; i < 4; i++)
		free(out[i]);
	return 0;
}
