/*
 * Audit lines (one JSON object per line, one write each) and the progress
 * an install reports to its caller and to waiters in other processes.
 */
#include "install/install_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/json.h"

/* ---- audit and progress ------------------------------------------------ */

/* install_audit_pin_dir's descriptor, set once before threads start. */
static int pinned_dir = -1;

void
install_audit_pin_dir(int dirfd)
{
	pinned_dir = dirfd;
}

void
install_audit(const struct config *cfg, const char *json_object)
{
	static int warned;
	char path[PATH_MAX], line[8192];
	const char *f = cfg->audit_file;
	struct stat st;
	int fd, n, at = 0;

	if (f != NULL && *f != '\0') {
		snprintf(path, sizeof(path), "%s", f);
	} else {
		if (tools_state_dir(cfg, path, sizeof(path)) < 0)
			return;
		at = pinned_dir >= 0;
		if (!at && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)))
			return;
		if (fs_path_join(path, sizeof(path), path, "audit.jsonl", NULL) < 0)
			return;
	}
	n = snprintf(line, sizeof(line), "%s\n", json_object);
	if (n <= 0 || (size_t)n >= sizeof(line))
		return;
	if (at)
		fd = openat(pinned_dir, "audit.jsonl", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		            0600);
	else
		fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	/* one write per line: concurrent installers never interleave */
	if (fd < 0 || write(fd, line, (size_t)n) != n) {
		if (!warned)
			warnx_line("audit file %s: %s; audit records are dropped until it can be written\n"
			           "  fix: create its directory, or set audit_file (ABX_SERVER_AUDIT_FILE) "
			           "to a writable "
			           "file",
			           path, strerror(errno));
		warned = 1;
	}
	if (fd >= 0)
		close(fd);
}

/* The audit file's directory is the state directory, which serve creates
 * (mode 0700) at start-up: the README's template keeps it there. */
static int
in_state_dir(const struct config *cfg, const char *f, char *state, size_t cap)
{
	char parent[PATH_MAX];
	size_t n;

	if (fs_dirname(f, parent, sizeof(parent)) != 0 || tools_state_dir(cfg, state, cap) < 0)
		return 0;
	n = strlen(state);
	while (n > 1 && state[n - 1] == '/')
		state[--n] = '\0';
	return strcmp(parent, state) == 0;
}

/* What opening f for append (O_NOFOLLOW, creating it) would do, without
 * creating anything: 0, or the errno it would fail with. */
static int
audit_open_would_fail(const char *f, int parent_made)
{
	char parent[PATH_MAX];
	struct stat st;

	if (lstat(f, &st) == 0) {
		if (S_ISLNK(st.st_mode))
			return ELOOP;
		if (S_ISDIR(st.st_mode))
			return EISDIR;
		return access(f, W_OK) == 0 ? 0 : errno;
	}
	if (errno != ENOENT)
		return errno;
	if (parent_made)
		return 0;
	if (fs_dirname(f, parent, sizeof(parent)) != 0)
		return ENAMETOOLONG;
	return access(parent, W_OK | X_OK) == 0 ? 0 : errno;
}

int
install_audit_check(const struct config *cfg, int dry, struct err *e)
{
	char state[PATH_MAX];
	const char *f = cfg->audit_file;
	int fd, made = 0, en;
	struct err sub = {0};

	if (f == NULL || *f == '\0')
		return 0;
	if (in_state_dir(cfg, f, state, sizeof(state)) && access(state, F_OK) != 0) {
		if (dry && !tools_dir_creatable(state))
			return err_set(
			    e, "config.invalid",
			    "audit_file %s: its directory is the state directory, which cannot be "
			    "created: set ABX_SERVER_STATE_DIR or audit_file (ABX_SERVER_AUDIT_FILE) "
			    "to a writable place",
			    f);
		err_clear(&sub);
		if (!dry && (fs_mkdir_p(state, 0700, &sub) != 0 || fs_dir_safe(state, &sub) != 0))
			return err_set(e, "config.invalid",
			               "audit_file %s: the state directory %s cannot be created (%s): set "
			               "ABX_SERVER_STATE_DIR or audit_file (ABX_SERVER_AUDIT_FILE) to a "
			               "writable place",
			               f, state, sub.msg);
		made = 1;
	}
	if (dry) {
		en = audit_open_would_fail(f, made);
	} else {
		fd = open(f, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		en = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
	}
	if (en != 0)
		return err_set(e, "config.invalid",
		               "audit_file %s: cannot be written (%s): create its directory, "
		               "or set audit_file (ABX_SERVER_AUDIT_FILE) to a writable file",
		               f, strerror(en));
	return 0;
}

void
install_audit_event(struct install_env *c, const char *event, const manifest_t *m,
                    const struct install_audit_extra *x)
{
	struct json_w w;
	char ts[32];

	clock_iso(clock_wall_ms(), 0, ts, sizeof(ts));
	json_w_init(&w, 7000);
	json_w_obj(&w);
	json_w_kstr(&w, "ts", ts);
	json_w_kstr(&w, "event", event);
	json_w_kstr(&w, "tool", m->name);
	json_w_kstr(&w, "version", m->version);
	json_w_kstr(&w, "platform", c->platform);
	json_w_kstr(&w, "principal", c->principal ? c->principal : "cli");
	if (c->op != NULL)
		json_w_kstr(&w, "op", c->op);
	json_w_kint(&w, "pid", (int64_t)getpid());
	if (x != NULL) {
		if (x->ok >= 0)
			json_w_kbool(&w, "ok", x->ok);
		if (x->code)
			json_w_kstr(&w, "code", x->code);
		if (x->duration_ms >= 0)
			json_w_kint(&w, "duration_ms", x->duration_ms);
		if (x->bytes >= 0)
			json_w_kint(&w, "bytes", x->bytes);
		if (x->artifact_sha256)
			json_w_kstr(&w, "artifact_sha256", x->artifact_sha256);
		if (x->tree_sha256)
			json_w_kstr(&w, "tree_sha256", x->tree_sha256);
		if (x->url)
			json_w_kstr(&w, "url", x->url);
		if (x->sha256)
			json_w_kstr(&w, "sha256", x->sha256);
		if (x->npm != NULL) {
			json_w_kstr(&w, "lockfile_sha256", x->npm->lock_sha256);
			json_w_kint(&w, "packages", (int64_t)x->npm->packages);
			json_w_kint(&w, "downloaded_bytes", (int64_t)x->npm->downloaded);
		}
	}
	json_w_end(&w);
	if (w.overflow) {
		json_w_reset(&w);
		json_w_obj(&w);
		json_w_kstr(&w, "event", "audit.overflow");
		json_w_end(&w);
	}
	install_audit(c->cfg, w.buf);
	json_w_free(&w);
}

/* Report p->cur in phase to the request's observer and in .progress.json
 * (tmp + rename; no fsync: it is advisory). */
void
install_progress_write(struct install_progress_state *p, const char *phase, int force)
{
	char tmp[PATH_MAX + 32];
	int64_t t = clock_ms();
	struct json_w w;
	int fd;

	if (strcmp(p->phase, phase) != 0)
		force = 1;
	snprintf(p->phase, sizeof(p->phase), "%s", phase);
	if (p->cur.total < p->cur.bytes)
		p->cur.total = p->cur.bytes;
	if (p->fn != NULL && (force || t - p->last_ms >= 200))
		p->fn(p->arg, p->m->name, phase, &p->cur);
	if (p->path[0] == '\0' || (!force && t - p->last_ms < 200))
		return;
	p->last_ms = t;
	json_w_init(&w, 512);
	json_w_obj(&w);
	json_w_kstr(&w, "phase", phase);
	json_w_kint(&w, "bytes", (int64_t)p->cur.bytes);
	json_w_kint(&w, "total", (int64_t)p->cur.total);
	json_w_kint(&w, "done", p->cur.done);
	json_w_kint(&w, "count", p->cur.count);
	json_w_kint(&w, "started", p->started);
	json_w_kint(&w, "pid", getpid());
	json_w_end(&w);
	snprintf(tmp, sizeof(tmp), "%s.%d", p->path, (int)getpid());
	fd = w.overflow ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd >= 0) {
		int ok = write(fd, w.buf, w.len) == (ssize_t)w.len;

		if (close(fd) != 0 || !ok || rename(tmp, p->path) != 0)
			unlink(tmp);
	}
	json_w_free(&w);
}

int
install_lock_held(const char *w, const char *name)
{
	char path[PATH_MAX];
	int fd, held;

	if ((size_t)snprintf(path, sizeof(path), "%s/.locks/%s.lock", w, name) >= sizeof(path))
		return -1;
	/* O_RDONLY: a reader that may not write the directory can tell too */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

int
install_progress_read(struct install_env *c, const char *name, char *phase, size_t cap,
                      struct install_progress *p, long *pid)
{
	char path[PATH_MAX], buf[512];
	struct json_doc doc = {0};
	const struct json_val *v;
	struct err e = {0};
	ssize_t n;
	int i;

	for (i = 0; i < c->chain.n; i++) {
		/* the progress of an installer that died is no install */
		if (fs_path_join(path, sizeof(path), c->chain.d[i].path, name, NULL) < 0 ||
		    fs_path_join(path, sizeof(path), path, ".progress.json", NULL) < 0 ||
		    install_lock_held(c->chain.d[i].path, name) != 1)
			continue;
		n = fs_read_small(path, buf, sizeof(buf), &e);
		if (n <= 0)
			continue;
		if (json_parse(&doc, buf, (size_t)n, NULL, &e) < 0)
			continue;
		snprintf(phase, cap, "%s",
		         json_get_str(doc.root, "phase") ? json_get_str(doc.root, "phase") : "?");
		v = json_get(doc.root, "bytes");
		p->bytes = v && v->type == JSON_NUMBER ? (uint64_t)v->u.num.d : 0;
		v = json_get(doc.root, "total");
		p->total = v && v->type == JSON_NUMBER ? (uint64_t)v->u.num.d : 0;
		v = json_get(doc.root, "done");
		p->done = v && v->type == JSON_NUMBER ? (uint32_t)v->u.num.d : 0;
		v = json_get(doc.root, "count");
		p->count = v && v->type == JSON_NUMBER ? (uint32_t)v->u.num.d : 0;
		v = json_get(doc.root, "pid");
		*pid = v && v->type == JSON_NUMBER ? (long)v->u.num.d : 0;
		json_free(&doc);
		return 0;
	}
	return -1;
}
