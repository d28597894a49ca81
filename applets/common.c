#include "common.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/decimal.h"
#include "base/fs.h"
#include "config/config.h"

const char *g_argv0 = PROG;

int
usage_error(const char *applet, const char *usage, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	err_fmtv(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: usage: %s: %s\n%s", PROG, applet, msg, usage);
	return EXIT_USAGE;
}

int
fail(const struct err *e)
{
	err_print(e);
	if (e->code != NULL && (strncmp(e->code, "config.", 7) == 0 || strcmp(e->code, "usage") == 0 ||
	                        strncmp(e->code, "json.", 5) == 0))
		return EXIT_USAGE;
	return EXIT_FAIL;
}

int
self_path(const char *argv0, char *buf)
{
	const int cap = PATH_MAX;
	char tmp[PATH_MAX];
	const char *path, *p, *q;
	ssize_t n;

	n = readlink("/proc/self/exe", buf, cap - 1);
	if (n > 0 && n < cap - 1) {
		buf[n] = '\0';
		return 0;
	}
	if (strchr(argv0, '/') != NULL)
		return realpath(argv0, buf) != NULL ? 0 : -1;
	path = config_env("PATH");
	for (p = path; p != NULL && *p != '\0'; p = q ? q + 1 : NULL) {
		q = strchr(p, ':');
		int len = q ? (int)(q - p) : (int)strlen(p);
		if (snprintf(tmp, sizeof(tmp), "%.*s/%s", len, p, argv0) >= (int)sizeof(tmp))
			continue;
		if (access(tmp, X_OK) == 0 && realpath(tmp, buf) != NULL)
			return 0;
		if (q == NULL)
			break;
	}
	errno = ENOENT;
	return -1;
}

void
human_bytes(uint64_t b, char *buf, size_t cap)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB"};
	int u = b >= (1u << 30) ? 3 : b >= (1u << 20) ? 2 : b >= 1024 ? 1 : 0;
	/* tenths of the unit, rounded to nearest (ties to even, as %.1f) */
	unsigned __int128 t = (unsigned __int128)b * 10;
	uint64_t q = (uint64_t)(t >> (10 * u)), half = u ? (uint64_t)1 << (10 * u - 1) : 0;
	uint64_t r = (uint64_t)(t & ((((unsigned __int128)1) << (10 * u)) - 1));
	char num[48];

	if (u && (r > half || (r == half && (q & 1))))
		q++;
	dec_fixed(u ? q : b, u ? 1 : 0, 0, num, sizeof(num));
	snprintf(buf, cap, "%s %s", num, unit[u]);
}

int
progress_format(char *line, size_t cap, const char *label, uint64_t have, uint64_t total, uint64_t rate,
                const char *extra, int tty, int final)
{
	char got[32], tot[32] = "?", rt[32], eta[32] = "", pct[16] = "";
	const int w = 24;
	int n, i, fill = 0;

	human_bytes(have, got, sizeof(got));
	human_bytes(rate, rt, sizeof(rt));
	if (total > 0) {
		human_bytes(total, tot, sizeof(tot));
		snprintf(pct, sizeof(pct), "%d%%", (int)(have >= total ? 100 : have * 100 / total));
		fill = have >= total ? w : (int)(have * (uint64_t)w / total);
		if (rate > 0 && total > have)
			snprintf(eta, sizeof(eta), " ETA %ds", (int)((total - have) / rate));
	}
	if (cap < 2 * (size_t)w)
		return 0;
	if (tty) {
		n = snprintf(line, cap, "\r%s%s[", label, label[0] ? " " : "");
		for (i = 0; i < w && n < (int)cap - 1; i++)
			line[n++] = i < fill ? '#' : '.';
		n += snprintf(line + n, cap - (size_t)n, "] %s / %s  %s  %s/s%s%s%s\033[K%s", got, tot, pct,
		              rt, eta, extra[0] ? "  " : "", extra, final ? "\n" : "");
	} else {
		n = snprintf(line, cap, "%s: %s of %s%s%s%s, %s/s%s%s%s\n", label, got, tot,
		             pct[0] ? " (" : "", pct, pct[0] ? ")" : "", rt, eta, extra[0] ? ", " : "",
		             extra);
	}
	return n >= (int)cap ? (int)cap - 1 : n;
}

int
tool_path(char *buf, size_t cap, const char *dir, const char *name, const char *leaf, struct err *e)
{
	if (fs_path_join(buf, cap, dir, name, e) != 0)
		return -1;
	return fs_path_join(buf, cap, buf, leaf, e);
}
