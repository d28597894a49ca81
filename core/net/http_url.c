/* URLs for the HTTP client: parse, resolve a Location against a base,
 * format, and the NO_PROXY rule (core/net/http.h). Pure: no I/O. */
#include "net/http.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- URLs ------------------------------------------------------------- */

static int
is_unreserved_host(int c)
{
	return isalnum(c) || c == '-' || c == '.' || c == '_';
}

/* Bytes refused anywhere in a URL: controls, space, DEL, non-ASCII (a
 * request line cannot carry them and they hide request-splitting tricks),
 * and backslash (browsers read it as '/', servers do not). */
static int
bad_url_byte(unsigned char c)
{
	return c <= 0x20 || c >= 0x7f || c == '\\';
}

static int
parse_authority(const char *a, size_t n, int https, struct http_url *u, struct err *e)
{
	const char *p = a, *end = a + n, *hend, *colon = NULL;
	size_t hl, i;
	long port;

	if (memchr(a, '@', n) != NULL)
		return err_set(e, "http.url",
		               "credentials in a URL are refused (use a header or the configuration)");
	if (n > 0 && *p == '[') {
		hend = memchr(p, ']', n);
		if (hend == NULL)
			return err_set(e, "http.url", "unterminated IPv6 literal");
		for (i = 1; p + i < hend; i++)
			if (!isxdigit((unsigned char)p[i]) && p[i] != ':' && p[i] != '.')
				return err_set(e, "http.url", "bad IPv6 literal");
		hl = (size_t)(hend - p - 1);
		if (hl == 0 || hl >= sizeof(u->host))
			return err_set(e, "http.url", "bad IPv6 literal");
		memcpy(u->host, p + 1, hl);
		u->host[hl] = '\0';
		p = hend + 1;
		if (p < end && *p != ':')
			return err_set(e, "http.url", "junk after IPv6 literal");
		if (p < end)
			colon = p;
	} else {
		colon = memchr(p, ':', n);
		hend = colon ? colon : end;
		hl = (size_t)(hend - p);
		if (hl == 0)
			return err_set(e, "http.url", "empty host");
		if (hl >= sizeof(u->host))
			return err_set(e, "http.url", "host name too long");
		for (i = 0; i < hl; i++) {
			if (!is_unreserved_host((unsigned char)p[i]))
				return err_set(e, "http.url", "bad character in host name");
			u->host[i] = (char)tolower((unsigned char)p[i]);
		}
		u->host[hl] = '\0';
	}
	u->https = https;
	u->port = https ? 443 : 80;
	u->port_explicit = 0;
	if (colon != NULL) {
		port = 0;
		if (colon + 1 == end || end - colon > 6)
			return err_set(e, "http.url", "bad port");
		for (p = colon + 1; p < end; p++) {
			if (!isdigit((unsigned char)*p))
				return err_set(e, "http.url", "bad port");
			port = port * 10 + (*p - '0');
		}
		if (port < 1 || port > 65535)
			return err_set(e, "http.url", "port out of range");
		u->port = (int)port;
		u->port_explicit = 1;
	}
	return 0;
}

static int
set_target(struct http_url *u, const char *t, size_t n, struct err *e)
{
	const char *hash = memchr(t, '#', n);
	size_t need;

	if (hash != NULL)
		n = (size_t)(hash - t);
	need = n + (n == 0 || t[0] != '/' ? 1 : 0);
	if (need >= sizeof(u->target))
		return err_set(e, "http.url", "URL too long");
	if (n == 0 || t[0] != '/') {
		u->target[0] = '/';
		memcpy(u->target + 1, t, n);
	} else {
		memcpy(u->target, t, n);
	}
	u->target[need] = '\0';
	return 0;
}

int
http_url_parse(const char *url, struct http_url *u, struct err *e)
{
	size_t n = strlen(url), i, al;
	const char *a;
	int https;

	memset(u, 0, sizeof(*u));
	if (n >= HTTP_URL_MAX)
		return err_set(e, "http.url", "URL longer than %d bytes", HTTP_URL_MAX - 1);
	for (i = 0; i < n; i++)
		if (bad_url_byte((unsigned char)url[i]))
			return err_set(e, "http.url",
			               "URL contains a space, control or non-ASCII byte at offset %zu", i);
	if (strncasecmp(url, "https://", 8) == 0)
		https = 1, a = url + 8;
	else if (strncasecmp(url, "http://", 7) == 0)
		https = 0, a = url + 7;
	else
		return err_set(e, "http.url", "only http:// and https:// URLs are supported: %.60s", url);
	al = strcspn(a, "/?#");
	if (parse_authority(a, al, https, u, e) != 0)
		return -1;
	return set_target(u, a + al, strlen(a + al), e);
}

/* RFC 3986 §5.2.4 on path in place (query untouched). */
static void
remove_dots(char *path)
{
	char out[HTTP_URL_MAX];
	char *q = strchr(path, '?');
	size_t plen = q ? (size_t)(q - path) : strlen(path), o = 0, i = 0;

	while (i < plen) {
		if (strncmp(path + i, "/./", 3) == 0 && i + 3 <= plen) {
			i += 2;
		} else if (i + 2 == plen && strncmp(path + i, "/.", 2) == 0) {
			out[o++] = '/';
			i += 2;
		} else if (i + 4 <= plen && strncmp(path + i, "/../", 4) == 0) {
			i += 3;
			while (o > 0 && out[--o] != '/')
				;
		} else if (i + 3 == plen && strncmp(path + i, "/..", 3) == 0) {
			i += 3;
			while (o > 0 && out[--o] != '/')
				;
			out[o++] = '/';
		} else {
			do
				out[o++] = path[i++];
			while (i < plen && path[i] != '/');
		}
	}
	if (o == 0)
		out[o++] = '/';
	snprintf(out + o, sizeof(out) - o, "%s", path + plen);
	memcpy(path, out, strlen(out) + 1);
}

int
http_url_resolve(const struct http_url *base, const char *ref, struct http_url *out, struct err *e)
{
	char buf[HTTP_URL_MAX];
	size_t i, n = strlen(ref), sl;
	const char *s;

	for (i = 0; i < n; i++)
		if (bad_url_byte((unsigned char)ref[i]))
			return err_set(e, "http.url",
			               "redirect target contains a space, control or non-ASCII byte");
	/* A scheme: letters, digits, + - . before the first ':' and before
	 * any '/', '?' or '#'. */
	for (s = ref; *s && (isalnum((unsigned char)*s) || *s == '+' || *s == '-' || *s == '.'); s++)
		;
	if (*s == ':' && s > ref && isalpha((unsigned char)ref[0]))
		return http_url_parse(ref, out, e);
	if (ref[0] == '/' && ref[1] == '/') {
		if (snprintf(buf, sizeof(buf), "%s:%s", base->https ? "https" : "http", ref) >=
		    (int)sizeof(buf))
			return err_set(e, "http.url", "URL too long");
		return http_url_parse(buf, out, e);
	}
	*out = *base;
	if (ref[0] == '/') {
		if (set_target(out, ref, n, e) != 0)
			return -1;
	} else if (ref[0] == '?') {
		sl = strcspn(base->target, "?");
		if (snprintf(buf, sizeof(buf), "%.*s%s", (int)sl, base->target, ref) >= (int)sizeof(buf))
			return err_set(e, "http.url", "URL too long");
		if (set_target(out, buf, strlen(buf), e) != 0)
			return -1;
	} else if (ref[0] == '\0' || ref[0] == '#') {
		return 0;
	} else {
		sl = strcspn(base->target, "?");
		while (sl > 0 && base->target[sl - 1] != '/')
			sl--;
		if (snprintf(buf, sizeof(buf), "%.*s%s", (int)sl, base->target, ref) >= (int)sizeof(buf))
			return err_set(e, "http.url", "URL too long");
		if (set_target(out, buf, strlen(buf), e) != 0)
			return -1;
	}
	remove_dots(out->target);
	return 0;
}

int
http_url_format(const struct http_url *u, char *buf, size_t cap)
{
	char port[16] = "";
	int v6 = strchr(u->host, ':') != NULL, n;

	if (u->port != (u->https ? 443 : 80))
		snprintf(port, sizeof(port), ":%d", u->port);
	n = snprintf(buf, cap, "%s://%s%s%s%s%s", u->https ? "https" : "http", v6 ? "[" : "", u->host,
	             v6 ? "]" : "", port, u->target);
	return n < 0 || (size_t)n >= cap ? -1 : n;
}

/* ---- NO_PROXY ----------------------------------------------------------- */

static int
host_suffix_match(const char *host, const char *pat, size_t pl)
{
	size_t hl = strlen(host);

	if (pl == 0)
		return 0;
	if (hl == pl)
		return strncasecmp(host, pat, pl) == 0;
	return hl > pl && host[hl - pl - 1] == '.' && strncasecmp(host + hl - pl, pat, pl) == 0;
}

int
http_no_proxy_match(const char *no_proxy, const char *host, int port)
{
	const char *p = no_proxy, *s, *colon, *hs;
	size_t n, hl;
	long eport;

	if (no_proxy == NULL)
		return 0;
	while (*p) {
		while (*p == ',' || *p == ' ' || *p == '\t')
			p++;
		s = p;
		while (*p && *p != ',' && *p != ' ' && *p != '\t')
			p++;
		n = (size_t)(p - s);
		if (n == 0)
			continue;
		if (n == 1 && *s == '*')
			return 1;
		hs = s;
		hl = n;
		eport = -1;
		if (*s == '[') {
			const char *rb = memchr(s, ']', n);
			if (rb == NULL)
				continue;
			hs = s + 1;
			hl = (size_t)(rb - hs);
			if (rb + 1 < s + n && rb[1] == ':')
				eport = strtol(rb + 2, NULL, 10);
		} else {
			colon = memchr(s, ':', n);
			/* One colon: host:port. More: a bare IPv6 literal. */
			if (colon != NULL && memchr(colon + 1, ':', (size_t)(s + n - colon - 1)) == NULL) {
				hl = (size_t)(colon - s);
				eport = strtol(colon + 1, NULL, 10);
			}
		}
		if (eport >= 0 && eport != port)
			continue;
		if (hl > 1 && hs[0] == '*' && hs[1] == '.')
			hs += 2, hl -= 2;
		else if (hl > 0 && hs[0] == '.')
			hs++, hl--;
		if (host_suffix_match(host, hs, hl))
			return 1;
	}
	return 0;
}
