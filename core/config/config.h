#ifndef ABX_CONFIG_H
#define ABX_CONFIG_H
/*
 * Configuration: one struct config, filled in layers, later wins:
 *
 *   embedded defaults < configuration file < environment < command-line flags
 *
 * The file is --config FILE, else $ABX_SERVER_CONFIG, else
 * /etc/agent-sandbox/server.json when it exists. The schema is strict: every
 * key is known, an unknown one is config.invalid naming its JSON path with a
 * did-you-mean ("install.mdoe: unknown key (did you mean install.mode?)").
 * Every effective value records which layer set it (config_source()).
 *
 * Restrict-only: when the environment sets install.mode to
 * `build` or `off`, that value is a floor; a later layer (a flag) may only
 * keep it or make it stricter (lazy < offline < build < off). An attempt to
 * loosen it is config.invalid. The file is below the environment, so it
 * cannot loosen it either, including on a reload.
 *
 * Loading reads only the configuration file and the environment: it opens no
 * socket, spawns nothing and reads no secret (ABX_SERVER_TOKEN and token
 * files are serve's business, never read here). Relative paths in the file
 * (commands, policy, manifests_dir, tools_dir, state_dir, audit_file) are
 * resolved against the file's directory.
 */
#include <stddef.h>

#include "base/err.h"

#define CONFIG_DEFAULT_FILE "/etc/agent-sandbox/server.json"
#define CONFIG_DEFAULT_POLICY "/etc/agent-sandbox/server-policy.json"

/* Why these numbers: a path longer than 1 KiB is a mistake in a container
 * image; a URL template fits in 512; sixteen mirrors or agents is far past
 * any real template, and the whole struct stays a few hundred KiB. */
#define CFG_PATH_MAX 1024
#define CFG_URL_MAX 512
#define CFG_NAME_MAX 64
#define CFG_LIST_MAX 16
#define CFG_HOSTS_MAX 32
#define CFG_WARN_MAX 8
#define CFG_FILE_MAX (1u << 20) /* a configuration file over 1 MiB is not a configuration */

enum cfg_src {
	CFG_SRC_DEFAULT,
	CFG_SRC_FILE,
	CFG_SRC_ENV,
	CFG_SRC_FLAG,
};

enum cfg_mode {
	CFG_MODE_LAZY,    /* install on first use */
	CFG_MODE_OFFLINE, /* install only from the cache */
	CFG_MODE_BUILD,   /* only prepare installs */
	CFG_MODE_OFF,     /* never install */
};

struct cfg_list {
	int n;
	char v[CFG_LIST_MAX][CFG_URL_MAX];
};

struct cfg_hosts {
	int n;
	char v[CFG_HOSTS_MAX][256];
};

struct cfg_names {
	int n;
	char v[CFG_LIST_MAX][CFG_NAME_MAX];
};

/* The keys, in schema order; config_key_path(k) gives the dotted path. */
enum cfg_key {
	CK_INSTALL_MODE,
	CK_INSTALL_WAIT,
	CK_INSTALL_TIMEOUT,
	CK_INSTALL_MAX_DOWNLOAD_MB,
	CK_INSTALL_MIRRORS_NPM,
	CK_INSTALL_MIRRORS_NPM_AUTH_FILE,
	CK_INSTALL_MIRRORS_TARBALL,
	CK_INSTALL_MIRRORS_OCI,
	CK_INSTALL_ALLOW_HOSTS,
	CK_INSTALL_ALLOW_HTTP_MIRRORS,
	CK_INSTALL_ALLOW_TMP,
	CK_INSTALL_USE_PATH,
	CK_INSTALL_CPU_LEVEL,
	CK_AGENTS,
	CK_COMMANDS,
	CK_POLICY,
	CK_PRESET,
	CK_TOOLS_DIR,
	CK_STATE_DIR,
	CK_BASE_DIR,
	CK_MANIFESTS_DIR,
	CK_AUDIT_FILE,
	CK_ENVIRONMENT,
	CK_SERVER_HOST,
	CK_SERVER_PORT,
	CK_SERVER_MAX_CONNECTIONS,
	CK_SERVER_MAX_CONNECTIONS_PER_PEER,
	CK_SERVER_WORKERS,
	CK_SERVER_HEADER_TIMEOUT,
	CK_SERVER_IDLE_TIMEOUT,
	CK_SERVER_REQUEST_TIMEOUT,
	CK_SERVER_MAX_HEADER_BYTES,
	CK_SERVER_MAX_BODY_BYTES,
	CK_SERVER_MAX_OUTPUT_BYTES,
	CK_SERVER_OP_CONCURRENCY,
	CK_SERVER_MAX_SESSIONS,
	CK_SERVER_MAX_SESSIONS_PER_AGENT,
	CK_SERVER_SESSION_JOURNAL_MAX_BYTES,
	CK_SERVER_SSE_HEARTBEAT,
	CK_SERVER_MAX_STREAMS,
	CK_SERVER_SESSION_CWD,
	CK_SERVER_SESSION_ENV,
	CK_SERVER_TOKEN_FILE,
	CK_SERVER_SANDBOX_ID_FILE,
	CK_NKEYS
};

struct config {
	struct {
		enum cfg_mode mode;
		int wait;    /* seconds; 0 = never wait */
		int timeout; /* seconds, whole install */
		int max_download_mb;
		char npm_mirror[CFG_URL_MAX]; /* "" = none */
		/* an .npmrc-style file with the mirror's credential (config_npm_auth);
		 * the path only: the secret is never kept here */
		char npm_auth_file[CFG_PATH_MAX];
		struct cfg_list tarball_mirrors;
		char oci_mirror[CFG_URL_MAX]; /* oci://HOST[:PORT]/REPO, "" = none */
		struct cfg_hosts allow_hosts;
		int allow_http_mirrors; /* plain http:// mirrors, for pinned installs only */
		int allow_tmp;
		int use_path;
		char cpu_level[CFG_NAME_MAX]; /* auto, baseline or v3 */
	} install;
	struct cfg_names agents;
	char commands[CFG_PATH_MAX];      /* "" = none */
	char policy[CFG_PATH_MAX];        /* "" = CONFIG_DEFAULT_POLICY if it exists */
	char preset[CFG_NAME_MAX];        /* "" = none */
	char tools_dir[CFG_PATH_MAX];     /* "" = the directory chain (core/install/tools.h) */
	char state_dir[CFG_PATH_MAX];     /* "" = <base_dir>/.local/state/agent-sandbox */
	char base_dir[CFG_PATH_MAX];      /* "" = $HOME (root: state in /var/lib) */
	char manifests_dir[CFG_PATH_MAX]; /* "" = built-in manifests only */
	char audit_file[CFG_PATH_MAX];    /* "" = no audit file (stderr) */
	char environment[CFG_NAME_MAX];   /* e.g. "production"; "" = unset */
	struct {
		char host[256];
		int port;
		int max_connections;
		int max_connections_per_peer; /* per client address */
		int workers;
		int header_timeout;  /* seconds to receive the request head */
		int idle_timeout;    /* seconds an idle keep-alive connection lives */
		int request_timeout; /* seconds for a whole request body */
		int max_header_bytes;
		int max_body_bytes;
		int max_output_bytes; /* per stream of a command op */
		int op_concurrency;   /* default concurrent runs per op */
		int max_sessions;     /* agent sessions running at once, in total */
		int max_sessions_per_agent;
		int session_journal_max_bytes;
		int sse_heartbeat;              /* seconds between comment lines on an idle event stream */
		int max_streams;                /* concurrent event streams (default 64; 0 also means 64) */
		char session_cwd[CFG_PATH_MAX]; /* a session's default cwd; "" = serve's HOME */
		struct cfg_names session_env;   /* variables a session request may set */
		/* The access token of principal default, written by the platform
		 * after create or resume (serve watches it); "" = none */
		char token_file[CFG_PATH_MAX];
		/* The platform's sandbox id; a token read under another id is void */
		char sandbox_id_file[CFG_PATH_MAX];
	} server;

	/* Not configuration values but facts about the load. */
	int introspect;          /* ABX_SERVER_INTROSPECT=1, or set by the applet */
	char file[CFG_PATH_MAX]; /* the configuration file read, "" = none */
	enum cfg_src src[CK_NKEYS];
	char src_detail[CK_NKEYS][64]; /* env variable or flag name that set it */
	enum cfg_mode mode_floor;      /* restrict-only floor, CFG_MODE_LAZY = none */
	char mode_floor_by[64];        /* the variable that set the floor */
	int nwarn;
	char warn[CFG_WARN_MAX][ERR_MSG_MAX];
};

/* Fill c with the embedded defaults (every source CFG_SRC_DEFAULT). */
void config_defaults(struct config *c);

/* Apply one configuration file. Syntax errors are json.*; schema errors are
 * config.invalid naming the JSON path. On error c may be partly updated; the
 * callers discard it (config_load works on a copy). */
int config_apply_file(struct config *c, const char *path, struct err *e);

/* Apply the environment layer from envp (NULL-terminated "K=V" strings;
 * NULL = the process environment). Warnings (deprecated alias, unknown
 * ABX_SERVER_* variable) go to c->warn. */
int config_apply_env(struct config *c, char *const *envp, struct err *e);
/* Print c's warnings to stderr, each at most once per process. */
void config_print_warnings(const struct config *c);

/* Set key (a dotted path, e.g. "install.mode") from text as the flag layer;
 * flag names the option for config_source() ("--tools-dir"). Lists take a
 * comma-separated value. Honours the restrict-only floor. */
int config_apply_flag(struct config *c, const char *key, const char *value, const char *flag, struct err *e);

struct config_flag {
	const char *key; /* dotted path */
	const char *value;
	const char *flag; /* option name, for the source */
};

/* The command-line options of the flag layer, collected while an applet
 * parses its arguments (every applet the same way: the option names come
 * from the schema table). */
#define CFG_OPT_MAX 32
struct config_flags {
	int n;
	struct config_flag v[CK_NKEYS];
	char name[CK_NKEYS][CFG_OPT_MAX]; /* "--tools-dir", what v[i].flag points to */
};

/* The key command-line option opt (without "--", e.g. "tools-dir") sets, or
 * -1 when it sets none. */
int config_option_key(const char *opt);

/* Record option opt with value in f when opt sets a key; a repeated option
 * replaces the earlier value (the last one wins). f must stay where it is
 * while f->v is used (v[i].flag points into f). Returns 1 when opt is a
 * configuration option, else 0 (f unchanged). */
int config_flags_add(struct config_flags *f, const char *opt, const char *value);

/* An ABX_* variable of the process environment that is not a configuration
 * key (ABX_SERVER_TOKEN, ABX_INSTALL_UNPINNED, ABX_INSTALL_LIBC,
 * ABX_TOOL_<NAME>, ...) or a key's own variable read outside a load. The one
 * place such a variable is read: a name not in config.c's list answers NULL
 * and is reported on stderr as an internal error.
 * Returns the value, or NULL when unset or empty (an empty variable counts as
 * unset). The pointer is the environment's; do not keep it across setenv. */
const char *config_env(const char *name);
/* The CPU level native npm packages are chosen for, as the last
 * config_load set it (install.cpu_level): 0 auto, 1 baseline, 2 v3. */
int config_cpu_level(void);

struct http_client;

/* An HTTP client as the environment asks: proxies from HTTPS_PROXY /
 * https_proxy, HTTP_PROXY / http_proxy and NO_PROXY / no_proxy, the CA
 * bundle from SSL_CERT_FILE / SSL_CERT_DIR (else the system's). Returns
 * NULL with e (http.proxy for an unusable proxy URL, internal). */
struct http_client *config_http_client(struct err *e);

/* The credential for the OCI registry host:port as base64 "user:pass"
 * (OCI_BASIC_MAX bytes, core/net/oci.h) into basic: ABX_OCI_AUTH
 * ("user:pass"), else auths.<host>.auth of the docker config file
 * (ABX_OCI_AUTH_FILE, which must exist; else $DOCKER_CONFIG/config.json;
 * else $HOME/.docker/config.json). from (may be NULL) names where it came
 * from, never the value. Returns 1 found, 0 none, -1 with oci.auth (or
 * io.error: a file path that does not fit, never read cut). The caller
 * wipes basic after use. */
int config_oci_basic(const char *host, int port, int port_explicit, char *basic, char *from, size_t fromcap,
                     struct err *e);

/* The credential for install.mirrors.npm as a whole request header line
 * ("Authorization: Bearer <token>" or "Authorization: Basic <base64>") into
 * hdr (cap bytes): ABX_INSTALL_NPM_TOKEN (a bearer token, what .npmrc's
 * _authToken=${NPM_TOKEN} holds), else the file install.mirrors.npm_auth_file
 * names, read as an .npmrc: its _authToken= (bearer) or _auth= (basic,
 * base64 user:password) line, unscoped or scoped to the mirror
 * ("//host[:port]/path/:_authToken=..."; a line scoped to another registry is
 * never used). Only for an https:// mirror: with a plain http one it is
 * config.invalid, never sent. from (may be NULL) names where it came from,
 * never the value. Returns 1 found, 0 none (no mirror, or no credential
 * set), -1 with install.npm_auth (unreadable file, no usable line) or
 * config.invalid. The caller wipes hdr after use. */
int config_npm_auth(const struct config *c, char *hdr, size_t cap, char *from, size_t fromcap, struct err *e);

/* The whole load: defaults, the file (file_flag if not NULL, which must
 * exist; else $ABX_SERVER_CONFIG, which must exist; else the default file if
 * present), envp, then the flags in order. On error *c is left with the
 * defaults. */
int config_load(struct config *c, const char *file_flag, char *const *envp, const struct config_flag *flags,
                int nflags, struct err *e);

const char *config_mode_name(enum cfg_mode m);
/* Parse a mode name; returns 0 or -1. */
int config_mode_parse(const char *s, enum cfg_mode *m);
/* Whether c's environment is "production" (the key environment: file,
 * ABX_SERVER_ENV): the one reading of that rule. Production refuses
 * unpinned installs and downloads. 1 or 0. */
int config_production(const struct config *c);

/* Whether the mode lets serve (or a shim) install on first use. */
int config_mode_installs_at_runtime(enum cfg_mode m);

const char *config_src_name(enum cfg_src s);

/* The dotted path of key k. */
const char *config_key_path(enum cfg_key k);
/* The key of a dotted path, or -1. */
int config_key_find(const char *path);

/* "file /etc/agent-sandbox/server.json", "env ABX_TOOLS_DIR",
 * "flag --tools-dir" or "default", into buf. Returns buf. */
const char *config_source(const struct config *c, enum cfg_key k, char *buf, size_t cap);

/* The effective value of k as text (lists comma-separated) into buf. */
const char *config_value_text(const struct config *c, enum cfg_key k, char *buf, size_t cap);

/* The closest of candidates[0..n) to word by edit distance, or NULL when
 * none is close enough to be a plausible typo. */
const char *config_did_you_mean(const char *word, const char *const *candidates, int n);

/* Levenshtein distance between a and b (each cut at 128 bytes). */
int config_edit_distance(const char *a, const char *b);

/* A tool, binary or agent name (agents name manifests): 1..CFG_NAME_MAX-1
 * bytes of [a-z0-9._-], starting with a letter or digit. Returns 1 when s
 * is one. */
int cfg_valid_name(const char *s);

#endif
