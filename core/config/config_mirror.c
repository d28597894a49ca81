/*
 * The checks of the mirror keys against each other once every layer is
 * applied: a mirror's host must be in install.allow_hosts, and a plain
 * http mirror needs install.allow_http_mirrors; a credential file needs an
 * https npm mirror.
 */
#include "config/config_priv.h"

#include <stdio.h>
#include <string.h>

#include "net/hostrule.h"
#include "net/http.h"

/* A mirror's host must be listed in install.allow_hosts, as any download
 * host is: a mirror is trusted to serve bytes only because digests are pinned, and
 * naming its host is the operator's review of where downloads go. */
static int
mirror_host_listed(const struct config *c, const char *key, const char *url, struct err *e)
{
	const char *ah[CFG_HOSTS_MAX];
	char base[CFG_URL_MAX + 2];
	struct http_url u;
	size_t n;
	int i;

	size_t sl;

	if (strncmp(url, "http://", 7) == 0 && !c->install.allow_http_mirrors)
		return err_set(
		    e, "config.invalid",
		    "%s: %.200s is a plain http mirror; set install.allow_http_mirrors to true to "
		    "accept it for pinned installs (integrity is kept: every byte is checked against "
		    "a pin; confidentiality is given up: anyone on the path sees what is installed)",
		    key, url);
	if (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0)
		return 0; /* a directory or file:// mirror: no host */
	sl = url[4] == 's' ? 8 : 7;
	n = strcspn(url + sl, "/?#");
	if (memchr(url + sl, '{', n) != NULL)
		return err_set(e, "config.invalid", "%s: %s: the mirror's host cannot be a placeholder", key,
		               url);
	snprintf(base, sizeof(base), "%.*s/", (int)(sl + n), url);
	if (http_url_parse(base, &u, e) != 0)
		return err_set(e, "config.invalid", "%s: %s: not an https URL with a host", key, url);
	for (i = 0; i < c->install.allow_hosts.n; i++)
		ah[i] = c->install.allow_hosts.v[i];
	if (hostrule_match(ah, c->install.allow_hosts.n, u.host, u.port))
		return 0;
	return err_set(e, "config.invalid",
	               "%s: the mirror's host %.*s is not in install.allow_hosts; add it there "
	               "(\"allow_hosts\": [\"%.*s\"] in \"install\", or ABX_SERVER_INSTALL_ALLOW_HOSTS=%.*s)",
	               key, (int)n, url + sl, (int)n, url + sl, (int)n, url + sl);
}

int
cfg_mirrors_check(const struct config *c, struct err *e)
{
	int i;

	/* a credential goes to the npm mirror only, and only over https */
	if (c->install.npm_auth_file[0] != '\0' && strncmp(c->install.npm_mirror, "https://", 8) != 0)
		return err_set(e, "config.invalid",
		               "install.mirrors.npm_auth_file: the credential is sent only to an https:// "
		               "install.mirrors.npm, and that is %s",
		               c->install.npm_mirror[0] ? c->install.npm_mirror : "not set");
	if (c->install.npm_mirror[0] != '\0' &&
	    mirror_host_listed(c, "install.mirrors.npm", c->install.npm_mirror, e) != 0)
		return -1;
	for (i = 0; i < c->install.tarball_mirrors.n; i++)
		if (mirror_host_listed(c, "install.mirrors.tarball", c->install.tarball_mirrors.v[i], e) != 0)
			return -1;
	if (c->install.oci_mirror[0] != '\0') {
		/* the registry's host, as the URL it is reached by */
		char url[CFG_URL_MAX + 4];
		if (strncmp(c->install.oci_mirror, "oci+http://", 11) == 0)
			snprintf(url, sizeof(url), "http://%s", c->install.oci_mirror + 11);
		else
			snprintf(url, sizeof(url), "https://%s", c->install.oci_mirror + 6);
		if (mirror_host_listed(c, "install.mirrors.oci", url, e) != 0)
			return -1;
	}
	return 0;
}
