#ifndef ABX_APPLETS_PREPARE_PLAN_H
#define ABX_APPLETS_PREPARE_PLAN_H
/*
 * The configuration-derived plan for prepare (applets/prepare_plan.c): the
 * tools that the mounted ops can need, their requires, minus PATH copies
 * (core/server/plan.h), in install order.
 */
#include "config/config.h"
#include "base/err.h"
#include "pkg/manifest.h"

struct prepare_plan;

/* The options of prepare that shape the configuration (NULL = not given). */
struct prepare_plan_opts {
	const char *config, *manifests, *tools_dir, *state_dir, *policy, *preset, *commands;
	/* Filling a cache for another machine: what this machine's PATH holds
	 * says nothing about the image, so PATH satisfies nothing. */
	int no_path;
	/* The platform the manifests load for (NULL = this machine): the one
	 * the install that follows takes them for (prepare_plan_take_manifests). */
	const char *platform;
};

/* Load configuration, policy and ops (introspection) and build the plan.
 * *out is owned by the caller (prepare_plan_free). Returns 0 or -1 with e
 * (config.*, json.*, install.manifest_invalid: exit 2). */
int prepare_plan_load(struct prepare_plan **out, const struct prepare_plan_opts *o, struct err *e);
void prepare_plan_free(struct prepare_plan *pp);

/* The planned tools in install order. */
int prepare_plan_count(const struct prepare_plan *pp);
const char *prepare_plan_name(const struct prepare_plan *pp, int i);
enum cfg_mode prepare_plan_mode(const struct prepare_plan *pp);

/* --dry-run: the plan as a table (name, version, size, hosts, the ops that
 * need it) with the PATH copies that were subtracted, or one JSON document
 * {"mode", "mode_source", "config_file", "plan": [...], "on_path": [...]}.
 * Returns the exit code. */
int prepare_plan_print(const struct prepare_plan *pp, int json);

/* The HOSTS a plan row names for m: the npm mirror's host when npm_mirror
 * (install.mirrors.npm) is set and m is an npm tool (it is downloaded from
 * there, not from the registry its manifest names), else m's hosts. */
void prepare_plan_hosts(const char *npm_mirror, const manifest_t *m, char *buf, size_t cap);

/* The SIZE a plan row shows for m on this platform: its unpacked_size in
 * MiB, rounded up ("424 MiB"), else its size hint marked as one ("~450
 * MiB"), else "-". */
void prepare_plan_size(const manifest_t *m, char *buf, size_t cap);

/*
 * For prepare_main: without --only, load the plan and either print it
 * (dry != 0: returns 1 with *rc the exit code) or put the planned names in
 * install order into names[0..*n) (storage that lives until exit; returns
 * 0) and the plan into *keep, the caller's to free (keep NULL: freed), so
 * that its configuration is not loaded a second time. On a configuration
 * error prints it and returns -1 with *rc = 2.
 */
int prepare_plan_names(const struct prepare_plan_opts *o, int dry, int json, char **names, int *n, int cap,
                       int *rc, struct prepare_plan **keep);
/*
 * Hand the plan's manifest set over to ms (the caller's to close from then
 * on, and the plan's tools point into it) when it was loaded for platform
 * (NULL = this machine), so that it is not opened a second time. Returns 1
 * when it was handed over, else 0 (ms untouched).
 */
int prepare_plan_take_manifests(struct prepare_plan *pp, const char *platform, struct manifest_set *ms);
/* The configuration the plan loaded (flags o named included); pp owns it. */
const struct config *prepare_plan_config(const struct prepare_plan *pp);

#endif
