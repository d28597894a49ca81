#ifndef ABX_APPLETS_CFGLOAD_H
#define ABX_APPLETS_CFGLOAD_H
/*
 * The configuration stack every introspecting applet loads the same way
 * (check-config, doctor, prepare's plan): configuration layers, policy, the
 * op registry with agents checked against the manifests. Introspection: it
 * reads files only; no socket, no process, no secret.
 */
#include "../core/config.h"
#include "../core/manifest.h"
#include "../core/ops.h"
#include "../core/policy.h"

/* Flags every introspecting applet accepts, mapped to the flag layer. */
#define CFGLOAD_MAX_FLAGS 8

struct cfgload {
	struct config cfg;
	struct policy pol;
	struct ops ops;
	int ops_ready;
	struct manifest_set ms; /* embedded + manifests_dir, this platform */
	int ms_open;
	struct err merr;         /* the last manifest failure other than not_found */
	const char *config_file; /* --config */
	struct config_flag flags[CFGLOAD_MAX_FLAGS];
	int nflags;
};

/* A zeroed struct on the heap (it is a few hundred KiB), or NULL. */
struct cfgload *cfgload_new(void);
void cfgload_free(struct cfgload *L);

/* Record a flag for the flag layer: key is a dotted configuration path. */
void cfgload_flag(struct cfgload *L, const char *key, const char *value, const char *flag);

/*
 * Handle one of the shared long options by name (config, policy, preset,
 * commands, manifests, tools-dir, state-dir, mode). Returns 1 when it was
 * one of them, else 0.
 */
int cfgload_option(struct cfgload *L, const char *name, const char *value);

/* Load configuration, policy and ops. Warnings are printed to stderr.
 * Returns 0 or -1 with e set. */
int cfgload_run(struct cfgload *L, struct err *e);

/* Whether tool name has a valid manifest (with its requires closure), and
 * whether it has a run block; for ops_build. A manifest that exists but does
 * not load is remembered in merr and reported instead of "unknown". */
enum ops_agent_state cfgload_agent_state(const char *name, void *ctx, char *hint, size_t cap);
int cfgload_tool_known(const char *name, void *ctx);

#endif
