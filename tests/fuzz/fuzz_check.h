/* FUZZ_CHECK(c): a property every fuzz target asserts; a broken one aborts
 * with the condition and line, which libFuzzer reports as a crash. */
#ifndef ABX_FUZZ_CHECK_H
#define ABX_FUZZ_CHECK_H
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(c)                                                                                        \
	do {                                                                                                 \
		if (!(c)) {                                                                                  \
			fprintf(stderr, "check failed: %s (line %d)\n", #c, __LINE__);                       \
			abort();                                                                             \
		}                                                                                            \
	} while (0)

#endif
