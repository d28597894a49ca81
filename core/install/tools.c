/*
 * Tools directories.
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
	struct err e = {0};
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
tools_state_dir(const struct config *cfg, char *buf, size_t cap)
{
	const char *v = cfg != NULL ? cfg->state_dir : NULL, *home;
	char pwhome[4096];

	if (v != NULL && *v == '/')
		return snprintf(buf, cap, "%s", v) < (int)cap ? 0 : -1;
	/* An explicit base directory (serve --base-dir, ABX_SERVER_BASE_DIR)
	 * stands for HOME, for root too: the user the image is built for. */
	if (cfg != NULL && cfg->base_dir[0] == '/')
		return fs_path_join(buf, cap, cfg->base_dir, ".local/state/agent-sandbox", NULL);
	if (geteuid() == 0)
		return snprintf(buf, cap, "/var/lib/agent-sandbox") < (int)cap ? 0 : -1;
	home = config_env("HOME");
	if ((home == NULL || *home != '/') && passwd_home(geteuid(), pwhome, sizeof(pwhome)) == 0)
		home = pwhome;
	if (home == NULL || *home != '/')
		return -1;
	return fs_path_join(buf, cap, home, ".local/state/agent-sandbox", NULL);
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
	struct err sub = {0};

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
				err_copy(e, &sub);
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
	struct err sub = {0};

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
tools_chain_build(struct tools_chain *c, const struct config *cfg, int create, struct err *e)
{
	char buf[PATH_MAX], src[CFG_PATH_MAX + 16];
	struct tools_dir *d, *user = NULL, *tmp = NULL, *expl = NULL;
	const char *t;
	int i;

	memset(c, 0, sizeof(*c));
	c->writable = -1;
	if (cfg->tools_dir[0] != '\0')
		expl = chain_add(c, cfg->tools_dir, 1);
	chain_add(c, "/opt/agent-sandbox/tools", 0);
	if (tools_state_dir(cfg, buf, sizeof(buf)) == 0 &&
	    fs_path_join(buf, sizeof(buf), buf, "tools", NULL) == 0)
		user = chain_add(c, buf, 0);
	if (cfg->install.allow_tmp) {
		char leaf[32];

		t = config_env("TMPDIR");
		if (t == NULL || *t != '/')
			t = "/tmp";
		snprintf(leaf, sizeof(leaf), "agent-sandbox-%u", (unsigned)geteuid());
		if (fs_path_join(buf, sizeof(buf), t, leaf, NULL) == 0 &&
		    fs_path_join(buf, sizeof(buf), buf, "tools", NULL) == 0)
			tmp = chain_add(c, buf, 0);
	}
	for (i = 0; i < c->n; i++)
		if (probe_dir(&c->d[i], e) < 0)
			return -1;
	config_source(cfg, CK_TOOLS_DIR, src, sizeof(src));
	if (create && expl != NULL) {
		try_create(expl, 0755);
		/* an explicit directory is used or refused, never silently
		 * replaced by a later one of the chain */
		if (!expl->exists) {
			err_set(e, "install.read_only", "tools directory %s (%s): %s", expl->path, src,
			        expl->why);
			tools_chain_detail_tried(c, e);
			return -1;
		}
	}
	/* nor by a later one when it exists but cannot be written: readers
	 * use what it holds, installers refuse before any download */
	if (expl != NULL && expl->exists && !expl->writable) {
		char tried[1024];
		if (!create)
			return 0;
		tools_chain_tried_text(c, tried, sizeof(tried));
		err_set(e, "install.read_only",
		        "tools directory %s (%s) exists but cannot be written (%s); an explicit "
		        "directory is never replaced by another: make it writable by uid %u, or name a "
		        "writable one (%s); tried %s",
		        expl->path, src, expl->why, (unsigned)geteuid(), src, tried);
		tools_chain_detail_tried(c, e);
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
tools_chain_detail_tried(const struct tools_chain *c, struct err *e)
{
	/* The paths that fit beside what details hold already ("tried":,
	 * quotes, a comma, the brackets): a long one is left out, not cut. */
	size_t room, n;
	struct json_w w;
	int i;

	if (e->details == NULL || strlen(e->details) + 16 >= e->details_cap)
		return;
	room = e->details_cap - strlen(e->details) - 16;
	json_w_init(&w, ERR_DETAILS_MAX);
	json_w_arr(&w);
	for (i = 0; i < c->n; i++) {
		n = strlen(c->d[i].path);
		if (w.len + 3 < room && json_escaped_prefix(c->d[i].path, n, room - w.len - 3) == n)
			json_w_str(&w, c->d[i].path);
	}
	json_w_end(&w);
	if (!w.overflow)
		err_detail_json(e, "tried", w.buf);
	json_w_free(&w);
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
