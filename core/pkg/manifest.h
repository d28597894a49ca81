#ifndef ABX_MANIFEST_H
#define ABX_MANIFEST_H
/*
 * Tool manifests, schema 1. A manifest is a JSON file
 * describing one tool: what to download (pinned), where it may come from,
 * how to check it, which other tools it needs.
 *
 * Sources of manifests, later wins: the files of manifests/ embedded at build
 * time (core/pkg/manifests_embed.h; *.unpinned.json is not embedded), then the
 * *.json files at the top of a manifests directory (--manifests DIR,
 * ABX_MANIFESTS_DIR, later the configuration key manifests_dir). A file is
 * named after its tool: "<name>.json" (or "<name>.unpinned.json", read from a
 * directory only when unpinned installs are allowed).
 *
 * Every refusal is install.manifest_invalid with a message that names the
 * file and the JSON path ("manifests/node-runtime.json: $.source.platforms.linux-x64.
 * sha256: not 64 hex digits"); a file that is not JSON keeps the json.* code
 * (with line:col) so "not JSON" reads apart from "not a valid manifest".
 *
 * Memory: a manifest_t is a plain value with fixed-size fields (limits
 * below), so it can be copied; it owns no memory.
 */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/err.h"
#include "base/json.h"

/* A manifest is a few KiB; 256 KiB is far above any real one and keeps a
 * hostile file from costing memory. */
#define MANIFEST_MAX_BYTES (256u << 10)
/* Tool names and binary names: [a-z0-9][a-z0-9._-]*, short enough for a
 * file name with suffixes and an environment variable name. */
#define MANIFEST_NAME_MAX 64
#define MANIFEST_VERSION_MAX 64
#define MANIFEST_DESC_MAX 256
/* Paths inside a tree or beside the manifest (bin, lock, package_json). */
#define MANIFEST_RELPATH_MAX 256
/* An npm package name is at most 214 bytes. */
#define MANIFEST_PACKAGE_MAX 215
/* Artifact URLs: real ones are < 300 bytes; matches HTTP_URL_MAX. */
#define MANIFEST_URL_MAX 2048
#define MANIFEST_HOST_MAX 256
/* Real tools need one or two of each; the caps bound the tables. */
#define MANIFEST_MAX_REQUIRES 8
#define MANIFEST_MAX_HOSTS 8
#define MANIFEST_MAX_PLATFORMS 4
/* argv templates (verify, path, run): a handful of words each. */
#define MANIFEST_MAX_ARGV 16
#define MANIFEST_ARG_MAX 256
/* The longest dialect name, "claude-code", and its NUL. */
#define MANIFEST_DIALECT_MAX 12
/* requires chains: node-runtime <- codex is depth 2; 16 is generous and
 * bounds the recursion of the cycle check. */
#define MANIFEST_MAX_DEPTH 16
/* Manifests in one set (embedded + directory). */
#define MANIFEST_SET_MAX 128
#define MANIFEST_SHA256_HEX 65
/* Shared libraries beyond the C library a tool needs (node: two). */
#define MANIFEST_MAX_LIBS 8
/* Environment variables a tool's launcher sets (codex.js sets two). */
#define MANIFEST_MAX_ENV 8
/* Variables a verify run adds to its scrubbed environment (gemini: one). */
#define MANIFEST_MAX_VERIFY_ENV 8
/* The largest unpacked_size accepted: 1 TiB, far above any tool, and small
 * enough that the free-space check's sums cannot overflow. */
#define MANIFEST_UNPACKED_MAX (1ull << 40)

/* The C libraries whose program interpreter a tool's native code can use
 * (manifest key "libc"); 0 = it needs none (static, or a script run by
 * another tool). */
#define MANIFEST_LIBC_GLIBC 1u
#define MANIFEST_LIBC_MUSL 2u

/* The platforms we build for; a manifest naming another is refused. */
#define MANIFEST_PLATFORM_X64 "linux-x64"
#define MANIFEST_PLATFORM_ARM64 "linux-arm64"

enum manifest_source_type {
	MANIFEST_SRC_TARBALL = 1,
	MANIFEST_SRC_NPM_LOCK = 2,
};

struct manifest_artifact {
	char platform[16];
	char url[MANIFEST_URL_MAX];
	char sha256[MANIFEST_SHA256_HEX]; /* "" when unpinned */
};

struct manifest_require {
	char name[MANIFEST_NAME_MAX];
	char min[MANIFEST_VERSION_MAX]; /* "" = any version */
};

/* One variable of the manifest's "env": set to value ("{tree}" is the
 * installed tree), or removed (unset). */
struct manifest_envvar {
	char name[MANIFEST_NAME_MAX];
	char value[MANIFEST_ARG_MAX];
	int unset;
};

struct manifest_argv {
	char v[MANIFEST_MAX_ARGV][MANIFEST_ARG_MAX];
	int n; /* 0 = absent */
};

typedef struct manifest {
	char name[MANIFEST_NAME_MAX];
	char binary[MANIFEST_NAME_MAX];
	char version[MANIFEST_VERSION_MAX];
	char description[MANIFEST_DESC_MAX];
	struct manifest_require requires[MANIFEST_MAX_REQUIRES];
	int nrequires;
	char hosts[MANIFEST_MAX_HOSTS][MANIFEST_HOST_MAX];
	int nhosts;
	char platforms[MANIFEST_MAX_PLATFORMS][16];
	int nplatforms;
	long size_hint_mb; /* 0 when absent */
	/* "unpacked_size": the bytes of regular files the largest tree of
	 * each platform holds (over C libraries and CPU levels), as `lock`
	 * measured them by extracting what it pinned; 0 when not recorded. */
	struct {
		char platform[16];
		uint64_t bytes;
	} unpacked[MANIFEST_MAX_PLATFORMS];
	int nunpacked;

	struct {
		enum manifest_source_type type;
		char bin[MANIFEST_RELPATH_MAX]; /* entry inside the tree */
		/* tarball */
		int strip_components;
		struct manifest_artifact art[MANIFEST_MAX_PLATFORMS];
		int nart;
		/* npm-lock */
		char package[MANIFEST_PACKAGE_MAX];
		char lock[MANIFEST_RELPATH_MAX];
		char package_json[MANIFEST_RELPATH_MAX];
		char lock_sha256[MANIFEST_SHA256_HEX]; /* of the lockfile bytes */
		int cpu_levels; /* bin names {baseline}: the vendor ships x86-64-v3 and baseline builds */
	} source;

	struct {
		struct manifest_argv argv;
		char expect[MANIFEST_ARG_MAX];
		int timeout; /* seconds; default MANIFEST_VERIFY_TIMEOUT */
		/* "env": NAME=value added to the run's PATH, HOME, LANG, LC_ALL
		 * (literal values; unset is never set) */
		struct manifest_envvar env[MANIFEST_MAX_VERIFY_ENV];
		int nenv;
	} verify;
	struct {
		struct manifest_argv argv; /* n == 0: a copy on PATH is never used */
		char min[MANIFEST_VERSION_MAX];
	} path;
	struct manifest_argv run;
	/* run.extra: words every turn of a conversation passes after the
	 * dialect's own (core/server/dialect.h): the agent's non-interactive
	 * permission options; n == 0 when none. */
	struct manifest_argv run_extra;
	/* run.dialect: what the agent prints in its JSON mode, for turns that
	 * continue a conversation (the names of core/server/dialect.h); ""
	 * when the manifest gives none. */
	char dialect[MANIFEST_DIALECT_MAX];
	/* What the vendor's launcher does that running the entry directly
	 * would skip: variables it sets for the native binary (core/install/launch.h). */
	struct manifest_envvar env[MANIFEST_MAX_ENV];
	int nenv;
	unsigned libc; /* MANIFEST_LIBC_* bits; 0 = needs no loader */
	/* sonames beyond the C library's own (libm, libpthread, ... are
	 * glibc's) that must be in the image's library directories */
	char libs[MANIFEST_MAX_LIBS][MANIFEST_NAME_MAX];
	int nlibs;

	/* Where it came from, for messages: "embedded:manifests/node-runtime.json" or the
	 * file's path. */
	char file[4096];
	char dir[4096]; /* directory of file ("" for embedded) */
	int embedded;
	/* sha256 of the manifest bytes, followed (npm-lock) by the lockfile's
	 * bytes: what a marker records and the fast path compares. */
	char sha256[MANIFEST_SHA256_HEX];
	/* Some platform lacks a digest and ABX_INSTALL_UNPINNED allowed it. */
	int unpinned;
} manifest_t;

#define MANIFEST_VERIFY_TIMEOUT 20

/* How to load: the platform whose digest must be present, and whether an
 * unpinned tarball is allowed (manifest_unpinned_allowed()). */
struct manifest_opts {
	const char *platform; /* "linux-x64", "linux-arm64", or "all" */
	int allow_unpinned;
	/* The configuration's install.mirrors.npm ("" = none): a lockfile's
	 * resolved URLs may name its host. A copy: the set outlives a reload. */
	char npm_mirror[MANIFEST_URL_MAX];
};

/* The platform this binary runs on ("linux-x64" / "linux-arm64"): fixed
 * when it is compiled, so every file asks here without calling another. */
static inline const char *
manifest_platform_self(void)
{
#if defined(__aarch64__)
	return MANIFEST_PLATFORM_ARM64;
#else
	return MANIFEST_PLATFORM_X64;
#endif
}

/* 1 when s names a known platform. */
int manifest_platform_known(const char *s);

/* Whether this CPU runs a vendor's x86-64-v3 build (AVX2; ABX_INSTALL_AVX2=0
 * or 1 says so instead, for tests), and whether the baseline build is the
 * one installed: install.cpu_level baseline, or auto on a CPU without AVX2.
 * Always 0 off x86-64, where vendors ship one build. */
int manifest_cpu_avx2(void);
int manifest_cpu_baseline(void);

/*
 * Whether ABX_INSTALL_UNPINNED=1 is in effect. Returns 1 (allowed: the
 * caller warns loudly and audits each unpinned install), 0 (not asked for),
 * or -1 with config.invalid when it is asked for but cfg is production
 * (config_production).
 */
struct config;
int manifest_unpinned_allowed(const struct config *cfg, struct err *e);

/*
 * Parse and validate one manifest from text[0..len). file names it in
 * messages; dir is the directory the lockfile path is relative to (NULL for
 * embedded manifests, whose lockfiles are looked up in the embedded table).
 * Does not check requires against other manifests (manifest_set does).
 * Returns 0, or -1 with e set; on failure m holds nothing to free.
 */
int manifest_parse(manifest_t *m, const char *file, const char *dir, const char *text, size_t len,
                   const struct manifest_opts *o, struct err *e);

/* Read path (at most MANIFEST_MAX_BYTES) and manifest_parse it. */
int manifest_load_file(manifest_t *m, const char *path, const struct manifest_opts *o, struct err *e);

/* The artifact for platform, or NULL. */
const struct manifest_artifact *manifest_artifact(const manifest_t *m, const char *platform);

/* The unpacked size lock recorded for platform, or 0. */
uint64_t manifest_unpacked_size(const manifest_t *m, const char *platform);

/* 1 when the manifest lists platform (or lists none). */
int manifest_supports(const manifest_t *m, const char *platform);

/*
 * Compare versions: an optional leading "v", dot-separated numeric fields
 * compared as numbers (missing fields are 0), then a pre-release ("-rc.1")
 * sorts before the release. Returns <0, 0, >0.
 */
int manifest_version_cmp(const char *a, const char *b);

/* 1 when s is a plain version shorter than max bytes: a letter or digit,
 * then letters, digits and ".-+_" (no '/', blank or control byte, so it is
 * safe in a path and a message). Manifests and npm lockfiles both use it. */
static inline int
manifest_version_ok(const char *s, size_t max)
{
	size_t i, n = strlen(s);

	if (n == 0 || n >= max || !isalnum((unsigned char)s[0]))
		return 0;
	for (i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || strchr(".-+_", s[i]) != NULL))
			return 0;
	return 1;
}

/*
 * The version in a --version answer: the first dotted number that does not
 * continue a word ("v22.3.0" → "22.3.0", "node18 v20.1.0" → "20.1.0",
 * "codex-cli 0.171.0" → "0.171.0"), into out. Returns 0, or -1 when there is
 * none or it does not fit cap.
 */
int manifest_version_in(const char *text, char *out, size_t cap);

/* Parse "name" or "name>=version" into r. Returns 0 or -1 (e: manifest_invalid
 * with the message "what"). */
int manifest_parse_require(const char *s, struct manifest_require *r, struct err *e);

int manifest_host_allowed_m(const manifest_t *m, const char *host, int port);

/*
 * A set of manifests: the embedded ones plus a directory's, indexed by name
 * and loaded on demand (a broken manifest only breaks its own tool and the
 * tools that require it).
 */
struct manifest_entry {
	char name[MANIFEST_NAME_MAX];
	int embedded_idx; /* index in embedded_manifests, or -1 */
	char path[4096];  /* file in the directory, or "" */
	int state;        /* 0 not loaded, 1 loaded, -1 failed, 2 loading */
	manifest_t *m;
	struct err e; /* the failure, when state == -1 */
};

struct manifest_set {
	struct manifest_opts opts;
	char dir[4096];             /* "" when none */
	struct manifest_entry *ent; /* MANIFEST_SET_MAX entries, owned */
	int n;
};

/*
 * Index the embedded manifests and those of dir (NULL or "" = none; the
 * environment is not consulted: the caller passes the configuration's
 * manifests_dir, which ABX_MANIFESTS_DIR sets). Files named after a tool override the
 * embedded manifest of that name. A directory that cannot be read is
 * config.invalid. Returns 0 or -1. Call manifest_set_close when done.
 */
int manifest_set_open(struct manifest_set *s, const char *dir, const struct manifest_opts *o, struct err *e);
void manifest_set_close(struct manifest_set *s);

/*
 * manifest_set_open for configuration c: the built-in manifests and c's
 * manifests_dir, loading for platform (NULL = this machine), with c's npm
 * mirror; ABX_INSTALL_UNPINNED is honoured unless c's environment is
 * production (config.invalid). Returns 0, or -1 with e.
 */
int manifest_set_load(struct manifest_set *s, const struct config *c, const char *platform, struct err *e);

/*
 * The manifest of tool name, loaded and validated with its whole requires
 * closure (every required tool exists, its version satisfies the minimum,
 * no cycle). Unknown name: not_found. The pointer lives until
 * manifest_set_close. Returns NULL with e set on failure.
 */
const manifest_t *manifest_get(struct manifest_set *s, const char *name, struct err *e);

/* The tool whose binary is base (loading manifests as needed; broken ones
 * are skipped), or NULL. */
const manifest_t *manifest_find_binary(struct manifest_set *s, const char *base);

/* For an unknown agent name: "(did you mean codex?; agents: claude-code,
 * codex, gemini)" — the manifests of s that load and have a run block —
 * into buf[0..cap). Loads every manifest of s. */
void manifest_agents_hint(struct manifest_set *s, const char *word, char *buf, size_t cap);

/*
 * The names of name's requires closure and name itself, in install order
 * (dependencies first; among independent tools, name order), into out
 * (cap entries, each MANIFEST_NAME_MAX). Returns the count, or -1 with e.
 */
int manifest_closure(struct manifest_set *s, const char *name, char (*out)[MANIFEST_NAME_MAX], int cap,
                     struct err *e);
/* The same, appending to out[0..*n) (names already there are kept once). */
int manifest_closure_add(struct manifest_set *s, const char *name, char (*out)[MANIFEST_NAME_MAX], int *n,
                         int cap, struct err *e);

/* Read a file that lives beside a manifest: from dir when m came from a
 * directory, else from the embedded table (path relative to manifests/).
 * *out is malloc'd (caller frees), at most max bytes. Returns 0 or -1. */
int manifest_read_sibling(const manifest_t *m, const char *rel, size_t max, char **out, size_t *len,
                          struct err *e);

/*
 * npm-lock hook (core/pkg/manifest_npm.c):
 * validate the npm-specific fields of src (the "source" object) into m, and
 * load and check the lockfile (every entry has integrity and a resolved
 * host within m->hosts, or the host of npm_mirror: the configuration's
 * install.mirrors.npm, NULL or "" = none). lock/len are the lockfile bytes.
 * Returns 0 or -1 with install.manifest_invalid naming the JSON path.
 */
int manifest_npm_validate(manifest_t *m, const struct json_val *src, struct err *e);

/*
 * An npm-lock bin template ("node_modules/@s/x-{platform}{musl}/bin/x") for
 * platform, a musl or glibc system and a CPU without AVX2 (baseline) or
 * with, into out[0..cap): the placeholders of core/pkg/manifest_npm.c.
 * Returns 1 when it has {baseline} (the vendor ships CPU levels), 0 when
 * not, -1 for an unknown placeholder, -2 when out is too small.
 */
int manifest_bin_expand(const char *tmpl, const char *platform, int musl, int baseline, char *out,
                        size_t cap);
int manifest_npm_check_lock(manifest_t *m, const char *lock, size_t len, const char *npm_mirror,
                            struct err *e);

/*
 * The verify block's "env" (core/pkg/manifest_verify.c): x, the object, into
 * m->verify.env. Names [A-Z_][A-Z0-9_]*; PATH, HOME, LANG, LC_*, LD_*,
 * NODE_OPTIONS, NODE_PATH and ABX_* refused; values printable ASCII
 * without placeholders. Returns 0 or -1 with install.manifest_invalid
 * naming file and $.verify.env.NAME.
 */
int manifest_verify_env(manifest_t *m, const struct json_val *x, const char *file, struct err *e);

#endif
