#include "base/digest.h"
#include "base/sha256x86.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

size_t
digest_len(enum digest_alg alg)
{
	switch (alg) {
	case DIGEST_SHA1:
		return br_sha1_SIZE;
	case DIGEST_SHA256:
		return br_sha256_SIZE;
	case DIGEST_SHA512:
		return br_sha512_SIZE;
	default:
		return 0;
	}
}

const char *
digest_name(enum digest_alg alg)
{
	switch (alg) {
	case DIGEST_SHA1:
		return "sha1";
	case DIGEST_SHA256:
		return "sha256";
	case DIGEST_SHA512:
		return "sha512";
	default:
		return "none";
	}
}

void
digest_init(struct digest_ctx *c, enum digest_alg alg)
{
	c->alg = alg;
	c->bytes = 0;
	switch (alg) {
	case DIGEST_SHA1:
		br_sha1_init(&c->u.sha1);
		break;
	case DIGEST_SHA256:
		br_sha256_init(&c->u.sha256);
		break;
	case DIGEST_SHA512:
		br_sha512_init(&c->u.sha512);
		break;
	default:
		break;
	}
}

void
digest_update(struct digest_ctx *c, const void *data, size_t len)
{
	c->bytes += len;
	switch (c->alg) {
	case DIGEST_SHA1:
		br_sha1_update(&c->u.sha1, data, len);
		break;
	case DIGEST_SHA256:
		sha256x86_update(&c->u.sha256, data, len);
		break;
	case DIGEST_SHA512:
		br_sha512_update(&c->u.sha512, data, len);
		break;
	default:
		break;
	}
}

void
digest_final(struct digest_ctx *c, struct digest *out)
{
	memset(out, 0, sizeof(*out));
	out->alg = c->alg;
	out->len = digest_len(c->alg);
	switch (c->alg) {
	case DIGEST_SHA1:
		br_sha1_out(&c->u.sha1, out->v);
		break;
	case DIGEST_SHA256:
		br_sha256_out(&c->u.sha256, out->v);
		break;
	case DIGEST_SHA512:
		br_sha512_out(&c->u.sha512, out->v);
		break;
	default:
		break;
	}
}

void
digest_buf(enum digest_alg alg, const void *data, size_t len, struct digest *out)
{
	struct digest_ctx c;

	digest_init(&c, alg);
	digest_update(&c, data, len);
	digest_final(&c, out);
}

int
digest_file(enum digest_alg alg, const char *path, struct digest *out, uint64_t *bytes, struct err *e)
{
	/* 16 KiB: few enough syscalls that hashing dominates, small enough for
	 * the 128 KiB thread stacks serve's workers run on. */
	unsigned char buf[16384];
	struct digest_ctx c;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return err_sys(e, "io.error", errno, "%s: %s", path, strerror(errno));
	digest_init(&c, alg);
	for (;;) {
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int saved = errno;
			close(fd);
			return err_sys(e, "io.error", saved, "%s: %s", path, strerror(saved));
		}
		if (n == 0)
			break;
		digest_update(&c, buf, (size_t)n);
	}
	close(fd);
	if (bytes != NULL)
		*bytes = c.bytes;
	digest_final(&c, out);
	return 0;
}

char *
hex_encode(const void *src, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";
	const unsigned char *s = src;
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hx[s[i] >> 4];
		out[2 * i + 1] = hx[s[i] & 15];
	}
	out[2 * n] = '\0';
	return out;
}

char *
digest_hex(const struct digest *d, char *buf)
{
	return hex_encode(d->v, d->len, buf);
}

int
hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
hex_decode(const char *hex, void *out, size_t n)
{
	unsigned char *o = out;
	size_t i;
	int hi, lo;

	for (i = 0; i < n; i++) {
		hi = hex_digit((unsigned char)hex[2 * i]);
		if (hi < 0)
			return -1;
		lo = hex_digit((unsigned char)hex[2 * i + 1]);
		if (lo < 0)
			return -1;
		o[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

int
digest_parse_hex(enum digest_alg alg, const char *hex, struct digest *out, const char *code, struct err *e)
{
	size_t n = digest_len(alg), i;

	if (hex == NULL || strlen(hex) != 2 * n)
		return err_set(e, code, "%s digest must be %zu hex digits", digest_name(alg), 2 * n);
	memset(out, 0, sizeof(*out));
	out->alg = alg;
	out->len = n;
	if (hex_decode(hex, out->v, n) != 0) {
		for (i = 0; hex_digit((unsigned char)hex[i]) >= 0; i++)
			;
		return err_set(e, code, "%s digest has a non-hex character at %zu", digest_name(alg), i);
	}
	return 0;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
digest_sri(const struct digest *d, char *buf)
{
	size_t i, o;
	const unsigned char *v = d->v;

	o = (size_t)snprintf(buf, DIGEST_SRI_MAX, "%s-", digest_name(d->alg));
	for (i = 0; i + 2 < d->len; i += 3) {
		buf[o++] = b64[v[i] >> 2];
		buf[o++] = b64[(v[i] & 3) << 4 | v[i + 1] >> 4];
		buf[o++] = b64[(v[i + 1] & 15) << 2 | v[i + 2] >> 6];
		buf[o++] = b64[v[i + 2] & 63];
	}
	if (d->len - i == 1) {
		buf[o++] = b64[v[i] >> 2];
		buf[o++] = b64[(v[i] & 3) << 4];
		buf[o++] = '=';
		buf[o++] = '=';
	} else if (d->len - i == 2) {
		buf[o++] = b64[v[i] >> 2];
		buf[o++] = b64[(v[i] & 3) << 4 | v[i + 1] >> 4];
		buf[o++] = b64[(v[i + 1] & 15) << 2];
		buf[o++] = '=';
	}
	buf[o] = '\0';
	return buf;
}

static int
b64val(int c)
{
	const char *p;

	if (c == '\0')
		return -1;
	p = strchr(b64, c);
	return p ? (int)(p - b64) : -1;
}

/* Decode exactly `want` bytes from base64 text s[0..n) with '=' padding.
 * Returns 0 or -1. */
static int
b64_decode(const char *s, size_t n, unsigned char *out, size_t want)
{
	size_t i, o = 0, pad = 0;
	uint32_t acc = 0;
	int bits = 0;

	if (n % 4 != 0 || n == 0)
		return -1;
	while (pad < 2 && n > 0 && s[n - 1] == '=')
		n--, pad++;
	for (i = 0; i < n; i++) {
		int v = b64val((unsigned char)s[i]);
		if (v < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o >= want)
				return -1;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	/* Leftover bits must be zero, as in canonical base64. */
	if ((acc & ((1u << bits) - 1)) != 0)
		return -1;
	return o == want ? 0 : -1;
}

int
digest_parse_sri(const char *sri, struct digest *out, const char *code, struct err *e)
{
	static const struct {
		const char *prefix;
		enum digest_alg alg;
	} algs[] = {
	    {"sha1-", DIGEST_SHA1},
	    {"sha256-", DIGEST_SHA256},
	    {"sha512-", DIGEST_SHA512},
	};
	const char *p = sri, *tok, *end, *q;
	struct digest cand;
	size_t i, len;
	int found = 0;

	if (sri == NULL)
		return err_set(e, code, "integrity is missing");
	/* Bounded: an SRI string is a few hashes; a huge one is hostile. */
	if (strlen(sri) > 1024)
		return err_set(e, code, "integrity string is too long");
	memset(out, 0, sizeof(*out));
	while (*p != '\0') {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		tok = p;
		while (*p != '\0' && *p != ' ' && *p != '\t')
			p++;
		end = p;
		q = memchr(tok, '?', (size_t)(end - tok));
		if (q != NULL)
			end = q;
		for (i = 0; i < sizeof(algs) / sizeof(algs[0]); i++) {
			len = strlen(algs[i].prefix);
			if ((size_t)(end - tok) > len && strncmp(tok, algs[i].prefix, len) == 0)
				break;
		}
		if (i == sizeof(algs) / sizeof(algs[0]))
			continue; /* unknown algorithm: skipped, as SRI says */
		memset(&cand, 0, sizeof(cand));
		cand.alg = algs[i].alg;
		cand.len = digest_len(cand.alg);
		if (b64_decode(tok + len, (size_t)(end - tok - len), cand.v, cand.len) != 0)
			return err_set(e, code, "integrity %.*s: malformed base64 or wrong length",
			               (int)(end - tok > 40 ? 40 : end - tok), tok);
		if (!found || cand.alg > out->alg)
			*out = cand;
		found = 1;
	}
	if (!found)
		return err_set(e, code, "integrity has no sha1, sha256 or sha512 hash");
	return 0;
}

int
ct_equal(const void *a, const void *b, size_t n)
{
	const volatile unsigned char *x = a, *y = b;
	unsigned char acc = 0;
	size_t i;

	for (i = 0; i < n; i++)
		acc |= x[i] ^ y[i];
	return acc == 0;
}

int
digest_equal(const struct digest *a, const struct digest *b)
{
	if (a->alg != b->alg || a->len != b->len || a->len > DIGEST_MAX_LEN)
		return 0;
	return ct_equal(a->v, b->v, a->len);
}
