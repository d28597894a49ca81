#ifndef ABX_INSTALL_H
#define ABX_INSTALL_H
/*
 * The install engine's front: what applets and the server call (what its
 * files share is install_int.h). ensure(name) makes a tool
 * ready — lock-free fast path first, then probes, flock, re-check, requires,
 * staging, fetch into the content-addressed cache, safe extraction, verify,
 * marker, atomic publish, bin links — and answers one of the states below.
 * A caller makes an environment once for its configuration
 * (install_env_new), passes a request with each call (install_req: who,
 * why, how, who hears) and gets what the call found back (install_result).
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
 * Threads: an environment is used by one thread at a time; different ones share
 * nothing in memory but the manifest set and the configuration, both only read
 * once ensure() has resolved a tool (the on-disk lock serialises installs
 * of one tool). Tree walks recurse once per directory level (FS_MAX_DEPTH
 * at most, about 4.5 KiB of stack per level): run ensure() on a thread with
 * at least 1 MiB of stack, not musl's 128 KiB default. The fast path may
 * start one helper thread (64 KiB stack, every signal blocked) for the
 * proof list of a large tree, joined before it returns. An install of a
 * tool with requires ensures them on a thread of their own (a clone of the
 * environment, INSTALL_THREAD_STACK, every signal blocked) while the tool is
 * staged, and joins it before the tool's verify.argv: the request's
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
/* A marker with hundreds of npm SBOM rows is ~100 KiB. */
#define INSTALL_MARKER_MAX (4u << 20)
/* Stack of the threads the engine starts for requires (and prepare for
 * tools): ensure() recursion and tree walks. */
#define INSTALL_THREAD_STACK (2u << 20)

struct http_client;
struct install_marker_slot;

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

struct install_result;

/*
 * What an install tells its caller, every member optional (NULL = silent),
 * each called with arg. One of them may run on two threads at once while a
 * tool's requires install beside it (see the top of this file).
 */
struct install_observer {
	install_progress_fn progress;
	/* Once per tool right before it is installed: why ("missing",
	 * "manifest changed: ...", "drift: ..."), the tools directory it goes
	 * to, and from: the URL of its first download, "" when every pinned
	 * artifact is local (the cache, a mirror directory), NULL in mode
	 * offline (not asked). */
	void (*announce)(void *arg, const manifest_t *m, const char *why, const char *dir, const char *from);
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

/*
 * The engine's environment over one configuration: the manifests, the
 * configuration, the tools chain, the platform, the cache, this binary's
 * path, and what it learns that stays true by its own checks (parsed
 * markers and proof lists, the HTTP and OCI clients, the lockfile parse,
 * the exec probe). Opaque: made by install_env_new, read through the
 * install_env_* functions, never written by a caller. One thread uses it at
 * a time (the top of this file); serve keeps several per configuration
 * generation and hands each to the next request (install_env_reuse).
 */
struct install_env;

/* What an environment is made with besides its manifests and
 * configuration; zero is the default of each. */
struct install_setup {
	const char *platform; /* NULL = this machine's */
	const char
	    *cache_dir; /* prepare's --cache (not configuration); NULL = <writable tools directory>/.cache */
	/* prepare, and installs on first use (serve, the shim): add no
	 * extracted tree and no verify.argv note to the cache (they serve a
	 * second tools directory, which an image build or a sandbox has not);
	 * trees already there are still placed from */
	int keep_no_trees;
	/* prepare without --keep-cache or --cache: what the run downloads
	 * leaves with it, so a download extracted as it arrives is only
	 * hashed, never written (the extractor reads the hashed bytes) */
	int drop_downloads;
};

/*
 * A new environment for ms and cfg (both must outlive it; it reads them,
 * never copies): builds the tools chain (creating nothing), picks the cache
 * directory and the platform. 0 with *env, or -1 with e
 * (config.state_dir_unsafe, internal) and *env NULL. install_env_free
 * releases it and what it holds.
 */
int install_env_new(struct install_env **env, struct manifest_set *ms, const struct config *cfg,
                    const struct install_setup *s, struct err *e);
void install_env_free(struct install_env *env);
/*
 * Ready env for another request: the tools chain looked at again (a
 * directory created, removed or made unsafe since is seen, as by a fresh
 * environment; install_env_prefer's kept). What it learnt that stays true
 * by its own checks is kept (each parsed marker and proof list checked
 * against a fresh lstat). 0, or -1 with e (config.state_dir_unsafe) and env
 * still to be freed.
 */
int install_env_reuse(struct install_env *env, struct err *e);
/* An environment for another thread: env's manifests, configuration,
 * chain, cache and setup, with its own clients and caches. 0 with *dst, or
 * -1 with internal (out of memory). */
int install_env_clone(struct install_env **dst, const struct install_env *src, struct err *e);
/* Put tools directory dir first in env's chain (the shim's own), and the
 * cache after it unless one was given. */
void install_env_prefer(struct install_env *env, const char *dir);
/* What env was made with and found: its tools chain, its cache directory
 * ("" = none writable), this binary (the target of bin/ links). Valid
 * until the next install_env_reuse or install_env_free. */
const struct tools_chain *install_env_chain(const struct install_env *env);
const char *install_env_cache_dir(const struct install_env *env);
const char *install_env_self(const struct install_env *env);

/* install_req flags */
enum {
	INSTALL_F_NO_PATH = 1 << 0, /* do not accept a copy on PATH (prepare --only NAME) */
	INSTALL_F_CHECK = 1 << 1,   /* fast path only: never lock, write or install */
	INSTALL_F_BUILD = 1 << 2,   /* prepare: mode build may install */
	INSTALL_F_FORCE = 1 << 3,   /* clear the backoff first; no recorded verify.argv pass */
};

/* One request to the engine: who asks and why (the audit's principal, NULL
 * = "cli", and op), how (INSTALL_F_*), and who hears what happens (NULL =
 * silent; the caller keeps it alive during the call). */
struct install_req {
	const char *principal;
	const char *op;
	unsigned flags;
	const struct install_observer *obs;
};

/* What the calls of a request did, the requires it installed included. */
struct install_counts {
	int downloads;
	int installs;
	uint64_t bytes_downloaded;
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
	struct install_counts n;
};

/*
 * Make tool name ready for rq (the steps above, in that order). Blocks while another process
 * installs it (polling each second, reporting its progress). Returns 0 with
 * r->state READY, or -1 with r->state saying which failure and e the error
 * (codes of core/base/errcodes.h); r->n either way. With INSTALL_F_CHECK a tool that is not ready is
 * r->state MISSING with e not_found, nothing written.
 */
int install_ensure(struct install_env *env, const char *name, const struct install_req *rq,
                   struct install_result *r, struct err *e);

/*
 * Whether m can run in this image (its manifest's "libc" against the
 * loader npmlock_detect_libc finds), for platform (NULL = this machine's;
 * another platform always fits: caches are filled for machines elsewhere).
 * 0, or -1 with install.image_unsupported (details: tool, libc, needs, env)
 * naming the tool, the missing loader and the fix. ensure() asks it of a
 * tool and every tool it requires that is not already there before
 * installing anything, and a check (INSTALL_F_CHECK) of a tool that is not
 * there answers it too.
 */
int install_image_fits(const manifest_t *m, const char *platform, struct err *e);

/*
 * Put artifact a (of tool m) into the cache, verified, without installing
 * (fetch --only). Honours mirrors and the offline mode. *path receives the
 * verified file (cache, or a read-only cache/mirror directory). rq: its
 * observer (progress); what it downloaded is added to n (NULL: not
 * counted), as by install_npm_fetch.
 */
int install_cache_artifact(struct install_env *c, const struct install_req *rq, const manifest_t *m,
                           const struct manifest_artifact *a, char *path, size_t cap,
                           struct install_counts *n, struct err *e);

/* What an npm-lock install fetched, for its audit record and fetch's
 * summary. */
struct install_npm_info {
	uint64_t bytes;         /* every package tarball, downloaded or cached */
	uint64_t downloaded;    /* of which downloaded now */
	size_t packages;        /* packages installed */
	size_t fetched, cached; /* of which downloaded now, taken from the cache */
	size_t skipped;         /* lockfile entries not for the platform */
	char lock_sha256[65];   /* the lockfile's digest */
	int64_t cpu[INSTALL_CPU_N];
};
/* The packages of m's npm-lock lockfile for platform ("linux-x64",
 * "linux-arm64" or "all") fetched into the cache, verified, installing
 * nothing (fetch). 0, or -1 with e (install.checksum_mismatch,
 * install.disabled in offline mode with the missing integrities,
 * install.failed with details.phase, http.*, tls.*). */
int install_npm_fetch(struct install_env *c, const struct install_req *rq, const manifest_t *m,
                      const char *platform, struct install_npm_info *info, struct install_counts *n,
                      struct err *e);

/* Run m's verify.argv against the published tree (its entry, its
 * requires as an install would run it, HOME a fresh directory in TMPDIR
 * removed after): always run, never a recorded pass (the verify applet).
 * 0, or -1 with install.failed (details.phase "verify"). */
int install_verify_argv(struct install_env *c, const manifest_t *m, const char *tree, struct err *e);

/* Each fetched package tarball of m's lockfile for platform ("all": every
 * platform's) by the sha256 the cache holds it under: fn(arg, package,
 * hex), for pushing the cache to a registry (fetch --push). Packages inside
 * their parent's tarball have none. Returns how many packages the cache
 * lacks, or -1 with e (the lockfile did not load). */
struct npmlock_pkg;
int install_npm_blobs(struct install_env *c, const manifest_t *m, const char *platform,
                      void (*fn)(void *arg, const struct npmlock_pkg *p, const char *hex), void *arg,
                      struct err *e);

/* Clear a tool's backoff record in the writable directory (prepare --force,
 * the admin reset). */
void install_backoff_clear(struct install_env *c, const char *name);

/*
 * prepare --prune (core/install/install_prune.c): remove from the first
 * writable tools directory of c and from c's cache what no manifest of c's
 * manifest set references: a tool's trees other than the one its marker
 * names, dead installers' staging, temporary files whose writer is gone (or
 * that aged past an hour), downloads, aliases and extracted trees of no
 * pinned artifact or lockfile package, verify.argv notes of no manifest's
 * version. A tool whose lock another process holds keeps its trees and
 * staging; while any does, the cache keeps its downloads and trees too (an
 * install may use them). A tool no manifest of the set knows is left alone.
 * With dry, nothing is removed. say(arg, path, bytes) for each entry
 * removed (or that would be), held(arg, name) for each tool left alone for
 * its lock; *bytes and *entries the totals (blocks on the disk). Returns 0,
 * or -1 with e (no writable tools directory, a directory that cannot be
 * read).
 */
struct install_prune_report {
	void (*say)(void *arg, const char *path, uint64_t bytes);
	void (*held)(void *arg, const char *name);
	void *arg;
	int dry;
	uint64_t bytes, entries;
};
int install_prune(struct install_env *c, struct install_prune_report *r, struct err *e);

/* Seconds left in name's backoff (0 = none) in the tools directory installs
 * go to (a failure elsewhere in the chain does not count). */
int install_backoff_left(struct install_env *c, const char *name);

/*
 * Read the progress another process reports for name (from the writable
 * directory). Returns 0 and fills the fields, or -1 when there is none.
 */
int install_progress_read(struct install_env *c, const char *name, char *phase, size_t cap,
                          struct install_progress *p, long *pid);

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

/* The environment variable ABX_TOOL_<NAME> for a tool name into buf. */
void install_tool_env_name(const char *name, char *buf, size_t cap);

#endif
