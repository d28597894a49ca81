/*
 * Configuration: one schema table drives the defaults, the file parser, the
 * environment, the command-line options, the did-you-mean and the source
 * report, so a key cannot be known to one of them and unknown to another.
 * The same file holds the one list of the ABX_* variables that are not keys:
 * every ABX_* read in the program is config_apply_env or config_env.
 */
#include "config/config_priv.h"

#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "net/http.h"
#include "net/tls.h"
#include "net/hostrule.h"
#include "net/oci.h"

extern char **environ;

#define OFF(f) offsetof(struct config, f)

/* Indexed by enum cfg_key; the order must match. Columns: path, kind,
 * field, range, environment variable, command-line option, default. */
const struct cfg_keydef cfg_keys[CK_NKEYS] = {
    {"install.mode", K_MODE, OFF(install.mode), 0, 0, "ABX_SERVER_INSTALL_MODE", "mode", "lazy"},
    {"install.wait", K_INT, OFF(install.wait), 0, 3600, "ABX_SERVER_INSTALL_WAIT", NULL, "20"},
    {"install.timeout", K_INT, OFF(install.timeout), 1, 86400, "ABX_SERVER_INSTALL_TIMEOUT", NULL, "600"},
    {"install.max_download_mb", K_INT, OFF(install.max_download_mb), 1, 65536,
     "ABX_SERVER_INSTALL_MAX_DOWNLOAD_MB", NULL, "500"},
    {"install.mirrors.npm", K_NPM, OFF(install.npm_mirror), 0, 0, "ABX_INSTALL_NPM_REGISTRY", NULL, ""},
    {"install.mirrors.npm_auth_file", K_PATH, OFF(install.npm_auth_file), 0, 0, "ABX_INSTALL_NPM_AUTH_FILE",
     NULL, ""},
    {"install.mirrors.tarball", K_MIRRORS, OFF(install.tarball_mirrors), 0, 0, "ABX_INSTALL_MIRROR", NULL,
     ""},
    {"install.mirrors.oci", K_OCI, OFF(install.oci_mirror), 0, 0, "ABX_INSTALL_OCI_MIRROR", NULL, ""},
    {"install.allow_hosts", K_HOSTS, OFF(install.allow_hosts), 0, 0, "ABX_SERVER_INSTALL_ALLOW_HOSTS", NULL,
     ""},
    {"install.allow_http_mirrors", K_BOOL, OFF(install.allow_http_mirrors), 0, 1,
     "ABX_SERVER_INSTALL_ALLOW_HTTP_MIRRORS", NULL, "false"},
    {"install.allow_tmp", K_BOOL, OFF(install.allow_tmp), 0, 1, "ABX_SERVER_INSTALL_ALLOW_TMP", NULL,
     "false"},
    {"install.use_path", K_BOOL, OFF(install.use_path), 0, 1, "ABX_SERVER_INSTALL_USE_PATH", NULL, "true"},
    {"install.cpu_level", K_CPU, OFF(install.cpu_level), 0, 0, "ABX_INSTALL_CPU_LEVEL", NULL, "auto"},
    {"agents", K_NAMES, OFF(agents), 0, 0, "ABX_SERVER_AGENTS", NULL, ""},
    {"commands", K_PATH, OFF(commands), 0, 0, "ABX_SERVER_COMMANDS", "commands", ""},
    {"policy", K_PATH, OFF(policy), 0, 0, "ABX_SERVER_POLICY", "policy", ""},
    {"preset", K_PRESET, OFF(preset), 0, 0, "ABX_SERVER_PRESET", "preset", ""},
    {"tools_dir", K_PATH, OFF(tools_dir), 0, 0, "ABX_TOOLS_DIR", "tools-dir", ""},
    {"state_dir", K_PATH, OFF(state_dir), 0, 0, "ABX_SERVER_STATE_DIR", "state-dir", ""},
    {"base_dir", K_PATH, OFF(base_dir), 0, 0, "ABX_SERVER_BASE_DIR", "base-dir", ""},
    {"manifests_dir", K_PATH, OFF(manifests_dir), 0, 0, "ABX_MANIFESTS_DIR", "manifests", ""},
    {"audit_file", K_PATH, OFF(audit_file), 0, 0, "ABX_SERVER_AUDIT_FILE", NULL, ""},
    {"environment", K_WORD, OFF(environment), 0, 0, "ABX_SERVER_ENV", NULL, ""},
    {"server.host", K_HOST, OFF(server.host), 0, 0, "ABX_SERVER_HOST", "host", "0.0.0.0"},
    {"server.port", K_INT, OFF(server.port), 0, 65535, "ABX_SERVER_PORT", "port", "9000"},
    {"server.max_connections", K_INT, OFF(server.max_connections), 1, 65536, "ABX_SERVER_MAX_CONNECTIONS",
     "max-connections", "256"},
    {"server.max_connections_per_peer", K_INT, OFF(server.max_connections_per_peer), 1, 65536,
     "ABX_SERVER_MAX_CONNECTIONS_PER_PEER", NULL, "64"},
    {"server.workers", K_INT, OFF(server.workers), 1, 256, "ABX_SERVER_WORKERS", "workers", "4"},
    {"server.header_timeout", K_INT, OFF(server.header_timeout), 1, 3600, "ABX_SERVER_HEADER_TIMEOUT", NULL,
     "10"},
    {"server.idle_timeout", K_INT, OFF(server.idle_timeout), 1, 3600, "ABX_SERVER_IDLE_TIMEOUT", NULL, "60"},
    {"server.request_timeout", K_INT, OFF(server.request_timeout), 1, 86400, "ABX_SERVER_REQUEST_TIMEOUT",
     NULL, "60"},
    {"server.max_header_bytes", K_INT, OFF(server.max_header_bytes), 1024, 1 << 20,
     "ABX_SERVER_MAX_HEADER_BYTES", NULL, "16384"},
    {"server.max_body_bytes", K_INT, OFF(server.max_body_bytes), 1024, 256 << 20, "ABX_SERVER_MAX_BODY_BYTES",
     NULL, "1048576"},
    {"server.max_output_bytes", K_INT, OFF(server.max_output_bytes), 1024, 256 << 20,
     "ABX_SERVER_MAX_OUTPUT_BYTES", NULL, "1048576"},
    {"server.op_concurrency", K_INT, OFF(server.op_concurrency), 1, 4096, "ABX_SERVER_OP_CONCURRENCY", NULL,
     "4"},
    {"server.max_sessions", K_INT, OFF(server.max_sessions), 1, 256, "ABX_SERVER_MAX_SESSIONS", NULL, "16"},
    {"server.max_sessions_per_agent", K_INT, OFF(server.max_sessions_per_agent), 1, 256,
     "ABX_SERVER_MAX_SESSIONS_PER_AGENT", NULL, "4"},
    {"server.session_journal_max_bytes", K_INT, OFF(server.session_journal_max_bytes), 65536, 256 << 20,
     "ABX_SERVER_SESSION_JOURNAL_MAX_BYTES", NULL, "4194304"},
    {"server.sse_heartbeat", K_INT, OFF(server.sse_heartbeat), 1, 3600, "ABX_SERVER_SSE_HEARTBEAT", NULL,
     "15"},
    {"server.max_streams", K_INT, OFF(server.max_streams), 0, 4096, "ABX_SERVER_MAX_STREAMS", NULL, "64"},
    {"server.session_cwd", K_PATH, OFF(server.session_cwd), 0, 0, "ABX_SERVER_SESSION_CWD", NULL, ""},
    {"server.session_env", K_VARS, OFF(server.session_env), 0, 0, "ABX_SERVER_SESSION_ENV", NULL, ""},
    {"server.token_file", K_PATH, OFF(server.token_file), 0, 0, "ABX_SERVER_TOKEN_FILE", "token-file", ""},
    {"server.sandbox_id_file", K_PATH, OFF(server.sandbox_id_file), 0, 0, "ABX_SERVER_SANDBOX_ID_FILE", NULL,
     "/run/e2b/.E2B_SANDBOX_ID"},
};

const char *const cfg_sections[CFG_NSECTIONS] = {"install", "install.mirrors", "server"};

/*
 * The environment variables that are not configuration keys, with who reads them.
 * config_env answers only for these and the keys' variables, so a variable
 * read anywhere in the program is listed here or in cfg_keys.
 */
static const struct {
	const char *name;
	int prefix; /* name is a prefix: ABX_TOOL_<NAME> */
} env_vars[] = {
    {"ABX_SERVER_TOKEN", 0},      /* serve: principal default's token; never read by introspection */
    {"ABX_SERVER_INTROSPECT", 0}, /* load and check, then stop: no socket, no spawn, no secret */
    {"ABX_SERVER_CONFIG", 0},     /* the configuration file when --config is not given */
    {"ABX_INSTALL_MODE", 0},      /* deprecated alias of ABX_SERVER_INSTALL_MODE */
    {"ABX_INSTALL_UNPINNED", 0},  /* "1": *.unpinned.json manifests load (refused in production) */
    {"ABX_INSTALL_LIBC", 0},      /* glibc, musl or none: the libc npm packages are chosen for */
    {"ABX_INSTALL_NPM_JOBS", 0},
    {"ABX_INSTALL_AVX2", 0},
/* 0 or 1: what the CPU level check takes this CPU to have */ /* concurrent npm package downloads (unset =
                                                                 8, at most 32) */
#ifdef ABX_TEST_HOOKS
    {"ABX_TEST_PAUSE", 0}, /* tests: an install stops 30 s at this phase (never in production) */
#endif
    {"ABX_TOOL_", 1},             /* ABX_TOOL_<NAME>=/path: use that executable for tool NAME */
    {"ABX_NPM", 0},               /* lock: the npm program to run */
    {"ABX_INSTALL_NPM_TOKEN", 0}, /* bearer token for install.mirrors.npm (config_npmauth.c) */
    {"ABX_OCI_AUTH", 0},          /* user:password for the OCI registry (config_oci.c) */
    {"ABX_OCI_AUTH_FILE", 0},     /* a docker config.json with auths for the OCI registry */
    /* the standard variables, read here too so one list says what the
     * program looks at */
    {"PATH", 0},        /* tools found on PATH (install.use_path), programs run by name */
    {"HOME", 0},        /* the default state and tools directories of a user that is not root */
    {"TMPDIR", 0},      /* the tools directory of last resort (install.allow_tmp) */
    {"HTTPS_PROXY", 0}, /* downloads (config_http_client) and the network probe */
    {"https_proxy", 0},
    {"HTTP_PROXY", 0},
    {"http_proxy", 0},
    {"NO_PROXY", 0},
    {"no_proxy", 0},
    {"SSL_CERT_FILE", 0}, /* the CA bundle HTTPS trusts, instead of the system's */
    {"SSL_CERT_DIR", 0},  /* CA directories (colon-separated), with or instead of it */
    {"DOCKER_CONFIG", 0}, /* the directory of the docker config file with registry auths */
    /* doctor: which agents' credentials are set (never their values) */
    {"OPENAI_API_KEY", 0},
    {"ANTHROPIC_API_KEY", 0},
    {"GEMINI_API_KEY", 0},
    {"GOOGLE_API_KEY", 0},
    {"CURSOR_API_KEY", 0},
};
#define NENV_VARS ((int)(sizeof(env_vars) / sizeof(env_vars[0])))

static int
env_known(const char *name)
{
	int i;

	for (i = 0; i < CK_NKEYS; i++)
		if (strcmp(cfg_keys[i].env, name) == 0)
			return 1;
	for (i = 0; i < NENV_VARS; i++)
		if (env_vars[i].prefix ? strncmp(name, env_vars[i].name, strlen(env_vars[i].name)) == 0
		                       : strcmp(name, env_vars[i].name) == 0)
			return 1;
	return 0;
}

const char *
config_env(const char *name)
{
	const char *v;

	if (name == NULL)
		return NULL;
	if (!env_known(name)) {
		/* a variable read but not listed: a bug the first test run shows */
		warnx_line("internal: %.80s is read but not listed in core/config.c's ABX_* variables", name);
		return NULL;
	}
	v = getenv(name);
	return v != NULL && v[0] != '\0' ? v : NULL;
}

static const char *
env2(const char *a, const char *b)
{
	const char *v = config_env(a);

	return v != NULL ? v : config_env(b);
}

struct http_client *
config_http_client(struct err *e)
{
	struct http_client *c;

	tls_anchors_source(config_env("SSL_CERT_FILE"), config_env("SSL_CERT_DIR"));
	if ((c = http_client_new(e)) == NULL)
		return NULL;
	if (http_client_set_proxy(c, env2("HTTPS_PROXY", "https_proxy"), env2("HTTP_PROXY", "http_proxy"),
	                          env2("NO_PROXY", "no_proxy"), e) != 0) {
		http_client_free(c);
		return NULL;
	}
	return c;
}

static const char *const mode_names[] = {"lazy", "offline", "build", "off"};

const char *
config_mode_name(enum cfg_mode m)
{
	return (unsigned)m < 4 ? mode_names[m] : "?";
}

int
config_mode_parse(const char *s, enum cfg_mode *m)
{
	int i;

	for (i = 0; i < 4; i++)
		if (strcmp(s, mode_names[i]) == 0) {
			*m = (enum cfg_mode)i;
			return 0;
		}
	return -1;
}

int
config_production(const struct config *c)
{
	return strcmp(c->environment, "production") == 0;
}

int
config_mode_installs_at_runtime(enum cfg_mode m)
{
	return m == CFG_MODE_LAZY || m == CFG_MODE_OFFLINE;
}

const char *
config_src_name(enum cfg_src s)
{
	static const char *const n[] = {"default", "file", "env", "flag"};

	return (unsigned)s < 4 ? n[s] : "?";
}

const char *
config_key_path(enum cfg_key k)
{
	return (unsigned)k < CK_NKEYS ? cfg_keys[k].path : NULL;
}

int
config_key_find(const char *path)
{
	int i;

	for (i = 0; i < CK_NKEYS; i++)
		if (strcmp(cfg_keys[i].path, path) == 0)
			return i;
	return -1;
}

int
config_option_key(const char *opt)
{
	int i;

	for (i = 0; opt != NULL && i < CK_NKEYS; i++)
		if (cfg_keys[i].opt != NULL && strcmp(cfg_keys[i].opt, opt) == 0)
			return i;
	return -1;
}

int
config_flags_add(struct config_flags *f, const char *opt, const char *value)
{
	int k = config_option_key(opt), i;

	if (k < 0)
		return 0;
	for (i = 0; i < f->n && strcmp(f->v[i].key, cfg_keys[k].path) != 0; i++)
		;
	if (i == f->n)
		f->n++; /* at most one entry per key, so CK_NKEYS is never reached */
	snprintf(f->name[i], sizeof(f->name[i]), "--%s", opt);
	f->v[i] = (struct config_flag){cfg_keys[k].path, value, f->name[i]};
	return 1;
}

void
config_defaults(struct config *c)
{
	struct err e = {0};
	int k;

	memset(c, 0, sizeof(*c));
	c->mode_floor = CFG_MODE_LAZY;
	/* The table's defaults pass the same checks as any layer; the unit
	 * test loads them, so a default out of its own range cannot ship. */
	for (k = 0; k < CK_NKEYS; k++)
		if (cfg_keys[k].def[0] != '\0')
			(void)cfg_set_text(c, k, cfg_keys[k].def, NULL, cfg_keys[k].path, &e);
}

void
cfg_add_warn(struct config *c, const char *fmt, ...)
{
	va_list ap;

	if (c->nwarn >= CFG_WARN_MAX)
		return;
	va_start(ap, fmt);
	err_fmtv(c->warn[c->nwarn++], ERR_MSG_MAX, fmt, ap);
	va_end(ap);
}

/* --- did-you-mean, for every layer and for the callers of config.h --- */

#define DIST_MAX 128

int
config_edit_distance(const char *a, const char *b)
{
	int la = (int)strnlen(a, DIST_MAX), lb = (int)strnlen(b, DIST_MAX);
	int prev[DIST_MAX + 1], cur[DIST_MAX + 1];
	int i, j;

	for (j = 0; j <= lb; j++)
		prev[j] = j;
	for (i = 1; i <= la; i++) {
		cur[0] = i;
		for (j = 1; j <= lb; j++) {
			int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
			int del = prev[j] + 1, ins = cur[j - 1] + 1;
			cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
		}
		memcpy(prev, cur, sizeof(int) * (lb + 1));
	}
	return prev[lb];
}

const char *
config_did_you_mean(const char *word, const char *const *cand, int n)
{
	const char *best = NULL;
	int bestd = 1 << 30, i, d, limit;

	/* A typo is a couple of edits; a third of the word for long words. */
	limit = (int)strlen(word) / 3;
	if (limit < 2)
		limit = 2;
	for (i = 0; i < n; i++) {
		d = config_edit_distance(word, cand[i]);
		if (d < bestd) {
			bestd = d;
			best = cand[i];
		}
	}
	return bestd <= limit ? best : NULL;
}

/* --- value validation, shared by every layer --- */

int
cfg_valid_name(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n >= CFG_NAME_MAX || !(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0])))
		return 0;
	for (i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-' ||
		      s[i] == '_' || s[i] == '.'))
			return 0;
	return 1;
}

static int
valid_host(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > 253)
		return 0;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr(".-:[]", s[i]))
			return 0;
	return 1;
}

/* An https:// URL template, an absolute directory, or a file:// URL. */
static int
valid_mirror(const char *s)
{
	if (strncmp(s, "https://", 8) == 0)
		return s[8] != '\0' && s[8] != '/';
	/* plain http only with install.allow_http_mirrors (mirror_hosts_listed) */
	if (strncmp(s, "http://", 7) == 0)
		return s[7] != '\0' && s[7] != '/';
	if (strncmp(s, "file:///", 8) == 0)
		return 1;
	return s[0] == '/';
}

static int
valid_word(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n >= CFG_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && !strchr("_-", s[i]))
			return 0;
	return 1;
}

static int
parse_int_text(const char *s, long *out)
{
	char *end;

	if (*s == '\0' || !(isdigit((unsigned char)*s) || (*s == '-' && isdigit((unsigned char)s[1]))))
		return -1;
	*out = strtol(s, &end, 10);
	return *end == '\0' && *out > -1000000000L && *out < 1000000000L ? 0 : -1;
}

static int
parse_bool_text(const char *s, int *out)
{
	static const char *const t[] = {"1", "true", "yes", "on"}, *const f[] = {"0", "false", "no", "off"};
	int i;

	for (i = 0; i < 4; i++) {
		if (strcmp(s, t[i]) == 0)
			return *out = 1, 0;
		if (strcmp(s, f[i]) == 0)
			return *out = 0, 0;
	}
	return -1;
}

void *
cfg_field(struct config *c, int k)
{
	return (char *)c + cfg_keys[k].off;
}

/* Resolve a relative path against base (the configuration file's
 * directory); absolute paths and base NULL keep the text. */
static int
resolve_path(char *dst, const char *text, const char *base, const char *where, struct err *e)
{
	if (text[0] == '\0')
		return err_set(e, "config.invalid", "%s: empty path", where);
	if (text[0] == '/' || base == NULL) {
		if ((size_t)snprintf(dst, CFG_PATH_MAX, "%s", text) < CFG_PATH_MAX)
			return 0;
	} else if (fs_path_join(dst, CFG_PATH_MAX, base, text, NULL) == 0) {
		return 0;
	}
	return err_set(e, "config.invalid", "%s: path longer than %d bytes", where, CFG_PATH_MAX - 1);
	return 0;
}

/* Clear the list behind key k before a layer replaces it. */
void
cfg_list_clear(struct config *c, int k)
{
	switch (cfg_keys[k].kind) {
	case K_MIRRORS:
		((struct cfg_list *)cfg_field(c, k))->n = 0;
		break;
	case K_HOSTS:
		((struct cfg_hosts *)cfg_field(c, k))->n = 0;
		break;
	case K_NAMES:
	case K_VARS:
		((struct cfg_names *)cfg_field(c, k))->n = 0;
		break;
	default:
		break;
	}
}

int
cfg_list_add(struct config *c, int k, const char *s, const char *where, struct err *e)
{
	int i;

	switch (cfg_keys[k].kind) {
	case K_MIRRORS: {
		struct cfg_list *l = cfg_field(c, k);
		if (!valid_mirror(s))
			return err_set(e, "config.invalid",
			               "%s: \"%.100s\" is not an https:// URL template, an absolute "
			               "directory or a file:// URL",
			               where, s);
		if (strlen(s) >= CFG_URL_MAX)
			return err_set(e, "config.invalid", "%s: longer than %d bytes", where,
			               CFG_URL_MAX - 1);
		if (l->n >= CFG_LIST_MAX)
			return err_set(e, "config.invalid", "%s: more than %d entries", where, CFG_LIST_MAX);
		snprintf(l->v[l->n++], CFG_URL_MAX, "%s", s);
		return 0;
	}
	case K_HOSTS: {
		struct cfg_hosts *l = cfg_field(c, k);
		if (!valid_host(s) || strchr(s, '/') != NULL)
			return err_set(e, "config.invalid", "%s: \"%.100s\" is not a host name", where, s);
		if (l->n >= CFG_HOSTS_MAX)
			return err_set(e, "config.invalid", "%s: more than %d entries", where, CFG_HOSTS_MAX);
		snprintf(l->v[l->n++], sizeof(l->v[0]), "%s", s);
		return 0;
	}
	case K_NAMES: {
		struct cfg_names *l = cfg_field(c, k);
		if (!cfg_valid_name(s))
			return err_set(e, "config.invalid", "%s: \"%.100s\" is not a tool name ([a-z0-9._-])",
			               where, s);
		for (i = 0; i < l->n; i++)
			if (strcmp(l->v[i], s) == 0)
				return err_set(e, "config.invalid", "%s: \"%s\" listed twice", where, s);
		if (l->n >= CFG_LIST_MAX)
			return err_set(e, "config.invalid", "%s: more than %d entries", where, CFG_LIST_MAX);
		snprintf(l->v[l->n++], CFG_NAME_MAX, "%s", s);
		return 0;
	}
	case K_VARS: {
		/* A name a session request may set: never our secret, nor what
		 * decides which programs run or how they load. */
		struct cfg_names *l = cfg_field(c, k);
		size_t j, n = strlen(s);
		int okname = n > 0 && n < CFG_NAME_MAX && !(s[0] >= '0' && s[0] <= '9');

		for (j = 0; okname && j < n; j++)
			okname = (s[j] >= 'A' && s[j] <= 'Z') || (s[j] >= 'a' && s[j] <= 'z') ||
			         (s[j] >= '0' && s[j] <= '9') || s[j] == '_';
		if (!okname)
			return err_set(e, "config.invalid",
			               "%s: \"%.100s\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)",
			               where, s);
		if (strcmp(s, "PATH") == 0 || strncmp(s, "LD_", 3) == 0 || strncmp(s, "ABX_", 4) == 0)
			return err_set(e, "config.invalid",
			               "%s: %s cannot be set by a request (PATH, LD_*, ABX_*)", where, s);
		for (i = 0; i < l->n; i++)
			if (strcmp(l->v[i], s) == 0)
				return err_set(e, "config.invalid", "%s: \"%s\" listed twice", where, s);
		if (l->n >= CFG_LIST_MAX)
			return err_set(e, "config.invalid", "%s: more than %d entries", where, CFG_LIST_MAX);
		snprintf(l->v[l->n++], CFG_NAME_MAX, "%s", s);
		return 0;
	}
	default:
		return err_set(e, "internal", "%s: not a list", where);
	}
}

int
cfg_is_list(int k)
{
	return cfg_keys[k].kind == K_MIRRORS || cfg_keys[k].kind == K_HOSTS || cfg_keys[k].kind == K_NAMES ||
	       cfg_keys[k].kind == K_VARS;
}

/* Set scalar key k from text (already type-checked as a string for the
 * string kinds). where names the JSON path or variable for messages. */
int
cfg_set_text(struct config *c, int k, const char *text, const char *base, const char *where, struct err *e)
{
	const struct cfg_keydef *d = &cfg_keys[k];
	enum cfg_mode m;
	long v;
	int b;

	switch (d->kind) {
	case K_MODE:
		if (config_mode_parse(text, &m) != 0)
			return err_set(e, "config.invalid",
			               "%s: \"%.60s\" is not a mode (lazy, build, offline, off)", where,
			               text);
		c->install.mode = m;
		return 0;
	case K_INT:
		if (parse_int_text(text, &v) != 0 || v < d->min || v > d->max)
			return err_set(e, "config.invalid",
			               "%s: expected an integer from %d to %d, got \"%.40s\"", where, d->min,
			               d->max, text);
		*(int *)cfg_field(c, k) = (int)v;
		return 0;
	case K_BOOL:
		if (parse_bool_text(text, &b) != 0)
			return err_set(e, "config.invalid", "%s: expected true or false, got \"%.40s\"",
			               where, text);
		*(int *)cfg_field(c, k) = b;
		return 0;
	case K_PATH:
		return resolve_path(cfg_field(c, k), text, base, where, e);
	case K_NPM:
		if (!(strncmp(text, "https://", 8) == 0 && text[8] != '\0' && text[8] != '/') &&
		    !(strncmp(text, "http://", 7) == 0 && text[7] != '\0' && text[7] != '/'))
			return err_set(e, "config.invalid", "%s: \"%.100s\" is not an https:// URL", where,
			               text);
		if (strlen(text) >= CFG_URL_MAX)
			return err_set(e, "config.invalid", "%s: longer than %d bytes", where,
			               CFG_URL_MAX - 1);
		snprintf(cfg_field(c, k), CFG_URL_MAX, "%s", text);
		return 0;
	case K_OCI: {
		struct oci_ref r;
		if (oci_ref_parse(text, 1, &r, e) != 0)
			return err_set(e, "config.invalid", "%s: %s", where, e ? e->msg : "");
		if (strlen(text) >= CFG_URL_MAX)
			return err_set(e, "config.invalid", "%s: longer than %d bytes", where,
			               CFG_URL_MAX - 1);
		snprintf(cfg_field(c, k), CFG_URL_MAX, "%s", text);
		return 0;
	}
	case K_PRESET:
		if (strcmp(text, "readonly") != 0 && strcmp(text, "agents") != 0 &&
		    strcmp(text, "admin") != 0)
			return err_set(e, "config.invalid",
			               "%s: \"%.40s\" is not a preset (readonly, agents, admin)", where,
			               text);
		snprintf(cfg_field(c, k), CFG_NAME_MAX, "%s", text);
		return 0;
	case K_CPU:
		if (strcmp(text, "auto") != 0 && strcmp(text, "baseline") != 0 && strcmp(text, "v3") != 0)
			return err_set(e, "config.invalid",
			               "%s: \"%.40s\" is not a CPU level (auto, baseline, v3)", where, text);
		snprintf(cfg_field(c, k), CFG_NAME_MAX, "%s", text);
		return 0;
	case K_WORD:
		if (!valid_word(text))
			return err_set(e, "config.invalid", "%s: \"%.40s\" is not a word of [a-z0-9_-]",
			               where, text);
		snprintf(cfg_field(c, k), CFG_NAME_MAX, "%s", text);
		return 0;
	case K_HOST:
		if (!valid_host(text))
			return err_set(e, "config.invalid", "%s: \"%.60s\" is not a host or address", where,
			               text);
		snprintf(cfg_field(c, k), 256, "%s", text);
		return 0;
	default:
		break;
	}
	/* Lists from text: comma-separated, blanks around items ignored. */
	{
		char buf[CFG_URL_MAX * 4], *p, *q;
		if (strlen(text) >= sizeof(buf))
			return err_set(e, "config.invalid", "%s: value too long", where);
		snprintf(buf, sizeof(buf), "%s", text);
		cfg_list_clear(c, k);
		for (p = buf; p != NULL; p = q) {
			q = strchr(p, ',');
			if (q != NULL)
				*q++ = '\0';
			while (*p == ' ' || *p == '\t')
				p++;
			size_t n = strlen(p);
			while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
				p[--n] = '\0';
			if (*p == '\0')
				continue;
			if (cfg_list_add(c, k, p, where, e) != 0)
				return -1;
		}
		return 0;
	}
}

/* --- the environment layer --- */

const char *
cfg_env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);
	int i;

	for (i = 0; envp[i] != NULL; i++)
		if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
			return envp[i] + n + 1;
	return NULL;
}

static void
set_floor(struct config *c, const char *var)
{
	if (c->install.mode == CFG_MODE_BUILD || c->install.mode == CFG_MODE_OFF) {
		c->mode_floor = c->install.mode;
		snprintf(c->mode_floor_by, sizeof(c->mode_floor_by), "%s", var);
	}
}

int
config_apply_env(struct config *c, char *const *envp, struct err *e)
{
	const char *v, *alias;
	int k, i;

	if (envp == NULL)
		envp = environ;
	for (k = 0; k < CK_NKEYS; k++) {
		if (cfg_keys[k].env == NULL || (v = cfg_env_get(envp, cfg_keys[k].env)) == NULL ||
		    v[0] == '\0')
			continue;
		if (cfg_set_text(c, k, v, NULL, cfg_keys[k].env, e) != 0)
			return -1;
		c->src[k] = CFG_SRC_ENV;
		snprintf(c->src_detail[k], sizeof(c->src_detail[k]), "%s", cfg_keys[k].env);
	}
	/* The deprecated alias: honoured with a warning. When both are set and
	 * differ, the stricter one holds: an environment forcing `off` must not
	 * be undone by another environment variable (restrict-only). */
	if ((alias = cfg_env_get(envp, "ABX_INSTALL_MODE")) != NULL && alias[0] != '\0') {
		enum cfg_mode am, cur = c->install.mode;
		if (config_mode_parse(alias, &am) != 0)
			return err_set(
			    e, "config.invalid",
			    "ABX_INSTALL_MODE: \"%.60s\" is not a mode (lazy, build, offline, off)", alias);
		cfg_add_warn(c, "ABX_INSTALL_MODE is deprecated; use ABX_SERVER_INSTALL_MODE");
		if (c->src[CK_INSTALL_MODE] != CFG_SRC_ENV || am > cur) {
			if (c->src[CK_INSTALL_MODE] == CFG_SRC_ENV)
				cfg_add_warn(
				    c,
				    "ABX_INSTALL_MODE=%s is stricter than ABX_SERVER_INSTALL_MODE=%s; "
				    "%s holds",
				    alias, config_mode_name(cur), alias);
			c->install.mode = am;
			c->src[CK_INSTALL_MODE] = CFG_SRC_ENV;
			snprintf(c->src_detail[CK_INSTALL_MODE], sizeof(c->src_detail[0]),
			         "ABX_INSTALL_MODE");
		} else if (am != cur) {
			cfg_add_warn(c, "ABX_INSTALL_MODE=%s ignored: ABX_SERVER_INSTALL_MODE=%s is set",
			             alias, config_mode_name(cur));
		}
	}
	if (c->src[CK_INSTALL_MODE] == CFG_SRC_ENV)
		set_floor(c, c->src_detail[CK_INSTALL_MODE]);
	if ((v = cfg_env_get(envp, "ABX_SERVER_INTROSPECT")) != NULL && v[0] != '\0' && strcmp(v, "0") != 0)
		c->introspect = 1;
	/* A misspelt ABX_SERVER_ variable would silently do nothing: say so. Not
	 * an error, because other components may define variables of their own. */
	for (i = 0; envp[i] != NULL; i++) {
		char name[96];
		const char *eq = strchr(envp[i], '=');
		const char *cand[CK_NKEYS + NENV_VARS];
		int n = 0, j, known = 0;
		if (strncmp(envp[i], "ABX_SERVER_", 11) != 0 || eq == NULL ||
		    eq - envp[i] >= (long)sizeof(name))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(eq - envp[i]), envp[i]);
		for (j = 0; j < CK_NKEYS; j++)
			if (cfg_keys[j].env != NULL && strncmp(cfg_keys[j].env, "ABX_SERVER_", 11) == 0)
				cand[n++] = cfg_keys[j].env;
		for (j = 0; j < NENV_VARS; j++)
			if (strncmp(env_vars[j].name, "ABX_SERVER_", 11) == 0)
				cand[n++] = env_vars[j].name;
		for (j = 0; j < n; j++)
			known |= strcmp(cand[j], name) == 0;
		if (!known) {
			const char *s = config_did_you_mean(name, cand, n);
			if (s != NULL)
				cfg_add_warn(c, "%s: unknown variable (did you mean %s?)", name, s);
			else
				cfg_add_warn(c, "%s: unknown variable", name);
		}
	}
	return 0;
}

/* An applet that loads the configuration twice (prepare: the plan, then the
 * install) says each warning once. Applet main thread only: serve prints
 * every (re)load itself (core/server/api.c). */
void
config_print_warnings(const struct config *c)
{
	static char seen[2 * CFG_WARN_MAX][ERR_MSG_MAX];
	static int nseen;
	int i, j;

	for (i = 0; i < c->nwarn; i++) {
		for (j = 0; j < nseen && strcmp(seen[j], c->warn[i]) != 0; j++)
			;
		if (j < nseen)
			continue;
		if (nseen < 2 * CFG_WARN_MAX)
			snprintf(seen[nseen++], ERR_MSG_MAX, "%s", c->warn[i]);
		warnx_line("%s", c->warn[i]);
	}
}

/* --- the flag layer --- */

int
config_apply_flag(struct config *c, const char *key, const char *value, const char *flag, struct err *e)
{
	enum cfg_mode prev = c->install.mode;
	int k = config_key_find(key);

	if (k < 0)
		return err_set(e, "internal", "%s: no configuration key %s", flag, key);
	if (cfg_set_text(c, k, value, NULL, flag, e) != 0)
		return -1;
	if (k == CK_INSTALL_MODE && c->install.mode < c->mode_floor) {
		c->install.mode = prev;
		return err_set(
		    e, "config.invalid",
		    "%s %s: would loosen install.mode %s set by %s (restrict-only: only %s%s is allowed)",
		    flag, value, config_mode_name(c->mode_floor), c->mode_floor_by,
		    config_mode_name(c->mode_floor), c->mode_floor == CFG_MODE_BUILD ? " or off" : "");
	}
	c->src[k] = CFG_SRC_FLAG;
	snprintf(c->src_detail[k], sizeof(c->src_detail[k]), "%s", flag);
	return 0;
}

const char *
config_source(const struct config *c, enum cfg_key k, char *buf, size_t cap)
{
	if ((unsigned)k >= CK_NKEYS) {
		snprintf(buf, cap, "?");
		return buf;
	}
	switch (c->src[k]) {
	case CFG_SRC_FILE:
		snprintf(buf, cap, "file %s", c->file);
		break;
	case CFG_SRC_ENV:
		snprintf(buf, cap, "env %s", c->src_detail[k]);
		break;
	case CFG_SRC_FLAG:
		snprintf(buf, cap, "flag %s", c->src_detail[k]);
		break;
	default:
		snprintf(buf, cap, "default");
		break;
	}
	return buf;
}

/* n strings stride bytes apart from first, comma-separated into buf. */
static void
join(char *buf, size_t cap, const char *first, int n, size_t stride)
{
	size_t len = 0;
	int i;

	for (i = 0; i < n && len < cap; i++)
		len +=
		    (size_t)snprintf(buf + len, cap - len, "%s%s", i ? "," : "", first + (size_t)i * stride);
}

const char *
config_value_text(const struct config *c, enum cfg_key k, char *buf, size_t cap)
{
	const void *p;

	buf[0] = '\0';
	if ((unsigned)k >= CK_NKEYS || cap == 0)
		return buf;
	p = (const char *)c + cfg_keys[k].off;
	switch (cfg_keys[k].kind) {
	case K_MODE:
		snprintf(buf, cap, "%s", config_mode_name(c->install.mode));
		break;
	case K_INT:
		snprintf(buf, cap, "%d", *(const int *)p);
		break;
	case K_BOOL:
		snprintf(buf, cap, "%s", *(const int *)p ? "true" : "false");
		break;
	case K_MIRRORS:
		join(buf, cap, ((const struct cfg_list *)p)->v[0], ((const struct cfg_list *)p)->n,
		     CFG_URL_MAX);
		break;
	case K_HOSTS:
		join(buf, cap, ((const struct cfg_hosts *)p)->v[0], ((const struct cfg_hosts *)p)->n,
		     sizeof(((const struct cfg_hosts *)p)->v[0]));
		break;
	case K_NAMES:
	case K_VARS:
		join(buf, cap, ((const struct cfg_names *)p)->v[0], ((const struct cfg_names *)p)->n,
		     CFG_NAME_MAX);
		break;
	default:
		snprintf(buf, cap, "%s", (const char *)p);
		break;
	}
	return buf;
}
