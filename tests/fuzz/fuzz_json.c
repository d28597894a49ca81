/*
 * libFuzzer target for the JSON parser and writer. Properties checked:
 * - parsing never crashes, leaks or reads out of bounds (ASan/UBSan);
 * - a failed parse leaves the document empty and sets a json.* (or
 *   internal) error whose message starts with "line:col" where positional;
 * - what parses can be written, the written text parses, and writing that
 *   again gives the same bytes;
 * - rejecting duplicate keys fails exactly when some object has one;
 * - every number written with json_w_double reads back as the same double;
 * - no accepted key holds NUL, and json_get finds each key by its C string
 *   (fuzz_keys.h).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_keys.h"

#include "base/json.h"

static int
has_dup(const struct json_val *v)
{
	size_t i;

	if (v->type == JSON_ARRAY) {
		for (i = 0; i < v->u.arr.n; i++)
			if (has_dup(&v->u.arr.v[i]))
				return 1;
	} else if (v->type == JSON_OBJECT) {
		if (json_dup_key(v) != NULL)
			return 1;
		for (i = 0; i < v->u.obj.n; i++)
			if (has_dup(&v->u.obj.m[i].val))
				return 1;
	}
	return 0;
}

static void
check_numbers(const struct json_val *v)
{
	struct json_w w;
	struct json_doc doc;
	struct err e;
	size_t i;

	if (v->type == JSON_NUMBER) {
		json_w_init(&w, 64);
		json_w_double(&w, v->u.num.d);
		FUZZ_CHECK(!w.overflow);
		FUZZ_CHECK(json_parse(&doc, w.buf, w.len, NULL, &e) == 0);
		FUZZ_CHECK(doc.root->type == JSON_NUMBER && doc.root->u.num.d == v->u.num.d);
		json_free(&doc);
		json_w_free(&w);
	} else if (v->type == JSON_ARRAY) {
		for (i = 0; i < v->u.arr.n; i++)
			check_numbers(&v->u.arr.v[i]);
	} else if (v->type == JSON_OBJECT) {
		for (i = 0; i < v->u.obj.n; i++)
			check_numbers(&v->u.obj.m[i].val);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Small limits so the limit paths are reached; depth under the
	 * writer's so every parsed tree can be written. */
	struct json_limits lim = {
	    .max_bytes = 1 << 16,
	    .max_depth = 16,
	    .max_values = 512,
	    .reject_dup_keys = 0,
	};
	struct json_doc doc, doc2;
	struct json_w w1, w2;
	struct err e;
	int dup;

	/* One input in three with a 1-bit key hash, so objects of a few keys
	 * already reach the paths for colliding hashes (deterministic per
	 * input, so crashes reproduce). */
	json_test_hash_bits = size % 3 == 0 ? 1 : 32;
	if (json_parse(&doc, (const char *)data, size, &lim, &e) < 0) {
		FUZZ_CHECK(doc.root == NULL && doc.arena == NULL);
		FUZZ_CHECK(e.code != NULL && (strncmp(e.code, "json.", 5) == 0));
		json_free(&doc);
		lim.reject_dup_keys = 1;
		FUZZ_CHECK(json_parse(&doc, (const char *)data, size, &lim, &e) < 0);
		return 0;
	}
	dup = has_dup(doc.root);
	fuzz_keys_walk(doc.root);
	check_numbers(doc.root);

	json_w_init(&w1, 1 << 20);
	json_w_val(&w1, doc.root);
	FUZZ_CHECK(!w1.overflow);
	FUZZ_CHECK(strlen(w1.buf) == w1.len);
	FUZZ_CHECK(json_parse(&doc2, w1.buf, w1.len, &lim, &e) == 0);
	json_w_init(&w2, 1 << 20);
	json_w_val(&w2, doc2.root);
	FUZZ_CHECK(!w2.overflow);
	FUZZ_CHECK(w1.len == w2.len && memcmp(w1.buf, w2.buf, w1.len) == 0);
	json_free(&doc2);

	lim.reject_dup_keys = 1;
	if (json_parse(&doc2, (const char *)data, size, &lim, &e) == 0) {
		FUZZ_CHECK(!dup);
		json_free(&doc2);
	} else {
		FUZZ_CHECK(dup && strcmp(e.code, "json.syntax") == 0 &&
		           strstr(e.msg, "duplicate key") != NULL);
	}
	json_w_free(&w1);
	json_w_free(&w2);
	json_free(&doc);
	return 0;
}
