/*
 * libFuzzer target for the WWW-Authenticate challenge and the oci://
 * reference (core/net/oci_parse.c), the two texts of a registry's or an
 * operator's that the client reads before any credential is sent.
 * Properties checked:
 * - neither parser crashes or reads past the view it is given (ASan: the
 *   input is copied to an exact-size buffer, no NUL after it);
 * - a Bearer challenge that parses names a realm, and every field is a
 *   C string that fits its array;
 * - a reference that parses has a repository of the grammar's bytes and an
 *   https origin, or plain http only for oci+http:// when that was allowed.
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
	struct oci_challenge c;
	struct oci_ref r;
	struct err e;
	char *buf;

	if (size > (1u << 16))
		return 0;
	if ((buf = malloc(size ? size : 1)) == NULL)
		return 0;
	memcpy(buf, data, size);
	if (oci_challenge_parse(buf, size, &c, &e) == 0) {
		FUZZ_CHECK(!c.bearer || c.realm[0] != '\0');
		FUZZ_CHECK(strlen(c.realm) < sizeof(c.realm) && strlen(c.service) < sizeof(c.service) &&
		           strlen(c.scope) < sizeof(c.scope));
	} else {
		FUZZ_CHECK(e.code != NULL && strcmp(e.code, "oci.auth") == 0);
	}
	free(buf);
	if ((buf = malloc(size + 1)) == NULL)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	if (oci_ref_parse(buf, size & 1, &r, &e) == 0) {
		FUZZ_CHECK(r.repo[0] != '\0' &&
		           strspn(r.repo, "abcdefghijklmnopqrstuvwxyz0123456789._-/") == strlen(r.repo));
		FUZZ_CHECK(strncmp(r.origin, r.plain ? "http://" : "https://", r.plain ? 7 : 8) == 0);
		FUZZ_CHECK(!r.plain || (size & 1));
	} else {
		FUZZ_CHECK(e.code != NULL && strcmp(e.code, "oci.url") == 0);
	}
	free(buf);
	return 0;
}
