/* core/net/oci_parse.c: the oci:// grammar, tags, the WWW-Authenticate
 * challenge, token answers, docker config auths, the image manifest. The
 * client (core/net/oci.c) runs against the real registry in
 * tests/integration/oci.sh. */
#include "unit.h"

#include <string.h>

#include "base/digest.h"
#include "base/err.h"
#include "base/json.h"
#include "net/oci.h"

static int
ref(const char *s, struct oci_ref *r, struct err *e)
{
	err_clear(e);
	return oci_ref_parse(s, 0, r, e);
}

/* Hostile references first: every one is oci.url, nothing half-filled. */
static void
test_ref_refused(void **state)
{
	static const char *const bad[] = {
	    NULL,
	    "",
	    "oci:/h/r",
	    "https://h/r",
	    "oci://",
	    "oci://h",
	    "oci://h/",
	    "oci:///r",
	    "oci://user:pw@h/r",
	    "oci://h/R",
	    "oci://h/r/",
	    "oci://h//r",
	    "oci://h/r?x=1",
	    "oci://h/r#f",
	    "oci://h/-r",
	    "oci://h/r-",
	    "oci://h/r..s",
	    "oci://h/r___s",
	    "oci://h/r.-s",
	    "oci://h/r s",
	    "oci://h:0/r",
	    "oci://h:65536/r",
	    "oci://h:x/r",
	    "oci://h/r\n",
	    "oci://h/r\x80",
	};
	struct oci_ref r;
	struct err e = {0};
	char longrepo[400];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(ref(bad[i], &r, &e), -1);
		assert_string_equal(e.code, "oci.url");
	}
	/* credentials never echoed */
	assert_int_equal(ref("oci://alice:s3cret@h/r", &r, &e), -1);
	assert_null(strstr(e.msg, "s3cret"));
	memset(longrepo, 0, sizeof(longrepo));
	memcpy(longrepo, "oci://h/", 8);
	memset(longrepo + 8, 'a', 300);
	assert_int_equal(ref(longrepo, &r, &e), -1);
	assert_string_equal(e.code, "oci.url");
}

static void
test_ref_accepted(void **state)
{
	struct oci_ref r;
	struct err e = {0};

	(void)state;
	assert_int_equal(ref("oci://Registry.Example/team/tools", &r, &e), 0);
	assert_string_equal(r.host, "registry.example");
	assert_int_equal(r.port, 443);
	assert_string_equal(r.repo, "team/tools");
	assert_string_equal(r.origin, "https://registry.example");
	assert_int_equal(ref("oci://127.0.0.1:5000/a.b/c__d/e--f/g_h", &r, &e), 0);
	assert_int_equal(r.port, 5000);
	assert_string_equal(r.origin, "https://127.0.0.1:5000");
	assert_string_equal(r.repo, "a.b/c__d/e--f/g_h");
	assert_int_equal(ref("oci://[::1]:5000/x", &r, &e), 0);
	assert_string_equal(r.host, "::1");
	assert_string_equal(r.origin, "https://[::1]:5000");
}

static void
test_tags(void **state)
{
	char t[OCI_TAG_MAX], big[300];

	(void)state;
	assert_true(oci_tag_valid("codex-0.158.0"));
	assert_true(oci_tag_valid("_x"));
	assert_false(oci_tag_valid(""));
	assert_false(oci_tag_valid(".x"));
	assert_false(oci_tag_valid("-x"));
	assert_false(oci_tag_valid("a/b"));
	assert_false(oci_tag_valid("a+b"));
	assert_int_equal(oci_tag_make("codex", "0.158.0", t), 0);
	assert_string_equal(t, "codex-0.158.0");
	assert_int_equal(oci_tag_make("node-runtime", "22.1.0+build/7", t), 0);
	assert_string_equal(t, "node-runtime-22.1.0_build_7");
	assert_true(oci_tag_valid(t));
	memset(big, 'v', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(oci_tag_make("tool", big, t), 0);
	assert_int_equal(strlen(t), OCI_TAG_MAX - 1);
	assert_true(oci_tag_valid(t));
	assert_int_equal(oci_tag_make("", "1", t), -1);
}

static int
chal(const char *s, struct oci_challenge *c, struct err *e)
{
	err_clear(e);
	return oci_challenge_parse(s, strlen(s), c, e);
}

static void
test_challenge_refused(void **state)
{
	static const char *const bad[] = {
	    "",
	    "Negotiate abc",
	    "Bearer",
	    "Bearer service=\"x\"", /* no realm */
	    "Bearer realm=\"https://a/t",
	    "Bearer realm",
	    "Bearer realm=\"x\" junk",
	    "Bearer =x",
	    "Bearer realm=\"a\x01\"",
	};
	struct oci_challenge c;
	struct err e = {0};
	char big[3000];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(chal(bad[i], &c, &e), -1);
		assert_string_equal(e.code, "oci.auth");
	}
	snprintf(big, sizeof(big), "Bearer realm=\"https://a/t\",scope=\"%0600d\"", 0);
	assert_int_equal(chal(big, &c, &e), -1);
	/* a view: bytes past n are not read */
	err_clear(&e);
	assert_int_equal(oci_challenge_parse("Bearer realm=\"https://a/t\"", 20, &c, &e), -1);
}

static void
test_challenge_accepted(void **state)
{
	struct oci_challenge c;
	struct err e = {0};

	(void)state;
	assert_int_equal(chal("Bearer realm=\"https://auth.example/token\",service=\"registry.example\","
	                      "scope=\"repository:team/tools:pull,push\"",
	                      &c, &e),
	                 0);
	assert_true(c.bearer);
	assert_string_equal(c.realm, "https://auth.example/token");
	assert_string_equal(c.service, "registry.example");
	assert_string_equal(c.scope, "repository:team/tools:pull,push");
	assert_int_equal(chal("bearer  realm=https://a/t , Service=s,error=\"insufficient_scope\"", &c, &e),
	                 0);
	assert_string_equal(c.realm, "https://a/t");
	assert_string_equal(c.service, "s");
	assert_int_equal(chal("Bearer realm=\"a\\\"b\"", &c, &e), 0);
	assert_string_equal(c.realm, "a\"b");
	assert_int_equal(chal("Basic realm=\"Registry Realm\"", &c, &e), 0);
	assert_false(c.bearer);
}

static void
test_token(void **state)
{
	char tok[OCI_TOKEN_MAX], *big;
	struct err e = {0};
	static const char *const bad[] = {"",
	                                  "{",
	                                  "[]",
	                                  "{}",
	                                  "{\"token\":\"\"}",
	                                  "{\"token\":7}",
	                                  "{\"token\":\"a b\"}",
	                                  "{\"token\":\"\\u00e9\"}"};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_clear(&e);
		assert_int_equal(oci_token_parse(bad[i], strlen(bad[i]), tok, &e), -1);
		assert_string_equal(e.code, "oci.registry");
		assert_string_equal(tok, "");
	}
	big = malloc(OCI_TOKEN_MAX + 64);
	assert_non_null(big);
	memset(big, 'a', OCI_TOKEN_MAX + 63);
	memcpy(big, "{\"token\":\"", 10);
	memcpy(big + OCI_TOKEN_MAX + 60, "\"}", 3);
	assert_int_equal(oci_token_parse(big, strlen(big), tok, &e), -1);
	free(big);
	assert_int_equal(oci_token_parse("{\"token\":\"abc.def\",\"expires_in\":60}", 35, tok, &e), 0);
	assert_string_equal(tok, "abc.def");
	assert_int_equal(oci_token_parse("{\"access_token\":\"xyz\"}", 22, tok, &e), 0);
	assert_string_equal(tok, "xyz");
}

static int
dauth(const char *json, const char *host, int port, int explicit, char *basic, struct err *e)
{
	err_clear(e);
	return oci_docker_auth_parse(json, strlen(json), host, port, explicit, basic, e);
}

static void
test_docker_config(void **state)
{
	char basic[OCI_BASIC_MAX];
	struct err e = {0};

	(void)state;
	/* YWxpY2U6czNjcmV0 = alice:s3cret */
	assert_int_equal(dauth("not json", "h", 443, 0, basic, &e), -1);
	assert_string_equal(e.code, "oci.auth");
	assert_int_equal(dauth("{\"auths\":{\"h\":{\"auth\":\"!!!!\"}}}", "h", 443, 0, basic, &e), -1);
	assert_string_equal(e.code, "oci.auth");
	assert_null(strstr(e.msg, "!!!!"));
	/* base64 of "nocolon" */
	assert_int_equal(dauth("{\"auths\":{\"h\":{\"auth\":\"bm9jb2xvbg==\"}}}", "h", 443, 0, basic, &e),
	                 -1);
	assert_null(strstr(e.msg, "bm9jb2xvbg"));
	assert_int_equal(dauth("{}", "h", 443, 0, basic, &e), 0);
	assert_int_equal(dauth("{\"auths\":[]}", "h", 443, 0, basic, &e), 0);
	assert_int_equal(
	    dauth("{\"auths\":{\"other\":{\"auth\":\"YWxpY2U6czNjcmV0\"}}}", "h", 443, 0, basic, &e), 0);
	assert_int_equal(
	    dauth("{\"auths\":{\"h:5000\":{\"auth\":\"YWxpY2U6czNjcmV0\"}}}", "h", 443, 0, basic, &e), 0);
	assert_int_equal(
	    dauth("{\"auths\":{\"h:5000\":{\"auth\":\"YWxpY2U6czNjcmV0\"}}}", "h", 5000, 1, basic, &e), 1);
	assert_string_equal(basic, "YWxpY2U6czNjcmV0");
	assert_int_equal(
	    dauth("{\"auths\":{\"https://H/v1/\":{\"auth\":\"YWxpY2U6czNjcmV0\"}}}", "h", 443, 0, basic, &e),
	    1);
	assert_int_equal(
	    dauth("{\"auths\":{\"[::1]:5000\":{\"auth\":\"YWxpY2U6czNjcmV0\"}}}", "::1", 5000, 1, basic, &e),
	    1);
	assert_int_equal(oci_basic_from_userpass("alice:s3cret", basic, &e), 0);
	assert_string_equal(basic, "YWxpY2U6czNjcmV0");
	assert_int_equal(oci_basic_from_userpass("ab:c", basic, &e), 0);
	assert_string_equal(basic, "YWI6Yw==");
	assert_int_equal(oci_basic_from_userpass("nocolon", basic, &e), -1);
	assert_int_equal(oci_basic_from_userpass(":pw", basic, &e), -1);
}

static void
test_manifest(void **state)
{
	struct oci_layer l[2] = {
	    {"application/vnd.oci.image.layer.v1.tar+gzip", "aa", 10, "node.tar.gz", NULL, NULL},
	    {"application/x-npm", "bb", 20, NULL, "k", "sha512-x"},
	};
	struct oci_annotation a[1] = {{"dev.agent-sandbox.tool", "codex"}};
	struct json_doc d;
	struct json_w w;
	struct err e = {0};

	(void)state;
	json_w_init(&w, 1 << 16);
	assert_int_equal(oci_manifest_write(&w, "application/vnd.agent-sandbox.tool.v1+json", l, 2, a, 1), 0);
	assert_string_equal(
	    w.buf,
	    "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
	    "\"artifactType\":\"application/vnd.agent-sandbox.tool.v1+json\",\"config\":{\"mediaType\":"
	    "\"application/vnd.oci.empty.v1+json\",\"digest\":\"sha256:" OCI_EMPTY_SHA256 "\",\"size\":2},"
	    "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":"
	    "\"sha256:aa\",\"size\":10,\"annotations\":{\"org.opencontainers.image.title\":\"node.tar.gz\"}},"
	    "{\"mediaType\":\"application/x-npm\",\"digest\":\"sha256:bb\",\"size\":20,\"annotations\":{"
	    "\"k\":\"sha512-x\"}}],\"annotations\":"
	    "{\"dev.agent-sandbox.tool\":\"codex\"}}");
	assert_int_equal(json_parse(&d, w.buf, w.len, NULL, &e), 0);
	json_free(&d);
	json_w_free(&w);
	/* a writer that overflows is a refusal, not a cut manifest */
	json_w_init(&w, 64);
	assert_int_equal(oci_manifest_write(&w, "t", l, 2, a, 1), -1);
	json_w_free(&w);
}

struct seen {
	int n;
	char hex[4][65], val[4][32];
};

static void
on_layer(void *arg, const char *hex, const char *value)
{
	struct seen *s = arg;

	if (s->n < 4) {
		snprintf(s->hex[s->n], sizeof(s->hex[0]), "%s", hex);
		snprintf(s->val[s->n], sizeof(s->val[0]), "%s", value);
	}
	s->n++;
}

/* The registry's manifest: only well-formed sha256 layers with the key
 * reach the caller; anything that is no manifest is oci.registry. */
static void
test_manifest_layers(void **state)
{
	static const char *const bad[] = {"", "{", "[]", "{}", "{\"layers\":{}}", "{\"layers\":7}"};
	const char *a64 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	char doc[2048];
	struct seen s;
	struct err e = {0};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&s, 0, sizeof(s));
		err_clear(&e);
		assert_int_equal(oci_manifest_layers(bad[i], strlen(bad[i]), "k", on_layer, &s, &e), -1);
		assert_string_equal(e.code, "oci.registry");
		assert_int_equal(s.n, 0);
	}
	snprintf(doc, sizeof(doc),
	         "{\"layers\":[{\"digest\":\"sha256:%s\",\"annotations\":{\"k\":\"v1\"}},"
	         "{\"digest\":\"sha256:%.63s\",\"annotations\":{\"k\":\"short\"}},"
	         "{\"digest\":\"sha512:%s\",\"annotations\":{\"k\":\"alg\"}},"
	         "{\"digest\":\"sha256:%.63sA\",\"annotations\":{\"k\":\"upper\"}},"
	         "{\"digest\":\"sha256:%s\",\"annotations\":{\"k\":7}},"
	         "{\"digest\":\"sha256:%s\"},7,"
	         "{\"digest\":\"sha256:%s\",\"annotations\":{\"other\":\"x\",\"k\":\"v2\"}}]}",
	         a64, a64, a64, a64, a64, a64, a64);
	memset(&s, 0, sizeof(s));
	assert_int_equal(oci_manifest_layers(doc, strlen(doc), "k", on_layer, &s, &e), 2);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.hex[0], a64);
	assert_string_equal(s.val[0], "v1");
	assert_string_equal(s.val[1], "v2");
}

struct packseen {
	char sri[4][16];
	uint64_t off[4], len[4];
	int n;
};

static void
on_pack(void *arg, const char *sri, uint64_t off, uint64_t len)
{
	struct packseen *s = arg;

	if (s->n < 4) {
		snprintf(s->sri[s->n], sizeof(s->sri[0]), "%s", sri);
		s->off[s->n] = off;
		s->len[s->n] = len;
	}
	s->n++;
}

/* A pack's list: contiguous places from 0 and their sum; anything that is
 * not pairs of a word and a size from 1 (or sums past OCI_PACK_MAX) is 0. */
static void
test_pack_list(void **state)
{
	static const char *const bad[] = {
	    "",     " ",    "a",     "a ",         "a 0",       "a 01",          "a -1",
	    "a +1", "a 1x", "a 1 b", "a 1  b 2 c", "a 8388609", "a 8388608 b 1", "a 99999999999999999999999",
	};
	char longsri[DIGEST_SRI_MAX + 8];
	struct packseen s;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(oci_pack_list(bad[i], NULL, NULL), 0);
	memset(longsri, 'x', DIGEST_SRI_MAX);
	snprintf(longsri + DIGEST_SRI_MAX, 8, " 1");
	assert_int_equal(oci_pack_list(longsri, NULL, NULL), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(oci_pack_list(" sha512-a 774  sha512-b 10 c 8387000 ", on_pack, &s), 8387000 + 784);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.sri[0], "sha512-a");
	assert_string_equal(s.sri[2], "c");
	assert_true(s.off[0] == 0 && s.len[0] == 774 && s.off[1] == 774 && s.len[1] == 10 && s.off[2] == 784);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ref_refused),
	    cmocka_unit_test(test_ref_accepted),
	    cmocka_unit_test(test_tags),
	    cmocka_unit_test(test_challenge_refused),
	    cmocka_unit_test(test_challenge_accepted),
	    cmocka_unit_test(test_token),
	    cmocka_unit_test(test_docker_config),
	    cmocka_unit_test(test_manifest),
	    cmocka_unit_test(test_manifest_layers),
	    cmocka_unit_test(test_pack_list),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
