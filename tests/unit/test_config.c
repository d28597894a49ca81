#include "dir_fixture.h"
#include "config/config.h"
#include "net/http.h"
#include "net/oci.h"
#include "net/tls.h"
#include "config/config_priv.h"

#include <unistd.h>

static char *no_env[] = {NULL};

/* Load text as the file layer (no environment, no flags). */
static int
load_text(struct config *c, const char *text, struct err *e)
{
	const char *p = write_file("server.json", text);

	return config_load(c, p, no_env, NULL, 0, e);
}

/* --- hostile input first --- */

static void
test_not_json_is_json_syntax(void **state)
{
	struct config c;
	struct err e = {0};

	assert_int_equal(load_text(&c, "{\"install\": {\"mode\": \"lazy\",}}", &e), -1);
	assert_string_equal(e.code, "json.syntax");
	assert_int_equal(load_text(&c, "{\"agents\": [], \"agents\": []}", &e), -1);
	assert_string_equal(e.code, "json.syntax"); /* duplicate key */
	assert_int_equal(load_text(&c, "", &e), -1);
	assert_string_equal(e.code, "json.syntax");
	/* the defaults survive a failed load */
	assert_int_equal(c.install.mode, CFG_MODE_LAZY);
	assert_int_equal(c.server.port, 9000);
}

static void
test_unknown_key_did_you_mean(void **state)
{
	struct config c;
	struct err e = {0};

	assert_int_equal(load_text(&c, "{\"install\": {\"mdoe\": \"build\"}}", &e), -1);
	assert_string_equal(e.code, "config.invalid");
	assert_non_null(strstr(e.msg, "install.mdoe: unknown key (did you mean install.mode?)"));
	assert_non_null(strstr(e.msg, ":1:"));
	assert_int_equal(load_text(&c, "{\"mode\": \"build\"}", &e), -1);
	assert_non_null(strstr(e.msg, "mode: unknown key (did you mean install.mode?)"));
	assert_int_equal(load_text(&c, "{\"server\": {\"prot\": 1}}", &e), -1);
	assert_non_null(strstr(e.msg, "server.prot: unknown key (did you mean server.port?)"));
	assert_int_equal(load_text(&c, "{\"install\": {\"mirrors\": {\"nmp\": \"https://x\"}}}", &e), -1);
	assert_non_null(
	    strstr(e.msg, "install.mirrors.nmp: unknown key (did you mean install.mirrors.npm?)"));
	assert_int_equal(load_text(&c, "{\"zzzzzzzz\": 1}", &e), -1);
	assert_non_null(strstr(e.msg, "zzzzzzzz: unknown key"));
	assert_null(strstr(e.msg, "did you mean"));
}

static void
test_wrong_types_and_ranges(void **state)
{
	static const struct {
		const char *text, *needle;
	} cases[] = {
	    {"[]", "expected an object"},
	    {"{\"install\": []}", "install: expected an object"},
	    {"{\"install\": {\"wait\": \"20\"}}", "install.wait: expected an integer from 0 to 3600"},
	    {"{\"install\": {\"wait\": 1.5}}", "install.wait"},
	    {"{\"install\": {\"wait\": -1}}", "install.wait"},
	    {"{\"server\": {\"port\": 70000}}", "server.port"},
	    {"{\"install\": {\"mode\": \"auto\"}}", "is not a mode"},
	    {"{\"install\": {\"mode\": null}}", "install.mode: expected a string"},
	    {"{\"install\": {\"allow_tmp\": 1}}", "install.allow_tmp: expected true or false"},
	    {"{\"install\": {\"mirrors\": {\"npm\": \"ftp://registry.example\"}}}", "not an https:// URL"},
	    {"{\"install\": {\"mirrors\": {\"npm\": \"http://registry.example\"}}}",
	     "plain http mirror; set install.allow_http_mirrors to true"},
	    {"{\"install\": {\"mirrors\": {\"oci\": \"oci+http://r.example/x\"}, \"allow_hosts\": "
	     "[\"r.example\"]}}",
	     "install.mirrors.oci: http://r.example/x is a plain http mirror"},
	    {"{\"install\": {\"mirrors\": {\"oci\": \"oci://r.example/X\"}}}",
	     "install.mirrors.oci: oci://r.example/X"},
	    {"{\"install\": {\"mirrors\": {\"oci\": \"oci://r.example/x\"}}}",
	     "install.mirrors.oci: the mirror's host r.example is not in install.allow_hosts"},
	    {"{\"install\": {\"mirrors\": {\"tarball\": [\"relative/dir\"]}}}", "install.mirrors.tarball[0]"},
	    {"{\"install\": {\"mirrors\": {\"tarball\": \"https://m/{path}\"}}}", "expected an array"},
	    {"{\"install\": {\"allow_hosts\": [\"a b\"]}}", "install.allow_hosts[0]"},
	    {"{\"agents\": [\"codex\", \"codex\"]}", "listed twice"},
	    {"{\"agents\": [\"Codex\"]}", "not a tool name"},
	    {"{\"agents\": [1]}", "agents[0]: expected a string"},
	    {"{\"preset\": \"root\"}", "not a preset"},
	    {"{\"tools_dir\": \"\"}", "tools_dir: empty path"},
	    {"{\"tools_dir\": \"a\\u0000b\"}", "tools_dir: expected a string"},
	    {"{\"environment\": \"Prod uction\"}", "environment"},
	    {"{\"server\": {\"host\": \"a;b\"}}", "server.host"},
	};
	struct config c;
	struct err e = {0};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = load_text(&c, cases[i].text, &e);
		if (rc != -1 || strcmp(e.code, "config.invalid") != 0 ||
		    strstr(e.msg, cases[i].needle) == NULL)
			fail_msg("case %zu %s: rc %d code %s msg %s", i, cases[i].text, rc, e.code, e.msg);
	}
}

static void
test_oversized_and_deep(void **state)
{
	struct config c;
	struct err e = {0};
	char *big = malloc(CFG_FILE_MAX + 16), deep[200];
	int i;

	memset(big, ' ', CFG_FILE_MAX + 8);
	big[0] = '{';
	big[CFG_FILE_MAX + 8] = '}';
	big[CFG_FILE_MAX + 9] = '\0';
	assert_int_equal(load_text(&c, big, &e), -1);
	assert_string_equal(e.code, "json.too_large");
	free(big);
	for (i = 0; i < 40; i++)
		deep[i] = '[';
	for (; i < 80; i++)
		deep[i] = ']';
	deep[80] = '\0';
	assert_int_equal(load_text(&c, deep, &e), -1);
	assert_string_equal(e.code, "json.too_deep");
}

static void
test_missing_config_file(void **state)
{
	struct config c;
	struct err e = {0};
	char *env[] = {"ABX_SERVER_CONFIG=/nonexistent/server.json", NULL};

	assert_int_equal(config_load(&c, "/nonexistent/x.json", no_env, NULL, 0, &e), -1);
	assert_string_equal(e.code, "io.error");
	assert_int_equal(config_load(&c, NULL, env, NULL, 0, &e), -1);
	assert_string_equal(e.code, "io.error");
}

static void
test_bad_env_values(void **state)
{
	struct config c;
	struct err e = {0};
	char *env1[] = {"ABX_SERVER_INSTALL_MODE=fast", NULL};
	char *env2[] = {"ABX_SERVER_PORT=90x", NULL};
	char *env3[] = {"ABX_INSTALL_MODE=sometimes", NULL};

	assert_int_equal(config_load(&c, NULL, env1, NULL, 0, &e), -1);
	assert_string_equal(e.code, "config.invalid");
	assert_non_null(strstr(e.msg, "ABX_SERVER_INSTALL_MODE"));
	assert_int_equal(config_load(&c, NULL, env2, NULL, 0, &e), -1);
	assert_non_null(strstr(e.msg, "ABX_SERVER_PORT"));
	assert_int_equal(config_load(&c, NULL, env3, NULL, 0, &e), -1);
	assert_non_null(strstr(e.msg, "ABX_INSTALL_MODE"));
}

/* --- layers --- */

static void
test_defaults(void **state)
{
	struct config c;
	struct err e = {0};
	char buf[64];

	assert_int_equal(config_load(&c, NULL, no_env, NULL, 0, &e), 0);
	assert_int_equal(c.install.mode, CFG_MODE_LAZY);
	assert_int_equal(c.install.wait, 20);
	assert_int_equal(c.install.timeout, 600);
	assert_int_equal(c.install.max_download_mb, 500);
	assert_int_equal(c.install.allow_tmp, 0);
	assert_int_equal(c.install.use_path, 1);
	assert_string_equal(config_source(&c, CK_INSTALL_MODE, buf, sizeof(buf)), "default");
	assert_int_equal(c.introspect, 0);
	/* every default of the schema table, as the README's table states it */
	assert_string_equal(c.server.host, "0.0.0.0");
	assert_int_equal(c.server.port, 9000);
	assert_int_equal(c.server.max_connections, 256);
	assert_int_equal(c.server.max_connections_per_peer, 64);
	assert_int_equal(c.server.workers, 4);
	assert_int_equal(c.server.header_timeout, 10);
	assert_int_equal(c.server.idle_timeout, 60);
	assert_int_equal(c.server.request_timeout, 60);
	assert_int_equal(c.server.max_header_bytes, 16384);
	assert_int_equal(c.server.max_body_bytes, 1048576);
	assert_int_equal(c.server.max_output_bytes, 1048576);
	assert_int_equal(c.server.op_concurrency, 4);
	assert_int_equal(c.server.max_sessions, 16);
	assert_int_equal(c.server.max_sessions_per_agent, 4);
	assert_int_equal(c.server.session_journal_max_bytes, 4194304);
	assert_int_equal(c.server.sse_heartbeat, 15);
	assert_int_equal(c.server.max_streams, 64);
	assert_int_equal(c.install.npm_mirror[0], '\0');
	assert_int_equal(c.install.tarball_mirrors.n, 0);
	assert_int_equal(c.agents.n, 0);
	assert_int_equal(c.tools_dir[0], '\0');
	assert_int_equal(c.nwarn, 0);
}

/* A configuration table and the schema table say the same: in
 * docs/configuration.md a row per key, naming its variable and its option,
 * with its default; in the README's short table (full == 0) the rows it has
 * name the same variable and default. */
static void
check_config_table(const char *path, int full)
{
	static char text[1 << 20];
	char want[128], def[128], up[256];
	const char *row, *cols[4];
	FILE *f = fopen(path, "r");
	size_t n;
	int k, i;

	if (f == NULL) {
		snprintf(up, sizeof(up), "../../%s", path);
		f = fopen(up, "r");
	}
	assert_non_null(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	for (k = 0; k < CK_NKEYS; k++) {
		snprintf(want, sizeof(want), "\n| `%s` | ", cfg_keys[k].path);
		if ((row = strstr(text, want)) == NULL) {
			if (!full)
				continue;
			fail_msg("%s: no row for %s", path, cfg_keys[k].path);
		}
		row += 3; /* the row's first column */
		for (i = 0; i < 4; i++) {
			cols[i] = row;
			if ((row = strstr(row, " | ")) == NULL)
				fail_msg("%s: the row of %s has fewer than 4 columns", path,
				         cfg_keys[k].path);
			row += 3;
		}
		snprintf(want, sizeof(want), "`%s`", cfg_keys[k].env);
		if (strstr(cols[1], want) == NULL || strstr(cols[1], want) > cols[2])
			fail_msg("%s: the row of %s does not name %s", path, cfg_keys[k].path, want);
		if (full && cfg_keys[k].opt != NULL) {
			snprintf(want, sizeof(want), "`--%s`", cfg_keys[k].opt);
			if (strstr(cols[1], want) == NULL || strstr(cols[1], want) > cols[2])
				fail_msg("%s: the row of %s does not name %s", path, cfg_keys[k].path, want);
		}
		if (cfg_keys[k].def[0] == '\0')
			continue;
		snprintf(def, sizeof(def), "%.*s", (int)(cols[3] - cols[2] - 3), cols[2]);
		snprintf(want, sizeof(want), "`%s`", cfg_keys[k].def);
		if (strcmp(def, cfg_keys[k].def) != 0 && strcmp(def, want) != 0)
			fail_msg("%s: the default of %s is \"%s\", the table's is %s", path, cfg_keys[k].path,
			         def, cfg_keys[k].def);
	}
}

static void
test_readme_table_matches(void **state)
{
	check_config_table("docs/configuration.md", 1);
	check_config_table("README.md", 0);
}

/* The option table: each option names its key, a repeated option keeps the
 * last value, and the source says which option set it. */
static void
test_option_table(void **state)
{
	struct config_flags f = {0};
	struct config c;
	struct err e = {0};
	char buf[64];

	assert_int_equal(config_option_key("tools-dir"), CK_TOOLS_DIR);
	assert_int_equal(config_option_key("manifests"), CK_MANIFESTS_DIR);
	assert_int_equal(config_option_key("max-connections"), CK_SERVER_MAX_CONNECTIONS);
	assert_int_equal(config_option_key("mode"), CK_INSTALL_MODE);
	assert_int_equal(config_option_key("config"), -1); /* the file, not a key */
	assert_int_equal(config_option_key("tools_dir"), -1);
	assert_int_equal(config_option_key(NULL), -1);

	assert_int_equal(config_flags_add(&f, "verbose", "1"), 0);
	assert_int_equal(f.n, 0);
	assert_int_equal(config_flags_add(&f, "tools-dir", "/a"), 1);
	assert_int_equal(config_flags_add(&f, "port", "8080"), 1);
	assert_int_equal(config_flags_add(&f, "tools-dir", "/b"), 1);
	assert_int_equal(f.n, 2);
	assert_int_equal(config_load(&c, NULL, no_env, f.v, f.n, &e), 0);
	assert_string_equal(c.tools_dir, "/b");
	assert_int_equal(c.server.port, 8080);
	assert_string_equal(config_source(&c, CK_TOOLS_DIR, buf, sizeof(buf)), "flag --tools-dir");
	assert_string_equal(config_source(&c, CK_SERVER_PORT, buf, sizeof(buf)), "flag --port");

	/* a flag value is checked like every layer's */
	f.n = 0;
	config_flags_add(&f, "workers", "0");
	assert_int_equal(config_load(&c, NULL, no_env, f.v, f.n, &e), -1);
	assert_string_equal(e.code, "config.invalid");
	assert_non_null(strstr(e.msg, "--workers"));
}

/* config_env: the listed ABX_* variables only; empty counts as unset. */
static void
test_env_accessor(void **state)
{
	setenv("ABX_INSTALL_LIBC", "musl", 1);
	assert_string_equal(config_env("ABX_INSTALL_LIBC"), "musl");
	setenv("ABX_INSTALL_LIBC", "", 1);
	assert_null(config_env("ABX_INSTALL_LIBC"));
	unsetenv("ABX_INSTALL_LIBC");
	assert_null(config_env("ABX_INSTALL_LIBC"));

	/* a key's own variable and the ABX_TOOL_<NAME> family are listed */
	setenv("ABX_MANIFESTS_DIR", "/m", 1);
	assert_string_equal(config_env("ABX_MANIFESTS_DIR"), "/m");
	unsetenv("ABX_MANIFESTS_DIR");
	setenv("ABX_TOOL_RIPGREP", "/usr/bin/rg", 1);
	assert_string_equal(config_env("ABX_TOOL_RIPGREP"), "/usr/bin/rg");
	unsetenv("ABX_TOOL_RIPGREP");

	/* a variable not in the list is never read */
	setenv("ABX_NOT_LISTED", "x", 1);
	assert_null(config_env("ABX_NOT_LISTED"));
	unsetenv("ABX_NOT_LISTED");
	setenv("HOME_NOT_ABX", "x", 1);
	assert_null(config_env("HOME_NOT_ABX"));
	unsetenv("HOME_NOT_ABX");
	assert_null(config_env(NULL));
}

/* The environment's proxies and CA bundle reach the client through the
 * configuration layer (the HTTP layer reads no variable itself). */
static void
test_http_client_from_env(void **state)
{
	struct http_client *c;
	struct err e = {0};

	unsetenv("HTTPS_PROXY");
	unsetenv("https_proxy");
	setenv("https_proxy", "http://[::1", 1); /* an unusable URL */
	err_clear(&e);
	assert_null(config_http_client(&e));
	assert_string_equal(e.code, "http.proxy");
	setenv("HTTPS_PROXY", "http://127.0.0.1:3128", 1); /* the upper-case one wins */
	assert_non_null(c = config_http_client(&e));
	http_client_free(c);
	unsetenv("HTTPS_PROXY");
	unsetenv("https_proxy");
	/* a bundle that does not exist: the load names it */
	unsetenv("SSL_CERT_DIR");
	setenv("SSL_CERT_FILE", "/nonexistent/ca.pem", 1);
	assert_non_null(c = config_http_client(&e));
	assert_int_equal(tls_anchors_load(&e), -1);
	assert_string_equal(e.code, "tls.no_trust_anchors");
	assert_non_null(strstr(e.msg, "SSL_CERT_FILE=/nonexistent/ca.pem"));
	http_client_free(c);
	unsetenv("SSL_CERT_FILE");
	tls_anchors_source(NULL, NULL);
}

static void
test_precedence_every_layer(void **state)
{
	const char *p =
	    write_file("layers.json", "{\"tools_dir\": \"/from/file\", \"state_dir\": \"/s/file\","
	                              " \"install\": {\"wait\": 5, \"mode\": \"offline\"}}");
	char *env[] = {"ABX_TOOLS_DIR=/from/env", "ABX_SERVER_INSTALL_WAIT=7", NULL};
	struct config_flag flags[] = {{"tools_dir", "/from/flag", "--tools-dir"}};
	struct config c;
	struct err e = {0};
	char buf[CFG_PATH_MAX + 16];

	assert_int_equal(config_load(&c, p, env, flags, 1, &e), 0);
	assert_string_equal(c.tools_dir, "/from/flag");
	assert_string_equal(config_source(&c, CK_TOOLS_DIR, buf, sizeof(buf)), "flag --tools-dir");
	assert_int_equal(c.install.wait, 7);
	assert_string_equal(config_source(&c, CK_INSTALL_WAIT, buf, sizeof(buf)),
	                    "env ABX_SERVER_INSTALL_WAIT");
	assert_string_equal(c.state_dir, "/s/file");
	assert_non_null(strstr(config_source(&c, CK_STATE_DIR, buf, sizeof(buf)), "file "));
	assert_int_equal(c.install.mode, CFG_MODE_OFFLINE);
	assert_int_equal(c.install.timeout, 600);
	assert_string_equal(config_source(&c, CK_INSTALL_TIMEOUT, buf, sizeof(buf)), "default");
	/* without the flag, env wins over the file */
	assert_int_equal(config_load(&c, p, env, NULL, 0, &e), 0);
	assert_string_equal(c.tools_dir, "/from/env");
	/* an empty variable is unset */
	env[0] = "ABX_TOOLS_DIR=";
	assert_int_equal(config_load(&c, p, env, NULL, 0, &e), 0);
	assert_string_equal(c.tools_dir, "/from/file");
}

static void
test_relative_paths_resolve_against_file(void **state)
{
	struct config c;
	struct err e = {0};
	char want[600];

	assert_int_equal(load_text(&c, "{\"commands\": \"cmds.json\", \"policy\": \"/abs/p.json\"}", &e), 0);
	snprintf(want, sizeof(want), "%s/cmds.json", dir);
	assert_string_equal(c.commands, want);
	assert_string_equal(c.policy, "/abs/p.json");
}

static void
test_lists_from_env_and_file(void **state)
{
	char *env[] = {"ABX_SERVER_AGENTS=codex, gemini",
	               "ABX_INSTALL_MIRROR=https://m.example/{host}/{path},/mnt/cache",
	               "ABX_INSTALL_NPM_REGISTRY=https://registry.npmmirror.com", NULL};
	struct config c;
	struct err e = {0};
	char buf[600];
	const char *p = write_file("l.json", "{\"agents\": [\"claude-code\"], \"install\": {\"allow_hosts\": "
	                                     "[\"m.example\", \"registry.npmmirror.com\"], \"mirrors\": "
	                                     "{\"tarball\": [\"file:///srv/cache\"]}}}");

	assert_int_equal(config_load(&c, p, env, NULL, 0, &e), 0);
	assert_int_equal(c.agents.n, 2);
	assert_string_equal(c.agents.v[1], "gemini");
	assert_int_equal(c.install.tarball_mirrors.n, 2);
	assert_string_equal(c.install.tarball_mirrors.v[1], "/mnt/cache");
	assert_string_equal(c.install.npm_mirror, "https://registry.npmmirror.com");
	assert_string_equal(c.install.allow_hosts.v[0], "m.example");
	assert_string_equal(config_value_text(&c, CK_AGENTS, buf, sizeof(buf)), "codex,gemini");
}

/* an https mirror's host must be in install.allow_hosts */
static void
test_mirror_host_must_be_allowed(void **state)
{
	char *env[] = {"ABX_INSTALL_MIRROR=https://m.example:8443/{host}/{path}", NULL};
	char *env_ok[] = {"ABX_INSTALL_MIRROR=https://m.example:8443/{host}/{path}",
	                  "ABX_SERVER_INSTALL_ALLOW_HOSTS=m.example:8443", NULL};
	struct config c;
	struct err e = {0};

	assert_int_equal(config_load(&c, NULL, env, NULL, 0, &e), -1);
	assert_string_equal(e.code, "config.invalid");
	assert_non_null(strstr(e.msg, "install.mirrors.tarball: the mirror's host m.example:8443 is not in "
	                              "install.allow_hosts"));
	assert_int_equal(config_load(&c, NULL, env_ok, NULL, 0, &e), 0);
	assert_int_equal(load_text(&c, "{\"install\": {\"mirrors\": {\"npm\": \"https://r.example\"}}}", &e),
	                 -1);
	assert_non_null(strstr(e.msg, "install.mirrors.npm: the mirror's host r.example"));
	assert_int_equal(load_text(&c, "{\"install\": {\"mirrors\": {\"tarball\": [\"/srv/cache\"]}}}", &e),
	                 0);
}

static void
test_restrict_only(void **state)
{
	char *env_build[] = {"ABX_SERVER_INSTALL_MODE=build", NULL};
	char *env_off[] = {"ABX_SERVER_INSTALL_MODE=off", NULL};
	char *env_lazy[] = {"ABX_SERVER_INSTALL_MODE=lazy", NULL};
	struct config_flag lazy[] = {{"install.mode", "lazy", "--mode"}};
	struct config_flag offline[] = {{"install.mode", "offline", "--mode"}};
	struct config_flag off[] = {{"install.mode", "off", "--mode"}};
	struct config_flag build[] = {{"install.mode", "build", "--mode"}};
	const char *file_lazy = write_file("lazy.json", "{\"install\": {\"mode\": \"lazy\"}}");
	struct config c;
	struct err e = {0};
	char buf[128];

	/* a file cannot loosen the environment */
	assert_int_equal(config_load(&c, file_lazy, env_build, NULL, 0, &e), 0);
	assert_int_equal(c.install.mode, CFG_MODE_BUILD);
	assert_string_equal(config_source(&c, CK_INSTALL_MODE, buf, sizeof(buf)),
	                    "env ABX_SERVER_INSTALL_MODE");
	/* neither can a flag */
	assert_int_equal(config_load(&c, file_lazy, env_build, lazy, 1, &e), -1);
	assert_string_equal(e.code, "config.invalid");
	assert_non_null(strstr(e.msg, "restrict-only"));
	assert_int_equal(config_load(&c, NULL, env_build, offline, 1, &e), -1);
	assert_int_equal(config_load(&c, NULL, env_off, build, 1, &e), -1);
	/* tightening is fine */
	assert_int_equal(config_load(&c, NULL, env_build, off, 1, &e), 0);
	assert_int_equal(c.install.mode, CFG_MODE_OFF);
	assert_int_equal(config_load(&c, NULL, env_build, build, 1, &e), 0);
	/* lazy from the environment is no floor */
	assert_int_equal(config_load(&c, NULL, env_lazy, off, 1, &e), 0);
	assert_int_equal(config_load(&c, NULL, env_lazy, lazy, 1, &e), 0);
	assert_int_equal(c.install.mode, CFG_MODE_LAZY);
	/* a file's build is no floor either: flags may set what they like */
	assert_int_equal(config_load(&c, write_file("b.json", "{\"install\": {\"mode\": \"build\"}}"), no_env,
	                             lazy, 1, &e),
	                 0);
	assert_int_equal(c.install.mode, CFG_MODE_LAZY);
	assert_string_equal(config_source(&c, CK_INSTALL_MODE, buf, sizeof(buf)), "flag --mode");
}

static void
test_deprecated_alias(void **state)
{
	char *alias[] = {"ABX_INSTALL_MODE=build", NULL};
	char *both_stricter_alias[] = {"ABX_SERVER_INSTALL_MODE=lazy", "ABX_INSTALL_MODE=off", NULL};
	char *both_looser_alias[] = {"ABX_SERVER_INSTALL_MODE=build", "ABX_INSTALL_MODE=lazy", NULL};
	struct config_flag lazy[] = {{"install.mode", "lazy", "--mode"}};
	struct config c;
	struct err e = {0};
	char buf[128];

	assert_int_equal(config_load(&c, NULL, alias, NULL, 0, &e), 0);
	assert_int_equal(c.install.mode, CFG_MODE_BUILD);
	assert_int_equal(c.nwarn, 1);
	assert_non_null(strstr(c.warn[0], "deprecated"));
	assert_string_equal(config_source(&c, CK_INSTALL_MODE, buf, sizeof(buf)), "env ABX_INSTALL_MODE");
	/* the alias is restrict-only too */
	assert_int_equal(config_load(&c, NULL, alias, lazy, 1, &e), -1);
	assert_int_equal(config_load(&c, NULL, both_stricter_alias, NULL, 0, &e), 0);
	assert_int_equal(c.install.mode, CFG_MODE_OFF);
	assert_int_equal(config_load(&c, NULL, both_looser_alias, NULL, 0, &e), 0);
	assert_int_equal(c.install.mode, CFG_MODE_BUILD);
	assert_string_equal(config_source(&c, CK_INSTALL_MODE, buf, sizeof(buf)),
	                    "env ABX_SERVER_INSTALL_MODE");
	assert_int_equal(c.nwarn, 2);
}

static void
test_unknown_env_variable_warns(void **state)
{
	char *env[] = {"ABX_SERVER_INSTAL_MODE=build", "ABX_SERVER_TOKEN=secret", "ABX_SERVER_INTROSPECT=1",
	               NULL};
	struct config c;
	struct err e = {0};

	assert_int_equal(config_load(&c, NULL, env, NULL, 0, &e), 0);
	assert_int_equal(c.install.mode, CFG_MODE_LAZY);
	assert_int_equal(c.nwarn, 1);
	assert_non_null(strstr(
	    c.warn[0], "ABX_SERVER_INSTAL_MODE: unknown variable (did you mean ABX_SERVER_INSTALL_MODE?)"));
	assert_int_equal(c.introspect, 1);
}

static void
test_flags_validate(void **state)
{
	struct config_flag bad[] = {{"server.port", "-5", "--port"}};
	struct config_flag nokey[] = {{"server.prot", "5", "--port"}};
	struct config c;
	struct err e = {0};

	assert_int_equal(config_load(&c, NULL, no_env, bad, 1, &e), -1);
	assert_string_equal(e.code, "config.invalid");
	assert_non_null(strstr(e.msg, "--port"));
	assert_int_equal(config_load(&c, NULL, no_env, nokey, 1, &e), -1);
}

static void
test_edit_distance(void **state)
{
	static const char *const cand[] = {"mode", "wait", "timeout"};

	assert_int_equal(config_edit_distance("mdoe", "mode"), 2);
	assert_int_equal(config_edit_distance("", "abc"), 3);
	assert_int_equal(config_edit_distance("kitten", "sitting"), 3);
	assert_string_equal(config_did_you_mean("tiemout", cand, 3), "timeout");
	assert_null(config_did_you_mean("xyzzy", cand, 3));
}

static void
test_full_schema_loads(void **state)
{
	struct config c;
	struct err e = {0};
	int k;
	char buf[128];

	assert_int_equal(
	    load_text(
	        &c,
	        "{\"install\": {\"mode\": \"build\", \"wait\": 0, \"timeout\": 900,"
	        " \"max_download_mb\": 200, \"mirrors\": {\"npm\": \"https://r.example\","
	        " \"npm_auth_file\": \"/npmrc\", \"tarball\": [\"https://m.example/{host}/{path}\"], "
	        "\"oci\": "
	        "\"oci://r.example/team/tools\"},"
	        " \"allow_hosts\": [\"m.example\", \"r.example\"],"
	        " \"allow_tmp\": true, \"use_path\": false, \"allow_http_mirrors\": false,"
	        " \"cpu_level\": \"baseline\"},"
	        " \"agents\": [\"codex\"], \"commands\": \"c.json\", \"policy\": \"p.json\","
	        " \"preset\": \"agents\", \"tools_dir\": \"/t\", \"state_dir\": \"/s\", \"base_dir\": \"/b\","
	        " \"manifests_dir\": \"/m\", \"audit_file\": \"/a.log\", \"environment\": \"production\","
	        " \"server\": {\"host\": \"127.0.0.1\", \"port\": 0, \"max_connections\": 64, "
	        "\"max_connections_per_peer\": 8,"
	        " \"workers\": 2, \"header_timeout\": 5, \"idle_timeout\": 30, \"request_timeout\": 30,"
	        " \"max_header_bytes\": 8192, \"max_body_bytes\": 65536, \"max_output_bytes\": 65536,"
	        " \"op_concurrency\": 2, \"max_sessions\": 8, \"max_sessions_per_agent\": 2,"
	        " \"session_journal_max_bytes\": 65536, \"sse_heartbeat\": 5, \"max_streams\": 1,"
	        " \"session_cwd\": \"/w\", \"session_env\": [\"GIT_AUTHOR_NAME\"],"
	        " \"token_file\": \"/run/abx/token\", \"sandbox_id_file\": \"id\"}}",
	        &e),
	    0);
	for (k = 0; k < CK_NKEYS; k++)
		if (c.src[k] != CFG_SRC_FILE)
			fail_msg("%s not from the file (%s)", config_key_path(k),
			         config_source(&c, k, buf, sizeof(buf)));
	assert_int_equal(c.install.use_path, 0);
	assert_int_equal(c.server.port, 0);
	assert_string_equal(c.environment, "production");
	assert_string_equal(c.install.cpu_level, "baseline");
	assert_string_equal(c.server.session_cwd, "/w");
	assert_int_equal(c.server.session_env.n, 1);
	assert_string_equal(c.server.session_env.v[0], "GIT_AUTHOR_NAME");
	assert_string_equal(c.server.token_file, "/run/abx/token");
	assert_non_null(strstr(c.server.sandbox_id_file, "/id"));
}

/* server.session_env: variable names, never PATH, LD_* or ABX_*, no
 * duplicates; from the file or the environment (comma-separated). */
static void
test_session_env(void **state)
{
	static const char *const bad[] = {
	    "[\"PATH\"]", "[\"LD_PRELOAD\"]", "[\"ABX_SERVER_TOKEN\"]", "[\"1A\"]",
	    "[\"A-B\"]",  "[\"\"]",           "[\"A\",\"A\"]",          "\"A\"",
	};
	char *env[] = {"ABX_SERVER_SESSION_ENV=A,B_2", NULL};
	struct config c;
	struct err e = {0};
	char doc[128];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(doc, sizeof(doc), "{\"server\": {\"session_env\": %s}}", bad[i]);
		if (load_text(&c, doc, &e) != -1)
			fail_msg("accepted %s", bad[i]);
		assert_string_equal(e.code, "config.invalid");
	}
	assert_int_equal(config_load(&c, NULL, env, NULL, 0, &e), 0);
	assert_int_equal(c.server.session_env.n, 2);
	assert_string_equal(c.server.session_env.v[1], "B_2");
}

/* A HOME whose "<HOME>/.docker/config.json" does not fit: cut, it would be
 * "<HOME>/.docker/config", another file (here one that holds a
 * credential). The path is refused, nothing is read. */
static void
test_oci_auth_path_too_long(void **state)
{
	char home[CFG_PATH_MAX], p[CFG_PATH_MAX + 64], basic[OCI_BASIC_MAX], was[4096];
	FILE *f;
	struct err e = {0};

	unit_deep_dir(dir, home, sizeof(home), CFG_PATH_MAX - 1 - strlen("/.docker/config"));
	snprintf(p, sizeof(p), "%s/.docker", home);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/.docker/config", home);
	assert_non_null(f = fopen(p, "w"));
	fputs("{\"auths\": {\"reg.test\": {\"auth\": \"dXNlcjpwYXNz\"}}}", f);
	fclose(f);
	unsetenv("ABX_OCI_AUTH");
	unsetenv("ABX_OCI_AUTH_FILE");
	unsetenv("DOCKER_CONFIG");
	snprintf(was, sizeof(was), "%s", getenv("HOME") ? getenv("HOME") : "/");
	setenv("HOME", home, 1);
	assert_int_equal(config_oci_basic("reg.test", 443, 0, basic, NULL, 0, &e), -1);
	assert_string_equal(e.code, "io.error");
	assert_string_equal(basic, "");
	/* the same file named on purpose is read */
	setenv("ABX_OCI_AUTH_FILE", p, 1);
	assert_int_equal(config_oci_basic("reg.test", 443, 0, basic, NULL, 0, &e), 1);
	unsetenv("ABX_OCI_AUTH_FILE");
	setenv("HOME", was, 1);
}

/* npm_auth FILE-TEXT MIRROR: config_npm_auth's answer for an .npmrc with
 * text, hdr filled */
static int
npm_auth(const char *text, const char *mirror, char *hdr, size_t cap, struct err *e)
{
	struct config c;

	config_defaults(&c);
	snprintf(c.install.npm_mirror, sizeof(c.install.npm_mirror), "%s", mirror);
	snprintf(c.install.npm_auth_file, sizeof(c.install.npm_auth_file), "%s", write_file("npmrc", text));
	return config_npm_auth(&c, hdr, cap, NULL, 0, e);
}

static void
test_npm_auth_scopes(void **state)
{
	char hdr[256];
	struct err e = {0};

	unsetenv("ABX_INSTALL_NPM_TOKEN");
	/* a line for another host, a longer host name, another port or another
	 * path is never the mirror's */
	assert_int_equal(npm_auth("//r.test2/:_authToken=a\n//r.test:444/:_authToken=b\n"
	                          "//r.test/other/:_authToken=c\n//r.test:_authToken=d\n",
	                          "https://r.test/npm", hdr, sizeof(hdr), &e),
	                 -1);
	assert_string_equal(e.code, "install.npm_auth");
	assert_string_equal(hdr, "");
	assert_null(strstr(e.msg, "=a"));
	/* scoped to the mirror, with its path, after comments; spaces and CR trimmed */
	assert_int_equal(npm_auth("# x\n; y\n//r.test/npm/:_authToken = tok1 \r\n", "https://r.test/npm/",
	                          hdr, sizeof(hdr), &e),
	                 1);
	assert_string_equal(hdr, "Authorization: Bearer tok1");
	assert_int_equal(
	    npm_auth("//r.test:8443/:_auth=dTpw\n", "https://r.test:8443/", hdr, sizeof(hdr), &e), 1);
	assert_string_equal(hdr, "Authorization: Basic dTpw");
	/* unscoped counts; a value with a space or control byte cannot add a header */
	assert_int_equal(npm_auth("_authToken=a b\n_auth=dTpw\n", "https://r.test", hdr, sizeof(hdr), &e), 1);
	assert_string_equal(hdr, "Authorization: Basic dTpw");
	/* ${VAR} is not expanded, and not sent as is */
	assert_int_equal(npm_auth("_authToken=${NPM_TOKEN}\n", "https://r.test", hdr, sizeof(hdr), &e), -1);
	assert_string_equal(hdr, "");
	/* never over plain http; no mirror, no credential */
	assert_int_equal(npm_auth("_authToken=t\n", "http://r.test", hdr, sizeof(hdr), &e), -1);
	assert_string_equal(e.code, "config.invalid");
	assert_int_equal(npm_auth("_authToken=t\n", "", hdr, sizeof(hdr), &e), 0);
	/* the environment's token wins; one with a newline is refused */
	setenv("ABX_INSTALL_NPM_TOKEN", "envtok", 1);
	assert_int_equal(npm_auth("_authToken=t\n", "https://r.test", hdr, sizeof(hdr), &e), 1);
	assert_string_equal(hdr, "Authorization: Bearer envtok");
	setenv("ABX_INSTALL_NPM_TOKEN", "a\r\nX-Evil: 1", 1);
	assert_int_equal(npm_auth("", "https://r.test", hdr, sizeof(hdr), &e), -1);
	assert_null(strstr(e.msg, "Evil"));
	unsetenv("ABX_INSTALL_NPM_TOKEN");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_not_json_is_json_syntax),
	    cmocka_unit_test(test_unknown_key_did_you_mean),
	    cmocka_unit_test(test_wrong_types_and_ranges),
	    cmocka_unit_test(test_oversized_and_deep),
	    cmocka_unit_test(test_missing_config_file),
	    cmocka_unit_test(test_bad_env_values),
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_option_table),
	    cmocka_unit_test(test_readme_table_matches),
	    cmocka_unit_test(test_env_accessor),
	    cmocka_unit_test(test_http_client_from_env),
	    cmocka_unit_test(test_precedence_every_layer),
	    cmocka_unit_test(test_relative_paths_resolve_against_file),
	    cmocka_unit_test(test_lists_from_env_and_file),
	    cmocka_unit_test(test_mirror_host_must_be_allowed),
	    cmocka_unit_test(test_restrict_only),
	    cmocka_unit_test(test_deprecated_alias),
	    cmocka_unit_test(test_unknown_env_variable_warns),
	    cmocka_unit_test(test_flags_validate),
	    cmocka_unit_test(test_edit_distance),
	    cmocka_unit_test(test_full_schema_loads),
	    cmocka_unit_test(test_session_env),
	    cmocka_unit_test(test_oci_auth_path_too_long),
	    cmocka_unit_test(test_npm_auth_scopes),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
