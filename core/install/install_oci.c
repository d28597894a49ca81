/*
 * The OCI mirror (install.mirrors.oci) as a source of blobs: one client per
 * install environment (an environment is one thread's), made on first use with the
 * configured credential, so a token got for one blob serves the next.
 * Nothing the registry says is trusted: install_src.c asks it for the
 * pinned sha256 and keeps only bytes that hash to it.
 */
#include "install/install_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <limits.h>
#include <pthread.h>
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
install_oci_client(struct install_env *c, struct err *e)
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
install_oci_probe_url(const struct install_env *c, char *url, size_t cap)
{
	struct oci_ref r;
	struct err e = {0};

	if (c->cfg->install.oci_mirror[0] == '\0' ||
	    oci_ref_parse(c->cfg->install.oci_mirror, 1, &r, &e) != 0)
		return 0;
	return snprintf(url, cap, "%s/v2/", r.origin) < (int)cap;
}

void
install_oci_free(struct install_env *c)
{
	if (c->oci == NULL)
		return;
	/* the credential and the token are secrets: not left in freed memory */
	memset(c->oci, 0, sizeof(*c->oci));
	free(c->oci);
	c->oci = NULL;
}

/* ---- npm packages ------------------------------------------------------------ */

/* A package the tag lists: its blob, and its bytes in the pack (len 0:
 * none). */
struct oci_ent {
	char sri[DIGEST_SRI_MAX];
	char hex[65];
	uint64_t off, len;
};

/* The registry's integrity -> blob map, read from the tool's tag, and
 * what the install's workers share to fetch from it (npm_opts.source):
 * proto, the environment's client as the manifest left it (its token and
 * scheme, so no worker asks the token server again), under mu. The pack
 * (OCI_ANN_NPM_PACK; pack "" when none), under pack_mu, is fetched whole
 * by the first worker that needs it: pack_state 1 once pack_b holds
 * exactly pack_b.max bytes that hash to pack, -1 once that failed (its
 * packages are then fetched one by one). */
struct oci_npm {
	struct oci_ent *ent;
	int n, cap;
	char pack[65];
	struct buf pack_b;
	int pack_state;
	int offline;
	const char *mirror;
	pthread_mutex_t mu, pack_mu;
	struct oci_client proto;
};

static struct oci_ent *
map_find(struct oci_npm *mp, const char *sri)
{
	int i;

	for (i = 0; i < mp->n; i++)
		if (strcmp(mp->ent[i].sri, sri) == 0)
			return &mp->ent[i];
	return NULL;
}

static void
map_add(void *arg, const char *hex, const char *value)
{
	struct oci_npm *mp = arg;

	if (mp->n >= mp->cap || strlen(value) >= DIGEST_SRI_MAX)
		return;
	snprintf(mp->ent[mp->n].sri, DIGEST_SRI_MAX, "%s", value);
	snprintf(mp->ent[mp->n].hex, 65, "%s", hex);
	mp->n++;
}

/* oci_pack_list's fn: the place of a listed package the map has. */
static void
pack_place(void *arg, const char *sri, uint64_t off, uint64_t len)
{
	struct oci_ent *t = map_find(arg, sri);

	if (t != NULL) {
		t->off = off;
		t->len = len;
	}
}

/* The tag's first well-formed pack layer. */
static void
pack_add(void *arg, const char *hex, const char *value)
{
	struct oci_npm *mp = arg;
	uint64_t size;

	if (mp->pack[0] != '\0' || (size = oci_pack_list(value, NULL, NULL)) == 0)
		return;
	snprintf(mp->pack, sizeof(mp->pack), "%s", hex);
	mp->pack_b = (struct buf)BUF_INIT(size);
	oci_pack_list(value, pack_place, mp);
}

/* GET the blob hex into sink over the worker's client hc with the shared
 * token, and share the token it ended with. */
static int
shared_get(struct oci_npm *mp, struct http_client *hc, const char *hex, http_sink sink, void *sink_arg,
           const struct http_limits *lim, struct http_response *rs, struct err *e)
{
	struct oci_client *o;
	int rc;

	if ((o = malloc(sizeof(*o))) == NULL)
		return err_set(e, "internal", "out of memory");
	pthread_mutex_lock(&mp->mu);
	*o = mp->proto;
	pthread_mutex_unlock(&mp->mu);
	o->http = hc;
	rc = oci_blob_get(o, hex, sink, sink_arg, lim, rs, e);
	pthread_mutex_lock(&mp->mu);
	if (strcmp(o->token, mp->proto.token) != 0 || o->use_basic != mp->proto.use_basic) {
		memcpy(mp->proto.token, o->token, sizeof(o->token));
		memcpy(mp->proto.token_scope, o->token_scope, sizeof(o->token_scope));
		mp->proto.use_basic = o->use_basic;
	}
	pthread_mutex_unlock(&mp->mu);
	memset(o, 0, sizeof(*o)); /* the token is a secret */
	free(o);
	return rc;
}

/* The pack in memory, fetched and checked against its sha256 on first
 * use: 1, or 0 when it cannot be had (its packages are then fetched
 * alone). */
static int
pack_ready(struct oci_npm *mp, struct http_client *hc, const struct http_limits *lim)
{
	struct http_limits pl = *lim;
	struct http_response *rs;
	struct digest d;
	struct err e = {0};
	char got[DIGEST_HEX_MAX];
	int ok;

	pthread_mutex_lock(&mp->pack_mu);
	if (mp->pack_state == 0) {
		mp->pack_state = -1;
		pl.max_body = (int64_t)mp->pack_b.max;
		if ((rs = malloc(sizeof(*rs))) != NULL &&
		    shared_get(mp, hc, mp->pack, buf_http_sink, &mp->pack_b, &pl, rs, &e) == 0 &&
		    mp->pack_b.len == mp->pack_b.max) {
			digest_buf(DIGEST_SHA256, mp->pack_b.p, mp->pack_b.len, &d);
			if (strcmp(digest_hex(&d, got), mp->pack) == 0)
				mp->pack_state = 1;
		}
		free(rs);
		if (mp->pack_state < 0)
			buf_free(&mp->pack_b);
	}
	ok = mp->pack_state > 0;
	pthread_mutex_unlock(&mp->pack_mu);
	return ok;
}

/* The sink of a blob, counting what it was handed: once a byte went on,
 * the package cannot go to the origin instead. */
struct counted {
	http_sink fn;
	void *arg;
	uint64_t n;
};

static int
counted_sink(void *arg, const void *buf, size_t len, struct err *e)
{
	struct counted *k = arg;

	k->n += len;
	return k->fn(k->arg, buf, len, e);
}

/* npm_source_fn: p's bytes from the pack that holds them, else the blob
 * the tag lists for p's integrity, over the worker's client with the
 * shared token. A miss, or in lazy mode a failure before any byte, is 1:
 * the registry is tried. */
static int
npm_source(void *arg, struct http_client *hc, const struct npmlock_pkg *p, http_sink sink, void *sink_arg,
           const struct http_limits *lim, struct http_response *rs, char *src, size_t cap, struct err *e)
{
	struct oci_npm *mp = arg;
	struct counted k = {sink, sink_arg, 0};
	char sri[DIGEST_SRI_MAX], at[8 + DIGEST_HEX_MAX];
	const struct oci_ent *t = map_find(mp, digest_sri(&p->digest, sri));
	const char *h;
	int rc;

	if (t == NULL)
		return 1; /* npm_install: offline refuses, lazy goes to the origin */
	/* a slice above the per-package cap is fetched alone, under the cap */
	if (t->len > 0 && (lim->max_body <= 0 || (int64_t)t->len <= lim->max_body) &&
	    pack_ready(mp, hc, lim)) {
		/* the caller's sink checks the slice against p's integrity */
		rs->status = 200;
		rs->content_length = (int64_t)t->len;
		if (sink(sink_arg, mp->pack_b.p + t->off, (size_t)t->len, e) != 0)
			return -1;
		rs->body_bytes = (int64_t)t->len;
		h = mp->pack;
		rc = 0;
	} else {
		rc = shared_get(mp, hc, t->hex, counted_sink, &k, lim, rs, e);
		h = t->hex;
	}
	if (rc == 0) {
		snprintf(at, sizeof(at), "@sha256:%s", h);
		npm_source_set(src, cap < NPM_SOURCE_MAX ? cap : NPM_SOURCE_MAX, mp->mirror, at);
		return 0;
	}
	if (k.n == 0 && (rs->status == 404 || !mp->offline)) {
		err_clear(e);
		return 1;
	}
	return -1;
}

int
install_oci_npm(struct install_env *c, const manifest_t *m, const struct npmlock *l, const char *cache,
                struct npm_opts *no, struct err *e)
{
	struct oci_client *o;
	struct oci_npm *mp;
	struct buf doc = BUF_INIT(OCI_JSON_MAX * 8);
	char tag[OCI_TAG_MAX], hex[DIGEST_HEX_MAX], p256[PATH_MAX];
	size_t i, missing = 0;
	int r;

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
	if ((mp = calloc(1, sizeof(*mp))) == NULL ||
	    (mp->ent = calloc(l->npkgs + 1, sizeof(*mp->ent))) == NULL) {
		buf_free(&doc);
		no->source_arg = mp;
		install_oci_npm_end(c, no);
		return err_set(e, "internal", "out of memory");
	}
	mp->cap = (int)l->npkgs + 1;
	r = oci_manifest_layers((const char *)doc.p, doc.len, OCI_ANN_NPM_INTEGRITY, map_add, mp, e);
	if (r >= 0)
		oci_manifest_layers((const char *)doc.p, doc.len, OCI_ANN_NPM_PACK, pack_add, mp, e);
	buf_free(&doc);
	no->source_arg = mp;
	if (r < 0) {
		install_oci_npm_end(c, no);
		return c->cfg->install.mode == CFG_MODE_OFFLINE ? -1 : 0;
	}
	mp->offline = c->cfg->install.mode == CFG_MODE_OFFLINE;
	mp->mirror = c->cfg->install.oci_mirror;
	mp->proto = *o;
	pthread_mutex_init(&mp->mu, NULL);
	pthread_mutex_init(&mp->pack_mu, NULL);
	no->source = npm_source;
	err_clear(e);
	return 0;
}

void
install_oci_npm_end(struct install_env *c, struct npm_opts *no)
{
	struct oci_npm *mp = no->source_arg;

	if (mp == NULL)
		return;
	if (no->source != NULL) {
		/* a token the workers got serves the environment's next request */
		if (c->oci != NULL) {
			memcpy(c->oci->o.token, mp->proto.token, sizeof(mp->proto.token));
			memcpy(c->oci->o.token_scope, mp->proto.token_scope, sizeof(mp->proto.token_scope));
			c->oci->o.use_basic = mp->proto.use_basic;
		}
		pthread_mutex_destroy(&mp->mu);
		pthread_mutex_destroy(&mp->pack_mu);
	}
	buf_free(&mp->pack_b);
	free(mp->ent);
	memset(mp, 0, sizeof(*mp));
	free(mp);
	no->source = NULL;
	no->source_arg = NULL;
}
