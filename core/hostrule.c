/*
 * The host allow-list of every download (install, npm, fetch, lock).
 */
#include "hostrule.h"

#include <string.h>

#include "http.h"
#include "manifest.h"

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
hostrule_check(void *arg, const struct http_url *u, struct err *e)
{
	const struct hostrule *r = arg;
	int i;

	if (r->https_only && !u->https)
		return err_set(e, "http.redirect", "%s: only https is allowed", u->host);
	if (r->open)
		return 0;
	for (i = 0; i < r->nlists; i++)
		if (manifest_host_allowed(r->list[i], r->n[i], u->host, u->port))
			return 0;
	return err_set(e, "http.redirect", "host %s refused: not in %s", u->host, r->where);
}
