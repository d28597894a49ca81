/*
 * libFuzzer target for core/base/fmt.c, differential against the host C
 * library's vsnprintf. The input is read as a list of conversions, each
 * from a few bytes: flags, width (digits or *), precision (digits or *),
 * length, conversion, and the argument (an integer from 8 bytes, or a
 * string cut from the input, or NULL); literal text from the input, its
 * '%'s doubled, comes before each. Only what C defines and the formatter does is
 * generated: no '#' on d, i, u, c, s, p or m, no '0', '+' or ' ' on c, s, p
 * or m, no precision on c or p. Properties checked:
 * - both agree on the bytes written and on the return value, at a buffer
 *   size the input chooses (0 included) and at full size;
 * - neither writes past the size it was given.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "fuzz_check.h"

#include "base/fmt.h"

#define OUT 4096

struct in {
	const uint8_t *p;
	size_t n;
};

static unsigned
byte(struct in *in)
{
	if (in->n == 0)
		return 0;
	in->n--;
	return *in->p++;
}

static unsigned long long
u64(struct in *in)
{
	unsigned long long v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | byte(in);
	return v;
}

/* fmt with its arguments through both, at size n and at full size; errnum
 * is errno at each call (for %m) */
static void
both(int errnum, size_t n, const char *fmt, ...)
{
	static char ref[OUT + 1], got[OUT + 1];
	va_list ap, a;
	int rr, rg;
	size_t sizes[2] = {n, OUT}, i;

	va_start(ap, fmt);
	for (i = 0; i < 2; i++) {
		memset(ref, 'R', sizeof(ref));
		memset(got, 'R', sizeof(got));
		va_copy(a, ap);
		errno = errnum;
		rr = vsnprintf(sizes[i] ? ref : NULL, sizes[i], fmt, a);
		va_end(a);
		va_copy(a, ap);
		errno = errnum;
		rg = fmt_vsnprintf(sizes[i] ? got : NULL, sizes[i], fmt, a);
		va_end(a);
		if (rr != rg || memcmp(ref, got, sizeof(ref)) != 0)
			fprintf(stderr, "format \"%s\" size %zu: host %d, ours %d\n", fmt, sizes[i], rr, rg);
		FUZZ_CHECK(rr == rg);
		FUZZ_CHECK(memcmp(ref, got, sizeof(ref)) == 0);
	}
	va_end(ap);
}

/* one conversion with ns (0-2) * arguments a before the value */
#define CALL(...)                                                                                            \
	do {                                                                                                 \
		if (ns == 0)                                                                                 \
			both(errnum, n, fmt, __VA_ARGS__);                                                   \
		else if (ns == 1)                                                                            \
			both(errnum, n, fmt, a[0], __VA_ARGS__);                                             \
		else                                                                                         \
			both(errnum, n, fmt, a[0], a[1], __VA_ARGS__);                                       \
	} while (0)

static void
one(struct in *in)
{
	static const char *const lens[] = {"hh", "h", "", "l", "ll", "z", "j", "t"};
	static const char convs[] = "diouxXcspm";
	char fmt[160], str[65];
	unsigned fl = byte(in), wb = byte(in), pb = byte(in), l = byte(in) % 8, c = convs[byte(in) % 10];
	unsigned long long v = u64(in);
	size_t k = 0, i, sl, n = byte(in) * 17 % (OUT + 1);
	int ns = 0, a[2], errnum = (int)(v % 140);

	/* literal text first, '%' doubled */
	for (i = byte(in) % 16; i > 0 && in->n > 0; i--) {
		fmt[k] = (char)byte(in);
		if (fmt[k] == '\0')
			fmt[k] = '.';
		if (fmt[k++] == '%')
			fmt[k++] = '%';
	}
	fmt[k++] = '%';
	if (strchr("diucspm", (int)c))
		fl &= ~8u;
	if (strchr("cspm", (int)c))
		fl &= ~(2u | 4u | 16u);
	for (i = 0; i < 5; i++)
		if (fl & (1u << i))
			fmt[k++] = "-+ #0"[i];
	if (wb & 0x80) {
		fmt[k++] = '*';
		a[ns++] = (int)(signed char)(wb << 1) * 3;
	} else if (wb & 0x40) {
		k += (size_t)sprintf(fmt + k, "%u", 1 + (wb & 0x3f));
	}
	if (!strchr("cp", (int)c) && (pb & 0x80)) {
		fmt[k++] = '.';
		if (pb & 0x40) {
			fmt[k++] = '*';
			a[ns++] = (int)(signed char)(pb << 2) / 2;
		} else if (pb & 0x20) {
			k += (size_t)sprintf(fmt + k, "%u", pb & 0x1f);
		}
	}
	if (strchr("diouxX", (int)c))
		k += (size_t)sprintf(fmt + k, "%s", lens[l]);
	fmt[k++] = (char)c;
	fmt[k] = '\0';
	switch (c) {
	case 'c':
		CALL((int)(v & 0xff));
		return;
	case 'p':
		CALL((void *)(uintptr_t)(v & 1 ? 0 : v));
		return;
	case 'm':
		CALL(0);
		return;
	case 's':
		sl = v % 66;
		if (sl == 65) {
			CALL((const char *)NULL);
			return;
		}
		for (i = 0; i < sl; i++)
			str[i] = (char)(byte(in) | 1);
		str[sl] = '\0';
		CALL(str);
		return;
	}
	switch (l * 2 + (c == 'd' || c == 'i')) {
	case 0:
		CALL((unsigned char)v);
		return;
	case 1:
		CALL((signed char)v);
		return;
	case 2:
		CALL((unsigned short)v);
		return;
	case 3:
		CALL((short)v);
		return;
	case 4:
		CALL((unsigned)v);
		return;
	case 5:
		CALL((int)v);
		return;
	case 6:
		CALL((unsigned long)v);
		return;
	case 7:
		CALL((long)v);
		return;
	case 8:
		CALL(v);
		return;
	case 9:
		CALL((long long)v);
		return;
	case 10:
	case 14:
		CALL((size_t)v);
		return;
	case 11:
		CALL((ssize_t)v);
		return;
	case 12:
		CALL((uintmax_t)v);
		return;
	case 13:
		CALL((intmax_t)v);
		return;
	default:
		CALL((ptrdiff_t)v);
		return;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = {data, size};

	if (size > (1u << 16))
		return 0;
	while (in.n > 0)
		one(&in);
	return 0;
}
