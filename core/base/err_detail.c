/*
 * Error details member by member (see err.h): the caller's details buffer
 * stays one JSON object whatever is added, its keys and strings escaped by
 * the writer's escaping (json.h). No buffer: nothing is kept.
 */
#include "base/err.h"
#include "base/json.h"

#include <stdio.h>
#include <string.h>

/* "key": value (value already JSON) appended to e->details. */
static int
add(struct err *e, const char *key, const char *value)
{
	char k[ERR_DETAILS_MAX];
	size_t n, kn, vn, at;

	if (e == NULL || e->details == NULL || e->details_cap < 3 || key == NULL || value == NULL)
		return -1;
	if (json_escape(k, sizeof(k), key) < 0)
		return -1;
	n = strlen(e->details);
	kn = strlen(k);
	vn = strlen(value);
	/* Only this file and err_details write details, both whole objects:
	 * anything else is replaced. */
	if (n < 2 || e->details[0] != '{' || e->details[n - 1] != '}')
		memcpy(e->details, "{}", 3), n = 2;
	at = n - 1;
	/* ',' (unless first) key ':' value '}' NUL */
	if (at + (n > 2) + kn + 1 + vn + 2 > e->details_cap)
		return -1;
	if (n > 2)
		e->details[at++] = ',';
	memcpy(e->details + at, k, kn);
	at += kn;
	e->details[at++] = ':';
	memcpy(e->details + at, value, vn);
	at += vn;
	memcpy(e->details + at, "}", 2);
	return 0;
}

int
err_detail_str(struct err *e, const char *key, const char *s)
{
	char v[ERR_DETAILS_MAX];

	if (e == NULL || e->details == NULL)
		return -1;
	if (s == NULL)
		return add(e, key, "null");
	if (json_escape(v, sizeof(v), s) < 0)
		return -1;
	return add(e, key, v);
}

int
err_detail_int(struct err *e, const char *key, long long v)
{
	char b[24];

	snprintf(b, sizeof(b), "%lld", v);
	return add(e, key, b);
}

int
err_detail_json(struct err *e, const char *key, const char *value)
{
	return add(e, key, value);
}
