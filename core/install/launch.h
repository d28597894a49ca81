#ifndef ABX_LAUNCH_H
#define ABX_LAUNCH_H
/*
 * How a tool's entry runs: one rule for the shim, command ops and agent
 * sessions, so a tool behaves the same however it is started.
 *
 *  - A JavaScript entry (core/pkg/npm.h npm_js_entry) runs as
 *    `<node> [shebang options] <script> ARGS` with the node of node-runtime
 *    (the caller makes it ready: the shim with install_ensure, serve
 *    through its install jobs); anything else runs by its absolute path.
 *    Neither /usr/bin/env nor a shell is needed.
 *  - The manifest's "env" is what the vendor's launcher would have set
 *    (Codex's bin/codex.js sets CODEX_MANAGED_BY_NPM and
 *    CODEX_MANAGED_PACKAGE_ROOT before it execs the native binary, which
 *    we run directly). It applies only when the entry is the manifest's own
 *    installed tree, never to a copy from PATH or ABX_TOOL_<NAME>, whose
 *    launcher is someone else's; "{tree}" is that tree.
 *  - A PATH prefix (the tools directories' bin/, so a tool can start
 *    another tool by name) goes before the environment's PATH.
 */
#include <stddef.h>

#include "pkg/manifest.h"
#include "install/tools.h"

/* PATH for a child whose environment has none (command ops pass only the
 * declared variables): what execvp falls back to, made explicit once the
 * tools' bin/ goes in front. */
#define LAUNCH_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

/* What launching needs from a manifest, as a copyable value (a session
 * keeps it while the manifests may be reloaded). */
struct launch_tool {
	char bin[MANIFEST_RELPATH_MAX];
	struct manifest_envvar env[MANIFEST_MAX_ENV];
	int nenv;
};

void launch_tool_of(struct launch_tool *t, const manifest_t *m);

/* When entry is t's installed entry (".../<tree>/<bin>"), the tree into
 * tree and 1; else 0. */
int launch_tree(const struct launch_tool *t, const char *entry, char *tree, size_t cap);

/*
 * The child's environment: base (NULL-terminated; NULL = empty) with t's
 * variables applied (none when t is NULL or entry is not t's tree), and
 * path_prefix (a PATH list; NULL or "" = none) before base's PATH, or
 * before LAUNCH_DEFAULT_PATH when base has none. Returns a malloc'd,
 * NULL-terminated array of malloc'd strings (launch_env_free), or NULL
 * when out of memory.
 */
char **launch_env(const struct launch_tool *t, const char *entry, char *const *base, const char *path_prefix);
void launch_env_free(char **env);

/*
 * The argv that runs entry with args[0..nargs): [node, flags..., entry,
 * args...] when node is not NULL (a JavaScript entry), else [entry,
 * args...], NULL-terminated, pointers into the arguments (nothing copied).
 * Returns the number of words, or -1 when more than cap - 1.
 */
int launch_argv(char **out, int cap, const char *node, char *const *flags, int nflags, const char *entry,
                char *const *args, int nargs);

/* The bin/ directories of the chain's existing tools directories, as a
 * PATH list ("" when none), into buf. */
void launch_tools_path(const struct tools_chain *c, char *buf, size_t cap);

#endif
