/*
 * libFuzzer target for the configuration loader (core/config/config.h), in
 * more depth than fuzz_config (which shares its time with policy and commands).
 * The input is used twice: as a configuration file (config_apply_file) and,
 * split at newlines, as an environment (config_apply_env). Properties:
 * - neither crashes, leaks or reads out of bounds (ASan/UBSan);
 * - a refusal carries a coded error a user can act on: json.* for a file
 *   that is not JSON, config.invalid for a wrong key, type or value, with a
 *   message;
 * - what loads stays within the documented bounds: a known mode, counted
 *   lists within their maxima, every text field terminated inside its
 *   buffer, integers within the ranges check-config prints, and every key
 *   can be shown with its value and source.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "fuzz_file.h"

static int
terminated(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

static void
check_refusal(const struct err *e)
{
	FUZZ_CHECK(e->code != NULL);
	FUZZ_CHECK(strncmp(e->code, "json.", 5) == 0 || strcmp(e->code, "config.invalid") == 0);
	FUZZ_CHECK(e->msg[0] != '\0');
}

static void
check_loaded(const struct config *c)
{
	char buf[4096];
	int k, i;

	FUZZ_CHECK(c->install.mode >= CFG_MODE_LAZY && c->install.mode <= CFG_MODE_OFF);
	FUZZ_CHECK(c->install.tarball_mirrors.n >= 0 && c->install.tarball_mirrors.n <= CFG_LIST_MAX);
	FUZZ_CHECK(c->install.allow_hosts.n >= 0 && c->install.allow_hosts.n <= CFG_HOSTS_MAX);
	FUZZ_CHECK(c->agents.n >= 0 && c->agents.n <= CFG_LIST_MAX);
	FUZZ_CHECK(c->nwarn >= 0 && c->nwarn <= CFG_WARN_MAX);
	FUZZ_CHECK(c->install.allow_tmp == 0 || c->install.allow_tmp == 1);
	FUZZ_CHECK(c->install.use_path == 0 || c->install.use_path == 1);
	FUZZ_CHECK(c->server.port >= 0 && c->server.port <= 65535);
	FUZZ_CHECK(c->server.workers >= 0 && c->server.max_connections >= 0);
	FUZZ_CHECK(c->server.max_header_bytes >= 0 && c->server.max_body_bytes >= 0);
	FUZZ_CHECK(terminated(c->install.npm_mirror, sizeof(c->install.npm_mirror)));
	FUZZ_CHECK(terminated(c->commands, sizeof(c->commands)));
	FUZZ_CHECK(terminated(c->policy, sizeof(c->policy)));
	FUZZ_CHECK(terminated(c->preset, sizeof(c->preset)));
	FUZZ_CHECK(terminated(c->tools_dir, sizeof(c->tools_dir)));
	FUZZ_CHECK(terminated(c->state_dir, sizeof(c->state_dir)));
	FUZZ_CHECK(terminated(c->environment, sizeof(c->environment)));
	FUZZ_CHECK(terminated(c->server.host, sizeof(c->server.host)));
	for (i = 0; i < c->agents.n; i++)
		FUZZ_CHECK(c->agents.v[i][0] != '\0' && terminated(c->agents.v[i], CFG_NAME_MAX));
	/* a mirror is an https:// template with a host, a file:/// URL or an
	 * absolute directory (the cache-shaped mirrors) */
	for (i = 0; i < c->install.tarball_mirrors.n; i++) {
		const char *m = c->install.tarball_mirrors.v[i];

		FUZZ_CHECK((strncmp(m, "https://", 8) == 0 && m[8] != '\0' && m[8] != '/') ||
		           strncmp(m, "file:///", 8) == 0 || m[0] == '/');
	}
	for (i = 0; i < c->install.allow_hosts.n; i++)
		FUZZ_CHECK(c->install.allow_hosts.v[i][0] != '\0');
	for (i = 0; i < c->nwarn; i++)
		FUZZ_CHECK(terminated(c->warn[i], ERR_MSG_MAX));
	for (k = 0; k < CK_NKEYS; k++) {
		FUZZ_CHECK(config_key_path((enum cfg_key)k) != NULL);
		FUZZ_CHECK(config_value_text(c, (enum cfg_key)k, buf, sizeof(buf)) != NULL);
		FUZZ_CHECK(config_source(c, (enum cfg_key)k, buf, sizeof(buf)) != NULL);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct config c;
	static char text[8192];
	char *envp[65], *p;
	struct err e;
	int n = 0;

	/* The file layer. */
	config_defaults(&c);
	err_clear(&e);
	if (config_apply_file(&c, fuzz_file(data, size), &e) != 0)
		check_refusal(&e);
	else
		check_loaded(&c);

	/* The environment layer: one NAME=VALUE per line. */
	if (size >= sizeof(text))
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	for (p = text; p != NULL && n < 64;) {
		envp[n++] = p;
		p = strchr(p, '\n');
		if (p != NULL)
			*p++ = '\0';
	}
	envp[n] = NULL;
	config_defaults(&c);
	err_clear(&e);
	if (config_apply_env(&c, envp, &e) != 0)
		check_refusal(&e);
	else
		check_loaded(&c);
	return 0;
}
