/*
 * The helpers every file of the install engine shares, below all of them:
 * names of states, phases and CPU buckets, directories made with their
 * exact mode, error details, the test pause, the sweep of what crashed
 * installers left, and the join of the requires an install waits for.
 */
#include "install/install_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "config/config.h"
#include "pkg/cache.h"

static const char *const state_names[] = {
    "ready", "pending", "missing", "failed", "read_only", "disabled", "network_unreachable"};

const char *
install_state_name(enum install_state s)
{
	return (unsigned)s < sizeof(state_names) / sizeof(state_names[0]) ? state_names[s] : "?";
}

int
install_mkdir(const char *path, mode_t mode, struct err *e)
{
	if (mkdir(path, mode) == 0) {
		chmod(path, mode); /* not narrowed by the umask: others read trees */
		return 0;
	}
	if (errno == EEXIST) {
		struct stat st;
		if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
			return 0;
		return err_set(e, "io.error", "%s exists and is not a directory", path);
	}
	return err_sys(e, "io.error", errno, "mkdir %s: %s", path, strerror(errno));
}

void
install_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ABX_TEST_PAUSE (see install.h): compiled into the test build only, so the
 * release binary carries no way to stall an install. */
void
install_test_pause(const struct install_env *c, const char *phase)
{
#ifdef ABX_TEST_HOOKS
	const char *p = config_env("ABX_TEST_PAUSE");
	char line[80];
	int n, i;

	if (p == NULL || strcmp(p, phase) != 0 || config_production(c->cfg))
		return;
	n = snprintf(line, sizeof(line), "install: paused at %s\n", phase);
	if (write(2, line, (size_t)n) < 0) {
		/* nothing to do */
	}
	for (i = 0; i < 300; i++)
		install_sleep_ms(100);
#else
	(void)c;
	(void)phase;
#endif
}

void
install_tool_env_name(const char *name, char *buf, size_t cap)
{
	size_t i, off = (size_t)snprintf(buf, cap, "ABX_TOOL_");

	for (i = 0; name[i] && off + 1 < cap; i++, off++) {
		char ch = name[i];
		buf[off] = (ch >= 'a' && ch <= 'z')                                 ? (char)(ch - 32)
		           : ((ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z')) ? ch
		                                                                    : '_';
	}
	buf[off < cap ? off : cap - 1] = '\0';
}

void
install_details_phase(struct err *e, const char *phase)
{
	err_detail_str(e, "phase", phase);
}

const char *
install_phase_name(enum install_phase p)
{
	static const char *const names[INSTALL_PH_N] = {
	    "probe",    "download+digest", "extract",      "place",        "npm",
	    "requires", "verify.argv",     "tree listing", "publish/sync",
	};
	return (unsigned)p < INSTALL_PH_N ? names[p] : "?";
}

const char *
install_cpu_name(enum install_cpu p)
{
	static const char *const names[INSTALL_CPU_N] = {
	    "receive", "digests", "download write", "decompress", "tree write",
	};
	return (unsigned)p < INSTALL_CPU_N ? names[p] : "?";
}

int
install_requires_join(struct install_env *c, int64_t *wait_us, struct err *e)
{
	struct install_reqs *q = c->reqs;
	int64_t t0 = clock_us();

	if (q == NULL)
		return 0;
	if (!q->counted) {
		pthread_mutex_lock(&q->mu);
		while (!q->ready)
			pthread_cond_wait(&q->cv, &q->mu);
		pthread_mutex_unlock(&q->mu);
		if (wait_us != NULL)
			*wait_us = clock_us() - t0;
		q->counted = 1;
		install_env_add_counts(c, &q->sub);
	}
	if (q->rc < 0) {
		if (e != NULL)
			err_copy(e, &q->e);
		return -1;
	}
	return 0;
}

void
install_call_begin(struct install_env *c, const struct install_req *rq)
{
	c->building = (rq->flags & INSTALL_F_BUILD) != 0;
	c->force = (rq->flags & INSTALL_F_FORCE) != 0;
	c->obs = rq->obs;
	c->principal = rq->principal;
	c->op = rq->op;
	memset(&c->n, 0, sizeof(c->n));
}

void
install_call_end(struct install_env *c, struct install_counts *n)
{
	if (n != NULL) {
		n->downloads += c->n.downloads;
		n->installs += c->n.installs;
		n->bytes_downloaded += c->n.bytes_downloaded;
	}
	c->building = c->force = 0;
	c->obs = NULL;
	c->principal = c->op = NULL;
	c->probe_us = 0;
	memset(&c->n, 0, sizeof(c->n));
}

void
install_env_add_counts(struct install_env *dst, const struct install_env *src)
{
	dst->n.downloads += src->n.downloads;
	dst->n.bytes_downloaded += src->n.bytes_downloaded;
	dst->n.installs += src->n.installs;
}

/* A partial download (.tmp-<16 hex>, core/pkg/cache.c's) with bytes in it
 * whose writer is gone: its writer holds a lock on it from the start, so a
 * lock taken here means the process died (Ctrl-C, kill). An empty one may
 * be a writer's that has not locked it yet: left to the age rule. */
static int
dead_download(int dfd, const char *name, const struct stat *st)
{
	int fd, dead;
	size_t i;

	if (!S_ISREG(st->st_mode) || st->st_size == 0 || strlen(name) != 21 || strncmp(name, ".tmp-", 5) != 0)
		return 0;
	for (i = 5; i < 21; i++)
		if (!isxdigit((unsigned char)name[i]))
			return 0;
	if ((fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return 0;
	dead = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	return dead;
}

/* Remove what crashed installers left: staging directories and partial
 * downloads older than INSTALL_STAGING_MAX_AGE, and at once a partial
 * download whose writer died. */
int
install_tmp_stale(int dfd, const char *name, const struct stat *st, time_t now)
{
	return now - st->st_mtime > INSTALL_STAGING_MAX_AGE || dead_download(dfd, name, st);
}

void
install_collect_stale(const char *dir, const char *prefix)
{
	char **names = NULL;
	struct stat st;
	time_t t = time(NULL);
	struct err e = {0};
	size_t i, n = 0;
	int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (d < 0 || fs_dir_names(d, dir, "io.error", &names, &n, &e) != 0)
		n = 0;
	for (i = 0; i < n; i++) {
		if (prefix != NULL && strncmp(names[i], prefix, strlen(prefix)) != 0)
			continue;
		if (fstatat(d, names[i], &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (install_tmp_stale(d, names[i], &st, t))
			fs_rm_treeat(d, names[i], &e);
	}
	free(names);
	if (d >= 0)
		close(d);
}

int
install_cache_key(const struct install_env *c, char *out, size_t cap)
{
	char d[PATH_MAX];

	out[0] = '\0';
	if (tools_state_dir(c->cfg, d, sizeof(d)) < 0 || fs_path_join(out, cap, d, CACHE_KEY_FILE, NULL) < 0)
		return -1;
	return 0;
}
