#ifndef ABX_INSTALL_INT_H
#define ABX_INSTALL_INT_H

/*
 * What the files of the install engine share and nothing else uses (the
 * API is core/install/install.h):
 *   install.c          ensure: resolution order, modes, requires, the steps
 *   install_audit.c    audit lines and progress reports
 *   install_tree.c     markers, tree listings, the fast path
 *   install_probe.c    ABX_TOOL_<NAME>, PATH and version probes, running
 *                      commands, the exec and network probes
 *   install_backoff.c  the per-tool lock and the backoff after a failure
 *   install_src.c      artifacts: caches, mirrors, verified downloads
 *   install_publish.c  staging, extraction, verify, publish
 *   install_sync.c     the staged tree made durable (syncfs)
 *   install_known.c, install_proof.c, install_npm.c: see install.h
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

/* Every path built by the engine starts from a tools directory no longer
 * than TOOLS_DIR_MAX (tools.c refuses longer ones), so its PATH_MAX buffers
 * cannot truncate; GCC cannot see that bound. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

/* ---- install.c: small helpers -------------------------------------------- */

/* mkdir with exactly mode (not narrowed by the umask); an existing
 * directory is fine. 0, or -1 with io.error (e may be NULL). */
int install_mkdir(const char *path, mode_t mode, struct err *e);
void install_sleep_ms(int ms);
/* details {"phase": phase} on e. */
void install_details_phase(struct err *e, const char *phase);
/* ensure() with a minimum version for a require (NULL = none). */
int install_ensure_inner(struct install_ctx *c, const char *name, const char *min, unsigned flags,
                         struct install_result *r, struct err *e);
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
/* a's words with {bin} = bin into buf, pointed to by argv (NULL-ended). */
void install_subst_bin(const struct manifest_argv *a, const char *bin,
                       char buf[][MANIFEST_ARG_MAX + PATH_MAX], char **argv);
/* Can staging_root hold executables? Cached per context for
 * INSTALL_PROBE_TTL. 0, or -1 with e (install.noexec, io.error). */
int install_exec_probe(struct install_ctx *c, const char *staging_root, struct err *e);

/* ---- install_backoff.c ----------------------------------------------------- */

/* flock <w>/.locks/<name>.lock, waiting at most the install timeout (and
 * passing on the installer's progress). The descriptor, or -1 with e. */
int install_lock_tool(struct install_ctx *c, const char *w, const manifest_t *m, struct err *e);
/* One more failure of name (why) in the writable directory's backoff. */
void install_backoff_record(struct install_ctx *c, const char *name, const struct err *why);

/* ---- install_src.c --------------------------------------------------------- */

/* A mirror entry as a local directory ("/dir" or "file:///dir"), or NULL. */
const char *install_mirror_dir(const char *mirror);

/* install_oci.c: the OCI mirror's client of c (made on first use; NULL
 * with e: oci.url, oci.auth, http.proxy), freed by install_ctx_free; the
 * URL a network probe tries for it ("https://host[:port]/v2/"): 1, or 0
 * without a mirror. */
struct oci_client;
struct oci_client *install_oci_client(struct install_ctx *c, struct err *e);
int install_oci_probe_url(const struct install_ctx *c, char *url, size_t cap);
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

/* ---- install_publish.c ----------------------------------------------------- */

/* Remove what crashed installers left in dir (names starting with prefix,
 * NULL = any) older than INSTALL_STAGING_MAX_AGE. */
void install_collect_stale(const char *dir, const char *prefix);
/* Remove the staging directories (<w>/.staging/<tool>-<random>) whose
 * tool's lock nobody holds: an installer that died left them. own is the
 * tool whose lock the caller holds: its directories are dead as well. */
void install_collect_abandoned(const char *w, const char *own);
/* Stage, fetch, extract, verify and publish one tool, holding its lock in writable directory w. */
int install_one(struct install_ctx *c, const manifest_t *m, const char *w, struct install_result *r,
                struct err *e);

/* ---- install_sync.c: the staged tree made durable ------------------------- */

/*
 * syncfs of the staged tree on a thread of its own, so the disk writes run
 * while the tree is listed and hashed (which reads what the page cache
 * already holds); bg_sync_wait is called before the tree is renamed into
 * place, so the content still reaches the disk before the name does. With
 * no thread the wait does the syncfs itself. It finds little left to write:
 * every writer of a staged file (and of the cache's downloads and kept
 * trees beside it) started that file's writeback once it was written
 * (fs_writeback_start; an extracted file only from ARC_WRITEBACK_MIN on:
 * the small ones go in the syncfs's merged requests), so the disk wrote
 * while the rest was staged; the
 * kernel would start none before vm.dirty_background_ratio (gigabytes on
 * a large machine) or 30 s. Only our files: another process writing to
 * the same filesystem is no longer written back at our pace (a syncfs
 * every 100 ms while staging did that). What it has left unwritten when
 * this syncfs runs is written too (a syncfs cannot leave it out), so
 * beside a heavy writer publish/sync waits for that backlog once. Tried
 * and dropped: an fsync per file (a disk flush each: ~5 s for 2,700 files
 * here), and sync_file_range of each file only once the tree was complete
 * (only the verify run was left to overlap).
 */
struct bg_sync {
	pthread_t th;
	int fd, started;
};
void install_bg_sync_start(struct bg_sync *s, const char *dir);
void install_bg_sync_wait(struct bg_sync *s);

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

#endif
