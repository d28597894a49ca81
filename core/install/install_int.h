#ifndef ABX_INSTALL_INT_H
#define ABX_INSTALL_INT_H

/*
 * What the files of the install engine share and nothing else uses (the
 * API is core/install/install.h). The files, bottom to top: each calls
 * only the ones above it in this list, never one below.
 *   tools.c            the tools directories, the chain, the state directory
 *   launch.c           how the shim starts a tool of a tree
 *   install_util.c     names, directories, error details, the test pause,
 *                      the sweep of crashed installers' leftovers, the
 *                      join of the requires an install waits for
 *   install_known.c    digests of the files an install wrote
 *   install_proof.c    proof lists shared by every environment
 *   install_audit.c    audit lines, progress reports, lock holders
 *   audit.c            the server's audit events
 *   install_backoff.c  the per-tool lock and the backoff after a failure
 *   install_oci.c      the OCI mirror as a source
 *   install_src.c      artifacts: caches, mirrors, verified downloads
 *   install_npm.c      npm-lock sources: lockfile, packages, SBOM rows
 *   install_trees.c    the cache's extracted trees and recorded verify passes
 *   install_tree.c     markers, tree listings, the fast path
 *   install_probe.c    what is already there (ABX_TOOL_<NAME>, our trees,
 *                      PATH), running commands, the exec and network probes
 *   install_verify.c   verify.argv runs
 *   install_publish.c  one install: staging, extraction, verify, publish
 *   install.c          ensure: resolution order, modes, requires, backoff
 */

#ifndef ABX_VERSION
#define ABX_VERSION "0.0.0-dev"
#endif
/* Who installs: in each marker, and in a recorded verify pass (a later
 * build may run a tool differently, so its pass is its own). */
#define INSTALL_INSTALLER "agent-sandbox-server " ABX_VERSION
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "install/install.h"
#include "pkg/arc.h"
#include "pkg/npm.h"

/* Network probe results are cached this long, per host:port. */
#define INSTALL_PROBE_TTL 60
#define INSTALL_PROBE_CONNECT_MS 2000
/* Staging directories older than this are a crashed installer's. */
#define INSTALL_STAGING_MAX_AGE (60 * 60)
/* Backoff after a failure: 30 s, doubling, at most 10 min. */
#define INSTALL_BACKOFF_MIN 30
#define INSTALL_BACKOFF_MAX 600
/* Output kept from verify.argv for the error message. */
#define INSTALL_VERIFY_OUT_MAX 65536
/* Markers parsed once per environment (see marker_cached in install_tree.c). */
#define INSTALL_MARKER_CACHE 8
struct install_marker;

/*
 * The environment (install.h's struct install_env), by lifetime. One thread
 * uses it at a time; a requires thread gets a clone.
 */
struct install_env {
	/* made once (install_env_new) */
	struct manifest_set *ms;
	const struct config *cfg; /* read, never copied; outlives the environment */
	struct tools_chain chain; /* looked at again by install_env_reuse */
	char platform[16];
	/* resolved cache directory: prepare's --cache, else <writable tools
	 * directory>/.cache ("" = none writable) */
	char cache_dir[PATH_MAX];
	int cache_given;                   /* cache_dir is prepare's --cache */
	int keep_no_trees, drop_downloads; /* install_setup's */
	char self[PATH_MAX];               /* this binary, the target of bin/ links */
	char prefer[PATH_MAX];             /* a tools directory put first (install_env_prefer) */

	/* learnt, kept while its own checks hold: the exec probe */
	time_t exec_probe_at;
	char exec_probe_dir[PATH_MAX];
	struct err exec_probe_err;
	int exec_probe_rc;
	struct http_client *http;           /* created on first download */
	struct install_oci *oci;            /* the OCI mirror's client (install_oci.c), owned */
	struct install_npm_lock *npm_lock;  /* the last lockfile parsed (install_npm.c), owned */
	struct install_marker_slot *mcache; /* INSTALL_MARKER_CACHE slots, owned */

	/* the request in progress (install_call_begin sets it from an
	 * install_req, install_call_end clears it) */
	int building; /* INSTALL_F_BUILD: mode build may install */
	int force;    /* INSTALL_F_FORCE: clear backoff first */
	const struct install_observer *obs;
	const char *principal; /* for audit; NULL = "cli" */
	const char *op;
	int64_t probe_us;          /* ensure's probes, for the next install_one */
	int depth;                 /* requires recursion */
	struct install_reqs *reqs; /* requires ensured beside an install (install.c) */
	int keep_later;            /* a requires thread's: kept trees end after it is ready */
	struct install_keep *kept; /* and those (install_tree_keep_done) */
	/* and what it found: counts for the result, and where the last
	 * artifact install_get_artifact made available came from
	 * ("cache:<path>", the mirror or origin URL, "oci://…@sha256:…"), for
	 * the marker's SBOM row of that sha256 only */
	struct install_counts n;
	char src_sha[65];
	char src[MANIFEST_URL_MAX + 16];
};

/* install_env_new and install_env_free on an environment the caller holds
 * (tests keep one static); install_env_fini releases what it holds. */
int install_env_init(struct install_env *c, struct manifest_set *ms, const struct config *cfg,
                     const char *platform, const char *cache_dir, struct err *e);
void install_env_fini(struct install_env *c);
/* Take rq for the calls that follow (its counts from zero), and leave it:
 * what they counted added to n (NULL: dropped). */
void install_call_begin(struct install_env *c, const struct install_req *rq);
void install_call_end(struct install_env *c, struct install_counts *n);
/* A copy of src in dst for a requires thread (install_env_clone in place). */
int install_env_copy(struct install_env *dst, const struct install_env *src, struct err *e);
void install_env_add_counts(struct install_env *dst, const struct install_env *src);

/* ---- install_util.c -------------------------------------------------------- */

/* mkdir with exactly mode (not narrowed by the umask); an existing
 * directory is fine. 0, or -1 with io.error (e may be NULL). */
int install_mkdir(const char *path, mode_t mode, struct err *e);
void install_sleep_ms(int ms);
/* details {"phase": phase} on e. */
void install_details_phase(struct err *e, const char *phase);
/* Remove what crashed installers left in dir (names starting with prefix,
 * NULL = any) older than INSTALL_STAGING_MAX_AGE. */
void install_collect_stale(const char *dir, const char *prefix);
/* The rule install_collect_stale removes by: name in dfd (st its lstat) is
 * older than INSTALL_STAGING_MAX_AGE at now, or a partial download whose
 * writer is gone. 1 or 0. */
int install_tmp_stale(int dfd, const char *name, const struct stat *st, time_t now);

/* ABX_TEST_PAUSE=phase (the test build only; never when c's configuration
 * is production): announce "install: paused at <phase>" on stderr and sleep
 * 30 s there. Without ABX_TEST_HOOKS it does nothing. */
void install_test_pause(const struct install_env *c, const char *phase);
/* The tree cache's sealing key file: <state dir>/CACHE_KEY_FILE (pkg/cache.h),
 * per user and machine, never inside the cache. 0, or -1 with out "" (no
 * state directory: the tree cache is then not used). */
int install_cache_key(const struct install_env *c, char *out, size_t cap);

/*
 * A tool's requires, ensured beside its install by install.c: on a thread
 * of their own with a clone of the environment (sub) while the tool is staged.
 */
struct install_reqs {
	struct install_env sub;
	const manifest_t *m;
	unsigned flags;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int running, ready, counted, rc; /* ready: under mu */
	struct err e;
	char details[ERR_DETAILS_MAX]; /* e's */
};
/* Wait for the requires ensure() started beside the install of the tool
 * (none: at once; *wait_us, unless NULL, the time waited when there were):
 * 0, or -1 with e their failure ("X requires Y: ..."). */
int install_requires_join(struct install_env *c, int64_t *wait_us, struct err *e);

/* ---- install_known.c ------------------------------------------------------ */

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

/* ---- install_proof.c ------------------------------------------------------ */

/*
 * The process-wide cache of proof lists (install_proof.c), shared by every
 * environment of a process (serve keeps several, one per busy worker, and a
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

/* ---- install_audit.c ------------------------------------------------------ */

/* Optional members of an audit line. */
struct install_audit_extra {
	int ok;              /* -1 absent, 0, 1 */
	int64_t duration_ms; /* -1 absent */
	int64_t bytes;       /* -1 absent */
	const char *code, *artifact_sha256, *tree_sha256, *url, *sha256;
	const struct install_npm_info *npm; /* npm-lock: lockfile digest, packages */
};
/* One audit line for m: ts, event, tool, version, platform, principal, op,
 * pid and x's members. */
void install_audit_event(struct install_env *c, const char *event, const manifest_t *m,
                         const struct install_audit_extra *x);

/* One install's progress, reported to the request's observer and written
 * to <tools>/<name>/.progress.json for waiters in other processes. */
struct install_progress_state {
	struct install_env *c;
	const manifest_t *m;
	char path[PATH_MAX]; /* <w>/<name>/.progress.json, "" = none */
	char phase[16];
	time_t started;
	int64_t last_ms;
	uint64_t base;               /* bytes of earlier artifacts */
	struct install_progress cur; /* what is reported (install.h) */
	install_progress_fn fn;      /* the observer's own, while npm reports through us */
	void *arg;
	int64_t *cpu; /* the job's CPU (enum install_cpu), or NULL */
};
/* Report p->cur in phase (at most every 200 ms unless force or the phase
 * changed). */
void install_progress_write(struct install_progress_state *p, const char *phase, int force);

/* Whether an installer holds name's lock in tools directory w
 * (<w>/.locks/<name>.lock, flock). A lock is released when its holder
 * dies however it dies (kill -9, Ctrl-C), so a free one means what an
 * installer left there (its progress, its staging) is dead. 1 held, 0
 * free, -1 no lock file (no installer of this directory made what is
 * there). Costs one open and one or two flock calls. */
int install_lock_held(const char *w, const char *name);

/* Append one audit line (a JSON object text without newline). Never fails
 * the caller: an unwritable audit file is reported once on stderr. */
void install_audit(const struct config *cfg, const char *json_object);

/* ---- install_backoff.c ----------------------------------------------------- */

/* flock <w>/.locks/<name>.lock, waiting at most the install timeout (and
 * passing on the installer's progress). The descriptor, or -1 with e. */
int install_lock_tool(struct install_env *c, const char *w, const manifest_t *m, struct err *e);
/* One more failure of name (why) in the writable directory's backoff. */
void install_backoff_record(struct install_env *c, const char *name, const struct err *why);

/* ---- install_oci.c ------------------------------------------------------- */

/* The OCI mirror's client of c (made on first use; NULL
 * with e: oci.url, oci.auth, http.proxy), freed by install_env_fini; the
 * URL a network probe tries for it ("https://host[:port]/v2/"): 1, or 0
 * without a mirror. */
struct oci_client;
struct oci_client *install_oci_client(struct install_env *c, struct err *e);
int install_oci_probe_url(const struct install_env *c, char *url, size_t cap);

/* The OCI mirror's client and its credential (install_oci.c). */
void install_oci_free(struct install_env *c);
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
int install_oci_npm(struct install_env *c, const manifest_t *m, const struct npmlock *l, const char *cache,
                    struct npm_opts *no, struct err *e);
void install_oci_npm_end(struct install_env *c, struct npm_opts *no);

/* ---- install_src.c --------------------------------------------------------- */

/* A mirror entry as a local directory ("/dir" or "file:///dir"), or NULL. */
const char *install_mirror_dir(const char *mirror);

/* A file named sha in a cache or mirror directory (not hashed: for the
 * network probe's decision). */
int install_maybe_local(struct install_env *c, const char *sha);
/* A mirror URL template expanded for url into out, its host into mhost. */
int install_mirror_url(const char *tmpl, const char *url, char *out, size_t cap, char *mhost, size_t mcap);
/*
 * Extraction while downloading (install_get_artifact): run extracts the
 * archive whose bytes read gives (arc_extract_read) on a thread of its own,
 * started with each download and joined once the download ended; reset
 * discards what it staged (a failed attempt, before the next). done is set
 * once the artifact was extracted this way and its digest matched; tail_us
 * is how long the extraction went on after the download's last byte.
 */
struct install_stream {
	int (*run)(void *arg, arc_read_fn read, void *rctx, struct err *e);
	void (*reset)(void *arg);
	void *arg;
	int done;
	int64_t tail_us;
	uint64_t bytes; /* the download's size, when no blob was written */
};
/* A verified copy of artifact a: local caches and mirror directories, then
 * (unless offline) mirror URLs and the original, downloaded into dl_dir,
 * and extracted as it arrives when xs is not NULL (a copy found locally is
 * not: xs->done stays 0). 0 (path, got_sha, and *fdp the descriptor its
 * bytes were hashed through, for the caller to extract from and close: the
 * name path may meanwhile hold other bytes) or -1 with e (*fdp -1). With
 * c->drop_downloads a download extracted as it arrived writes no blob:
 * xs->done, path "", *fdp -1 and xs->bytes its size. */
int install_get_artifact(struct install_env *c, const manifest_t *m, const struct manifest_artifact *a,
                         const char *dl_dir, struct install_progress_state *ps, struct install_stream *xs,
                         int *fdp, char *path, size_t cap, char *got_sha, struct err *e);
/* Turn a fetch failure with the client's code (http.*, tls.*) into
 * install.failed, details {"phase":"fetch","code":<that code>[,"url":…]}, the
 * code and msg (e->msg may be passed) kept in the message. */
void install_fetch_failed(struct err *e, const manifest_t *m, const char *url, const char *msg);
#ifdef ABX_TEST
/* Tests: called with the artifact's path once it was hashed, before it is
 * extracted (a test renames other bytes over it there). */
extern void (*install_test_hashed_fn)(const char *path);
#define install_test_hashed(path)                                                                            \
	do {                                                                                                 \
		if (install_test_hashed_fn != NULL)                                                          \
			install_test_hashed_fn(path);                                                        \
	} while (0)
#else
#define install_test_hashed(path) ((void)(path))
#endif

/* ---- install_npm.c -------------------------------------------------------- */

/*
 * npm-lock sources (core/install/install_npm.c): install_npm_stage fetches, verifies
 * and extracts the lockfile's packages for c->platform into tree and links
 * the root package's bins; install_npm_fetch only fills the cache, for
 * platform ("linux-x64", "linux-arm64" or "all"). Both return 0 or -1 with e
 * (install.checksum_mismatch, install.disabled in offline mode with the
 * missing integrities, install.failed with details.phase, http.*, tls.*).
 */
struct install_known;
int install_npm_stage(struct install_env *c, const manifest_t *m, const char *tree,
                      struct install_known *known, struct install_npm_info *info, struct err *e);
/* One SBOM row per installed npm package (name, version, purl, path,
 * integrity, sha256 when the cache knows it, url) into the marker's array. */
struct json_w;
void install_npm_sbom(struct install_env *c, const manifest_t *m, struct json_w *w);
/* Release the lockfile parse the environment keeps (install_env_fini does). */
void install_npm_lock_free(struct install_env *c);
/* npm-lock: the URL of the first package of m's lockfile (for c->platform)
 * that is not in the cache, through the npm mirror when one is set, into
 * url. Returns 1, 0 when every package is cached (no network needed) or the
 * lockfile does not load (the install reports that). */
int install_npm_probe_url(struct install_env *c, const manifest_t *m, char *url, size_t cap);
/* The integrity digest of every package m's lockfile pins, for every
 * platform (inside a parent's tarball: none): fn(arg, digest). 0, or -1
 * with e (the lockfile did not load). */
int install_npm_digests(struct install_env *c, const manifest_t *m,
                        void (*fn)(void *arg, const struct digest *d), void *arg, struct err *e);

/* ---- install_trees.c ------------------------------------------------------ */

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
int install_tree_place(struct install_env *c, const manifest_t *m, const struct manifest_artifact *a,
                       const char *staging, struct install_known *known, uint64_t *asize, struct err *e);
struct install_keep *install_tree_keep_begin(struct install_env *c, const manifest_t *m,
                                             const struct manifest_artifact *a, struct install_known *known,
                                             struct arc_opts *ao);
void install_tree_keep(struct install_env *c, const manifest_t *m, const struct manifest_artifact *a,
                       const char *tree, uint64_t asize, const struct install_known *known,
                       struct install_keep *k);
void install_tree_keep_end(struct install_keep *k);
void install_tree_keep_done(struct install_env *c, struct install_keep *k);
void install_tree_keeps_end(struct install_env *c);
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
int install_verified_get(struct install_env *c, const manifest_t *m, const char *ident, char tree[65],
                         char *at, size_t atcap);
void install_verified_put(struct install_env *c, const manifest_t *m, const char *ident, const char *tree);

/* ---- install_tree.c -------------------------------------------------------- */

/*
 * The fast path alone: is name installed, with its current
 * manifest, in a trusted tree, in any directory of the chain? No lock, no
 * write. Returns 1 (r filled), 0 (not ready), -1 (e set: manifest error).
 */
int install_fast_path(struct install_env *c, const manifest_t *m, struct install_result *r, struct err *e);

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

/* <w>/<name>/.installed.json for the tree just published (a: the
 * artifact, NULL for npm-lock; the listing's and the proof list's digests;
 * the tree's counts). 0 or -1 with e. */
int install_marker_write(struct install_env *c, const char *w, const manifest_t *m, const char *treename,
                         const struct manifest_artifact *a, const char *sha, uint64_t size,
                         const char *tree_sha, const char *proof_sha, uint64_t files, uint64_t bytes,
                         struct err *e);

/* ---- install_probe.c ------------------------------------------------------- */

/* ABX_TOOL_<NAME>, and a copy on PATH (at least min and the manifest's
 * path.min): 1 ready (r filled), 0 not. */
int install_env_tool(struct install_env *c, const manifest_t *m, struct install_result *r);
int install_path_tool(struct install_env *c, const manifest_t *m, const char *min, struct install_result *r);
/* m ready without installing it, in the resolution order ABX_TOOL_<NAME>,
 * the tools chain (the fast path), PATH (at least min; only when use_path
 * and the configuration's install.use_path): 1 (r filled), 0 not. */
int install_found(struct install_env *c, const manifest_t *m, const char *min, int use_path,
                  struct install_result *r, struct err *e);
/* a's words with {bin} = bin into buf, pointed to by argv (NULL-ended). */
void install_subst_bin(const struct manifest_argv *a, const char *bin,
                       char buf[][MANIFEST_ARG_MAX + PATH_MAX], char **argv);
/* Can staging_root hold executables? Cached per environment for
 * INSTALL_PROBE_TTL. 0, or -1 with e (install.noexec, io.error). */
int install_exec_probe(struct install_env *c, const char *staging_root, struct err *e);

/* The network probe, made before anything is downloaded: a TCP connect (INSTALL_PROBE_CONNECT_MS)
 * to url's host (or the HTTPS proxy), cached per process for
 * INSTALL_PROBE_TTL seconds per host:port. Returns 0, or -1 with
 * install.network_unreachable: the host, details {phase: "probe", host,
 * hint} and the mirror or offline hint for m's source type (m may be NULL). */
int install_net_probe(struct install_env *c, const manifest_t *m, const char *url, struct err *e);
/* TCP connects the probe made in this process (tests), and a reset of its
 * cache (tests). */
unsigned long install_probe_connects(void);
void install_probe_cache_clear(void);

/* Version of a copy on PATH: run argv (m->path.argv with {bin} = path),
 * 5 s timeout, and take the first dotted number of its output into ver.
 * Returns 0 or -1. */
int install_probe_version(const manifest_t *m, const char *bin, char *ver, size_t cap);

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

/* ---- install_verify.c ---------------------------------------------------- */

/* One verify run: its PATH and argv, and its identity for a recorded pass
 * (install_verified_get): what ran it besides the tree. */
struct verify_run {
	char path[8192];
	char words[MANIFEST_MAX_ARGV][MANIFEST_ARG_MAX + PATH_MAX];
	char *argv[MANIFEST_MAX_ARGV + NPM_NODE_FLAGS_MAX + 2], *rest[MANIFEST_MAX_ARGV + 1];
	char shebang[512], node[PATH_MAX], *flags[NPM_NODE_FLAGS_MAX];
	int nflags;
	char ident[4096]; /* "" when a require is not one of our trees */
	int no_ident;
	char with[400]; /* " with node-runtime 22.23.5" for messages */
};
/* Fill v for the entry of m (a path in the tree): PATH, argv, identity. */
void install_verify_setup(struct install_env *c, const manifest_t *m, const char *entry,
                          struct verify_run *v);
/* Run v with HOME home: 0 when it exits 0 within the manifest's timeout
 * with its expect in the output, -1 with e (install.failed, phase verify). */
int install_verify_run(const manifest_t *m, struct verify_run *v, const char *home, struct err *e);

/* ---- install_publish.c ----------------------------------------------------- */

/* A full disk (e->sys ENOSPC or EDQUOT) or a missing CA bundle (the code or
 * the code it wraps tls.no_trust_anchors), wherever in the install it
 * struck, becomes that code, with its own remedy; any other e is left. */
void install_specific_code(struct err *e);

/* Remove the staging directories (<w>/.staging/<tool>-<random>) whose
 * tool's lock nobody holds: an installer that died left them. own is the
 * tool whose lock the caller holds: its directories are dead as well. */
void install_collect_abandoned(const char *w, const char *own);
/* Stage, fetch, extract, verify and publish one tool, holding its lock in writable directory w. */
int install_one(struct install_env *c, const manifest_t *m, const char *w, struct install_result *r,
                struct err *e);

#endif
