/*
 * The parsers and writers of core/net/oci.h that touch no network: the
 * oci:// reference and tag grammars, the WWW-Authenticate challenge, a
 * token server's answer, a docker config file's auths, base64 of a
 * credential, the image manifest, a pack's list. Each reads a view of its
 * input and never quotes a credential in an error.
 */
#include "net/oci.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/digest.h"
#include "base/json.h"

static int
lower_alnum(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One path component of the distribution grammar:
 * [a-z0-9]+ ((\.|_|__|-+)[a-z0-9]+)*. */
static int
repo_component_ok(const char *s, size_t n)
{
	size_t i = 0, k;

	if (n == 0 || !lower_alnum((unsigned char)s[0]))
		return 0;
	while (i < n) {
		while (i < n && lower_alnum((unsigned char)s[i]))
			i++;
		if (i == n)
			return 1;
		k = i;
		if (s[i] == '.')
			i++;
		else if (s[i] == '_')
			i += i + 1 < n && s[i + 1] == '_' ? 2 : 1;
		else
			while (i < n && s[i] == '-')
				i++;
		if (i == k || i == n || !lower_alnum((unsigned char)s[i]))
			return 0;
	}
	return 1;
}

int
oci_ref_parse(const char *s, int plain_ok, struct oci_ref *r, struct err *e)
{
	char url[HTTP_URL_MAX];
	const char *rest, *slash, *p, *c;
	struct http_url u;
	struct err tmp = {0};
	size_t hl;
	int plain = 0;

	memset(r, 0, sizeof(*r));
	if (s != NULL && plain_ok && strncmp(s, "oci+http://", 11) == 0) {
		plain = 1;
		rest = s + 11;
	} else if (s == NULL || strncmp(s, "oci://", 6) != 0) {
		return err_set(e, "oci.url", "%.120s: not an oci://HOST[:PORT]/REPO reference",
		               s ? s : "(none)");
	} else {
		rest = s + 6;
	}
	slash = strchr(rest, '/');
	if (slash == NULL || slash == rest)
		return err_set(e, "oci.url", "%.120s: no repository after the host (oci://HOST[:PORT]/REPO)",
		               s);
	hl = (size_t)(slash - rest);
	if (memchr(rest, '@', hl) != NULL)
		return err_set(e, "oci.url",
		               "oci://…: credentials do not belong in the reference (use "
		               "ABX_OCI_AUTH or a docker config file)");
	if (snprintf(url, sizeof(url), "%s://%.*s/", plain ? "http" : "https", (int)hl, rest) >=
	        (int)sizeof(url) ||
	    http_url_parse(url, &u, &tmp) != 0 || strcmp(u.target, "/") != 0)
		return err_set(e, "oci.url", "%.120s: not a usable host[:port]", s);
	p = slash + 1;
	if (strlen(p) >= OCI_REPO_MAX)
		return err_set(e, "oci.url", "%.120s: the repository is longer than %d bytes", s,
		               OCI_REPO_MAX - 1);
	for (c = p;; c = slash + 1) {
		slash = strchr(c, '/');
		hl = slash ? (size_t)(slash - c) : strlen(c);
		if (!repo_component_ok(c, hl))
			return err_set(
			    e, "oci.url",
			    "%.120s: repository component \"%.*s\" is not [a-z0-9] words joined by "
			    "., _, __ or -",
			    s, (int)(hl > 64 ? 64 : hl), c);
		if (slash == NULL)
			break;
	}
	r->plain = plain;
	snprintf(r->host, sizeof(r->host), "%s", u.host);
	r->port = u.port;
	r->port_explicit = u.port_explicit;
	snprintf(r->repo, sizeof(r->repo), "%s", p);
	u.target[0] = '\0';
	http_url_format(&u, r->origin, sizeof(r->origin));
	/* http_url_format writes the target, so the origin ends before it */
	r->origin[strcspn(r->origin + 8, "/") + 8] = '\0';
	return 0;
}

static int
tag_byte(int c, int first)
{
	return isalnum(c) || c == '_' || (!first && (c == '.' || c == '-'));
}

int
oci_tag_valid(const char *s)
{
	size_t i;

	if (s == NULL || s[0] == '\0' || strlen(s) >= OCI_TAG_MAX)
		return 0;
	for (i = 0; s[i]; i++)
		if (!tag_byte((unsigned char)s[i], i == 0))
			return 0;
	return 1;
}

int
oci_tag_make(const char *tool, const char *version, char out[OCI_TAG_MAX])
{
	size_t i;

	if (tool == NULL || tool[0] == '\0')
		return -1;
	snprintf(out, OCI_TAG_MAX, "%s-%s", tool, version ? version : "");
	for (i = 0; out[i]; i++)
		if (!tag_byte((unsigned char)out[i], i == 0))
			out[i] = '_';
	return 0;
}

/* ---- Challenge ----------------------------------------------------------- */

static int
tchar(int c)
{
	return isalnum(c) || (c != 0 && strchr("!#$%&'*+-.^_`|~/:=", c) != NULL);
}

/* One auth-param value at s[*i..n): a token or a quoted string, unescaped
 * into out. Returns 0, or -1 (malformed or longer than cap - 1). */
static int
param_value(const char *s, size_t n, size_t *i, char *out, size_t cap)
{
	size_t o = 0;

	if (*i < n && s[*i] == '"') {
		for ((*i)++; *i < n && s[*i] != '"'; (*i)++) {
			if (s[*i] == '\\' && *i + 1 < n)
				(*i)++;
			if ((unsigned char)s[*i] < 0x20 || o + 1 >= cap)
				return -1;
			out[o++] = s[*i];
		}
		if (*i >= n)
			return -1;
		(*i)++;
	} else {
		for (; *i < n && tchar((unsigned char)s[*i]) && s[*i] != ','; (*i)++) {
			if (o + 1 >= cap)
				return -1;
			out[o++] = s[*i];
		}
	}
	out[o] = '\0';
	return 0;
}

int
oci_challenge_parse(const char *s, size_t n, struct oci_challenge *c, struct err *e)
{
	char name[32], value[HTTP_URL_MAX];
	size_t i = 0, k;

	memset(c, 0, sizeof(*c));
	while (i < n && s[i] == ' ')
		i++;
	if (n - i >= 7 && strncasecmp(s + i, "Bearer ", 7) == 0) {
		c->bearer = 1;
		i += 7;
	} else if (n - i >= 6 && strncasecmp(s + i, "Basic ", 6) == 0) {
		i += 6;
	} else {
		return err_set(e, "oci.auth",
		               "the registry asks for an authentication scheme other than Bearer "
		               "or Basic");
	}
	while (i < n) {
		while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == ','))
			i++;
		if (i == n)
			break;
		for (k = 0; i < n && s[i] != '=' && tchar((unsigned char)s[i]); i++)
			if (k + 1 < sizeof(name))
				name[k++] = (char)tolower((unsigned char)s[i]);
		name[k] = '\0';
		if (k == 0 || i >= n || s[i] != '=')
			return err_set(e, "oci.auth", "malformed WWW-Authenticate challenge (at byte %zu)",
			               i);
		i++;
		if (param_value(s, n, &i, value, sizeof(value)) != 0)
			return err_set(e, "oci.auth", "malformed WWW-Authenticate challenge: %s value", name);
		if (strcmp(name, "realm") == 0)
			snprintf(c->realm, sizeof(c->realm), "%s", value);
		else if (strcmp(name, "service") == 0 && strlen(value) < sizeof(c->service))
			memcpy(c->service, value, strlen(value) + 1);
		else if (strcmp(name, "scope") == 0 && strlen(value) < sizeof(c->scope))
			memcpy(c->scope, value, strlen(value) + 1);
		else if (strcmp(name, "service") == 0 || strcmp(name, "scope") == 0)
			return err_set(e, "oci.auth", "WWW-Authenticate challenge: %s too long", name);
		while (i < n && (s[i] == ' ' || s[i] == '\t'))
			i++;
		if (i < n && s[i] != ',')
			return err_set(e, "oci.auth", "malformed WWW-Authenticate challenge (at byte %zu)",
			               i);
	}
	if (c->bearer && c->realm[0] == '\0')
		return err_set(e, "oci.auth", "the registry's Bearer challenge names no realm");
	return 0;
}

/* ---- Token answer --------------------------------------------------------- */

int
oci_token_parse(const char *json, size_t n, char tok[OCI_TOKEN_MAX], struct err *e)
{
	struct json_limits lim = json_default_limits;
	struct json_doc d;
	const char *t;
	size_t i, len;
	struct err tmp = {0};

	tok[0] = '\0';
	lim.max_bytes = OCI_JSON_MAX;
	lim.max_depth = 8;
	if (json_parse(&d, json, n, &lim, &tmp) != 0)
		return err_set(e, "oci.registry", "the token server's answer is not JSON (%s)", tmp.code);
	t = json_get_str(d.root, "token");
	if (t == NULL || t[0] == '\0')
		t = json_get_str(d.root, "access_token");
	len = t ? strlen(t) : 0;
	for (i = 0; i < len; i++)
		if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
			break;
	if (len == 0 || i < len || len >= OCI_TOKEN_MAX) {
		json_free(&d);
		return err_set(e, "oci.registry",
		               len == 0 ? "the token server's answer has no token"
		                        : "the token server's token is too long or not printable ASCII");
	}
	memcpy(tok, t, len + 1);
	json_free(&d);
	return 0;
}

/* ---- Base64 --------------------------------------------------------------- */

static const char b64set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t
b64_encode(const unsigned char *in, size_t n, char *out)
{
	size_t i, o = 0;
	unsigned v;

	for (i = 0; i < n; i += 3) {
		v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
		    (i + 2 < n ? in[i + 2] : 0);
		out[o++] = b64set[v >> 18 & 63];
		out[o++] = b64set[v >> 12 & 63];
		out[o++] = i + 1 < n ? b64set[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? b64set[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

/* Decode s (padding required) into out; returns the length or -1. */
static long
b64_decode(const char *s, unsigned char *out, size_t cap)
{
	size_t n = strlen(s), i, o = 0;
	int k, pad = 0;
	unsigned v;

	if (n == 0 || n % 4 != 0)
		return -1;
	for (i = 0; i < n; i += 4) {
		v = 0;
		for (k = 0; k < 4; k++) {
			const char *p = s[i + k] ? strchr(b64set, s[i + k]) : NULL;
			if (s[i + k] == '=' && i + 4 == n && k >= 2) {
				pad++;
				v <<= 6;
				continue;
			}
			if (p == NULL || pad)
				return -1;
			v = v << 6 | (unsigned)(p - b64set);
		}
		if (o + 3 - (size_t)pad > cap)
			return -1;
		out[o++] = (unsigned char)(v >> 16);
		if (pad < 2)
			out[o++] = (unsigned char)(v >> 8);
		if (pad < 1)
			out[o++] = (unsigned char)v;
	}
	return (long)o;
}

int
oci_basic_from_userpass(const char *userpass, char basic[OCI_BASIC_MAX], struct err *e)
{
	size_t n = userpass ? strlen(userpass) : 0;

	basic[0] = '\0';
	if (n == 0 || strchr(userpass, ':') == NULL || userpass[0] == ':')
		return err_set(e, "oci.auth", "the registry credential is not user:password");
	if ((n + 2) / 3 * 4 >= OCI_BASIC_MAX)
		return err_set(e, "oci.auth", "the registry credential is too long");
	b64_encode((const unsigned char *)userpass, n, basic);
	return 0;
}

/* ---- Docker config --------------------------------------------------------- */

/* Does an auths key name host[:port]? Keys seen in the wild: "host",
 * "host:port", "https://host", "https://host/v1/". */
static int
auth_key_matches(const char *key, const char *host, int port, int port_explicit)
{
	char want[HTTP_HOST_MAX + 16];
	const char *k = key;
	size_t n;

	if (strncasecmp(k, "https://", 8) == 0)
		k += 8;
	else if (strncasecmp(k, "http://", 7) == 0)
		k += 7;
	n = strcspn(k, "/");
	if (strchr(host, ':') != NULL)
		snprintf(want, sizeof(want), port_explicit ? "[%s]:%d" : "[%s]", host, port);
	else
		snprintf(want, sizeof(want), port_explicit ? "%s:%d" : "%s", host, port);
	return strlen(want) == n && strncasecmp(k, want, n) == 0;
}

int
oci_docker_auth_parse(const char *json, size_t n, const char *host, int port, int port_explicit,
                      char basic[OCI_BASIC_MAX], struct err *e)
{
	struct json_limits lim = json_default_limits;
	const struct json_val *auths;
	unsigned char dec[OCI_BASIC_MAX];
	struct json_doc d;
	struct err tmp = {0};
	size_t i;
	long dl;

	basic[0] = '\0';
	lim.max_bytes = OCI_JSON_MAX;
	lim.max_depth = 16;
	lim.reject_dup_keys = 0;
	if (json_parse(&d, json, n, &lim, &tmp) != 0)
		return err_set(e, "oci.auth", "the docker config file is not JSON (%s)", tmp.code);
	auths = json_get(d.root, "auths");
	for (i = 0; json_is(auths, JSON_OBJECT) && i < auths->u.obj.n; i++) {
		const struct json_member *m = &auths->u.obj.m[i];
		const char *a = json_get_str(&m->val, "auth");

		if (!auth_key_matches(m->key, host, port, port_explicit) || a == NULL)
			continue;
		dl = strlen(a) < OCI_BASIC_MAX ? b64_decode(a, dec, sizeof(dec) - 1) : -1;
		if (dl <= 0 || memchr(dec, ':', (size_t)dl) == NULL || dec[0] == ':') {
			json_free(&d);
			return err_set(
			    e, "oci.auth",
			    "the docker config file's auth for %.100s is not base64 of user:password", host);
		}
		snprintf(basic, OCI_BASIC_MAX, "%s", a);
		json_free(&d);
		return 1;
	}
	json_free(&d);
	return 0;
}

/* ---- Manifest ---------------------------------------------------------------- */

static void
descriptor(struct json_w *w, const char *media_type, const char *hex, int64_t size)
{
	char dg[80];

	snprintf(dg, sizeof(dg), "sha256:%s", hex);
	json_w_kstr(w, "mediaType", media_type);
	json_w_kstr(w, "digest", dg);
	json_w_kint(w, "size", size);
}

int
oci_manifest_write(struct json_w *w, const char *artifact_type, const struct oci_layer *layers, int nlayers,
                   const struct oci_annotation *ann, int nann)
{
	int i;

	json_w_obj(w);
	json_w_kint(w, "schemaVersion", 2);
	json_w_kstr(w, "mediaType", OCI_MT_MANIFEST);
	json_w_kstr(w, "artifactType", artifact_type);
	json_w_key(w, "config");
	json_w_obj(w);
	descriptor(w, OCI_MT_EMPTY, OCI_EMPTY_SHA256, 2);
	json_w_end(w);
	json_w_key(w, "layers");
	json_w_arr(w);
	for (i = 0; i < nlayers; i++) {
		json_w_obj(w);
		descriptor(w, layers[i].media_type, layers[i].sha256, layers[i].size);
		if (layers[i].title != NULL || layers[i].ann_key != NULL) {
			json_w_key(w, "annotations");
			json_w_obj(w);
			if (layers[i].title != NULL)
				json_w_kstr(w, "org.opencontainers.image.title", layers[i].title);
			if (layers[i].ann_key != NULL && layers[i].ann_value != NULL)
				json_w_kstr(w, layers[i].ann_key, layers[i].ann_value);
			json_w_end(w);
		}
		json_w_end(w);
	}
	json_w_end(w);
	if (nann > 0) {
		json_w_key(w, "annotations");
		json_w_obj(w);
		for (i = 0; i < nann; i++)
			json_w_kstr(w, ann[i].key, ann[i].value);
		json_w_end(w);
	}
	json_w_end(w);
	return w->overflow ? -1 : 0;
}

int
oci_manifest_layers(const char *json, size_t n, const char *key,
                    void (*fn)(void *arg, const char *hex, const char *value), void *arg, struct err *e)
{
	struct json_limits lim = json_default_limits;
	const struct json_val *layers;
	struct json_doc d;
	struct err tmp = {0};
	size_t i;
	int count = 0;

	lim.max_bytes = OCI_JSON_MAX * 8;
	lim.max_depth = 8;
	if (json_parse(&d, json, n, &lim, &tmp) != 0)
		return err_set(e, "oci.registry", "the registry's image manifest is not JSON (%s)", tmp.code);
	layers = json_get(d.root, "layers");
	if (!json_is(layers, JSON_ARRAY)) {
		json_free(&d);
		return err_set(e, "oci.registry",
		               "the registry's answer is not an image manifest (no layers)");
	}
	for (i = 0; i < layers->u.arr.n; i++) {
		const struct json_val *l = &layers->u.arr.v[i];
		const char *dg = json_get_str(l, "digest"),
		           *v = json_get_str(json_get(l, "annotations"), key);

		if (dg == NULL || v == NULL || strncmp(dg, "sha256:", 7) != 0 || strlen(dg + 7) != 64 ||
		    strspn(dg + 7, "0123456789abcdef") != 64)
			continue;
		fn(arg, dg + 7, v);
		count++;
	}
	json_free(&d);
	return count;
}

uint64_t
oci_pack_list(const char *v, void (*fn)(void *arg, const char *sri, uint64_t off, uint64_t len), void *arg)
{
	char sri[DIGEST_SRI_MAX], *end;
	unsigned long long len;
	uint64_t off = 0;
	size_t n;

	for (v += strspn(v, " "); *v != '\0'; v = end + strspn(end, " ")) {
		n = strcspn(v, " ");
		if (n >= sizeof(sri) || v[n] != ' ' || v[n + 1] < '1' || v[n + 1] > '9')
			return 0;
		memcpy(sri, v, n);
		sri[n] = '\0';
		len = strtoull(v + n + 1, &end, 10);
		if ((*end != ' ' && *end != '\0') || len > OCI_PACK_MAX - off)
			return 0;
		if (fn != NULL)
			fn(arg, sri, off, len);
		off += len;
	}
	return off;
}
