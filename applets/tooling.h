#ifndef ABX_APPLETS_TOOLING_H
#define ABX_APPLETS_TOOLING_H
/*
 * Shared set-up of the applets that handle tools (prepare, fetch --only,
 * verify, the shim): the flags they share (--config, --manifests,
 * --tools-dir, --state-dir, --cache, --platform, -q, -v), the
 * configuration (through cfgload_config), the manifest set and the install
 * context.
 */
#include <getopt.h>

#include "install/install.h"
#include "pkg/manifest.h"
#include "install/tools.h"

struct tooling {
	const char *config;    /* --config FILE */
	const char *manifests; /* --manifests DIR */
	const char *tools_dir; /* --tools-dir DIR */
	const char *state_dir; /* --state-dir DIR (its tools/ is in the chain) */
	const char *cache;     /* --cache DIR */
	const char *platform;  /* --platform P (or "all" where allowed) */
	int quiet, verbose, json;

	/* The configuration, loaded once by tooling_open and read by the
	 * context (ctx.cfg) until tooling_close; owned. */
	struct config *cfg;
	int cfg_kept; /* tooling_close leaves cfg to the caller */
	struct manifest_set ms;
	struct install_ctx ctx;
	int ms_open, ctx_open;
	int settings_failed; /* the configuration (file, environment, flags) did not load */
};

/*
 * The shared flags as getopt_long entries (TOOLING_OPT_*, codes below 256 so
 * an applet's own start at 256) and their one handler: tooling_option
 * stores c's value in t and returns 1, or returns 0 for a code that is the
 * applet's own. -q and -v are handled too.
 */
enum {
	TOOLING_O_CONFIG = 200,
	TOOLING_O_MANIFESTS,
	TOOLING_O_TOOLS,
	TOOLING_O_STATE,
	TOOLING_O_CACHE,
	TOOLING_O_PLATFORM,
	TOOLING_O_JSON,
};
#define TOOLING_OPT_CONFIG                                                                                   \
	{                                                                                                    \
		"config", required_argument, NULL, TOOLING_O_CONFIG                                          \
	}
#define TOOLING_OPT_MANIFESTS                                                                                \
	{                                                                                                    \
		"manifests", required_argument, NULL, TOOLING_O_MANIFESTS                                    \
	}
#define TOOLING_OPT_TOOLS                                                                                    \
	{                                                                                                    \
		"tools-dir", required_argument, NULL, TOOLING_O_TOOLS                                        \
	}
#define TOOLING_OPT_STATE                                                                                    \
	{                                                                                                    \
		"state-dir", required_argument, NULL, TOOLING_O_STATE                                        \
	}
#define TOOLING_OPT_CACHE                                                                                    \
	{                                                                                                    \
		"cache", required_argument, NULL, TOOLING_O_CACHE                                            \
	}
#define TOOLING_OPT_PLATFORM                                                                                 \
	{                                                                                                    \
		"platform", required_argument, NULL, TOOLING_O_PLATFORM                                      \
	}
#define TOOLING_OPT_JSON                                                                                     \
	{                                                                                                    \
		"json", no_argument, NULL, TOOLING_O_JSON                                                    \
	}
#define TOOLING_OPT_QV                                                                                       \
	{"quiet", no_argument, NULL, 'q'},                                                                   \
	{                                                                                                    \
		"verbose", no_argument, NULL, 'v'                                                            \
	}
int tooling_option(struct tooling *t, int c, const char *arg);

/*
 * An explicit --cache DIR before anything is downloaded: created with its
 * missing parents (mkdir -p, as a tools directory is) so what is downloaded
 * is kept there; one that exists but cannot be written serves what it holds
 * and a note on stderr says downloads are not kept. Returns 0, or -1 with
 * io.error naming the directory and a fix when it cannot be created: the
 * caller asked to keep the downloads there. No --cache: 0, nothing done.
 */
int tooling_cache_ready(const struct tooling *t, struct err *e);

/*
 * Load the configuration (file, environment, these flags), open the
 * manifest set (loading for platform, "all" allowed when allow_all), and
 * the install context for ctx_platform (NULL = this machine). Returns 0, or
 * -1 with e (config.* / json.*: exit 2).
 */
int tooling_open(struct tooling *t, int allow_all, const char *ctx_platform, struct err *e);
void tooling_close(struct tooling *t);

/* After a failed tooling_open: close t, print e, and return the exit code.
 * A configuration that does not load is a usage error (exit 2) whatever
 * its code (a missing or unreadable --config FILE is io.error or
 * not_found), as in check-config; otherwise fail()'s mapping. */
int tooling_fail(struct tooling *t, const struct err *e);
/* "error": {code, message[, details]} for --json output. */
struct json_w;
void tooling_json_error(struct json_w *w, const struct err *e);
/* Print the --json document of a run with nothing to do: {"<list>":[],"ok":true}. */
void tooling_json_empty(const char *list);

/* Progress lines on stderr for prepare and fetch (a tool's phase changes
 * and, while downloading, about once a second). */
void tooling_progress(void *arg, const char *name, const char *phase, const struct install_progress *p);

/* The line before an install (install_ctx.announce): "agent-sandbox-server:
 * installing NAME VERSION into DIR (why)" on stderr. */
void tooling_announce(void *arg, const manifest_t *m, const char *why, const char *dir);
/* prepare -v: one line per install, the time of each phase (install_phase) */
void tooling_timing(void *arg, const manifest_t *m, const int64_t us[INSTALL_PH_N],
                    const int64_t cpu[INSTALL_CPU_N]);

#endif
