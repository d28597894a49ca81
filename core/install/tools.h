#ifndef ABX_TOOLS_H
#define ABX_TOOLS_H
/*
 * Tools directories.
 *
 * The chain, searched in order for an installed tool; new installs go to the
 * first writable directory:
 *   1. --tools-dir DIR, else $ABX_TOOLS_DIR (created when missing)
 *   2. /opt/agent-sandbox/tools (the build-time default; used when it exists)
 *   3. <state dir>/tools (state_dir, ABX_SERVER_STATE_DIR), else ~/.local/state/agent-sandbox/tools
 *      (root: /var/lib/agent-sandbox/tools) (created, mode 0700, when no
 *      earlier directory is writable)
 *   4. $TMPDIR/agent-sandbox-<uid>/tools, only with allow_tmp
 * A directory must be owned by us or root and not group/world-writable
 * (fs_dir_safe); an explicitly named unsafe directory is config.state_dir_
 * unsafe, an unsafe default is skipped (and listed in `tried` with why).
 *
 * Every value comes from struct config (config/config.h), read where it is
 * used: no copy of it is kept here.
 */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "base/err.h"

#define TOOLS_CHAIN_MAX 4
/* A tools directory path leaves room below PATH_MAX for what the engine
 * appends (<name>/<version>-<platform>/<bin>, staging names). */
#define TOOLS_DIR_MAX 3000
struct tools_dir {
	char path[PATH_MAX];
	int exists;
	int writable; /* exists, safe, and we may create files in it */
	int safe;
	int explicit_;         /* named by flag or environment */
	char why[ERR_MSG_MAX]; /* why it is not used for writing, for `tried` */
};

struct tools_chain {
	struct tools_dir d[TOOLS_CHAIN_MAX];
	int n;
	int writable; /* index of the first writable directory, or -1 */
};

/*
 * Build the chain for cfg. With create != 0 the explicit directory is created
 * when missing, and the per-user default when no earlier one is writable
 * (an installer needs a place; a reader does not). Returns 0, or -1 with
 * config.state_dir_unsafe for an unsafe explicit directory.
 */
int tools_chain_build(struct tools_chain *c, const struct config *cfg, int create, struct err *e);

/* Put dir first in the chain (the shim: the tools directory a link lives
 * in). Duplicates are removed. */
void tools_chain_prefer(struct tools_chain *c, const char *dir);

/* The directories tried: details.tried on e (an array of paths, left out
 * when it does not fit), and as text for messages. */
void tools_chain_detail_tried(const struct tools_chain *c, struct err *e);
void tools_chain_tried_text(const struct tools_chain *c, char *buf, size_t cap);

/* The state directory: cfg->state_dir when set, else
 * <base_dir or HOME>/.local/state/agent-sandbox (root without base_dir:
 * /var/lib/agent-sandbox), into buf. cfg may be NULL (the defaults). */
int tools_state_dir(const struct config *cfg, char *buf, size_t cap);

/* Whether fs_mkdir_p(path) could create the state or a tools directory at
 * path: its nearest existing ancestor is a directory we may write and
 * search. Creates nothing (doctor's answer for what serve would create).
 * 1 or 0. */
int tools_dir_creatable(const char *path);

#endif
