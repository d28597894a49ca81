/*
 * The key property, shared by the JSON parser's target and the loaders'
 * (commands file, policy, manifests, configuration): no document is accepted
 * whose keys, compared as byte strings, differ from how a loader looks them
 * up. Every key reads the same as a C string (it holds no NUL), json_key_is
 * matches it by its C string, and json_get by its C string finds the first
 * member with the same bytes. ("argv" and "argv\u0000" were two keys to the
 * duplicate rule and one to a strcmp.)
 */
#ifndef ABX_FUZZ_KEYS_H
#define ABX_FUZZ_KEYS_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "base/json.h"

static inline void
fuzz_keys_walk(const struct json_val *v)
{
	size_t i, j;

	if (v->type == JSON_ARRAY) {
		for (i = 0; i < v->u.arr.n; i++)
			fuzz_keys_walk(&v->u.arr.v[i]);
	} else if (v->type == JSON_OBJECT) {
		for (i = 0; i < v->u.obj.n; i++) {
			const struct json_member *m = &v->u.obj.m[i];

			FUZZ_CHECK(strlen(m->key) == m->keylen);
			FUZZ_CHECK(json_key_is(m, m->key));
			for (j = 0; j < i; j++)
				if (v->u.obj.m[j].keylen == m->keylen &&
				    memcmp(v->u.obj.m[j].key, m->key, m->keylen) == 0)
					break;
			FUZZ_CHECK(json_get(v, m->key) == &v->u.obj.m[j].val);
			fuzz_keys_walk(&m->val);
		}
	}
}

/* data[0..size) was accepted by a loader: it parses (a loader's limits are
 * never wider than the defaults) and its keys keep the property. */
static inline void
fuzz_check_keys(const uint8_t *data, size_t size)
{
	struct json_limits lim = json_default_limits;
	struct json_doc doc;
	struct err e;

	lim.reject_dup_keys = 0;
	FUZZ_CHECK(json_parse(&doc, (const char *)data, size, &lim, &e) == 0);
	fuzz_keys_walk(doc.root);
	json_free(&doc);
}
#endif
