/* core/net/hostrule.c: the one host allow-list of downloads. */
#include "unit.h"

#include <string.h>

#include "base/err.h"
#include "net/hostrule.h"
#include "net/http.h"

static int
check(struct hostrule *r, const char *url, struct err *e)
{
	struct http_url u;

	assert_int_equal(http_url_parse(url, &u, NULL), 0);
	err_clear(e);
	return hostrule_check(r, &u, e);
}

/* A host of any list passes, by name (any port) or by host:port; case does
 * not matter; anything else is http.redirect naming the host and the lists. */
static void
test_lists_and_ports(void **state)
{
	const char *a[] = {"registry.npmjs.org"}, *b[] = {"mirror.example:8443", "[::1]:9000"};
	struct hostrule r;
	struct err e = {0};

	(void)state;
	hostrule_init(&r, 1, "the manifest's hosts");
	assert_int_equal(check(&r, "https://registry.npmjs.org/x", &e), -1);
	assert_int_equal(hostrule_add(&r, a, 1), 0);
	assert_int_equal(hostrule_add(&r, b, 2), 0);
	assert_int_equal(hostrule_add(&r, NULL, 0), 0);
	assert_int_equal(check(&r, "https://REGISTRY.npmjs.org:444/x", &e), 0);
	assert_int_equal(check(&r, "https://mirror.example:8443/x", &e), 0);
	assert_int_equal(check(&r, "https://[::1]:9000/x", &e), 0);
	assert_int_equal(check(&r, "https://mirror.example/x", &e), -1);
	assert_string_equal(e.code, "http.redirect");
	assert_string_equal(e.msg, "host mirror.example refused: not in the manifest's hosts");
	assert_int_equal(check(&r, "https://evil.example/x", &e), -1);
	assert_non_null(strstr(e.msg, "evil.example"));
}

/* https_only refuses plain http even for an allowed host; an open rule
 * passes every host, but still only over https when asked. */
static void
test_https_only_and_open(void **state)
{
	const char *a[] = {"h.example"};
	struct hostrule r;
	struct err e = {0};
	int i;

	(void)state;
	hostrule_init(&r, 1, "x");
	hostrule_add(&r, a, 1);
	assert_int_equal(check(&r, "http://h.example/x", &e), -1);
	assert_string_equal(e.msg, "h.example: only https is allowed");
	r.open = 1;
	assert_int_equal(check(&r, "https://any.example/x", &e), 0);
	assert_int_equal(check(&r, "http://any.example/x", &e), -1);
	hostrule_init(&r, 0, "--allow-host");
	r.open = 1;
	assert_int_equal(check(&r, "http://any.example/x", &e), 0);
	/* the lists are bounded: one too many is refused, nothing changes */
	hostrule_init(&r, 0, "x");
	for (i = 0; i < HOSTRULE_LISTS; i++)
		assert_int_equal(hostrule_add(&r, a, 1), 0);
	assert_int_equal(hostrule_add(&r, a, 1), -1);
	assert_int_equal(r.nlists, HOSTRULE_LISTS);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lists_and_ports),
	    cmocka_unit_test(test_https_only_and_open),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
