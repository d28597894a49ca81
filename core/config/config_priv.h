#ifndef ABX_CONFIG_PRIV_H
#define ABX_CONFIG_PRIV_H
/*
 * Private to core/config*.c: the schema table and the value setters every
 * layer (file, environment, flags, defaults) goes through, so a key is
 * validated the same way whichever layer sets it.
 */
#include <stddef.h>

#include "config/config.h"

enum cfg_kind {
	K_MODE,
	K_INT,
	K_BOOL,
	K_PATH,    /* char[CFG_PATH_MAX]; relative paths in a file resolve against it */
	K_NPM,     /* char[CFG_URL_MAX]; an https:// URL */
	K_MIRRORS, /* struct cfg_list; https:// templates, absolute paths, file:// */
	K_OCI,     /* char[CFG_URL_MAX]; oci://HOST[:PORT]/REPO (core/net/oci.h) */
	K_HOSTS,   /* struct cfg_hosts; host names */
	K_NAMES,   /* struct cfg_names; tool names */
	K_VARS,    /* struct cfg_names; environment variable names */
	K_PRESET,  /* char[CFG_NAME_MAX]; readonly|agents|admin */
	K_WORD,    /* char[CFG_NAME_MAX]; [a-z0-9_-] */
	K_CPU,     /* char[CFG_NAME_MAX]; auto|baseline|v3 */
	K_HOST,    /* char[256]; a listen address */
};

/* One row per key: everything the layers and the reports know about it. */
struct cfg_keydef {
	const char *path; /* dotted path in the file */
	enum cfg_kind kind;
	size_t off;      /* offsetof(struct config, ...) */
	int min, max;    /* K_INT */
	const char *env; /* the environment variable, or NULL */
	const char *opt; /* the command-line option (without "--"), or NULL */
	const char *def; /* the embedded default as text, "" = empty / none */
};

/* The mirrors once every layer is applied (config_mirror.c): each https
 * or http mirror's host in install.allow_hosts, a plain http one only with
 * install.allow_http_mirrors. Returns 0, or -1 with config.invalid. */
int cfg_mirrors_check(const struct config *c, struct err *e);

/* Indexed by enum cfg_key. */
extern const struct cfg_keydef cfg_keys[CK_NKEYS];

/* Objects of the file that hold keys ("install", "install.mirrors", "server"). */
#define CFG_NSECTIONS 3
extern const char *const cfg_sections[CFG_NSECTIONS];

/* Set key k from text, checked for its kind; lists take comma-separated
 * items and replace the previous list. base resolves a relative K_PATH (the
 * file's directory; NULL keeps it as written). where names the JSON path,
 * variable or flag in messages. Returns 0, or -1 with config.invalid. */
int cfg_set_text(struct config *c, int k, const char *text, const char *base, const char *where,
                 struct err *e);

/* List keys: whether k is one; empty it; append one item (checked). */
int cfg_is_list(int k);
void cfg_list_clear(struct config *c, int k);
int cfg_list_add(struct config *c, int k, const char *s, const char *where, struct err *e);

/* The field behind key k in c. */
void *cfg_field(struct config *c, int k);

/* A warning for config_print_warnings (at most CFG_WARN_MAX are kept). */
void cfg_add_warn(struct config *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The value of variable name in envp ("K=V" strings), or NULL. */
const char *cfg_env_get(char *const *envp, const char *name);

#endif
