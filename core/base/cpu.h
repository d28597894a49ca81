#ifndef ABX_CPU_H
#define ABX_CPU_H
/*
 * What this processor can run, for choosing between a vendor's builds:
 * AVX2 is what the x86-64-v3 builds need (the vendors' -baseline builds
 * are for processors without it).
 */

/* 1 when the CPU has AVX2 and the kernel saves the YMM registers (CPUID
 * leaf 1 OSXSAVE and AVX, XCR0 bits 1-2, leaf 7 AVX2); 0 otherwise, and
 * always on other architectures. */
int cpu_has_avx2(void);

#endif
