/*
 * The printf family without floating point (what it does: core/base/fmt.h).
 * musl's vfprintf.o is about 9 KB of the static binary, half of it the
 * float formatter, and its snprintf parses every format twice (once for
 * positional arguments); this is a fraction of both.
 */
#include "base/fmt.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#ifdef ABX_TEST
int fmt_test_refuse;
#endif

/* Where the output goes: p, cap bytes (a string's, less its NUL); when p is
 * full, to f (TO_FILE) or fd (TO_FD), or nowhere (TO_STR: the rest is only
 * counted). */
enum { TO_STR, TO_FILE, TO_FD };

struct out {
	char *p;
	size_t cap, len;
	size_t total; /* bytes of output so far: the return value */
	int to;
	FILE *f;
	int fd;
	int bad; /* a write failed */
};

enum { F_LEFT = 1, F_PLUS = 2, F_SPACE = 4, F_ALT = 8, F_ZERO = 16 };
enum { L_NONE, L_HH, L_H, L_L, L_LL, L_Z, L_J, L_T };

struct spec {
	int fl;
	int width;
	int prec; /* -1: none */
	int conv;
};

static void
flush(struct out *o)
{
	size_t off = 0;
	ssize_t w;

	if (o->to == TO_FILE) {
		if (o->len > 0 && fwrite(o->p, 1, o->len, o->f) != o->len)
			o->bad = 1;
	} else {
		while (off < o->len) {
			w = write(o->fd, o->p + off, o->len - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				o->bad = 1;
				break;
			}
			off += (size_t)w;
		}
	}
	o->len = 0;
}

/* n bytes of s, or n times c when s is NULL */
static void
emit(struct out *o, const char *s, int c, size_t n)
{
	size_t k;

	o->total += n;
	while (n > 0) {
		if (o->len == o->cap) {
			if (o->to == TO_STR)
				return;
			flush(o);
		}
		k = o->cap - o->len < n ? o->cap - o->len : n;
		if (s != NULL) {
			memcpy(o->p + o->len, s, k);
			s += k;
		} else {
			memset(o->p + o->len, c, k);
		}
		o->len += k;
		n -= k;
	}
}

/* the spaces before (after == 0) or after a field of len bytes */
static void
pad(struct out *o, const struct spec *sp, size_t len, int after)
{
	if (((sp->fl & F_LEFT) != 0) == after && (size_t)sp->width > len)
		emit(o, NULL, ' ', (size_t)sp->width - len);
}

static void
put_str(struct out *o, const struct spec *sp, const char *s, size_t n)
{
	pad(o, sp, n, 0);
	emit(o, s, 0, n);
	pad(o, sp, n, 1);
}

/* u (the magnitude; neg: it is negative) as conversion sp->conv */
static void
put_int(struct out *o, const struct spec *sp, unsigned long long u, int neg)
{
	char dig[24], *z = dig + sizeof(dig), *d = z, pre[3];
	int c = sp->conv, lower = c == 'x' ? 32 : 0, shift = c == 'o' ? 3 : 4;
	size_t pl = 0, nd, prec = sp->prec < 0 ? 1 : (size_t)sp->prec, len;

	if (c == 'd' || c == 'i' || c == 'u') {
		for (; u > 0; u /= 10)
			*--d = (char)('0' + u % 10);
	} else {
		/* the letters' lowercase is bit 5, which the digits have set */
		for (; u > 0; u >>= shift)
			*--d = (char)("0123456789ABCDEF"[u & ((1u << shift) - 1)] | lower);
	}
	nd = (size_t)(z - d);
	if (neg)
		pre[pl++] = '-';
	else if (sp->fl & F_PLUS)
		pre[pl++] = '+';
	else if (sp->fl & F_SPACE)
		pre[pl++] = ' ';
	if ((sp->fl & F_ALT) && c == 'o' && prec <= nd)
		prec = nd + 1;
	if ((sp->fl & F_ALT) && (c == 'x' || c == 'X') && nd > 0) {
		pre[pl++] = '0';
		pre[pl++] = (char)c;
	}
	if (prec < nd)
		prec = nd;
	len = pl + prec;
	if ((sp->fl & (F_ZERO | F_LEFT)) == F_ZERO && sp->prec < 0 && (size_t)sp->width > len) {
		prec += (size_t)sp->width - len;
		len = (size_t)sp->width;
	}
	pad(o, sp, len, 0);
	emit(o, pre, 0, pl);
	emit(o, NULL, '0', prec - nd);
	emit(o, d, 0, nd);
	pad(o, sp, len, 1);
}

static long long
arg_signed(va_list *ap, int len)
{
	switch (len) {
	case L_HH:
		return (signed char)va_arg(*ap, int);
	case L_H:
		return (short)va_arg(*ap, int);
	case L_L:
		return va_arg(*ap, long);
	case L_LL:
		return va_arg(*ap, long long);
	case L_Z:
		return va_arg(*ap, ssize_t);
	case L_J:
		return va_arg(*ap, intmax_t);
	case L_T:
		return va_arg(*ap, ptrdiff_t);
	}
	return va_arg(*ap, int);
}

static unsigned long long
arg_unsigned(va_list *ap, int len)
{
	switch (len) {
	case L_HH:
		return (unsigned char)va_arg(*ap, unsigned);
	case L_H:
		return (unsigned short)va_arg(*ap, unsigned);
	case L_L:
		return va_arg(*ap, unsigned long);
	case L_LL:
		return va_arg(*ap, unsigned long long);
	case L_Z:
		return va_arg(*ap, size_t);
	case L_J:
		return va_arg(*ap, uintmax_t);
	case L_T:
		return (size_t)va_arg(*ap, ptrdiff_t);
	}
	return va_arg(*ap, unsigned);
}

/* A conversion this file does not do: the call fails (C leaves an invalid
 * one undefined; musl fails it the same way) and says so on stderr in one
 * write, since most callers do not look at the return value. -Wformat has
 * accepted the format, so only a float, %n or positional arguments get
 * here: a bug of ours, which the test build turns into an abort. */
static int
refuse(const char *fmt)
{
	static const char head[] = "agent-sandbox-server: internal: unsupported printf conversion in \"";
	struct iovec v[3] = {
	    {(void *)head, sizeof(head) - 1}, {(void *)fmt, strlen(fmt)}, {(void *)"\"\n", 2}};

#ifdef ABX_TEST
	if (!fmt_test_refuse) {
		(void)!writev(2, v, 3);
		abort();
	}
#else
	(void)!writev(2, v, 3);
#endif
	errno = EINVAL;
	return -1;
}

/* digits of a width or precision at *f; -1 past INT_MAX */
static int
number(const char **f)
{
	int n = 0;

	for (; **f >= '0' && **f <= '9'; (*f)++) {
		if (n > (INT_MAX - (**f - '0')) / 10)
			return -1;
		n = n * 10 + (**f - '0');
	}
	return n;
}

/* the length modifier at *f */
static int
length(const char **f)
{
	const char *p = *f;
	int len = L_NONE;

	switch (*p++) {
	case 'h':
		len = *p == 'h' ? (p++, L_HH) : L_H;
		break;
	case 'l':
		len = *p == 'l' ? (p++, L_LL) : L_L;
		break;
	case 'z':
		len = L_Z;
		break;
	case 'j':
		len = L_J;
		break;
	case 't':
		len = L_T;
		break;
	default:
		return L_NONE;
	}
	*f = p;
	return len;
}

static int
core(struct out *o, const char *fmt, va_list *ap)
{
	const char *f = fmt, *s;
	struct spec sp;
	long long v;
	int len, errnum = errno;
	char ch;

	for (;;) {
		s = strchrnul(f, '%');
		emit(o, f, 0, (size_t)(s - f));
		if (*s == '\0')
			return 0;
		f = s + 1;
		if (*f == '%') {
			emit(o, f++, 0, 1);
			continue;
		}
		sp.fl = 0;
		for (;; f++) {
			s = strchr("-+ #0", *f);
			if (*f == '\0' || s == NULL)
				break;
			sp.fl |= 1 << (s - "-+ #0");
		}
		if (*f == '*') {
			f++;
			sp.width = va_arg(*ap, int);
			if (sp.width == INT_MIN)
				sp.width = -1;
			else if (sp.width < 0)
				sp.fl |= F_LEFT, sp.width = -sp.width;
		} else {
			sp.width = number(&f);
		}
		sp.prec = -1;
		if (*f == '.') {
			f++;
			if (*f == '*') {
				f++;
				sp.prec = va_arg(*ap, int);
				if (sp.prec < 0)
					sp.prec = -1;
			} else if ((sp.prec = number(&f)) < 0) {
				sp.width = -1;
			}
		}
		if (sp.width < 0) {
			errno = EOVERFLOW;
			return -1;
		}
		len = length(&f);
		switch (sp.conv = *f++) {
		case 'd':
		case 'i':
			v = arg_signed(ap, len);
			put_int(o, &sp, v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v, v < 0);
			continue;
		case 'o':
		case 'u':
		case 'x':
		case 'X':
			sp.fl &= ~(F_PLUS | F_SPACE);
			put_int(o, &sp, arg_unsigned(ap, len), 0);
			continue;
		}
		if (len != L_NONE)
			return refuse(fmt);
		switch (sp.conv) {
		case 'p':
			s = va_arg(*ap, const char *);
			if (s == NULL) {
				put_str(o, &sp, "(nil)", 5);
			} else {
				sp.conv = 'x';
				sp.fl = (sp.fl | F_ALT) & ~(F_PLUS | F_SPACE);
				put_int(o, &sp, (uintptr_t)s, 0);
			}
			continue;
		case 'c':
			ch = (char)va_arg(*ap, int);
			put_str(o, &sp, &ch, 1);
			continue;
		case 's':
		case 'm':
			s = sp.conv == 'm' ? strerror(errnum) : va_arg(*ap, const char *);
			if (s == NULL)
				s = sp.prec >= 0 && sp.prec < 6 ? "" : "(null)";
			put_str(o, &sp, s, sp.prec >= 0 ? strnlen(s, (size_t)sp.prec) : strlen(s));
			continue;
		}
		return refuse(fmt);
	}
}

/* core, then the last piece out; the return value of the printf family */
static int
run(struct out *o, const char *fmt, va_list ap)
{
	va_list a;
	int r;

	va_copy(a, ap);
	r = core(o, fmt, &a);
	va_end(a);
	if (o->to != TO_STR)
		flush(o);
	if (r < 0 || o->bad)
		return -1;
	if (o->total > INT_MAX) {
		errno = EOVERFLOW;
		return -1;
	}
	return (int)o->total;
}

int
fmt_vsnprintf(char *s, size_t n, const char *fmt, va_list ap)
{
	struct out o = {s, n > 0 ? n - 1 : 0, 0, 0, TO_STR, NULL, -1, 0};
	int r = run(&o, fmt, ap);

	if (n > 0)
		s[o.len] = '\0';
	return r;
}

int
fmt_snprintf(char *s, size_t n, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = fmt_vsnprintf(s, n, fmt, ap);
	va_end(ap);
	return r;
}

int
fmt_vfprintf(FILE *f, const char *fmt, va_list ap)
{
	char b[FMT_CHUNK];
	struct out o = {b, sizeof(b), 0, 0, TO_FILE, f, -1, 0};

	return run(&o, fmt, ap);
}

int
fmt_vdprintf(int fd, const char *fmt, va_list ap)
{
	char b[FMT_CHUNK];
	struct out o = {b, sizeof(b), 0, 0, TO_FD, NULL, fd, 0};

	return run(&o, fmt, ap);
}

#ifndef ABX_TEST
/* The standard names, for our code and for the C library's own callers
 * (inet_ntop calls snprintf): defined here, musl's are not linked. */
int
vsnprintf(char *restrict s, size_t n, const char *restrict fmt, va_list ap)
{
	return fmt_vsnprintf(s, n, fmt, ap);
}

int
snprintf(char *restrict s, size_t n, const char *restrict fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = fmt_vsnprintf(s, n, fmt, ap);
	va_end(ap);
	return r;
}

/* sprintf's buffer has no size: INT_MAX, past which the return value could
 * not say the length anyway */
int
vsprintf(char *restrict s, const char *restrict fmt, va_list ap)
{
	return fmt_vsnprintf(s, INT_MAX, fmt, ap);
}

int
sprintf(char *restrict s, const char *restrict fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = fmt_vsnprintf(s, INT_MAX, fmt, ap);
	va_end(ap);
	return r;
}

int
vfprintf(FILE *restrict f, const char *restrict fmt, va_list ap)
{
	return fmt_vfprintf(f, fmt, ap);
}

int
fprintf(FILE *restrict f, const char *restrict fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = fmt_vfprintf(f, fmt, ap);
	va_end(ap);
	return r;
}

int
vprintf(const char *restrict fmt, va_list ap)
{
	return fmt_vfprintf(stdout, fmt, ap);
}

int
printf(const char *restrict fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = fmt_vfprintf(stdout, fmt, ap);
	va_end(ap);
	return r;
}

int
vdprintf(int fd, const char *restrict fmt, va_list ap)
{
	return fmt_vdprintf(fd, fmt, ap);
}

int
dprintf(int fd, const char *restrict fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = fmt_vdprintf(fd, fmt, ap);
	va_end(ap);
	return r;
}
#endif
