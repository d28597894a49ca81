/*
 * The strict JSON parser (see json.h); the writer and escaping are in
 * json_write.c.
 *
 * The parser is iterative: containers live on an explicit frame stack whose
 * height is bounded by max_depth, so hostile nesting cannot exhaust the C
 * stack whatever limit a caller picks. Children are collected in a scratch
 * array (malloc'd, freed before returning) and copied into the arena once,
 * when their container closes, so every array and object in the tree is one
 * contiguous block and each value is copied exactly once.
 */
#include "base/json.h"
#include "base/buf.h"
#include "base/decimal.h"
#include "base/json_int.h"
#include "base/digest.h"
#include "base/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const struct json_limits json_default_limits = {
    .max_bytes = JSON_MAX_BYTES_DEFAULT,
    .max_depth = JSON_MAX_DEPTH_DEFAULT,
    .max_values = JSON_MAX_VALUES_DEFAULT,
    .reject_dup_keys = 1,
};

/*
 * The arena: a list of blocks. Blocks double from ARENA_BLOCK_MIN up to
 * ARENA_BLOCK_MAX, so a small document costs one small malloc and a 16 MiB
 * one a few dozen; a request above a quarter of the next block size (a big
 * array, a long string) gets a block of its own, so at most a quarter block
 * is wasted per block and the total stays proportional to the tree.
 */
#define ARENA_BLOCK_MIN 2048
#define ARENA_BLOCK_MAX (1u << 20)

struct ablock {
	struct ablock *next;
	size_t cap, used;
};

/* Data starts 16-aligned after the header, like malloc's own alignment. */
#define ABLOCK_HDR ((sizeof(struct ablock) + 15) & ~(size_t)15)
#define ABLOCK_DATA(b) ((unsigned char *)(b) + ABLOCK_HDR)

struct arena {
	struct ablock *head;
	size_t next_cap;
	size_t total;
};

static void *
arena_alloc(struct arena *a, size_t n, size_t align)
{
	struct ablock *b = a->head, *nb;
	size_t off, cap;

	if (b != NULL) {
		off = (b->used + align - 1) & ~(align - 1);
		if (off <= b->cap && n <= b->cap - off) {
			b->used = off + n;
			return ABLOCK_DATA(b) + off;
		}
	}
	if (n > SIZE_MAX / 2)
		return NULL;
	if (n > a->next_cap / 4) {
		nb = buf_realloc(NULL, ABLOCK_HDR + n);
		if (nb == NULL)
			return NULL;
		nb->cap = nb->used = n;
		a->total += ABLOCK_HDR + n;
		/* Behind the head, so the head's free tail stays usable. */
		if (b != NULL) {
			nb->next = b->next;
			b->next = nb;
		} else {
			nb->next = NULL;
			a->head = nb;
		}
		return ABLOCK_DATA(nb);
	}
	cap = a->next_cap;
	nb = buf_realloc(NULL, ABLOCK_HDR + cap);
	if (nb == NULL)
		return NULL;
	if (a->next_cap < ARENA_BLOCK_MAX)
		a->next_cap *= 2;
	nb->cap = cap;
	nb->used = n;
	nb->next = b;
	a->head = nb;
	a->total += ABLOCK_HDR + cap;
	return ABLOCK_DATA(nb);
}

static void
arena_free(struct arena *a)
{
	struct ablock *b, *next;

	if (a == NULL)
		return;
	for (b = a->head; b != NULL; b = next) {
		next = b->next;
		free(b);
	}
	free(a);
}

/* ---- UTF-8 ---- */

static size_t
utf8_put(unsigned char *d, unsigned long cp)
{
	if (cp < 0x80) {
		d[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		d[0] = (unsigned char)(0xc0 | (cp >> 6));
		d[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		d[0] = (unsigned char)(0xe0 | (cp >> 12));
		d[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		d[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	d[0] = (unsigned char)(0xf0 | (cp >> 18));
	d[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
	d[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
	d[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

/* ---- parser ---- */

struct slot {
	struct json_member m;
	int kline, kcol; /* where the key starts, for "duplicate key" */
	uint32_t h;      /* json_key_hash of the key */
};

struct frame {
	size_t base; /* first slot of this container */
	int is_obj;
	int line, col;
};

struct parser {
	const unsigned char *p, *end, *line_start;
	int line;
	const struct json_limits *lim;
	struct arena *a;
	struct err *e;
	size_t nvalues;
	struct vec slots;  /* struct slot: at most max_values + 1 (one key's value uncounted) */
	struct vec frames; /* struct frame: at most max_depth */
	struct vec sort;   /* struct keyent: json_find_dup's 2n entries */
};

#define SLOTS(P) ((struct slot *)(P)->slots.p)
#define FRAMES(P) ((struct frame *)(P)->frames.p)

#define ALIGN_VAL _Alignof(struct json_member)

static int
colof(const struct parser *P, const unsigned char *at)
{
	size_t c = (size_t)(at - P->line_start) + 1;

	return c > INT_MAX ? INT_MAX : (int)c;
}

static int perr_at(struct parser *P, int line, int col, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int
perr_at(struct parser *P, int line, int col, const char *code, const char *fmt, ...)
{
	char what[ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	err_fmtv(what, sizeof(what), fmt, ap);
	va_end(ap);
	return err_set(P->e, code, "%d:%d: %s", line, col, what);
}

#define PERR(P, at, code, ...) perr_at((P), (P)->line, colof((P), (at)), (code), __VA_ARGS__)

static int
oom(struct parser *P)
{
	return err_set(P->e, "internal", "out of memory parsing JSON");
}

/* "unexpected X, expected WHAT" at at, or json.encoding if at holds invalid
 * UTF-8 (the encoding is the more useful thing to report then). */
static int
unexpected(struct parser *P, const unsigned char *at, const char *what)
{
	const char *why;

	if (at >= P->end)
		return PERR(P, at, "json.syntax", "unexpected end of input, expected %s", what);
	if (*at >= 0x80) {
		if (json_utf8_len(at, P->end, &why) == 0)
			return PERR(P, at, "json.encoding", "%s", why);
		return PERR(P, at, "json.syntax", "unexpected non-ASCII character, expected %s", what);
	}
	if (*at >= 0x20 && *at < 0x7f)
		return PERR(P, at, "json.syntax", "unexpected '%c', expected %s", *at, what);
	return PERR(P, at, "json.syntax", "unexpected byte 0x%02X, expected %s", *at, what);
}

static void
skip_ws(struct parser *P)
{
	const unsigned char *p = P->p, *end = P->end;

	while (p < end) {
		if (*p == ' ' || *p == '\t' || *p == '\r') {
			p++;
		} else if (*p == '\n') {
			p++;
			if (P->line < INT_MAX)
				P->line++;
			P->line_start = p;
		} else {
			break;
		}
	}
	P->p = p;
}

static int
hex4(const unsigned char *p, const unsigned char *end, unsigned long *out, const unsigned char **bad)
{
	unsigned long v = 0;
	int i, d;

	for (i = 0; i < 4; i++) {
		if (p + i >= end) {
			*bad = p + i;
			return -1;
		}
		d = hex_digit(p[i]);
		if (d < 0) {
			*bad = p + i;
			return -1;
		}
		v = v << 4 | (unsigned long)d;
	}
	*out = v;
	return 0;
}

/* Bytes that stand for themselves in a string: printable ASCII but '"' and
 * '\\'. A table, because this test runs once per input byte of every string. */
static const unsigned char plain[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};

/* P->p at the opening quote. Decoded text goes to the arena: never longer
 * than the raw text (an escape is at least as long as what it stands for). */
static int
parse_string(struct parser *P, const char **out, size_t *outlen, int is_key)
{
	const unsigned char *s = P->p + 1, *q = s, *end = P->end, *run, *bad;
	unsigned char *d, *d0;
	unsigned long cp, lo = 0;
	const char *why;
	int k;

	/* Most strings (names, versions, URLs, digests) are plain ASCII: one
	 * scan and a copy. */
	while (q < end && plain[*q])
		q++;
	if (q < end && *q == '"') {
		d = arena_alloc(P->a, (size_t)(q - s) + 1, 1);
		if (d == NULL)
			return oom(P);
		memcpy(d, s, (size_t)(q - s));
		d[q - s] = '\0';
		*out = (const char *)d;
		*outlen = (size_t)(q - s);
		P->p = q + 1;
		return 0;
	}
	while (q < end && *q != '"')
		q += *q == '\\' ? 2 : 1;
	if (q > end)
		q = end;
	d0 = d = arena_alloc(P->a, (size_t)(q - s) + 1, 1);
	if (d == NULL)
		return oom(P);
	for (;;) {
		run = s;
		while (s < end && plain[*s])
			s++;
		memcpy(d, run, (size_t)(s - run));
		d += s - run;
		if (s >= end)
			return PERR(P, s, "json.syntax",
			            "unexpected end of input in a string, expected '\"'");
		if (*s == '"')
			break;
		if (*s < 0x20)
			return PERR(P, s, "json.syntax",
			            "control character 0x%02X in a string, expected it escaped", *s);
		if (*s >= 0x80) {
			k = json_utf8_len(s, end, &why);
			if (k == 0)
				return PERR(P, s, "json.encoding", "%s", why);
			memcpy(d, s, (size_t)k);
			d += k;
			s += k;
			continue;
		}
		/* A backslash. */
		if (s + 1 >= end)
			return PERR(P, s + 1, "json.syntax",
			            "unexpected end of input in a string, expected an escape");
		switch (s[1]) {
		case '"':
			*d++ = '"';
			break;
		case '\\':
			*d++ = '\\';
			break;
		case '/':
			*d++ = '/';
			break;
		case 'b':
			*d++ = '\b';
			break;
		case 'f':
			*d++ = '\f';
			break;
		case 'n':
			*d++ = '\n';
			break;
		case 'r':
			*d++ = '\r';
			break;
		case 't':
			*d++ = '\t';
			break;
		case 'u':
			if (hex4(s + 2, end, &cp, &bad) < 0)
				return unexpected(P, bad, "4 hex digits after \\u");
			/* A loader reading a key as a C string would see "argv\u0000"
			 * as "argv", a second "argv" the duplicate-key rule misses. */
			if (cp == 0 && is_key)
				return PERR(P, s, "json.syntax",
				            "\\u0000 in an object key, keys may not hold NUL");
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return PERR(P, s, "json.encoding", "lone low surrogate \\u%04lX", cp);
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (end - s < 12 || s[6] != '\\' || s[7] != 'u' ||
				    hex4(s + 8, end, &lo, &bad) < 0 || lo < 0xdc00 || lo > 0xdfff)
					return PERR(P, s, "json.encoding",
					            "lone high surrogate \\u%04lX, expected a "
					            "\\uDC00-\\uDFFF after it",
					            cp);
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				s += 6;
			}
			d += utf8_put(d, cp);
			s += 6;
			continue;
		default:
			return unexpected(P, s + 1, "an escape (one of \"\\/bfnrtu) after '\\'");
		}
		s += 2;
	}
	*d = '\0';
	*out = (const char *)d0;
	*outlen = (size_t)(d - d0);
	P->p = s + 1;
	return 0;
}

static int
is_digit(const unsigned char *p, const unsigned char *end)
{
	return p < end && *p >= '0' && *p <= '9';
}

static int
parse_number(struct parser *P, struct json_val *v)
{
	const unsigned char *s = P->p, *q = s, *end = P->end;
	uint64_t acc = 0;
	int neg = 0, isint = 1, ovf = 0;
	size_t len;
	char *text;
	double d;

	if (*q == '-') {
		neg = 1;
		q++;
	}
	if (q < end && *q == '0') {
		q++;
		if (is_digit(q, end))
			return PERR(
			    P, q, "json.syntax",
			    "leading zeros are not allowed, expected '.', 'e' or the end of the number");
	} else if (is_digit(q, end)) {
		for (; is_digit(q, end); q++) {
			if (acc > (UINT64_MAX - 9) / 10)
				ovf = 1;
			else
				acc = acc * 10 + (uint64_t)(*q - '0');
		}
	} else {
		return unexpected(P, q, "a digit after '-'");
	}
	if (q < end && *q == '.') {
		isint = 0;
		q++;
		if (!is_digit(q, end))
			return unexpected(P, q, "a digit after '.'");
		while (is_digit(q, end))
			q++;
	}
	if (q < end && (*q == 'e' || *q == 'E')) {
		isint = 0;
		q++;
		if (q < end && (*q == '+' || *q == '-'))
			q++;
		if (!is_digit(q, end))
			return unexpected(P, q, "a digit in the exponent");
		while (is_digit(q, end))
			q++;
	}
	len = (size_t)(q - s);
	text = arena_alloc(P->a, len + 1, 1);
	if (text == NULL)
		return oom(P);
	memcpy(text, s, len);
	text[len] = '\0';
	v->type = JSON_NUMBER;
	v->u.num.text = text;
	v->u.num.is_int = 0;
	v->u.num.i = 0;
	if (isint && !ovf && acc <= (uint64_t)INT64_MAX + (uint64_t)neg) {
		v->u.num.is_int = 1;
		if (neg)
			v->u.num.i = acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc;
		else
			v->u.num.i = (int64_t)acc;
	}
	if (v->u.num.is_int && acc <= (UINT64_C(1) << 53)) {
		d = (double)acc;
		d = neg ? -d : d; /* "-0" stays -0.0 */
	} else {
		if (dec_parse(text, NULL, &d) != 0)
			return PERR(P, s, "json.too_large", "number out of range");
	}
	v->u.num.d = d;
	P->p = q;
	return 0;
}

static int
parse_literal(struct parser *P, struct json_val *v)
{
	const unsigned char *s = P->p;
	const char *lit;
	size_t n, i;

	switch (*s) {
	case 't':
		lit = "true";
		v->type = JSON_TRUE;
		break;
	case 'f':
		lit = "false";
		v->type = JSON_FALSE;
		break;
	default:
		lit = "null";
		v->type = JSON_NULL;
		break;
	}
	n = strlen(lit);
	for (i = 0; i < n; i++) {
		if (s + i >= P->end)
			return PERR(P, s + i, "json.syntax", "unexpected end of input, expected '%s'", lit);
		if (s[i] != (unsigned char)lit[i])
			return PERR(P, s, "json.syntax", "invalid literal, expected '%s'", lit);
	}
	P->p = s + n;
	return 0;
}

static int
close_container(struct parser *P, struct json_val *v)
{
	struct frame *f = &FRAMES(P)[P->frames.n - 1];
	size_t n = P->slots.n - f->base, i, k;
	struct slot *sl = n > 0 ? SLOTS(P) + f->base : NULL;
	char kbuf[80];

	memset(v, 0, sizeof(*v));
	v->line = f->line;
	v->col = f->col;
	if (f->is_obj) {
		v->type = JSON_OBJECT;
		if (P->lim->reject_dup_keys && n > 1) {
			i = n;
			if (n <= DUP_LINEAR_MAX) {
				size_t j;

				for (k = 1; k < n && i == n; k++)
					for (j = 0; j < k; j++)
						if (sl[k].h == sl[j].h && json_key_eq(&sl[k].m, &sl[j].m)) {
							i = k;
							break;
						}
			} else {
				struct keyent *ents;

				if (vec_reserve(&P->sort, 2 * n) < 0)
					return oom(P);
				ents = P->sort.p;
				for (k = 0; k < n; k++) {
					ents[k].h = sl[k].h;
					ents[k].m = &sl[k].m;
				}
				i = json_find_dup(sl, sizeof(*sl), n, ents);
			}
			if (i < n) {
				json_short_key(kbuf, sizeof(kbuf), sl[i].m.key, sl[i].m.keylen);
				return perr_at(P, sl[i].kline, sl[i].kcol, "json.syntax", "duplicate key %s",
				               kbuf);
			}
		}
		if (n > 0) {
			struct json_member *m = arena_alloc(P->a, n * sizeof(*m), ALIGN_VAL);

			if (m == NULL)
				return oom(P);
			for (i = 0; i < n; i++)
				m[i] = sl[i].m;
			v->u.obj.m = m;
			v->u.obj.n = n;
		}
	} else {
		v->type = JSON_ARRAY;
		if (n > 0) {
			struct json_val *a = arena_alloc(P->a, n * sizeof(*a), ALIGN_VAL);

			if (a == NULL)
				return oom(P);
			for (i = 0; i < n; i++)
				a[i] = sl[i].m.val;
			v->u.arr.v = a;
			v->u.arr.n = n;
		}
	}
	P->slots.n = f->base;
	P->frames.n--;
	return 0;
}

static int
parse_doc(struct parser *P, struct json_val *root)
{
	struct json_val v;
	struct frame *f;
	struct slot *s;
	int c, close;

value:
	skip_ws(P);
	if (P->p >= P->end)
		return unexpected(P, P->p, "a value");
	if (++P->nvalues > P->lim->max_values)
		return PERR(P, P->p, "json.too_large", "more than %zu values", P->lim->max_values);
	memset(&v, 0, sizeof(v));
	v.line = P->line;
	v.col = colof(P, P->p);
	c = *P->p;
	switch (c) {
	case '{':
	case '[':
		if (P->lim->max_depth < 0 || P->frames.n >= (size_t)P->lim->max_depth)
			return PERR(P, P->p, "json.too_deep", "nesting deeper than %d", P->lim->max_depth);
		if ((f = vec_push(&P->frames)) == NULL)
			return oom(P);
		f->base = P->slots.n;
		f->is_obj = c == '{';
		f->line = v.line;
		f->col = v.col;
		P->p++;
		skip_ws(P);
		if (P->p < P->end && *P->p == (c == '{' ? '}' : ']')) {
			P->p++;
			if (close_container(P, &v) < 0)
				return -1;
			goto done;
		}
		if (c == '{')
			goto key;
		goto value;
	case '"':
		v.type = JSON_STRING;
		if (parse_string(P, &v.u.str.s, &v.u.str.len, 0) < 0)
			return -1;
		break;
	case 't':
	case 'f':
	case 'n':
		if (parse_literal(P, &v) < 0)
			return -1;
		break;
	default:
		if (c != '-' && !(c >= '0' && c <= '9'))
			return unexpected(P, P->p, "a value");
		if (parse_number(P, &v) < 0)
			return -1;
		break;
	}
done:
	if (P->frames.n == 0) {
		*root = v;
		skip_ws(P);
		if (P->p < P->end)
			return unexpected(P, P->p, "the end of input after the value");
		return 0;
	}
	f = &FRAMES(P)[P->frames.n - 1];
	if (f->is_obj) {
		SLOTS(P)[P->slots.n - 1].m.val = v;
	} else {
		s = vec_push(&P->slots);
		if (s == NULL)
			return oom(P);
		s->m.val = v;
	}
	skip_ws(P);
	close = f->is_obj ? '}' : ']';
	if (P->p < P->end && *P->p == ',') {
		P->p++;
		if (f->is_obj)
			goto key;
		goto value;
	}
	if (P->p < P->end && *P->p == close) {
		P->p++;
		if (close_container(P, &v) < 0)
			return -1;
		goto done;
	}
	return unexpected(P, P->p, f->is_obj ? "',' or '}'" : "',' or ']'");
key:
	skip_ws(P);
	if (P->p >= P->end || *P->p != '"')
		return unexpected(P, P->p, "a string key");
	s = vec_push(&P->slots);
	if (s == NULL)
		return oom(P);
	s->kline = P->line;
	s->kcol = colof(P, P->p);
	if (parse_string(P, &s->m.key, &s->m.keylen, 1) < 0)
		return -1;
	if (P->lim->reject_dup_keys)
		s->h = json_key_hash(s->m.key, s->m.keylen);
	skip_ws(P);
	if (P->p >= P->end || *P->p != ':')
		return unexpected(P, P->p, "':' after the key");
	P->p++;
	goto value;
}

int
json_parse(struct json_doc *doc, const char *text, size_t len, const struct json_limits *lim, struct err *e)
{
	struct parser P;
	struct json_val root, *r = NULL;
	int rc;

	doc->root = NULL;
	doc->arena = NULL;
	if (lim == NULL)
		lim = &json_default_limits;
	if (text == NULL)
		len = 0;
	if (len > lim->max_bytes)
		return err_set(e, "json.too_large", "%zu bytes, over the limit of %zu", len, lim->max_bytes);
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		return err_set(e, "json.encoding", "1:1: a byte order mark is not allowed");
	memset(&P, 0, sizeof(P));
	P.p = P.line_start = (const unsigned char *)(text ? text : "");
	P.end = P.p + len;
	P.line = 1;
	P.lim = lim;
	P.e = e;
	P.slots = (struct vec)VEC_INIT(sizeof(struct slot),
	                               lim->max_values < SIZE_MAX ? lim->max_values + 1 : SIZE_MAX);
	P.frames =
	    (struct vec)VEC_INIT(sizeof(struct frame), lim->max_depth > 0 ? (size_t)lim->max_depth : 0);
	P.sort = (struct vec)VEC_INIT(sizeof(struct keyent),
	                              P.slots.max <= SIZE_MAX / 2 ? 2 * P.slots.max : SIZE_MAX);
	P.a = buf_realloc(NULL, sizeof(*P.a));
	if (P.a == NULL)
		return oom(&P);
	P.a->head = NULL;
	P.a->next_cap = ARENA_BLOCK_MIN;
	P.a->total = sizeof(*P.a);
	rc = parse_doc(&P, &root);
	if (rc == 0) {
		r = arena_alloc(P.a, sizeof(*r), ALIGN_VAL);
		if (r == NULL)
			rc = oom(&P);
		else
			*r = root;
	}
	vec_free(&P.slots);
	vec_free(&P.frames);
	vec_free(&P.sort);
	if (rc < 0) {
		arena_free(P.a);
		return -1;
	}
	doc->root = r;
	doc->arena = P.a;
	return 0;
}

void
json_free(struct json_doc *doc)
{
	if (doc == NULL)
		return;
	arena_free(doc->arena);
	doc->arena = NULL;
	doc->root = NULL;
}

#ifdef ABX_TEST
size_t
json_test_arena_bytes(const struct json_doc *doc)
{
	const struct arena *a = doc->arena;

	return a ? a->total : 0;
}
#endif
