/*
 * The per-tool install lock, and the backoff that holds a tool back after
 * a failure (per tools directory, doubling, capped).
 */
#include "install/install_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/json.h"

/* ---- locks and backoff --------------------------------------------------- */

/* <w>/.locks, and <w>/.locks/<name><ext> into path when name is not NULL:
 * 0, or -1 when it does not fit (path ""). */
static int
locks_path(char path[PATH_MAX], const char *w, const char *name, const char *ext)
{
	if (fs_path_join(path, PATH_MAX, w, ".locks", NULL) < 0)
		return -1;
	if (name != NULL) {
		size_t n = strlen(path);
		if ((size_t)snprintf(path + n, PATH_MAX - n, "/%s%s", name, ext) >= PATH_MAX - n) {
			path[0] = '\0';
			return -1;
		}
	}
	return 0;
}

int
install_lock_tool(struct install_env *c, const char *w, const manifest_t *m, struct err *e)
{
	char path[PATH_MAX], phase[16];
	int64_t deadline = clock_ms() + (int64_t)c->cfg->install.timeout * 1000;
	struct install_progress pg;
	long pid;
	int fd;

	if (locks_path(path, w, NULL, NULL) < 0 || install_mkdir(path, 0700, e) < 0 ||
	    locks_path(path, w, m->name, ".lock") < 0) {
		if (path[0] == '\0')
			err_set(e, "io.error", "%s/.locks/%s.lock: too long a path", w, m->name);
		return -1;
	}
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return err_sys(e, "io.error", errno, "%s: %s", path, strerror(errno));
	while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		if (errno != EWOULDBLOCK && errno != EINTR) {
			err_sys(e, "io.error", errno, "flock %s: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		if (clock_ms() >= deadline) {
			err_set(e, "install.failed", "%s: timed out after %d s waiting for another installer",
			        m->name, c->cfg->install.timeout);
			install_details_phase(e, "lock");
			close(fd);
			return -1;
		}
		/* waiters poll each second and pass on the installer's progress */
		install_sleep_ms(1000);
		if (c->obs != NULL && c->obs->progress != NULL &&
		    install_progress_read(c, m->name, phase, sizeof(phase), &pg, &pid) == 0)
			c->obs->progress(c->obs->arg, m->name, phase, &pg);
	}
	return fd;
}

struct backoff {
	int failures;
	time_t until;
};

static int
backoff_read(const char *dir, const char *name, struct backoff *b)
{
	char path[PATH_MAX], buf[512];
	struct json_doc doc = {0};
	const struct json_val *v;
	struct err e = {0};
	ssize_t n;

	memset(b, 0, sizeof(*b));
	if (locks_path(path, dir, name, ".backoff") < 0 ||
	    (n = fs_read_small(path, buf, sizeof(buf), &e)) <= 0 ||
	    json_parse(&doc, buf, (size_t)n, NULL, &e) < 0)
		return -1;
	if ((v = json_get(doc.root, "failures")) && v->type == JSON_NUMBER)
		b->failures = (int)v->u.num.d;
	if ((v = json_get(doc.root, "until")) && v->type == JSON_NUMBER)
		b->until = (time_t)v->u.num.d;
	json_free(&doc);
	return 0;
}

int
install_backoff_left(struct install_env *c, const char *name)
{
	struct backoff b;
	time_t t = time(NULL), d;

	/* per tools directory: a failure recorded in another directory of the
	 * chain does not hold back installs into this one */
	if (c->chain.writable < 0 || backoff_read(c->chain.d[c->chain.writable].path, name, &b) < 0 ||
	    b.until <= t)
		return 0;
	/* a record never holds a tool back longer than the maximum, whatever
	 * it says */
	d = b.until - t > INSTALL_BACKOFF_MAX ? INSTALL_BACKOFF_MAX : b.until - t;
	return (int)d;
}

void
install_backoff_clear(struct install_env *c, const char *name)
{
	char path[PATH_MAX];

	if (c->chain.writable < 0)
		return;
	if (locks_path(path, c->chain.d[c->chain.writable].path, name, ".backoff") == 0)
		unlink(path);
}

void
install_backoff_record(struct install_env *c, const char *name, const struct err *why)
{
	char path[PATH_MAX];
	struct json_w jw;
	struct backoff b;
	struct err e = {0};
	const char *w;
	int secs, i;

	if (c->chain.writable < 0)
		return;
	w = c->chain.d[c->chain.writable].path;
	if (locks_path(path, w, NULL, NULL) < 0 || install_mkdir(path, 0700, &e) < 0)
		return;
	if (backoff_read(w, name, &b) < 0)
		b.failures = 0;
	b.failures++;
	secs = INSTALL_BACKOFF_MIN;
	for (i = 1; i < b.failures && secs < INSTALL_BACKOFF_MAX; i++)
		secs *= 2;
	if (secs > INSTALL_BACKOFF_MAX)
		secs = INSTALL_BACKOFF_MAX;
	if (locks_path(path, w, name, ".backoff") < 0)
		return;
	json_w_init(&jw, 1024);
	json_w_obj(&jw);
	json_w_kint(&jw, "failures", b.failures);
	json_w_kint(&jw, "until", (int64_t)time(NULL) + secs);
	json_w_kint(&jw, "seconds", secs);
	json_w_kstr(&jw, "code", why->code ? why->code : "internal");
	json_w_end(&jw);
	if (!jw.overflow)
		fs_write_atomic(path, jw.buf, jw.len, 0600, &e);
	json_w_free(&jw);
}
