#ifndef ABX_APPLETS_FETCH_CACHE_H
#define ABX_APPLETS_FETCH_CACHE_H
/*
 * Filling the content-addressed cache without installing
 * (applets/fetch_cache.c): fetch's cache form (`fetch --only NAME...`,
 * `fetch --platform all --cache DIR`) and prepare --cache-only both call
 * fetch_cache with the same arguments.
 */

/* Tools one run names (with their requires). */
#define FETCH_CACHE_MAX 64

struct opts;
struct tooling;

struct fetch_cache_args {
	/* The shared tool flags (config, manifests, tools_dir, cache,
	 * platform "all" allowed, json, quiet, verbose) in a tooling that is
	 * not open yet; fetch_cache opens a copy. */
	const struct tooling *flags;
	char **names; /* the tools; nnames 0 = the configuration's plan */
	int nnames;
	const char *push; /* --push oci://HOST[:PORT]/REPO, or NULL */
};

/* 1 when fetch's argv asks for the cache form (no URL; --only, --platform,
 * --cache or --push), else 0. */
int fetch_cache_wanted(int argc, char **argv);

/* fetch's cache-form options into flags (zeroed first) and a (names:
 * storage for FETCH_CACHE_MAX pointers into argv). Returns -1 to go on with
 * fetch_cache, else the exit code (--help, or a usage error already
 * printed). */
int fetch_cache_options(int argc, char **argv, struct tooling *flags, struct fetch_cache_args *a,
                        char **names);
/* That form's usage (fetch --help prints it after the URL form's). */
extern const struct opts fetch_cache_usage;

/* Download and verify into the cache; a line per artifact (or one JSON
 * document with a->json) and a summary on stderr. Returns the exit code:
 * 0 all cached, 3 some failed, 1 all failed, 2 usage or configuration. */
int fetch_cache(const struct fetch_cache_args *a);

#endif
