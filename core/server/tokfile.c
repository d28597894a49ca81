/*
 * The token file and its watch thread (tokfile.h).
 */
#include "server/tokfile.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/digest.h"

/* Changes in a watched directory that can change what the files hold. A
 * write in place wakes on its close, not on every write(2). */
#define TOKFILE_EVENTS                                                                                       \
	(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB | IN_DELETE_SELF | \
	 IN_MOVE_SELF | IN_ONLYDIR)

static const char *const why[] = {
    "is missing",
    "is empty",
    "does not hold a token (over 512 bytes, or a byte outside visible ASCII)",
    "was written in another sandbox (server.sandbox_id_file changed since); write it again",
    "",
};

/* path's content, white space around it trimmed, into buf (cap bytes, the
 * last for NUL): its length, or -1 when it cannot be read as a regular
 * file; -2 when it is longer than cap - 2. sb receives its status. */
static ssize_t
read_small(const char *path, char *buf, size_t cap, struct stat *sb)
{
	size_t n = 0, i = 0;
	ssize_t k;
	int fd;

	buf[0] = '\0';
	/* non-blocking: a FIFO put there must not stop the watch */
	if (path[0] == '\0' || (fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
		return -1;
	if (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode)) {
		close(fd);
		return -1;
	}
	while (n < cap - 1 && ((k = read(fd, buf + n, cap - 1 - n)) > 0 || (k < 0 && errno == EINTR)))
		n += k > 0 ? (size_t)k : 0;
	close(fd);
	while (n > 0 && strchr(" \t\r\n", buf[n - 1]) != NULL)
		n--;
	while (i < n && strchr(" \t\r\n", buf[i]) != NULL)
		i++;
	memmove(buf, buf + i, n - i);
	n -= i;
	buf[n] = '\0';
	return n > cap - 2 ? -2 : (ssize_t)n;
}

static enum tokfile_state
classify(const char *tok, ssize_t n)
{
	ssize_t i;

	if (n == -1)
		return TOKFILE_MISSING;
	if (n == 0)
		return TOKFILE_EMPTY;
	for (i = 0; i < n; i++)
		if ((unsigned char)tok[i] <= 0x20 || (unsigned char)tok[i] >= 0x7f)
			return TOKFILE_INVALID;
	return n < 0 ? TOKFILE_INVALID : TOKFILE_OK;
}

static void
check_once(struct tokfile *t)
{
	char tok[TOKFILE_TOKEN_MAX + 2], id[TOKFILE_ID_MAX];
	struct stat sb, ib;
	enum tokfile_state st;
	struct digest d;
	ssize_t n;
	int same;

	if (read_small(t->id_path, id, sizeof(id), &ib) < 0)
		id[0] = '\0';
	memset(&sb, 0, sizeof(sb));
	n = read_small(t->path, tok, sizeof(tok), &sb);
	st = classify(tok, n);
	if (st == TOKFILE_OK)
		digest_buf(DIGEST_SHA256, tok, (size_t)n, &d);
	explicit_bzero(tok, sizeof(tok));
	pthread_mutex_lock(&t->mu);
	if (st != TOKFILE_OK) {
		t->state = st;
		explicit_bzero(t->digest, sizeof(t->digest));
		pthread_mutex_unlock(&t->mu);
		return;
	}
	/* The same bytes in the same unchanged file: any write since (ctime
	 * moves on every write, rename and chmod) counts as written again. */
	same = (t->state == TOKFILE_OK || t->state == TOKFILE_MOVED) && ct_equal(d.v, t->digest, 32) &&
	       sb.st_dev == t->dev && sb.st_ino == t->ino && sb.st_size == t->size &&
	       memcmp(&sb.st_mtim, &t->mtime, sizeof(t->mtime)) == 0 &&
	       memcmp(&sb.st_ctim, &t->ctime, sizeof(t->ctime)) == 0;
	if (!same) {
		t->state = TOKFILE_OK;
		memcpy(t->digest, d.v, 32);
		snprintf(t->id, sizeof(t->id), "%s", id);
		t->dev = sb.st_dev;
		t->ino = sb.st_ino;
		t->size = sb.st_size;
		t->mtime = sb.st_mtim;
		t->ctime = sb.st_ctim;
	} else if (id[0] != '\0' && strcmp(id, t->id) != 0) {
		t->state = TOKFILE_MOVED;
	}
	pthread_mutex_unlock(&t->mu);
}

void
tokfile_check(struct tokfile *t)
{
	pthread_mutex_lock(&t->cmu);
	check_once(t);
	pthread_mutex_unlock(&t->cmu);
}

/* Watch the directory of path (its own when it names none); 0 when the
 * watch is in place (adding it again is a no-op), -1 otherwise. */
static int
watch_dir(int ifd, const char *path)
{
	char dir[sizeof(((struct tokfile *)0)->path)];
	char *slash;

	if (path[0] == '\0')
		return 0;
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else
		slash[slash == dir] = '\0';
	return inotify_add_watch(ifd, dir, TOKFILE_EVENTS) < 0 ? -1 : 0;
}

static void *
watch_main(void *arg)
{
	struct tokfile *t = arg;
	char ev[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct pollfd p;
	int ok;

	for (;;) {
		ok = t->ifd >= 0 && watch_dir(t->ifd, t->path) == 0 && watch_dir(t->ifd, t->id_path) == 0;
		p.fd = t->ifd;
		p.events = POLLIN;
		if (poll(&p, t->ifd >= 0 ? 1 : 0, ok ? TOKFILE_POLL_MS : TOKFILE_POLL_MS / 4) > 0)
			while (read(t->ifd, ev, sizeof(ev)) > 0)
				;
		tokfile_check(t);
	}
	return NULL;
}

int
tokfile_start(struct tokfile *t, const char *path, const char *id_path, struct err *e)
{
	pthread_attr_t at;
	sigset_t all, old;
	pthread_t th;
	int rc = -1;

	memset(t, 0, sizeof(*t));
	if ((size_t)snprintf(t->path, sizeof(t->path), "%s", path) >= sizeof(t->path) ||
	    (size_t)snprintf(t->id_path, sizeof(t->id_path), "%s", id_path ? id_path : "") >=
	        sizeof(t->id_path))
		return err_set(e, "config.invalid", "server.token_file: path too long");
	pthread_mutex_init(&t->mu, NULL);
	pthread_mutex_init(&t->cmu, NULL);
	t->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	tokfile_check(t);
	/* every signal blocked: SIGTERM and SIGHUP are the other threads' */
	sigfillset(&all);
	if (pthread_attr_init(&at) == 0) {
		pthread_attr_setstacksize(&at, 64 * 1024);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		rc = pthread_create(&th, &at, watch_main, t);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&at);
	}
	if (rc != 0)
		return err_set(e, "internal", "cannot start the token file's watch thread");
	pthread_detach(th);
	return 0;
}

int
tokfile_ready(struct tokfile *t, struct err *e)
{
	enum tokfile_state st;

	pthread_mutex_lock(&t->mu);
	st = t->state;
	pthread_mutex_unlock(&t->mu);
	if (st == TOKFILE_OK || e == NULL)
		return st == TOKFILE_OK ? 0 : -1;
	err_set(e, "server.not_initialised", "the token file %s %s", t->path, why[st]);
	err_detail_str(e, "token_file", t->path);
	return -1;
}

int
tokfile_match(struct tokfile *t, const unsigned char digest[32])
{
	int ok;

	pthread_mutex_lock(&t->mu);
	ok = t->state == TOKFILE_OK && ct_equal(digest, t->digest, 32);
	pthread_mutex_unlock(&t->mu);
	return ok;
}
