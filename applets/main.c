/*
 * agent-sandbox-server: one binary, applets chosen BusyBox-style:
 * by argv[0]'s basename (an applet name or agent-sandbox-<applet>), else as a
 * tool shim when the basename is a known tool binary, else by the first
 * argument; with no applet named, serve.
 */
#include "common.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "config/config.h"
#include "opts.h"

struct applet {
	const char *name;
	int (*main)(int, char **);
	const char *summary;
};

static const struct applet applets[] = {
#define APPLET(c, name, summary) {name, c##_main, summary},
#include "applets.h"
#undef APPLET
};

#define NAPPLETS ((int)(sizeof(applets) / sizeof(applets[0])))

static const struct applet *
find(const char *name)
{
	int i;

	for (i = 0; i < NAPPLETS; i++)
		if (strcmp(applets[i].name, name) == 0)
			return &applets[i];
	return NULL;
}

static void
list(FILE *f, int verbose)
{
	int i;

	for (i = 0; i < NAPPLETS; i++) {
		if (!verbose)
			fprintf(f, "%s\n", applets[i].name);
		else
			fprintf(f, "  %-13s %s\n", applets[i].name, applets[i].summary);
	}
}

/* --install [--bare] DIR: a symlink per applet to our own absolute path. An
 * existing symlink is replaced (symlink to a temporary name, then rename), so
 * re-running after the binary moved is safe; anything else is left alone. */
static int
install_links(int argc, char **argv)
{
	char self[PATH_MAX], link[PATH_MAX], tmp[PATH_MAX + 16], name[64];
	const char *dir = NULL;
	struct stat st;
	int bare = 0, i, rc = EXIT_OK;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--bare") == 0)
			bare = 1;
		else if (argv[i][0] == '-' || dir != NULL)
			return usage_error("--install", opts_help("main.txt"), "unexpected argument %s",
			                   argv[i]);
		else
			dir = argv[i];
	}
	if (dir == NULL)
		return usage_error("--install", opts_help("main.txt"), "missing DIR");
	if (self_path(g_argv0, self) != 0) {
		err_printf("io.error", "cannot find the path of this binary: %s", strerror(errno));
		return EXIT_FAIL;
	}
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		err_printf("io.error", "%s: not a directory", dir);
		return EXIT_FAIL;
	}
	for (i = 0; i < NAPPLETS; i++) {
		if ((size_t)snprintf(name, sizeof(name), "%s%s", bare ? "" : "agent-sandbox-",
		                     applets[i].name) >= sizeof(name) ||
		    fs_path_join(link, sizeof(link), dir, name, NULL) != 0) {
			err_printf("io.error", "%s/%s%s: path too long", dir, bare ? "" : "agent-sandbox-",
			           applets[i].name);
			rc = EXIT_FAIL;
			continue;
		}
		snprintf(tmp, sizeof(tmp), "%s.tmp%d", link, (int)getpid());
		if (lstat(link, &st) == 0 && !S_ISLNK(st.st_mode)) {
			err_printf("io.error", "%s exists and is not a symlink; left alone", link);
			rc = EXIT_FAIL;
			continue;
		}
		unlink(tmp);
		if (symlink(self, tmp) != 0 || rename(tmp, link) != 0) {
			err_printf("io.error", "%s: %s", link, strerror(errno));
			unlink(tmp);
			rc = EXIT_FAIL;
		}
	}
	return rc;
}

/* Was the binary started through a symlink? argv0 with a '/' is checked
 * directly, a bare name is looked up in PATH as execvp would have. */
static int
via_symlink(const char *argv0)
{
	char p[PATH_MAX];
	const char *path = config_env("PATH"), *q;
	struct stat st;
	size_t len;

	if (strchr(argv0, '/') != NULL)
		return lstat(argv0, &st) == 0 && S_ISLNK(st.st_mode);
	for (; path != NULL && *path != '\0'; path = q ? q + 1 : NULL) {
		q = strchr(path, ':');
		len = q ? (size_t)(q - path) : strlen(path);
		if (snprintf(p, sizeof(p), "%.*s/%s", (int)len, path, argv0) >= (int)sizeof(p))
			continue;
		if (access(p, X_OK) == 0)
			return lstat(p, &st) == 0 && S_ISLNK(st.st_mode);
		if (q == NULL)
			break;
	}
	return 0;
}

static const char *
base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

int
main(int argc, char **argv)
{
	static char *serve_argv[] = {"serve", NULL};
	const struct applet *a;
	const char *base;

	g_argv0 = argc > 0 && argv[0] ? argv[0] : PROG;
	base = base_name(g_argv0);
	if (strncmp(base, "agent-sandbox-", 14) == 0 && strcmp(base, PROG) != 0 && (a = find(base + 14)))
		return a->main(argc, argv);
	if ((a = find(base)) != NULL)
		return a->main(argc, argv);
	if (strcmp(base, PROG) != 0) {
		if (shim_find(base))
			return shim_main(argc, argv);
		/* A link under an unknown name is a tool shim whose manifest is
		 * gone or broken: starting serve (or reading its argv as an
		 * applet) would surprise whoever ran `codex --version`. A renamed
		 * copy of the binary still dispatches as usual. */
		if (via_symlink(g_argv0)) {
			err_printf(
			    "config.invalid",
			    "%s: no applet by this name and no loadable tool manifest names this binary",
			    base);
			return EXIT_USAGE;
		}
	}

	if (argc < 2)
		return serve_main(1, serve_argv);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
		fputs(opts_help("main.txt"), stdout);
		list(stdout, 1);
		return EXIT_OK;
	}
	if (strcmp(argv[1], "--list") == 0) {
		if (argc > 2)
			return usage_error("--list", opts_help("main.txt"), "unexpected argument %s",
			                   argv[2]);
		list(stdout, 0);
		return EXIT_OK;
	}
	if (strcmp(argv[1], "--install") == 0)
		return install_links(argc - 1, argv + 1);
	if (strcmp(argv[1], "--version") == 0)
		return version_main(1, (char *[]){"version", NULL});
	if ((a = find(argv[1])) != NULL)
		return a->main(argc - 1, argv + 1);
	if (argv[1][0] == '-') {
		/* `agent-sandbox-server --port 9000` is `serve --port 9000`. */
		argv[0] = "serve";
		return serve_main(argc, argv);
	}
	fprintf(stderr, "%s: usage: unknown applet '%s'\n%s", PROG, argv[1], opts_help("main.txt"));
	list(stderr, 1);
	return EXIT_USAGE;
}
