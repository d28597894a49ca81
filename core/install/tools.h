#ifndef ABX_TOOLS_H
#define ABX_TOOLS_H
/*
 * Tools directories and install settings.
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
 * Settings come from core/config.h (layers, each value with its source).
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
#define TOOLS_MIRRORS_MAX 8
#define TOOLS_ALLOW_HOSTS_MAX 16

struct install_settings {
	enum cfg_mode mode;
	char mode_source[64];                          /* "default", "env ABX_SERVER_INSTALL_MODE", ... */
	int wait_s;                                    /* request wait, default 20 */
	int timeout_s;                                 /* whole install, default 600 */
	int64_t max_download_mb;                       /* per artifact, default 500 */
	char npm_mirror[1024];                         /* "" = none */
	char tarball_mirrors[TOOLS_MIRRORS_MAX][1024]; /* URL templates or dirs */
	int nmirrors;
	char oci_mirror[1024];  /* oci://HOST[:PORT]/REPO, "" = none */
	int allow_http_mirrors; /* plain http:// mirrors (the configuration allowed them) */
	char allow_hosts[TOOLS_ALLOW_HOSTS_MAX][256]; /* mirror hosts */
	int nallow_hosts;
	int allow_tmp;
	int use_path;
	char tools_dir[PATH_MAX]; /* explicit directory (flag/env), "" = none */
	char tools_dir_source[64];
	char manifests_dir[PATH_MAX];
	char manifests_dir_source[64];
	char cache_dir[PATH_MAX];  /* --cache; "" = <writable tools>/.cache */
	char state_dir[PATH_MAX];  /* "" = the default (tools_state_dir) */
	char base_dir[PATH_MAX];   /* "" = $HOME: where HOME-relative defaults resolve */
	char audit_file[PATH_MAX]; /* "" = <state dir>/audit.jsonl if that exists */
	char environment[64];      /* "production" refuses unpinned installs */
};

/*
 * Settings from a loaded configuration (core/config.h: defaults < file <
 * environment < flags, with the source of every value).
 */
void install_settings_from_config(struct install_settings *s, const struct config *cfg);

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
 * Build the chain for s. With create != 0 the explicit directory is created
 * when missing, and the per-user default when no earlier one is writable
 * (an installer needs a place; a reader does not). Returns 0, or -1 with
 * config.state_dir_unsafe for an unsafe explicit directory.
 */
int tools_chain_build(struct tools_chain *c, const struct install_settings *s, int create, struct err *e);

/* Put dir first in the chain (the shim: the tools directory a link lives
 * in). Duplicates are removed. */
void tools_chain_prefer(struct tools_chain *c, const char *dir);

/* The directories tried: details.tried on e (an array of paths, left out
 * when it does not fit), and as text for messages. */
void tools_chain_detail_tried(const struct tools_chain *c, struct err *e);
void tools_chain_tried_text(const struct tools_chain *c, char *buf, size_t cap);

/* The state directory: s->state_dir when set, else
 * ~/.local/state/agent-sandbox (root: /var/lib/agent-sandbox), into buf. */
int tools_state_dir(const struct install_settings *s, char *buf, size_t cap);

/* Whether fs_mkdir_p(path) could create the state or a tools directory at
 * path: its nearest existing ancestor is a directory we may write and
 * search. Creates nothing (doctor's answer for what serve would create).
 * 1 or 0. */
int tools_dir_creatable(const char *path);

#endif
