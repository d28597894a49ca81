#include "unit.h"
#include "pkg/npmlock.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Lockfiles are built from entry snippets; SHA512 / SHA1 stand for valid
 * SRI strings of those algorithms. */
static char sri512[DIGEST_SRI_MAX], sri1[DIGEST_SRI_MAX], sri256[DIGEST_SRI_MAX];

static const char *hosts[] = {"registry.npmjs.org", "127.0.0.1:8443"};

static struct npmlock_opts
opts(void)
{
	struct npmlock_opts o = {
	    .package = "@openai/codex",
	    .hosts = hosts,
	    .nhosts = 2,
	    .os = "linux",
	    .cpu = "x64",
	    .libc = "glibc",
	};
	return o;
}

#define ROOT_ENTRY                                                                                           \
	"\"node_modules/@openai/codex\": {\"version\": \"0.1.0\", \"resolved\": "                            \
	"\"https://registry.npmjs.org/@openai/codex/-/codex-0.1.0.tgz\", \"integrity\": \"@512\", "          \
	"\"bin\": {\"codex\": \"bin/codex.js\"}}"

/* Expand @512/@1/@256 into the SRI strings. */
static char *
expand(const char *t)
{
	size_t cap = strlen(t) * 2 + 4096, o = 0;
	char *out = malloc(cap);

	assert_non_null(out);
	while (*t) {
		const char *rep = NULL;
		size_t skip = 0;
		if (strncmp(t, "@512", 4) == 0)
			rep = sri512, skip = 4;
		else if (strncmp(t, "@256", 4) == 0)
			rep = sri256, skip = 4;
		else if (strncmp(t, "@1\"", 3) == 0)
			rep = sri1, skip = 2;
		if (rep) {
			size_t n = strlen(rep);
			assert_true(o + n < cap);
			memcpy(out + o, rep, n);
			o += n;
			t += skip;
		} else {
			assert_true(o + 1 < cap);
			out[o++] = *t++;
		}
	}
	out[o] = '\0';
	return out;
}

/* A lockfile v3 with the root entry and extra entries (", ..." text). */
static int
load_with(struct npmlock *l, const struct npmlock_opts *o, const char *extra, struct err *e)
{
	char *t, *x;
	size_t n = strlen(extra) + 1024;
	int rc;

	t = malloc(n);
	assert_non_null(t);
	snprintf(t, n,
	         "{\"name\": \"w\", \"lockfileVersion\": 3, \"requires\": true, \"packages\": {\"\": "
	         "{\"dependencies\": {\"@openai/codex\": \"0.1.0\"}}, " ROOT_ENTRY "%s}}",
	         extra);
	x = expand(t);
	rc = npmlock_load(l, x, strlen(x), o, e);
	free(t);
	free(x);
	return rc;
}

static void
expect_bad(const char *extra, const char *code, const char *needle)
{
	struct npmlock l;
	struct err e = {0};
	struct npmlock_opts o = opts();

	memset(&e, 0, sizeof(e));
	if (load_with(&l, &o, extra, &e) != -1) {
		print_error("accepted: %s\n", extra);
		fail();
	}
	assert_string_equal(e.code, code);
	if (needle && !strstr(e.msg, needle)) {
		print_error("message '%s' lacks '%s'\n", e.msg, needle);
		fail();
	}
	assert_null(l.pkgs);
	npmlock_free(&l);
}

static void
load_raw_bad(const char *text, const char *code, const char *needle)
{
	struct npmlock l;
	struct err e = {0};
	struct npmlock_opts o = opts();
	char *x = expand(text);

	assert_int_equal(npmlock_load(&l, x, strlen(x), &o, &e), -1);
	assert_string_equal(e.code, code);
	if (needle && !strstr(e.msg, needle)) {
		print_error("message '%s' lacks '%s'\n", e.msg, needle);
		fail();
	}
	npmlock_free(&l);
	free(x);
}

static void
test_not_json_or_wrong_version(void **state)
{
	load_raw_bad("{\"lockfileVersion\": 3, \"packages\": {", "json.syntax", NULL);
	load_raw_bad("", "json.syntax", NULL);
	load_raw_bad("[]", "install.manifest_invalid", "not a JSON object");
	load_raw_bad("{\"lockfileVersion\": 1, \"dependencies\": {}}", "install.manifest_invalid",
	             "agent-sandbox-server lock");
	load_raw_bad("{\"lockfileVersion\": 2}", "install.manifest_invalid", "version 1");
	load_raw_bad("{\"lockfileVersion\": 4, \"packages\": {}}", "install.manifest_invalid",
	             "not supported");
	load_raw_bad("{\"lockfileVersion\": \"3\", \"packages\": {}}", "install.manifest_invalid", "integer");
	load_raw_bad("{\"lockfileVersion\": 3, \"packages\": []}", "install.manifest_invalid",
	             "not an object");
	load_raw_bad("{\"lockfileVersion\": 3, \"packages\": {}}", "install.manifest_invalid", "missing");
	/* Duplicate keys: the second would silently win in JavaScript. */
	load_raw_bad("{\"lockfileVersion\": 3, \"lockfileVersion\": 3, \"packages\": {}}", "json.syntax",
	             NULL);
	load_raw_bad(
	    "{\"lockfileVersion\": 3, \"packages\": {\"node_modules/a\": {}, \"node_modules/a\": {}}}",
	    "json.syntax", NULL);
}

static void
test_duplicate_key_inside_entry(void **state)
{
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"https://registry.npmjs.org/x/-/x-1.0.0.tgz\", \"integrity\": \"@512\", \"resolved\": "
	           "\"https://evil.example/x/-/x-1.0.0.tgz\"}",
	           "json.syntax", NULL);
}

static void
test_hostile_keys(void **state)
{
	static const char *keys[] = {
	    "node_modules/../x",
	    "node_modules/a/../../x",
	    "/node_modules/x",
	    "node_modules\\\\x",
	    "node_modules/a\\\\..\\\\b",
	    "node_modules//x",
	    "node_modules/.",
	    "node_modules/..",
	    "node_modules/",
	    "node_modules/x/",
	    "node_modules/@scope",
	    "node_modules/@scope/",
	    "node_modules/@/x",
	    "node_modules/@scope/x/y",
	    "node_modules/a/b",
	    "packages/workspace",
	    "x",
	    "node_modules/.bin",
	    "node_modules/a%2f..",
	    "./node_modules/x",
	};
	char buf[512];
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		snprintf(buf, sizeof(buf),
		         ", \"%s\": {\"version\": \"1.0.0\", \"resolved\": "
		         "\"https://registry.npmjs.org/x/-/x-1.0.0.tgz\", \"integrity\": \"@512\"}",
		         keys[i]);
		expect_bad(buf, "install.manifest_invalid", "node_modules/<name>");
	}
	/* A key with NUL never reaches the path rules: the parser refuses it. */
	expect_bad(", \"node_modules/a\\u0000b\": {\"version\": \"1.0.0\"}", "json.syntax",
	           "\\u0000 in an object key");
}

static void
test_link_refused(void **state)
{
	expect_bad(", \"node_modules/x\": {\"resolved\": \"../x\", \"link\": true}",
	           "install.manifest_invalid", "link");
}

static void
test_resolved_rules(void **state)
{
	/* http, other host, user info, query, a dot segment, another package,
	 * another version, no resolved, not a string. */
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"http://registry.npmjs.org/x/-/x-1.0.0.tgz\", \"integrity\": \"@512\"}",
	           "install.manifest_invalid", "https");
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"https://evil.example/x/-/x-1.0.0.tgz\", \"integrity\": \"@512\"}",
	           "install.manifest_invalid", "is not in hosts");
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"https://registry.npmjs.org.evil.example/x/-/x-1.0.0.tgz\", \"integrity\": \"@512\"}",
	           "install.manifest_invalid", "is not in hosts");
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"https://u@registry.npmjs.org/x/-/x-1.0.0.tgz\", \"integrity\": \"@512\"}",
	           "install.manifest_invalid", "user information");
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"https://registry.npmjs.org/x/-/x-1.0.0.tgz?x=1\", \"integrity\": \"@512\"}",
	           "install.manifest_invalid", "query");
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"https://registry.npmjs.org/evil/../x/-/x-1.0.0.tgz\", \"integrity\": \"@512\"}",
	           "install.manifest_invalid", "dot or empty segment");
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"https://registry.npmjs.org/y/-/y-1.0.0.tgz\", \"integrity\": \"@512\"}",
	           "install.manifest_invalid", "does not name x@1.0.0");
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"https://registry.npmjs.org/x/-/x-1.0.1.tgz\", \"integrity\": \"@512\"}",
	           "install.manifest_invalid", "does not name");
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"integrity\": \"@512\"}",
	           "install.manifest_invalid", "resolved: missing");
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": 5, \"integrity\": \"@512\"}",
	           "install.manifest_invalid", "must be strings");
	expect_bad(", \"node_modules/x\": {\"resolved\": \"https://registry.npmjs.org/x/-/x-1.0.0.tgz\", "
	           "\"integrity\": \"@512\"}",
	           "install.manifest_invalid", "version: missing");
	/* The version rule manifests use (manifest_version_ok): a letter or
	 * digit first, so no "-x" or ".1" names a tarball. */
	expect_bad(", \"node_modules/x\": {\"version\": \"-1.0.0\", \"resolved\": "
	           "\"https://registry.npmjs.org/x/-/x--1.0.0.tgz\", \"integrity\": \"@512\"}",
	           "install.manifest_invalid", "not a plain version");
	expect_bad(", \"node_modules/x\": {\"version\": \".1\", \"resolved\": "
	           "\"https://registry.npmjs.org/x/-/x-.1.tgz\", \"integrity\": \"@512\"}",
	           "install.manifest_invalid", "not a plain version");
	/* Port: the manifest names 127.0.0.1:8443 only. */
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"https://127.0.0.1:9443/x/-/x-1.0.0.tgz\", \"integrity\": \"@512\"}",
	           "install.manifest_invalid", "is not in hosts");
}

static void
test_integrity_rules(void **state)
{
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"https://registry.npmjs.org/x/-/x-1.0.0.tgz\"}",
	           "install.manifest_invalid", "integrity: missing");
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"https://registry.npmjs.org/x/-/x-1.0.0.tgz\", \"integrity\": \"@1\"}",
	           "install.manifest_invalid", "sha1 only");
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"https://registry.npmjs.org/x/-/x-1.0.0.tgz\", \"integrity\": \"sha512-abc\"}",
	           "install.manifest_invalid", "integrity");
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"https://registry.npmjs.org/x/-/x-1.0.0.tgz\", \"integrity\": "
	           "\"md5-1B2M2Y8AsgTpgAmY7PhCfg==\"}",
	           "install.manifest_invalid", "integrity");
}

static void
test_platform_rules(void **state)
{
	/* Not optional and not for this cpu: the install could not work. */
	expect_bad(
	    ", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	    "\"https://registry.npmjs.org/x/-/x-1.0.0.tgz\", \"integrity\": \"@512\", \"cpu\": [\"arm64\"]}",
	    "install.manifest_invalid", "not optional");
	expect_bad(
	    ", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	    "\"https://registry.npmjs.org/x/-/x-1.0.0.tgz\", \"integrity\": \"@512\", \"libc\": [\"musl\"]}",
	    "install.manifest_invalid", "libc");
	expect_bad(", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	           "\"https://registry.npmjs.org/x/-/x-1.0.0.tgz\", \"integrity\": \"@512\", \"os\": 3}",
	           "install.manifest_invalid", "os");
	expect_bad(
	    ", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	    "\"https://registry.npmjs.org/x/-/x-1.0.0.tgz\", \"integrity\": \"@512\", \"optional\": \"yes\"}",
	    "install.manifest_invalid", "booleans");
}

static void
test_bin_escape_refused(void **state)
{
	struct npmlock l;
	struct err e = {0};
	struct npmlock_opts o = opts();
	const char *t =
	    "{\"lockfileVersion\": 3, \"packages\": {\"node_modules/@openai/codex\": {\"version\": "
	    "\"0.1.0\", \"resolved\": \"https://registry.npmjs.org/@openai/codex/-/codex-0.1.0.tgz\", "
	    "\"integrity\": \"@512\", \"bin\": {\"codex\": \"bin/../../../etc/passwd\"}}}}";
	char *x = expand(t);

	assert_int_equal(npmlock_load(&l, x, strlen(x), &o, &e), -1);
	assert_non_null(strstr(e.msg, "leaves the package"));
	free(x);
	x = expand("{\"lockfileVersion\": 3, \"packages\": {\"node_modules/@openai/codex\": {\"version\": "
	           "\"0.1.0\", \"resolved\": \"https://registry.npmjs.org/@openai/codex/-/codex-0.1.0.tgz\", "
	           "\"integrity\": \"@512\", \"bin\": \"..\\\\..\\\\x\"}}}");
	assert_int_equal(npmlock_load(&l, x, strlen(x), &o, &e), -1);
	assert_non_null(strstr(e.msg, "leaves the package"));
	free(x);
	x = expand("{\"lockfileVersion\": 3, \"packages\": {\"node_modules/@openai/codex\": {\"version\": "
	           "\"0.1.0\", \"resolved\": \"https://registry.npmjs.org/@openai/codex/-/codex-0.1.0.tgz\", "
	           "\"integrity\": \"@512\", \"bin\": [\"x\"]}}}");
	assert_int_equal(npmlock_load(&l, x, strlen(x), &o, &e), -1);
	free(x);
}

static void
test_root_missing_and_bundle_orphan(void **state)
{
	load_raw_bad("{\"lockfileVersion\": 3, \"packages\": {\"\": {}}}", "install.manifest_invalid",
	             "does not install @openai/codex");
	/* The root is optional and skipped: nothing would be installed. */
	load_raw_bad(
	    "{\"lockfileVersion\": 3, \"packages\": {\"node_modules/@openai/codex\": {\"version\": "
	    "\"0.1.0\", \"resolved\": \"https://registry.npmjs.org/@openai/codex/-/codex-0.1.0.tgz\", "
	    "\"integrity\": \"@512\", \"optional\": true, \"os\": [\"darwin\"]}}}",
	    "install.manifest_invalid", "missing");
	expect_bad(", \"node_modules/lonely\": {\"version\": \"1.0.0\", \"inBundle\": true}",
	           "install.manifest_invalid", "no installed parent");
}

static void
test_good_lockfile(void **state)
{
	struct npmlock l;
	struct err e = {0};
	struct npmlock_opts o = opts();
	const char *extra =
	    /* scoped, nested, an npm: alias (Codex's platform packages) */
	    ", \"node_modules/@openai/codex-linux-x64\": {\"name\": \"@openai/codex\", \"version\": "
	    "\"0.1.0-linux-x64\", \"resolved\": "
	    "\"https://registry.npmjs.org/@openai/codex/-/codex-0.1.0-linux-x64.tgz\", \"integrity\": "
	    "\"@512\", "
	    "\"cpu\": [\"x64\"], \"os\": [\"linux\"], \"optional\": true}"
	    ", \"node_modules/@openai/codex-linux-arm64\": {\"name\": \"@openai/codex\", \"version\": "
	    "\"0.1.0-linux-arm64\", \"resolved\": "
	    "\"https://registry.npmjs.org/@openai/codex/-/codex-0.1.0-linux-arm64.tgz\", \"integrity\": "
	    "\"@512\", \"cpu\": [\"arm64\"], \"os\": [\"linux\"], \"optional\": true}"
	    /* skipped optional takes its nested subtree along */
	    ", \"node_modules/@openai/codex-linux-arm64/node_modules/y\": {\"version\": \"2.0.0\", "
	    "\"resolved\": "
	    "\"https://registry.npmjs.org/y/-/y-2.0.0.tgz\", \"integrity\": \"@512\", \"optional\": true}"
	    ", \"node_modules/a\": {\"version\": \"1.0.0\", \"resolved\": "
	    "\"https://registry.npmjs.org/a/-/a-1.0.0.tgz\", \"integrity\": \"@256 @1\"}"
	    ", \"node_modules/a/node_modules/@s/b\": {\"version\": \"1.0.0-rc.1+build\", \"resolved\": "
	    "\"https://127.0.0.1:8443/prefix/@s%2Fb/-/b-1.0.0-rc.1+build.tgz\", \"integrity\": \"@512\"}"
	    ", \"node_modules/a/node_modules/bundled\": {\"version\": \"1.0.0\", \"inBundle\": true}"
	    ", \"node_modules/m\": {\"version\": \"1.0.0\", \"resolved\": "
	    "\"https://registry.npmjs.org/m/-/m-1.0.0.tgz\","
	    " \"integrity\": \"@512\", \"libc\": [\"musl\"], \"optional\": true}"
	    ", \"node_modules/g\": {\"version\": \"1.0.0\", \"resolved\": "
	    "\"https://registry.npmjs.org/g/-/g-1.0.0.tgz\","
	    " \"integrity\": \"@512\", \"os\": [\"!win32\"], \"cpu\": \"any\"}"
	    ", \"node_modules/d\": {\"version\": \"1.0.0\", \"dev\": true}"
	    ", \"node_modules/do\": {\"version\": \"1.0.0\", \"devOptional\": true, \"cpu\": [\"s390x\"]}";
	size_t i;
	int seen_alias = 0, seen_nested = 0, seen_bundle = 0;

	assert_int_equal(load_with(&l, &o, extra, &e), 0);
	assert_int_equal(l.version, 3);
	/* root, alias x64, a, @s/b, bundled, g */
	assert_int_equal(l.npkgs, 6);
	assert_int_equal(l.nskipped, 3); /* arm64, its nested y, musl-only m */
	assert_int_equal(l.ndev, 2);
	assert_non_null(l.root);
	assert_string_equal(l.root->path, "node_modules/@openai/codex");
	for (i = 0; i < l.npkgs; i++) {
		const struct npmlock_pkg *p = &l.pkgs[i];
		assert_null(strstr(p->path, "arm64"));
		assert_string_not_equal(p->path, "node_modules/m");
		if (strcmp(p->path, "node_modules/@openai/codex-linux-x64") == 0) {
			seen_alias = 1;
			assert_string_equal(p->name, "@openai/codex");
			assert_string_equal(p->folder, "@openai/codex-linux-x64");
			assert_string_equal(p->url_path, "/@openai/codex/-/codex-0.1.0-linux-x64.tgz");
			assert_int_equal(p->digest.alg, DIGEST_SHA512);
		}
		if (strcmp(p->path, "node_modules/a/node_modules/@s/b") == 0) {
			seen_nested = 1;
			assert_string_equal(p->url_path, "/@s%2Fb/-/b-1.0.0-rc.1+build.tgz");
		}
		if (strcmp(p->path, "node_modules/a") == 0)
			assert_int_equal(p->digest.alg, DIGEST_SHA256); /* strongest of sha1 + sha256 */
		if (p->in_bundle) {
			seen_bundle = 1;
			assert_null(p->resolved);
		}
	}
	assert_true(seen_alias && seen_nested && seen_bundle);
	assert_int_equal(l.nbins, 1);
	assert_string_equal(l.bins[0].name, "codex");
	assert_string_equal(l.bins[0].target, "bin/codex.js");
	npmlock_free(&l);

	/* arm64 + musl: the other alias, m included. */
	o.cpu = "arm64";
	o.libc = "musl";
	assert_int_equal(load_with(&l, &o, extra, &e), 0);
	assert_int_equal(l.npkgs, 8);
	npmlock_free(&l);

	/* cpu and libc unknown (lock validates every platform): everything. */
	o.cpu = NULL;
	o.libc = NULL;
	assert_int_equal(load_with(&l, &o, extra, &e), 0);
	assert_int_equal(l.npkgs, 9);
	assert_int_equal(l.nskipped, 0);
	npmlock_free(&l);
}

static void
test_mirror_host_accepted(void **state)
{
	struct npmlock l;
	struct err e = {0};
	struct npmlock_opts o = opts();
	const char *extra = ", \"node_modules/x\": {\"version\": \"1.0.0\", \"resolved\": "
	                    "\"https://mirror.example:444/npm/x/-/x-1.0.0.tgz\", \"integrity\": \"@512\"}";

	assert_int_equal(load_with(&l, &o, extra, &e), -1);
	o.mirror_host = "mirror.example";
	assert_int_equal(load_with(&l, &o, extra, &e), 0);
	npmlock_free(&l);
}

static void
test_bin_normalisation(void **state)
{
	struct npmlock l;
	struct err e = {0};
	struct npmlock_opts o = opts();
	char *x;

	/* A string bin is named after the unscoped package name. */
	x = expand("{\"lockfileVersion\": 2, \"packages\": {\"node_modules/@openai/codex\": {\"version\": "
	           "\"0.1.0\", \"resolved\": \"https://registry.npmjs.org/@openai/codex/-/codex-0.1.0.tgz\", "
	           "\"integrity\": \"@512\", \"bin\": \"./bin//run.js\"}}, \"dependencies\": {}}");
	assert_int_equal(npmlock_load(&l, x, strlen(x), &o, &e), 0);
	assert_int_equal(l.version, 2);
	assert_int_equal(l.nbins, 1);
	assert_string_equal(l.bins[0].name, "codex");
	assert_string_equal(l.bins[0].target, "bin/run.js");
	npmlock_free(&l);
	free(x);

	/* Keys: traversal reduced to the base name (npm), "." and ".." and ""
	 * dropped, non-string targets dropped; targets collapsed. */
	x = expand(
	    "{\"lockfileVersion\": 3, \"packages\": {\"node_modules/@openai/codex\": {\"version\": "
	    "\"0.1.0\", \"resolved\": \"https://registry.npmjs.org/@openai/codex/-/codex-0.1.0.tgz\", "
	    "\"integrity\": \"@512\", \"bin\": {\"../../../usr/bin/evil\": \"a.js\", \"..\": \"b.js\", "
	    "\"\": \"c.js\", \"w:x\": \"lib/./x/../y.js\", \"n\": 5, \"e\": \"\"}}}}");
	assert_int_equal(npmlock_load(&l, x, strlen(x), &o, &e), 0);
	assert_int_equal(l.nbins, 2);
	assert_string_equal(l.bins[0].name, "evil");
	assert_string_equal(l.bins[0].target, "a.js");
	assert_string_equal(l.bins[1].name, "x");
	assert_string_equal(l.bins[1].target, "lib/y.js");
	npmlock_free(&l);
	free(x);
}

static void
test_platform_match(void **state)
{
	struct json_doc d;
	struct err e = {0};
	static const struct {
		const char *json, *value;
		int want;
	} cases[] = {
	    {"[\"linux\"]", "linux", 1},
	    {"[\"darwin\"]", "linux", 0},
	    {"[\"!win32\"]", "linux", 1},
	    {"[\"!linux\"]", "linux", 0},
	    {"[\"!win32\", \"darwin\"]", "linux", 0},
	    {"\"any\"", "linux", 1},
	    {"[]", "linux", 1},
	    {"\"linux\"", "linux", 1},
	    {"[1]", "linux", -1},
	    {"{}", "linux", -1},
	    {"[\"x64\"]", NULL, 1},
	};
	size_t i;

	assert_int_equal(npmlock_platform_match(NULL, "x"), 1);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(json_parse(&d, cases[i].json, strlen(cases[i].json), NULL, &e), 0);
		if (npmlock_platform_match(d.root, cases[i].value) != cases[i].want) {
			print_error("case %zu: %s / %s\n", i, cases[i].json,
			            cases[i].value ? cases[i].value : "NULL");
			fail();
		}
		json_free(&d);
	}
}

static void
test_names_and_cpu(void **state)
{
	const char *f;

	assert_true(npmlock_name_ok("a", 1));
	assert_true(npmlock_name_ok("@s/a.b-c_d~e", 12));
	assert_false(npmlock_name_ok(".a", 2));
	assert_false(npmlock_name_ok("@s", 2));
	assert_false(npmlock_name_ok("@s/", 3));
	assert_false(npmlock_name_ok("a/b", 3));
	assert_false(npmlock_name_ok("a b", 3));
	assert_false(npmlock_name_ok("a%2f", 4));
	assert_true(npmlock_path_ok("node_modules/@s/a/node_modules/b", &f));
	assert_string_equal(f, "b");
	assert_string_equal(npmlock_cpu_for("linux-x64"), "x64");
	assert_string_equal(npmlock_cpu_for("linux-arm64"), "arm64");
	assert_null(npmlock_cpu_for("darwin-x64"));
}

static void
touch_loader(const char *dir, const char *loader)
{
	char path[256], *slash;
	int fd;

	snprintf(path, sizeof(path), "%s%s", dir, loader);
	for (slash = strchr(path + strlen(dir) + 1, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		(void)mkdir(path, 0755);
		*slash = '/';
	}
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
}

/* The libc of a root is the loader a dynamically linked program of this
 * architecture names: none, musl only, glibc, both (glibc wins); the
 * override; a loader name that is a directory is no loader. */
static void
test_detect_libc(void **state)
{
	char dir[] = "/tmp/abx-libc.XXXXXX", path[256];

	(void)state;
	unsetenv("ABX_INSTALL_LIBC");
	assert_non_null(mkdtemp(dir));
	assert_string_equal(npmlock_detect_libc(dir), "none");
	snprintf(path, sizeof(path), "%s/lib", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s%s", dir, npmlock_libc_loader("musl"));
	assert_int_equal(mkdir(path, 0755), 0);
	assert_string_equal(npmlock_detect_libc(dir), "none");
	rmdir(path);
	touch_loader(dir, npmlock_libc_loader("musl"));
	assert_string_equal(npmlock_detect_libc(dir), "musl");
	setenv("ABX_INSTALL_LIBC", "glibc", 1);
	assert_string_equal(npmlock_detect_libc(dir), "glibc");
	setenv("ABX_INSTALL_LIBC", "none", 1);
	assert_string_equal(npmlock_detect_libc(dir), "none");
	setenv("ABX_INSTALL_LIBC", "bogus", 1);
	assert_string_equal(npmlock_detect_libc(dir), "musl");
	unsetenv("ABX_INSTALL_LIBC");
	touch_loader(dir, npmlock_libc_loader("glibc"));
	assert_string_equal(npmlock_detect_libc(dir), "glibc");
	assert_null(npmlock_libc_loader("none"));
	assert_null(npmlock_libc_loader(NULL));
	unit_rmtree(dir);
}

/* A shared library is found in the loader's directories of a root, or in
 * those the root's configuration lists; nowhere else. */
static void
test_lib_present(void **state)
{
	char dir[] = "/tmp/abx-libs.XXXXXX", path[256];
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(npmlock_lib_present(dir, "glibc", "libx.so.1"), 0);
	touch_loader(dir, "/usr/lib/libx.so.1");
	assert_int_equal(npmlock_lib_present(dir, "glibc", "libx.so.1"), 1);
	assert_int_equal(npmlock_lib_present(dir, "musl", "libx.so.1"), 1);
	assert_int_equal(npmlock_lib_present(dir, "glibc", "../usr/lib/libx.so.1"), 0);
	touch_loader(dir, "/opt/liby.so.2");
	assert_int_equal(npmlock_lib_present(dir, "glibc", "liby.so.2"), 0);
	snprintf(path, sizeof(path), "%s/etc", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/etc/ld.so.conf.d", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/etc/ld.so.conf.d/y.conf", dir);
	assert_non_null(f = fopen(path, "w"));
	fputs("# libraries of y\n/nowhere\n/opt\n", f);
	fclose(f);
	assert_int_equal(npmlock_lib_present(dir, "glibc", "liby.so.2"), 1);
	assert_int_equal(npmlock_lib_present(dir, "musl", "liby.so.2"), 0);
	unit_rmtree(dir);
}

static int
setup(void **state)
{
	struct digest d;

	digest_buf(DIGEST_SHA512, "x", 1, &d);
	digest_sri(&d, sri512);
	digest_buf(DIGEST_SHA256, "x", 1, &d);
	digest_sri(&d, sri256);
	digest_buf(DIGEST_SHA1, "x", 1, &d);
	digest_sri(&d, sri1);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_not_json_or_wrong_version),
	    cmocka_unit_test(test_duplicate_key_inside_entry),
	    cmocka_unit_test(test_hostile_keys),
	    cmocka_unit_test(test_link_refused),
	    cmocka_unit_test(test_resolved_rules),
	    cmocka_unit_test(test_integrity_rules),
	    cmocka_unit_test(test_platform_rules),
	    cmocka_unit_test(test_bin_escape_refused),
	    cmocka_unit_test(test_root_missing_and_bundle_orphan),
	    cmocka_unit_test(test_good_lockfile),
	    cmocka_unit_test(test_mirror_host_accepted),
	    cmocka_unit_test(test_bin_normalisation),
	    cmocka_unit_test(test_platform_match),
	    cmocka_unit_test(test_names_and_cpu),
	    cmocka_unit_test(test_detect_libc),
	    cmocka_unit_test(test_lib_present),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
