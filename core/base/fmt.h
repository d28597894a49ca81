/*
 * The printf family of the static binary, core/base/fmt.c: the conversions
 * d i u o x X c s p m and %%, the flags - + space 0 #, width and precision
 * (* for either) and the lengths hh h l ll z j t, as C says. Nothing here
 * prints a float (core/base/decimal.c formats decimals), so neither does
 * the formatter: %f and its kin, %n, %L, %lc, %ls and positional arguments
 * (%1$d) are refused. The release build defines the standard names
 * (snprintf, vsnprintf, sprintf, vsprintf, fprintf, vfprintf, printf,
 * vprintf, dprintf, vdprintf) on these, so the link takes them instead of
 * musl's vfprintf.o and its float code; the compiler still checks every
 * format against the arguments (-Wformat) through the standard
 * declarations. The test builds keep the host C library's and call the
 * fmt_ names.
 *
 * Where C leaves it open: %s of NULL prints "(null)", or nothing when the
 * precision is under 6; %p prints 0x and lowercase hex, "(nil)" for NULL;
 * %m prints strerror(errno) of errno at the call (glibc's choices, so the
 * host C library is the unit test's reference).
 */
#ifndef ABX_BASE_FMT_H
#define ABX_BASE_FMT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* vsnprintf: at most n-1 bytes of the output and a NUL into s (nothing when
 * n is 0; s may then be NULL). Returns the length of the whole output
 * (what s would need, less the NUL), or -1: errno EINVAL for a conversion
 * this file does not do, which also writes one line saying so to stderr
 * (and aborts in the test build, see fmt_test_refuse), EOVERFLOW for an
 * output or width past INT_MAX. s then holds the output up to where it
 * stopped, NUL-terminated. */
int fmt_vsnprintf(char *s, size_t n, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
int fmt_snprintf(char *s, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* vfprintf and vdprintf: the output in pieces of at most FMT_CHUNK bytes
 * through fwrite on f (so it keeps its place among the FILE's other
 * output), or write(2) on fd. Returns the bytes written, or -1: as above,
 * or a failed write (errno from it). */
int fmt_vfprintf(FILE *f, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
int fmt_vdprintf(int fd, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* A piece of FILE or descriptor output: one stack buffer of the caller's
 * thread (serve's threads run on 64 KiB stacks). */
#define FMT_CHUNK 512

#ifdef ABX_TEST
/* Test-only: nonzero, a refused conversion returns -1 with EINVAL as in the
 * release build, without the line on stderr; 0 (the default), it writes the
 * line and aborts, so a unit test that reaches one fails loudly. */
extern int fmt_test_refuse;
#endif

#endif
