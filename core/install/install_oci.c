/*
 * The OCI mirror (install.mirrors.oci) as a source of blobs: one client per
 * install context (a context is one thread's), made on first use with the
 * configured credential, so a token got for one blob serves the next.
 * Nothing the registry says is trusted: install_src.c asks it for the
 * pinned sha256 and keeps only bytes that hash to it.
 */
#include "install/install_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <limits.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/digest.h"
#include "config/config.h"
#include "net/http.h"
#include "net/oci.h"
#include "pkg/cache.h"
#include "pkg/npmlock.h"

struct install_oci {
	struct oci_client o;
	char basic[OCI_BASIC_MAX];
	const char *allow[CFG_HOSTS_MAX];
};

struct oci_client *
install_oci_client(struct install_ctx *c, struct err *e)
{
	struct install_oci *k;
	struct oci_ref r;
	int i, found;

	if (c->oci != NULL)
		return &c->oci->o;
	if (oci_ref_parse(c->cfg->install.oci_mirror, 1, &r, e) != 0)
		return NULL;
	if (c->http == NULL && (c->http = config_http_client(e)) == NULL)
		return NULL;
	if ((k = calloc(1, sizeof(*k))) == NULL) {
		err_set(e, "internal", "out of memory");
		return NULL;
	}
	if ((found = config_oci_basic(r.host, r.port, r.port_explicit, k->basic, NULL, 0, e)) < 0) {
		free(k);
		return NULL;
	}
	for (i = 0; i < c->cfg->install.allow_hosts.n && i < CFG_HOSTS_MAX; i++)
		k->allow[i] = c->cfg->install.allow_hosts.v[i];
	oci_client_init(&k->o, c->http, &r, found ? k->basic : NULL, k->allow, i, "install.allow_hosts");
	c->oci = k;
	return &k->o;
}

int
install_oci_probe_url(const struct install_ctx *c, char *url, size_t cap)
{
	struct oci_ref r;
	struct err e;

	if (c->cfg->install.oci_mirror[0] == '\0' ||
	    oci_ref_parse(c->cfg->install.oci_mirror, 1, &r, &e) != 0)
		return 0;
	return snprintf(url, cap, "%s/v2/", r.origin) < (int)cap;
}

void
install_oci_free(struct install_ctx *c)
{
	if (c->oci == NULL)
		return;
	/* the credential and the token are secrets: not left in freed memory */
	memset(c->oci, 0, sizeof(*c->oci));
	free(c->oci);
	c->oci = NULL;
}

/* ---- npm packages ------------------------------------------------------------ */

/* The registry's integrity -> sha256 map, read from the tool's tag. */
struct npm_map {
	char (*sri)[DIGEST_SRI_MAX];
	char (*hex)[65];
	int n, cap;
};

static void
map_add(void *arg, const char *hex, const char *value)
{
	struct npm_map *mp = arg;

	if (mp->n >= mp->cap || strlen(value) >= DIGEST_SRI_MAX)
		return;
	snprintf(mp->sri[mp->n], DIGEST_SRI_MAX, "%s", value);
	snprintf(mp->hex[mp->n], 65, "%s", hex);
	mp->n++;
}

static const char *
map_find(const struct npm_map *mp, const char *sri)
{
	int i;

	for (i = 0; i < mp->n; i++)
		if (strcmp(mp->sri[i], sri) == 0)
			return mp->hex[i];
	return NULL;
}

static int
put_sink(void *arg, const void *buf, size_t len, struct err *e)
{
	return cache_put_write(arg, buf, len, e);
}

/* The bytes of blob hex into cache, kept only when they match the
 * package's own integrity (the lockfile's pin). 0, 1 when the registry
 * has no such blob, -1 with e (install.checksum_mismatch, ...). */
static int
npm_blob(struct install_ctx *c, struct oci_client *o, const struct npmlock_pkg *p, const char *hex,
         const char *cache, struct err *e)
{
	struct cache_put put;
	struct http_response rs;
	struct http_limits lim;
	struct digest got, sha;
	char path[PATH_MAX], want[DIGEST_SRI_MAX], gots[DIGEST_SRI_MAX];
	int rc;

	if (cache_put_open(&put, cache, p->digest.alg, e) < 0)
		return -1;
	lim = o->limits;
	lim.max_body =
	    c->cfg->install.max_download_mb > 0 ? (int64_t)c->cfg->install.max_download_mb << 20 : 0;
	if (oci_blob_get(o, hex, put_sink, &put, &lim, &rs, e) != 0) {
		cache_put_abort(&put);
		return rs.status == 404 ? 1 : -1;
	}
	rc = cache_put_commit(&put, &p->digest, 0, &got, &sha, NULL, path, sizeof(path), e);
	if (rc < 0)
		return -1;
	if (rc == 0)
		return err_set(e, "install.checksum_mismatch", "%s@%s (%s@sha256:%s): expected %s, got %s",
		               p->name, p->version, c->cfg->install.oci_mirror, hex,
		               digest_sri(&p->digest, want), digest_sri(&got, gots));
	c->downloads++;
	c->bytes_downloaded += put.bytes;
	return 0;
}

int
install_oci_npm(struct install_ctx *c, const manifest_t *m, const struct npmlock *l, const char *cache,
                char (*sources)[NPM_SOURCE_MAX], struct err *e)
{
	struct oci_client *o;
	struct npm_map mp = {0};
	struct buf doc = BUF_INIT(OCI_JSON_MAX * 8);
	char tag[OCI_TAG_MAX], hex[DIGEST_HEX_MAX], p256[PATH_MAX], sri[DIGEST_SRI_MAX];
	const char *h;
	size_t i, missing = 0;
	int rc = 0, r;

	if (c->cfg->install.oci_mirror[0] == '\0')
		return 0;
	for (i = 0; i < l->npkgs; i++) {
		const struct npmlock_pkg *p = &l->pkgs[i];
		if (!p->in_bundle && p->resolved != NULL &&
		    !(cache_sha256_of(cache, &p->digest, hex) &&
		      fs_path_join(p256, sizeof(p256), cache, hex, NULL) == 0 && access(p256, R_OK) == 0))
			missing++;
	}
	if (missing == 0)
		return 0;
	if ((o = install_oci_client(c, e)) == NULL || oci_tag_make(m->name, m->version, tag) != 0)
		return c->cfg->install.mode == CFG_MODE_OFFLINE ? -1 : 0;
	r = oci_manifest_get(o, tag, &doc, e);
	if (r <= 0) {
		buf_free(&doc);
		/* no tag: nothing the registry can give (a miss); else its error,
		 * which only offline must stop at (lazy goes to the origin) */
		if (r == 0)
			err_clear(e);
		return r < 0 && c->cfg->install.mode == CFG_MODE_OFFLINE ? -1 : 0;
	}
	mp.cap = (int)l->npkgs + 1;
	mp.sri = calloc((size_t)mp.cap, sizeof(*mp.sri));
	mp.hex = calloc((size_t)mp.cap, sizeof(*mp.hex));
	if (mp.sri == NULL || mp.hex == NULL) {
		rc = err_set(e, "internal", "out of memory");
		goto out;
	}
	if (oci_manifest_layers((const char *)doc.p, doc.len, OCI_ANN_NPM_INTEGRITY, map_add, &mp, e) < 0) {
		rc = c->cfg->install.mode == CFG_MODE_OFFLINE ? -1 : 0;
		goto out;
	}
	for (i = 0; i < l->npkgs; i++) {
		const struct npmlock_pkg *p = &l->pkgs[i];
		if (p->in_bundle || p->resolved == NULL)
			continue;
		if (cache_sha256_of(cache, &p->digest, hex) &&
		    fs_path_join(p256, sizeof(p256), cache, hex, NULL) == 0 && access(p256, R_OK) == 0)
			continue;
		if ((h = map_find(&mp, digest_sri(&p->digest, sri))) == NULL)
			continue; /* npm_install: offline refuses, lazy goes to the origin */
		r = npm_blob(c, o, p, h, cache, e);
		if (r == 0 && sources != NULL) {
			char at[8 + DIGEST_HEX_MAX];
			snprintf(at, sizeof(at), "@sha256:%s", h);
			npm_source_set(sources[i], NPM_SOURCE_MAX, c->cfg->install.oci_mirror, at);
		}
		if (r < 0 && (c->cfg->install.mode == CFG_MODE_OFFLINE ||
		              (e->code != NULL && strcmp(e->code, "install.checksum_mismatch") == 0))) {
			rc = -1;
			goto out;
		}
	}
	err_clear(e);
out:
	free(mp.sri);
	free(mp.hex);
	buf_free(&doc);
	return rc;
}
