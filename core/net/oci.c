/*
 * The distribution API client of core/net/oci.h over http_request. Every
 * request goes out with the Authorization the registry last asked for
 * (none at first); a 401 is answered once: a Bearer challenge by a token
 * from its realm (for the challenge's scope), a Basic one by the caller's
 * credential. The registry itself, and the caller's allowed hosts, are
 * the only hosts a request, a redirect or a token realm may reach.
 */
#include "net/oci.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/digest.h"
#include "net/hostrule.h"

/* A token answer, an upload's or a manifest PUT's error body: small. */
#define OCI_SMALL_BODY (64 * 1024)

void
oci_client_init(struct oci_client *o, struct http_client *http, const struct oci_ref *r, const char *basic,
                const char *const *allow, int nallow, const char *allow_key)
{
	memset(o, 0, sizeof(*o));
	o->http = http;
	o->ref = *r;
	/* no credential crosses plain http */
	o->basic = basic != NULL && basic[0] != '\0' && !r->plain ? basic : NULL;
	o->allow = allow;
	o->nallow = nallow;
	o->allow_key = allow_key ? allow_key : "install.allow_hosts";
	http_limits_default(&o->limits);
}

/* The registry's own host and port, then the allowed list. */
static int
host_ok(void *arg, const struct http_url *u, struct err *e)
{
	const struct oci_client *o = arg;

	/* plain http only to a plain registry itself */
	if (!u->https && !(o->ref.plain && strcmp(u->host, o->ref.host) == 0 && u->port == o->ref.port))
		return err_set(e, "http.redirect", "%s: only https is allowed for the registry %s", u->host,
		               o->ref.host);
	if ((strcmp(u->host, o->ref.host) == 0 && u->port == o->ref.port) ||
	    hostrule_match(o->allow, o->nallow, u->host, u->port))
		return 0;
	return err_set(
	    e, "http.redirect",
	    "host %s (port %d) refused: the registry %s:%d sent us there, and it is not in %s; fix: add "
	    "%s to %s to allow it",
	    u->host, u->port, o->ref.host, o->ref.port, o->allow_key, u->host, o->allow_key);
}

/* Percent-encode s into out (unreserved bytes kept). Returns 0 or -1. */
static int
pct_encode(const char *s, char *out, size_t cap)
{
	size_t o = 0;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    strchr("-._~", c)) {
			if (o + 1 >= cap)
				return -1;
			out[o++] = (char)c;
		} else {
			if (o + 3 >= cap)
				return -1;
			/* upper-case digits, as RFC 3986 asks of producers */
			out[o] = '%';
			hex_encode(&c, 1, out + o + 1);
			out[o + 1] = (char)toupper((unsigned char)out[o + 1]);
			out[o + 2] = (char)toupper((unsigned char)out[o + 2]);
			o += 3;
		}
	}
	out[o] = '\0';
	return 0;
}

/* A token for challenge c from its realm (https, the registry or an
 * allowed host), with the Basic credential when there is one. */
static int
fetch_token(struct oci_client *o, const struct oci_challenge *c, struct err *e)
{
	char url[HTTP_URL_MAX], svc[512], scope[1024], auth[OCI_BASIC_MAX + 32];
	struct http_request rq;
	struct http_response rs;
	struct http_url ru;
	struct buf body;
	int r;

	if (http_url_parse(c->realm, &ru, e) != 0)
		return err_set(e, "oci.auth", "the registry's token realm is not a usable URL");
	if (!ru.https && o->basic != NULL)
		return err_set(e, "oci.auth",
		               "the registry's token realm %s is plain http: credentials are not sent "
		               "there",
		               ru.host);
	if (pct_encode(c->service, svc, sizeof(svc)) != 0 ||
	    pct_encode(c->scope, scope, sizeof(scope)) != 0 ||
	    snprintf(url, sizeof(url), "%s%sservice=%s%s%s", c->realm, strchr(c->realm, '?') ? "&" : "?", svc,
	             scope[0] ? "&scope=" : "", scope) >= (int)sizeof(url))
		return err_set(e, "oci.auth", "the token request does not fit in a URL");
	http_request_init(&rq, url);
	rq.limits = o->limits;
	rq.limits.max_body = OCI_SMALL_BODY;
	rq.host_ok = host_ok;
	rq.host_arg = o;
	if (o->basic != NULL) {
		snprintf(auth, sizeof(auth), "Authorization: Basic %s", o->basic);
		rq.headers[rq.nheaders++] = auth;
	}
	body = (struct buf)BUF_INIT(OCI_SMALL_BODY);
	rq.sink = buf_http_sink;
	rq.sink_arg = &body;
	r = http_request(o->http, &rq, &rs, e);
	memset(auth, 0, sizeof(auth));
	if (r != 0) {
		buf_free(&body);
		if (rs.status == 401 || rs.status == 403)
			return err_set(e, "oci.auth", "the token server %s refused %s (HTTP %d)", ru.host,
			               o->basic ? "the credentials" : "an anonymous request", rs.status);
		return -1;
	}
	r = oci_token_parse((const char *)body.p, body.len, o->token, e);
	buf_free(&body);
	if (r != 0)
		return -1;
	snprintf(o->token_scope, sizeof(o->token_scope), "%s", c->scope);
	return 0;
}

/* The Authorization header for the next request into buf, or NULL. */
static const char *
auth_header(const struct oci_client *o, char *buf, size_t cap)
{
	if (o->token[0] != '\0')
		snprintf(buf, cap, "Authorization: Bearer %s", o->token);
	else if (o->use_basic && o->basic != NULL)
		snprintf(buf, cap, "Authorization: Basic %s", o->basic);
	else
		return NULL;
	return buf;
}

/* After a 401: set up what the challenge asks for. Returns 0 to retry, -1
 * with oci.auth. */
static int
answer_challenge(struct oci_client *o, const struct http_response *rs, int tried, struct err *e)
{
	struct oci_challenge c;

	if (rs->www_authenticate[0] == '\0')
		return err_set(e, "oci.auth", "%s answered 401 without a usable WWW-Authenticate challenge",
		               o->ref.host);
	if (oci_challenge_parse(rs->www_authenticate, strlen(rs->www_authenticate), &c, e) != 0)
		return -1;
	if (tried)
		return err_set(e, "oci.auth", "%s refused %s", o->ref.host,
		               o->basic ? "the credentials for it"
		                        : "an anonymous request; fix: set ABX_OCI_AUTH "
		                          "or add the registry to a docker config file");
	if (!c.bearer) {
		if (o->basic == NULL)
			return err_set(e, "oci.auth",
			               "%s asks for credentials and there are none; fix: set "
			               "ABX_OCI_AUTH or add the registry to a docker config file",
			               o->ref.host);
		o->use_basic = 1;
		return 0;
	}
	return fetch_token(o, &c, e);
}

/* One distribution call: rq (url, method, body, sink set by the caller)
 * with the client's Authorization, answered once after a 401. The http
 * client keeps the header on the registry's origin. */
static int
call(struct oci_client *o, struct http_request *rq, struct http_response *rs, struct err *e)
{
	char auth[OCI_TOKEN_MAX + 32];
	int base = rq->nheaders, tried, r = -1;

	rq->host_ok = host_ok;
	rq->host_arg = o;
	for (tried = 0; tried < 2; tried++) {
		rq->nheaders = base;
		if (auth_header(o, auth, sizeof(auth)) != NULL)
			rq->headers[rq->nheaders++] = auth;
		r = http_request(o->http, rq, rs, e);
		if (r == 0 || rs->status != 401)
			break;
		if (answer_challenge(o, rs, tried, e) != 0) {
			r = -1;
			break;
		}
		r = -1;
	}
	memset(auth, 0, sizeof(auth));
	rq->nheaders = base;
	return r;
}

static int
blob_url(const struct oci_client *o, const char *what, const char *hex, char *url, size_t cap, struct err *e)
{
	if (strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64)
		return err_set(e, "internal", "a blob digest must be 64 lower-case hex digits");
	if (snprintf(url, cap, "%s/v2/%s/%s/sha256:%s", o->ref.origin, o->ref.repo, what, hex) >= (int)cap)
		return err_set(e, "oci.url", "the blob URL for %s is too long", o->ref.repo);
	return 0;
}

int
oci_blob_head(struct oci_client *o, const char *hex, int64_t *size, struct err *e)
{
	char url[HTTP_URL_MAX];
	struct http_request rq;
	struct http_response rs;

	if (blob_url(o, "blobs", hex, url, sizeof(url), e) != 0)
		return -1;
	http_request_init(&rq, url);
	rq.method = "HEAD";
	rq.limits = o->limits;
	if (call(o, &rq, &rs, e) != 0)
		return rs.status == 404 ? 0 : -1;
	if (size != NULL)
		*size = rs.content_length;
	return 1;
}

int
oci_blob_get(struct oci_client *o, const char *hex, http_sink sink, void *arg, const struct http_limits *lim,
             struct http_response *rs, struct err *e)
{
	char url[HTTP_URL_MAX];
	struct http_request rq;

	if (blob_url(o, "blobs", hex, url, sizeof(url), e) != 0)
		return -1;
	http_request_init(&rq, url);
	rq.limits = lim ? *lim : o->limits;
	rq.sink = sink;
	rq.sink_arg = arg;
	return call(o, &rq, rs, e);
}

/* POST an upload; its Location resolved, on the registry's origin, into
 * loc. */
static int
upload_start(struct oci_client *o, char *loc, size_t cap, struct err *e)
{
	char url[HTTP_URL_MAX];
	struct http_request rq;
	struct http_response rs;
	struct http_url base, next;

	if (snprintf(url, sizeof(url), "%s/v2/%s/blobs/uploads/", o->ref.origin, o->ref.repo) >=
	    (int)sizeof(url))
		return err_set(e, "oci.url", "the upload URL for %s is too long", o->ref.repo);
	http_request_init(&rq, url);
	rq.method = "POST";
	rq.limits = o->limits;
	rq.limits.max_body = OCI_SMALL_BODY;
	if (call(o, &rq, &rs, e) != 0)
		return -1;
	if (rs.location[0] == '\0')
		return err_set(e, "oci.registry",
		               "%s answered the upload request (HTTP %d) without a Location", o->ref.host,
		               rs.status);
	if (http_url_parse(url, &base, e) != 0 || http_url_resolve(&base, rs.location, &next, e) != 0)
		return err_set(e, "oci.registry", "%s: the upload Location is not a usable URL", o->ref.host);
	if (!next.https || strcmp(next.host, o->ref.host) != 0 || next.port != o->ref.port)
		return err_set(e, "oci.registry", "%s: the upload Location leads to %s, off the registry",
		               o->ref.host, next.host);
	if (http_url_format(&next, loc, cap) < 0)
		return err_set(e, "oci.registry", "%s: the upload Location is too long", o->ref.host);
	return 0;
}

static int
blob_put(struct oci_client *o, const char *hex, const void *mem, int fd, int64_t size, struct err *e)
{
	char loc[HTTP_URL_MAX], url[HTTP_URL_MAX];
	struct http_request rq;
	struct http_response rs;

	if (strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64)
		return err_set(e, "internal", "a blob digest must be 64 lower-case hex digits");
	if (upload_start(o, loc, sizeof(loc), e) != 0)
		return -1;
	if (snprintf(url, sizeof(url), "%s%sdigest=sha256:%s", loc, strchr(loc, '?') ? "&" : "?", hex) >=
	    (int)sizeof(url))
		return err_set(e, "oci.registry", "%s: the upload Location is too long", o->ref.host);
	http_request_init(&rq, url);
	rq.method = "PUT";
	rq.limits = o->limits;
	rq.limits.max_body = OCI_SMALL_BODY;
	rq.body = mem;
	rq.body_fd = fd;
	rq.body_len = size;
	rq.headers[rq.nheaders++] = "Content-Type: application/octet-stream";
	return call(o, &rq, &rs, e);
}

int
oci_blob_put(struct oci_client *o, const char *hex, int fd, int64_t size, struct err *e)
{
	return blob_put(o, hex, NULL, fd, size, e);
}

int
oci_blob_put_mem(struct oci_client *o, const char *hex, const void *buf, size_t len, struct err *e)
{
	return blob_put(o, hex, buf, -1, (int64_t)len, e);
}

/* The URL of the manifest tagged tag: 0, or -1 with e (oci.url). */
static int
manifest_url(const struct oci_client *o, const char *tag, char url[HTTP_URL_MAX], struct err *e)
{
	if (!oci_tag_valid(tag))
		return err_set(e, "oci.url", "%.140s is not a tag ([A-Za-z0-9_][A-Za-z0-9._-]{0,127})", tag);
	if (snprintf(url, HTTP_URL_MAX, "%s/v2/%s/manifests/%s", o->ref.origin, o->ref.repo, tag) >=
	    HTTP_URL_MAX)
		return err_set(e, "oci.url", "the manifest URL for %s is too long", o->ref.repo);
	return 0;
}

int
oci_manifest_put(struct oci_client *o, const char *tag, const char *json, size_t n, struct err *e)
{
	char url[HTTP_URL_MAX];
	struct http_request rq;
	struct http_response rs;

	if (manifest_url(o, tag, url, e) != 0)
		return -1;
	http_request_init(&rq, url);
	rq.method = "PUT";
	rq.limits = o->limits;
	rq.limits.max_body = OCI_SMALL_BODY;
	rq.body = json;
	rq.body_len = (int64_t)n;
	rq.headers[rq.nheaders++] = "Content-Type: " OCI_MT_MANIFEST;
	return call(o, &rq, &rs, e);
}

int
oci_manifest_get(struct oci_client *o, const char *tag, struct buf *out, struct err *e)
{
	char url[HTTP_URL_MAX];
	struct http_request rq;
	struct http_response rs;

	if (manifest_url(o, tag, url, e) != 0)
		return -1;
	http_request_init(&rq, url);
	rq.limits = o->limits;
	rq.limits.max_body = (int64_t)out->max;
	rq.headers[rq.nheaders++] = "Accept: " OCI_MT_MANIFEST;
	rq.sink = buf_http_sink;
	rq.sink_arg = out;
	if (call(o, &rq, &rs, e) != 0)
		return rs.status == 404 ? 0 : -1;
	return 1;
}
