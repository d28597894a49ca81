/*
 * libFuzzer target for the manifest loader. Properties checked:
 * - loading never crashes, leaks or reads out of bounds (ASan/UBSan);
 * - a refusal carries one of the codes a user can act on (json.* for "not
 *   JSON", install.manifest_invalid naming the file, not_found for a
 *   missing lockfile of an npm-lock manifest) and a message;
 * - what loads is self-consistent: a name and binary, a verify argv, a
 *   pinned digest for the platform asked for (there is no trust on first
 *   use), and every artifact URL on one of the manifest's hosts;
 * - a verify.env that loads names only [A-Z_][A-Z0-9_]* outside PATH,
 *   HOME, LANG, LC_*, LD_*, NODE_OPTIONS, NODE_PATH and ABX_*, with
 *   printable values;
 * - an accepted manifest has no key a strcmp would misread (fuzz_keys.h);
 * - every unpacked_size that loads is 1 byte..1 TiB for a platform the
 *   manifest supports.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_keys.h"

#include "pkg/manifest.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static manifest_t m;
	struct manifest_opts o = {.platform = "linux-x64", .allow_unpinned = size > 0 && (data[0] & 1)};
	struct err e;
	int rc, i;

	err_clear(&e);
	rc = manifest_parse(&m, "fuzz.json", NULL, (const char *)data, size, &o, &e);
	if (rc < 0) {
		FUZZ_CHECK(e.code != NULL);
		FUZZ_CHECK(strncmp(e.code, "json.", 5) == 0 ||
		           strcmp(e.code, "install.manifest_invalid") == 0 ||
		           strcmp(e.code, "not_found") == 0 || strcmp(e.code, "internal") == 0);
		FUZZ_CHECK(e.msg[0] != '\0');
		return 0;
	}
	FUZZ_CHECK(m.name[0] != '\0' && m.binary[0] != '\0' && m.version[0] != '\0');
	fuzz_check_keys(data, size);
	FUZZ_CHECK(m.verify.argv.n > 0);
	FUZZ_CHECK(m.verify.nenv >= 0 && m.verify.nenv <= MANIFEST_MAX_VERIFY_ENV);
	for (i = 0; i < m.verify.nenv; i++) {
		const char *n = m.verify.env[i].name, *v;
		FUZZ_CHECK(n[0] != '\0' && !(n[0] >= '0' && n[0] <= '9'));
		for (; *n; n++)
			FUZZ_CHECK((*n >= 'A' && *n <= 'Z') || (*n >= '0' && *n <= '9') || *n == '_');
		n = m.verify.env[i].name;
		FUZZ_CHECK(strcmp(n, "PATH") != 0 && strcmp(n, "HOME") != 0 && strcmp(n, "LANG") != 0 &&
		           strncmp(n, "LC_", 3) != 0 && strncmp(n, "LD_", 3) != 0 &&
		           strncmp(n, "ABX_", 4) != 0 && strcmp(n, "NODE_OPTIONS") != 0 &&
		           strcmp(n, "NODE_PATH") != 0);
		for (v = m.verify.env[i].value; *v; v++)
			FUZZ_CHECK(*v >= 0x20 && *v <= 0x7e && *v != '{');
	}
	FUZZ_CHECK(strlen(m.sha256) == 64);
	FUZZ_CHECK(m.nunpacked >= 0 && m.nunpacked <= MANIFEST_MAX_PLATFORMS);
	for (i = 0; i < m.nunpacked; i++)
		FUZZ_CHECK(m.unpacked[i].bytes >= 1 && m.unpacked[i].bytes <= MANIFEST_UNPACKED_MAX &&
		           manifest_platform_known(m.unpacked[i].platform) &&
		           manifest_supports(&m, m.unpacked[i].platform));
	if (m.source.type == MANIFEST_SRC_TARBALL) {
		const struct manifest_artifact *a = manifest_artifact(&m, "linux-x64");
		FUZZ_CHECK(a != NULL);
		FUZZ_CHECK(a->sha256[0] != '\0' || (o.allow_unpinned && m.unpinned));
		for (i = 0; i < m.source.nart; i++)
			FUZZ_CHECK(strncmp(m.source.art[i].url, "https://", 8) == 0);
	}
	return 0;
}
