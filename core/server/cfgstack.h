#ifndef ABX_CFGSTACK_H
#define ABX_CFGSTACK_H
/*
 * The configuration stack, assembled in one place for every reader: the
 * configuration layers (defaults < file < environment < flags), the policy
 * over them, the manifest set they name, and the op registry with each
 * agent and tool checked against that set. serve builds one per
 * configuration generation (api_gen.c), the introspecting applets one per
 * run (applets/cfgload.c: check-config, doctor, prepare's plan).
 */
#include "config/config.h"
#include "base/err.h"
#include "pkg/manifest.h"
#include "server/ops.h"
#include "server/policy.h"

struct cfgstack {
	/* The caller's storage, filled by cfgstack_load. */
	struct config *cfg;
	struct policy *pol;
	struct ops *ops;
	/* The manifests: open already when ms_open (serve keeps one set for
	 * every generation), else opened from cfg and then ms_open is set:
	 * cfgstack_free closes it. */
	struct manifest_set *ms;
	int ms_open, ms_owned;
	int ops_ready; /* cfgstack_free frees ops */

	/* What to load. */
	const char *file; /* --config (NULL: $ABX_SERVER_CONFIG or the default) */
	const struct config_flag *flags;
	int nflags;
	const char *platform; /* the manifests' platform, NULL = this machine */
	/* Introspection whatever the environment says: no socket, no process,
	 * no secret (the applets that only look). */
	int introspect;
	/* The warnings: once per process (config_print_warnings, the applets),
	 * else every one on each load (serve says them on every reload). */
	int warn_once;
	/* The last manifest failure other than not_found, for ops_build's
	 * lookups: what broke, not "unknown agent". */
	struct err merr;
};

/*
 * Load s as its inputs say: configuration, policy, the manifest set (unless
 * open), ops. Returns 0, or -1 with e (config.invalid, json.*, io.error,
 * install.manifest_invalid for a named manifest that does not load); what
 * loaded stays for cfgstack_free.
 */
int cfgstack_load(struct cfgstack *s, struct err *e);
void cfgstack_free(struct cfgstack *s);

#endif
