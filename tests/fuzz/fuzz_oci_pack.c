/*
 * libFuzzer target for a pack's list (core/net/oci_parse.c,
 * oci_pack_list): an annotation value from the registry, which an install
 * cuts a pack blob by. Properties checked:
 * - the parser does not crash (ASan/UBSan);
 * - the sum is at most OCI_PACK_MAX, 0 for a list it refuses;
 * - the entries it hands on are contiguous from 0, each at least one byte,
 *   their sizes adding up to the sum, each integrity a non-empty word
 *   shorter than DIGEST_SRI_MAX;
 * - the same list gives the same sum with and without a callback.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"

#include "base/digest.h"
#include "net/oci.h"

struct walk {
	uint64_t next;
};

static void
on_entry(void *arg, const char *sri, uint64_t off, uint64_t len)
{
	struct walk *w = arg;

	FUZZ_CHECK(off == w->next && len > 0 && len <= OCI_PACK_MAX);
	FUZZ_CHECK(sri[0] != '\0' && strlen(sri) < DIGEST_SRI_MAX && strchr(sri, ' ') == NULL);
	w->next = off + len;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct walk w = {0};
	uint64_t sum, again;
	char *v;

	if (size > OCI_JSON_MAX || (v = malloc(size + 1)) == NULL)
		return 0;
	memcpy(v, data, size);
	v[size] = '\0';
	sum = oci_pack_list(v, NULL, NULL);
	FUZZ_CHECK(sum <= OCI_PACK_MAX);
	if (sum > 0) {
		again = oci_pack_list(v, on_entry, &w);
		FUZZ_CHECK(again == sum && w.next == sum);
	}
	free(v);
	return 0;
}
