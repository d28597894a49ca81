/*
 * cpu_has_avx2: CPUID and XGETBV, asked once per call (a few hundred
 * cycles; called once per manifest load).
 */
#include "base/cpu.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <stddef.h>

int
cpu_has_avx2(void)
{
	unsigned a, b, c, d, lo, hi;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX))
		return 0;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	if ((lo & 6) != 6 || __get_cpuid_max(0, NULL) < 7)
		return 0;
	__cpuid_count(7, 0, a, b, c, d);
	return (b & bit_AVX2) != 0;
}
#else
int
cpu_has_avx2(void)
{
	return 0;
}
#endif
