/*
 * What is already there (ABX_TOOL_<NAME>, one of our trees through the fast
 * path of install_tree.c, a copy on PATH and its version),
 * running a command for a probe or a verify (core/base/proc.c), and the probes
 * before an install: the staging directory can execute, the network answers.
 */
#include "install/install_int.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "net/http.h"
#include "base/net.h"
#include "base/proc.h"

/* ---- PATH and ABX_TOOL_<NAME> ------------------------------------------ */

static int
same_file_as_self(struct install_env *c, const char *p)
{
	char rp[PATH_MAX];

	return c->self[0] != '\0' && realpath(p, rp) != NULL && strcmp(rp, c->self) == 0;
}

int
install_env_tool(struct install_env *c, const manifest_t *m, struct install_result *r)
{
	char var[MANIFEST_NAME_MAX + 16];
	const char *p;
	struct stat st;

	install_tool_env_name(m->name, var, sizeof(var));
	p = config_env(var);
	if (p == NULL || *p != '/')
		return 0;
	if (stat(p, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_uid != 0 && st.st_uid != geteuid()) ||
	    (st.st_mode & 022) || access(p, X_OK) != 0 || same_file_as_self(c, p)) {
		warnx_line("%s=%s ignored: not an executable owned by this user or root and not "
		           "group/world-writable",
		           var, p);
		return 0;
	}
	r->state = INSTALL_READY;
	r->from_env = 1;
	snprintf(r->entry, sizeof(r->entry), "%s", p);
	return 1;
}

void
install_subst_bin(const struct manifest_argv *a, const char *bin, char buf[][MANIFEST_ARG_MAX + PATH_MAX],
                  char **argv)
{
	int i;

	for (i = 0; i < a->n; i++) {
		const char *s = a->v[i], *hit = strstr(s, "{bin}");
		if (hit != NULL)
			snprintf(buf[i], sizeof(buf[i]), "%.*s%s%s", (int)(hit - s), s, bin, hit + 5);
		else
			snprintf(buf[i], sizeof(buf[i]), "%s", s);
		argv[i] = buf[i];
	}
	argv[a->n] = NULL;
}

int
install_probe_version(const manifest_t *m, const char *bin, char *ver, size_t cap)
{
	/* heap, not static (job threads) nor stack (musl threads have 128 KiB) */
	char(*buf)[MANIFEST_ARG_MAX + PATH_MAX] = malloc(MANIFEST_MAX_ARGV * sizeof(*buf));
	char *argv[MANIFEST_MAX_ARGV + 1], out[4096], tmp[] = "/tmp";
	struct err e = {0};
	int st;

	if (m->path.argv.n == 0 || buf == NULL) {
		free(buf);
		return -1;
	}
	install_subst_bin(&m->path.argv, bin, buf, argv);
	st = install_run(argv, "/usr/local/bin:/usr/bin:/bin", tmp, 5, out, sizeof(out), &e);
	free(buf);
	if (st != 0)
		return -1;
	return manifest_version_in(out, ver, cap);
}

int
install_path_find(const manifest_t *m, const char *min, const char *self, char *entry, size_t ecap, char *ver,
                  size_t vcap)
{
	const char *path = config_env("PATH"), *p, *q;
	char cand[PATH_MAX], dir[PATH_MAX], rp[PATH_MAX], v[MANIFEST_VERSION_MAX];
	struct stat st;

	if (m->path.argv.n == 0 || path == NULL)
		return 0;
	for (p = path; *p; p = q ? q + 1 : p + strlen(p)) {
		size_t n;
		q = strchr(p, ':');
		n = q ? (size_t)(q - p) : strlen(p);
		if (n == 0 || p[0] != '/' || n >= sizeof(dir) - 1)
			goto next;
		memcpy(dir, p, n);
		dir[n] = '\0';
		/* a world-writable PATH entry could hold anything */
		if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || (st.st_mode & 002))
			goto next;
		if (fs_path_join(cand, sizeof(cand), dir, m->binary, NULL) < 0 || stat(cand, &st) != 0 ||
		    !S_ISREG(st.st_mode) || access(cand, X_OK) != 0)
			goto next;
		/* never ourselves: <tools>/bin on PATH is a shim */
		if (self != NULL && self[0] != '\0' && realpath(cand, rp) != NULL && strcmp(rp, self) == 0)
			goto next;
		if (install_probe_version(m, cand, v, sizeof(v)) < 0)
			goto next;
		if (m->path.min[0] && manifest_version_cmp(v, m->path.min) < 0)
			goto next;
		if (min && min[0] && manifest_version_cmp(v, min) < 0)
			goto next;
		snprintf(entry, ecap, "%s", cand);
		snprintf(ver, vcap, "%s", v);
		return 1;
	next:
		if (q == NULL)
			break;
	}
	return 0;
}

int
install_path_tool(struct install_env *c, const manifest_t *m, const char *min, struct install_result *r)
{
	char ver[MANIFEST_VERSION_MAX];

	if (install_path_find(m, min, c->self, r->entry, sizeof(r->entry), ver, sizeof(ver)) != 1)
		return 0;
	r->state = INSTALL_READY;
	r->from_path = 1;
	return 1;
}

int
install_found(struct install_env *c, const manifest_t *m, const char *min, int use_path,
              struct install_result *r, struct err *e)
{
	memset(r, 0, sizeof(*r));
	/* resolution order: ABX_TOOL_<NAME>, tools, PATH */
	if (install_env_tool(c, m, r) || install_fast_path(c, m, r, e) == 1)
		return 1;
	return use_path && c->cfg->install.use_path && install_path_tool(c, m, min, r);
}

/* ---- running a command ------------------------------------------------- */

int
install_run(char *const argv[], const char *path, const char *home, int timeout_s, char *out, size_t cap,
            struct err *e)
{
	return install_run_env(argv, path, home, NULL, 0, timeout_s, out, cap, e);
}

int
install_run_env(char *const argv[], const char *path, const char *home, const struct manifest_envvar *env,
                int nenv, int timeout_s, char *out, size_t cap, struct err *e)
{
	char envp_path[4200], envp_home[PATH_MAX + 8];
	char extra[MANIFEST_MAX_VERIFY_ENV][MANIFEST_NAME_MAX + MANIFEST_ARG_MAX + 1];
	char *envp[5 + MANIFEST_MAX_VERIFY_ENV] = {envp_path, envp_home, "LANG=C", "LC_ALL=C"};
	struct proc_spec s = {.argv = argv,
	                      .envp = envp,
	                      .cwd = home,
	                      .timeout_ms = timeout_s * 1000,
	                      .kill_grace_ms = INSTALL_RUN_GRACE_MS};
	struct proc_capture pc = {
	    .out = cap ? out : NULL, .out_room = cap, .cap = cap ? cap - 1 : 0, .merge = 1};
	struct proc p;
	int i, n = 4;

	snprintf(envp_path, sizeof(envp_path), "PATH=%s", path);
	snprintf(envp_home, sizeof(envp_home), "HOME=%s", home);
	for (i = 0; i < nenv && i < MANIFEST_MAX_VERIFY_ENV; i++) {
		snprintf(extra[i], sizeof(extra[i]), "%s=%s", env[i].name, env[i].value);
		envp[n++] = extra[i];
	}
	envp[n] = NULL;
	if (cap)
		out[0] = '\0';
	if (proc_run(&p, &s, &pc, e) < 0) {
		/* as a shell answers a program it cannot start */
		if (cap)
			snprintf(out, cap, "%s\n", e->msg);
		return 127;
	}
	if (p.timed_out)
		return 128 + SIGKILL;
	return proc_exit_code(&p);
}

/* ---- probes ------------------------------------------------------------- */

int
install_exec_probe(struct install_env *c, const char *staging_root, struct err *e)
{
	time_t t = time(NULL);

	if (c->exec_probe_at != 0 && t - c->exec_probe_at < INSTALL_PROBE_TTL &&
	    strcmp(c->exec_probe_dir, staging_root) == 0) {
		if (c->exec_probe_rc < 0 && e != NULL)
			err_copy(e, &c->exec_probe_err);
		return c->exec_probe_rc;
	}
	c->exec_probe_rc = fs_noexec_probe(staging_root, &c->exec_probe_err);
	c->exec_probe_at = t;
	snprintf(c->exec_probe_dir, sizeof(c->exec_probe_dir), "%s", staging_root);
	if (c->exec_probe_rc < 0 && e != NULL)
		err_copy(e, &c->exec_probe_err);
	return c->exec_probe_rc;
}

/* TCP connect to host:port within INSTALL_PROBE_CONNECT_MS: 0, or -1 with
 * why (the connect's errno, else the connector's message) and *dns set when
 * the name did not resolve. */
static int
tcp_probe(const char *host, int port, char *why, size_t cap, int *dns)
{
	struct err e = {0};
	int fd = net_connect(host, port, INSTALL_PROBE_CONNECT_MS, clock_ms() + INSTALL_PROBE_CONNECT_MS, &e);

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	*dns = e.code != NULL && strcmp(e.code, "http.resolve") == 0;
	snprintf(why, cap, "%.*s", (int)cap - 1, e.sys != 0 ? strerror(e.sys) : e.msg);
	return -1;
}

/* Network probe results, per process, for INSTALL_PROBE_TTL seconds: serve runs each install job with its own
 * environment, and a blocked registry must not cost every job its own connect
 * timeout. A handful of hosts (registry, mirror, tarball hosts) fit. */
#define PROBE_CACHE_N 8
struct probe {
	char key[300];
	time_t at;
	int rc, dns;
	char why[160];
};
static struct probe probe_cache[PROBE_CACHE_N];
static pthread_mutex_t probe_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long probe_connects;

static void
probe_cached(const char *host, int port, const char *key, struct probe *out)
{
	time_t t = time(NULL);
	int i, slot = 0;

	pthread_mutex_lock(&probe_mu);
	for (i = 0; i < PROBE_CACHE_N; i++) {
		if (strcmp(probe_cache[i].key, key) == 0 && probe_cache[i].at != 0 &&
		    t - probe_cache[i].at < INSTALL_PROBE_TTL) {
			*out = probe_cache[i];
			pthread_mutex_unlock(&probe_mu);
			return;
		}
		if (probe_cache[i].at < probe_cache[slot].at)
			slot = i;
	}
	probe_connects++;
	pthread_mutex_unlock(&probe_mu);
	/* the connect runs unlocked: two jobs may probe one host at once,
	 * which costs a connection, never a wrong answer */
	memset(out, 0, sizeof(*out));
	out->rc = tcp_probe(host, port, out->why, sizeof(out->why), &out->dns);
	snprintf(out->key, sizeof(out->key), "%s", key);
	out->at = time(NULL);
	pthread_mutex_lock(&probe_mu);
	probe_cache[slot] = *out;
	pthread_mutex_unlock(&probe_mu);
}

unsigned long
install_probe_connects(void)
{
	unsigned long n;

	pthread_mutex_lock(&probe_mu);
	n = probe_connects;
	pthread_mutex_unlock(&probe_mu);
	return n;
}

void
install_probe_cache_clear(void)
{
	pthread_mutex_lock(&probe_mu);
	memset(probe_cache, 0, sizeof(probe_cache));
	pthread_mutex_unlock(&probe_mu);
}

int
install_net_probe(struct install_env *c, const manifest_t *m, const char *url, struct err *e)
{
	struct http_url u;
	const char *proxy = config_env("HTTPS_PROXY"), *what;
	char key[300], tail[600];
	struct probe pr;
	int npm = m != NULL && m->source.type != MANIFEST_SRC_TARBALL, via = 0;

	if (proxy == NULL || *proxy == '\0')
		proxy = config_env("https_proxy");
	if (http_url_parse(url, &u, e) < 0)
		return -1;
	if (proxy != NULL && *proxy != '\0') {
		const char *np = config_env("NO_PROXY") ? config_env("NO_PROXY") : config_env("no_proxy");
		struct http_url pu;
		char pbuf[HTTP_URL_MAX];
		if (np == NULL || !http_no_proxy_match(np, u.host, u.port)) {
			/* a proxy without a scheme is http://host:port */
			snprintf(pbuf, sizeof(pbuf), "%s%s", strstr(proxy, "://") ? "" : "http://", proxy);
			if (http_url_parse(pbuf, &pu, NULL) == 0) {
				u = pu;
				via = 1;
			}
		}
	}
	snprintf(key, sizeof(key), "%s:%d", u.host, u.port);
	probe_cached(u.host, u.port, key, &pr);
	if (pr.rc == 0)
		return 0;
	/* what failed: DNS, the proxy, or the connect (each with why) */
	if (pr.dns)
		snprintf(tail, sizeof(tail), "DNS does not resolve %.256s (%.150s)", u.host, pr.why);
	else if (via)
		snprintf(tail, sizeof(tail), "%.150s", pr.why);
	else
		snprintf(tail, sizeof(tail), "cannot connect to %.300s: %.150s", key, pr.why);
	what = npm && c != NULL && c->cfg->install.npm_mirror[0] != '\0' ? "the npm mirror"
	       : npm                                                     ? "the npm registry"
	                                                                 : "the download host";
	/* the proxy's and DNS's own fixes travel as the cause (err_format) */
	if (e == NULL)
		return -1;
	err_clear(e);
	e->code = via ? "http.proxy" : pr.dns ? "http.resolve" : NULL;
	if (via)
		err_wrap(e, "install.network_unreachable",
		         "%s%sthe proxy %s (HTTPS_PROXY) is unreachable: %s; %s is reached through it",
		         m ? m->name : "", m ? ": " : "", key, tail, what);
	else if (npm && c != NULL && c->cfg->install.npm_mirror[0] != '\0')
		err_wrap(e, "install.network_unreachable",
		         "%s: the npm mirror (install.mirrors.npm, ABX_INSTALL_NPM_REGISTRY): %s; check that "
		         "mirror's address and that this network reaches it, or unset it to use the "
		         "registry, or fill a cache with `agent-sandbox-server fetch` and use mode offline",
		         m->name, tail);
	else if (npm)
		err_wrap(
		    e, "install.network_unreachable",
		    "%s: the npm registry: %s; set install.mirrors.npm (ABX_INSTALL_NPM_REGISTRY), or fill "
		    "a cache with `agent-sandbox-server fetch` and use mode offline",
		    m->name, tail);
	else
		err_wrap(e, "install.network_unreachable",
		         "%s%s%s; configure install.mirrors (ABX_INSTALL_MIRROR) or fill a cache with "
		         "`agent-sandbox-server fetch` and use mode offline",
		         m ? m->name : "", m ? ": " : "", tail);
	err_detail_str(e, "phase", "probe");
	err_detail_str(e, "host", key);
	err_detail_str(e, "hint",
	               npm ? "install.mirrors.npm, or mode offline with a cache"
	                   : "install.mirrors.tarball, or mode offline with a cache");
	return -1;
}
