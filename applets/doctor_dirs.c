/*
 * doctor's checks of directories and installed tools: HOME, the state and
 * session directories, every tools directory of the chain (safe, writable,
 * exec, which one receives installs) and each installed tool's --version.
 */
#include "common.h"

#include <fcntl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/proc.h"
#include "install/install.h"
#include "cfgload.h"
#include "doctor.h"

static int
writable_dir(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && access(path, W_OK | X_OK) == 0;
}

int
doctor_mount_flags(const char *path, char *mp, size_t cap)
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

void
doctor_check_home(struct report *r)
{
	const char *home = config_env("HOME");

	if (home == NULL || home[0] == '\0')
		doctor_line(r, "WARN", "home", "set HOME to the sandbox user's home directory",
		            "HOME is not set");
	else if (!writable_dir(home))
		doctor_line(
		    r, "WARN", "home",
		    "mount a writable volume at HOME, or set ABX_SERVER_STATE_DIR and ABX_TOOLS_DIR to "
		    "writable directories",
		    "%s is not a writable directory", home);
	else
		doctor_line(r, "PASS", "home", NULL, "%s is writable", home);
}

/* 0, or -1 with e (may be NULL) io.error when HOME's state directory does
 * not fit (buf then ""). */
static int
default_state_dir(const struct config *c, char *buf, size_t cap, struct err *e)
{
	const char *home = config_env("HOME");

	if (c->state_dir[0] != '\0')
		snprintf(buf, cap, "%s", c->state_dir);
	else if (geteuid() == 0)
		snprintf(buf, cap, "/var/lib/agent-sandbox");
	else
		return fs_path_join(buf, cap, home && home[0] ? home : "/nonexistent",
		                    ".local/state/agent-sandbox", e);
	return 0;
}

/* What serve does without a writable state directory: with a token
 * configured, session journals live in memory; without one it cannot keep
 * the token it would generate, and answers 401 to all but /health. */
static void
state_unwritable(struct report *r, const char *dir, const char *src, int has_token, const char *why)
{
	if (has_token)
		doctor_line(r, "WARN", "state",
		            "set ABX_SERVER_STATE_DIR to a writable directory (a tmpfs or volume)",
		            "%s %s: session journals live in memory, replay is limited to the process "
		            "lifetime [%s]",
		            dir, why, src);
	else
		doctor_line(r, "FAIL", "state",
		            "set ABX_SERVER_TOKEN (or a policy with tokens), or ABX_SERVER_STATE_DIR to a "
		            "writable directory",
		            "%s %s and no token is configured: serve cannot keep the token it would "
		            "generate, so it answers 401 to every request but /health [%s]",
		            dir, why, src);
}

void
doctor_check_state_dir(struct report *r, const struct config *c, int has_token)
{
	char dir[PATH_MAX], src[CFG_PATH_MAX + 32], fix[2 * PATH_MAX + 64];
	struct err e = {0};

	config_source(c, CK_STATE_DIR, src, sizeof(src));
	if (default_state_dir(c, dir, sizeof(dir), &e) < 0) {
		doctor_line(r, "FAIL", "state", "set ABX_SERVER_STATE_DIR to a shorter path", "%s [%s]",
		            e.msg, src);
		return;
	}
	if (fs_dir_safe(dir, &e) != 0) {
		if (e.code != NULL && strcmp(e.code, "not_found") == 0) {
			if (tools_dir_creatable(dir))
				doctor_line(r, "PASS", "state", NULL,
				            "%s does not exist yet; serve creates it (mode 0700) [%s]", dir,
				            src);
			else
				state_unwritable(r, dir, src, has_token, "cannot be created");
			return;
		}
		snprintf(fix, sizeof(fix), "chown $(id -u) %s && chmod 0700 %s", dir, dir);
		doctor_line(r, "FAIL", "state", fix, "%s", e.msg);
		return;
	}
	if (!writable_dir(dir))
		state_unwritable(r, dir, src, has_token, "is not writable");
	else
		doctor_line(r, "PASS", "state", NULL, "%s is writable and safe [%s]", dir, src);
}

/* The audit file by serve's own check (install_audit_check), without
 * creating anything: a PASS here is a serve that starts. */
void
doctor_check_audit(struct report *r, const struct config *c)
{
	char src[CFG_PATH_MAX + 32];
	struct err e = {0};

	if (c->audit_file[0] == '\0')
		return;
	config_source(c, CK_AUDIT_FILE, src, sizeof(src));
	err_clear(&e);
	if (install_audit_check(c, 1, &e) != 0)
		doctor_line(r, "FAIL", "audit", "set audit_file (ABX_SERVER_AUDIT_FILE) to a writable file",
		            "%s: serve refuses to start [%s]", e.msg, src);
	else
		doctor_line(r, "PASS", "audit", NULL, "install records are appended to %s [%s]",
		            c->audit_file, src);
}

/* Where serve keeps agent session journals (<state>/sessions), and whether
 * a restart can replay them. */
void
doctor_check_sessions(struct report *r, const struct config *c)
{
	char dir[PATH_MAX], sd[PATH_MAX + 16];
	struct err e = {0};
	int ok;

	/* a state directory too long to name is doctor_check_state_dir's FAIL */
	if (default_state_dir(c, dir, sizeof(dir), NULL) < 0 ||
	    fs_path_join(sd, sizeof(sd), dir, "sessions", NULL) < 0)
		return;
	if (fs_dir_safe(sd, &e) == 0)
		ok = writable_dir(sd);
	else if (e.code != NULL && strcmp(e.code, "not_found") == 0)
		ok = fs_dir_safe(dir, &e) == 0 ? writable_dir(dir) : tools_dir_creatable(sd);
	else
		ok = 0;
	if (ok)
		doctor_line(r, "PASS", "sessions", NULL,
		            "session journals go to %s and are replayed after a restart", sd);
	else
		doctor_line(r, "WARN", "sessions",
		            "set ABX_SERVER_STATE_DIR to a writable directory (a tmpfs or volume)",
		            "%s cannot be written: session journals live in memory, replay is limited to the "
		            "process lifetime",
		            sd);
}

void
doctor_tools_chain(const struct config *c, struct chain *ch)
{
	char state[PATH_MAX];
	const char *tmp = config_env("TMPDIR");

	ch->n = 0;
	if (c->tools_dir[0] != '\0') {
		snprintf(ch->dir[ch->n], PATH_MAX, "%s", c->tools_dir);
		ch->creatable[ch->n] = 1;
		ch->explicit_[ch->n++] = 1;
	}
	/* each directory once, as tools_chain_build keeps it: an explicit one
	 * that is also a default is listed as the explicit one */
	if (c->tools_dir[0] == '\0' || strcmp(c->tools_dir, "/opt/agent-sandbox/tools") != 0) {
		snprintf(ch->dir[ch->n], PATH_MAX, "/opt/agent-sandbox/tools");
		ch->creatable[ch->n] = 0;
		ch->explicit_[ch->n++] = 0;
	}
	if (default_state_dir(c, state, sizeof(state), NULL) == 0 &&
	    fs_path_join(ch->dir[ch->n], PATH_MAX, state, "tools", NULL) == 0) {
		ch->creatable[ch->n] = 1;
		ch->explicit_[ch->n] = 0;
		if (ch->n == 0 || strcmp(ch->dir[0], ch->dir[ch->n]) != 0)
			ch->n++;
	}
	if (c->install.allow_tmp) {
		char leaf[32];

		snprintf(leaf, sizeof(leaf), "agent-sandbox-%u", (unsigned)geteuid());
		if (fs_path_join(state, sizeof(state), tmp && tmp[0] ? tmp : "/tmp", leaf, NULL) < 0 ||
		    fs_path_join(ch->dir[ch->n], PATH_MAX, state, "tools", NULL) < 0)
			return;
		ch->creatable[ch->n] = 1;
		ch->explicit_[ch->n++] = 0;
	}
}

/* What the tools directory installs go to and its cache take on the disk
 * (blocks, as du counts them), one line each; nothing when it does not
 * exist yet. */
static void
tools_sizes(struct report *r, const char *d)
{
	char cache[PATH_MAX], h[32], hc[32];
	uint64_t b, f, cb = 0, cf = 0;
	struct err e = {0};

	if (access(d, F_OK) != 0 || fs_du(AT_FDCWD, d, &b, &f, &e) != 0 ||
	    fs_path_join(cache, sizeof(cache), d, ".cache", NULL) < 0 ||
	    fs_du(AT_FDCWD, cache, &cb, &cf, &e) != 0)
		return;
	human_bytes(b - cb, h, sizeof(h));
	human_bytes(cb, hc, sizeof(hc));
	doctor_line(r, "PASS", "size", NULL, "%s holds %s in %llu entries (%llu bytes; its .cache apart)", d,
	            h, (unsigned long long)(f - cf), (unsigned long long)(b - cb));
	doctor_line(r, "PASS", "size", NULL,
	            "%s holds %s in %llu entries (%llu bytes; `prepare --prune` removes what no manifest "
	            "references)",
	            cache, hc, (unsigned long long)cf, (unsigned long long)cb);
}

void
doctor_check_tools_dirs(struct report *r, const struct config *c, const struct chain *ch)
{
	char mp[PATH_MAX], fix[PATH_MAX + 128], src[CFG_PATH_MAX + 32];
	const char *target = NULL;
	struct err e = {0};
	int i, fl, runtime = config_mode_installs_at_runtime(c->install.mode);

	config_source(c, CK_TOOLS_DIR, src, sizeof(src));
	for (i = 0; i < ch->n; i++) {
		const char *d = ch->dir[i];
		if (fs_dir_safe(d, &e) != 0) {
			if (e.code != NULL && strcmp(e.code, "not_found") == 0) {
				if (ch->creatable[i] && target == NULL && tools_dir_creatable(d)) {
					doctor_line(
					    r, "PASS", "tools", NULL,
					    "%s does not exist yet; the first install creates it (mode "
					    "0700) and installs go there%s%s%s",
					    d, ch->explicit_[i] ? " [" : "", ch->explicit_[i] ? src : "",
					    ch->explicit_[i] ? "]" : "");
					target = d;
				} else if (ch->explicit_[i]) {
					doctor_line(
					    r, "FAIL", "tools",
					    "create it, or point ABX_TOOLS_DIR at a writable directory",
					    "%s does not exist and cannot be created [%s]", d, src);
				}
				continue;
			}
			snprintf(fix, sizeof(fix), "chmod go-w %s (mode 0700, owned by the server user)", d);
			doctor_line(r, ch->explicit_[i] ? "FAIL" : "WARN", "tools", fix, "%s%s", e.msg,
			            ch->explicit_[i] ? "; installs refuse it (config.state_dir_unsafe)"
			                             : "; skipped");
			continue;
		}
		fl = doctor_mount_flags(d, mp, sizeof(mp));
		if (!writable_dir(d) && ch->explicit_[i] && target == NULL) {
			/* installs refuse it rather than go to a later one
			 * (tools_chain_build): no later directory receives them */
			target = d;
			if (runtime)
				doctor_line(
				    r, "FAIL", "tools",
				    "make it writable by the server user, or name a writable one",
				    "%s cannot be written [%s]: installs at runtime fail with "
				    "install.read_only (an explicit directory is never replaced; mode %s)",
				    d, src, config_mode_name(c->install.mode));
			else
				doctor_line(
				    r, "PASS", "tools", NULL,
				    "%s is read-only here [%s]: prepared tools are used; mode %s installs "
				    "nothing at runtime",
				    d, src, config_mode_name(c->install.mode));
			continue;
		}
		if (!writable_dir(d)) {
			doctor_line(
			    r, "PASS", "tools", NULL,
			    "%s is read-only here: prepared tools are used, nothing is installed there%s", d,
			    (fl & 2) ? " (read-only mount)" : "");
			continue;
		}
		if (fl & 1) {
			snprintf(
			    fix, sizeof(fix),
			    "remount %s without noexec, or set ABX_TOOLS_DIR to a directory on an exec mount",
			    mp);
			doctor_line(
			    r, "FAIL", "tools", fix,
			    "%s is on a noexec mount (%s): installed tools could not run (install.noexec)", d,
			    mp);
			continue;
		}
		if (target == NULL) {
			target = d;
			doctor_line(r, "PASS", "tools", NULL,
			            "%s is writable and safe: new installs go here%s%s%s", d,
			            ch->explicit_[i] ? " [" : "", ch->explicit_[i] ? src : "",
			            ch->explicit_[i] ? "]" : "");
		} else {
			doctor_line(r, "PASS", "tools", NULL,
			            "%s is writable and safe (searched for installed tools)", d);
		}
	}
	if (target != NULL)
		tools_sizes(r, target);
	if (target == NULL) {
		if (runtime)
			doctor_line(r, "FAIL", "tools",
			            "set ABX_TOOLS_DIR to a writable directory (a tmpfs or volume), or run "
			            "`agent-sandbox-server prepare` at image build with install.mode build",
			            "no writable tools directory: first-use installs will fail with "
			            "install.read_only (mode %s)",
			            config_mode_name(c->install.mode));
		else
			doctor_line(r, "PASS", "tools", NULL,
			            "no writable tools directory; mode %s installs nothing at runtime",
			            config_mode_name(c->install.mode));
	}
}

/* Run path --version with a scrubbed environment, stdin from /dev/null
 * and a deadline; the first line of its output (stdout, else stderr: a tool
 * may print its version on either) into out. Returns its exit status, or
 * -1 with out saying why (it did not start, did not answer in time, or was
 * killed by a signal). */
static int
tool_version(const char *path, char *out, size_t cap)
{
	char home_env[PATH_MAX + 8], td_env[PATH_MAX + 16], *envp[6];
	char *argv[] = {(char *)path, "--version", NULL};
	const char *home = config_env("HOME"), *td = config_env("ABX_TOOLS_DIR");
	struct proc_spec spec = {argv, envp, NULL, DOCTOR_VERSION_TIMEOUT_MS, 0};
	struct proc_capture c;
	struct proc p;
	struct err e = {0};
	int n = 0;

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
	memset(&c, 0, sizeof(c));
	c.cap = cap - 1;
	if (proc_run(&p, &spec, &c, &e) != 0) {
		snprintf(out, cap, "%.*s", (int)(cap - 1), e.msg);
		return -1;
	}
	snprintf(out, cap, "%s", c.out != NULL && c.out[0] != '\0' ? c.out : c.err != NULL ? c.err : "");
	proc_capture_free(&c);
	out[strcspn(out, "\n")] = '\0';
	if (p.timed_out) {
		snprintf(out, cap, "no answer in %d s", DOCTOR_VERSION_TIMEOUT_MS / 1000);
		return -1;
	}
	if (WIFSIGNALED(p.status)) {
		snprintf(out + strlen(out), cap - strlen(out), "%skilled by signal %d", out[0] ? "; " : "",
		         WTERMSIG(p.status));
		return -1;
	}
	return WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
}

void
doctor_check_installed(struct report *r, const struct chain *ch)
{
	char bin[PATH_MAX], path[PATH_MAX + 256], ver[256], fix[PATH_MAX + 64], **names;
	struct err e = {0};
	size_t n, k;
	int i, found = 0, rc;

	for (i = 0; i < ch->n; i++) {
		if (fs_path_join(bin, sizeof(bin), ch->dir[i], "bin", NULL) != 0 ||
		    fs_dir_names(AT_FDCWD, bin, "io.error", &names, &n, &e) != 0)
			continue;
		for (k = 0; k < n && found < DOCTOR_TOOLS_LISTED_MAX; k++) {
			if (names[k][0] == '.')
				continue;
			if (fs_path_join(path, sizeof(path), bin, names[k], NULL) != 0 ||
			    access(path, X_OK) != 0)
				continue;
			found++;
			rc = tool_version(path, ver, sizeof(ver));
			if (rc == 0) {
				doctor_line(r, "PASS", "installed", NULL, "%s: %s (%s)", names[k],
				            ver[0] ? ver : "(no output)", path);
			} else {
				snprintf(fix, sizeof(fix),
				         "agent-sandbox-server verify; agent-sandbox-server prepare --force "
				         "--only %s",
				         names[k]);
				if (rc < 0)
					doctor_line(r, "WARN", "installed", fix,
					            "%s: --version failed (%s) (%s)", names[k], ver, path);
				else
					doctor_line(r, "WARN", "installed", fix,
					            "%s: --version failed (%s%s%d) (%s)", names[k], ver,
					            ver[0] ? "; exit " : "exit ", rc, path);
			}
		}
		free(names);
	}
	if (found == 0)
		doctor_line(r, "PASS", "installed", NULL, "no tools installed in the tools directories");
}
