#ifndef ABX_JSON_H
#define ABX_JSON_H
/*
 * The one strict JSON (RFC 8259) parser for every input: manifests,
 * lockfiles, configuration, policy, request bodies. UTF-8 is validated
 * (overlongs, surrogates, > U+10FFFF refused), and so are \u escapes (a lone
 * surrogate is refused). Size, depth and value count are limited.
 *
 * Errors (struct err codes): json.syntax (message "line:col: what"),
 * json.encoding, json.too_deep, json.too_large.
 *
 * The parser builds a read-only tree in one arena owned by struct json_doc;
 * every pointer in it lives until json_free(doc). The tree never points into
 * the input text, which the caller may free as soon as json_parse returns.
 * The arena grows with the document (about the input size plus 48 bytes per
 * value), so max_bytes and max_values bound it.
 *
 * Positions are "line:col", both 1-based; col counts bytes, not characters
 * (a minified multi-MiB lockfile is one line, and counting characters for
 * every value would cost a pass over the line each time).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

enum json_type {
	JSON_NULL,
	JSON_FALSE,
	JSON_TRUE,
	JSON_NUMBER,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT,
};

struct json_member;

struct json_val {
	enum json_type type;
	int line, col; /* where the value starts, 1-based (col in bytes) */
	union {
		struct {
			const char *s; /* decoded UTF-8, NUL-terminated */
			size_t len;    /* may contain U+0000 (then strlen < len) */
		} str;
		struct {
			const char *text; /* the number exactly as written, NUL-terminated */
			double d;
			int is_int; /* no fraction/exponent and fits int64 */
			/* A number beyond double's range (1e400) is refused,
			 * json.too_large "number out of range" (RFC 8259 §6
			 * lets a parser limit the range). */
			int64_t i;
		} num;
		struct {
			struct json_val *v;
			size_t n;
		} arr;
		struct {
			struct json_member *m; /* in document order */
			size_t n;
		} obj;
	} u;
};

struct json_member {
	/* Decoded, NUL-terminated. Never holds U+0000: "\u0000" in a key is
	 * refused (json.syntax at its line:col), so a key read as a C string is
	 * the key compared as bytes. Compare with json_key_is all the same. */
	const char *key;
	size_t keylen;
	struct json_val val;
};

/* Why these numbers: the largest real input is an npm lockfile (a few MiB
 * for a big CLI); nesting in any of our formats is under 10 levels. */
#define JSON_MAX_BYTES_DEFAULT (16u << 20)
#define JSON_MAX_DEPTH_DEFAULT 64
#define JSON_MAX_VALUES_DEFAULT (1u << 20)

struct json_limits {
	size_t max_bytes;    /* input length; over it: json.too_large */
	int max_depth;       /* nesting of arrays/objects; over it: json.too_deep */
	size_t max_values;   /* total values; over it: json.too_large */
	int reject_dup_keys; /* duplicate key in one object: json.syntax "duplicate key" */
};

/* Defaults above, with reject_dup_keys = 1 (manifests, lockfiles, config). */
extern const struct json_limits json_default_limits;

struct json_doc {
	struct json_val *root; /* NULL until a successful parse */
	void *arena;           /* private */
};

/* Parse text[0..len) (need not be NUL-terminated) into doc. Leading and
 * trailing whitespace allowed; anything else after the value is json.syntax.
 * A UTF-8 BOM is refused (json.encoding). lim NULL = json_default_limits.
 * Returns 0, or -1 with e set and doc empty (json_free is still safe). */
int json_parse(struct json_doc *doc, const char *text, size_t len, const struct json_limits *lim,
               struct err *e);

/* Read a whole file (at most lim->max_bytes) and parse it. The file name is
 * put in front of the message: "path:line:col: ...". io.error if unreadable
 * or not a regular file. Opened as fs_open_input: an operator's input, so
 * symlinks are followed and a FIFO is refused instead of blocking. */
int json_parse_file(struct json_doc *doc, const char *path, const struct json_limits *lim, struct err *e);

void json_free(struct json_doc *doc);

/* Object member by key (first match), or NULL; NULL obj or non-object → NULL. */
const struct json_val *json_get(const struct json_val *obj, const char *key);

/* A schema error about value v of file, for the loaders that check a parsed
 * document's shape: e gets code and "<message> (file:line:col)" (line and
 * col 0 when v is NULL). Returns -1. */
int json_err_at(struct err *e, const char *code, const char *file, const struct json_val *v, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));
int json_verr_at(struct err *e, const char *code, const char *file, const struct json_val *v, const char *fmt,
                 va_list ap);

/* 1 when m's key is exactly name, all keylen bytes compared; else 0. The
 * one way a loader matches a member name (never strcmp on m->key). */
int json_key_is(const struct json_member *m, const char *name);

/* Convenience accessors: NULL / default when missing or of another type. */
const char *json_str(const struct json_val *v); /* string or NULL */
const char *json_get_str(const struct json_val *obj, const char *key);
int json_is(const struct json_val *v, enum json_type t);

/* The first key that appears twice in obj (or NULL): of the keys that
 * repeat, the one whose second occurrence comes first. For callers that
 * parsed with reject_dup_keys = 0 and want to decide per object. O(n log n).
 * Keys are compared by all keylen bytes. */
const char *json_dup_key(const struct json_val *obj);

/* Arena blocks, scratch arrays, file and writer buffers all come from
 * buf_realloc, so tests fail them with base_test_alloc_fail (base/buf.h). */
#ifdef ABX_TEST
/* Keep only this many low bits of the key hash (32 = all), so tests reach
 * the paths for colliding keys. */
extern int json_test_hash_bits;
/* Bytes the arena of doc holds (blocks and headers), for bound checks. */
size_t json_test_arena_bytes(const struct json_doc *doc);
#endif

/*
 * Writer: appends JSON to a bounded growable buffer. Strings are escaped
 * (control characters, quote, backslash; invalid UTF-8 becomes U+FFFD).
 * Commas are placed automatically. Once the buffer would exceed max,
 * w->overflow is set and further output is dropped; check it at the end.
 * Misuse (a value in an object without a key, a key outside an object, an
 * end with nothing open, more than JSON_W_MAX_DEPTH levels) also sets
 * overflow, so invalid JSON is never handed on silently. buf is never NULL
 * (it is "" before the first byte). Several top-level values are separated
 * by '\n' (JSON lines).
 * Doubles are written with the fewest of %.15g/%.16g/%.17g digits that read
 * back to the same double; integral doubles below 2^53 as integers; NaN and
 * infinities as null.
 */
#define JSON_W_MAX_DEPTH 32

struct json_w {
	char *buf;      /* out's bytes, NUL-terminated ("" before the first); read only */
	size_t len;     /* out.len; read only */
	int overflow;   /* max exceeded, allocation failed or misuse */
	struct buf out; /* owns the bytes (max is its ceiling); free with json_w_free */
	int depth;
	unsigned char need_comma[JSON_W_MAX_DEPTH];
	unsigned char after_key;
};

void json_w_init(struct json_w *w, size_t max);
void json_w_free(struct json_w *w);
void json_w_obj(struct json_w *w); /* { */
void json_w_arr(struct json_w *w); /* [ */
void json_w_end(struct json_w *w); /* } or ] */
void json_w_key(struct json_w *w, const char *key);
void json_w_str(struct json_w *w, const char *s);
void json_w_strn(struct json_w *w, const char *s, size_t n);
void json_w_int(struct json_w *w, int64_t v);
void json_w_double(struct json_w *w, double v);
void json_w_bool(struct json_w *w, int v);
void json_w_null(struct json_w *w);
void json_w_raw(struct json_w *w, const char *json); /* pre-built JSON value, not checked */
/* The members of obj, an object another json_w wrote ("{...}"; NULL or
 * "{}" adds none), as members of the object open in w: events and
 * envelopes take a caller's members without cutting text. obj that is not
 * one object's text sets overflow. */
void json_w_members(struct json_w *w, const char *obj);
/* Empty w for the next value, keeping its memory and max. */
void json_w_reset(struct json_w *w);
/* A parsed value, recursively; numbers are written exactly as they were in
 * the input (num.text). Writing a tree deeper than JSON_W_MAX_DEPTH sets
 * overflow. */
void json_w_val(struct json_w *w, const struct json_val *v);
/* Shorthands for "key": value inside an object. */
void json_w_kstr(struct json_w *w, const char *key, const char *s);
void json_w_kint(struct json_w *w, const char *key, int64_t v);
void json_w_kbool(struct json_w *w, const char *key, int v);

/* How many of s[0..n) json_w_strn writes in at most max bytes (quotes not
 * counted), never splitting a UTF-8 sequence: a caller that must bound an
 * answer cuts its text there (control bytes grow six-fold, \u00XX). */
size_t json_escaped_prefix(const char *s, size_t n, size_t max);

/* Escape s as a JSON string (with quotes) into buf; returns length, or -1
 * when it does not fit. For small fixed messages without a writer. */
int json_escape(char *buf, size_t cap, const char *s);

/* Whether the 8 bytes of w (in memory order) are all copied as they are
 * into a JSON string: none >= 0x80, none < 0x20, none '"' or '\\' (the
 * has-less and has-zero-byte word tests, exact once no byte has its top
 * bit). */
static inline __attribute__((always_inline)) int
json_plain8(uint64_t w)
{
	const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
	uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');

	return ((w | ((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((b - ones) & ~b)) & high) == 0;
}

/* Length (1..4) of the valid UTF-8 sequence at p, or 0 with *why set: what
 * the parser takes and the writer keeps as it is. */
int json_utf8_len(const unsigned char *p, const unsigned char *end, const char **why);

#endif
