/* The npm-lock part of manifests (core/pkg/manifest_npm.c): the source fields
 * and their errors first, the bin placeholders, then the lockfile check
 * (hosts, the mirror, not JSON, a broken entry). */
#include "unit.h"

#include <stdlib.h>

#include "base/digest.h"
#include "base/json.h"
#include "config/config.h"
#include "pkg/manifest.h"

static char sri512[DIGEST_SRI_MAX];

/* A manifest_t as manifest_parse leaves it before the npm hook runs. */
static manifest_t *
new_manifest(void)
{
	manifest_t *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	snprintf(m->file, sizeof(m->file), "t.json");
	snprintf(m->hosts[0], sizeof(m->hosts[0]), "registry.npmjs.org");
	m->nhosts = 1;
	m->source.type = MANIFEST_SRC_NPM_LOCK;
	return m;
}

/* Run manifest_npm_validate on the JSON object src. */
static int
validate(manifest_t *m, const char *src, struct err *e)
{
	struct json_doc doc;
	int rc;

	assert_int_equal(json_parse(&doc, src, strlen(src), NULL, e), 0);
	err_clear(e);
	rc = manifest_npm_validate(m, doc.root, e);
	json_free(&doc);
	return rc;
}

#define GOOD_FIELDS                                                                                          \
	"\"package\": \"@openai/codex\", \"lock\": \"codex/package-lock.json\", "                            \
	"\"package_json\": \"codex/package.json\""

static void
expect_bad(const char *src, const char *what)
{
	manifest_t *m = new_manifest();
	struct err e = {0};

	assert_int_equal(validate(m, src, &e), -1);
	assert_string_equal(e.code, "install.manifest_invalid");
	if (strstr(e.msg, what) == NULL || strncmp(e.msg, "t.json: ", 8) != 0)
		fail_msg("message '%s' lacks 't.json: ... %s'", e.msg, what);
	free(m);
}

static void
test_fields_refused(void **state)
{
	expect_bad("{" GOOD_FIELDS ", \"bin\": \"bin/x\", \"postinstall\": true}",
	           "$.source.postinstall: unknown field");
	expect_bad("{\"lock\": \"l.json\", \"package_json\": \"p.json\", \"bin\": \"b\"}",
	           "$.source.package: missing");
	expect_bad("{\"package\": \"p\", \"package_json\": \"p.json\", \"bin\": \"b\"}",
	           "$.source.lock: missing");
	expect_bad("{" GOOD_FIELDS "}", "$.source.bin: missing");
	expect_bad("{" GOOD_FIELDS ", \"bin\": 7}", "$.source.bin: expected a non-empty string");
	expect_bad("{" GOOD_FIELDS ", \"bin\": \"\"}", "$.source.bin: expected a non-empty string");
	/* a string with NUL in it is not the string it reads as */
	expect_bad("{" GOOD_FIELDS ", \"bin\": \"a\\u0000b\"}", "$.source.bin: expected a non-empty string");
	expect_bad(
	    "{\"package\": \"p\", \"lock\": \"/etc/l.json\", \"package_json\": \"p.json\", \"bin\": \"b\"}",
	    "$.source.lock: not a relative path beside the manifest");
	expect_bad(
	    "{\"package\": \"p\", \"lock\": \"l.json\", \"package_json\": \"../p.json\", \"bin\": \"b\"}",
	    "$.source.package_json: not a relative path beside the manifest");
	expect_bad("{" GOOD_FIELDS ", \"bin\": \"../../bin/sh\"}",
	           "$.source.bin: not a relative path inside the tree");
	expect_bad("{" GOOD_FIELDS ", \"bin\": \"bin\\\\x\"}",
	           "$.source.bin: not a relative path inside the tree");
	expect_bad("{" GOOD_FIELDS ", \"bin\": \"b\", \"allow_scripts\": true}",
	           "$.source.allow_scripts: must be false");
	expect_bad("{" GOOD_FIELDS ", \"bin\": \"b\", \"allow_scripts\": \"false\"}",
	           "$.source.allow_scripts: must be false");
}

static void
test_field_too_long(void **state)
{
	char src[1024], bin[MANIFEST_RELPATH_MAX + 1];

	memset(bin, 'a', sizeof(bin) - 1);
	bin[sizeof(bin) - 1] = '\0';
	snprintf(src, sizeof(src), "{" GOOD_FIELDS ", \"bin\": \"%s\"}", bin);
	expect_bad(src, "$.source.bin: longer than 255 bytes");
}

static void
test_fields_accepted(void **state)
{
	manifest_t *m = new_manifest();
	struct err e = {0};

	assert_int_equal(validate(m,
	                          "{\"type\": \"npm-lock\", " GOOD_FIELDS ", \"bin\": \"bin/codex.js\", "
	                          "\"allow_scripts\": false}",
	                          &e),
	                 0);
	assert_string_equal(m->source.package, "@openai/codex");
	assert_string_equal(m->source.lock, "codex/package-lock.json");
	assert_string_equal(m->source.package_json, "codex/package.json");
	assert_string_equal(m->source.bin, "bin/codex.js");
	free(m);
}

static void
test_bin_placeholders(void **state)
{
	manifest_t *m = new_manifest();
	char want[256];
	struct err e = {0};
	const char *arch =
	    strcmp(manifest_platform_self(), MANIFEST_PLATFORM_ARM64) == 0 ? "aarch64" : "x86_64";

	setenv("ABX_INSTALL_LIBC", "musl", 1);
	assert_int_equal(
	    validate(m, "{" GOOD_FIELDS ", \"bin\": \"node_modules/@x/cli-{platform}{musl}/{arch}/x\"}", &e),
	    0);
	snprintf(want, sizeof(want), "node_modules/@x/cli-%s-musl/%s/x", manifest_platform_self(), arch);
	assert_string_equal(m->source.bin, want);

	setenv("ABX_INSTALL_LIBC", "glibc", 1);
	assert_int_equal(validate(m, "{" GOOD_FIELDS ", \"bin\": \"cli-{platform}{musl}\"}", &e), 0);
	snprintf(want, sizeof(want), "cli-%s", manifest_platform_self());
	assert_string_equal(m->source.bin, want);
	unsetenv("ABX_INSTALL_LIBC");
	free(m);

	expect_bad("{" GOOD_FIELDS ", \"bin\": \"cli-{os}\"}", "$.source.bin: unknown placeholder");
	/* a stray brace is refused also when the path has no "{" */
	expect_bad("{" GOOD_FIELDS ", \"bin\": \"cli}\"}", "$.source.bin: unknown placeholder");
}

/* Load the configuration from envp alone, as an applet does at start. */
static void
load_config(const char *level, int ok)
{
	static struct config c;
	char kv[64];
	char *envp[] = {kv, NULL};
	struct err e = {0};

	snprintf(kv, sizeof(kv), "ABX_INSTALL_CPU_LEVEL=%s", level);
	assert_int_equal(config_load(&c, NULL, envp, NULL, 0, &e), ok ? 0 : -1);
	if (!ok)
		assert_string_equal(e.code, "config.invalid");
}

/* The bin of a vendor that ships -baseline builds for CPUs without AVX2:
 * auto follows the CPU (ABX_INSTALL_AVX2 stands in for it here), baseline
 * and v3 choose whatever the CPU. Off x86-64 there is one build. */
static const char *
baseline_bin(const char *level, const char *avx2)
{
	static manifest_t *m;
	struct err e = {0};

	free(m);
	m = new_manifest();
	load_config(level, 1);
	setenv("ABX_INSTALL_AVX2", avx2, 1);
	assert_int_equal(validate(m, "{" GOOD_FIELDS ", \"bin\": \"oc-{cpu}{baseline}/{linux}\"}", &e), 0);
	unsetenv("ABX_INSTALL_AVX2");
	assert_int_equal(m->source.cpu_levels, 1);
	return m->source.bin;
}

static void
test_cpu_level(void **state)
{
	int x64 = strcmp(manifest_platform_self(), MANIFEST_PLATFORM_X64) == 0;

	setenv("ABX_INSTALL_LIBC", "glibc", 1);
	assert_string_equal(baseline_bin("auto", "1"), x64 ? "oc-x64/linux" : "oc-arm64/linux");
	assert_string_equal(baseline_bin("auto", "0"), x64 ? "oc-x64-baseline/linux" : "oc-arm64/linux");
	assert_string_equal(baseline_bin("baseline", "1"), x64 ? "oc-x64-baseline/linux" : "oc-arm64/linux");
	assert_string_equal(baseline_bin("v3", "0"), x64 ? "oc-x64/linux" : "oc-arm64/linux");
	setenv("ABX_INSTALL_AVX2", "0", 1);
	assert_int_equal(manifest_cpu_avx2(), 0);
	setenv("ABX_INSTALL_AVX2", "1", 1);
	assert_int_equal(manifest_cpu_avx2(), x64);
	unsetenv("ABX_INSTALL_AVX2");
	setenv("ABX_INSTALL_LIBC", "musl", 1);
	assert_string_equal(baseline_bin("v3", "1"), x64 ? "oc-x64/linuxmusl" : "oc-arm64/linuxmusl");
	unsetenv("ABX_INSTALL_LIBC");
	/* not a level: the configuration does not load, the level stays */
	load_config("v4", 0);
	load_config("x86-64-v3", 0);
	load_config("auto", 1);
	assert_int_equal(config_cpu_level(), 0);
}

/* A lockfile v3 whose root package resolves at url. */
static char *
lock_text(const char *url)
{
	static char t[2048];

	snprintf(t, sizeof(t),
	         "{\"name\": \"w\", \"lockfileVersion\": 3, \"requires\": true, \"packages\": {\"\": "
	         "{\"name\": \"w\", \"dependencies\": {\"@openai/codex\": \"0.1.0\"}}, "
	         "\"node_modules/@openai/codex\": {\"version\": \"0.1.0\", \"resolved\": \"%s\", "
	         "\"integrity\": \"%s\", \"bin\": {\"codex\": \"bin/codex.js\"}}}}",
	         url, sri512);
	return t;
}

static const char *mirror;

static int
check_lock(const char *text, struct err *e)
{
	manifest_t *m = new_manifest();
	int rc;

	snprintf(m->source.package, sizeof(m->source.package), "@openai/codex");
	snprintf(m->source.lock, sizeof(m->source.lock), "codex/package-lock.json");
	err_clear(e);
	rc = manifest_npm_check_lock(m, text, strlen(text), mirror, e);
	free(m);
	return rc;
}

static void
test_lock_checked(void **state)
{
	const char *good = "https://registry.npmjs.org/@openai/codex/-/codex-0.1.0.tgz";
	const char *other = "https://npm.example.com/@openai/codex/-/codex-0.1.0.tgz";
	struct err e = {0};

	mirror = NULL;
	assert_int_equal(check_lock(lock_text(good), &e), 0);

	/* a host the manifest does not list, named with the file and the lockfile */
	assert_int_equal(check_lock(lock_text(other), &e), -1);
	assert_string_equal(e.code, "install.manifest_invalid");
	assert_non_null(strstr(e.msg, "t.json: lockfile codex/package-lock.json: "));
	assert_non_null(strstr(e.msg, "npm.example.com"));

	/* ... unless it is the npm mirror's host */
	mirror = "https://npm.example.com/";
	assert_int_equal(check_lock(lock_text(other), &e), 0);
	/* a mirror that is not https names no host */
	mirror = "http://npm.example.com/";
	assert_int_equal(check_lock(lock_text(other), &e), -1);
	mirror = NULL;

	/* not JSON keeps its json.* code, still naming the lockfile */
	assert_int_equal(check_lock("{\"lockfileVersion\": 3, \"packages\": {", &e), -1);
	assert_string_equal(e.code, "json.syntax");
	assert_non_null(strstr(e.msg, "t.json: lockfile codex/package-lock.json: "));

	/* a rule broken inside the lockfile is manifest_invalid */
	assert_int_equal(check_lock("{\"lockfileVersion\": 1, \"dependencies\": {}}", &e), -1);
	assert_string_equal(e.code, "install.manifest_invalid");
}

static int
setup(void **state)
{
	struct digest d;

	digest_buf(DIGEST_SHA512, "x", 1, &d);
	digest_sri(&d, sri512);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fields_refused),  cmocka_unit_test(test_field_too_long),
	    cmocka_unit_test(test_fields_accepted), cmocka_unit_test(test_bin_placeholders),
	    cmocka_unit_test(test_cpu_level),       cmocka_unit_test(test_lock_checked),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
