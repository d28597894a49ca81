#ifndef ABX_APPLETS_CFGLOAD_H
#define ABX_APPLETS_CFGLOAD_H
/*
 * The one configuration loader of the applets (cfgload_config), and the
 * stack every introspecting applet loads the same way (check-config,
 * doctor, prepare's plan) through core/server/cfgstack.h: configuration
 * layers, policy, the op registry with agents checked against the manifests.
 * Introspection: it reads files only; no socket, no process, no secret.
 */
#include "config/config.h"
#include "opts.h"
#include "pkg/manifest.h"
#include "server/cfgstack.h"

struct cfgload {
	struct config cfg;
	struct policy pol;
	struct ops ops;
	struct manifest_set ms;  /* embedded + manifests_dir, this platform */
	struct cfgstack st;      /* over the four above: st.ms_open, st.ops_ready */
	const char *config_file; /* --config */
	struct config_flags flags;
};

/*
 * The configuration load of every applet (serve, check-config, doctor,
 * prepare, fetch, verify, the shim): config_load with file (--config, NULL =
 * $ABX_SERVER_CONFIG or the default file), the process environment and the
 * flags f (NULL = none). With warn, the warnings go to stderr, each once per
 * process (serve's API prints its own on every load). Returns 0, or -1 with
 * e (config.invalid, json.*, io.error: a usage error) and c at the defaults.
 */
int cfgload_config(struct config *c, const char *file, const struct config_flags *f, int warn, struct err *e);

/* A zeroed struct on the heap (it is a few hundred KiB), or NULL. */
struct cfgload *cfgload_new(void);
void cfgload_free(struct cfgload *L);

/*
 * Handle a long option by name: "config", or one that sets a configuration
 * key (config_option_key: policy, preset, commands, manifests, tools-dir,
 * state-dir, base-dir, mode, ...). Returns 1 when it was one of them, else 0.
 */
int cfgload_option(struct cfgload *L, const char *name, const char *value);

/*
 * The configuration options of the applets that load it whole (serve,
 * check-config, doctor) as option rows, each stored by set at off; and
 * cfgload_set, such a set for a struct cfgload * field (cfgload_option).
 */
#define CFGLOAD_OPTS(set, off)                                                                               \
	OPT(0, "config", "FILE", set, off), OPT(0, "policy", "FILE", set, off),                              \
	    OPT(0, "preset", "NAME", set, off), OPT(0, "commands", "FILE", set, off),                        \
	    OPT(0, "manifests", "DIR", set, off), OPT(0, "tools-dir", "DIR", set, off),                      \
	    OPT(0, "state-dir", "DIR", set, off), OPT(0, "mode", "MODE", set, off)
int cfgload_set(void *dst, const struct opt *o, const char *arg, struct err *e);

/* Load configuration, policy, manifests (for platform, NULL = this
 * machine) and ops in introspection (cfgstack_load). Warnings are printed
 * to stderr. Returns 0 or -1 with e set. */
int cfgload_run(struct cfgload *L, const char *platform, struct err *e);

#endif
