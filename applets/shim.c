/*
 * Tool shims: <tools>/bin/<binary> is a symlink to this binary.
 * Invoked under a tool's binary name, it resolves the tool, runs ensure()
 * (mode lazy installs on first exec, mode build answers install.required),
 * and execve()s the real entry point by absolute path, with the arguments,
 * environment and standard streams unchanged, so exit status and signals are
 * the tool's own. A JavaScript entry (core/pkg/npm.h npm_js_entry) runs
 * through the node of node-runtime.
 */
#include "common.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>

#include "config/config.h"
#include "base/fs.h"
#include "base/json.h"
#include "install/launch.h"
#include "pkg/npm.h"
#include "tooling.h"

/* Arguments passed on to a JavaScript tool; the kernel's ARG_MAX is the
 * real bound, this one sizes our argv copy. */
#define SHIM_ARGS_MAX 8192

extern char **environ;

static struct tooling t;
static char tool[MANIFEST_NAME_MAX];

static const char *
base_of(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

/* The tools directory a shim link lives in: <tools>/bin/<binary>. From
 * argv[0] when it has a '/', else the PATH entry whose <binary> is a link to
 * this binary. */
static int
shim_tools_dir(const char *argv0, char *out, size_t cap)
{
	char cand[PATH_MAX], dir[PATH_MAX], self[PATH_MAX], rp[PATH_MAX];
	const char *path, *p, *q, *base = base_of(argv0);
	char *slash;

	if (self_path(argv0, self) != 0)
		self[0] = '\0';
	if (strchr(argv0, '/') != NULL) {
		snprintf(dir, sizeof(dir), "%s", argv0);
	} else {
		dir[0] = '\0';
		path = config_env("PATH");
		for (p = path; p != NULL && *p; p = q ? q + 1 : NULL) {
			size_t n;
			q = strchr(p, ':');
			n = q ? (size_t)(q - p) : strlen(p);
			if (n > 0 && n < sizeof(cand) - NAME_MAX - 2 && p[0] == '/') {
				snprintf(cand, sizeof(cand), "%.*s/%s", (int)n, p, base);
				if (realpath(cand, rp) != NULL && strcmp(rp, self) == 0) {
					snprintf(dir, sizeof(dir), "%s", cand);
					break;
				}
			}
			if (q == NULL)
				break;
		}
		if (dir[0] == '\0')
			return -1;
	}
	/* strip "/<binary>", then "/bin" */
	if ((slash = strrchr(dir, '/')) == NULL)
		return -1;
	*slash = '\0';
	if ((slash = strrchr(dir, '/')) == NULL || strcmp(slash, "/bin") != 0)
		return -1;
	*slash = '\0';
	if (dir[0] == '\0' || realpath(dir, rp) == NULL)
		return -1;
	snprintf(out, cap, "%s", rp);
	return 0;
}

/* The manifests directory a marker in dir names for the tool whose binary
 * is base (a tool installed with --manifests DIR), into out. */
static int
marker_manifests_dir(const char *dir, const char *base, char *out, size_t cap)
{
	char p[PATH_MAX], *buf = NULL, *slash;
	struct json_doc doc = {0};
	char **names;
	struct err e = {0};
	size_t len, n, k;
	int found = -1;

	if (fs_dir_names(AT_FDCWD, dir, "io.error", &names, &n, &e) != 0)
		return -1;
	for (k = 0; found < 0 && k < n; k++) {
		const char *bin, *man;
		if (names[k][0] == '.')
			continue;
		if (tool_path(p, sizeof(p), dir, names[k], ".installed.json", &e) != 0 ||
		    fs_read_alloc(p, INSTALL_MARKER_MAX, &buf, &len, &e) < 0)
			continue;
		if (json_parse(&doc, buf, len, NULL, &e) == 0) {
			bin = json_get_str(doc.root, "binary");
			man = json_get_str(doc.root, "manifest");
			if (bin && man && strcmp(bin, base) == 0 && man[0] == '/') {
				snprintf(out, cap, "%s", man);
				if ((slash = strrchr(out, '/')) != NULL) {
					*slash = '\0';
					found = 0;
				}
			}
			json_free(&doc);
		}
		free(buf);
		buf = NULL;
	}
	free(names);
	return found;
}

int
shim_find(const char *base)
{
	const manifest_t *m;
	struct err e = {0};
	char dir[PATH_MAX], mdir[PATH_MAX];

	/* as serve's installs on first use: the downloads are kept, no
	 * extracted tree (core/server/jobs.c) */
	memset(&t, 0, sizeof(t));
	t.keep_no_trees = 1;
	if (tooling_open(&t, 0, NULL, &e) < 0) {
		tooling_close(&t);
		return 0;
	}
	m = manifest_find_binary(&t.ms, base);
	/* Installed with --manifests DIR (or manifests_dir): use that
	 * directory again, also when a built-in manifest has the name, so a
	 * shim started by name from an op or an agent (without serve's
	 * configuration) runs the tree that is there rather than installing
	 * the built-in one. */
	if (t.cfg->manifests_dir[0] == '\0' && shim_tools_dir(g_argv0, dir, sizeof(dir)) == 0 &&
	    marker_manifests_dir(dir, base, mdir, sizeof(mdir)) == 0) {
		tooling_close(&t);
		memset(&t, 0, sizeof(t));
		t.keep_no_trees = 1;
		t.manifests = mdir;
		m = tooling_open(&t, 0, NULL, &e) == 0 ? manifest_find_binary(&t.ms, base) : NULL;
	}
	if (m == NULL) {
		tooling_close(&t);
		return 0;
	}
	snprintf(tool, sizeof(tool), "%s", m->name);
	return 1;
}

int
shim_main(int argc, char **argv)
{
	/* static: install results and the argv copy are large for a stack */
	static struct install_result r, nr;
	static char *nargv[SHIM_ARGS_MAX + NPM_NODE_FLAGS_MAX + 3];
	static struct launch_tool lt;
	struct err e = {0};
	char **env;
	char dir[PATH_MAX], rp[PATH_MAX], shebang[512], *flags[NPM_NODE_FLAGS_MAX];
	int js, nflags = 0;

	err_clear(&e);
	if (shim_tools_dir(argv[0], dir, sizeof(dir)) == 0) {
		install_env_prefer(t.env, dir);
	}
	/* an install says so before it starts, with progress on a terminal */
	t.obs.announce = tooling_announce;
	if (isatty(2))
		t.obs.progress = tooling_progress;
	t.rq.obs = &t.obs;
	if (install_ensure(t.env, tool, &t.rq, &r, &e) < 0) {
		err_print(&e);
		tooling_close(&t);
		return EXIT_FAIL;
	}
	/* never exec ourselves: that would loop */
	if (realpath(r.entry, rp) != NULL && strcmp(rp, install_env_self(t.env)) == 0) {
		err_printf("install.failed", "%s resolves to agent-sandbox-server itself", r.entry);
		tooling_close(&t);
		return EXIT_FAIL;
	}
	/* A JavaScript entry runs as `<node> [shebang options] <script> ARGS`
	 * with the node of node-runtime (or an acceptable one on PATH), so
	 * neither /usr/bin/env nor a shell is needed; the manifest's env is
	 * what the vendor's launcher would set (core/install/launch.h). */
	js = npm_js_entry(r.entry, shebang, sizeof(shebang), flags, &nflags);
	if (js < 0) {
		err_printf("install.failed", "cannot read %s: %s", r.entry, strerror(errno));
		tooling_close(&t);
		return EXIT_FAIL;
	}
	launch_tool_of(&lt, manifest_get(&t.ms, tool, &e));
	if ((env = launch_env(&lt, r.entry, environ, NULL)) == NULL) {
		err_printf("internal", "out of memory");
		tooling_close(&t);
		return EXIT_FAIL;
	}
	if (js) {
		if (install_ensure(t.env, "node-runtime", &t.rq, &nr, &e) < 0) {
			err_print(&e);
			tooling_close(&t);
			return EXIT_FAIL;
		}
		if (realpath(nr.entry, rp) != NULL && strcmp(rp, install_env_self(t.env)) == 0) {
			err_printf("install.failed", "%s resolves to agent-sandbox-server itself", nr.entry);
			tooling_close(&t);
			return EXIT_FAIL;
		}
	}
	if (launch_argv(nargv, (int)(sizeof(nargv) / sizeof(nargv[0])), js ? nr.entry : NULL, flags, nflags,
	                r.entry, argv + 1, argc - 1) < 0) {
		err_printf("usage", "%s: more than %d arguments", tool, SHIM_ARGS_MAX);
		tooling_close(&t);
		return 126;
	}
	tooling_close(&t);
	execve(nargv[0], nargv, env);
	err_printf("install.failed", "cannot run %s: %s", nargv[0], strerror(errno));
	return 126;
}
