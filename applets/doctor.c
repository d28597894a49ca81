/*
 * doctor: diagnose this environment in one screen (seed 000 §9, for a static
 * binary). Every line is PASS, WARN or FAIL with a one-line fix; the exit
 * status is 0 without a FAIL, else 1.
 */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../core/fs.h"
#include "../core/install.h"
#include "../core/json.h"
#include "../core/npmlock.h"
#include "../core/plan.h"
#include "cfgload.h"

static const char usage[] = "usage: agent-sandbox-server doctor [--json] [--network] [--ports LIST]\n"
                            "           [--config FILE] [--policy FILE] [--preset NAME] [--commands FILE]\n"
                            "           [--manifests DIR] [--tools-dir DIR] [--state-dir DIR] [--mode MODE]\n"
                            "\n"
                            "Check this environment: configuration, effective install mode and its source,\n"
                            "HOME, state and tools directories (writable, owned by us, not group/world-\n"
                            "writable, not noexec, which one receives installs), installed tools and their\n"
                            "versions, manifests, a read-only root, the CA bundle, the clock, /etc/passwd,\n"
                            "ports 9000 and 9001, agent credential variables (names only, never values).\n"
                            "Each line is PASS, WARN or FAIL, with a fix.\n"
                            "\n"
                            "  --json         one JSON document on stdout\n"
                            "  --network      also connect to every manifest host and mirror (5 s each)\n"
                            "  --ports LIST   ports that should be free (default 9000,9001)\n"
                            "  the other options are those of check-config\n"
                            "\n"
                            "Exit: 0 when no check failed, 1 otherwise, 2 on a usage error.\n";

/* Why these numbers: a tool's --version answers in well under a second; 10 s
 * covers a cold node start on a slow disk. 5 s is a generous TCP connect. */
#define VERSION_TIMEOUT_S 10
#define CONNECT_TIMEOUT_MS 5000
#define MAX_TOOLS_LISTED 64
#define MAX_HOSTS 64

struct report {
	int json;
	int npass, nwarn, nfail;
	struct json_w w;
};

static void line(struct report *r, const char *status, const char *check, const char *fix, const char *fmt,
                 ...) __attribute__((format(printf, 5, 6)));

static void
line(struct report *r, const char *status, const char *check, const char *fix, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (status[0] == 'P')
		r->npass++, fix = NULL;
	else if (status[0] == 'W')
		r->nwarn++;
	else
		r->nfail++;
	if (r->json) {
		json_w_obj(&r->w);
		json_w_kstr(&r->w, "check", check);
		json_w_kstr(&r->w, "status", status);
		json_w_kstr(&r->w, "message", msg);
		if (fix != NULL)
			json_w_kstr(&r->w, "fix", fix);
		json_w_end(&r->w);
		return;
	}
	printf("%-4s  %s: %s\n", status, check, msg);
	if (fix != NULL)
		printf("      fix: %s\n", fix);
}

/* --- directories --- */

static int
writable_dir(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && access(path, W_OK | X_OK) == 0;
}

/* The mount holding path is noexec (1), read-only (2), both (3), or none. */
static int
mount_flags(const char *path, char *mp, size_t cap)
{
	struct statvfs v;
	int f = 0;

	if (fs_mount_point(path, mp, cap) != 0)
		snprintf(mp, cap, "%s", path);
	if (statvfs(path, &v) != 0)
		return 0;
	if (v.f_flag & ST_NOEXEC)
		f |= 1;
	if (v.f_flag & ST_RDONLY)
		f |= 2;
	return f;
}

static void
check_home(struct report *r)
{
	const char *home = getenv("HOME");

	if (home == NULL || home[0] == '\0')
		line(r, "WARN", "home", "set HOME to the sandbox user's home directory", "HOME is not set");
	else if (!writable_dir(home))
		line(r, "WARN", "home",
		     "mount a writable volume at HOME, or set ABX_SERVER_STATE_DIR and ABX_TOOLS_DIR to "
		     "writable directories",
		     "%s is not a writable directory", home);
	else
		line(r, "PASS", "home", NULL, "%s is writable", home);
}

static void
default_state_dir(const struct config *c, char *buf, size_t cap)
{
	const char *home = getenv("HOME");

	if (c->state_dir[0] != '\0')
		snprintf(buf, cap, "%s", c->state_dir);
	else if (geteuid() == 0)
		snprintf(buf, cap, "/var/lib/agent-sandbox");
	else
		snprintf(buf, cap, "%s/.local/state/agent-sandbox", home && home[0] ? home : "/nonexistent");
}

/* The parent of path exists and we may create path in it. */
static int
creatable(const char *path)
{
	char parent[PATH_MAX];

	if (fs_dirname(path, parent, sizeof(parent)) != 0)
		return 0;
	while (access(parent, F_OK) != 0) {
		char up[PATH_MAX];
		if (strcmp(parent, "/") == 0 || fs_dirname(parent, up, sizeof(up)) != 0)
			return 0;
		snprintf(parent, sizeof(parent), "%s", up);
	}
	return writable_dir(parent);
}

static void
check_state_dir(struct report *r, const struct config *c)
{
	char dir[PATH_MAX], src[CFG_PATH_MAX + 32], fix[2 * PATH_MAX + 64];
	struct err e;

	default_state_dir(c, dir, sizeof(dir));
	config_source(c, CK_STATE_DIR, src, sizeof(src));
	if (fs_dir_safe(dir, &e) != 0) {
		if (e.code != NULL && strcmp(e.code, "not_found") == 0) {
			if (creatable(dir))
				line(r, "PASS", "state", NULL,
				     "%s does not exist yet; serve creates it (mode 0700) [%s]", dir, src);
			else
				line(r, "WARN", "state",
				     "set ABX_SERVER_STATE_DIR to a writable directory (a tmpfs or volume)",
				     "%s cannot be created: tokens and journals live in memory only [%s]",
				     dir, src);
			return;
		}
		snprintf(fix, sizeof(fix), "chown $(id -u) %s && chmod 0700 %s", dir, dir);
		line(r, "FAIL", "state", fix, "%s", e.msg);
		return;
	}
	if (!writable_dir(dir))
		line(r, "WARN", "state",
		     "set ABX_SERVER_STATE_DIR to a writable directory (a tmpfs or volume)",
		     "%s is not writable: journals live in memory, replay is limited to the process lifetime "
		     "[%s]",
		     dir, src);
	else
		line(r, "PASS", "state", NULL, "%s is writable and safe [%s]", dir, src);
}

/* Where serve keeps agent session journals (<state>/sessions), and whether
 * a restart can replay them. */
static void
check_sessions(struct report *r, const struct config *c)
{
	char dir[PATH_MAX], sd[PATH_MAX + 16];
	struct err e;
	int ok;

	default_state_dir(c, dir, sizeof(dir));
	snprintf(sd, sizeof(sd), "%s/sessions", dir);
	if (fs_dir_safe(sd, &e) == 0)
		ok = writable_dir(sd);
	else if (e.code != NULL && strcmp(e.code, "not_found") == 0)
		ok = fs_dir_safe(dir, &e) == 0 ? writable_dir(dir) : creatable(sd);
	else
		ok = 0;
	if (ok)
		line(r, "PASS", "sessions", NULL,
		     "session journals go to %s and are replayed after a restart", sd);
	else
		line(r, "WARN", "sessions",
		     "set ABX_SERVER_STATE_DIR to a writable directory (a tmpfs or volume)",
		     "%s cannot be written: session journals live in memory, replay is limited to the "
		     "process lifetime",
		     sd);
}

struct chain {
	int n;
	char dir[4][PATH_MAX];
	int explicit_[4];
	int creatable[4]; /* installs create it when missing */
};

static void
tools_chain(const struct config *c, struct chain *ch)
{
	char state[PATH_MAX];
	const char *tmp = getenv("TMPDIR");

	ch->n = 0;
	if (c->tools_dir[0] != '\0') {
		snprintf(ch->dir[ch->n], PATH_MAX, "%s", c->tools_dir);
		ch->creatable[ch->n] = 1;
		ch->explicit_[ch->n++] = 1;
	}
	snprintf(ch->dir[ch->n], PATH_MAX, "/opt/agent-sandbox/tools");
	ch->creatable[ch->n] = 0;
	ch->explicit_[ch->n++] = 0;
	default_state_dir(c, state, sizeof(state));
	if (strlen(state) + 7 < PATH_MAX) {
		snprintf(ch->dir[ch->n], PATH_MAX, "%.*s/tools", PATH_MAX - 8, state);
		ch->creatable[ch->n] = 1;
		ch->explicit_[ch->n++] = 0;
	}
	if (c->install.allow_tmp) {
		snprintf(ch->dir[ch->n], PATH_MAX, "%.3000s/agent-sandbox-%u/tools",
		         tmp && tmp[0] ? tmp : "/tmp", (unsigned)geteuid());
		ch->creatable[ch->n] = 1;
		ch->explicit_[ch->n++] = 0;
	}
}

static void
check_tools_dirs(struct report *r, const struct config *c, const struct chain *ch)
{
	char mp[PATH_MAX], fix[PATH_MAX + 128], src[CFG_PATH_MAX + 32];
	const char *target = NULL;
	struct err e;
	int i, fl, runtime = config_mode_installs_at_runtime(c->install.mode);

	config_source(c, CK_TOOLS_DIR, src, sizeof(src));
	for (i = 0; i < ch->n; i++) {
		const char *d = ch->dir[i];
		if (fs_dir_safe(d, &e) != 0) {
			if (e.code != NULL && strcmp(e.code, "not_found") == 0) {
				if (ch->creatable[i] && target == NULL && creatable(d)) {
					line(r, "PASS", "tools", NULL,
					     "%s does not exist yet; the first install creates it (mode "
					     "0700) and installs go there%s%s%s",
					     d, ch->explicit_[i] ? " [" : "", ch->explicit_[i] ? src : "",
					     ch->explicit_[i] ? "]" : "");
					target = d;
				} else if (ch->explicit_[i]) {
					line(r, "FAIL", "tools",
					     "create it, or point ABX_TOOLS_DIR at a writable directory",
					     "%s does not exist and cannot be created [%s]", d, src);
				}
				continue;
			}
			snprintf(fix, sizeof(fix), "chmod go-w %s (mode 0700, owned by the server user)", d);
			line(r, ch->explicit_[i] ? "FAIL" : "WARN", "tools", fix, "%s%s", e.msg,
			     ch->explicit_[i] ? "; installs refuse it (config.state_dir_unsafe)"
			                      : "; skipped");
			continue;
		}
		fl = mount_flags(d, mp, sizeof(mp));
		if (!writable_dir(d)) {
			line(r, "PASS", "tools", NULL,
			     "%s is read-only here: prepared tools are used, nothing is installed there%s", d,
			     (fl & 2) ? " (read-only mount)" : "");
			continue;
		}
		if (fl & 1) {
			snprintf(
			    fix, sizeof(fix),
			    "remount %s without noexec, or set ABX_TOOLS_DIR to a directory on an exec mount",
			    mp);
			line(r, "FAIL", "tools", fix,
			     "%s is on a noexec mount (%s): installed tools could not run (install.noexec)",
			     d, mp);
			continue;
		}
		if (target == NULL) {
			target = d;
			line(r, "PASS", "tools", NULL, "%s is writable and safe: new installs go here%s%s%s",
			     d, ch->explicit_[i] ? " [" : "", ch->explicit_[i] ? src : "",
			     ch->explicit_[i] ? "]" : "");
		} else {
			line(r, "PASS", "tools", NULL,
			     "%s is writable and safe (searched for installed tools)", d);
		}
	}
	if (target == NULL) {
		if (runtime)
			line(r, "FAIL", "tools",
			     "set ABX_TOOLS_DIR to a writable directory (a tmpfs or volume), or run "
			     "`agent-sandbox-server prepare` at image build with install.mode build",
			     "no writable tools directory: first-use installs will fail with "
			     "install.read_only (mode %s)",
			     config_mode_name(c->install.mode));
		else
			line(r, "PASS", "tools", NULL,
			     "no writable tools directory; mode %s installs nothing at runtime",
			     config_mode_name(c->install.mode));
	}
}

/* Run path --version with a scrubbed environment and a deadline; the first
 * line of its output into out. Returns its exit status, or -1. */
static int
tool_version(const char *path, char *out, size_t cap)
{
	char home_env[PATH_MAX + 8], td_env[PATH_MAX + 16], *envp[6];
	const char *home = getenv("HOME"), *td = config_env("ABX_TOOLS_DIR");
	int p[2], n = 0, status = -1, elapsed = 0;
	size_t len = 0;
	pid_t pid;

	out[0] = '\0';
	envp[n++] = "PATH=/usr/local/bin:/usr/bin:/bin";
	envp[n++] = "LANG=C";
	/* The shim must not install from a diagnosis. */
	envp[n++] = "ABX_SERVER_INSTALL_MODE=off";
	if (home != NULL) {
		snprintf(home_env, sizeof(home_env), "HOME=%s", home);
		envp[n++] = home_env;
	}
	if (td != NULL) {
		snprintf(td_env, sizeof(td_env), "ABX_TOOLS_DIR=%s", td);
		envp[n++] = td_env;
	}
	envp[n] = NULL;
	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);
		setpgid(0, 0);
		dup2(nul, 0);
		dup2(p[1], 1);
		dup2(p[1], 2);
		execve(path, (char *[]){(char *)path, "--version", NULL}, envp);
		_exit(127);
	}
	close(p[1]);
	while (elapsed < VERSION_TIMEOUT_S * 1000) {
		struct pollfd pfd = {p[0], POLLIN, 0};
		ssize_t k;
		if (poll(&pfd, 1, 100) <= 0) {
			elapsed += 100;
			continue;
		}
		k = read(p[0], out + len, cap - 1 - len);
		if (k <= 0)
			break;
		len += (size_t)k;
		if (len >= cap - 1)
			break;
	}
	out[len] = '\0';
	out[strcspn(out, "\n")] = '\0';
	close(p[0]);
	if (elapsed >= VERSION_TIMEOUT_S * 1000) {
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
		snprintf(out, cap, "no answer in %d s", VERSION_TIMEOUT_S);
		waitpid(pid, NULL, 0);
		return -1;
	}
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void
check_installed(struct report *r, const struct chain *ch)
{
	char bin[PATH_MAX], path[PATH_MAX + 256], ver[256], fix[PATH_MAX + 64];
	int i, found = 0, rc;

	for (i = 0; i < ch->n; i++) {
		struct dirent *de;
		DIR *d;
		snprintf(bin, sizeof(bin), "%.4000s/bin", ch->dir[i]);
		if ((d = opendir(bin)) == NULL)
			continue;
		while ((de = readdir(d)) != NULL && found < MAX_TOOLS_LISTED) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", bin, de->d_name);
			if (access(path, X_OK) != 0)
				continue;
			found++;
			rc = tool_version(path, ver, sizeof(ver));
			if (rc == 0) {
				line(r, "PASS", "installed", NULL, "%s: %s (%s)", de->d_name,
				     ver[0] ? ver : "(no output)", path);
			} else {
				snprintf(fix, sizeof(fix),
				         "agent-sandbox-server verify; agent-sandbox-server prepare --force "
				         "--only %s",
				         de->d_name);
				line(r, "WARN", "installed", fix, "%s: --version failed (%s%s%d) (%s)",
				     de->d_name, ver, ver[0] ? "; exit " : "exit ", rc, path);
			}
		}
		closedir(d);
	}
	if (found == 0)
		line(r, "PASS", "installed", NULL, "no tools installed in the tools directories");
}

/* --- configuration and manifests --- */

struct hostlist {
	int n;
	char h[MAX_HOSTS][280];
};

static void
add_host(struct hostlist *hl, const char *h)
{
	int i;

	for (i = 0; i < hl->n; i++)
		if (strcmp(hl->h[i], h) == 0)
			return;
	if (hl->n < MAX_HOSTS)
		snprintf(hl->h[hl->n++], sizeof(hl->h[0]), "%s", h);
}

/* Manifests: every one of the set (embedded, then manifests_dir) loads and
 * validates with its requires closure; their hosts feed --network. */
static void
check_manifests(struct report *r, struct cfgload *L, struct hostlist *hl)
{
	struct manifest_opts opts;
	const manifest_t *m;
	struct err e;
	int i, h, n = 0, bad = 0;

	if (!L->ms_open) {
		opts.platform = manifest_platform_self();
		opts.allow_unpinned = manifest_unpinned_allowed(L->cfg.environment, &e) > 0;
		if (manifest_set_open(&L->ms, L->cfg.manifests_dir[0] ? L->cfg.manifests_dir : NULL, &opts,
		                      &e) != 0) {
			line(r, "FAIL", "manifests", "fix manifests_dir / ABX_MANIFESTS_DIR / --manifests",
			     "%s", e.msg);
			return;
		}
		L->ms_open = 1;
	}
	for (i = 0; i < L->ms.n; i++) {
		if ((m = manifest_get(&L->ms, L->ms.ent[i].name, &e)) == NULL) {
			line(r, "FAIL", "manifests",
			     "fix the manifest (`agent-sandbox-server check-config --manifest FILE`), or "
			     "re-pin it with `lock`",
			     "%s: %s", e.code ? e.code : "internal", e.msg);
			bad++;
			continue;
		}
		n++;
		for (h = 0; h < m->nhosts; h++)
			add_host(hl, m->hosts[h]);
	}
	if (bad == 0)
		line(r, "PASS", "manifests", NULL, "%d manifests load%s%s%s", n,
		     L->cfg.manifests_dir[0] ? " (with " : "",
		     L->cfg.manifests_dir[0] ? L->cfg.manifests_dir : "", L->cfg.manifests_dir[0] ? ")" : "");
}

/* "gemini requires node-runtime: " when name is not an enabled agent but
 * one requires it (as prepare and the API say it), else "". */
static const char *
required_by(struct cfgload *L, const char *name)
{
	static char s[2 * MANIFEST_NAME_MAX + 16];
	const manifest_t *a;
	struct err e;
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
	struct err e;
	int i, n = 0, bad = 0;

	if (lo != NULL)
		line(r, "PASS", "image", NULL, "C library: %s (loader %s)", libc, lo);
	else
		line(r, "PASS", "image", NULL,
		     "C library: none (neither %s nor %s): only static tools can run here",
		     npmlock_libc_loader("glibc"), npmlock_libc_loader("musl"));
	if (!L->ms_open)
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
		line(r, "FAIL", "image", err_info(e.code)->remedy, "%s: %s%s", e.code, required_by(L, m->name),
		     e.msg);
		bad++;
	}
	if (bad == 0 && L->cfg.agents.n > 0)
		line(r, "PASS", "image", NULL, "every enabled agent and what it requires can run in this image");
}

/* --- system --- */

static void
check_root(struct report *r, const struct config *c)
{
	char mp[PATH_MAX];

	if (mount_flags("/", mp, sizeof(mp)) & 2)
		line(r, "WARN", "root",
		     "mount writable volumes (tmpfs) and set ABX_TOOLS_DIR=/mnt/tools "
		     "ABX_SERVER_STATE_DIR=/mnt/state, or prepare tools at image build with install.mode "
		     "build",
		     "the root filesystem is read-only");
	else
		line(r, "PASS", "root", NULL, "the root filesystem is writable");
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
	char path[PATH_MAX + 256];
	struct dirent *de;
	struct stat sb;
	int n = 0, k, nseen = 0, i, dup;
	DIR *d = opendir(dir);

	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%.4000s/%s", dir, de->d_name);
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
	closedir(d);
	return n;
}

/* The same rule as the TLS client: SSL_CERT_FILE and/or SSL_CERT_DIR when
 * either is set (then only those: a named bundle that is missing is a
 * failure, never silently replaced by a default), else the first default
 * bundle that holds a certificate. */
/* The first enabled tool (agents and what they require) that no tools
 * directory holds installed and no ABX_TOOL_<NAME> names, or NULL. */
static const char *
first_missing_tool(struct cfgload *L, const struct chain *ch)
{
	static char names[MANIFEST_SET_MAX][MANIFEST_NAME_MAX];
	char env[MANIFEST_NAME_MAX + 16], mk[PATH_MAX + 256];
	const char *v;
	struct err e;
	int i, j, n = 0, have;

	if (!L->ms_open)
		return NULL;
	for (i = 0; i < L->cfg.agents.n; i++)
		(void)manifest_closure_add(&L->ms, L->cfg.agents.v[i], names, &n, MANIFEST_SET_MAX, &e);
	for (i = 0; i < n; i++) {
		install_tool_env_name(names[i], env, sizeof(env));
		if ((v = config_env(env)) != NULL)
			continue;
		for (j = 0, have = 0; j < ch->n && !have; j++) {
			snprintf(mk, sizeof(mk), "%.4000s/%.200s/.installed.json", ch->dir[j], names[i]);
			have = access(mk, F_OK) == 0;
		}
		if (!have)
			return names[i];
	}
	return NULL;
}

/* A missing CA bundle is a FAIL when something will be downloaded over
 * HTTPS: mode lazy (installs at run time), or mode build while an enabled
 * tool is not installed yet (prepare downloads it). Offline and off never
 * download: a WARN. */
static void
check_ca(struct report *r, struct cfgload *L, const struct chain *ch)
{
	const struct config *c = &L->cfg;
	const char *missing = c->install.mode == CFG_MODE_BUILD ? first_missing_tool(L, ch) : NULL;
	int need = c->install.mode == CFG_MODE_LAZY || missing != NULL;
	char why[MANIFEST_NAME_MAX + 96];

	static const char *const defaults[] = {"/etc/ssl/certs/ca-certificates.crt",
	                                       "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"};
	const char *file = getenv("SSL_CERT_FILE"), *dir = getenv("SSL_CERT_DIR");
	const char *st = need ? "FAIL" : "WARN";
	char tried[1024] = "";
	size_t i;
	int n = 0, k;

	if (missing != NULL)
		snprintf(why, sizeof(why), " (mode build: %.100s is not installed, prepare downloads it)", missing);
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
		if (n == 0)
			line(r, st, "ca",
			     "point SSL_CERT_FILE at a PEM bundle (or unset it to use the system bundle)",
			     "no CA certificate found: %s; HTTPS downloads will fail (tls.no_trust_anchors)%s",
			     tried, why);
		else
			line(r, "PASS", "ca", NULL, "%d trust anchors from %s", n, tried);
		return;
	}
	for (i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		if ((k = count_pem(defaults[i])) > 0) {
			line(r, "PASS", "ca", NULL, "%d trust anchors in %s", k, defaults[i]);
			return;
		}
	line(
	    r, st, "ca", "install ca-certificates in the image, or set SSL_CERT_FILE",
	    "no CA bundle found (tried /etc/ssl/certs/ca-certificates.crt, /etc/pki/tls/certs/ca-bundle.crt, "
	    "/etc/ssl/cert.pem); HTTPS downloads will fail%s", why);
}

#ifndef ABX_BUILD_DATE
#define ABX_BUILD_DATE "1970-01-01"
#endif

static void
check_clock(struct report *r)
{
	struct tm tm;
	time_t now = time(NULL), built;
	char buf[32];

	memset(&tm, 0, sizeof(tm));
	if (strptime(ABX_BUILD_DATE, "%Y-%m-%d", &tm) == NULL) {
		line(r, "PASS", "clock", NULL, "now %ld (build date unknown)", (long)now);
		return;
	}
	built = timegm(&tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	if (now < built - 86400)
		line(r, "FAIL", "clock",
		     "set the clock (NTP, or the host's clock): TLS certificates are checked against it",
		     "%s is before this binary was built (%s)", buf, ABX_BUILD_DATE);
	else if (now > built + 20L * 365 * 86400)
		line(r, "WARN", "clock", "check the clock: TLS certificates are checked against it",
		     "%s is more than 20 years after this binary was built (%s)", buf, ABX_BUILD_DATE);
	else
		line(r, "PASS", "clock", NULL, "%s is plausible", buf);
}

/* Worded by what was found: a missing file and an unwritable one have
 * different fixes. */
static void
check_passwd(struct report *r)
{
	if (access("/etc/passwd", W_OK) == 0)
		line(r, "PASS", "passwd", NULL,
		     "/etc/passwd is writable (the base image's user mapping works)");
	else if (errno == ENOENT)
		line(r, "WARN", "passwd",
		     "on the Agent Sandbox base image /etc/passwd must exist and be writable by the sandbox user; "
		     "elsewhere set HOME for command ops and sessions",
		     "/etc/passwd does not exist");
	else
		line(r, "WARN", "passwd",
		     "on the Agent Sandbox base image /etc/passwd must stay writable by the sandbox user "
		     "(chmod 0664 and group of that user)",
		     "/etc/passwd exists but is not writable by uid %u (%s)", (unsigned)geteuid(), strerror(errno));
}

/* Agents' own tools (Codex, Claude Code) start shells: /bin/bash. Not ours
 * to need, so a WARN, not a FAIL. */
static void
check_bash(struct report *r)
{
	if (access("/bin/bash", X_OK) == 0)
		line(r, "PASS", "bash", NULL, "/bin/bash is present (agents run their shell commands with it)");
	else
		line(r, "WARN", "bash", "install bash in the image if agents are to run shell commands",
		     "/bin/bash: %s (agents' shell commands will fail)", strerror(errno));
}

/* allow_tmp puts a tools directory under $TMPDIR, which anyone may be
 * able to fill or race: worth saying whenever it is on. */
static void
check_allow_tmp(struct report *r, const struct config *c)
{
	char src[300];

	if (c->install.allow_tmp)
		line(r, "WARN", "allow_tmp",
		     "turn install.allow_tmp off and give the server a tools directory of its own "
		     "(ABX_TOOLS_DIR)",
		     "install.allow_tmp is on (%s): tools may be installed under $TMPDIR, which is often "
		     "shared and cleaned", config_source(c, CK_INSTALL_ALLOW_TMP, src, sizeof(src)));
}

static void
check_ports(struct report *r, const char *list)
{
	char copy[256], *save = NULL, *p, fix[128];

	snprintf(copy, sizeof(copy), "%s", list);
	for (p = strtok_r(copy, ",", &save); p != NULL; p = strtok_r(NULL, ",", &save)) {
		struct sockaddr_in sa;
		int port = atoi(p), fd, one = 1;
		if (port <= 0 || port > 65535)
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_port = htons((unsigned short)port);
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			line(r, "PASS", "ports", NULL, "port %d is free", port);
		} else {
			snprintf(fix, sizeof(fix), "stop what listens on %d, or run serve with --port", port);
			line(r, errno == EADDRINUSE ? "WARN" : "FAIL", "ports", fix,
			     "port %d: %s (already serving?)", port, strerror(errno));
		}
		close(fd);
	}
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
		const char *v = getenv(creds[i].var), *a = creds[i].alt ? getenv(creds[i].alt) : NULL;
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
			line(r, "PASS", "credentials", NULL, "%s is set (agent %s)",
			     (v && v[0]) ? creds[i].var : creds[i].alt, creds[i].agent);
		} else {
			snprintf(fix, sizeof(fix), "pass %s%s%s in the sandbox environment", creds[i].var,
			         creds[i].alt ? " or " : "", creds[i].alt ? creds[i].alt : "");
			line(r, "WARN", "credentials", fix,
			     "%s is not set; agent %s will fail to authenticate", creds[i].var,
			     creds[i].agent);
		}
	}
	if (!any)
		line(r, "PASS", "credentials", NULL, "no agent enabled; credential variables present: %s",
		     present[0] ? present : "none");
}

/* A TCP connect to host[:port] within CONNECT_TIMEOUT_MS; 0 or -1 with why. */
static int
tcp_reach(const char *hostport, char *why, size_t cap)
{
	char host[280], port[8] = "443", *colon;
	struct addrinfo hints, *res = NULL, *ai;
	int rc = -1, g;

	snprintf(host, sizeof(host), "%s", hostport);
	if ((colon = strrchr(host, ':')) != NULL && strchr(host, ']') == NULL &&
	    strchr(colon + 1, '.') == NULL) {
		*colon = '\0';
		snprintf(port, sizeof(port), "%.5s", colon + 1);
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if ((g = getaddrinfo(host, port, &hints, &res)) != 0) {
		snprintf(why, cap, "cannot resolve: %s", gai_strerror(g));
		return -1;
	}
	snprintf(why, cap, "no address");
	for (ai = res; ai != NULL && rc != 0; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err = 0;
		socklen_t el = sizeof(err);
		struct pollfd pfd;
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			rc = 0;
		} else if (errno == EINPROGRESS) {
			pfd.fd = fd;
			pfd.events = POLLOUT;
			if (poll(&pfd, 1, CONNECT_TIMEOUT_MS) == 1 &&
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0)
				rc = 0;
			else
				snprintf(why, cap, "%s", err ? strerror(err) : "timed out after 5 s");
		} else {
			snprintf(why, cap, "%s", strerror(errno));
		}
		close(fd);
	}
	freeaddrinfo(res);
	return rc;
}

/* The host[:port] of an https:// URL, or "" for a path or file:// mirror. */
static void
url_host(const char *url, char *out, size_t cap)
{
	const char *p, *end;

	out[0] = '\0';
	if (strncmp(url, "https://", 8) != 0)
		return;
	p = url + 8;
	end = p + strcspn(p, "/?#");
	if (memchr(p, '@', end - p) != NULL)
		p = (const char *)memchr(p, '@', end - p) + 1;
	if (memchr(p, '{', end - p) != NULL)
		return; /* {host} in the authority: a template of the original host */
	snprintf(out, cap, "%.*s", (int)(end - p), p);
}

static void
check_network(struct report *r, const struct config *c, struct hostlist *hl)
{
	const char *proxy = getenv("HTTPS_PROXY") ? getenv("HTTPS_PROXY") : getenv("https_proxy");
	char why[160], fix[256], h[280], ph[280];
	int i,
	    runtime = config_mode_installs_at_runtime(c->install.mode) && c->install.mode != CFG_MODE_OFFLINE;

	url_host(c->install.npm_mirror, h, sizeof(h));
	if (h[0])
		add_host(hl, h);
	for (i = 0; i < c->install.tarball_mirrors.n; i++) {
		url_host(c->install.tarball_mirrors.v[i], h, sizeof(h));
		if (h[0])
			add_host(hl, h);
	}
	if (proxy != NULL && proxy[0] != '\0') {
		const char *p = strstr(proxy, "://") ? strstr(proxy, "://") + 3 : proxy;
		snprintf(ph, sizeof(ph), "%.*s", (int)strcspn(p, "/"), p);
		if (tcp_reach(ph, why, sizeof(why)) == 0)
			line(r, "PASS", "network", NULL,
			     "proxy %s is reachable; hosts are reached through it", ph);
		else
			line(r, runtime ? "FAIL" : "WARN", "network", "check HTTPS_PROXY", "proxy %s: %s", ph,
			     why);
		return;
	}
	if (hl->n == 0)
		line(r, "PASS", "network", NULL, "no manifest host or mirror to check");
	for (i = 0; i < hl->n; i++) {
		if (tcp_reach(hl->h[i], why, sizeof(why)) == 0) {
			line(r, "PASS", "network", NULL, "%s is reachable", hl->h[i]);
		} else {
			snprintf(fix, sizeof(fix),
			         "allow egress to %.100s, or configure install.mirrors, or fill a cache with "
			         "`fetch` and use install.mode offline",
			         hl->h[i]);
			line(r, runtime ? "FAIL" : "WARN", "network", fix, "%s: %s", hl->h[i], why);
		}
	}
}

/* A configured npm mirror (always https://: the loader refuses anything
 * else) must accept a TCP connection on its host:port. Every
 * npm install goes there, so an unreachable one is a FAIL whatever the
 * mode that will install. */
static void
check_mirror(struct report *r, const struct config *c)
{
	const char *m = c->install.npm_mirror;
	char h[280], why[160], fix[512], src[CFG_PATH_MAX + 32];

	if (m[0] == '\0')
		return;
	config_source(c, CK_INSTALL_MIRRORS_NPM, src, sizeof(src));
	url_host(m, h, sizeof(h));
	if (h[0] != '\0') {
		if (tcp_reach(h, why, sizeof(why)) == 0) {
			line(r, "PASS", "mirror", NULL, "npm mirror %s is reachable [%s]", h, src);
			return;
		}
		snprintf(fix, sizeof(fix),
		         "allow egress to %.200s, or fix install.mirrors.npm (set by %.200s)", h, src);
		line(r, "FAIL", "mirror", fix, "npm mirror %s: %s [%s]", m, why, src);
	}
}

int
doctor_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 0},
	    {"policy", required_argument, NULL, 0},
	    {"preset", required_argument, NULL, 0},
	    {"commands", required_argument, NULL, 0},
	    {"manifests", required_argument, NULL, 0},
	    {"tools-dir", required_argument, NULL, 0},
	    {"state-dir", required_argument, NULL, 0},
	    {"mode", required_argument, NULL, 0},
	    {"ports", required_argument, NULL, 'p'},
	    {"json", no_argument, NULL, 'j'},
	    {"network", no_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *ports = "9000,9001";
	char src[CFG_PATH_MAX + 32];
	struct report r;
	struct cfgload *L;
	struct hostlist *hl;
	struct chain ch;
	struct err e;
	int c, idx, network = 0;

	memset(&r, 0, sizeof(r));
	if ((L = cfgload_new()) == NULL || (hl = calloc(1, sizeof(*hl))) == NULL) {
		cfgload_free(L);
		err_printf("internal", "out of memory");
		return EXIT_FAIL;
	}
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
		switch (c) {
		case 0:
			cfgload_option(L, opts[idx].name, optarg);
			break;
		case 'p':
			ports = optarg;
			break;
		case 'j':
			r.json = 1;
			break;
		case 'n':
			network = 1;
			break;
		case 'h':
			cfgload_free(L), free(hl);
			return usage_help(usage);
		default:
			cfgload_free(L), free(hl);
			return bad_option("doctor", usage, argc, argv);
		}
	}
	if (optind < argc) {
		cfgload_free(L), free(hl);
		return usage_error("doctor", usage, "unexpected argument %s", argv[optind]);
	}
	if (r.json) {
		json_w_init(&r.w, 1u << 20);
		json_w_obj(&r.w);
		json_w_key(&r.w, "checks");
		json_w_arr(&r.w);
	}
	if (cfgload_run(L, &e) == 0) {
		line(&r, "PASS", "config", NULL, "%s, policy and commands are valid (%d ops, %d principals)",
		     L->cfg.file[0] ? L->cfg.file : "embedded defaults", L->ops.n, L->pol.n);
	} else {
		char msg[ERR_MSG_MAX + 64];
		snprintf(msg, sizeof(msg), "%s: %s", e.code ? e.code : "internal", e.msg);
		line(&r, "FAIL", "config", "run `agent-sandbox-server check-config` and fix the first error",
		     "%s", msg);
		/* Go on with what loaded: the environment layer at least. */
		if (config_load(&L->cfg, NULL, NULL, NULL, 0, &e) != 0)
			config_defaults(&L->cfg);
	}
	line(&r, "PASS", "mode", NULL, "install mode %s (%s)%s", config_mode_name(L->cfg.install.mode),
	     config_source(&L->cfg, CK_INSTALL_MODE, src, sizeof(src)),
	     L->cfg.mode_floor != CFG_MODE_LAZY ? "; restrict-only: flags may only tighten it" : "");
	check_home(&r);
	check_state_dir(&r, &L->cfg);
	check_sessions(&r, &L->cfg);
	tools_chain(&L->cfg, &ch);
	check_tools_dirs(&r, &L->cfg, &ch);
	check_installed(&r, &ch);
	check_manifests(&r, L, hl);
	check_image(&r, L);
	check_root(&r, &L->cfg);
	check_ca(&r, L, &ch);
	check_mirror(&r, &L->cfg);
	check_clock(&r);
	check_passwd(&r);
	check_bash(&r);
	check_allow_tmp(&r, &L->cfg);
	check_ports(&r, ports);
	check_credentials(&r, &L->cfg);
	if (network)
		check_network(&r, &L->cfg, hl);
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
