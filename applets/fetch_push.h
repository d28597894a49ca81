#ifndef ABX_APPLETS_FETCH_PUSH_H
#define ABX_APPLETS_FETCH_PUSH_H
/*
 * fetch --push oci://HOST[:PORT]/REPO (applets/fetch_push.c): after the
 * cache form has fetched and verified a tool, its blobs (tarball
 * artifacts, npm package tarballs) go to the registry, each HEADed first
 * and uploaded only when missing, then one image manifest per tool version
 * tagged <tool>-<version> lists them. The small npm packages go up once
 * more as one pack (OCI_ANN_NPM_PACK), which an install reads in one
 * request.
 */
#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"
#include "net/oci.h"
#include "pkg/manifest.h"

struct tooling;
struct json_w;

/* Layers one manifest may list: an npm CLI's packages for every platform
 * stay well below it (the largest lockfiles hold ~400 entries). */
#define FETCH_PUSH_LAYERS_MAX 4096

struct fetch_push_layer {
	char sha256[65];
	char title[300];
	char integrity[100];    /* an npm package's SRI (sha512-<base64>), "" for an artifact */
	const char *media_type; /* static */
	int64_t size;
};

struct fetch_push {
	struct oci_ref ref;
	struct http_client *http;
	struct oci_client oci;
	char basic[OCI_BASIC_MAX];
	const char *allow[64];
	int uploaded, present, manifests;
	/* the tool being pushed */
	struct fetch_push_layer *layers;
	int nlayers;
	char platforms[64];
	/* the tool's small npm packages end to end (OCI_ANN_NPM_PACK), and
	 * their "<integrity> <bytes>" list */
	struct buf pack, pack_list;
	int npack;
	struct err err; /* the first failure of the tool being pushed */
	int failed;
};

/* Parse ref (oci.url) before anything is fetched. Returns 0 or -1. */
int fetch_push_check(const char *ref, struct err *e);

/* Open the client for ref with t's allowed hosts and the configured
 * credential. Returns 0, or -1 with e. */
int fetch_push_open(struct fetch_push *p, const char *ref, struct tooling *t, struct err *e);

/* Start tool m's manifest. */
void fetch_push_tool_begin(struct fetch_push *p);
/* A verified tarball artifact of m at path for platform. */
void fetch_push_artifact(struct fetch_push *p, const manifest_t *m, const char *platform,
                         const struct manifest_artifact *a, const char *path);
/* Every cached npm package of m for platform. */
void fetch_push_npm(struct fetch_push *p, struct tooling *t, const manifest_t *m, const char *platform);
/* Upload m's manifest (when every blob went up). Returns 0, or -1 with e
 * (the first failure of the tool). */
int fetch_push_tool_end(struct fetch_push *p, const manifest_t *m, char tag[OCI_TAG_MAX], struct err *e);

void fetch_push_close(struct fetch_push *p);

#endif
