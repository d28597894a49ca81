#ifndef ABX_SHA256X86_H
#define ABX_SHA256X86_H
/*
 * SHA-256 update over BearSSL's context, with the x86 SHA extensions when
 * the CPU has them (checked once with CPUID), else br_sha256_update. The
 * context stays BearSSL's: br_sha256_init / br_sha256_out work on it as
 * usual. Used by core/base/digest.c.
 */
#include <stddef.h>

#include <bearssl_hash.h>

/* Same contract as br_sha256_update. */
void sha256x86_update(br_sha256_context *cc, const void *data, size_t len);

/* 1 when the SHA-NI path is in use. */
int sha256x86_available(void);

/* Tests: 1 forces the portable path (to compare both on one machine). */
void sha256x86_force_portable(int on);

#endif
