/*
 * fetch --push: the verified blobs of a fetch go to an OCI registry, so a
 * fleet's machines read them from the registry they already run. Only
 * what the fetch verified is pushed (the cache's files by their sha256,
 * which the registry checks again on upload); a reader checks every byte
 * against its own pinned digest, so the registry is trusted with nothing.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/digest.h"
#include "base/fs.h"
#include "base/json.h"
#include "config/config.h"
#include "fetch_push.h"
#include "install/install.h"
#include "pkg/npmlock.h"
#include "tooling.h"

#define ARTIFACT_TYPE "application/vnd.agent-sandbox.tool.v1+json"
#define MT_TAR_GZIP "application/vnd.oci.image.layer.v1.tar+gzip"
#define MT_TAR_XZ "application/vnd.agent-sandbox.artifact.v1.tar+xz"
#define MT_FILE "application/vnd.agent-sandbox.artifact.v1"
#define MT_NPM "application/vnd.agent-sandbox.npm.package.v1.tar+gzip"
#define MT_NPM_PACK "application/vnd.agent-sandbox.npm.pack.v1"
/* A package this small goes into the pack too: most of a CLI's packages,
 * each of which would cost the registry a request of its own. */
#define PACK_ONE_MAX (256u << 10)
/* An image manifest of FETCH_PUSH_LAYERS_MAX layers is about 1 MiB. */
#define MANIFEST_JSON_MAX (2u << 20)

int
fetch_push_check(const char *ref, struct err *e)
{
	struct oci_ref r;

	return oci_ref_parse(ref, 0, &r, e);
}

int
fetch_push_open(struct fetch_push *p, const char *ref, struct tooling *t, struct err *e)
{
	int i, r;

	memset(p, 0, sizeof(*p));
	if (oci_ref_parse(ref, 0, &p->ref, e) != 0)
		return -1;
	r = config_oci_basic(p->ref.host, p->ref.port, p->ref.port_explicit, p->basic, NULL, 0, e);
	if (r < 0)
		return -1;
	if ((p->http = config_http_client(e)) == NULL)
		return -1;
	for (i = 0; i < t->cfg->install.allow_hosts.n && i < (int)(sizeof(p->allow) / sizeof(p->allow[0]));
	     i++)
		p->allow[i] = t->cfg->install.allow_hosts.v[i];
	oci_client_init(&p->oci, p->http, &p->ref, r == 1 ? p->basic : NULL, p->allow, i,
	                "install.allow_hosts");
	/* the empty descriptor every manifest's config names */
	r = oci_blob_head(&p->oci, OCI_EMPTY_SHA256, NULL, e);
	if (r == 0)
		r = oci_blob_put_mem(&p->oci, OCI_EMPTY_SHA256, "{}", 2, e) == 0 ? 1 : -1;
	return r < 0 ? -1 : 0;
}

void
fetch_push_close(struct fetch_push *p)
{
	memset(p->basic, 0, sizeof(p->basic));
	memset(p->oci.token, 0, sizeof(p->oci.token));
	http_client_free(p->http);
	p->http = NULL;
	free(p->layers);
	p->layers = NULL;
	buf_free(&p->pack);
	buf_free(&p->pack_list);
}

void
fetch_push_tool_begin(struct fetch_push *p)
{
	p->nlayers = 0;
	p->platforms[0] = '\0';
	p->failed = 0;
	err_clear(&p->err);
	buf_free(&p->pack);
	buf_free(&p->pack_list);
	p->pack = (struct buf)BUF_INIT(OCI_PACK_MAX);
	p->pack_list = (struct buf)BUF_INIT(OCI_JSON_MAX);
	p->npack = 0;
}

static void
note_platform(struct fetch_push *p, const char *platform)
{
	size_t n = strlen(p->platforms);

	if (strstr(p->platforms, platform) == NULL)
		snprintf(p->platforms + n, sizeof(p->platforms) - n, "%s%s", n ? "," : "", platform);
}

/* 0 when what fd holds hashes to hex (sha256), read from its start; fd is
 * then back at its start. The bytes read are appended to keep when it is
 * not NULL. */
static int
fd_is(int fd, const char *hex, const char *path, struct buf *keep, struct err *e)
{
	unsigned char b[16384];
	struct digest_ctx c;
	struct digest d;
	char got[DIGEST_HEX_MAX];
	ssize_t n;

	digest_init(&c, DIGEST_SHA256);
	while ((n = read(fd, b, sizeof(b))) > 0) {
		digest_update(&c, b, (size_t)n);
		if (keep != NULL)
			buf_put(keep, b, (size_t)n);
	}
	digest_final(&c, &d);
	if (n < 0 || lseek(fd, 0, SEEK_SET) != 0)
		return err_sys(e, "io.error", errno, "%s: %s", path, strerror(errno));
	if (strcmp(digest_hex(&d, got), hex) != 0)
		return err_set(
		    e, "install.checksum_mismatch",
		    "%s changed after it was verified: sha256 %s, not %s; nothing of it was pushed", path,
		    got, hex);
	return 0;
}

/* Upload path as the blob hex unless the registry has it; record it as a
 * layer of the tool's manifest. The bytes uploaded are those of the one
 * descriptor that was hashed here: a writer of the cache who replaces the
 * file after that changes nothing that is pushed. */
static void
push_blob(struct fetch_push *p, const char *hex, const char *path, const char *media_type, const char *title,
          const char *integrity)
{
	struct fetch_push_layer *l;
	struct stat st;
	struct err e = {0};
	size_t mark = p->pack.len;
	char ent[DIGEST_SRI_MAX + 32];
	int fd, r, i, packed;

	if (p->failed)
		return;
	/* one layer and one count per blob: a lockfile lists the same package
	 * at several paths */
	for (i = 0; i < p->nlayers; i++)
		if (strcmp(p->layers[i].sha256, hex) == 0)
			return;
	if (p->nlayers >= FETCH_PUSH_LAYERS_MAX) {
		err_set(&p->err, "usage", "more than %d blobs in one tool", FETCH_PUSH_LAYERS_MAX);
		p->failed = 1;
		return;
	}
	if (p->layers == NULL && (p->layers = calloc(FETCH_PUSH_LAYERS_MAX, sizeof(*p->layers))) == NULL) {
		err_set(&p->err, "internal", "out of memory");
		p->failed = 1;
		return;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0 || fstat(fd, &st) != 0) {
		err_set(&p->err, "io.error", "%s: cannot read the cached blob", path);
		if (fd >= 0)
			close(fd);
		p->failed = 1;
		return;
	}
	err_clear(&e);
	/* a small package goes into the pack as the bytes hashed here */
	packed = integrity != NULL && st.st_size <= PACK_ONE_MAX &&
	         (size_t)st.st_size <= OCI_PACK_MAX - p->pack.len;
	if (fd_is(fd, hex, path, packed ? &p->pack : NULL, &p->err) != 0) {
		close(fd);
		p->failed = 1;
		return;
	}
	r = oci_blob_head(&p->oci, hex, NULL, &e);
	if (r == 0)
		r = oci_blob_put(&p->oci, hex, fd, (int64_t)st.st_size, &e) == 0 ? 2 : -1;
	close(fd);
	if (r < 0) {
		err_copy(&p->err, &e);
		p->failed = 1;
		return;
	}
	snprintf(ent, sizeof(ent), "%s %lld ", integrity ? integrity : "", (long long)st.st_size);
	if (packed && (p->pack.over || p->pack.len - mark != (size_t)st.st_size ||
	               buf_put(&p->pack_list, ent, strlen(ent)) != 0)) {
		p->pack.len = mark; /* the list and the bytes stay in step */
		packed = 0;
	}
	p->npack += packed;
	if (r == 2)
		p->uploaded++;
	else
		p->present++;
	l = &p->layers[p->nlayers++];
	snprintf(l->sha256, sizeof(l->sha256), "%s", hex);
	snprintf(l->title, sizeof(l->title), "%s", title);
	snprintf(l->integrity, sizeof(l->integrity), "%s", integrity ? integrity : "");
	l->media_type = media_type;
	l->size = (int64_t)st.st_size;
}

static const char *
artifact_media_type(const char *url)
{
	size_t n = strlen(url);

	if ((n > 7 && strcmp(url + n - 7, ".tar.gz") == 0) || (n > 4 && strcmp(url + n - 4, ".tgz") == 0))
		return MT_TAR_GZIP;
	if (n > 7 && strcmp(url + n - 7, ".tar.xz") == 0)
		return MT_TAR_XZ;
	return MT_FILE;
}

void
fetch_push_artifact(struct fetch_push *p, const manifest_t *m, const char *platform,
                    const struct manifest_artifact *a, const char *path)
{
	const char *base = strrchr(a->url, '/');
	char title[300];

	snprintf(title, sizeof(title), "%.16s/%.200s", platform, base ? base + 1 : a->url);
	note_platform(p, platform);
	push_blob(p, a->sha256, path, artifact_media_type(a->url), title, NULL);
}

struct npm_push {
	struct fetch_push *p;
	const char *cache;
};

static void
npm_one(void *arg, const struct npmlock_pkg *pk, const char *hex)
{
	struct npm_push *np = arg;
	char path[PATH_MAX], title[300], sri[DIGEST_SRI_MAX];

	snprintf(title, sizeof(title), "%.200s@%.80s.tgz", pk->name, pk->version ? pk->version : "");
	if (fs_path_join(path, sizeof(path), np->cache, hex, NULL) != 0)
		return;
	push_blob(np->p, hex, path, MT_NPM, title, digest_sri(&pk->digest, sri));
}

void
fetch_push_npm(struct fetch_push *p, struct tooling *t, const manifest_t *m, const char *platform)
{
	struct npm_push np = {p, install_env_cache_dir(t->env)};
	struct err e = {0};
	int missing;

	note_platform(p, platform);
	missing = install_npm_blobs(t->env, m, platform, npm_one, &np, &e);
	if (missing != 0 && !p->failed) {
		if (missing < 0)
			err_copy(&p->err, &e);
		else
			err_set(&p->err, "install.failed", "%s %s: %d npm package(s) are not in the cache",
			        m->name, m->version, missing);
		p->failed = 1;
	}
}

/* Upload the pack (two packages or more) unless the registry has it: its
 * sha256 into hex. Returns 1 pushed, 0 no pack, -1 with e. */
static int
push_pack(struct fetch_push *p, char hex[DIGEST_HEX_MAX], struct err *e)
{
	struct digest d;
	int r;

	if (p->npack < 2)
		return 0;
	digest_buf(DIGEST_SHA256, p->pack.p, p->pack.len, &d);
	digest_hex(&d, hex);
	r = oci_blob_head(&p->oci, hex, NULL, e);
	if (r == 0)
		r = oci_blob_put_mem(&p->oci, hex, p->pack.p, p->pack.len, e) == 0 ? 1 : -1;
	return r < 0 ? -1 : 1;
}

int
fetch_push_tool_end(struct fetch_push *p, const manifest_t *m, char tag[OCI_TAG_MAX], struct err *e)
{
	char pack[DIGEST_HEX_MAX];
	struct oci_layer *l;
	struct oci_annotation ann[4] = {
	    {"dev.agent-sandbox.tool", m->name},
	    {"dev.agent-sandbox.version", m->version},
	    {"dev.agent-sandbox.platform", p->platforms},
	    {"dev.agent-sandbox.manifest.sha256", m->sha256},
	};
	struct json_w w;
	int i, r;

	if (p->failed) {
		err_copy(e, &p->err);
		return -1;
	}
	if (oci_tag_make(m->name, m->version, tag) != 0)
		return err_set(e, "internal", "no tag for %s", m->name);
	if ((r = push_pack(p, pack, e)) < 0)
		return -1;
	if ((l = calloc((size_t)p->nlayers + 1, sizeof(*l))) == NULL)
		return err_set(e, "internal", "out of memory");
	if (r > 0)
		l[p->nlayers] = (struct oci_layer){MT_NPM_PACK,          pack,
		                                   (int64_t)p->pack.len, NULL,
		                                   OCI_ANN_NPM_PACK,     (const char *)p->pack_list.p};
	for (i = 0; i < p->nlayers; i++)
		l[i] = (struct oci_layer){p->layers[i].media_type,
		                          p->layers[i].sha256,
		                          p->layers[i].size,
		                          p->layers[i].title,
		                          p->layers[i].integrity[0] ? OCI_ANN_NPM_INTEGRITY : NULL,
		                          p->layers[i].integrity};
	json_w_init(&w, MANIFEST_JSON_MAX);
	r = oci_manifest_write(&w, ARTIFACT_TYPE, l, p->nlayers + (l[p->nlayers].sha256 != NULL), ann, 4);
	free(l);
	if (r != 0) {
		json_w_free(&w);
		return err_set(e, "internal", "the image manifest of %s is larger than %u bytes", m->name,
		               MANIFEST_JSON_MAX);
	}
	r = oci_manifest_put(&p->oci, tag, w.buf, w.len, e);
	json_w_free(&w);
	if (r == 0)
		p->manifests++;
	return r;
}
