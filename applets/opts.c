/*
 * The one option parser of the applets: each applet's table (opts.h) is
 * read here for argv, and its help text (applets/help/) printed here for
 * --help and usage errors.
 */
#include "opts.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "pkg/manifests_embed.h"

/* The files of applets/help/ (build/gen/help_embed.c). */
extern struct embedded_file embedded_help[];

const char *
opts_help(const char *name)
{
	struct embedded_file *f;
	const char *t = NULL;
	struct err e = {0};

	err_clear(&e);
	for (f = embedded_help; f->path != NULL && t == NULL; f++)
		if (strcmp(f->path, name) == 0 && (t = embedded_text(f, &e)) == NULL)
			err_print(&e);
	return t != NULL ? t : "";
}

#ifdef ABX_TEST_HOOKS
/* The test build's check that each row of u's table has its row in u's
 * text ("  -o, --output FILE", then two spaces or a newline): an option
 * the text leaves out would take effect but be documented nowhere
 * (tests/integration/options.sh runs every applet's --help through it). */
static void
check_rows(const struct opts *u, const char *text)
{
	const struct opt *o;
	const char *p;
	char row[128];
	int n;

	for (o = u->opt; o->name != NULL; o++) {
		n = o->letter ? snprintf(row, sizeof(row), "\n  -%c, ", o->letter)
		              : snprintf(row, sizeof(row), "\n  ");
		n += snprintf(row + n, sizeof(row) - n, "--%s%s%s", o->name, o->arg ? " " : "",
		              o->arg ? o->arg : "");
		for (p = text; (p = strstr(p, row)) != NULL; p++)
			if (p[n] == '\n' || (p[n] == ' ' && p[n + 1] == ' '))
				break;
		if (p == NULL) {
			fprintf(stderr, "%s: applets/help/%s has no row for %s\n", PROG, u->help, row + 3);
			exit(EXIT_FAIL);
		}
	}
}
#endif

void
opts_usage(const struct opts *u, FILE *f)
{
	const char *text = opts_help(u->help);

#ifdef ABX_TEST_HOOKS
	check_rows(u, text);
#endif
	fputs(text, f);
	if (u->also != NULL) {
		fputc('\n', f);
		opts_usage(u->also, f);
	}
}

int
opts_error(const struct opts *u, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	err_fmtv(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: usage: %s: %s\n", PROG, u->applet, msg);
	opts_usage(u, stderr);
	return u->usage_exit;
}

static const struct opt *
find(const struct opt *o, const char *name, size_t len, char letter)
{
	for (; o->name != NULL; o++)
		if (o->name[0] != '\0' &&
		    (letter ? o->letter == letter : strncmp(o->name, name, len) == 0 && o->name[len] == '\0'))
			return o;
	return NULL;
}

/* o's value into dst. Returns -1 to go on, else the exit code. */
static int
store(const struct opts *u, const struct opt *o, const char *arg, void *dst)
{
	char *field = (char *)dst + o->off;
	struct err e = {0};

	if (o->set == NULL) {
		if (o->arg != NULL)
			memcpy(field, &arg, sizeof(arg));
		else
			*(int *)(void *)field = 1;
		return -1;
	}
	err_clear(&e);
	if (o->set(dst, o, arg, &e) == 0)
		return -1;
	/* A value refused with a code of its own (oci.url) keeps its code. */
	if (e.code != NULL && strcmp(e.code, "usage") != 0)
		return (err_print(&e), u->usage_exit);
	return opts_error(u, "%s", e.msg);
}

int
opts_parse(const struct opts *u, int argc, char **argv, void *dst, int *nargs)
{
	const struct opt *o, *many = NULL;
	const char *a, *arg, *eq;
	int i, n = 0, rc, options = 1;

	for (i = 1; i < argc; i++) {
		a = argv[i];
		if (!options || a[0] != '-' || a[1] == '\0') {
			/* --only a b c: the values up to the next option */
			if (many == NULL)
				argv[++n] = argv[i];
			else if ((rc = store(u, many, a, dst)) >= 0)
				return rc;
			continue;
		}
		many = NULL;
		if (strcmp(a, "--") == 0) {
			options = 0;
			continue;
		}
		if (a[1] != '-') {
			/* -qv, -oFILE, -o FILE */
			for (a++; *a != '\0'; a++) {
				if (*a == 'h')
					return (opts_usage(u, stdout), EXIT_OK);
				if ((o = find(u->opt, NULL, 0, *a)) == NULL)
					return opts_error(u, "unknown option -%c", *a);
				arg = o->arg == NULL ? NULL
				      : a[1] != '\0' ? a + 1
				      : i + 1 < argc ? argv[++i]
				                     : NULL;
				if (o->arg != NULL && arg == NULL)
					return opts_error(u, "-%c needs a value", *a);
				if ((rc = store(u, o, arg, dst)) >= 0)
					return rc;
				if (o->arg != NULL)
					break;
			}
			continue;
		}
		a += 2;
		eq = strchr(a, '=');
		if (strcmp(a, "help") == 0)
			return (opts_usage(u, stdout), EXIT_OK);
		if ((o = find(u->opt, a, eq ? (size_t)(eq - a) : strlen(a), 0)) == NULL)
			return opts_error(u, "unknown option --%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
		if (o->arg == NULL && eq != NULL)
			return opts_error(u, "--%s takes no value", o->name);
		arg = o->arg == NULL ? NULL : eq != NULL ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
		if (o->arg != NULL && arg == NULL)
			return opts_error(u, "--%s needs a value", o->name);
		if ((rc = store(u, o, arg, dst)) >= 0)
			return rc;
		if (o->many)
			many = o;
	}
	*nargs = n;
	argv[n + 1] = NULL;
	if (u->max_args >= 0 && n > u->max_args)
		return opts_error(u, "unexpected argument %s", argv[u->max_args + 1]);
	return -1;
}
