/*
 * lock: pin a tool's artifacts (tarball sources) or produce its lockfile
 * (npm-lock sources, applets/lock_npm.c) on a connected machine, rewriting
 * the manifest in place so the change reviews as one line per pin: the text
 * is edited where the values stand, key order and layout kept, never
 * re-serialised.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/digest.h"
#include "base/fs.h"
#include "net/hostrule.h"
#include "net/http.h"
#include "base/json.h"
#include "pkg/manifest.h"
#include "pkg/manifests_embed.h"
#include "pkg/npmlock.h"
#include "cfgload.h"
#include "lock.h"
#include "opts.h"

struct lock_opts {
	const char *version, *dir;
	int check, quiet, sizes;
};

#define O(f) offsetof(struct lock_opts, f)
static const struct opt options[] = {
    OPT(0, "version", "V", NULL, O(version)), OPT(0, "manifests", "DIR", NULL, O(dir)),
    OPT(0, "check", NULL, NULL, O(check)),    OPT(0, "sizes", NULL, NULL, O(sizes)),
    OPT('q', "quiet", NULL, NULL, O(quiet)),  OPT_END,
};
#undef O

static const struct opts usage = {
    "lock", "lock.txt", options, 1, EXIT_USAGE, NULL,
};

/* ---- tarball sources -------------------------------------------------- */

static int
hash_sink(void *arg, const void *buf, size_t len, struct err *e)
{
	digest_update(arg, buf, len);
	return 0;
}

static int
download_sha256(struct http_client *hc, const char *url, struct hosts *h, char hex[DIGEST_HEX_MAX],
                struct err *e)
{
	struct digest_ctx c;
	struct digest d;

	digest_init(&c, DIGEST_SHA256);
	if (lock_get(hc, url, h, NULL, hash_sink, &c, LOCK_DOWNLOAD_MAX, NULL, e) != 0)
		return -1;
	digest_final(&c, &d);
	digest_hex(&d, hex);
	return 0;
}

/* $.unpacked_size from n measured platforms (none: left as it is). */
static int
record_sizes(struct doc *d, char plat[][16], const uint64_t *bytes, int n, struct err *e)
{
	return n > 0 ? lock_set_unpacked(d, plat, bytes, n, e) : 0;
}

static int
lock_tarball(struct doc *d, const char *old, const char *new, int check, int sizes, int *stale, struct err *e)
{
	const struct json_val *src = json_get(d->j.root, "source"), *plat = json_get(src, "platforms");
	const struct json_val *sc = json_get(src, "strip_components");
	struct http_client *hc;
	struct hosts h;
	size_t i;
	char url[HTTP_URL_MAX], hex[DIGEST_HEX_MAX], pl[MANIFEST_MAX_PLATFORMS][16];
	uint64_t bytes[MANIFEST_MAX_PLATFORMS];
	int np = 0, strip = sc != NULL && sc->type == JSON_NUMBER ? (int)sc->u.num.i : 0;
	struct err me = {0};

	if (plat == NULL || plat->type != JSON_OBJECT || plat->u.obj.n == 0)
		return err_set(e, "install.manifest_invalid", "%s: $.source.platforms: missing", d->path);
	if (lock_load_hosts(d, &h, e) != 0)
		return -1;
	if ((hc = config_http_client(e)) == NULL)
		return -1;
	for (i = 0; i < plat->u.obj.n; i++) {
		const struct json_member *m = &plat->u.obj.m[i];
		const struct json_val *u = json_get(&m->val, "url"), *s = json_get(&m->val, "sha256");

		if (u == NULL || u->type != JSON_STRING) {
			http_client_free(hc);
			return err_set(e, "install.manifest_invalid",
			               "%s: $.source.platforms.%s.url: missing", d->path, m->key);
		}
		if (lock_replace_all(u->u.str.s, old, new, url, sizeof(url)) != 0) {
			http_client_free(hc);
			return err_set(e, "http.url", "URL too long");
		}
		lock_say("%s: downloading %s\n", m->key, url);
		if (check) {
			if (download_sha256(hc, url, &h, hex, e) != 0)
				goto fail;
			if (s == NULL || s->type != JSON_STRING || strcmp(s->u.str.s, hex) != 0) {
				*stale = 1;
				printf("%s: stale pin: manifest has %s, %s is %s\n", m->key,
				       s && s->type == JSON_STRING ? s->u.str.s : "(none)", url, hex);
			}
			continue;
		}
		hex[0] = '\0';
		err_clear(&me);
		if (lock_measure(hc, url, &h, 0, strip, hex, &bytes[np], &me) != 0) {
			if (hex[0] == '\0' || sizes) {
				err_copy(e, &me);
				goto fail;
			}
			/* an artifact the installer cannot extract fails every
			 * install; the pin is still what was asked */
			fprintf(stderr, "agent-sandbox-server: %s: %s: unpacked_size not recorded: %s\n",
			        d->path, m->key, me.msg);
		} else if (np < MANIFEST_MAX_PLATFORMS && manifest_platform_known(m->key)) {
			snprintf(pl[np], sizeof(pl[np]), "%s", m->key);
			lock_say("%s: unpacked %llu bytes\n", m->key, (unsigned long long)bytes[np++]);
		}
		if (sizes) {
			if (s == NULL || s->type != JSON_STRING || strcmp(s->u.str.s, hex) != 0) {
				err_set(e, "install.checksum_mismatch",
				        "%s: %s: the pin is not %s's sha256 %s: run lock without --sizes",
				        d->path, m->key, url, hex);
				goto fail;
			}
			continue;
		}
		lock_say("%s: sha256 %s\n", m->key, hex);
		if (strcmp(url, u->u.str.s) != 0 && lock_set_string(d, u, url, e) != 0)
			goto fail;
		if (s != NULL) {
			if (lock_set_string(d, s, hex, e) != 0)
				goto fail;
		} else if (lock_insert_after(d, u, "sha256", hex, e) != 0) {
			goto fail;
		}
	}
	http_client_free(hc);
	if (check)
		return 0;
	if (record_sizes(d, pl, bytes, np, e) != 0)
		return -1;
	return sizes ? 0 : lock_edit_version(d, old, new, e);
fail:
	http_client_free(hc);
	return -1;
}

/* ---- main --------------------------------------------------------------- */

/* <dir>/<name><ext> into path (PATH_MAX bytes): 0, or -1 (path "") when it
 * does not fit. */
static int
manifest_file(char *path, const char *dir, const char *name, const char *ext)
{
	char leaf[PATH_MAX];

	if ((size_t)snprintf(leaf, sizeof(leaf), "%s%s", name, ext) >= sizeof(leaf)) {
		path[0] = '\0';
		return -1;
	}
	return fs_path_join(path, PATH_MAX, dir, leaf, NULL);
}

int
lock_main(int argc, char **argv)
{
	static struct config cfg;
	struct lock_opts o = {0};
	const char *version, *dir, *name, *type, *old;
	struct config_flags f = {0};
	char path[PATH_MAX];
	struct doc d;
	struct err e = {0};
	struct stat sb;
	int check, stale = 0, rc, nargs;

	err_clear(&e);
	if ((rc = opts_parse(&usage, argc, argv, &o, &nargs)) >= 0)
		return rc;
	if (nargs == 0)
		return opts_error(&usage, "missing NAME");
	version = o.version, dir = o.dir, check = o.check, lock_quiet = o.quiet;
	if (o.sizes && (check || version != NULL))
		return opts_error(&usage, "--sizes goes with neither --check nor --version");
	name = argv[1];
	if (!npmlock_name_ok(name, strlen(name)) || name[0] == '@')
		return opts_error(&usage, "not a tool name: %s", name);
	if (version != NULL && (*version == '\0' || strpbrk(version, "/\\\"' ") != NULL))
		return opts_error(&usage, "not a version: %s", version);
	/* the manifests directory and the npm mirror as every applet reads
	 * them: file, environment, --manifests */
	if (dir != NULL && *dir != '\0')
		config_flags_add(&f, "manifests", dir);
	if (cfgload_config(&cfg, NULL, &f, 1, &e) != 0) {
		err_print(&e);
		return EXIT_USAGE;
	}
	dir = cfg.manifests_dir;
	if (*dir == '\0') {
		dir = "manifests";
		/* Outside a source checkout, --check reads the manifests built
		 * into this binary (nothing is written). */
		if (check && (manifest_file(path, dir, name, ".json") != 0 || stat(path, &sb) != 0))
			dir = LOCK_EMBEDDED;
	}
	if (strcmp(dir, LOCK_EMBEDDED) == 0) {
		char *t;
		size_t tl;

		snprintf(path, sizeof(path), "%s%s.json", LOCK_EMBEDDED, name);
		if (lock_read_file(path, LOCK_MANIFEST_MAX, &t, &tl, &e) != 0) {
			err_set(&e, "not_found",
			        "no manifest %s.json in this binary and no %s/%s.json to check", name,
			        "manifests", name);
			err_print(&e);
			return EXIT_USAGE;
		}
		free(t);
		lock_say("%s: checking the manifest built into this binary\n", path);
	} else if (manifest_file(path, dir, name, ".json") != 0 || stat(path, &sb) != 0) {
		if (manifest_file(path, dir, name, ".unpinned.json") != 0 || stat(path, &sb) != 0) {
			err_set(&e, "not_found", "no manifest %s/%s.json to lock", dir, name);
			err_print(&e);
			return EXIT_USAGE;
		}
	}
	if (lock_doc_load(&d, path, &e) != 0) {
		lock_doc_free(&d);
		return fail(&e);
	}
	type = json_get_str(json_get(d.j.root, "source"), "type");
	old = json_get_str(d.j.root, "version");
	if (type == NULL || old == NULL) {
		err_set(&e, "install.manifest_invalid", "%s: $.source.type and $.version are needed", path);
		lock_doc_free(&d);
		return fail(&e);
	}
	if (strcmp(type, "tarball") == 0) {
		if (version != NULL && strcmp(version, "latest") == 0) {
			err_set(&e, "usage", "tarball sources need an explicit --version");
			lock_doc_free(&d);
			return fail(&e);
		}
		rc = lock_tarball(&d, old, version ? version : old, check, o.sizes, &stale, &e);
	} else if (strcmp(type, "npm-lock") == 0) {
		rc = lock_npm(&d, dir, &cfg, old, version ? version : old,
		              check | (o.sizes ? LOCK_NPM_SIZES : 0), &stale, &e);
	} else {
		err_set(&e, "install.manifest_invalid", "%s: $.source.type: unknown type %s", path, type);
		rc = -1;
	}
	if (rc == 0 && !check && d.ned > 0) {
		size_t n;
		char *out = lock_doc_render(&d, &n);
		if (out == NULL)
			rc = err_set(&e, "internal", "out of memory");
		else {
			struct json_doc chk;
			/* What we write must still be JSON. */
			if (json_parse(&chk, out, n, NULL, &e) != 0 ||
			    lock_write_atomic(path, out, n, &e) != 0)
				rc = -1;
			json_free(&chk);
			free(out);
		}
		if (rc == 0)
			lock_say("%s: %d change%s written\n", path, d.ned, d.ned == 1 ? "" : "s");
	} else if (rc == 0 && !check) {
		lock_say("%s: already up to date\n", path);
	}
	lock_doc_free(&d);
	if (rc != 0)
		return fail(&e);
	if (check && stale)
		return EXIT_FAIL;
	if (check)
		lock_say("%s: pins are current\n", path);
	return EXIT_OK;
}
