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
 *   install_proof.c    proof lists shared by every context
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

/*
 * A tool's requires, ensured beside its install by install.c: on a thread
 * of their own with a clone of the context (sub) while the tool is staged.
 */
struct install_reqs {
	struct install_ctx sub;
	const manifest_t *m;
	unsigned flags;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int running, ready, counted, rc; /* ready: under mu */
	struct err e;
};
/* Wait for the requires ensure() started beside the install of the tool
 * (none: at once; *wait_us, unless NULL, the time waited when there were):
 * 0, or -1 with e their failure ("X requires Y: ..."). */
int install_requires_join(struct install_ctx *c, int64_t *wait_us, struct err *e);

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
void install_audit_event(struct install_ctx *c, const char *event, const manifest_t *m,
                         const struct install_audit_extra *x);

/* One install's progress, reported to the context's callback and written
 * to <tools>/<name>/.progress.json for waiters in other processes. */
struct install_progress_state {
	struct install_ctx *c;
	const manifest_t *m;
	char path[PATH_MAX]; /* <w>/<name>/.progress.json, "" = none */
	char phase[16];
	time_t started;
	int64_t last_ms;
	uint64_t base;               /* bytes of earlier artifacts */
	struct install_progress cur; /* what is reported (install.h) */
	install_progress_fn fn;      /* the context's own, while npm reports through us */
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

/* ---- install_backoff.c ----------------------------------------------------- */

/* flock <w>/.locks/<name>.lock, waiting at most the install timeout (and
 * passing on the installer's progress). The descriptor, or -1 with e. */
int install_lock_tool(struct install_ctx *c, const char *w, const manifest_t *m, struct err *e);
/* One more failure of name (why) in the writable directory's backoff. */
void install_backoff_record(struct install_ctx *c, const char *name, const struct err *why);

/* ---- install_oci.c ------------------------------------------------------- */

/* The OCI mirror's client of c (made on first use; NULL
 * with e: oci.url, oci.auth, http.proxy), freed by install_ctx_free; the
 * URL a network probe tries for it ("https://host[:port]/v2/"): 1, or 0
 * without a mirror. */
struct oci_client;
struct oci_client *install_oci_client(struct install_ctx *c, struct err *e);
int install_oci_probe_url(const struct install_ctx *c, char *url, size_t cap);

/* ---- install_src.c --------------------------------------------------------- */

/* A mirror entry as a local directory ("/dir" or "file:///dir"), or NULL. */
const char *install_mirror_dir(const char *mirror);

/* A file named sha in a cache or mirror directory (not hashed: for the
 * network probe's decision). */
int install_maybe_local(struct install_ctx *c, const char *sha);
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
int install_get_artifact(struct install_ctx *c, const manifest_t *m, const struct manifest_artifact *a,
                         const char *dl_dir, struct install_progress_state *ps, struct install_stream *xs,
                         int *fdp, char *path, size_t cap, char *got_sha, struct err *e);
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

/* ---- install_tree.c -------------------------------------------------------- */

/* <w>/<name>/.installed.json for the tree just published (a: the
 * artifact, NULL for npm-lock; the listing's and the proof list's digests;
 * the tree's counts). 0 or -1 with e. */
int install_marker_write(struct install_ctx *c, const char *w, const manifest_t *m, const char *treename,
                         const struct manifest_artifact *a, const char *sha, uint64_t size,
                         const char *tree_sha, const char *proof_sha, uint64_t files, uint64_t bytes,
                         struct err *e);

/* ---- install_probe.c ------------------------------------------------------- */

/* ABX_TOOL_<NAME>, and a copy on PATH (at least min and the manifest's
 * path.min): 1 ready (r filled), 0 not. */
int install_env_tool(struct install_ctx *c, const manifest_t *m, struct install_result *r);
int install_path_tool(struct install_ctx *c, const manifest_t *m, const char *min, struct install_result *r);
/* m ready without installing it, in the resolution order ABX_TOOL_<NAME>,
 * the tools chain (the fast path), PATH (at least min; only when use_path
 * and the configuration's install.use_path): 1 (r filled), 0 not. */
int install_found(struct install_ctx *c, const manifest_t *m, const char *min, int use_path,
                  struct install_result *r, struct err *e);
/* a's words with {bin} = bin into buf, pointed to by argv (NULL-ended). */
void install_subst_bin(const struct manifest_argv *a, const char *bin,
                       char buf[][MANIFEST_ARG_MAX + PATH_MAX], char **argv);
/* Can staging_root hold executables? Cached per context for
 * INSTALL_PROBE_TTL. 0, or -1 with e (install.noexec, io.error). */
int install_exec_probe(struct install_ctx *c, const char *staging_root, struct err *e);

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
void install_verify_setup(struct install_ctx *c, const manifest_t *m, const char *entry,
                          struct verify_run *v);
/* Run v with HOME home: 0 when it exits 0 within the manifest's timeout
 * with its expect in the output, -1 with e (install.failed, phase verify). */
int install_verify_run(const manifest_t *m, struct verify_run *v, const char *home, struct err *e);

/* ---- install_publish.c ----------------------------------------------------- */

/* Remove the staging directories (<w>/.staging/<tool>-<random>) whose
 * tool's lock nobody holds: an installer that died left them. own is the
 * tool whose lock the caller holds: its directories are dead as well. */
void install_collect_abandoned(const char *w, const char *own);
/* Stage, fetch, extract, verify and publish one tool, holding its lock in writable directory w. */
int install_one(struct install_ctx *c, const manifest_t *m, const char *w, struct install_result *r,
                struct err *e);

#endif
