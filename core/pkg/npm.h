#ifndef ABX_NPM_H
#define ABX_NPM_H
/*
 * The native npm-lock installer: fetch every package a loaded lockfile
 * selected (pkg/npmlock.h), verify it against its
 * integrity, extract it into <staging>/<lockfile path>, and make the root
 * package's bin links. No npm process, no lifecycle script.
 *
 * Fetching: `jobs` worker threads (default NPM_JOBS_DEFAULT), each with its
 * own HTTP client, so downloads run in parallel and each thread keeps its
 * keep-alive connection to the registry. A URL is the entry's `resolved`, or
 * with a registry mirror the mirror's base URL followed by the
 * "/<name>/-/<file>.tgz" part of `resolved` (npm's registry rewrite). Every
 * host contacted, including redirect hops, must be in `hosts` (the manifest's
 * hosts, the mirror, install.allow_hosts).
 *
 * Cache: core/pkg/cache.h, the one content-addressed cache of tarball sources
 * too: a tarball is the blob <cache>/<sha256 of its bytes>, and its SRI
 * integrity (sha512) the alias <cache>/<alg>-<hex>, so `fetch`, mirror
 * directories and offline mode treat npm and tarball artifacts alike. Both
 * digests are computed in the one pass that downloads the file; a file
 * enters the cache only when its integrity matches, and a hit is re-hashed
 * against the integrity before use. With keep_trees, each package's
 * extracted tree is kept as a sealed tree entry keyed by its integrity (its
 * files' copies written by the extraction itself, arc_opts.copy_dirfd), and
 * a later install places that entry (every copied file hashed against the
 * sealed listing) instead of reading and extracting the tarball; a damaged
 * entry is said on stderr, discarded, and the tarball used.
 *
 * Integrity is checked before a byte reaches the extractor: a download is
 * hashed to completion into the cache (and the worker's memory) first, and
 * extraction reads the verified bytes.
 *
 * Extraction: core/pkg/arc.h with ARC_NPM (first directory stripped whatever its
 * name, links and special files dropped, modes normalised). A package is
 * extracted only after the package whose node_modules holds it, so the
 * directories of one never race the other's.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/err.h"
#include "net/http.h"
#include "pkg/npmlock.h"

/* Parallel downloads: npm's default maxsockets is 15 per origin; 8 keeps
 * memory (one TLS buffer and one libarchive reader per thread) well under
 * the 16 MiB budget while saturating a registry connection. */
#define NPM_JOBS_DEFAULT 8
#define NPM_JOBS_MAX 32

/* Where a package's bytes came from, for its SBOM row: "cache:<path>",
 * a URL without its query, "oci://HOST/REPO@sha256:<hex>" or
 * "tree:<cache>/trees/<key>". Information only: nothing reads it back to
 * decide anything. */
#define NPM_SOURCE_MAX 320

/* The tree cache's variant for a package extracted ARC_NPM (cache.h). */
#define NPM_TREE_VARIANT "npm1"

/* Called from worker threads under a lock: bytes downloaded so far (all
 * packages), the total of the announced sizes known so far, packages done. */
typedef void (*npm_progress_fn)(void *arg, uint64_t bytes, uint64_t total, size_t done, size_t count);

struct stat;
/* Called from worker threads (not under a lock) for every regular file
 * extracted: the package's lockfile path, the file's name inside it, its
 * fstat once complete and the sha256 of its content (arc_file_fn). */
typedef void (*npm_file_fn)(void *arg, const char *pkgpath, const char *name, const struct stat *st,
                            const unsigned char sha256[32]);

/* Another place a package's bytes may come from, asked before the registry
 * for each package the caches lack (the OCI mirror, core/install/install_oci.c): the
 * bytes of p into sink(sink_arg) over hc (the worker's client, so its
 * kept-alive connections serve package after package), within lim, rs
 * filled as http_request fills it, and where they came from into src
 * (cap bytes). Returns 0 once the bytes were delivered (the caller checks
 * them against p's integrity like any download), 1 when the sink got no
 * byte and the registry is to be tried, -1 with e. Called by the workers
 * at once: it must be safe to call from several threads. */
typedef int (*npm_source_fn)(void *arg, struct http_client *hc, const struct npmlock_pkg *p, http_sink sink,
                             void *sink_arg, const struct http_limits *lim, struct http_response *rs,
                             char *src, size_t cap, struct err *e);

struct npm_opts {
	const struct npmlock *lock;
	const char *staging; /* tree root; NULL with fetch_only */
	/* the tool's entry when it is a native binary in a platform package,
	 * not a root bin (npm makes every package's bins executable), or NULL */
	const char *exec_bin;
	const char *cache;     /* the content-addressed cache directory */
	const char *cache_key; /* its tree cache's sealing key file (cache.h) */
	/* caches read before cache and never written: one we may not write
	 * (an image's layer), directory mirrors laid out like the cache */
	const char *const *caches_ro;
	size_t ncaches_ro;
	const char *registry; /* mirror base URL ("https://host[/prefix]") or NULL */
	/* with registry: its credential as a header line ("Authorization: ...",
	 * config_npm_auth), sent with each request to the mirror and dropped by
	 * the client on a redirect to any other origin; NULL = none. auth_from
	 * names where it came from, for the 401/403 message; never the value. */
	const char *auth, *auth_from;
	const char *const *hosts; /* hosts that may be contacted ("host[:port]") */
	size_t nhosts;
	int jobs;            /* 0 = NPM_JOBS_DEFAULT */
	int offline;         /* cache only: a miss is install.disabled */
	int allow_http;      /* registry may be plain http:// (every package is
	                      * pinned by its integrity; install.allow_http_mirrors) */
	int fetch_only;      /* fill the cache, extract nothing */
	int keep_trees;      /* place packages from the cache's extracted
	                      * trees, and keep the trees extracted */
	int64_t max_bytes;   /* cap per package download (0 = none); no
	                      * total: every byte must match a pinned
	                      * integrity, so the lockfile bounds the sum */
	int64_t deadline_ms; /* absolute CLOCK_MONOTONIC ms; 0 = none */
	npm_progress_fn progress;
	void *progress_arg;
	npm_file_fn on_file; /* NULL = none */
	void *file_arg;
	/* per package of lock (its index in lock->pkgs), or NULL: where its
	 * bytes came from (npm_source_set); a slot already set when the cache
	 * has the package (install_oci_npm put it there) is kept */
	char (*sources)[NPM_SOURCE_MAX];
	npm_source_fn source; /* NULL = the registry only */
	void *source_arg;
};

/* The scheme o's registry may have: https://, or http:// with allow_http. */
#define NPM_REGISTRY_SCHEME_OK(o)                                                                            \
	(strncmp((o)->registry, "https://", 8) == 0 ||                                                       \
	 ((o)->allow_http && strncmp((o)->registry, "http://", 7) == 0))

struct npm_stats {
	size_t fetched; /* downloaded */
	size_t cached;  /* taken from the cache */
	size_t extracted;
	uint64_t bytes;         /* downloaded bytes */
	uint64_t cached_bytes;  /* bytes of the packages taken from the cache */
	uint64_t files;         /* files written by extraction or placement */
	size_t placed;          /* placed from the cache's extracted trees */
	size_t placed_proved;   /* of them, proved unchanged: copied, not hashed */
	size_t placed_resealed; /* hashed, and given a stat proof for next time */
	size_t kept;            /* extracted trees kept in the cache */
	/* CPU microseconds summed over the workers and their threads:
	 * receiving (TLS, reading; a small download's digests), the
	 * download pipes' digests and writes, decompressing (libarchive,
	 * the checks) and writing the trees (write, sha256) */
	int64_t cpu_recv_us, cpu_digest_us, cpu_blob_us, cpu_decompress_us, cpu_tree_us;
};

/*
 * Install o->lock's packages. Returns 0, or -1 with e set:
 * install.checksum_mismatch (expected and actual integrity), install.disabled
 * (offline cache miss; the message lists the missing integrities),
 * install.failed with details {"phase":"fetch"|"extract"|"publish"},
 * install.npm_auth (the mirror answered 401 or 403), http.*
 * and tls.* from the client. On failure the staging tree holds partial
 * content; the caller removes it. Cache entries written before the failure
 * stay (they were verified).
 */
int npm_install(const struct npm_opts *o, struct npm_stats *st, struct err *e);

/* Link the root package's bins: <staging>/node_modules/.bin/<name> ->
 * ../<package>/<target> (relative symlinks), targets made executable (0755).
 * A target must be a regular file inside the package (no symlink on the
 * way: extraction made none). Returns 0 or -1 (install.failed, phase
 * "extract"). */
int npm_link_bins(const struct npmlock *l, const char *staging, struct err *e);
/* Make <staging>/<rel>, a regular file reached without a symlink,
 * executable (0755). 0 or -1 as npm_link_bins. */
int npm_bin_exec(const char *staging, const char *rel, struct err *e);

/* The package URL for the SBOM: "pkg:npm/%40scope/name@version" into buf.
 * Returns the length or -1 when it does not fit. */
int npm_purl(const struct npmlock_pkg *p, char *buf, size_t cap);

/* dst = prefix then src without src's query or fragment (a signed URL's
 * secret), cut to fit cap with "..." at its end. */
void npm_source_set(char *dst, size_t cap, const char *prefix, const char *src);

/* Node options a shebang may carry ("#!/usr/bin/env -S node --flag"). */
#define NPM_NODE_FLAGS_MAX 8

/*
 * Is path (a tool's entry, symlinks followed) a JavaScript program that needs
 * node? Yes when its name ends in .js, .mjs or .cjs, or its first line is a
 * shebang naming node ("#!/usr/bin/env node", "#!/usr/bin/env -S node
 * --opt", "#!/opt/node/bin/node --opt"). The words after "node" on the
 * shebang line are node options: they are put in flags (pointers into buf,
 * at most NPM_NODE_FLAGS_MAX) and their count in *nflags. Returns 1, 0 (run
 * it directly), or -1 when path cannot be read (errno set).
 */
int npm_js_entry(const char *path, char *buf, size_t cap, char **flags, int *nflags);

#endif
