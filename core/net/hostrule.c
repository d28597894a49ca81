/*
 * The host allow-list of every download (install, npm, fetch, lock).
 */
#include "net/hostrule.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/http.h"

void
hostrule_init(struct hostrule *r, int https_only, const char *where)
{
	memset(r, 0, sizeof(*r));
	r->https_only = https_only;
	r->where = where;
}

int
hostrule_add(struct hostrule *r, const char *const *hosts, int n)
{
	if (hosts == NULL || n <= 0)
		return 0;
	if (r->nlists == HOSTRULE_LISTS)
		return -1;
	r->list[r->nlists] = hosts;
	r->n[r->nlists] = n;
	r->nlists++;
	return 0;
}

int
hostrule_match(const char *const *hosts, int n, const char *host, int port)
{
	int i;

	for (i = 0; i < n; i++) {
		const char *h = hosts[i], *colon = strrchr(h, ':');
		size_t hl = strlen(h);

		/* "host:port" (an IPv6 literal is written "[::1]:443" or bare) */
		if (colon != NULL && h[0] != '[' && strchr(h, ':') == colon) {
			hl = (size_t)(colon - h);
			if (atoi(colon + 1) != port)
				continue;
		} else if (h[0] == '[') {
			const char *rb = strchr(h, ']');
			if (rb == NULL)
				continue;
			if (rb[1] == ':' && atoi(rb + 2) != port)
				continue;
			h++;
			hl = (size_t)(rb - h);
		}
		if (strlen(host) == hl && strncasecmp(h, host, hl) == 0)
			return 1;
	}
	return 0;
}

int
hostrule_check(void *arg, const struct http_url *u, struct err *e)
{
	const struct hostrule *r = arg;
	int i;

	if (r->https_only && !u->https)
		return err_set(e, "http.redirect", "%s: only https is allowed", u->host);
	if (r->open)
		return 0;
	for (i = 0; i < r->nlists; i++)
		if (hostrule_match(r->list[i], r->n[i], u->host, u->port))
			return 0;
	return err_set(e, "http.redirect", "host %s refused: not in %s", u->host, r->where);
}
