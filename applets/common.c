#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *g_argv0 = PROG;

int
usage_help(const char *usage)
{
	fputs(usage, stdout);
	return EXIT_OK;
}

int
usage_error(const char *applet, const char *usage, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: usage: %s: %s\n%s", PROG, applet, msg, usage);
	return EXIT_USAGE;
}

int
bad_option(const char *applet, const char *usage, int argc, char **argv)
{
	const char *opt = (optind > 0 && optind <= argc) ? argv[optind - 1] : "?";

	if (optopt != 0 && optopt != '?' && (opt == NULL || opt[0] != '-' || opt[1] == '-'))
		return usage_error(applet, usage, "bad or incomplete option -%c", optopt);
	if (optopt != 0 && optopt != '?')
		return usage_error(applet, usage, "bad or incomplete option -%c", optopt);
	return usage_error(applet, usage, "unknown or incomplete option %s", opt);
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
	path = getenv("PATH");
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
