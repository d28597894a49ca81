/*
 * core/base/fmt.c against the host C library's (glibc's) vsnprintf: every
 * combination of flags, width, precision and length the format language
 * defines for the integer conversions, on the edges of each type; strings,
 * characters, pointers and %m; truncation at every size, size 0, return
 * values; the FILE and descriptor paths across piece boundaries; and the
 * refusals (floats, %n, positional arguments, wide characters), which fail
 * the call, and abort when the test build has not asked otherwise.
 */
#include "unit.h"
#include "base/fmt.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/types.h>
#include <sys/wait.h>

#define CAP 600

static long cases;

/* fmt with the arguments through both at size n; outputs and return values
 * must agree, and neither may touch s past n */
static void
cmp_at(size_t n, const char *fmt, va_list ap)
{
	char ref[CAP + 8], got[CAP + 8];
	va_list a;
	int rr, rg;

	memset(ref, 'R', sizeof(ref));
	memset(got, 'R', sizeof(got));
	va_copy(a, ap);
	rr = vsnprintf(n ? ref : NULL, n, fmt, a);
	va_end(a);
	va_copy(a, ap);
	rg = fmt_vsnprintf(n ? got : NULL, n, fmt, a);
	va_end(a);
	if (rr != rg || memcmp(ref, got, sizeof(ref)) != 0) {
		fprintf(stderr, "format \"%s\" size %zu: host %d \"%.*s\", ours %d \"%.*s\"\n", fmt, n, rr,
		        (int)(n ? n : 1), n ? ref : "", rg, (int)(n ? n : 1), n ? got : "");
		fail();
	}
	cases++;
}

/* at the full size, then (every deep call) truncated at each interesting size */
static void
cmp(int deep, const char *fmt, ...)
{
	va_list ap, a;
	size_t sizes[] = {0, 1, 2, 3, 7, 0, 0, 0}, i, len;
	int r;

	va_start(ap, fmt);
	cmp_at(CAP, fmt, ap);
	if (deep) {
		va_copy(a, ap);
		r = vsnprintf(NULL, 0, fmt, a);
		va_end(a);
		assert_true(r >= 0 && r < CAP);
		len = (size_t)r;
		sizes[5] = len;
		sizes[6] = len + 1;
		sizes[7] = len / 2 + 1;
		for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			cmp_at(sizes[i], fmt, ap);
	}
	va_end(ap);
}

static const char *const lens[] = {"hh", "h", "", "l", "ll", "z", "j", "t"};

/* fmt with ns * arguments (a1, a2) before v, which goes as the type the
 * length l names: signed for the signed conversions */
#define CALL(T)                                                                                              \
	do {                                                                                                 \
		if (ns == 0)                                                                                 \
			cmp(deep, fmt, (T)v);                                                                \
		else if (ns == 1)                                                                            \
			cmp(deep, fmt, a1, (T)v);                                                            \
		else                                                                                         \
			cmp(deep, fmt, a1, a2, (T)v);                                                        \
	} while (0)

static void
cmp_int(int deep, const char *fmt, int l, int sgn, int ns, int a1, int a2, long long v)
{
	switch (l * 2 + sgn) {
	case 0:
		CALL(unsigned char);
		return;
	case 1:
		CALL(signed char);
		return;
	case 2:
		CALL(unsigned short);
		return;
	case 3:
		CALL(short);
		return;
	case 4:
		CALL(unsigned);
		return;
	case 5:
		CALL(int);
		return;
	case 6:
		CALL(unsigned long);
		return;
	case 7:
		CALL(long);
		return;
	case 8:
		CALL(unsigned long long);
		return;
	case 9:
		CALL(long long);
		return;
	case 10:
		CALL(size_t);
		return;
	case 11:
		CALL(ssize_t);
		return;
	case 12:
		CALL(uintmax_t);
		return;
	case 13:
		CALL(intmax_t);
		return;
	case 14:
		/* %tu takes ptrdiff_t's unsigned twin: size_t here */
		CALL(size_t);
		return;
	default:
		CALL(ptrdiff_t);
		return;
	}
}

/*
 * Every flag set (the five flags, in and out), width (none, 1, 6, 24, and
 * * with a positive and a negative value), precision (none, ".", 0, 1, 5,
 * 22, and * with a positive and a negative value), length and integer
 * conversion, on the edges of the types. The * values come first in the
 * arguments; formats without them ignore them (C allows extra arguments).
 */
static void
test_integers(void **state)
{
	static const long long vals[] = {0,
	                                 1,
	                                 -1,
	                                 7,
	                                 8,
	                                 9,
	                                 10,
	                                 15,
	                                 16,
	                                 127,
	                                 -128,
	                                 255,
	                                 32767,
	                                 -32768,
	                                 65535,
	                                 INT_MAX,
	                                 INT_MIN,
	                                 UINT_MAX,
	                                 1234567890123LL,
	                                 LLONG_MAX,
	                                 LLONG_MIN};
	static const char *const widths[] = {"", "1", "6", "24", "*", "*"};
	static const int wargs[] = {0, 0, 0, 0, 9, -9};
	static const char *const precs[] = {"", ".", ".0", ".1", ".5", ".22", ".*", ".*"};
	static const int pargs[] = {0, 0, 0, 0, 0, 0, 4, -3};
	const char *convs = "diouxX";
	char fmt[64], flags[8];
	int fl, wi, pi, l, ci, vi, k, deep, ns;
	long n = 0;

	for (fl = 0; fl < 32; fl++) {
		for (k = 0, ci = 0; ci < 5; ci++)
			if (fl & (1 << ci))
				flags[k++] = "-+ #0"[ci];
		flags[k] = '\0';
		for (ci = 0; convs[ci]; ci++) {
			/* # with d, i or u is undefined */
			if ((fl & 8) && strchr("diu", convs[ci]))
				continue;
			for (wi = 0; wi < 6; wi++)
				for (pi = 0; pi < 8; pi++)
					for (l = 0; l < 8; l++) {
						snprintf(fmt, sizeof(fmt), "<%%%s%s%s%s%c>", flags,
						         widths[wi], precs[pi], lens[l], convs[ci]);
						for (vi = 0; vi < (int)(sizeof(vals) / sizeof(vals[0]));
						     vi++) {
							deep = n++ % 11 == 0;
							ns = (wi >= 4) + (pi >= 6);
							cmp_int(deep, fmt, l, strchr("di", convs[ci]) != NULL,
							        ns, wi >= 4 ? wargs[wi] : pargs[pi],
							        pargs[pi], vals[vi]);
						}
					}
		}
	}
	fprintf(stderr, "integers: %ld comparisons\n", cases);
}

/* %s, %c, %p, %m and %% under every flag that applies to them, widths and
 * precisions, NULL strings (glibc: "(null)", or nothing under precision 6) */
static void
test_strings(void **state)
{
	static const char *const strs[] = {"", "a", "hello", "(null)", "exactly-sixteen!", NULL};
	static const char *const specs[] = {"%s",     "%.0s", "%.3s", "%.5s", "%.6s", "%.40s",
	                                    "%8s",    "%-8s", "%20s", "%-1s", "%.s",  "%3.1s",
	                                    "%-9.2s", "%*s",  "%-*s", "%.*s", "%*.*s"};
	char fmt[64];
	size_t i, j;
	int c, e;

	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		for (j = 0; j < sizeof(specs) / sizeof(specs[0]); j++) {
			snprintf(fmt, sizeof(fmt), "[%s]", specs[j]);
			if (strstr(specs[j], "*.*"))
				cmp(1, fmt, 7, 2, strs[i]);
			else if (strchr(specs[j], '*'))
				cmp(1, fmt, j % 2 ? -6 : 6, strs[i]);
			else
				cmp(1, fmt, strs[i]);
		}
	cmp(1, "%.*s|%*s|%-*s|%*.*s", -1, "neg precision", -5, "w", 0, "zero", 3, -2, "xyz");
	for (c = 0; c < 256; c += 37) {
		cmp(1, "%c", c);
		cmp(1, "<%5c|%-5c|%1c>", c, c, c);
		cmp(1, "<%*c>", -3, c);
	}
	cmp(1, "a%%b%%%%c%%");
	cmp(1, "");
	cmp(1, "no conversions at all");
	cmp(1, "%p|%20p|%-20p|%3p", (void *)&c, (void *)&c, (void *)&c, (void *)&c);
	cmp(1, "%p|%8p|%-8p|", NULL, NULL, NULL);
	cmp(1, "%p", (void *)1);
	cmp(1, "%p", (void *)UINTPTR_MAX);
	for (e = 0; e < 140; e += 13) {
		/* glibc's %m reads errno when the conversion runs: nothing
		 * before it here changes errno */
		errno = e;
		cmp(1, "%m|%.4m|%-30m|%40m", 0);
	}
	errno = ENOENT;
	cmp(0, "%s: %m", "/no/such");
}

/* the output itself past the sizes a table can show: a string longer than
 * any buffer here, a width in the tens of thousands, INT_MAX */
static void
test_long(void **state)
{
	char *big = malloc(70001), *ref = malloc(140100), *got = malloc(140100);
	int rr, rg;

	assert_non_null(big);
	assert_non_null(ref);
	assert_non_null(got);
	memset(big, 'x', 70000);
	big[70000] = '\0';
	rr = snprintf(ref, 140100, "%s|%70000d|%s", big, -5, big + 3);
	rg = fmt_snprintf(got, 140100, "%s|%70000d|%s", big, -5, big + 3);
	assert_int_equal(rr, rg);
	assert_int_equal(rr, 70000 + 1 + 70000 + 1 + 69997);
	assert_memory_equal(ref, got, 140100);
	/* the length is counted past the buffer, whatever the size */
	assert_int_equal(fmt_snprintf(NULL, 0, "%s%s", big, big), 140000);
	assert_int_equal(fmt_snprintf(got, 5, "%*d", INT_MAX, 1), INT_MAX);
	assert_string_equal(got, "    ");
	errno = 0;
	assert_int_equal(fmt_snprintf(NULL, 0, "%*d%d", INT_MAX, 1, 2), -1);
	assert_int_equal(errno, EOVERFLOW);
	free(big);
	free(ref);
	free(got);
}

/* Formats -Wformat would stop at compile time, built at run time. */
static const char *
dyn(const char *f)
{
	static char b[64];

	snprintf(b, sizeof(b), "%s", f);
	return b;
}

/* What the release build does with a conversion it does not do: -1, EINVAL,
 * and the output before it in s, NUL-terminated; a width past INT_MAX: -1,
 * EOVERFLOW. */
static void
test_refused(void **state)
{
	static const char *const bad[] = {"ok %f",  "ok %5.2f", "ok %e",   "ok %g",   "ok %a",  "ok %Lf",
	                                  "ok %n",  "ok %hhn",  "ok %1$d", "ok %ls",  "ok %lc", "ok %hs",
	                                  "ok %q",  "ok %y",    "ok %",    "ok %5%",  "ok %-%", "ok %lp",
	                                  "ok %zs", "ok %C",    "ok %S",   "ok %hhc", "ok %jm", "ok %'d"};
	char out[32];
	size_t i;
	int n = 0;

	fmt_test_refuse = 1;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(out, 'R', sizeof(out));
		errno = 0;
		assert_int_equal(fmt_snprintf(out, sizeof(out), dyn(bad[i]), 1.5, &n), -1);
		assert_int_equal(errno, EINVAL);
		assert_string_equal(out, "ok ");
	}
	errno = 0;
	assert_int_equal(fmt_snprintf(out, sizeof(out), dyn("%2147483648d"), 1), -1);
	assert_int_equal(errno, EOVERFLOW);
	errno = 0;
	assert_int_equal(fmt_snprintf(out, sizeof(out), dyn("%.2147483648d"), 1), -1);
	assert_int_equal(errno, EOVERFLOW);
	errno = 0;
	assert_int_equal(fmt_snprintf(out, sizeof(out), "%*d", INT_MIN, 1), -1);
	assert_int_equal(errno, EOVERFLOW);
	assert_int_equal(fmt_snprintf(out, sizeof(out), "%2147483647d", 1), INT_MAX);
	fmt_test_refuse = 0;
}

/* In the test build a refused conversion aborts, after the line the
 * release build writes to stderr: a unit test that reaches one fails
 * there, naming the format. */
static void
test_refused_aborts(void **state)
{
	char msg[200];
	FILE *err = tmpfile();
	int st;
	ssize_t n;
	pid_t pid;

	assert_non_null(err);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char out[16];

		dup2(fileno(err), 2);
		fmt_snprintf(out, sizeof(out), dyn("x=%5.1f"), 1.0);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGABRT);
	n = pread(fileno(err), msg, sizeof(msg) - 1, 0);
	assert_true(n > 0);
	msg[n] = '\0';
	assert_string_equal(msg,
	                    "agent-sandbox-server: internal: unsupported printf conversion in \"x=%5.1f\"\n");
	fclose(err);
}

static int
to_file(FILE *f, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = fmt_vfprintf(f, fmt, ap);
	va_end(ap);
	return r;
}

static int
to_fd(int fd, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = fmt_vdprintf(fd, fmt, ap);
	va_end(ap);
	return r;
}

/* FILE and descriptor output: whole, in order with the FILE's other output,
 * across piece boundaries (exactly one piece, one byte more, many) */
static void
test_file_fd(void **state)
{
	static const size_t lens[] = {0,     1, FMT_CHUNK - 1, FMT_CHUNK, FMT_CHUNK + 1, 3 * FMT_CHUNK + 17,
	                              100000};
	char *s = malloc(100001), *want = malloc(100100), *got = malloc(200300);
	size_t i, n;
	int p[2], r;
	FILE *f;

	assert_non_null(s);
	assert_non_null(want);
	assert_non_null(got);
	for (i = 0; i < 100000; i++)
		s[i] = (char)('a' + i % 26);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		s[lens[i]] = '\0';
		r = snprintf(want, 100100, "<%s|%d>", s, (int)i);
		f = tmpfile();
		assert_non_null(f);
		assert_true(fputs("before", f) >= 0);
		assert_int_equal(to_file(f, "<%s|%d>", s, (int)i), r);
		fputs("after", f);
		rewind(f);
		n = fread(got, 1, 200300, f);
		fclose(f);
		assert_int_equal(n, 6 + (size_t)r + 5);
		assert_memory_equal(got, "before", 6);
		assert_memory_equal(got + 6, want, (size_t)r);
		assert_memory_equal(got + 6 + r, "after", 5);

		f = tmpfile();
		assert_non_null(f);
		assert_int_equal(to_fd(fileno(f), "<%s|%d>", s, (int)i), r);
		assert_int_equal(pread(fileno(f), got, 200300, 0), r);
		assert_memory_equal(got, want, (size_t)r);
		fclose(f);
		s[lens[i]] = 'a';
	}
	/* a write that fails: -1 */
	f = fopen("/dev/null", "r");
	assert_non_null(f);
	assert_int_equal(to_file(f, "%s", "x"), -1);
	fclose(f);
	assert_int_equal(pipe(p), 0);
	close(p[0]);
	signal(SIGPIPE, SIG_IGN);
	errno = 0;
	assert_int_equal(to_fd(p[1], "%d", 5), -1);
	assert_int_equal(errno, EPIPE);
	close(p[1]);
	assert_int_equal(to_fd(-1, "%d", 5), -1);
	assert_int_equal(errno, EBADF);
	free(s);
	free(want);
	free(got);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_integers),       cmocka_unit_test(test_strings),
	    cmocka_unit_test(test_long),           cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_refused_aborts), cmocka_unit_test(test_file_fd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
