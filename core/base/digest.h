#ifndef ABX_DIGEST_H
#define ABX_DIGEST_H
/*
 * Digests over BearSSL: streaming sha256 / sha512 / sha1, the hex and SRI
 * ("sha512-<base64>") forms, and constant-time comparison. The context is
 * caller-owned and needs no allocation.
 */
#include <stddef.h>
#include <stdint.h>

#include <bearssl_hash.h>

#include "base/err.h"

enum digest_alg {
	DIGEST_NONE = 0,
	DIGEST_SHA1, /* only to check npm's oldest integrity strings; never alone */
	DIGEST_SHA256,
	DIGEST_SHA512,
};

#define DIGEST_MAX_LEN 64                       /* sha512 */
#define DIGEST_HEX_MAX (2 * DIGEST_MAX_LEN + 1) /* with the NUL */
/* "sha512-" + base64 of 64 bytes (88 chars) + NUL, with room to spare. */
#define DIGEST_SRI_MAX 100

struct digest {
	enum digest_alg alg;
	size_t len; /* bytes of the digest */
	unsigned char v[DIGEST_MAX_LEN];
};

struct digest_ctx {
	enum digest_alg alg;
	union {
		br_sha1_context sha1;
		br_sha256_context sha256;
		br_sha512_context sha512;
	} u;
	uint64_t bytes; /* total fed so far */
};

/* Length in bytes of alg's digest, 0 for DIGEST_NONE. */
size_t digest_len(enum digest_alg alg);
/* "sha1", "sha256", "sha512", or "none". */
const char *digest_name(enum digest_alg alg);

void digest_init(struct digest_ctx *c, enum digest_alg alg);
void digest_update(struct digest_ctx *c, const void *data, size_t len);
/* Finish into out; c may be re-initialised afterwards. */
void digest_final(struct digest_ctx *c, struct digest *out);

/* One-shot over a buffer. */
void digest_buf(enum digest_alg alg, const void *data, size_t len, struct digest *out);

/* Hash a whole file by path (read in blocks; no size limit). Returns 0, or
 * -1 with io.error. If bytes is not NULL it receives the file size. */
int digest_file(enum digest_alg alg, const char *path, struct digest *out, uint64_t *bytes, struct err *e);

/* Lower-case hex into buf (at least DIGEST_HEX_MAX bytes). Returns buf. */
char *digest_hex(const struct digest *d, char *buf);

/* ---- hex, for digests, keys and tokens ---- */

/* The value of the hex digit c (either case), or -1. */
int hex_digit(int c);

/* Lower-case hex of src[0..n) into out (2n + 1 bytes, NUL-terminated).
 * Returns out. */
char *hex_encode(const void *src, size_t n, char *out);

/* Exactly 2n hex digits (either case) at hex into out[0..n): no sign, blank
 * or prefix is taken, and nothing past hex[2n) is read. Returns 0, or -1 at
 * the first byte that is not a hex digit (out then holds the bytes before
 * it). */
int hex_decode(const char *hex, void *out, size_t n);

/* Parse hex of exactly alg's length (either case). Returns 0 or -1 (e set to
 * code, message names what was wrong; code is the caller's: usually
 * install.manifest_invalid or usage). */
int digest_parse_hex(enum digest_alg alg, const char *hex, struct digest *out, const char *code,
                     struct err *e);

/* SRI form: "sha512-<base64>" into buf (DIGEST_SRI_MAX bytes). Returns buf. */
char *digest_sri(const struct digest *d, char *buf);

/*
 * Parse an SRI integrity string, which may hold several space-separated
 * hashes ("sha1-… sha512-…"); options after '?' are ignored as the SRI spec
 * says. The strongest algorithm present wins (sha512 > sha256 > sha1);
 * unknown algorithms are skipped; malformed base64 or a wrong length for a
 * known algorithm is an error. Returns 0 or -1 with e set to code.
 */
int digest_parse_sri(const char *sri, struct digest *out, const char *code, struct err *e);

/* Constant-time equality of two digests (same algorithm and bytes). The time
 * depends only on the lengths, never on where the first difference is. */
int digest_equal(const struct digest *a, const struct digest *b);

/* Constant-time comparison of two byte strings of equal length n. */
int ct_equal(const void *a, const void *b, size_t n);

#endif
