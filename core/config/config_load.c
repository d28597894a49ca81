/*
 * config_load: the embedded defaults, then the file (config_file.c), the
 * environment and the flags (config.c), then the checks across keys
 * (config_mirror.c). The top of core/config: nothing here is called back
 * from the files it calls.
 */
#include "config/config_priv.h"

#include <unistd.h>

extern char **environ;

static int cpu_level;

int
config_cpu_level(void)
{
	return cpu_level;
}

int
config_load(struct config *c, const char *file_flag, char *const *envp, const struct config_flag *flags,
            int nflags, struct err *e)
{
	const char *file = file_flag;
	int i;

	config_defaults(c);
	if (envp == NULL)
		envp = environ;
	if (file == NULL && (file = cfg_env_get(envp, "ABX_SERVER_CONFIG")) != NULL && file[0] == '\0')
		file = NULL;
	if (file == NULL && access(CONFIG_DEFAULT_FILE, F_OK) == 0)
		file = CONFIG_DEFAULT_FILE;
	if (file != NULL && config_apply_file(c, file, e) != 0)
		goto fail;
	if (config_apply_env(c, envp, e) != 0)
		goto fail;
	for (i = 0; i < nflags; i++)
		if (flags[i].value != NULL &&
		    config_apply_flag(c, flags[i].key, flags[i].value, flags[i].flag, e) != 0)
			goto fail;
	if (cfg_mirrors_check(c, e) != 0)
		goto fail;
	cpu_level = c->install.cpu_level[0] == 'b' ? 1 : c->install.cpu_level[0] == 'v' ? 2 : 0;
	if (c->install.allow_http_mirrors)
		cfg_add_warn(
		    c,
		    "install.allow_http_mirrors is true: plain http mirrors are read for pinned installs "
		    "only "
		    "(never by lock or an unpinned install); integrity is kept (every byte is checked "
		    "against "
		    "a pin), confidentiality is given up (anyone on the path sees which tools and versions "
		    "are installed, and can withhold them)");
	return 0;
fail:
	config_defaults(c);
	return -1;
}
