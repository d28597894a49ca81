/*
 * The bounded JSON writer and string escaping (see json.h), and what the
 * parser in json.c, json_keys.c and json_file.c shares with it: UTF-8.
 * Nothing here calls into those files, so the folder reads bottom-up.
 */
#include "base/json.h"
#include "base/json_int.h"
#include "base/decimal.h"
#include "base/digest.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ABX_TEST
int json_test_hash_bits = 32;
#endif

/* ---- UTF-8 ---- */

/* (json.h) */
int
json_utf8_len(const unsigned char *p, const unsigned char *end, const char **why)
{
	unsigned c = p[0], lo = 0x80, hi = 0xbf;
	int n, i;

	if (c < 0x80)
		return 1;
	if (c < 0xc0) {
		*why = "invalid UTF-8: unexpected continuation byte";
		return 0;
	}
	if (c < 0xc2) {
		*why = "invalid UTF-8: overlong encoding";
		return 0;
	}
	if (c < 0xe0) {
		n = 2;
	} else if (c < 0xf0) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c < 0xf5) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		*why =
		    c < 0xf8 ? "invalid UTF-8: code point above U+10FFFF" : "invalid UTF-8: byte never valid";
		return 0;
	}
	if (end - p < 2) {
		*why = "invalid UTF-8: truncated sequence";
		return 0;
	}
	if (p[1] < lo || p[1] > hi) {
		if ((p[1] & 0xc0) != 0x80)
			*why = "invalid UTF-8: truncated sequence";
		else if (c == 0xe0 || c == 0xf0)
			*why = "invalid UTF-8: overlong encoding";
		else if (c == 0xed)
			*why = "invalid UTF-8: encoded surrogate";
		else
			*why = "invalid UTF-8: code point above U+10FFFF";
		return 0;
	}
	for (i = 2; i < n; i++) {
		if (end - p <= i || (p[i] & 0xc0) != 0x80) {
			*why = "invalid UTF-8: truncated sequence";
			return 0;
		}
	}
	return n;
}

/* ---- escaping (shared by the writer, json_escape and error messages) ---- */

typedef void (*put_fn)(void *ctx, const char *s, size_t n);

static void
escape_to(put_fn put, void *ctx, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str, *end = s + n, *run;
	const char *why;
	char u[7] = {'\\', 'u', '0', '0', 0, 0, 0};
	int k;

	put(ctx, "\"", 1);
	while (s < end) {
		run = s;
		while (s < end && *s >= 0x20 && *s < 0x80 && *s != '"' && *s != '\\')
			s++;
		if (s > run)
			put(ctx, (const char *)run, (size_t)(s - run));
		if (s >= end)
			break;
		switch (*s) {
		case '"':
			put(ctx, "\\\"", 2);
			s++;
			continue;
		case '\\':
			put(ctx, "\\\\", 2);
			s++;
			continue;
		case '\b':
			put(ctx, "\\b", 2);
			s++;
			continue;
		case '\f':
			put(ctx, "\\f", 2);
			s++;
			continue;
		case '\n':
			put(ctx, "\\n", 2);
			s++;
			continue;
		case '\r':
			put(ctx, "\\r", 2);
			s++;
			continue;
		case '\t':
			put(ctx, "\\t", 2);
			s++;
			continue;
		}
		if (*s < 0x20) {
			hex_encode(s, 1, u + 4);
			put(ctx, u, 6);
			s++;
			continue;
		}
		k = json_utf8_len(s, end, &why);
		if (k == 0) {
			put(ctx, "\xef\xbf\xbd", 3);
			s++;
		} else {
			put(ctx, (const char *)s, (size_t)k);
			s += k;
		}
	}
	put(ctx, "\"", 1);
}

/* The sizes escape_to writes, byte class by byte class: keep the two in step
 * (test_json checks them against each other). */
size_t
json_escaped_prefix(const char *str, size_t n, size_t max)
{
	const unsigned char *s = (const unsigned char *)str, *end = s + n;
	const char *why;
	size_t used = 0, k, out;

	while (s < end) {
		if (*s >= 0x20 && *s < 0x80 && *s != '"' && *s != '\\') {
			k = 1, out = 1;
		} else if (strchr("\"\\\b\f\n\r\t", *s) != NULL && *s != '\0') {
			k = 1, out = 2;
		} else if (*s < 0x20) {
			k = 1, out = 6;
		} else {
			k = (size_t)json_utf8_len(s, end, &why);
			out = k == 0 ? 3 : k;
			k = k == 0 ? 1 : k;
		}
		if (used + out > max)
			break;
		used += out;
		s += k;
	}
	return (size_t)(s - (const unsigned char *)str);
}

struct fixbuf {
	char *buf;
	size_t len, cap;
	int over;
};

static void
fix_put(void *ctx, const char *s, size_t n)
{
	struct fixbuf *f = ctx;

	if (f->over || n >= f->cap - f->len) {
		f->over = 1;
		return;
	}
	memcpy(f->buf + f->len, s, n);
	f->len += n;
}

int
json_escape(char *buf, size_t cap, const char *s)
{
	struct fixbuf f = {buf, 0, cap, 0};

	if (buf == NULL || cap == 0)
		return -1;
	if (s == NULL)
		s = "";
	escape_to(fix_put, &f, s, strlen(s));
	if (f.over || f.len > INT_MAX) {
		buf[0] = '\0';
		return -1;
	}
	buf[f.len] = '\0';
	return (int)f.len;
}

void
json_short_key(char *buf, size_t cap, const char *key, size_t keylen)
{
	struct fixbuf f = {buf, 0, cap - 4, 0};

	escape_to(fix_put, &f, key, keylen < 60 ? keylen : 60);
	if (keylen > 60 && f.len > 0 && !f.over) {
		/* Drop the closing quote, mark the cut. */
		memcpy(buf + f.len - 1, "...\"", 4);
		f.len += 3;
	}
	buf[f.len] = '\0';
}

/* ---- writer ---- */

#define W_COMMA 1 /* the container has a member already */
#define W_OBJ 2   /* the container is an object */

/* What buf shows before out holds a byte, so it is never NULL; never
 * written to. */
static char w_empty[1];

void
json_w_init(struct json_w *w, size_t max)
{
	memset(w, 0, sizeof(*w));
	w->buf = w_empty;
	/* Headroom so len + n + 1 never wraps. */
	w->out = (struct buf)BUF_INIT(max > SIZE_MAX / 4 ? SIZE_MAX / 4 : max);
}

void
json_w_free(struct json_w *w)
{
	buf_free(&w->out);
	w->buf = w_empty;
	w->len = 0;
}

/* Append s[0..n): a put that does not fit (or finds no memory) sets
 * overflow, and then every later put does nothing. */
static void
w_put(void *ctx, const char *s, size_t n)
{
	struct json_w *w = ctx;
	struct buf *b = &w->out;

	if (w->overflow)
		return;
	/* Most puts are a few bytes into room there is (cap stays within
	 * max + 1): copied here, not through buf_put's checks, and byte by
	 * byte when short (memcpy's rep movsb costs more below 16 bytes). */
	if (n < b->cap - b->len) {
		unsigned char *d = b->p + b->len;
		size_t i;

		if (n < 16)
			for (i = 0; i < n; i++)
				d[i] = (unsigned char)s[i];
		else
			memcpy(d, s, n);
		b->p[w->len = b->len += n] = '\0';
		return;
	}
	if (buf_put(b, s, n) != 0) {
		w->overflow = 1;
		return;
	}
	w->buf = (char *)w->out.p;
	w->len = w->out.len;
}

/* s[0..n) as a JSON string written straight into the room there is, with
 * the byte lead before it and tail after it (0: none), when no byte needs
 * an escape: the common case costs no put per piece. 0 when done, -1 when
 * not (nothing written: the caller takes the general way). */
static int
w_plain(struct json_w *w, char lead, const char *str, size_t n, char tail)
{
	struct buf *b = &w->out;
	const unsigned char *s = (const unsigned char *)str, *end = s + n;
	unsigned char *d;
	uint64_t w8;

	/* lead, the quotes, tail and the NUL */
	if (w->overflow || n + 4 >= b->cap - b->len)
		return -1;
	d = b->p + b->len;
	if (lead)
		*d++ = (unsigned char)lead;
	*d++ = '"';
	while (end - s >= 8 && (memcpy(&w8, s, 8), json_plain8(w8))) {
		memcpy(d, &w8, 8);
		d += 8;
		s += 8;
	}
	while (s < end && *s >= 0x20 && *s < 0x80 && *s != '"' && *s != '\\')
		*d++ = *s++;
	if (s < end)
		return -1;
	*d++ = '"';
	if (tail)
		*d++ = (unsigned char)tail;
	*d = '\0';
	w->len = b->len = (size_t)(d - b->p);
	return 0;
}

/* Separator before a value; -1 (and overflow) on misuse. */
static int
w_sep(struct json_w *w)
{
	unsigned char *st;

	if (w->overflow)
		return -1;
	if (w->after_key) {
		w->after_key = 0;
		return 0;
	}
	if (w->depth == 0) {
		if (w->len > 0)
			w_put(w, "\n", 1);
		return w->overflow ? -1 : 0;
	}
	st = &w->need_comma[w->depth - 1];
	if (*st & W_OBJ) {
		w->overflow = 1; /* a value in an object needs a key */
		return -1;
	}
	if (*st & W_COMMA)
		w_put(w, ",", 1);
	*st |= W_COMMA;
	return w->overflow ? -1 : 0;
}

static void
w_open(struct json_w *w, int obj)
{
	if (w_sep(w) < 0)
		return;
	if (w->depth >= JSON_W_MAX_DEPTH) {
		w->overflow = 1;
		return;
	}
	w_put(w, obj ? "{" : "[", 1);
	w->need_comma[w->depth++] = obj ? W_OBJ : 0;
}

void
json_w_obj(struct json_w *w)
{
	w_open(w, 1);
}

void
json_w_arr(struct json_w *w)
{
	w_open(w, 0);
}

void
json_w_end(struct json_w *w)
{
	if (w->overflow)
		return;
	if (w->depth == 0 || w->after_key) {
		w->overflow = 1;
		return;
	}
	w->depth--;
	w_put(w, w->need_comma[w->depth] & W_OBJ ? "}" : "]", 1);
}

static void
w_keyn(struct json_w *w, const char *key, size_t n)
{
	unsigned char *st;

	if (w->overflow)
		return;
	if (key == NULL || w->depth == 0 || w->after_key || !(w->need_comma[w->depth - 1] & W_OBJ)) {
		w->overflow = 1;
		return;
	}
	st = &w->need_comma[w->depth - 1];
	if (w_plain(w, *st & W_COMMA ? ',' : 0, key, n, ':') != 0) {
		if (*st & W_COMMA)
			w_put(w, ",", 1);
		escape_to(w_put, w, key, n);
		w_put(w, ":", 1);
	}
	*st |= W_COMMA;
	w->after_key = 1;
}

void
json_w_key(struct json_w *w, const char *key)
{
	w_keyn(w, key, key ? strlen(key) : 0);
}

void
json_w_strn(struct json_w *w, const char *s, size_t n)
{
	if (s == NULL) {
		json_w_null(w);
		return;
	}
	if (w_sep(w) < 0)
		return;
	if (w_plain(w, 0, s, n, 0) != 0)
		escape_to(w_put, w, s, n);
}

void
json_w_str(struct json_w *w, const char *s)
{
	json_w_strn(w, s, s ? strlen(s) : 0);
}

void
json_w_int(struct json_w *w, int64_t v)
{
	char b[24], *p = b + sizeof(b);
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

	if (w_sep(w) < 0)
		return;
	do
		*--p = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	if (v < 0)
		*--p = '-';
	w_put(w, p, (size_t)(b + sizeof(b) - p));
}

void
json_w_double(struct json_w *w, double v)
{
	char b[40];

	if (!isfinite(v)) {
		json_w_null(w);
		return;
	}
	if (w_sep(w) < 0)
		return;
	w_put(w, b, dec_format(v, b, sizeof(b)));
}

void
json_w_bool(struct json_w *w, int v)
{
	if (w_sep(w) < 0)
		return;
	if (v)
		w_put(w, "true", 4);
	else
		w_put(w, "false", 5);
}

void
json_w_null(struct json_w *w)
{
	if (w_sep(w) < 0)
		return;
	w_put(w, "null", 4);
}

void
json_w_raw(struct json_w *w, const char *json)
{
	if (json == NULL) {
		json_w_null(w);
		return;
	}
	if (w_sep(w) < 0)
		return;
	w_put(w, json, strlen(json));
}

void
json_w_members(struct json_w *w, const char *obj)
{
	unsigned char *st;
	size_t n;

	if (w->overflow || obj == NULL)
		return;
	n = strlen(obj);
	if (n < 2 || obj[0] != '{' || obj[n - 1] != '}' || w->depth == 0 || w->after_key ||
	    !(w->need_comma[w->depth - 1] & W_OBJ)) {
		w->overflow = 1;
		return;
	}
	if (n == 2)
		return;
	st = &w->need_comma[w->depth - 1];
	if (*st & W_COMMA)
		w_put(w, ",", 1);
	*st |= W_COMMA;
	w_put(w, obj + 1, n - 2);
}

void
json_w_reset(struct json_w *w)
{
	buf_reset(&w->out);
	w->len = 0;
	w->overflow = 0;
	w->depth = 0;
	w->after_key = 0;
	memset(w->need_comma, 0, sizeof(w->need_comma));
}

void
json_w_val(struct json_w *w, const struct json_val *v)
{
	size_t i;

	if (w->overflow)
		return;
	if (v == NULL) {
		json_w_null(w);
		return;
	}
	switch (v->type) {
	case JSON_NULL:
		json_w_null(w);
		break;
	case JSON_FALSE:
		json_w_bool(w, 0);
		break;
	case JSON_TRUE:
		json_w_bool(w, 1);
		break;
	case JSON_NUMBER:
		if (v->u.num.text != NULL)
			json_w_raw(w, v->u.num.text);
		else if (v->u.num.is_int)
			json_w_int(w, v->u.num.i);
		else
			json_w_double(w, v->u.num.d);
		break;
	case JSON_STRING:
		json_w_strn(w, v->u.str.s, v->u.str.len);
		break;
	case JSON_ARRAY:
		json_w_arr(w);
		/* Recursion stops at JSON_W_MAX_DEPTH: deeper sets overflow. */
		for (i = 0; i < v->u.arr.n && !w->overflow; i++)
			json_w_val(w, &v->u.arr.v[i]);
		json_w_end(w);
		break;
	case JSON_OBJECT:
		json_w_obj(w);
		for (i = 0; i < v->u.obj.n && !w->overflow; i++) {
			w_keyn(w, v->u.obj.m[i].key, v->u.obj.m[i].keylen);
			json_w_val(w, &v->u.obj.m[i].val);
		}
		json_w_end(w);
		break;
	default:
		w->overflow = 1;
		break;
	}
}

void
json_w_kstr(struct json_w *w, const char *key, const char *s)
{
	json_w_key(w, key);
	json_w_str(w, s);
}

void
json_w_kint(struct json_w *w, const char *key, int64_t v)
{
	json_w_key(w, key);
	json_w_int(w, v);
}

void
json_w_kbool(struct json_w *w, const char *key, int v)
{
	json_w_key(w, key);
	json_w_bool(w, v);
}
