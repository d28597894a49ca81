#ifndef ABX_INSTALL_H
#define ABX_INSTALL_H
/*
 * The install engine: ensure(name) makes a tool
 * ready — lock-free fast path first, then probes, flock, re-check, requires,
 * staging, fetch into the content-addressed cache, safe extraction, verify,
 * marker, atomic publish, bin links — and answers one of the states below.
 *
 * On disk, inside a tools directory (tools.h):
 *   bin/<binary>                       symlink to this binary (the shim)
 *   <name>/<version>-<platform>/       published tree, never written again
 *   <name>/.installed.json             marker (install_marker_*)
 *   <name>/.installed.files            the tree's listing (install_tree_list)
 *   <name>/.installed.proof            the tree's proof list (proof_make)
 *   <name>/.progress.json              {phase, bytes, total, done, count, started, pid}
 *   .locks/<name>.lock                 flock; .locks/<name>.backoff
 *   .cache/<sha256>                    verified downloads
 *   .staging/<name>-<random>/          in-progress installs
 *
 * Audit: one JSON line per install start, finish and unpinned install, to
 * audit_file (ABX_SERVER_AUDIT_FILE) when set, else <state dir>/audit.jsonl
 * when the state directory exists (tools_state_dir); the audit never creates
 * it (the tree cache's sealing key does: install_cache_key).
 *
 * Test hook, only in the test build (-DABX_TEST_HOOKS=1, the Makefile's
 * $(B)/test/agent-sandbox-server; the release binary has none):
 * ABX_TEST_PAUSE=download|extract|place|publish makes the installer print
 * "install: paused at <phase>" on stderr and sleep up to 30 s at that
 * point, so a test can kill -9 it there. Ignored when the configuration is
 * production (config_production); nothing else reads it.
 *
 * Threads: a ctx is used by one thread at a time; different ctxs share
 * nothing in memory but the manifest set and the configuration, both only read
 * once ensure() has resolved a tool (the on-disk lock serialises installs
 * of one tool). Tree walks recurse once per directory level (FS_MAX_DEPTH
 * at most, about 4.5 KiB of stack per level): run ensure() on a thread with
 * at least 1 MiB of stack, not musl's 128 KiB default. The fast path may
 * start one helper thread (64 KiB stack, every signal blocked) for the
 * proof list of a large tree, joined before it returns. An install of a
 * tool with requires ensures them on a thread of their own (a clone of the
 * ctx, INSTALL_THREAD_STACK, every signal blocked) while the tool is
 * staged, and joins it before the tool's verify.argv: the context's
 * observer (progress, announce, timing, required) may then run on two
 * threads at once.
 */
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "base/err.h"
#include "pkg/manifest.h"
#include "pkg/npm.h"
#include "install/tools.h"

enum install_state {
	INSTALL_READY = 0,
	INSTALL_PENDING,             /* a job runs (the server's job layer) */
	INSTALL_MISSING,             /* mode forbids installing: install.required */
	INSTALL_FAILED,              /* install.failed, checksum_mismatch, no_space, noexec, backoff, ... */
	INSTALL_READ_ONLY,           /* install.read_only */
	INSTALL_DISABLED,            /* install.disabled */
	INSTALL_NETWORK_UNREACHABLE, /* install.network_unreachable */
};

/* "ready", "pending", "missing", ... */
const char *install_state_name(enum install_state s);

/*
 * Progress of one install, the same model for tarball and npm sources:
 * bytes downloaded so far and the total of what is being downloaded
 * (total >= bytes always; an npm package counts once its response
 * announces its length, so the total grows while packages start; after
 * the download bytes == total). items: artifacts or npm packages done of
 * count. Later phases (extract, verify, publish) keep the numbers.
 */
struct install_progress {
	uint64_t bytes, total;
	uint32_t done, count;
};

/* Progress report for waiters and the CLI. */
typedef void (*install_progress_fn)(void *arg, const char *name, const char *phase,
                                    const struct install_progress *p);

/* The reason an install happens, for messages. */
#define INSTALL_WHY_MAX 200
/* Network probe results are cached this long, per host:port. */
#define INSTALL_PROBE_TTL 60
#define INSTALL_PROBE_CONNECT_MS 2000
/* Staging directories older than this are a crashed installer's. */
#define INSTALL_STAGING_MAX_AGE (60 * 60)
/* Backoff after a failure: 30 s, doubling, at most 10 min. */
#define INSTALL_BACKOFF_MIN 30
#define INSTALL_BACKOFF_MAX 600
/* A marker with hundreds of npm SBOM rows is ~100 KiB. */
#define INSTALL_MARKER_MAX (4u << 20)
/* Output kept from verify.argv for the error message. */
#define INSTALL_VERIFY_OUT_MAX 65536
/* Stack of the threads the engine starts for requires (and prepare for
 * tools): ensure() recursion and tree walks. */
#define INSTALL_THREAD_STACK (2u << 20)

struct http_client;

/* Markers parsed once per context (see marker_cached in install_tree.c). */
#define INSTALL_MARKER_CACHE 8
struct install_marker;

/* Where one install's time went (install_one; prepare -v prints it, the
 * bench reads it). Download includes the digest, hashed as bytes arrive;
 * extract is decompression and writing together; an npm-lock source's
 * packages are fetched, checked and extracted in one phase, npm. */
enum install_phase {
	INSTALL_PH_PROBE,       /* exec and network probes */
	INSTALL_PH_DOWNLOAD,    /* artifact (or cache hit) with its sha256 */
	INSTALL_PH_EXTRACT,     /* decompress and write the tree */
	INSTALL_PH_PLACE,       /* or: copy and check the cache's extracted tree */
	INSTALL_PH_NPM,         /* npm-lock: every package fetched, verified, extracted */
	INSTALL_PH_REQUIRES,    /* waiting for the requires installed beside it */
	INSTALL_PH_VERIFY_ARGV, /* the manifest's verify.argv */
	INSTALL_PH_LIST,        /* tree listing and its digest */
	INSTALL_PH_PUBLISH,     /* sync, rename, marker, proof, bin links */
	INSTALL_PH_N
};
/* A phase that had nothing to do: verify.argv when the cache recorded a
 * pass for the same tree and run (install_verified_get). */
#define INSTALL_PH_NOT_RUN (-2)
const char *install_phase_name(enum install_phase p);
/* Where one install's CPU went (CPU microseconds summed over the threads,
 * beside the wall-clock phases, which overlap when an archive extracts as
 * it downloads): receiving (TLS, reading; a small download's digests),
 * the downloads' digests and their writes, decompressing (libarchive and
 * every check) and writing the tree (write, sha256, the cache's copies). */
enum install_cpu {
	INSTALL_CPU_RECV,
	INSTALL_CPU_DIGEST,
	INSTALL_CPU_BLOB,
	INSTALL_CPU_DECOMPRESS,
	INSTALL_CPU_TREE,
	INSTALL_CPU_N
};
const char *install_cpu_name(enum install_cpu p);

/* ABX_TEST_PAUSE=phase (the test build only; never when c's configuration
 * is production): announce "install: paused at <phase>" on stderr and sleep
 * 30 s there. Without ABX_TEST_HOOKS it does nothing. */
struct install_ctx;
void install_test_pause(const struct install_ctx *c, const char *phase);

struct install_result;
struct install_reqs;
/*
 * What an install tells its caller, every member optional (NULL = silent),
 * each called with arg. One of them may run on two threads at once while a
 * tool's requires install beside it (see the top of this file).
 */
struct install_observer {
	install_progress_fn progress;
	/* Once per tool right before it is installed: why ("missing",
	 * "manifest changed: ...", "drift: ...") and the tools directory it
	 * goes to. */
	void (*announce)(void *arg, const manifest_t *m, const char *why, const char *dir);
	/* After each install that published a tree: microseconds per phase
	 * (-1: a phase this source has not). */
	void (*timing)(void *arg, const manifest_t *m, const int64_t us[INSTALL_PH_N],
	               const int64_t cpu[INSTALL_CPU_N]);
	/* When a require of a tool being installed has been ensured: rc 0 (r
	 * ready) or -1 (e: its own error, before the dependent's "X requires
	 * Y: " prefix). */
	void (*required)(void *arg, const char *name, int rc, const struct install_result *r,
	                 const struct err *e);
	void *arg;
};

struct install_ctx {
	struct manifest_set *ms;
	const struct config *cfg; /* read, never copied; outlives the context */
	struct tools_chain chain;
	char platform[16];
	/* resolved cache directory: prepare's --cache, else <writable tools
	 * directory>/.cache ("" = none writable) */
	char cache_dir[PATH_MAX];
	int cache_given; /* cache_dir is prepare's --cache */
	int building;    /* prepare/fetch: mode build may install */
	int force;       /* clear backoff first */
	/* prepare: add no extracted tree and no verify.argv note to the cache
	 * (they serve a second tools directory, which an image build has not);
	 * trees already there are still placed from */
	int keep_no_trees;
	/* prepare without --keep-cache or --cache: what the run downloads
	 * leaves with it, so a download extracted as it arrives is only
	 * hashed, never written (the extractor reads the hashed bytes) */
	int drop_downloads;
	/* what an install tells its caller (NULL = silent); the caller owns
	 * it and keeps it alive while the context points to it */
	const struct install_observer *obs;
	int64_t probe_us;      /* ensure's probes, for the next install_one */
	const char *principal; /* for audit; NULL = "cli" */
	const char *op;
	char self[PATH_MAX];   /* this binary, the target of bin/ links */
	char prefer[PATH_MAX]; /* a tools directory put first (the shim's) */

	/* probe cache */
	time_t exec_probe_at;
	char exec_probe_dir[PATH_MAX];
	struct err exec_probe_err;
	int exec_probe_rc;

	struct http_client *http;           /* created on first download */
	struct install_oci *oci;            /* the OCI mirror's client (install_oci.c), owned */
	struct install_npm_lock *npm_lock;  /* the last lockfile parsed (install_npm.c), owned */
	struct install_marker_slot *mcache; /* INSTALL_MARKER_CACHE slots, owned */
	int depth;                          /* requires recursion */
	struct install_reqs *reqs;          /* requires ensured beside an install (install.c) */
	int keep_later;                     /* a requires thread's: kept trees end after it is ready */
	struct install_keep *kept;          /* and those (install_tree_keep_done) */

	/* counters, for prepare's summary and tests */
	int downloads;
	uint64_t bytes_downloaded;
	int installs;

	/* Where the last artifact install_get_artifact made available came
	 * from ("cache:<path>", the mirror or origin URL, "oci://…@sha256:…"),
	 * for the marker's SBOM row of that sha256 only. */
	char src_sha[65];
	char src[MANIFEST_URL_MAX + 16];
};

struct install_result {
	enum install_state state;
	char dir[PATH_MAX];   /* tools directory holding the tree */
	char tree[PATH_MAX];  /* the published tree */
	char entry[PATH_MAX]; /* absolute path of the executable */
	int installed;        /* this call published it */
	int from_path;        /* satisfied by a copy on PATH (entry) */
	int from_env;         /* ABX_TOOL_<NAME> */
	int retry_after;      /* install.backoff: seconds */
};

/*
 * Set up c for ms and cfg (both must outlive c; c reads them, never copies):
 * builds the tools chain (creating nothing), picks the cache directory
 * (cache_dir when not NULL: prepare's --cache, not configuration; else the
 * writable tools directory's .cache) and the platform (NULL = this
 * machine's). Returns 0 or -1 (config.state_dir_unsafe). install_ctx_free
 * releases the HTTP client.
 */
int install_ctx_init(struct install_ctx *c, struct manifest_set *ms, const struct config *cfg,
                     const char *platform, const char *cache_dir, struct err *e);
void install_ctx_free(struct install_ctx *c);
/*
 * Ready c for another caller (serve keeps contexts from request to
 * request): the tools chain looked at again (a directory created, removed
 * or made unsafe since is seen, as by a fresh context; the shim's prefer
 * kept), the caller fields (principal, op, callbacks, building, force) and
 * counters cleared. What it learnt that stays true by its own checks is
 * kept: parsed markers and proof lists (each checked against a fresh lstat),
 * the HTTP client, the lockfile parse, the probe results. 0, or -1 with e
 * (config.state_dir_unsafe) and c still to be freed.
 */
int install_ctx_reuse(struct install_ctx *c, struct err *e);
/*
 * A context for another thread: c's manifests, configuration, chain, cache,
 * callbacks and caller fields, with its own HTTP client and caches and its
 * counters at zero (install_ctx_add_counts adds them back). 0, or -1 with
 * internal (out of memory). Free it with install_ctx_free.
 */
int install_ctx_clone(struct install_ctx *dst, const struct install_ctx *src, struct err *e);
void install_ctx_add_counts(struct install_ctx *dst, const struct install_ctx *src);

/* ensure() flags */
enum {
	INSTALL_F_NO_PATH = 1 << 0, /* do not accept a copy on PATH (prepare --only NAME) */
	INSTALL_F_CHECK = 1 << 1,   /* fast path only: never lock, write or install */
};

/*
 * Make tool name ready (the steps above, in that order). Blocks while another process
 * installs it (polling each second, reporting its progress). Returns 0 with
 * r->state READY, or -1 with r->state saying which failure and e the error
 * (codes of core/base/errcodes.h). With INSTALL_F_CHECK a tool that is not ready is
 * r->state MISSING with e not_found, nothing written.
 */
int install_ensure(struct install_ctx *c, const char *name, unsigned flags, struct install_result *r,
                   struct err *e);

/*
 * Whether tool name, and every tool it requires that is not already
 * there, can run in this image (its manifest's "libc" against the loader
 * npmlock_detect_libc finds). 0, or -1 with install.image_unsupported
 * (details: tool, libc, needs, env) naming the tool, the missing loader and
 * the fix. ensure() runs it before installing anything, and a check
 * (INSTALL_F_CHECK) of a tool that is not there answers it too.
 */
int install_image_check(struct install_ctx *c, const char *name, struct err *e);
/* The same for m alone, for platform (NULL = this machine's; another
 * platform always fits: caches are filled for machines elsewhere). */
int install_image_fits(const manifest_t *m, const char *platform, struct err *e);

/*
 * The fast path alone: is name installed, with its current
 * manifest, in a trusted tree, in any directory of the chain? No lock, no
 * write. Returns 1 (r filled), 0 (not ready), -1 (e set: manifest error).
 */
int install_fast_path(struct install_ctx *c, const manifest_t *m, struct install_result *r, struct err *e);

/*
 * Put artifact a (of tool m) into the cache, verified, without installing
 * (fetch --only). Honours mirrors and the offline mode. *path receives the
 * verified file (cache, or a read-only cache/mirror directory).
 */
int install_cache_artifact(struct install_ctx *c, const manifest_t *m, const struct manifest_artifact *a,
                           char *path, size_t cap, struct err *e);

/*
 * npm-lock sources (core/install/install_npm.c): install_npm_stage fetches, verifies
 * and extracts the lockfile's packages for c->platform into tree and links
 * the root package's bins; install_npm_fetch only fills the cache, for
 * platform ("linux-x64", "linux-arm64" or "all"). Both return 0 or -1 with e
 * (install.checksum_mismatch, install.disabled in offline mode with the
 * missing integrities, install.failed with details.phase, http.*, tls.*).
 */
struct install_known;
/* What an npm-lock install fetched, for its audit record. */
struct install_npm_info {
	uint64_t bytes;         /* every package tarball, downloaded or cached */
	uint64_t downloaded;    /* of which downloaded now */
	size_t packages;        /* packages installed */
	size_t fetched, cached; /* of which downloaded now, taken from the cache */
	size_t skipped;         /* lockfile entries not for the platform */
	char lock_sha256[65];   /* the lockfile's digest */
	int64_t cpu[INSTALL_CPU_N];
};
int install_npm_stage(struct install_ctx *c, const manifest_t *m, const char *tree,
                      struct install_known *known, struct install_npm_info *info, struct err *e);
int install_npm_fetch(struct install_ctx *c, const manifest_t *m, const char *platform,
                      struct install_npm_info *info, struct err *e);
/*
 * The cache's extracted tree of a tarball artifact (install_trees.c,
 * pkg/cache.h): install_tree_place puts it as <staging>/tree (an empty
 * directory it replaces), every file hashed against the sealed listing and
 * recorded in known; 1 placed (*asize = the artifact's size), 0 not (absent,
 * damaged: said on stderr and discarded; nothing under staging changed), -1
 * with e. install_tree_keep keeps the tree just extracted from the verified
 * artifact (before anything ran in it), copying without hashing again the
 * files known (settled) holds unchanged, or, with k from
 * install_tree_keep_begin, renaming the copies the extraction wrote of them.
 * Neither applies to an unpinned artifact or without a writable cache.
 * install_tree_keep_begin, before extraction, when the tree will be kept:
 * points ao's on_file (each file into known, as well) and copies
 * (arc_opts.copy_dirfd) at a new keeper, or returns NULL and leaves ao;
 * with it, install_tree_keep reads the tree and install_tree_keep_end
 * moves the copies in (cache_tree_store_end; nothing of the tree is read
 * then, so it may have run), frees the keeper and what copies are left.
 * install_tree_keep_done is install_tree_keep_end, or with c->keep_later
 * (a require's install beside its dependent) puts k on c->kept for
 * install_tree_keeps_end, called once the dependent may go on.
 */
struct install_known;
struct install_keep;
struct arc_opts;
/* The tree cache's sealing key file: <state dir>/CACHE_KEY_FILE (pkg/cache.h),
 * per user and machine, never inside the cache. 0, or -1 with out "" (no
 * state directory: the tree cache is then not used). */
int install_cache_key(const struct install_ctx *c, char *out, size_t cap);
int install_tree_place(struct install_ctx *c, const manifest_t *m, const struct manifest_artifact *a,
                       const char *staging, struct install_known *known, uint64_t *asize, struct err *e);
struct install_keep *install_tree_keep_begin(struct install_ctx *c, const manifest_t *m,
                                             const struct manifest_artifact *a, struct install_known *known,
                                             struct arc_opts *ao);
void install_tree_keep(struct install_ctx *c, const manifest_t *m, const struct manifest_artifact *a,
                       const char *tree, uint64_t asize, const struct install_known *known,
                       struct install_keep *k);
void install_tree_keep_end(struct install_keep *k);
void install_tree_keep_done(struct install_ctx *c, struct install_keep *k);
void install_tree_keeps_end(struct install_ctx *c);
/*
 * A verify.argv pass, recorded in the cache (a sealed note, pkg/cache.h:
 * <cache>/trees/<name>-<version>-<platform>-<libc>.verified) for exactly one tree
 * (its listing's digest) and ident: the verify run's identity (the verify
 * argv, expect and env, the platform, the libc, and the tree digest of
 * every requirement it ran with; "" = not identifiable, e.g. a require
 * from PATH). install_verified_get answers 1 with the tree digest and the
 * time of the pass when a sound record has exactly ident (a record that
 * fails its seal is said on stderr and not used), else 0; never with
 * --force (c->force), an unpinned manifest or no writable cache.
 * install_verified_put records a pass (only ever called after one).
 */
int install_verified_get(struct install_ctx *c, const manifest_t *m, const char *ident, char tree[65],
                         char *at, size_t atcap);
void install_verified_put(struct install_ctx *c, const manifest_t *m, const char *ident, const char *tree);

/* Run m's verify.argv against the published tree (its entry, its
 * requires as an install would run it, HOME a fresh directory in TMPDIR
 * removed after): always run, never a recorded pass (the verify applet).
 * 0, or -1 with install.failed (details.phase "verify"). */
int install_verify_argv(struct install_ctx *c, const manifest_t *m, const char *tree, struct err *e);

/* One SBOM row per installed npm package (name, version, purl, path,
 * integrity, sha256 when the cache knows it, url) into the marker's array. */
struct json_w;
void install_npm_sbom(struct install_ctx *c, const manifest_t *m, struct json_w *w);
/* Release the lockfile parse the context keeps (install_ctx_free does). */
void install_npm_lock_free(struct install_ctx *c);
/* The OCI mirror's client and its credential (install_oci.c). */
void install_oci_free(struct install_ctx *c);
/* Before an npm install: when cache lacks a package of l and the tool's
 * tag (<tool>-<version>) on the OCI mirror lists a blob for its integrity,
 * no->source (no->source_arg) fetches that blob in npm_install's workers,
 * in parallel over their kept-alive connections, with the token the tag's
 * request got; npm_install keeps the bytes only when they match the
 * lockfile's integrity (the registry's mapping is never trusted), as it
 * does the origin's, and records "oci://HOST/REPO@sha256:<hex>" as the
 * package's source. A package it cannot give goes to the origin (offline:
 * refused). Returns 0 (no->source NULL when the mirror has nothing for
 * the tool), or -1 with e in mode offline when the registry failed.
 * install_oci_npm_end releases what it set, after npm_install. */
int install_oci_npm(struct install_ctx *c, const manifest_t *m, const struct npmlock *l, const char *cache,
                    struct npm_opts *no, struct err *e);
void install_oci_npm_end(struct install_ctx *c, struct npm_opts *no);

/* Clear a tool's backoff record in the writable directory (prepare --force,
 * the admin reset). */
/* A full disk (e->sys ENOSPC or EDQUOT) or a missing CA bundle (the code or
 * the code it wraps tls.no_trust_anchors), wherever in the install it
 * struck, becomes that code, with its own remedy; any other e is left. */
void install_specific_code(struct err *e);

/* Turn a fetch failure with the client's code (http.*, tls.*) into
 * install.failed, details {"phase":"fetch","code":<that code>[,"url":…]}, the
 * code and msg (a copy the caller made of e->msg) kept in the message. */
void install_fetch_failed(struct err *e, const manifest_t *m, const char *url, const char *msg);

/* The network probe, made before anything is downloaded: a TCP connect (INSTALL_PROBE_CONNECT_MS)
 * to url's host (or the HTTPS proxy), cached per process for
 * INSTALL_PROBE_TTL seconds per host:port. Returns 0, or -1 with
 * install.network_unreachable: the host, details {phase: "probe", host,
 * hint} and the mirror or offline hint for m's source type (m may be NULL). */
int install_net_probe(struct install_ctx *c, const manifest_t *m, const char *url, struct err *e);
/* TCP connects the probe made in this process (tests), and a reset of its
 * cache (tests). */
unsigned long install_probe_connects(void);
void install_probe_cache_clear(void);

/* npm-lock: the URL of the first package of m's lockfile (for c->platform)
 * that is not in the cache, through the npm mirror when one is set, into
 * url. Returns 1, 0 when every package is cached (no network needed) or the
 * lockfile does not load (the install reports that). */
int install_npm_probe_url(struct install_ctx *c, const manifest_t *m, char *url, size_t cap);

/* Each fetched package tarball of m's lockfile for platform ("all": every
 * platform's) by the sha256 the cache holds it under: fn(arg, package,
 * hex), for pushing the cache to a registry (fetch --push). Packages inside
 * their parent's tarball have none. Returns how many packages the cache
 * lacks, or -1 with e (the lockfile did not load). */
struct npmlock_pkg;
int install_npm_blobs(struct install_ctx *c, const manifest_t *m, const char *platform,
                      void (*fn)(void *arg, const struct npmlock_pkg *p, const char *hex), void *arg,
                      struct err *e);

/* The integrity digest of every package m's lockfile pins, for every
 * platform (inside a parent's tarball: none): fn(arg, digest). 0, or -1
 * with e (the lockfile did not load). */
int install_npm_digests(struct install_ctx *c, const manifest_t *m,
                        void (*fn)(void *arg, const struct digest *d), void *arg, struct err *e);

/*
 * prepare --prune (core/install/install_prune.c): remove from the first
 * writable tools directory of c and from c's cache what no manifest of
 * c->ms references: a tool's trees other than the one its marker names,
 * dead installers' staging, temporary files whose writer is gone (or that
 * aged past an hour), downloads, aliases and extracted trees of no pinned
 * artifact or lockfile package, verify.argv notes of no manifest's
 * version. A tool whose lock another process holds keeps its trees and
 * staging; while any does, the cache keeps its downloads and trees too (an
 * install may use them). A tool no manifest of c->ms knows is left alone.
 * With dry, nothing is removed. say(arg, path, bytes) for each entry
 * removed (or that would be), held(arg, name) for each tool left alone
 * for its lock; *bytes and *entries the totals (blocks on the disk).
 * Returns 0, or -1 with e (no writable tools directory, a directory that
 * cannot be read).
 */
struct install_prune_report {
	void (*say)(void *arg, const char *path, uint64_t bytes);
	void (*held)(void *arg, const char *name);
	void *arg;
	int dry;
	uint64_t bytes, entries;
};
int install_prune(struct install_ctx *c, struct install_prune_report *r, struct err *e);

void install_backoff_clear(struct install_ctx *c, const char *name);

/* Seconds left in name's backoff (0 = none) in the tools directory installs
 * go to (a failure elsewhere in the chain does not count). */
int install_backoff_left(struct install_ctx *c, const char *name);

/*
 * Read the progress another process reports for name (from the writable
 * directory). Returns 0 and fills the fields, or -1 when there is none.
 */
int install_progress_read(struct install_ctx *c, const char *name, char *phase, size_t cap,
                          struct install_progress *p, long *pid);

/* Append one audit line (a JSON object text without newline). Never fails
 * the caller: an unwritable audit file is reported once on stderr. */
void install_audit(const struct config *cfg, const char *json_object);

/* The configured audit_file can be appended to (created 0600 when
 * missing). A file directly in the state directory (tools_state_dir) is
 * fine while that does not exist yet but can be created: it is created
 * (mode 0700, as serve keeps it). With dry (doctor), nothing is created
 * and the answer is the same as without. Returns 0 (also with no
 * audit_file configured), or -1 with config.invalid naming the file and
 * why: serve refuses to start rather than drop every record. */
int install_audit_check(const struct config *cfg, int dry, struct err *e);

/* For a long-running process (serve): dirfd is its state directory, opened
 * with fs_dir_open_safe at start. Without audit_file, records then go to
 * audit.jsonl opened relative to it (no link followed) instead of through
 * the state directory's path, whose ancestors the owner of a home directory
 * may point elsewhere later. The descriptor must stay open. */
void install_audit_pin_dir(int dirfd);

/*
 * Markers. install_marker_path gives <dir>/<name>/.installed.json. The
 * marker's fields as read back for verify and the fast path.
 */
struct install_marker {
	char name[MANIFEST_NAME_MAX];
	char version[MANIFEST_VERSION_MAX];
	char platform[16];
	char binary[MANIFEST_NAME_MAX];
	char bin[MANIFEST_RELPATH_MAX];
	char tree[MANIFEST_VERSION_MAX + 20]; /* "<version>-<platform>" */
	char manifest_sha256[65];
	char tree_sha256[65];
	char proof_sha256[65]; /* of <name>/.installed.proof */
	char installed_at[32];
	uint64_t files, bytes;
	unsigned uid, mode; /* of the marker file */
};

struct install_marker_slot {
	int used;
	dev_t dev;
	ino_t ino;
	off_t size;
	int64_t mtime_ns, ctime_ns;
	char path[PATH_MAX];
	struct install_marker mk;
	const char *proof; /* the marker's proof list, checked against it */
	size_t proof_len;
	struct install_proof_ref *proof_ref; /* holds proof (install_proof_cache_put) */
};

int install_marker_read(const char *dir, const char *name, struct install_marker *mk, struct err *e);

/*
 * The content listing of the tree under root (root excluded): one line per
 * entry, depth first with each directory's names sorted bytewise,
 *   "f <mode> <size> <sha256> <path>", "d <mode> - - <path>",
 *   "l 0777 <target length> <sha256 of target> <path>"
 * (paths with '\' and newline escaped). hex receives the sha256 of the
 * whole text: the tree digest of markers. *text (malloc'd, caller frees)
 * may be NULL to skip keeping it. Other file types are install.failed.
 */
int install_tree_list(const char *root, char **text, size_t *len, char hex[65], uint64_t *files,
                      uint64_t *bytes, struct err *e);

/*
 * Known files (install_known.c): what extraction learnt of each regular file
 * it wrote, so the listing after verify need not read it back. A record is
 * the file's path relative to the tree, its inode, size, mode, ctime and
 * mtime as fstat saw them once the file was complete, and the sha256 of the
 * bytes written. install_tree_list_known takes a file's digest from a
 * record only when the file still stats exactly the same: any write, chmod
 * or replacement moves the ctime, which an unprivileged writer cannot set
 * back, and install_known_settle waits until the filesystem clock has
 * passed the newest recorded ctime, so a change within the same clock tick
 * cannot hide either. Every other file is read and hashed as always, so the
 * table can only save work, never change a listing.
 *
 * install_known_add is thread-safe; a record that cannot be stored (memory,
 * an over-long path) is dropped. A later record for a path replaces an
 * earlier one. install_known_settle sorts the records and waits (at most
 * 2.5 s; past that the table is emptied). install_tree_list_known with a
 * NULL table is install_tree_list.
 */
struct install_known *install_known_new(void);
void install_known_free(struct install_known *k);
void install_known_add(struct install_known *k, const char *dir, const char *name, const struct stat *st,
                       const unsigned char sha256[32]);
void install_known_settle(struct install_known *k);
size_t install_known_count(const struct install_known *k);
/* The recorded sha256 of rel when st (an lstat of it now) matches the
 * record: 1, else 0. Only after install_known_settle. */
int install_known_get(const struct install_known *k, const char *rel, const struct stat *st,
                      unsigned char sha256[32]);
int install_tree_list_known(const char *root, const struct install_known *k, char **text, size_t *len,
                            char hex[65], uint64_t *files, uint64_t *bytes, struct err *e);

/*
 * The process-wide cache of proof lists (install_proof.c), shared by every
 * context of a process (serve keeps several, one per busy worker, and a
 * Node.js-sized list is worth reading once). install_proof_cache_get returns the
 * list at path whose sha256 is sha256_hex (64 lowercase hex), from the cache
 * when a fresh lstat of path shows the identity (dev, ino, size, ctime,
 * mtime) it had when read and the bytes held hash to sha256_hex, else read
 * and hashed again (and kept, evicting the least recently used of
 * INSTALL_PROOF_CACHE entries). NULL when unreadable or another sha256.
 * The list stays valid until install_proof_cache_put(*ref); thread-safe.
 * The tree itself is never vouched for: proof_check (base/proof.h) still runs.
 * _stats counts hits and reads; _clear drops every entry (tests).
 */
#define INSTALL_PROOF_CACHE 4
struct install_proof_ref;
const char *install_proof_cache_get(const char *path, const char *sha256_hex, size_t *len,
                                    struct install_proof_ref **ref);
void install_proof_cache_put(struct install_proof_ref *ref);
void install_proof_cache_stats(unsigned long *hits, unsigned long *loads);
void install_proof_cache_clear(void);

/* Version of a copy on PATH: run argv (m->path.argv with {bin} = path),
 * 5 s timeout, and take the first dotted number of its output into ver.
 * Returns 0 or -1. */
int install_probe_version(const manifest_t *m, const char *bin, char *ver, size_t cap);

/*
 * The first m->binary on $PATH that ensure would use: absolute, directory
 * entries that are not world-writable, a regular executable file that is
 * not self (this binary: <tools>/bin on PATH holds shims; NULL = none),
 * whose version (install_probe_version) is at least m->path.min and min.
 * A copy that is too old or does not answer is passed over for the next.
 * Returns 1 with entry and ver set, 0 when none qualifies or m has no path
 * block.
 */
int install_path_find(const manifest_t *m, const char *min, const char *self, char *entry, size_t ecap,
                      char *ver, size_t vcap);

/*
 * Run argv (already substituted; core/base/proc.h) with a scrubbed environment
 * (PATH = path, HOME = home, LANG = LC_ALL = C) in home, stdin /dev/null, stdout and
 * stderr captured together into out (cap bytes, NUL-terminated), killed at
 * timeout_s (SIGTERM, SIGKILL INSTALL_RUN_GRACE_MS later). Returns the exit
 * status (0..255), 128+signal when a signal ended it, 128+SIGKILL when the
 * deadline did, 127 when it could not start (e set, its message in out).
 */
#define INSTALL_RUN_GRACE_MS 500
int install_run(char *const argv[], const char *path, const char *home, int timeout_s, char *out, size_t cap,
                struct err *e);
/* The same with env[0..nenv) (a manifest's verify.env, checked by its
 * parser) added to the environment. */
int install_run_env(char *const argv[], const char *path, const char *home, const struct manifest_envvar *env,
                    int nenv, int timeout_s, char *out, size_t cap, struct err *e);

/* The environment variable ABX_TOOL_<NAME> for a tool name into buf. */
void install_tool_env_name(const char *name, char *buf, size_t cap);

#endif
