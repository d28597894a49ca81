/* Manifests: hostile and broken manifests first, then the
 * requires graph, sets with overrides, and the built-in manifests. */
#include "unit.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "pkg/manifest.h"
#include "net/hostrule.h"
#include "base/fs.h"
#include "pkg/manifests_embed.h"

static const struct manifest_opts x64 = {.platform = "linux-x64"};

#define SHA_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SHA_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* A valid tarball manifest with one substitution point for tests. */
static char *
tarball(const char *name, const char *requires, const char *extra, const char *x64sha)
{
	static char buf[8192];

	snprintf(buf, sizeof(buf),
	         "{\"schema\":1,\"name\":\"%s\",\"binary\":\"%s-bin\",\"version\":\"1.2.3\",%s"
	         "\"source\":{\"type\":\"tarball\",\"bin\":\"bin/t\",\"strip_components\":1,"
	         "\"platforms\":{\"linux-x64\":{\"url\":\"https://dl.example.com/t-x64.tgz\"%s%s%s},"
	         "\"linux-arm64\":{\"url\":\"https://dl.example.com/t-arm64.tgz\",\"sha256\":\"" SHA_B
	         "\"}}},"
	         "\"hosts\":[\"dl.example.com\"],\"verify\":{\"argv\":[\"{bin}\",\"--version\"],\"expect\":"
	         "\"1.2\"}%s%s}",
	         name, name, requires ? requires : "", x64sha ? ",\"sha256\":\"" : "", x64sha ? x64sha : "",
	         x64sha ? "\"" : "", extra ? "," : "", extra ? extra : "");
	return buf;
}

static int
parse(manifest_t *m, const char *text, const struct manifest_opts *o, struct err *e)
{
	return manifest_parse(m, "t.json", "/nonexistent", text, strlen(text), o, e);
}

static void
expect_invalid(const char *text, const char *path_and_what)
{
	manifest_t *m = malloc(sizeof(*m));
	struct err e = {0};

	err_clear(&e);
	assert_int_equal(parse(m, text, &x64, &e), -1);
	assert_string_equal(e.code, "install.manifest_invalid");
	if (strstr(e.msg, path_and_what) == NULL)
		fail_msg("message '%s' lacks '%s'", e.msg, path_and_what);
	assert_non_null(strstr(e.msg, "t.json: "));
	free(m);
}

static void
test_not_json_keeps_json_code(void **state)
{
	manifest_t *m = malloc(sizeof(*m));
	struct err e = {0};

	assert_int_equal(parse(m, "{\"schema\":1,", &x64, &e), -1);
	assert_string_equal(e.code, "json.syntax");
	assert_non_null(strstr(e.msg, "t.json:"));
	assert_int_equal(parse(m, "{\"schema\":1,\"schema\":1}", &x64, &e), -1);
	assert_string_equal(e.code, "json.syntax");
	assert_non_null(strstr(e.msg, "duplicate"));
	/* A hidden second platform entry: refused by the parser, with its place,
	 * so no lookup can take "linux-x64\u0000" for "linux-x64". */
	assert_int_equal(
	    parse(m,
	          "{\"schema\":1,\"name\":\"t\",\"binary\":\"t\",\"version\":\"1\",\"hosts\":[\"h\"],"
	          "\"verify\":{\"argv\":[\"{bin}\"]},\"source\":{\"type\":\"tarball\",\"bin\":\"b\","
	          "\"platforms\":{\"linux-x64\":{\"url\":\"https://h/x\",\"sha256\":\"" SHA_A "\"},\n"
	          "\"linux-x64\\u0000\":{\"url\":\"https://h/evil\",\"sha256\":\"" SHA_A "\"}}}}",
	          &x64, &e),
	    -1);
	assert_string_equal(e.code, "json.syntax");
	if (strstr(e.msg, "t.json:2:11: \\u0000 in an object key") == NULL)
		fail_msg("got %s", e.msg);
	free(m);
}

static void
test_unknown_fields_named_by_path(void **state)
{
	expect_invalid(tarball("t", NULL, "\"colour\":\"red\"", SHA_A), "$.colour: unknown field");
	expect_invalid(
	    "{\"schema\":1,\"name\":\"t\",\"binary\":\"t\",\"version\":\"1\",\"hosts\":[\"h\"],"
	    "\"verify\":{\"argv\":[\"{bin}\"],\"expekt\":\"x\"},\"source\":{\"type\":\"tarball\"}}",
	    "$.verify.expekt: unknown field");
	expect_invalid(
	    "{\"schema\":1,\"name\":\"t\",\"binary\":\"t\",\"version\":\"1\",\"hosts\":[\"h\"],"
	    "\"verify\":{\"argv\":[\"{bin}\"]},\"source\":{\"type\":\"tarball\",\"bin\":\"b\",\"platforms\":"
	    "{\"linux-x64\":{\"url\":\"https://h/x\",\"sha256\":\"" SHA_A "\",\"md5\":\"x\"}}}}",
	    "$.source.platforms.linux-x64.md5: unknown field");
}

static void
test_schema_and_types(void **state)
{
	expect_invalid("[]", "$: expected an object");
	expect_invalid("{\"schema\":2}", "$.schema: unsupported");
	expect_invalid("{\"name\":\"t\"}", "$.schema: missing");
	expect_invalid("{\"schema\":1,\"name\":\"Bad Name\"}", "$.name: must match");
	expect_invalid("{\"schema\":1,\"name\":\"t\",\"binary\":\"../x\"}", "$.binary");
	expect_invalid("{\"schema\":1,\"name\":\"t\",\"binary\":\"t\",\"version\":7}",
	               "$.version: expected a string");
	expect_invalid("{\"schema\":1,\"name\":\"t\",\"binary\":\"t\",\"version\":\"1\",\"hosts\":[],"
	               "\"source\":{}}",
	               "$.hosts: empty");
	expect_invalid("{\"schema\":1,\"name\":\"t\",\"binary\":\"t\",\"version\":\"1\",\"hosts\":[\"h\"],"
	               "\"verify\":{\"argv\":[\"{bin}\"]},\"source\":{\"type\":\"pip\"}}",
	               "$.source.type: unknown source type 'pip'");
	expect_invalid("{\"schema\":1,\"name\":\"t\",\"binary\":\"t\",\"version\":\"1\",\"hosts\":[\"h\"],"
	               "\"verify\":{\"argv\":[\"sh\",\"-c\",\"x\"]},\"source\":{\"type\":\"tarball\"}}",
	               "$.verify.argv: the first word must be {bin}");
}

/* unpacked_size: bytes per platform of the manifest, each once; what
 * manifest_unpacked_size answers. */
static void
test_unpacked_size(void **state)
{
	manifest_t *m = malloc(sizeof(*m));
	struct err e = {0};
	const char *plats = "\"platforms\":[\"linux-x64\"],";

	expect_invalid(tarball("t", NULL, "\"unpacked_size\":7", SHA_A),
	               "$.unpacked_size: expected an object");
	expect_invalid(tarball("t", NULL, "\"unpacked_size\":{\"linux-x64\":0}", SHA_A),
	               "$.unpacked_size.linux-x64: expected an integer number of bytes");
	expect_invalid(tarball("t", NULL, "\"unpacked_size\":{\"linux-x64\":1.5}", SHA_A),
	               "$.unpacked_size.linux-x64: expected an integer");
	expect_invalid(tarball("t", NULL, "\"unpacked_size\":{\"linux-x64\":\"9\"}", SHA_A),
	               "$.unpacked_size.linux-x64: expected an integer");
	expect_invalid(tarball("t", NULL, "\"unpacked_size\":{\"linux-x64\":1099511627777}", SHA_A),
	               "$.unpacked_size.linux-x64: expected an integer");
	expect_invalid(tarball("t", NULL, "\"unpacked_size\":{\"darwin-x64\":5}", SHA_A),
	               "$.unpacked_size.darwin-x64: not a platform of the manifest");
	/* a platform the manifest does not list */
	expect_invalid(tarball("t", plats, "\"unpacked_size\":{\"linux-arm64\":5}", SHA_A),
	               "$.unpacked_size.linux-arm64: not a platform of the manifest");

	err_clear(&e);
	assert_int_equal(parse(m,
	                       tarball("t", NULL,
	                               "\"unpacked_size\":{\"linux-x64\":444596224,"
	                               "\"linux-arm64\":1099511627776}",
	                               SHA_A),
	                       &x64, &e),
	                 0);
	assert_true(manifest_unpacked_size(m, "linux-x64") == 444596224u);
	assert_true(manifest_unpacked_size(m, "linux-arm64") == (1ull << 40));
	assert_int_equal(parse(m, tarball("t", NULL, NULL, SHA_A), &x64, &e), 0);
	assert_true(manifest_unpacked_size(m, "linux-x64") == 0);
	free(m);
}

static void
test_no_trust_on_first_use(void **state)
{
	manifest_t *m = malloc(sizeof(*m));
	struct manifest_opts unp = {.platform = "linux-x64", .allow_unpinned = 1};
	struct manifest_opts arm = {.platform = "linux-arm64"};
	struct err e = {0};

	/* the running platform lacks a digest: refused */
	expect_invalid(tarball("t", NULL, NULL, NULL), "$.source.platforms.linux-x64.sha256: missing");
	/* the other platform is pinned: loading for it works */
	assert_int_equal(parse(m, tarball("t", NULL, NULL, NULL), &arm, &e), 0);
	assert_int_equal(m->unpinned, 0);
	/* ABX_INSTALL_UNPINNED lets it load, marked */
	assert_int_equal(parse(m, tarball("t", NULL, NULL, NULL), &unp, &e), 0);
	assert_int_equal(m->unpinned, 1);
	/* a digest that is not 64 lowercase hex digits */
	expect_invalid(tarball("t", NULL, NULL, "ABCDEF"), "sha256: not 64 lowercase hex");
	free(m);
}

static void
test_unpinned_refused_in_production(void **state)
{
	static struct config dev, prod;
	struct err e = {0};

	snprintf(prod.environment, sizeof(prod.environment), "production");
	setenv("ABX_INSTALL_UNPINNED", "1", 1);
	assert_int_equal(manifest_unpinned_allowed(&dev, &e), 1);
	assert_int_equal(manifest_unpinned_allowed(&prod, &e), -1);
	assert_string_equal(e.code, "config.invalid");
	unsetenv("ABX_INSTALL_UNPINNED");
	assert_int_equal(manifest_unpinned_allowed(&prod, &e), 0);
}

static void
test_hosts_and_urls(void **state)
{
	const char *hs[] = {"dl.example.com", "127.0.0.1:8443", "[::1]:9"};

	expect_invalid(
	    "{\"schema\":1,\"name\":\"t\",\"binary\":\"t\",\"version\":\"1\",\"hosts\":[\"h\"],"
	    "\"verify\":{\"argv\":[\"{bin}\"]},\"source\":{\"type\":\"tarball\",\"bin\":\"b\",\"platforms\":"
	    "{\"linux-x64\":{\"url\":\"https://evil.example/x\",\"sha256\":\"" SHA_A "\"}}}}",
	    "$.source.platforms.linux-x64.url: host evil.example is not in hosts");
	expect_invalid(
	    "{\"schema\":1,\"name\":\"t\",\"binary\":\"t\",\"version\":\"1\",\"hosts\":[\"h\"],"
	    "\"verify\":{\"argv\":[\"{bin}\"]},\"source\":{\"type\":\"tarball\",\"bin\":\"b\",\"platforms\":"
	    "{\"linux-x64\":{\"url\":\"http://h/x\",\"sha256\":\"" SHA_A "\"}}}}",
	    "not an https:// URL");
	expect_invalid(
	    "{\"schema\":1,\"name\":\"t\",\"binary\":\"t\",\"version\":\"1\",\"hosts\":[\"h\"],"
	    "\"verify\":{\"argv\":[\"{bin}\"]},\"source\":{\"type\":\"tarball\",\"bin\":\"b\",\"platforms\":"
	    "{\"linux-x64\":{\"url\":\"https://u:p@h/x\",\"sha256\":\"" SHA_A "\"}}}}",
	    "no userinfo");
	expect_invalid("{\"schema\":1,\"name\":\"t\",\"binary\":\"t\",\"version\":\"1\",\"hosts\":[\"h\"],"
	               "\"verify\":{\"argv\":[\"{bin}\"]},\"source\":{\"type\":\"tarball\",\"bin\":\"../"
	               "b\",\"platforms\":"
	               "{\"linux-x64\":{\"url\":\"https://h/x\",\"sha256\":\"" SHA_A "\"}}}}",
	               "$.source.bin: not a relative path");
	assert_true(hostrule_match(hs, 3, "DL.example.com", 443));
	assert_true(hostrule_match(hs, 3, "dl.example.com", 8443));
	assert_true(hostrule_match(hs, 3, "127.0.0.1", 8443));
	assert_false(hostrule_match(hs, 3, "127.0.0.1", 443));
	assert_true(hostrule_match(hs, 3, "::1", 9));
	assert_false(hostrule_match(hs, 3, "example.com", 443));
	assert_false(hostrule_match(hs, 3, "xdl.example.com", 443));
}

/* "libc" and "env": what a tool needs of the image and what its vendor's
 * launcher sets; bad values refused by path. */
static void
test_libc_and_env(void **state)
{
	manifest_t *m = malloc(sizeof(*m));
	struct err e = {0};

	(void)state;
	assert_int_equal(parse(m,
	                       tarball("t", NULL,
	                               "\"libc\":[\"musl\",\"glibc\"],\"env\":{\"A_1\":\"{tree}/x{tree}\","
	                               "\"B\":null}",
	                               SHA_A),
	                       &x64, &e),
	                 0);
	assert_int_equal(m->libc, MANIFEST_LIBC_GLIBC | MANIFEST_LIBC_MUSL);
	assert_int_equal(m->nenv, 2);
	assert_string_equal(m->env[0].name, "A_1");
	assert_string_equal(m->env[0].value, "{tree}/x{tree}");
	assert_int_equal(m->env[1].unset, 1);
	assert_int_equal(
	    parse(m,
	          tarball("t", NULL, "\"libc\":[\"glibc\"],\"libs\":[\"libstdc++.so.6\",\"libgcc_s.so.1\"]",
	                  SHA_A),
	          &x64, &e),
	    0);
	assert_int_equal(m->nlibs, 2);
	assert_string_equal(m->libs[1], "libgcc_s.so.1");
	assert_int_equal(parse(m, tarball("t", NULL, NULL, SHA_A), &x64, &e), 0);
	assert_int_equal(m->libc, 0);
	assert_int_equal(m->nenv, 0);
	free(m);
	expect_invalid(tarball("t", NULL, "\"libc\":[]", SHA_A), "$.libc: expected an array");
	expect_invalid(tarball("t", NULL, "\"libc\":\"glibc\"", SHA_A), "$.libc: expected an array");
	expect_invalid(tarball("t", NULL, "\"libc\":[\"bionic\"]", SHA_A), "$.libc[0]: expected");
	expect_invalid(tarball("t", NULL, "\"libc\":[\"musl\",\"musl\"]", SHA_A), "$.libc[1]: duplicate");
	expect_invalid(tarball("t", NULL, "\"libs\":[\"libstdc++.so.6\"]", SHA_A),
	               "$.libs: only with $.libc");
	expect_invalid(tarball("t", NULL, "\"libc\":[\"glibc\"],\"libs\":[\"../x.so\"]", SHA_A),
	               "$.libs[0]: not a library file name");
	expect_invalid(tarball("t", NULL, "\"libc\":[\"glibc\"],\"libs\":[\"libfoo\"]", SHA_A),
	               "$.libs[0]: not a library file name");
	expect_invalid(tarball("t", NULL, "\"env\":[]", SHA_A), "$.env: expected an object");
	expect_invalid(tarball("t", NULL, "\"env\":{\"1A\":\"x\"}", SHA_A), "$.env.1A: not a variable name");
	expect_invalid(tarball("t", NULL, "\"env\":{\"A-B\":\"x\"}", SHA_A),
	               "$.env.A-B: not a variable name");
	expect_invalid(tarball("t", NULL, "\"env\":{\"PATH\":\"x\"}", SHA_A), "$.env.PATH: PATH, LD_*");
	expect_invalid(tarball("t", NULL, "\"env\":{\"LD_PRELOAD\":\"x\"}", SHA_A), "$.env.LD_PRELOAD: PATH");
	expect_invalid(tarball("t", NULL, "\"env\":{\"ABX_SERVER_TOKEN\":null}", SHA_A),
	               "$.env.ABX_SERVER_TOKEN");
	expect_invalid(tarball("t", NULL, "\"env\":{\"A\":1}", SHA_A), "$.env.A: expected a string or null");
	expect_invalid(tarball("t", NULL, "\"env\":{\"A\":\"{bin}\"}", SHA_A),
	               "$.env.A: unknown placeholder");
	expect_invalid(tarball("t", NULL,
	                       "\"env\":{\"A\":null,\"B\":null,\"C\":null,\"D\":null,\"E\":null,\"F\":null,"
	                       "\"G\":null,\"H\":null,\"I\":null}",
	                       SHA_A),
	               "$.env: more than 8");
}

/* A tarball manifest whose verify object is {"argv":["{bin}"],<members>}. */
static char *
with_verify(const char *members)
{
	static char buf[8192];

	snprintf(buf, sizeof(buf),
	         "{\"schema\":1,\"name\":\"t\",\"binary\":\"t\",\"version\":\"1.2.3\","
	         "\"source\":{\"type\":\"tarball\",\"bin\":\"bin/t\","
	         "\"platforms\":{\"linux-x64\":{\"url\":\"https://dl.example.com/t.tgz\",\"sha256\":\"" SHA_A
	         "\"}}},"
	         "\"hosts\":[\"dl.example.com\"],\"verify\":{\"argv\":[\"{bin}\"],%s}}",
	         members);
	return buf;
}

/* "verify.env": literal variables added to the verify run's environment;
 * a name the run keeps for itself, or one that loads other code, is
 * refused with its path and why. */
static void
test_verify_env(void **state)
{
	manifest_t *m = malloc(sizeof(*m));
	struct err e = {0};

	(void)state;
	assert_int_equal(
	    parse(m, with_verify("\"env\":{\"GEMINI_CLI_NO_RELAUNCH\":\"true\",\"_X9\":\"\"}"), &x64, &e), 0);
	assert_int_equal(m->verify.nenv, 2);
	assert_string_equal(m->verify.env[0].name, "GEMINI_CLI_NO_RELAUNCH");
	assert_string_equal(m->verify.env[0].value, "true");
	assert_string_equal(m->verify.env[1].name, "_X9");
	assert_int_equal(m->nenv, 0);
	assert_int_equal(parse(m, with_verify("\"expect\":\"1\""), &x64, &e), 0);
	assert_int_equal(m->verify.nenv, 0);
	free(m);
	expect_invalid(with_verify("\"env\":[]"), "$.verify.env: expected an object");
	expect_invalid(with_verify("\"env\":{\"a\":\"x\"}"), "$.verify.env.a: not a variable name ([A-Z_]");
	expect_invalid(with_verify("\"env\":{\"9A\":\"x\"}"), "$.verify.env.9A: not a variable name");
	expect_invalid(with_verify("\"env\":{\"A-B\":\"x\"}"), "$.verify.env.A-B: not a variable name");
	expect_invalid(with_verify("\"env\":{\"\":\"x\"}"), "$.verify.env.: not a variable name");
	expect_invalid(
	    with_verify(
	        "\"env\":{\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\":\"x\"}"),
	    "not a variable name");
	expect_invalid(with_verify("\"env\":{\"PATH\":\"/x\"}"), "$.verify.env.PATH: refused: PATH, HOME");
	expect_invalid(with_verify("\"env\":{\"HOME\":\"/x\"}"), "$.verify.env.HOME: refused");
	expect_invalid(with_verify("\"env\":{\"LC_CTYPE\":\"x\"}"), "$.verify.env.LC_CTYPE: refused");
	expect_invalid(with_verify("\"env\":{\"LANG\":\"x\"}"), "$.verify.env.LANG: refused");
	expect_invalid(with_verify("\"env\":{\"LD_PRELOAD\":\"/x.so\"}"),
	               "$.verify.env.LD_PRELOAD: refused: LD_*");
	expect_invalid(with_verify("\"env\":{\"NODE_OPTIONS\":\"--require=/x\"}"),
	               "$.verify.env.NODE_OPTIONS: refused");
	expect_invalid(with_verify("\"env\":{\"NODE_PATH\":\"/x\"}"), "$.verify.env.NODE_PATH: refused");
	expect_invalid(with_verify("\"env\":{\"ABX_TOOLS_DIR\":\"/x\"}"),
	               "$.verify.env.ABX_TOOLS_DIR: refused: ABX_*");
	expect_invalid(with_verify("\"env\":{\"A\":null}"), "$.verify.env.A: expected a string");
	expect_invalid(with_verify("\"env\":{\"A\":1}"), "$.verify.env.A: expected a string");
	expect_invalid(with_verify("\"env\":{\"A\":\"a\\nb\"}"), "$.verify.env.A: not printable ASCII");
	expect_invalid(with_verify("\"env\":{\"A\":\"\\u00e9\"}"), "$.verify.env.A: not printable ASCII");
	expect_invalid(with_verify("\"env\":{\"A\":\"{tree}/x\"}"), "$.verify.env.A: placeholders are not");
	expect_invalid(with_verify("\"env\":{\"A\":\""
	                           "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	                           "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	                           "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	                           "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"),
	               "$.verify.env.A: longer than 255 bytes");
	expect_invalid(
	    with_verify("\"env\":{\"A\":\"\",\"B\":\"\",\"C\":\"\",\"D\":\"\",\"E\":\"\",\"F\":\"\","
	                "\"G\":\"\",\"H\":\"\",\"I\":\"\"}"),
	    "$.verify.env: more than 8 variables");
	expect_invalid(with_verify("\"envs\":{}"), "$.verify");
}

static void
test_versions_and_requires(void **state)
{
	struct manifest_require r;
	struct err e = {0};

	assert_true(manifest_version_cmp("22.23.5", "18.0.0") > 0);
	assert_true(manifest_version_cmp("v18.0.0", "18") == 0);
	assert_true(manifest_version_cmp("9.1", "10") < 0);
	assert_true(manifest_version_cmp("1.0.0-rc.1", "1.0.0") < 0);
	assert_true(manifest_version_cmp("1.0.0", "1.0.0-rc.1") > 0);
	assert_true(manifest_version_cmp("1.2", "1.2.0") == 0);
	assert_true(manifest_version_ok("1.0.0-rc.1+build_2", MANIFEST_VERSION_MAX));
	assert_false(manifest_version_ok("", MANIFEST_VERSION_MAX));
	assert_false(manifest_version_ok("-1", MANIFEST_VERSION_MAX));
	assert_false(manifest_version_ok(".1", MANIFEST_VERSION_MAX));
	assert_false(manifest_version_ok("1/2", MANIFEST_VERSION_MAX));
	assert_false(manifest_version_ok("1 2", MANIFEST_VERSION_MAX));
	assert_true(manifest_version_ok("1234", 5));
	assert_false(manifest_version_ok("12345", 5));
	assert_int_equal(manifest_parse_require("node-runtime>=18", &r, &e), 0);
	assert_string_equal(r.name, "node-runtime");
	assert_string_equal(r.min, "18");
	assert_int_equal(manifest_parse_require("node-runtime", &r, &e), 0);
	assert_string_equal(r.min, "");
	assert_int_equal(manifest_parse_require("node-runtime>=", &r, &e), -1);
	assert_int_equal(manifest_parse_require(">=1", &r, &e), -1);
	assert_int_equal(manifest_parse_require("Node>=1", &r, &e), -1);
	expect_invalid(tarball("t", "\"requires\":[\"t\"],", NULL, SHA_A), "cannot require itself");
	expect_invalid(tarball("t", "\"requires\":[\"a\",\"a\"],", NULL, SHA_A), "$.requires[1]: duplicate");
}

/* A directory of manifests for set tests. */
static char dir[64];

static void
put(const char *name, const char *text)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int
setup_dir(void **state)
{
	return unit_mkdtemp(dir, sizeof(dir), "manifest");
}

static int
teardown_dir(void **state)
{
	return unit_rmtree(dir);
}

static void
test_set_requires_cycle_and_min(void **state)
{
	struct manifest_set s;
	struct err e = {0};
	char order[8][MANIFEST_NAME_MAX];
	const manifest_t *m;

	put("a.json", tarball("a", "\"requires\":[\"c\",\"b>=1.0\"],", NULL, SHA_A));
	put("b.json", tarball("b", NULL, NULL, SHA_A));
	put("c.json", tarball("c", "\"requires\":[\"b\"],", NULL, SHA_A));
	put("x.json", tarball("x", "\"requires\":[\"y\"],", NULL, SHA_A));
	put("y.json", tarball("y", "\"requires\":[\"z\"],", NULL, SHA_A));
	put("z.json", tarball("z", "\"requires\":[\"x\"],", NULL, SHA_A));
	put("old.json", tarball("old", "\"requires\":[\"b>=2\"],", NULL, SHA_A));
	put("lost.json", tarball("lost", "\"requires\":[\"nowhere\"],", NULL, SHA_A));
	put("misnamed.json", tarball("other", NULL, NULL, SHA_A));
	put("broken.json", "{");
	assert_int_equal(manifest_set_open(&s, dir, &x64, &e), 0);

	m = manifest_get(&s, "a", &e);
	assert_non_null(m);
	assert_int_equal(m->nrequires, 2);
	assert_string_equal(m->requires[1].min, "1.0");
	/* dependencies first, then name order among independent ones */
	assert_int_equal(manifest_closure(&s, "a", order, 8, &e), 3);
	assert_string_equal(order[0], "b");
	assert_string_equal(order[1], "c");
	assert_string_equal(order[2], "a");

	assert_null(manifest_get(&s, "x", &e));
	assert_string_equal(e.code, "install.manifest_invalid");
	assert_non_null(strstr(e.msg, "dependency cycle x -> y -> z -> x"));
	assert_null(manifest_get(&s, "y", &e));
	assert_non_null(strstr(e.msg, "cycle"));

	assert_null(manifest_get(&s, "old", &e));
	assert_non_null(strstr(e.msg, "requires b>=2 but its manifest has version 1.2.3"));
	assert_null(manifest_get(&s, "lost", &e));
	assert_non_null(strstr(e.msg, "$.requires[0]: requires unknown tool 'nowhere'"));
	assert_null(manifest_get(&s, "misnamed", &e));
	assert_non_null(strstr(e.msg, "does not match the file name"));
	assert_null(manifest_get(&s, "broken", &e));
	assert_string_equal(e.code, "json.syntax");
	assert_non_null(strstr(e.msg, "broken.json"));
	/* one broken manifest does not break the others */
	assert_non_null(manifest_get(&s, "b", &e));
	assert_null(manifest_get(&s, "nope", &e));
	assert_string_equal(e.code, "not_found");
	assert_non_null(manifest_find_binary(&s, "c-bin"));
	assert_null(manifest_find_binary(&s, "zzz"));
	manifest_set_close(&s);
}

static void
test_set_override_and_unpinned_files(void **state)
{
	struct manifest_set s;
	struct manifest_opts unp = {.platform = "linux-x64", .allow_unpinned = 1};
	struct err e = {0};
	const manifest_t *m;
	char *t;

	/* a directory manifest named like a built-in one overrides it */
	t = tarball("node-runtime", NULL, NULL, SHA_A);
	put("node-runtime.json", t);
	put("cursor.unpinned.json", tarball("cursor", NULL, NULL, NULL));
	assert_int_equal(manifest_set_open(&s, dir, &x64, &e), 0);
	m = manifest_get(&s, "node-runtime", &e);
	assert_non_null(m);
	assert_string_equal(m->version, "1.2.3");
	assert_int_equal(m->embedded, 0);
	/* unpinned files are not read unless unpinned installs are allowed */
	assert_null(manifest_get(&s, "cursor", &e));
	manifest_set_close(&s);
	assert_int_equal(manifest_set_open(&s, dir, &unp, &e), 0);
	m = manifest_get(&s, "cursor", &e);
	assert_non_null(m);
	assert_int_equal(m->unpinned, 1);
	manifest_set_close(&s);
	assert_int_equal(manifest_set_open(&s, "/nonexistent/dir", &x64, &e), -1);
	assert_string_equal(e.code, "config.invalid");
}

/* A file over MANIFEST_MAX_BYTES is told by fs_read_input's e->sys (EFBIG),
 * not by its message: the manifest's own code and "larger than". */
static void
test_too_large_file(void **state)
{
	manifest_t *m = malloc(sizeof(*m));
	char path[256], *big = malloc(MANIFEST_MAX_BYTES + 2);
	struct err e = {0};

	assert_non_null(m);
	assert_non_null(big);
	memset(big, ' ', MANIFEST_MAX_BYTES + 1);
	big[MANIFEST_MAX_BYTES + 1] = '\0';
	put("big.json", big);
	snprintf(path, sizeof(path), "%s/big.json", dir);
	assert_int_equal(manifest_load_file(m, path, &x64, &e), -1);
	assert_string_equal(e.code, "install.manifest_invalid");
	assert_non_null(strstr(e.msg, "larger than"));
	free(big);
	free(m);
}

static void
test_npm_lock_validation(void **state)
{
	manifest_t *m = malloc(sizeof(*m));
	char path[256];
	struct err e = {0};
	const char *man =
	    "{\"schema\":1,\"name\":\"codex\",\"binary\":\"codex\",\"version\":\"0.1.0\","
	    "\"requires\":[\"node-runtime>=18\"],\"source\":{\"type\":\"npm-lock\",\"package\":\"@openai/"
	    "codex\","
	    "\"lock\":\"codex/package-lock.json\",\"package_json\":\"codex/package.json\","
	    "\"bin\":\"node_modules/.bin/codex\",\"allow_scripts\":false},\"hosts\":[\"registry.npmjs.org\"],"
	    "\"verify\":{\"argv\":[\"{bin}\",\"--version\"]},\"platforms\":[\"linux-x64\",\"linux-arm64\"]}";
	const char *good = "{\"lockfileVersion\":3,\"packages\":{\"\":{},\"node_modules/@openai/codex\":{"
	                   "\"version\":\"0.1.0\",\"resolved\":\"https://registry.npmjs.org/@openai/codex/-/"
	                   "codex-0.1.0.tgz\","
	                   "\"integrity\":\"sha512-pKvURIxJVi2CgRXROh/M6pJ/"
	                   "UrTVRZKX+LQ+QtqJI4vBNibkPcs43bCCSIkn7JBPtCBXRDmD6IWFF51QVRr+Yg==\"}}}";
	/* the same lockfile in version 2: other bytes, still valid */
	char good2[1024];
	char sha_before[65];

	snprintf(path, sizeof(path), "%s/codex", dir);
	mkdir(path, 0700);
	put("codex/package-lock.json", good);
	snprintf(path, sizeof(path), "%s/codex.json", dir);
	put("codex.json", man);
	assert_int_equal(manifest_load_file(m, path, &x64, &e), 0);
	assert_int_equal(m->source.type, MANIFEST_SRC_NPM_LOCK);
	assert_string_equal(m->source.package, "@openai/codex");
	assert_int_equal(strlen(m->source.lock_sha256), 64);
	memcpy(sha_before, m->sha256, 65);
	snprintf(good2, sizeof(good2), "%s", good);
	good2[strlen("{\"lockfileVersion\":")] = '2';

	/* the lockfile is part of the tool's identity */
	put("codex/package-lock.json", good2);
	assert_int_equal(manifest_load_file(m, path, &x64, &e), 0);
	assert_string_not_equal(m->sha256, sha_before);

	put("codex/package-lock.json",
	    "{\"lockfileVersion\":3,\"packages\":{\"node_modules/a\":{\"version\":\"1.0.0\","
	    "\"resolved\":\"https://registry.npmjs.org/a/-/a-1.0.0.tgz\"}}}");
	assert_int_equal(manifest_load_file(m, path, &x64, &e), -1);
	assert_non_null(strstr(e.msg, "$.packages[\"node_modules/a\"].integrity: missing"));

	put("codex/package-lock.json",
	    "{\"lockfileVersion\":3,\"packages\":{\"node_modules/a\":{"
	    "\"version\":\"1.0.0\",\"resolved\":\"https://evil.example/a/-/"
	    "a-1.0.0.tgz\",\"integrity\":\"sha512-pKvURIxJVi2CgRXROh/M6pJ/"
	    "UrTVRZKX+LQ+QtqJI4vBNibkPcs43bCCSIkn7JBPtCBXRDmD6IWFF51QVRr+Yg==\"}}}");
	assert_int_equal(manifest_load_file(m, path, &x64, &e), -1);
	assert_non_null(strstr(e.msg, "host evil.example is not in hosts"));

	put("codex/package-lock.json", "{\"lockfileVersion\":1,\"dependencies\":{}}");
	assert_int_equal(manifest_load_file(m, path, &x64, &e), -1);
	assert_non_null(strstr(e.msg, "lockfileVersion"));

	put("codex/package-lock.json", good);
	{
		char bad[2048];
		const char *at = strstr(man, "\"allow_scripts\":false");
		snprintf(bad, sizeof(bad), "%.*s\"allow_scripts\":true%s", (int)(at - man), man, at + 21);
		put("codex.json", bad);
		assert_int_equal(manifest_load_file(m, path, &x64, &e), -1);
		assert_non_null(strstr(e.msg, "$.source.allow_scripts: must be false"));
	}
	unlink(path);
	put("codex/package-lock.json", good);
	assert_int_equal(manifest_load_file(m, path, &x64, &e), -1);
	assert_string_equal(e.code, "install.manifest_invalid");
	free(m);
}

/* Every embedded file inflates to the bytes of its file in manifests/
 * (the unit tests run from the top of the tree), NUL-terminated, and a
 * second call returns the same bytes without inflating again. */
static void
test_embedded_bytes(void **state)
{
	char path[512], *want;
	const char *got;
	size_t len;
	struct err e = {0};
	int i;

	for (i = 0; embedded_manifests[i].path != NULL; i++) {
		struct embedded_file *f = &embedded_manifests[i];
		snprintf(path, sizeof(path), "manifests/%s", f->path);
		assert_int_equal(fs_read_input(path, 1 << 20, &want, &len, &e), 0);
		got = embedded_text(f, &e);
		assert_non_null(got);
		assert_int_equal(f->len, len);
		assert_memory_equal(got, want, len);
		assert_int_equal(got[len], '\0');
		assert_ptr_equal(embedded_text(f, &e), got);
		free(want);
	}
	assert_true(i >= 1);
}

/* Every built-in manifest loads: a broken one would ship in the binary. */
static void
test_builtin_manifests_load(void **state)
{
	struct manifest_set s;
	struct manifest_opts all = {.platform = "all"}, arm = {.platform = "linux-arm64"};
	struct err e = {0};
	const manifest_t *m;
	int i, n = 0;

	for (i = 0; embedded_manifests[i].path != NULL; i++)
		assert_null(strstr(embedded_manifests[i].path, ".unpinned."));
	assert_int_equal(manifest_set_open(&s, NULL, &all, &e), 0);
	for (i = 0; i < s.n; i++) {
		m = manifest_get(&s, s.ent[i].name, &e);
		if (m == NULL)
			fail_msg("built-in manifest %s: %s: %s", s.ent[i].name, e.code, e.msg);
		n++;
	}
	assert_true(n >= 1);
	m = manifest_get(&s, "node-runtime", &e);
	assert_non_null(m);
	assert_string_equal(m->binary, "node");
	assert_int_equal(m->source.strip_components, 1);
	assert_non_null(manifest_artifact(m, "linux-x64"));
	assert_non_null(manifest_artifact(m, "linux-arm64"));
	assert_string_equal(m->path.min, "18.0.0");
	assert_int_equal(m->embedded, 1);
	manifest_set_close(&s);
	assert_int_equal(manifest_set_open(&s, NULL, &arm, &e), 0);
	assert_non_null(manifest_get(&s, "node-runtime", &e));
	manifest_set_close(&s);
}

/* "run": {"argv", "dialect"}: the dialect is one of the known names; a
 * run array, or an object without one, has none. */
static void
test_run_dialect(void **state)
{
	manifest_t *m = malloc(sizeof(*m));
	struct err e = {0};

	assert_int_equal(
	    parse(m,
	          tarball("t", NULL,
	                  "\"run\":{\"argv\":[\"{bin}\",\"{prompt}\"],\"dialect\":\"claude-code\"}", SHA_A),
	          &x64, &e),
	    0);
	assert_string_equal(m->dialect, "claude-code");
	assert_int_equal(m->run.n, 2);
	assert_int_equal(parse(m, tarball("t", NULL, "\"run\":{\"argv\":[\"{bin}\"]}", SHA_A), &x64, &e), 0);
	assert_string_equal(m->dialect, "");
	assert_int_equal(parse(m, tarball("t", NULL, "\"run\":[\"{bin}\"]", SHA_A), &x64, &e), 0);
	assert_string_equal(m->dialect, "");
	free(m);
	expect_invalid(tarball("t", NULL, "\"run\":{\"argv\":[\"{bin}\"],\"dialect\":\"claude\"}", SHA_A),
	               "$.run.dialect: unknown dialect 'claude' (known: raw, codex, claude-code, gemini)");
	expect_invalid(tarball("t", NULL, "\"run\":{\"argv\":[\"{bin}\"],\"dialect\":1}", SHA_A),
	               "$.run.dialect: expected a string");
	expect_invalid(
	    tarball("t", NULL, "\"run\":{\"argv\":[\"{bin}\"],\"dialect\":\"claude-code-x\"}", SHA_A),
	    "$.run.dialect: longer than 11 bytes");
}

/* "run": {"extra"}: the words every turn of a conversation passes; any
 * word (no {bin} first), 1..16 of them. */
static void
test_run_extra(void **state)
{
	manifest_t *m = malloc(sizeof(*m));
	struct err e = {0};

	assert_int_equal(parse(m,
	                       tarball("t", NULL,
	                               "\"run\":{\"argv\":[\"{bin}\"],\"dialect\":\"codex\","
	                               "\"extra\":[\"--allowedTools\",\"Bash\"]}",
	                               SHA_A),
	                       &x64, &e),
	                 0);
	assert_int_equal(m->run_extra.n, 2);
	assert_string_equal(m->run_extra.v[1], "Bash");
	assert_int_equal(parse(m, tarball("t", NULL, "\"run\":{\"argv\":[\"{bin}\"]}", SHA_A), &x64, &e), 0);
	assert_int_equal(m->run_extra.n, 0);
	free(m);
	expect_invalid(tarball("t", NULL, "\"run\":{\"argv\":[\"{bin}\"],\"extra\":\"--yolo\"}", SHA_A),
	               "$.run.extra: expected an array of strings");
	expect_invalid(tarball("t", NULL, "\"run\":{\"argv\":[\"{bin}\"],\"extra\":[]}", SHA_A),
	               "$.run.extra: empty");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_not_json_keeps_json_code),
	    cmocka_unit_test(test_run_extra),
	    cmocka_unit_test(test_unknown_fields_named_by_path),
	    cmocka_unit_test(test_schema_and_types),
	    cmocka_unit_test(test_unpacked_size),
	    cmocka_unit_test(test_no_trust_on_first_use),
	    cmocka_unit_test(test_unpinned_refused_in_production),
	    cmocka_unit_test(test_hosts_and_urls),
	    cmocka_unit_test(test_versions_and_requires),
	    cmocka_unit_test_setup_teardown(test_set_requires_cycle_and_min, setup_dir, teardown_dir),
	    cmocka_unit_test_setup_teardown(test_set_override_and_unpinned_files, setup_dir, teardown_dir),
	    cmocka_unit_test_setup_teardown(test_npm_lock_validation, setup_dir, teardown_dir),
	    cmocka_unit_test_setup_teardown(test_too_large_file, setup_dir, teardown_dir),
	    cmocka_unit_test(test_builtin_manifests_load),
	    cmocka_unit_test(test_embedded_bytes),
	    cmocka_unit_test(test_libc_and_env),
	    cmocka_unit_test(test_verify_env),
	    cmocka_unit_test(test_run_dialect),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
