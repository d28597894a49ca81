#ifndef ABX_OCI_H
#define ABX_OCI_H
/*
 * An OCI distribution registry as one more place cache blobs come from and
 * go to: its blobs are named by sha256 exactly as the cache's are, so a
 * blob read from it is checked against the pinned digest by the caller's
 * sink like any download, and nothing the registry says is trusted.
 *
 * Parsers (oci_parse.c, each with a fuzz target): the oci:// reference, the
 * WWW-Authenticate challenge, the token answer, a docker config file's
 * auths, a pack's list. The client (oci.c) speaks the distribution API over http_request:
 * HEAD and GET of a blob, a monolithic blob upload, a manifest PUT, each
 * retried once after a 401 with a Bearer token from the challenge's realm
 * or with Basic credentials.
 *
 * Credentials: the caller hands the client base64("user:pass") (the
 * configuration layer reads ABX_OCI_AUTH or the docker config file); they
 * go only as an Authorization header to the registry's origin or to a token
 * realm over https, never into a URL, a message or a log.
 *
 * Errors: oci.url (a reference outside the grammar), oci.auth (the registry
 * or its token server refused the credentials, or asks for credentials
 * there are none of), oci.registry (an answer outside the protocol: no
 * upload Location, a Location off the registry, a token answer without a
 * token), and the http.* codes of the transfer.
 */
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "net/http.h"

/* The distribution spec's repository name: at most 255 bytes. */
#define OCI_REPO_MAX 256
/* Tags: [A-Za-z0-9_][A-Za-z0-9._-]{0,127}. */
#define OCI_TAG_MAX 129
/* A bearer token: real ones (Docker Hub, GHCR, ECR) are under 3 KiB; the
 * header must fit the client's request head beside the longest URL. */
#define OCI_TOKEN_MAX 3072
/* base64 of "user:pass"; registry passwords and access tokens are far
 * shorter. */
#define OCI_BASIC_MAX 1024
/* A token answer or a docker config file larger than this is not one. */
#define OCI_JSON_MAX (256u << 10)

#define OCI_MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define OCI_MT_EMPTY "application/vnd.oci.empty.v1+json"
/* The layer annotation that names an npm package's integrity (SRI), so an
 * install can ask for the package's blob by sha256; the bytes are checked
 * against the lockfile's integrity whatever the annotation says. */
#define OCI_ANN_NPM_INTEGRITY "dev.agent-sandbox.npm.integrity"
/* The layer annotation of a pack: one blob holding small npm packages end
 * to end, listed as "<integrity> <bytes>" pairs separated by spaces in
 * the blob's order, so an install gets them in one request instead of one
 * each. Each package's bytes are checked against the lockfile's integrity
 * whatever the list says. */
#define OCI_ANN_NPM_PACK "dev.agent-sandbox.npm.pack"
/* A pack holds at most this many bytes: the reader keeps it in memory. */
#define OCI_PACK_MAX (8u << 20)
/* sha256 of the two bytes "{}", the empty descriptor's blob. */
#define OCI_EMPTY_SHA256 "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"

/* ---- References -------------------------------------------------------- */

struct oci_ref {
	char host[HTTP_HOST_MAX]; /* lower-cased; an IPv6 literal without [] */
	int port;                 /* explicit, else 443 (80 when plain) */
	int port_explicit;
	int plain;                 /* oci+http://: the registry is reached over plain http */
	char repo[OCI_REPO_MAX];   /* "team/tools" */
	char origin[HTTP_URL_MAX]; /* "https://host[:port]" */
};

/* Parse "oci://HOST[:PORT]/REPO": HOST a DNS name or IP literal ([v6]),
 * REPO path components of the distribution grammar
 * ([a-z0-9]+ joined by ".", "_", "__" or dashes, separated by "/"), no
 * userinfo, query, fragment or trailing slash; the registry is reached
 * over https. plain_ok also takes "oci+http://HOST[:PORT]/REPO", a
 * registry reached over plain http (install.allow_http_mirrors: what is
 * read from it is pinned; credentials are never sent to it). Returns 0, or
 * -1 with oci.url saying what is wrong. */
int oci_ref_parse(const char *s, int plain_ok, struct oci_ref *r, struct err *e);

/* 1 when s is a tag of the distribution grammar. */
int oci_tag_valid(const char *s);

/* "<tool>-<version>" as a tag into out: bytes outside the grammar become
 * "_", cut at OCI_TAG_MAX - 1. Returns 0, or -1 when tool is empty. */
int oci_tag_make(const char *tool, const char *version, char out[OCI_TAG_MAX]);

/* ---- Authentication ---------------------------------------------------- */

struct oci_challenge {
	int bearer; /* 1 Bearer, 0 Basic */
	char realm[HTTP_URL_MAX];
	char service[256];
	char scope[512];
};

/* A WWW-Authenticate value s[0..n): "Bearer realm=\"…\",service=…,scope=…"
 * or "Basic realm=…" (scheme case-insensitive, values tokens or quoted
 * strings with \-escapes, unknown parameters skipped). A Bearer challenge
 * must name a realm. Returns 0, or -1 with oci.auth (other schemes, a
 * malformed list, a value too long). */
int oci_challenge_parse(const char *s, size_t n, struct oci_challenge *c, struct err *e);

/* A token server's JSON answer: "token", else "access_token", into tok
 * (at most OCI_TOKEN_MAX - 1 bytes of visible ASCII). Returns 0, or -1 with
 * oci.registry (the answer's text is never quoted). */
int oci_token_parse(const char *json, size_t n, char tok[OCI_TOKEN_MAX], struct err *e);

/* The credential for host:port in a docker config file's text:
 * auths.<key>.auth where key is "host", "host:port" or either with a
 * scheme and a path ("https://host/v1/"). basic gets the base64 as written
 * once it decodes to "user:pass". Returns 1 found, 0 none for that host, -1
 * with oci.auth (not JSON, a bad auth value; the values are never
 * quoted). */
int oci_docker_auth_parse(const char *json, size_t n, const char *host, int port, int port_explicit,
                          char basic[OCI_BASIC_MAX], struct err *e);

/* "user:pass" as base64 into basic. Returns 0, or -1 with oci.auth when it
 * has no ":" or is too long. */
int oci_basic_from_userpass(const char *userpass, char basic[OCI_BASIC_MAX], struct err *e);

/* ---- Manifests --------------------------------------------------------- */

struct oci_layer {
	const char *media_type;
	const char *sha256; /* hex */
	int64_t size;
	const char *title;               /* org.opencontainers.image.title, or NULL */
	const char *ann_key, *ann_value; /* one more annotation, or NULL */
};

struct oci_annotation {
	const char *key, *value;
};

/* An OCI image manifest (schemaVersion 2) with artifactType, the empty
 * config descriptor, the layers and the annotations, written through w.
 * Returns 0, or -1 when w overflowed. */
struct json_w;
int oci_manifest_write(struct json_w *w, const char *artifact_type, const struct oci_layer *layers,
                       int nlayers, const struct oci_annotation *ann, int nann);

/* Each layer of the image manifest json[0..n) whose digest is a sha256 and
 * whose annotations hold key as a string: fn(arg, hex, value). Returns how
 * many, or -1 with oci.registry (not an image manifest). The answer is the
 * registry's: a caller uses it only to ask for blobs whose bytes it checks
 * against its own pins. */
int oci_manifest_layers(const char *json, size_t n, const char *key,
                        void (*fn)(void *arg, const char *hex, const char *value), void *arg, struct err *e);

/* A pack list, OCI_ANN_NPM_PACK's value v: "<integrity> <bytes>" pairs
 * separated by spaces, in the pack's order. fn(arg, sri, off, len) for
 * each when fn is not NULL (call once with NULL first: fn may have seen
 * entries before a malformed one). Returns the pack's bytes, the sum; 0
 * when the list is empty or malformed (an integrity of DIGEST_SRI_MAX bytes
 * or more, a size that is not a decimal from 1 without a leading zero, a
 * sum above OCI_PACK_MAX). The list is the registry's: a caller uses it
 * only to cut slices it checks against its own pins. */
uint64_t oci_pack_list(const char *v, void (*fn)(void *arg, const char *sri, uint64_t off, uint64_t len),
                       void *arg);

/* ---- Client ------------------------------------------------------------ */

struct oci_client {
	struct http_client *http; /* the caller's */
	struct oci_ref ref;
	const char *basic; /* the caller's base64 credential, or NULL */
	/* Hosts besides the registry a blob redirect or a token realm may
	 * name (install.allow_hosts): the caller's list. */
	const char *const *allow;
	int nallow;
	const char *allow_key; /* the key a refusal says to add a host to */
	struct http_limits limits;
	/* The last token and the scope it was got for. */
	char token[OCI_TOKEN_MAX];
	char token_scope[512];
	int use_basic; /* the registry asked for Basic */
};

/* A client for r over http (kept by the caller, used by one thread). A
 * plain registry (oci+http://) gets no credential. */
void oci_client_init(struct oci_client *o, struct http_client *http, const struct oci_ref *r,
                     const char *basic, const char *const *allow, int nallow, const char *allow_key);

/* HEAD the blob sha256:hex: 1 present (*size set when not NULL), 0 absent
 * (404), -1 with e. */
int oci_blob_head(struct oci_client *o, const char *hex, int64_t *size, struct err *e);

/* GET the blob sha256:hex into sink (redirects followed to the registry
 * and the allowed hosts; Authorization never leaves the registry's origin).
 * lim NULL = the client's limits. rs as http_request fills it (404: rs->
 * status says so). Returns 0, or -1 with e. The bytes are the caller's to
 * check: this function trusts nothing it read. */
int oci_blob_get(struct oci_client *o, const char *hex, http_sink sink, void *arg,
                 const struct http_limits *lim, struct http_response *rs, struct err *e);

/* Upload size bytes of fd (read by offset) as the blob sha256:hex: POST an
 * upload, then one PUT to its Location (which must stay on the registry)
 * with ?digest=. The registry checks the digest too. Returns 0, or -1. */
int oci_blob_put(struct oci_client *o, const char *hex, int fd, int64_t size, struct err *e);

/* The same from memory. */
int oci_blob_put_mem(struct oci_client *o, const char *hex, const void *buf, size_t len, struct err *e);

/* GET the image manifest tagged tag into out (at most OCI_JSON_MAX bytes
 * kept; out's max should be at least that). Returns 1, 0 when the registry
 * has no such tag (404), -1 with e. */
struct buf;
int oci_manifest_get(struct oci_client *o, const char *tag, struct buf *out, struct err *e);

/* PUT json[0..n) as the image manifest tagged tag. Returns 0, or -1. */
int oci_manifest_put(struct oci_client *o, const char *tag, const char *json, size_t n, struct err *e);

#endif
