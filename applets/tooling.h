#ifndef ABX_APPLETS_TOOLING_H
#define ABX_APPLETS_TOOLING_H
/*
 * Shared set-up of the applets that handle tools (prepare, fetch --only,
 * verify, the shim): the flags they share (--config, --manifests,
 * --tools-dir, --state-dir, --cache, --platform, -q, -v), the
 * configuration (through cfgload_config), the manifest set and the install
 * environment.
 */
#include "opts.h"
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
	/* The configuration as loaded already with these flags (prepare's
	 * plan, which the caller keeps): tooling_open reads it instead of
	 * loading the files again. NULL: tooling_open loads it. */
	const struct config *loaded;

	/* prepare: what tooling_open's environment is made with
	 * (install_setup) */
	int keep_no_trees, drop_downloads;

	/* The configuration, loaded once by tooling_open and read by the
	 * environment until tooling_close; owned. */
	struct config *cfg;
	int cfg_kept;                 /* tooling_close leaves cfg to the caller */
	struct manifest_set ms;       /* open already (ms_open): tooling_open keeps it */
	struct install_env *env;      /* NULL until tooling_open made it */
	struct install_observer obs;  /* rq.obs when an applet sets it */
	struct install_req rq;        /* what the applet asks of env */
	struct install_counts counts; /* what its requests did, added up */
	int ms_open;
	int settings_failed; /* the configuration (file, environment, flags) did not load */
};

/*
 * The shared flags as option rows (opts.h) of an applet whose options
 * struct holds a struct tooling * at off; tooling_set stores each by its
 * name. --platform's row is each applet's own: what it accepts differs.
 * TOOLING_OPT_WHERE is --config, --manifests and --tools-dir, in that order:
 * where every such applet reads its configuration, manifests and tools.
 */
#define TOOLING_OPT_WHERE(off)                                                                               \
	OPT(0, "config", "FILE", tooling_set, off), OPT(0, "manifests", "DIR", tooling_set, off),            \
	    OPT(0, "tools-dir", "DIR", tooling_set, off)
#define TOOLING_OPT_STATE(off) OPT(0, "state-dir", "DIR", tooling_set, off)
#define TOOLING_OPT_CACHE(off) OPT(0, "cache", "DIR", tooling_set, off)
#define TOOLING_OPT_JSON(off) OPT(0, "json", NULL, tooling_set, off)
#define TOOLING_OPT_QV(off)                                                                                  \
	OPT('q', "quiet", NULL, tooling_set, off), OPT('v', "verbose", NULL, tooling_set, off)
int tooling_set(void *dst, const struct opt *o, const char *arg, struct err *e);

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
 * the install environment for ctx_platform (NULL = this machine). Returns 0, or
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

/* The line before an install (install_observer.announce) on stderr:
 * "agent-sandbox-server: installing NAME VERSION into DIR, downloading from
 * ORIGIN (why)", or "repairing NAME VERSION in DIR" for a drifted tree, or
 * "from local copies of its pinned downloads" when nothing is downloaded. */
void tooling_announce(void *arg, const manifest_t *m, const char *why, const char *dir, const char *from);
/* prepare -v: one line per install, the time of each phase (install_phase) */
void tooling_timing(void *arg, const manifest_t *m, const int64_t us[INSTALL_PH_N],
                    const int64_t cpu[INSTALL_CPU_N]);

#endif
