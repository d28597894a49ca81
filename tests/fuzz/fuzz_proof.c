/*
 * libFuzzer target for proof lists (core/base/proof.c), the file the
 * fast path reads back from <name>/.installed.proof and the tree cache
 * from <entry>/proof. Properties checked:
 * - parsing never crashes or reads out of bounds (ASan/UBSan), at any
 *   length and alignment the reader can be handed;
 * - a list that parses has room for its entries and its names;
 * - no list is a proof for a root that does not exist, and nothing that
 *   fails to parse is ever a proof.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"

#include "base/proof.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf;
	int n;

	if (size > (1u << 20))
		return 0;
	/* malloc'd, as the reader's copy is: 8-byte aligned */
	if ((buf = malloc(size + 1)) == NULL)
		return 0;
	memcpy(buf, data, size);
	n = proof_parse(buf, size);
	FUZZ_CHECK(n == -1 || (n >= 1 && (uint64_t)size >= 16 + (uint64_t)n * 48 + 2));
	FUZZ_CHECK(proof_check("/nonexistent/abx-fuzz-proof", buf, size) == 0);
	if (n == -1 && size > 0) {
		/* what does not parse is no proof, even of a real directory */
		FUZZ_CHECK(proof_check("/", buf, size) == 0);
	}
	/* misaligned: refused, never read */
	memmove(buf + 1, buf, size);
	FUZZ_CHECK(proof_parse(buf + 1, size) == -1);
	free(buf);
	return 0;
}
