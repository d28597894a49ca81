#ifndef ABX_APPLETS_LOCK_H
#define ABX_APPLETS_LOCK_H
/*
 * lock's private interface: the manifest text being edited and the helpers
 * both sources use (applets/lock_doc.c), and the npm-lock side
 * (applets/lock_npm.c) that applets/lock.c calls.
 */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "base/err.h"
#include "net/http.h"
#include "base/json.h"

/* Edits of one manifest: a version, a few URLs, pins, expect, min. */
#define LOCK_EDITS_MAX 32
/* Hosts a manifest lists (a tool has one or two). */
#define LOCK_HOSTS_MAX 16
/* "embedded:" + a path under manifests/: the files built into this binary
 * (lock --check without a source checkout). */
#define LOCK_EMBEDDED "embedded:"

struct edit {
	size_t start, end; /* replace text[start, end) */
	char *with;        /* owned */
};

struct doc {
	char path[PATH_MAX];
	char *text;
	size_t len;
	struct json_doc j;
	size_t *lines; /* offset of each line start */
	size_t nlines;
	struct edit ed[LOCK_EDITS_MAX];
	int ned;
};

struct hosts {
	const char *h[LOCK_HOSTS_MAX];
	size_t n;
};

/* A manifest is a few KiB (core/pkg/manifest.h allows 256 KiB). */
#define LOCK_MANIFEST_MAX (256u << 10)
/* Largest artifact lock downloads (Node.js is ~50 MiB). */
#define LOCK_DOWNLOAD_MAX (2LL << 30)

/* -q: lock_say prints nothing. */
extern int lock_quiet;

/* A progress line on stdout, unless -q. */
void lock_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* path's text into d, its lines indexed, parsed. 0 or -1 with e; d is
 * freed with lock_doc_free either way. */
int lock_doc_load(struct doc *d, const char *path, struct err *e);
void lock_doc_free(struct doc *d);
/* The text with every edit applied (malloc'd), or NULL. */
char *lock_doc_render(struct doc *d, size_t *outlen);
/* Replace text[start, end) by with (copied). 0 or -1 with e. */
int lock_edit(struct doc *d, size_t start, size_t end, const char *with, struct err *e);
/* Replace string value v by s (JSON-escaped here). 0 or -1 with e. */
int lock_set_string(struct doc *d, const struct json_val *v, const char *s, struct err *e);
/* Insert `, "key": "value"` after string value after (same indentation as
 * the line that holds it). 0 or -1 with e. */
int lock_insert_after(struct doc *d, const struct json_val *after, const char *key, const char *value,
                      struct err *e);
/* s with every occurrence of from replaced by to, into out. 0, or -1 when
 * it does not fit. */
int lock_replace_all(const char *s, const char *from, const char *to, char *out, size_t cap);

/* path (or LOCK_EMBEDDED + a name) into *out (malloc'd, NUL-terminated)
 * when at most max bytes. Returns 0 or -1 with e. */
int lock_read_file(const char *path, size_t max, char **out, size_t *len, struct err *e);
/* buf to path through a temporary file, fsync and rename. 0 or -1 with e. */
int lock_write_atomic(const char *path, const char *buf, size_t n, struct err *e);
/* The directories above path (mode 0755). 0 or -1 (errno). */
int lock_mkdir_parents(const char *path);

/* The manifest's $.hosts into h (views into d). 0 or -1 with e. */
int lock_load_hosts(const struct doc *d, struct hosts *h, struct err *e);
/* GET url (redirects checked against h; headers, a NULL-terminated list or
 * NULL, sent too and dropped by the client on a redirect to another
 * origin), its body to sink within max bytes; *status (when not NULL) the
 * final HTTP status, 0 when none came. Returns 0 or -1 with e. */
int lock_get(struct http_client *hc, const char *url, struct hosts *h, const char *const *headers,
             http_sink sink, void *sink_arg, uint64_t max, int *status, struct err *e);
/* The edits that follow a version change old -> new: version,
 * verify.expect, path.min. 0 or -1 with e. */
int lock_edit_version(struct doc *d, const char *old, const char *new, struct err *e);

/*
 * Download url (redirects checked against h) into an unlinked temporary
 * file in TMPDIR, its sha256 into hex (when not NULL), and extract it as an
 * install would (npm: an npm tarball; else the format its name says, strip
 * leading components) into a scratch directory removed after: *bytes is
 * what its regular files hold. 0, or -1 with e (a download that fails, an
 * archive the installer would refuse).
 */
int lock_measure(struct http_client *hc, const char *url, struct hosts *h, int npm, int strip, char *hex,
                 uint64_t *bytes, struct err *e);
/* $.unpacked_size set to {plat[i]: bytes[i]} (n of them): its value
 * replaced, or a new last member of the root. 0 or -1 with e. */
int lock_set_unpacked(struct doc *d, const char plat[][16], const uint64_t *bytes, int n, struct err *e);

/* What lock_npm_sizes measures: a lockfile of package and the bin template
 * of its manifest, for platforms (none: linux-x64 and linux-arm64). */
struct lock_npm_sizes {
	const char *file; /* the manifest, for messages */
	const char *text; /* the lockfile */
	size_t len;
	const char *package, *bin;
	struct hosts *h;
	struct http_client *hc;
	const char *platforms[4];
	int nplatforms;
};
/* Each platform's largest tree (over glibc and musl, and CPU levels when
 * the bin has {baseline}): every package npmlock selects for it, measured
 * by lock_measure (each URL once), into plat/bytes (*n of them, at most 2).
 * A platform the lockfile has no build for is left out. 0 or -1 with e. */
int lock_npm_sizes(const struct lock_npm_sizes *z, char plat[][16], uint64_t *bytes, int *n, struct err *e);

/*
 * An npm-lock source: produce (or, with check, verify) the lockfile and
 * package.json beside the manifest in dir for version want ("latest" and
 * ranges resolved by npm). *stale is set when check finds a newer version
 * or a lockfile that no longer loads; check asks cfg's install.mirrors.npm
 * (with its credential, config_npm_auth), when set, for the latest version.
 * Unless check, each platform's unpacked size is recorded (lock_npm_sizes);
 * check | LOCK_NPM_SIZES records only that, from the lockfile beside the
 * manifest, resolving nothing. Returns 0 or -1 with e.
 */
#define LOCK_NPM_SIZES 2
struct config;
int lock_npm(struct doc *d, const char *dir, const struct config *cfg, const char *old, const char *want,
             int check, int *stale, struct err *e);

#endif
