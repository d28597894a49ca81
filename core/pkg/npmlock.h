#ifndef ABX_NPMLOCK_H
#define ABX_NPMLOCK_H
/*
 * The strict npm lockfile loader (the npm-lock source of a manifest): reads a
 * package-lock.json v2 or v3 (`packages` map) and answers the list of
 * packages to install for one platform, or refuses the whole file.
 *
 * The rules, each a refusal (install.manifest_invalid naming the JSON path):
 *  - lockfileVersion 2 or 3; v1 (no `packages`) refused with a remedy;
 *  - duplicate keys anywhere (the strict parser's reject_dup_keys);
 *  - keys are "" (the root project, not installed) or node_modules/<name>
 *    segments only: <name> is `n` or `@scope/n`, no "..", ".", empty
 *    segment, backslash, absolute path or other prefix (workspaces);
 *  - `link: true` refused (a link reaches outside the locked tree);
 *  - every installed entry (not `inBundle`, which arrives inside its
 *    parent's tarball) has a `version`, an https `resolved` whose host is in
 *    the manifest's hosts (or is the npm mirror's host) and whose path ends
 *    in /<name>/-/<unscoped name>-<version>.tgz, where <name> is the entry's
 *    `name` (an npm: alias target) or else the last path segment, and an
 *    `integrity` whose strongest hash is sha512 or sha256 (sha1-only refused);
 *  - platform: `os`, `cpu`, `libc` lists as npm-install-checks reads them
 *    ("!x" negates); an entry that does not apply is skipped when it (or
 *    devOptional) is optional, else refused; `dev` and `devOptional` entries
 *    are not installed (the tool's own devDependencies);
 *  - a skipped entry takes everything below its path with it (npm installs
 *    nothing under a package it skipped);
 *  - the root package (node_modules/<package>) must exist; its `bin` (string
 *    or object) is normalised as npm-normalize-package-bin does and every
 *    target must stay inside the package (a ".." that would climb out is
 *    refused rather than silently re-rooted as npm does).
 *
 * Ownership: every string in struct npmlock points into l->doc (or l's own
 * allocations) and lives until npmlock_free(l).
 */
#include <stddef.h>

#include "base/digest.h"
#include "base/err.h"
#include "base/json.h"

/* A package name is at most 214 bytes (npm's validate-npm-package-name). */
#define NPMLOCK_NAME_MAX 214
/* A version is at most 256 bytes (semver's MAX_LENGTH), with the NUL. */
#define NPMLOCK_VERSION_MAX 257
/* Bins of one package. Real CLIs declare 1–3; 64 leaves room and bounds the
 * link loop. */
#define NPMLOCK_BINS_MAX 64
/* Lockfiles of the largest agent CLIs have ~400 entries; 20000 is far above
 * any real tree and keeps the package table bounded. */
#define NPMLOCK_PKGS_MAX 20000
/* A lockfile path: node_modules nesting is shallow in practice (< 10). */
#define NPMLOCK_PATH_MAX 1024

struct npmlock_opts {
	const char *package;      /* the tool's package, e.g. "@openai/codex" */
	const char *const *hosts; /* manifest hosts ("host" or "host:port") */
	size_t nhosts;
	const char *mirror_host; /* npm mirror host also accepted, or NULL */
	const char *os;          /* "linux" (NULL = "linux") */
	const char *cpu;         /* "x64", "arm64"; NULL = every cpu applies */
	const char *libc;        /* "glibc", "musl"; NULL = every libc applies */
	/* "node_modules/<name>": the one top-level optional package installed
	 * (the platform package holding the tool's native binary; the others
	 * are builds for other platforms, CPU levels and libcs, skipped as the
	 * vendor's install script would leave them unused); NULL = every one
	 * that applies */
	const char *only;
};

struct npmlock_pkg {
	const char *path;   /* "node_modules/a/node_modules/@s/b" */
	const char *name;   /* the real package name (alias target or folder) */
	const char *folder; /* the name under node_modules (alias name) */
	const char *version;
	const char *resolved;  /* NULL for inBundle entries */
	const char *integrity; /* the SRI text as written; NULL for inBundle */
	struct digest digest;  /* the strongest hash of integrity */
	int in_bundle;         /* comes inside its parent's tarball: no fetch */
	int optional;
	const char *url_path; /* "/<name>/-/<file>.tgz" within resolved, for mirrors */
};

struct npmlock_bin {
	char name[NPMLOCK_NAME_MAX + 1]; /* link name in node_modules/.bin */
	char target[NPMLOCK_PATH_MAX];   /* relative to the package directory */
};

struct npmlock {
	struct json_doc doc;
	int version;              /* lockfileVersion: 2 or 3 */
	struct npmlock_pkg *pkgs; /* selected entries, in lockfile order */
	size_t npkgs;
	size_t nskipped;                /* not applicable to the platform (optional) */
	size_t ndev;                    /* dev / devOptional entries left out */
	const struct npmlock_pkg *root; /* node_modules/<package> */
	struct npmlock_bin *bins;       /* the root package's bins, normalised */
	size_t nbins;
};

/* Load lockfile text[0..len) under o. On success l is filled and owned by the
 * caller (npmlock_free). On failure -1 with e set (json.* for text that is not
 * JSON, install.manifest_invalid for a rule; the message starts with the JSON
 * path, e.g. `packages["node_modules/x"].resolved: ...`), and l is empty
 * (npmlock_free is still safe). */
int npmlock_load(struct npmlock *l, const char *text, size_t len, const struct npmlock_opts *o,
                 struct err *e);

void npmlock_free(struct npmlock *l);

/* npm's os/cpu/libc rule for one list value (a JSON string or array of
 * strings; NULL = applies): 1 applies, 0 not, -1 malformed. Exposed for tests. */
int npmlock_platform_match(const struct json_val *list, const char *value);

/* Valid lockfile key ("node_modules/<name>(/node_modules/<name>)*")? On
 * success *folder points at the last <name> inside key. 1 / 0. */
int npmlock_path_ok(const char *key, const char **folder);

/* Valid npm package name (optionally scoped)? 1 / 0. */
int npmlock_name_ok(const char *name, size_t len);

/* npm's platform names for ours: "linux-x64" → "x64", "linux-arm64" →
 * "arm64"; NULL for anything else. */
const char *npmlock_cpu_for(const char *platform);

/* The libc of the system the tool will run on (not ours: we are static musl),
 * from the program interpreter a dynamically linked program of this
 * architecture names (npmlock_libc_loader): "glibc" when <root>'s glibc
 * loader exists (also when musl's is there too: a glibc distribution with
 * the musl package), else "musl" when its musl loader exists, else "none"
 * (a scratch or static-only image: nothing dynamically linked can run).
 * root NULL or "" means "/". ABX_INSTALL_LIBC (glibc|musl|none) overrides,
 * for tests and for images whose loader is elsewhere. */
const char *npmlock_detect_libc(const char *root);

/* Is the shared library soname ("libstdc++.so.6") in a directory the
 * loader of libc searches under root (NULL = "/")? glibc: /lib, /usr/lib,
 * /lib64, /usr/lib64, the multiarch /lib/<arch>-linux-gnu and
 * /usr/lib/<arch>-linux-gnu, and the directories of
 * /etc/ld.so.conf.d/ *.conf; musl: /lib, /usr/local/lib, /usr/lib and
 * /etc/ld-musl-<arch>.path. 1 or 0. */
int npmlock_lib_present(const char *root, const char *libc, const char *soname);

/* The loader path of libc ("glibc", "musl") for this machine's
 * architecture ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-musl-x86_64.so.1"),
 * or NULL for another name. Static strings. */
const char *npmlock_libc_loader(const char *libc);

#endif
