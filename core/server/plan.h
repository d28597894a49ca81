#ifndef ABX_PLAN_H
#define ABX_PLAN_H
/*
 * The install plan of a configuration: what `prepare`
 * installs so that nothing an enabled operation can ever need is missing.
 *
 *   1. the mounted ops: every op of the registry that at least one
 *      principal may call (policy_decide, install admission included);
 *   2. their install requirements (op->install);
 *   3. the requires closure of those tools;
 *   4. minus what PATH satisfies: a tool whose manifest has a `path` check,
 *      found on PATH (world-writable PATH entries skipped) with a version at
 *      least the manifest's path.min and every minimum its dependents ask
 *      for ("node-runtime>=20"). A tool satisfied on PATH does not pull in
 *      its own requires.
 *
 * The order is the install order: dependencies first, then by name order of
 * the first op that needs them. Every planned tool lists the ops that need
 * it (directly or through requires) and the tools that require it.
 */
#include <limits.h>

#include "base/err.h"
#include "pkg/manifest.h"
#include "server/ops.h"
#include "server/policy.h"

/* Why these numbers: the whole set of manifests is MANIFEST_SET_MAX; a plan
 * is the tools of one configuration, a handful in practice. */
#define PLAN_MAX MANIFEST_SET_MAX
#define PLAN_OPS_MAX 32
#define PLAN_REQBY_MAX 256

struct plan_tool {
	const manifest_t *m; /* owned by the manifest set */
	int nops;
	const char *ops[PLAN_OPS_MAX];    /* op ids (owned by the registry) */
	int ops_more;                     /* ops beyond PLAN_OPS_MAX */
	char required_by[PLAN_REQBY_MAX]; /* "codex,gemini" or "" */
	int direct;                       /* named by an op's install list */
	char min[MANIFEST_VERSION_MAX];   /* strongest minimum of its dependents */
	int on_path;                      /* satisfied by a copy on PATH */
	char path_entry[PATH_MAX];
	char path_version[MANIFEST_VERSION_MAX];
	int planned; /* in order[] */
};

struct plan {
	int n; /* tools seen (planned or on PATH) */
	struct plan_tool t[PLAN_MAX];
	int norder;
	int order[PLAN_MAX]; /* indexes into t, install order */
};

/*
 * Whether tool m (at least version min, "" = no extra minimum) is satisfied
 * on PATH. Fill entry and version when it is. Returns 1 or 0.
 */
typedef int (*plan_path_fn)(const manifest_t *m, const char *min, char *entry, size_t ecap, char *version,
                            size_t vcap, void *ctx);

/*
 * Build the plan. use_path = install.use_path (0: PATH never satisfies).
 * path_fn NULL = plan_path_check. Errors: a manifest that does not load
 * (its code and message), more than PLAN_MAX tools (internal).
 * Returns 0 or -1.
 */
int plan_build(struct plan *p, const struct ops *o, const struct policy *pol, struct manifest_set *ms,
               int use_path, plan_path_fn path_fn, void *ctx, struct err *e);

/*
 * The default PATH check, the one ensure makes (install_path_find): the
 * first copy of the manifest's binary on $PATH whose version qualifies. A
 * manifest without a path block is never satisfied on PATH.
 */
int plan_path_check(const manifest_t *m, const char *min, char *entry, size_t ecap, char *version,
                    size_t vcap, void *ctx);

#endif
