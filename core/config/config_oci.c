/*
 * The OCI registry credential, read here because the environment is the
 * configuration layer's to read: ABX_OCI_AUTH, else the docker config
 * file's auths. It is a secret, so it is read only when a registry is
 * about to be used, and never kept in struct config (which check-config
 * and doctor print).
 */
#include "config/config_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "net/oci.h"

int
config_oci_basic(const char *host, int port, int port_explicit, char *basic, char *from, size_t fromcap,
                 struct err *e)
{
	const char *v = config_env("ABX_OCI_AUTH"), *home;
	char path[CFG_PATH_MAX];
	char *text = NULL;
	size_t len = 0;
	struct err tmp = {0};
	int r;

	basic[0] = '\0';
	if (from != NULL && fromcap > 0)
		from[0] = '\0';
	if (v != NULL) {
		if (oci_basic_from_userpass(v, basic, e) != 0)
			return err_set(e, "oci.auth", "ABX_OCI_AUTH is not user:password");
		if (from != NULL)
			snprintf(from, fromcap, "ABX_OCI_AUTH");
		return 1;
	}
	if ((v = config_env("ABX_OCI_AUTH_FILE")) != NULL) {
		if ((size_t)snprintf(path, sizeof(path), "%s", v) >= sizeof(path))
			return err_set(e, "io.error", "path too long: %s", v);
	} else if ((v = config_env("DOCKER_CONFIG")) != NULL) {
		if (fs_path_join(path, sizeof(path), v, "config.json", e) < 0)
			return -1;
	} else if ((home = config_env("HOME")) != NULL) {
		if (fs_path_join(path, sizeof(path), home, ".docker/config.json", e) < 0)
			return -1;
	} else {
		return 0;
	}
	if (fs_read_input(path, OCI_JSON_MAX, &text, &len, &tmp) != 0) {
		/* only a file named on purpose must exist */
		if (tmp.code != NULL && strcmp(tmp.code, "not_found") == 0 &&
		    config_env("ABX_OCI_AUTH_FILE") == NULL)
			return 0;
		return err_set(e, "oci.auth", "the docker config file %s: %s", path, tmp.msg);
	}
	r = oci_docker_auth_parse(text, len, host, port, port_explicit, basic, e);
	memset(text, 0, len);
	free(text);
	if (r < 0) {
		return err_set(e, "oci.auth", "%s: %s", path, e ? e->msg : "");
	}
	if (r == 1 && from != NULL)
		snprintf(from, fromcap, "%s", path);
	return r;
}
