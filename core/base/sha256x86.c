/*
 * SHA-256 with the x86 SHA extensions (SHA-NI), used by digest_update when
 * the CPU has them. BearSSL's portable SHA-256 is what every download is
 * hashed with, and it dominates the CPU time of `fetch` (about 70% of a
 * plain-HTTP download); with SHA-NI the same hashing costs a fifth.
 *
 * The state is BearSSL's own br_sha256_context (buf, count, val[] in host
 * order), updated exactly as BearSSL's sha2small_update does, so
 * br_sha256_out() finishes it unchanged and either path may continue what
 * the other started. The block function follows Intel's published
 * instruction sequence (the SHA-NI white paper and its public-domain
 * samples).
 */
#include "base/sha256x86.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>

#define SHA_TARGET __attribute__((target("sha,sse4.1,ssse3")))

static const uint32_t K[64] __attribute__((aligned(16))) = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* Process nblocks 64-byte blocks of data into state (a..h, host order). */
SHA_TARGET static void
blocks_ni(uint32_t state[8], const unsigned char *data, size_t nblocks)
{
	const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
	__m128i st0, st1, tmp, msg, abef, cdgh, w[4];
	int i;

	tmp = _mm_loadu_si128((const __m128i *)(const void *)&state[0]);
	st1 = _mm_loadu_si128((const __m128i *)(const void *)&state[4]);
	tmp = _mm_shuffle_epi32(tmp, 0xB1);    /* CDAB */
	st1 = _mm_shuffle_epi32(st1, 0x1B);    /* EFGH */
	st0 = _mm_alignr_epi8(tmp, st1, 8);    /* ABEF */
	st1 = _mm_blend_epi16(st1, tmp, 0xF0); /* CDGH */
	for (; nblocks > 0; nblocks--, data += 64) {
		abef = st0;
		cdgh = st1;
		for (i = 0; i < 4; i++)
			w[i] = _mm_shuffle_epi8(
			    _mm_loadu_si128((const __m128i *)(const void *)(data + 16 * i)), mask);
#pragma GCC unroll 16
		/* 16 groups of 4 rounds; the schedule for group i + 4 is made
		 * from groups i .. i + 3 as it goes. Unrolled even at -Os: with
		 * i constant, w[] stays in registers and the message schedule
		 * needs no test (a quarter less time per block). */
		for (i = 0; i < 16; i++) {
			msg =
			    _mm_add_epi32(w[i & 3], _mm_load_si128((const __m128i *)(const void *)&K[4 * i]));
			st1 = _mm_sha256rnds2_epu32(st1, st0, msg);
			msg = _mm_shuffle_epi32(msg, 0x0E);
			st0 = _mm_sha256rnds2_epu32(st0, st1, msg);
			if (i < 12) {
				tmp = _mm_sha256msg1_epu32(w[i & 3], w[(i + 1) & 3]);
				tmp = _mm_add_epi32(tmp, _mm_alignr_epi8(w[(i + 3) & 3], w[(i + 2) & 3], 4));
				w[i & 3] = _mm_sha256msg2_epu32(tmp, w[(i + 3) & 3]);
			}
		}
		st0 = _mm_add_epi32(st0, abef);
		st1 = _mm_add_epi32(st1, cdgh);
	}
	tmp = _mm_shuffle_epi32(st0, 0x1B);    /* FEBA */
	st1 = _mm_shuffle_epi32(st1, 0xB1);    /* DCHG */
	st0 = _mm_blend_epi16(tmp, st1, 0xF0); /* DCBA */
	st1 = _mm_alignr_epi8(st1, tmp, 8);    /* HGFE */
	_mm_storeu_si128((__m128i *)(void *)&state[0], st0);
	_mm_storeu_si128((__m128i *)(void *)&state[4], st1);
}

static int
cpu_has_sha(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3))
		return 0;
	if (__get_cpuid_max(0, NULL) < 7)
		return 0;
	__cpuid_count(7, 0, a, b, c, d);
	return (b & (1u << 29)) != 0;
}

/* -1 unknown, 0 no, 1 yes. Racing threads compute the same answer; the
 * accesses are atomic so that is all they share. */
static int have_sha = -1;
static int force_portable;

int
sha256x86_available(void)
{
	int h = __atomic_load_n(&have_sha, __ATOMIC_RELAXED);

	if (force_portable)
		return 0;
	if (h < 0)
		__atomic_store_n(&have_sha, h = cpu_has_sha(), __ATOMIC_RELAXED);
	return h;
}

void
sha256x86_force_portable(int on)
{
	force_portable = on;
}

void
sha256x86_update(br_sha256_context *cc, const void *data, size_t len)
{
	const unsigned char *p = data;
	size_t ptr, clen, n;

	if (!sha256x86_available()) {
		br_sha256_update(cc, data, len);
		return;
	}
	ptr = (size_t)cc->count & 63;
	cc->count += (uint64_t)len;
	if (ptr > 0) {
		clen = 64 - ptr < len ? 64 - ptr : len;
		memcpy(cc->buf + ptr, p, clen);
		ptr += clen;
		p += clen;
		len -= clen;
		if (ptr < 64)
			return;
		blocks_ni(cc->val, cc->buf, 1);
	}
	n = len / 64;
	if (n > 0) {
		blocks_ni(cc->val, p, n);
		p += 64 * n;
		len -= 64 * n;
	}
	memcpy(cc->buf, p, len);
}

#else /* not x86-64: BearSSL's portable code */

int
sha256x86_available(void)
{
	return 0;
}

void
sha256x86_force_portable(int on)
{
	(void)on;
}

void
sha256x86_update(br_sha256_context *cc, const void *data, size_t len)
{
	br_sha256_update(cc, data, len);
}

#endif
