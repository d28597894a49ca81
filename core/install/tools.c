/*
 * Tools directories and install settings.
 */
#include "install/tools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/json.h"

void
install_settings_from_config(struct install_settings *s, const struct config *cfg)
{
	int i;

	memset(s, 0, sizeof(*s));
	s->mode = cfg->install.mode;
	config_source(cfg, CK_INSTALL_MODE, s->mode_source, sizeof(s->mode_source));
	s->wait_s = cfg->install.wait;
	s->timeout_s = cfg->install.timeout;
	s->max_download_mb = cfg->install.max_download_mb;
	snprintf(s->npm_mirror, sizeof(s->npm_mirror), "%s", cfg->install.npm_mirror);
	snprintf(s->oci_mirror, sizeof(s->oci_mirror), "%s", cfg->install.oci_mirror);
	s->allow_http_mirrors = cfg->install.allow_http_mirrors;
	for (i = 0; i < cfg->install.tarball_mirrors.n && i < TOOLS_MIRRORS_MAX; i++)
		snprintf(s->tarball_mirrors[i], sizeof(s->tarball_mirrors[i]), "%s",
		         cfg->install.tarball_mirrors.v[i]);
	s->nmirrors = i;
	for (i = 0; i < cfg->install.allow_hosts.n && i < TOOLS_ALLOW_HOSTS_MAX; i++)
		snprintf(s->allow_hosts[i], sizeof(s->allow_hosts[i]), "%s", cfg->install.allow_hosts.v[i]);
	s->nallow_hosts = i;
	s->allow_tmp = cfg->install.allow_tmp;
	s->use_path = cfg->install.use_path;
	snprintf(s->tools_dir, sizeof(s->tools_dir), "%s", cfg->tools_dir);
	config_source(cfg, CK_TOOLS_DIR, s->tools_dir_source, sizeof(s->tools_dir_source));
	snprintf(s->manifests_dir, sizeof(s->manifests_dir), "%s", cfg->manifests_dir);
	config_source(cfg, CK_MANIFESTS_DIR, s->manifests_dir_source, sizeof(s->manifests_dir_source));
	snprintf(s->state_dir, sizeof(s->state_dir), "%s", cfg->state_dir);
	snprintf(s->base_dir, sizeof(s->base_dir), "%s", cfg->base_dir);
	snprintf(s->audit_file, sizeof(s->audit_file), "%s", cfg->audit_file);
	snprintf(s->environment, sizeof(s->environment), "%s", cfg->environment);
}

int
tools_dir_creatable(const char *path)
{
	char parent[PATH_MAX], up[PATH_MAX];
	struct stat sb;

	if (fs_dirname(path, parent, sizeof(parent)) != 0)
		return 0;
	while (access(parent, F_OK) != 0) {
		if (strcmp(parent, "/") == 0 || fs_dirname(parent, up, sizeof(up)) != 0)
			return 0;
		memcpy(parent, up, strlen(up) + 1);
	}
	return stat(parent, &sb) == 0 && S_ISDIR(sb.st_mode) && access(parent, W_OK | X_OK) == 0;
}

/* The home directory /etc/passwd gives uid, into buf. By hand: getpwuid
 * links musl's passwd and nscd readers (about 4 KB) for this fallback, which
 * is taken only when HOME is unset. */
static int
passwd_home(uid_t uid, char *buf, size_t cap)
{
	char *text, *line, *next, *p, *end, *f[7];
	size_t len;
	struct err e;
	int i, rc = -1;

	if (fs_read_input("/etc/passwd", 4u << 20, &text, &len, &e) != 0)
		return -1;
	for (line = text; line != NULL && rc < 0; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		/* name:password:UID:GID:gecos:HOME:shell (passwd(5)) */
		for (p = line, i = 0; i < 7 && (f[i] = strsep(&p, ":")) != NULL; i++)
			;
		if (i == 7 && f[2][0] >= '0' && f[2][0] <= '9' && strtoul(f[2], &end, 10) == uid &&
		    *end == '\0')
			rc = snprintf(buf, cap, "%s", f[5]) < (int)cap ? 0 : -1;
	}
	free(text);
	return rc;
}

int
tools_state_dir(const struct install_settings *s, char *buf, size_t cap)
{
	const char *v = s != NULL ? s->state_dir : NULL, *home;
	char pwhome[4096];

	if (v != NULL && *v == '/')
		return snprintf(buf, cap, "%s", v) < (int)cap ? 0 : -1;
	/* An explicit base directory (serve --base-dir, ABX_SERVER_BASE_DIR)
	 * stands for HOME, for root too: the user the image is built for. */
	if (s != NULL && s->base_dir[0] == '/')
		return snprintf(buf, cap, "%s/.local/state/agent-sandbox", s->base_dir) < (int)cap ? 0 : -1;
	if (geteuid() == 0)
		return snprintf(buf, cap, "/var/lib/agent-sandbox") < (int)cap ? 0 : -1;
	home = config_env("HOME");
	if ((home == NULL || *home != '/') && passwd_home(geteuid(), pwhome, sizeof(pwhome)) == 0)
		home = pwhome;
	if (home == NULL || *home != '/')
		return -1;
	return snprintf(buf, cap, "%s/.local/state/agent-sandbox", home) < (int)cap ? 0 : -1;
}

static struct tools_dir *
chain_add(struct tools_chain *c, const char *path, int explicit_)
{
	struct tools_dir *d;
	int i;

	for (i = 0; i < c->n; i++)
		if (strcmp(c->d[i].path, path) == 0)
			return NULL;
	if (c->n >= TOOLS_CHAIN_MAX)
		return NULL;
	d = &c->d[c->n++];
	memset(d, 0, sizeof(*d));
	snprintf(d->path, sizeof(d->path), "%s", path);
	d->explicit_ = explicit_;
	return d;
}

/* Look at d: exists, safe, writable. */
static int
probe_dir(struct tools_dir *d, struct err *e)
{
	struct err sub;

	d->exists = d->safe = d->writable = 0;
	if (strlen(d->path) > TOOLS_DIR_MAX || d->path[0] != '/') {
		snprintf(d->why, sizeof(d->why), "not an absolute path of at most %d bytes", TOOLS_DIR_MAX);
		if (d->explicit_ && e != NULL)
			return err_set(e, "config.invalid",
			               "tools directory: not an absolute path of at most %d bytes",
			               TOOLS_DIR_MAX);
		return 0;
	}
	if (fs_dir_safe(d->path, &sub) < 0) {
		struct stat sb;
		/* a path through a file is as absent as a missing one (and
		 * creating it says why it cannot be) */
		if ((sub.code != NULL && strcmp(sub.code, "not_found") == 0) ||
		    (stat(d->path, &sb) != 0 && errno == ENOTDIR)) {
			snprintf(d->why, sizeof(d->why), "does not exist");
			return 0;
		}
		d->exists = 1;
		snprintf(d->why, sizeof(d->why), "%s", sub.msg);
		if (d->explicit_ && sub.code != NULL && strcmp(sub.code, "config.state_dir_unsafe") == 0) {
			if (e != NULL)
				*e = sub;
			return -1;
		}
		return 0;
	}
	d->exists = d->safe = 1;
	if (access(d->path, W_OK | X_OK) == 0) {
		d->writable = 1;
		d->why[0] = '\0';
	} else {
		snprintf(d->why, sizeof(d->why), "not writable: %s", strerror(errno));
	}
	return 0;
}

/* An explicit directory (ABX_TOOLS_DIR=/opt/agent-sandbox/tools at image
 * build) is created 0755: root prepares it, the sandbox user runs from it.
 * Per-user directories are private (0700). The umask does not narrow
 * either. */
static void
try_create(struct tools_dir *d, mode_t mode)
{
	struct err sub;

	if (d->exists)
		return;
	if (fs_mkdir_p(d->path, mode, &sub) < 0) {
		snprintf(d->why, sizeof(d->why), "%s", sub.msg);
		return;
	}
	chmod(d->path, mode);
	probe_dir(d, NULL);
}

int
tools_chain_build(struct tools_chain *c, const struct install_settings *s, int create, struct err *e)
{
	char buf[PATH_MAX];
	struct tools_dir *d, *user = NULL, *tmp = NULL, *expl = NULL;
	const char *t;
	int i;

	memset(c, 0, sizeof(*c));
	c->writable = -1;
	if (s->tools_dir[0] != '\0')
		expl = chain_add(c, s->tools_dir, 1);
	chain_add(c, "/opt/agent-sandbox/tools", 0);
	if (tools_state_dir(s, buf, sizeof(buf) - 8) == 0) {
		strcat(buf, "/tools");
		user = chain_add(c, buf, 0);
	}
	if (s->allow_tmp) {
		t = config_env("TMPDIR");
		if (t == NULL || *t != '/')
			t = "/tmp";
		snprintf(buf, sizeof(buf), "%s/agent-sandbox-%u/tools", t, (unsigned)geteuid());
		tmp = chain_add(c, buf, 0);
	}
	for (i = 0; i < c->n; i++)
		if (probe_dir(&c->d[i], e) < 0)
			return -1;
	if (create && expl != NULL) {
		try_create(expl, 0755);
		/* an explicit directory is used or refused, never silently
		 * replaced by a later one of the chain */
		if (!expl->exists) {
			char tried[1024], det[1100];
			err_set(e, "install.read_only", "tools directory %s (%s): %s", expl->path,
			        s->tools_dir_source[0] ? s->tools_dir_source : "--tools-dir", expl->why);
			tools_chain_tried_json(c, tried, sizeof(tried));
			snprintf(det, sizeof(det), "{\"tried\":%s}", tried);
			err_details(e, det);
			return -1;
		}
	}
	/* nor by a later one when it exists but cannot be written: readers
	 * use what it holds, installers refuse before any download */
	if (expl != NULL && expl->exists && !expl->writable) {
		char tried[1024], det[1100];
		const char *src = s->tools_dir_source[0] ? s->tools_dir_source : "--tools-dir";
		if (!create)
			return 0;
		tools_chain_tried_text(c, tried, sizeof(tried));
		err_set(e, "install.read_only",
		        "tools directory %s (%s) exists but cannot be written (%s); an explicit "
		        "directory is never replaced by another: make it writable by uid %u, or name a "
		        "writable one (%s); tried %s",
		        expl->path, src, expl->why, (unsigned)geteuid(), src, tried);
		tools_chain_tried_json(c, tried, sizeof(tried));
		snprintf(det, sizeof(det), "{\"tried\":%s}", tried);
		err_details(e, det);
		return -1;
	}
	for (i = 0; i < c->n; i++)
		if (c->d[i].writable) {
			c->writable = i;
			return 0;
		}
	if (create) {
		/* the per-user default, then the tmp one, are ours to create */
		for (d = user; d != NULL; d = (d == user ? tmp : NULL)) {
			try_create(d, 0700);
			if (d->writable) {
				c->writable = (int)(d - c->d);
				return 0;
			}
		}
	}
	return 0;
}

void
tools_chain_prefer(struct tools_chain *c, const char *dir)
{
	struct tools_dir first;
	int i, j;

	memset(&first, 0, sizeof(first));
	snprintf(first.path, sizeof(first.path), "%s", dir);
	probe_dir(&first, NULL);
	for (i = 0; i < c->n; i++)
		if (strcmp(c->d[i].path, dir) == 0) {
			first = c->d[i];
			for (j = i; j + 1 < c->n; j++)
				c->d[j] = c->d[j + 1];
			c->n--;
			break;
		}
	if (c->n >= TOOLS_CHAIN_MAX)
		c->n = TOOLS_CHAIN_MAX - 1;
	memmove(&c->d[1], &c->d[0], (size_t)c->n * sizeof(c->d[0]));
	c->d[0] = first;
	c->n++;
	c->writable = -1;
	for (i = 0; i < c->n; i++)
		if (c->d[i].writable) {
			c->writable = i;
			break;
		}
}

void
tools_chain_tried_json(const struct tools_chain *c, char *buf, size_t cap)
{
	size_t off = 0;
	int i, n;

	if (cap < 3) {
		if (cap)
			buf[0] = '\0';
		return;
	}
	buf[off++] = '[';
	for (i = 0; i < c->n; i++) {
		if (cap - off < 4)
			break;
		if (i > 0)
			buf[off++] = ',';
		n = json_escape(buf + off, cap - off - 2, c->d[i].path);
		if (n < 0)
			break;
		off += (size_t)n;
	}
	buf[off++] = ']';
	buf[off] = '\0';
}

void
tools_chain_tried_text(const struct tools_chain *c, char *buf, size_t cap)
{
	size_t off = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i < c->n && off < cap; i++)
		off += (size_t)snprintf(buf + off, cap - off, "%s%s (%s)", i ? ", " : "", c->d[i].path,
		                        c->d[i].why[0] ? c->d[i].why : "ok");
}
