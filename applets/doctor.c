/*
 * doctor: diagnose this environment in one screen, for a static binary
 * that cannot assume what the image holds. Every line is PASS, WARN or FAIL
 * with a one-line fix; the exit status is 0 without a FAIL, else 1. This
 * file holds the configuration, manifest, image, CA, clock and system checks
 * and doctor_main, on top; directories and installed tools are in
 * doctor_dirs.c, ports and reachability in doctor_net.c, the OCI mirror in
 * doctor_oci.c, and the report they all write to in doctor_report.c.
 */
#include "common.h"

#include <fcntl.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "install/install.h"
#include "net/http.h"
#include "net/tls.h"
#include "base/json.h"
#include "pkg/npmlock.h"
#include "server/api.h"
#include "server/plan.h"
#include "cfgload.h"
#include "doctor.h"

struct doctor_opts {
	struct cfgload *L;
	const char *ports;
	int json, network;
};

#define O(f) offsetof(struct doctor_opts, f)
static const struct opt options[] = {
    OPT(0, "json", NULL, NULL, O(json)),
    OPT(0, "network", NULL, NULL, O(network)),
    OPT(0, "ports", "LIST", NULL, O(ports)),
    CFGLOAD_OPTS(cfgload_set, O(L)),
    OPT_END,
};
#undef O

static const struct opts usage = {
    "doctor", "doctor.txt", options, 0, EXIT_USAGE, NULL,
};

/* --- configuration and manifests --- */

/* Manifests: every one of the set (embedded, then manifests_dir) loads and
 * validates with its requires closure. */
static void
check_manifests(struct report *r, struct cfgload *L)
{
	struct manifest_opts opts = {0};
	const manifest_t *m;
	struct err e = {0};
	int i, n = 0, bad = 0;

	if (!L->st.ms_open) {
		opts.platform = manifest_platform_self();
		opts.allow_unpinned = manifest_unpinned_allowed(&L->cfg, &e) > 0;
		snprintf(opts.npm_mirror, sizeof(opts.npm_mirror), "%s", L->cfg.install.npm_mirror);
		if (manifest_set_open(&L->ms, L->cfg.manifests_dir[0] ? L->cfg.manifests_dir : NULL, &opts,
		                      &e) != 0) {
			doctor_line(r, "FAIL", "manifests",
			            "fix manifests_dir / ABX_MANIFESTS_DIR / --manifests", "%s", e.msg);
			return;
		}
		L->st.ms = &L->ms, L->st.ms_open = L->st.ms_owned = 1;
	}
	for (i = 0; i < L->ms.n; i++) {
		if ((m = manifest_get(&L->ms, L->ms.ent[i].name, &e)) == NULL) {
			doctor_line(
			    r, "FAIL", "manifests",
			    "fix the manifest (`agent-sandbox-server check-config --manifest FILE`), or "
			    "re-pin it with `lock`",
			    "%s: %s", e.code ? e.code : "internal", e.msg);
			bad++;
			continue;
		}
		n++;
	}
	if (bad == 0)
		doctor_line(r, "PASS", "manifests", NULL, "%d manifests load%s%s%s", n,
		            L->cfg.manifests_dir[0] ? " (with " : "",
		            L->cfg.manifests_dir[0] ? L->cfg.manifests_dir : "",
		            L->cfg.manifests_dir[0] ? ")" : "");
}

/* "gemini requires node-runtime: " when name is not an enabled agent but
 * one requires it (as prepare and the API say it), else "". */
static const char *
required_by(struct cfgload *L, const char *name)
{
	static char s[2 * MANIFEST_NAME_MAX + 16];
	const manifest_t *a;
	struct err e = {0};
	int i, j;

	for (i = 0; i < L->cfg.agents.n; i++)
		if (strcmp(L->cfg.agents.v[i], name) == 0)
			return "";
	for (i = 0; i < L->cfg.agents.n; i++) {
		if ((a = manifest_get(&L->ms, L->cfg.agents.v[i], &e)) == NULL)
			continue;
		for (j = 0; j < a->nrequires; j++)
			if (strcmp(a->requires[j].name, name) == 0) {
				snprintf(s, sizeof(s), "%s requires %s: ", a->name, name);
				return s;
			}
	}
	return "";
}

/* The C library of this image (the loader dynamically linked programs
 * name), and every enabled agent and what it requires that could not run
 * here: the same rule prepare and serve refuse by, before any download. A
 * tool given by ABX_TOOL_<NAME> or found on PATH by its manifest's check is
 * someone else's build and is not judged. */
static void
check_image(struct report *r, struct cfgload *L)
{
	static char names[MANIFEST_SET_MAX][MANIFEST_NAME_MAX];
	const char *libc = npmlock_detect_libc(NULL), *lo = npmlock_libc_loader(libc);
	char env[MANIFEST_NAME_MAX + 16], entry[PATH_MAX], ver[MANIFEST_VERSION_MAX];
	const manifest_t *m;
	struct err e = {0};
	int i, n = 0, bad = 0;

	if (lo != NULL)
		doctor_line(r, "PASS", "image", NULL, "C library: %s (loader %s)", libc, lo);
	else
		doctor_line(r, "PASS", "image", NULL,
		            "C library: none (neither %s nor %s): only static tools can run here",
		            npmlock_libc_loader("glibc"), npmlock_libc_loader("musl"));
	if (!L->st.ms_open)
		return;
	/* A manifest that does not load is check_manifests' FAIL already. */
	for (i = 0; i < L->cfg.agents.n; i++)
		(void)manifest_closure_add(&L->ms, L->cfg.agents.v[i], names, &n, MANIFEST_SET_MAX, &e);
	for (i = 0; i < n; i++) {
		const char *v;

		if ((m = manifest_get(&L->ms, names[i], &e)) == NULL)
			continue;
		install_tool_env_name(m->name, env, sizeof(env));
		if ((v = config_env(env)) != NULL)
			continue;
		err_clear(&e);
		if (install_image_fits(m, NULL, &e) == 0)
			continue;
		if (m->path.argv.n > 0 &&
		    plan_path_check(m, "", entry, sizeof(entry), ver, sizeof(ver), NULL) == 1)
			continue;
		doctor_line(r, "FAIL", "image", err_info(e.code)->remedy, "%s: %s%s", e.code,
		            required_by(L, m->name), e.msg);
		bad++;
	}
	if (bad == 0 && L->cfg.agents.n > 0)
		doctor_line(r, "PASS", "image", NULL,
		            "every enabled agent and what it requires can run in this image");
}

/* --- system --- */

static void
check_root(struct report *r, const struct config *c)
{
	char mp[PATH_MAX];

	if (doctor_mount_flags("/", mp, sizeof(mp)) & 2)
		doctor_line(
		    r, "WARN", "root",
		    "mount writable volumes (tmpfs) and set ABX_TOOLS_DIR=/mnt/tools "
		    "ABX_SERVER_STATE_DIR=/mnt/state, or prepare tools at image build with install.mode "
		    "build",
		    "the root filesystem is read-only");
	else
		doctor_line(r, "PASS", "root", NULL, "the root filesystem is writable");
}

static int
count_pem(const char *path)
{
	char buf[8192];
	int n = 0;
	FILE *f = fopen(path, "re");

	if (f == NULL)
		return -1;
	while (fgets(buf, sizeof(buf), f) != NULL)
		if (strncmp(buf, "-----BEGIN CERTIFICATE-----", 27) == 0)
			n++;
	fclose(f);
	return n;
}

/* Certificates in the files of dir, each file counted once however many
 * names (hash links, .pem links) point to it. */
static int
count_pem_dir(const char *dir)
{
	enum { SEEN_MAX = 4096 };
	static struct {
		dev_t dev;
		ino_t ino;
	} seen[SEEN_MAX];
	char path[PATH_MAX + 256], **names;
	struct stat sb;
	struct err e = {0};
	size_t nn, j;
	int n = 0, k, nseen = 0, i, dup;

	if (fs_dir_names(AT_FDCWD, dir, "io.error", &names, &nn, &e) != 0)
		return -1;
	for (j = 0; j < nn; j++) {
		if (names[j][0] == '.')
			continue;
		snprintf(path, sizeof(path), "%.4000s/%s", dir, names[j]);
		if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
			continue;
		for (i = 0, dup = 0; i < nseen && !dup; i++)
			dup = seen[i].dev == sb.st_dev && seen[i].ino == sb.st_ino;
		if (dup)
			continue;
		if (nseen < SEEN_MAX) {
			seen[nseen].dev = sb.st_dev;
			seen[nseen++].ino = sb.st_ino;
		}
		if ((k = count_pem(path)) > 0)
			n += k;
	}
	free(names);
	return n;
}

/* The enabled tools: the agents, the tools ops install, and what they
 * require (enabled_tools finds them once, for the CA check and --network). */
static char tool_names[MANIFEST_SET_MAX][MANIFEST_NAME_MAX];
static int ntools;

static void
enabled_tools(struct cfgload *L)
{
	struct err e = {0};
	int i, j;

	for (i = 0; L->st.ms_open && i < L->cfg.agents.n; i++)
		(void)manifest_closure_add(&L->ms, L->cfg.agents.v[i], tool_names, &ntools, MANIFEST_SET_MAX,
		                           &e);
	for (i = 0; L->st.ms_open && L->st.ops_ready && i < ops_n(&L->ops); i++)
		for (j = 0; j < ops_at(&L->ops, i)->ninstall; j++)
			(void)manifest_closure_add(&L->ms, ops_at(&L->ops, i)->install[j], tool_names,
			                           &ntools, MANIFEST_SET_MAX, &e);
}

/* The first enabled tool that no tools directory holds installed and no
 * ABX_TOOL_<NAME> names, or NULL. */
static const char *
first_missing_tool(const struct chain *ch)
{
	char env[MANIFEST_NAME_MAX + 16], mk[PATH_MAX + 256];
	int i, j, have;

	for (i = 0; i < ntools; i++) {
		install_tool_env_name(tool_names[i], env, sizeof(env));
		if (config_env(env) != NULL)
			continue;
		for (j = 0, have = 0; j < ch->n && !have; j++) {
			have = tool_path(mk, sizeof(mk), ch->dir[j], tool_names[i], ".installed.json",
			                 NULL) == 0 &&
			       access(mk, F_OK) == 0;
		}
		if (!have)
			return tool_names[i];
	}
	return NULL;
}

/* The hosts --network checks: those of the enabled tools' manifests (a
 * tool nothing enables is never installed, so its hosts are not asked). */
static void
enabled_hosts(struct cfgload *L, struct hostlist *hl)
{
	const manifest_t *m;
	struct err e = {0};
	int i, h;

	for (i = 0; i < ntools; i++) {
		if ((m = manifest_get(&L->ms, tool_names[i], &e)) == NULL)
			continue;
		for (h = 0; h < m->nhosts; h++)
			doctor_add_host(hl, m->hosts[h]);
	}
}

/* The same rule as the TLS client: SSL_CERT_FILE and/or SSL_CERT_DIR when
 * either is set (then only those: a named bundle that is missing is a
 * failure, never silently replaced by a default), else the first default
 * bundle that holds a certificate. A missing CA bundle is a FAIL when
 * something will be downloaded over HTTPS: mode lazy (installs at run
 * time), or mode build while an enabled tool is not installed yet (prepare
 * downloads it). Offline and off never download: a WARN. */
static void
check_ca(struct report *r, struct cfgload *L, const struct chain *ch)
{
	const struct config *c = &L->cfg;
	int downloads = c->install.mode == CFG_MODE_LAZY || c->install.mode == CFG_MODE_BUILD;
	const char *missing = downloads ? first_missing_tool(ch) : NULL;
	int need = missing != NULL;
	char why[MANIFEST_NAME_MAX + 96];

	static const char *const defaults[] = {"/etc/ssl/certs/ca-certificates.crt",
	                                       "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"};
	const char *file = config_env("SSL_CERT_FILE"), *dir = config_env("SSL_CERT_DIR");
	const char *st = need ? "FAIL" : downloads && ntools == 0 ? "PASS" : "WARN";
	char tried[1024] = "";
	struct http_client *h = NULL;
	struct err e = {0};
	size_t i;
	int n = 0, k;

	/* a missing bundle matters as much as what it will be needed for */
	if (missing != NULL)
		snprintf(why, sizeof(why), " (mode %s: %.100s is not installed, %s downloads it)",
		         config_mode_name(c->install.mode), missing,
		         c->install.mode == CFG_MODE_BUILD ? "prepare" : "its first use");
	else if (downloads && ntools == 0)
		snprintf(why, sizeof(why),
		         " (a note: no enabled agent or op installs a tool, so nothing "
		         "needs a download)");
	else if (downloads)
		snprintf(why, sizeof(why),
		         " (mode %s: every enabled tool is installed; a reinstall would need it)",
		         config_mode_name(c->install.mode));
	else
		snprintf(why, sizeof(why), " (mode %s)", config_mode_name(c->install.mode));
	if ((file && file[0]) || (dir && dir[0])) {
		if (file && file[0]) {
			k = count_pem(file);
			if (k < 0)
				snprintf(tried, sizeof(tried), "SSL_CERT_FILE=%.400s (%s)", file,
				         strerror(errno));
			else
				snprintf(tried, sizeof(tried), "SSL_CERT_FILE=%.400s (%d)", file, k);
			if (k > 0)
				n += k;
		}
		if (dir && dir[0]) {
			char copy[PATH_MAX], *save = NULL, *p;
			int nd = 0;
			snprintf(copy, sizeof(copy), "%s", dir);
			for (p = strtok_r(copy, ":", &save); p != NULL; p = strtok_r(NULL, ":", &save))
				if ((k = count_pem_dir(p)) > 0)
					nd += k;
			n += nd;
			snprintf(tried + strlen(tried), sizeof(tried) - strlen(tried),
			         "%sSSL_CERT_DIR=%.400s (%d)", tried[0] ? ", " : "", dir, nd);
		}
		/* the same CAs in both (a bundle and its directory) count once, as
		 * the TLS client loads them */
		if (n > 0 && (h = config_http_client(&e)) != NULL && (k = tls_anchors_load(&e)) > 0)
			n = k;
		http_client_free(h);
		if (n == 0)
			doctor_line(
			    r, st, "ca",
			    "point SSL_CERT_FILE at a PEM bundle (or unset it to use the system bundle)",
			    "no CA certificate found: %s; HTTPS downloads will fail (tls.no_trust_anchors)%s",
			    tried, why);
		else
			doctor_line(r, "PASS", "ca", NULL, "%d trust anchors from %s", n, tried);
		return;
	}
	for (i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		if ((k = count_pem(defaults[i])) > 0) {
			doctor_line(r, "PASS", "ca", NULL, "%d trust anchors in %s", k, defaults[i]);
			return;
		}
	doctor_line(
	    r, st, "ca", "install ca-certificates in the image, or set SSL_CERT_FILE",
	    "no CA bundle found (tried /etc/ssl/certs/ca-certificates.crt, /etc/pki/tls/certs/ca-bundle.crt, "
	    "/etc/ssl/cert.pem); HTTPS downloads will fail%s",
	    why);
}

#ifndef ABX_BUILD_DATE
#define ABX_BUILD_DATE "1970-01-01"
#endif

/* ABX_BUILD_DATE, "YYYY-MM-DD" (the Makefile's date -u +%Y-%m-%d), into
 * tm's date fields. By hand: strptime would link 2 KB for this one call. */
static int
build_date(struct tm *tm)
{
	const char *s = ABX_BUILD_DATE;
	int i;

	for (i = 0; i < 10; i++)
		if (i == 4 || i == 7 ? s[i] != '-' : (s[i] < '0' || s[i] > '9'))
			return -1;
	if (s[10] != '\0')
		return -1;
	tm->tm_year = atoi(s) - 1900;
	tm->tm_mon = atoi(s + 5) - 1;
	tm->tm_mday = atoi(s + 8);
	return 0;
}

static void
check_clock(struct report *r)
{
	struct tm tm;
	time_t now = time(NULL), built;
	char buf[32];

	memset(&tm, 0, sizeof(tm));
	if (build_date(&tm) != 0) {
		doctor_line(r, "PASS", "clock", NULL, "now %ld (build date unknown)", (long)now);
		return;
	}
	built = timegm(&tm);
	clock_iso((int64_t)now * 1000, 0, buf, sizeof(buf));
	if (now < built - 86400)
		doctor_line(
		    r, "FAIL", "clock",
		    "set the clock (NTP, or the host's clock): TLS certificates are checked against it",
		    "%s is before this binary was built (%s)", buf, ABX_BUILD_DATE);
	else if (now > built + 20L * 365 * 86400)
		doctor_line(r, "WARN", "clock", "check the clock: TLS certificates are checked against it",
		            "%s is more than 20 years after this binary was built (%s)", buf, ABX_BUILD_DATE);
	else
		doctor_line(r, "PASS", "clock", NULL, "%s is plausible", buf);
}

/* Worded by what was found: a missing file and an unwritable one have
 * different fixes. */
static void
check_passwd(struct report *r)
{
	if (access("/etc/passwd", W_OK) == 0)
		doctor_line(r, "PASS", "passwd", NULL,
		            "/etc/passwd is writable (the base image's user mapping works)");
	else if (errno == ENOENT)
		doctor_line(r, "WARN", "passwd",
		            "on the Agent Sandbox base image /etc/passwd must exist and be writable by the "
		            "sandbox user; "
		            "elsewhere set HOME for command ops and sessions",
		            "/etc/passwd does not exist");
	else
		doctor_line(
		    r, "WARN", "passwd",
		    "on the Agent Sandbox base image /etc/passwd must stay writable by the sandbox user "
		    "(chmod 0664 and group of that user)",
		    "/etc/passwd exists but is not writable by uid %u (%s)", (unsigned)geteuid(),
		    strerror(errno));
}

/* Agents' own tools (Codex, Claude Code) start shells: /bin/bash. Not ours
 * to need, so a WARN, not a FAIL. */
static void
check_bash(struct report *r)
{
	if (access("/bin/bash", X_OK) == 0)
		doctor_line(r, "PASS", "bash", NULL,
		            "/bin/bash is present (agents run their shell commands with it)");
	else
		doctor_line(r, "WARN", "bash",
		            "install bash in the image if agents are to run shell commands",
		            "/bin/bash: %s (agents' shell commands will fail)", strerror(errno));
}

/* allow_tmp puts a tools directory under $TMPDIR, which anyone may be
 * able to fill or race: worth saying whenever it is on. */
static void
check_allow_tmp(struct report *r, const struct config *c)
{
	char src[300];

	if (c->install.allow_tmp)
		doctor_line(
		    r, "WARN", "allow_tmp",
		    "turn install.allow_tmp off and give the server a tools directory of its own "
		    "(ABX_TOOLS_DIR)",
		    "install.allow_tmp is on (%s): tools may be installed under $TMPDIR, which is often "
		    "shared and cleaned",
		    config_source(c, CK_INSTALL_ALLOW_TMP, src, sizeof(src)));
}

/* Plain http mirrors keep integrity (every byte is pinned) but not
 * confidentiality: worth saying whenever they are allowed. */
static void
check_allow_http(struct report *r, const struct config *c)
{
	char src[300];

	if (c->install.allow_http_mirrors)
		doctor_line(
		    r, "WARN", "allow_http_mirrors",
		    "use https:// mirrors and turn install.allow_http_mirrors off, unless the path to the "
		    "mirror is private",
		    "install.allow_http_mirrors is on (%s): plain http mirrors are read for pinned "
		    "installs; integrity is kept (every byte is checked against a pin) but confidentiality "
		    "is given up: anyone on the path sees which tools and versions are installed, and can "
		    "withhold them",
		    config_source(c, CK_INSTALL_ALLOW_HTTP_MIRRORS, src, sizeof(src)));
}

static void
check_credentials(struct report *r, const struct config *c)
{
	static const struct {
		const char *agent, *var, *alt;
	} creds[] = {
	    {"codex", "OPENAI_API_KEY", NULL},
	    {"claude-code", "ANTHROPIC_API_KEY", NULL},
	    {"gemini", "GEMINI_API_KEY", "GOOGLE_API_KEY"},
	    {"cursor", "CURSOR_API_KEY", NULL},
	};
	char fix[128], present[256] = "";
	size_t i;
	int j, any = 0;

	for (i = 0; i < sizeof(creds) / sizeof(creds[0]); i++) {
		const char *v = config_env(creds[i].var), *a = creds[i].alt ? config_env(creds[i].alt) : NULL;
		int set = (v && v[0]) || (a && a[0]), enabled = 0;
		for (j = 0; j < c->agents.n; j++)
			enabled |= strcmp(c->agents.v[j], creds[i].agent) == 0;
		if (set)
			snprintf(present + strlen(present), sizeof(present) - strlen(present), "%s%s",
			         present[0] ? ", " : "", (v && v[0]) ? creds[i].var : creds[i].alt);
		if (!enabled)
			continue;
		any = 1;
		if (set) {
			doctor_line(r, "PASS", "credentials", NULL, "%s is set (agent %s)",
			            (v && v[0]) ? creds[i].var : creds[i].alt, creds[i].agent);
		} else {
			snprintf(fix, sizeof(fix), "pass %s%s%s in the sandbox environment", creds[i].var,
			         creds[i].alt ? " or " : "", creds[i].alt ? creds[i].alt : "");
			doctor_line(r, "WARN", "credentials", fix,
			            "%s is not set; agent %s will fail to authenticate", creds[i].var,
			            creds[i].agent);
		}
	}
	if (!any)
		doctor_line(r, "PASS", "credentials", NULL,
		            "no agent enabled; credential variables present: %s",
		            present[0] ? present : "none");
}

int
doctor_main(int argc, char **argv)
{
	struct doctor_opts o = {NULL, "9000,9001", 0, 0};
	const char *tok;
	char src[CFG_PATH_MAX + 32];
	struct report r;
	struct cfgload *L;
	struct hostlist *hl;
	struct chain ch;
	struct err e = {0};
	int rc, n;

	memset(&r, 0, sizeof(r));
	if ((L = cfgload_new()) == NULL || (hl = calloc(1, sizeof(*hl))) == NULL) {
		cfgload_free(L);
		err_printf("internal", "out of memory");
		return EXIT_FAIL;
	}
	o.L = L;
	if ((rc = opts_parse(&usage, argc, argv, &o, &n)) >= 0) {
		cfgload_free(L), free(hl);
		return rc;
	}
	r.json = o.json;
	if (r.json) {
		json_w_init(&r.w, 1u << 20);
		json_w_obj(&r.w);
		json_w_key(&r.w, "checks");
		json_w_arr(&r.w);
	}
	if (cfgload_run(L, NULL, &e) == 0) {
		doctor_line(&r, "PASS", "config", NULL,
		            "%s, policy and commands are valid (%d ops, %d principals)",
		            L->cfg.file[0] ? L->cfg.file : "embedded defaults", ops_n(&L->ops), L->pol.n);
	} else {
		doctor_line(&r, "FAIL", "config",
		            "run `agent-sandbox-server check-config` and fix the first error", "%s: %s",
		            e.code ? e.code : "internal", e.msg);
		/* Go on with what loaded: the environment layer at least. */
		if (config_load(&L->cfg, NULL, NULL, NULL, 0, &e) != 0)
			config_defaults(&L->cfg);
	}
	doctor_line(&r, "PASS", "mode", NULL, "install mode %s (%s)%s", config_mode_name(L->cfg.install.mode),
	            config_source(&L->cfg, CK_INSTALL_MODE, src, sizeof(src)),
	            L->cfg.mode_floor != CFG_MODE_LAZY ? "; restrict-only: flags may only tighten it" : "");
	doctor_check_home(&r);
	tok = config_env("ABX_SERVER_TOKEN");
	doctor_check_state_dir(&r, &L->cfg,
	                       (tok != NULL && tok[0] != '\0') || L->cfg.server.token_file[0] != '\0' ||
	                           api_policy_has_tokens(&L->pol));
	doctor_check_sessions(&r, &L->cfg);
	doctor_check_audit(&r, &L->cfg);
	doctor_tools_chain(&L->cfg, &ch);
	doctor_check_tools_dirs(&r, &L->cfg, &ch);
	doctor_check_installed(&r, &ch);
	check_manifests(&r, L);
	enabled_tools(L);
	check_image(&r, L);
	check_root(&r, &L->cfg);
	check_ca(&r, L, &ch);
	doctor_check_mirror(&r, &L->cfg);
	doctor_check_registry(&r, L);
	check_clock(&r);
	check_passwd(&r);
	check_bash(&r);
	check_allow_tmp(&r, &L->cfg);
	check_allow_http(&r, &L->cfg);
	doctor_check_ports(&r, o.ports);
	check_credentials(&r, &L->cfg);
	if (o.network) {
		enabled_hosts(L, hl);
		doctor_check_network(&r, &L->cfg, hl);
	}
	if (r.json) {
		json_w_end(&r.w);
		json_w_kint(&r.w, "pass", r.npass);
		json_w_kint(&r.w, "warn", r.nwarn);
		json_w_kint(&r.w, "fail", r.nfail);
		json_w_end(&r.w);
		if (!r.w.overflow)
			printf("%s\n", r.w.buf);
		json_w_free(&r.w);
	} else {
		printf("\n%d passed, %d warnings, %d failed\n", r.npass, r.nwarn, r.nfail);
	}
	cfgload_free(L);
	free(hl);
	return r.nfail > 0 ? EXIT_FAIL : EXIT_OK;
}
