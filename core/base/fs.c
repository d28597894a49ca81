/*
 * Filesystem helpers (see fs.h); the tree walk and removal are
 * fs_walk.c's, the directories secrets live in fs_dir.c's.
 */
#include "base/fs.h"

#include <bearssl_hash.h>
#include "base/buf.h"
#include "base/digest.h"
#include "base/sha256x86.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Content is hashed in blocks of this size: large enough for few read(2)s,
 * small enough for the 8 MiB peak-memory goal. */
#define FS_READ_BLOCK (64u << 10)

static int
io_err(struct err *e, const char *what, const char *path)
{
	return err_sys(e, "io.error", errno, "%s %s: %s", what, path, strerror(errno));
}

int
fs_path_join(char *buf, size_t cap, const char *dir, const char *name, struct err *e)
{
	size_t dl = strlen(dir), nl = strlen(name);

	if (cap == 0 || dl >= cap || nl >= cap - dl - 1) {
		if (e != NULL)
			err_set(e, "io.error", "path too long: %s/%s", dir, name);
		if (cap > 0)
			buf[0] = '\0';
		return -1;
	}
	memmove(buf, dir, dl);
	buf[dl] = '/';
	memcpy(buf + dl + 1, name, nl + 1);
	return 0;
}

int
fs_dirname(const char *path, char *buf, size_t cap)
{
	const char *s = strrchr(path, '/');
	size_t n;

	if (s == NULL) {
		if (cap < 2)
			return -1;
		memcpy(buf, ".", 2);
		return 0;
	}
	while (s > path && s[-1] == '/')
		s--;
	n = s == path ? 1 : (size_t)(s - path);
	if (n + 1 > cap)
		return -1;
	memcpy(buf, path, n);
	buf[n] = '\0';
	return 0;
}

int
fs_mkdir_p(const char *path, mode_t mode, struct err *e)
{
	char buf[PATH_MAX];
	size_t n = strlen(path), i;
	struct stat sb;

	if (n == 0 || n >= sizeof(buf))
		return err_set(e, "io.error", "mkdir: bad path length");
	memcpy(buf, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		if (buf[i - 1] == '/')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, mode) != 0) {
			if (errno != EEXIST)
				return io_err(e, "cannot create directory", buf);
			if (stat(buf, &sb) != 0)
				return io_err(e, "cannot stat", buf);
			if (!S_ISDIR(sb.st_mode)) {
				errno = ENOTDIR;
				return io_err(e, "cannot create directory", buf);
			}
		}
		if (i < n)
			buf[i] = '/';
	}
	return 0;
}

int
fs_fsync_dir(const char *path, struct err *e)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return io_err(e, "cannot open directory", path);
	/* Some filesystems cannot fsync a directory; they also need not. */
	if (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
		io_err(e, "cannot fsync directory", path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int
fs_syncfs(const char *path, struct err *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return io_err(e, "cannot open", path);
	if (syncfs(fd) != 0) {
		io_err(e, "cannot sync the filesystem of", path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

void
fs_writeback_start(int fd)
{
	int er = errno;

	(void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	errno = er;
}

int
fs_writeback_every(int fd, uint64_t *pending, uint64_t n)
{
	*pending += n;
	if (*pending < FS_WRITEBACK_EVERY)
		return 0;
	*pending = 0;
	fs_writeback_start(fd);
	return 1;
}

int
fs_write_all(int fd, const void *buf, size_t n, int64_t off)
{
	const char *p = buf;
	ssize_t w;

	while (n > 0) {
		w = off >= 0 ? pwrite(fd, p, n, (off_t)off) : write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		p += w;
		n -= (size_t)w;
		if (off >= 0)
			off += w;
	}
	return 0;
}

/* A name no other thread or process is using: pid, a process-wide counter
 * and the clock. */
static void
unique_suffix(char *buf, size_t cap)
{
	static unsigned long counter;
	unsigned long c = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(buf, cap, "%ld.%lu.%lx", (long)getpid(), c, (unsigned long)ts.tv_nsec);
}

int
fs_write_atomic(const char *path, const void *buf, size_t n, mode_t mode, struct err *e)
{
	char dir[PATH_MAX];
	const char *name = strrchr(path, '/');
	int dfd, rc;

	if (fs_dirname(path, dir, sizeof(dir)) != 0)
		return err_set(e, "io.error", "path too long: %s", path);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return io_err(e, "cannot open the directory of", path);
	rc = fs_write_atomic_at(dfd, name != NULL ? name + 1 : path, buf, n, mode, path, e);
	close(dfd);
	return rc;
}

/* O_NONBLOCK: open(2) of a FIFO waits for a writer, forever; non-blocking
 * it returns at once and the type check refuses it. On a regular file the
 * flag changes nothing. */
static int
open_regular(const char *path, int follow, struct stat *sb, struct err *e)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));

	if (fd < 0) {
		if (errno == ENOENT)
			return err_set(e, "not_found", "%s does not exist", path);
		if (errno == ELOOP && !follow)
			return err_set(e, "io.error", "%s is a symbolic link, which is not followed here",
			               path);
		return io_err(e, "cannot open", path);
	}
	if (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode)) {
		int fifo = S_ISFIFO(sb->st_mode), dir = S_ISDIR(sb->st_mode);

		close(fd);
		return err_set(e, "io.error", "%s is not a regular file%s", path,
		               fifo  ? " (a FIFO)"
		               : dir ? " (a directory)"
		                     : "");
	}
	return fd;
}

int
fs_open_input(const char *path, struct stat *sb, struct err *e)
{
	return open_regular(path, 1, sb, e);
}

int
fs_open_file(const char *path, struct stat *sb, struct err *e)
{
	return open_regular(path, 0, sb, e);
}

static ssize_t
read_full(int fd, char *buf, size_t n)
{
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		r = read(fd, buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

ssize_t
fs_read_small(const char *path, char *buf, size_t cap, struct err *e)
{
	struct stat sb;
	ssize_t n;
	char extra;
	int fd;

	if (cap == 0)
		return err_set(e, "io.error", "no buffer for %s", path);
	fd = open_regular(path, 0, &sb, e);
	if (fd < 0)
		return -1;
	n = read_full(fd, buf, cap - 1);
	if (n < 0) {
		io_err(e, "cannot read", path);
		close(fd);
		return -1;
	}
	if ((size_t)n == cap - 1 && read_full(fd, &extra, 1) != 0) {
		close(fd);
		return err_sys(e, "io.error", EFBIG, "%s is larger than %zu bytes", path, cap - 1);
	}
	close(fd);
	buf[n] = '\0';
	return n;
}

static int
read_alloc(const char *path, int follow, size_t max, char **out, size_t *len, struct err *e)
{
	struct buf b = BUF_INIT(max);
	struct stat sb;
	size_t step, room;
	ssize_t r;
	unsigned char *w;
	char c;
	int fd;

	*out = NULL;
	*len = 0;
	fd = open_regular(path, follow, &sb, e);
	if (fd < 0)
		return -1;
	if ((uint64_t)sb.st_size > max) {
		close(fd);
		return err_sys(e, "io.error", EFBIG, "%s is larger than %zu bytes", path, max);
	}
	/* The size may change under us: read what it says, then grow while
	 * there is more, never past max (one byte more is refused). */
	step = sb.st_size > 0 ? (size_t)sb.st_size : 4096;
	for (;;) {
		room = max - b.len < step ? max - b.len : step;
		if (room == 0) {
			r = read_full(fd, &c, 1);
			if (r < 0)
				goto rerr;
			if (r > 0) {
				buf_free(&b);
				close(fd);
				return err_sys(e, "io.error", EFBIG, "%s is larger than %zu bytes", path,
				               max);
			}
			break;
		}
		if ((w = buf_room(&b, room)) == NULL) {
			buf_free(&b);
			close(fd);
			return err_set(e, "io.error", "out of memory reading %s", path);
		}
		r = read_full(fd, (char *)w, room);
		if (r < 0)
			goto rerr;
		b.len += (size_t)r;
		if ((size_t)r < room)
			break;
		step = b.len;
	}
	close(fd);
	if (buf_room(&b, 0) == NULL) {
		buf_free(&b);
		return err_set(e, "io.error", "out of memory reading %s", path);
	}
	b.p[b.len] = '\0';
	*out = (char *)b.p;
	*len = b.len;
	return 0;
rerr:
	io_err(e, "cannot read", path);
	buf_free(&b);
	close(fd);
	return -1;
}

int
fs_read_alloc(const char *path, size_t max, char **out, size_t *len, struct err *e)
{
	return read_alloc(path, 0, max, out, len, e);
}

int
fs_read_input(const char *path, size_t max, char **out, size_t *len, struct err *e)
{
	return read_alloc(path, 1, max, out, len, e);
}

int
fs_free_bytes(const char *path, uint64_t *out, struct err *e)
{
	struct statvfs v;

	if (statvfs(path, &v) != 0)
		return io_err(e, "cannot statvfs", path);
	*out = (uint64_t)v.f_bavail * (uint64_t)v.f_frsize;
	return 0;
}

int
fs_write_atomic_at(int dirfd, const char *name, const void *buf, size_t n, mode_t mode, const char *display,
                   struct err *e)
{
	char tmp[NAME_MAX + 1], suf[64];
	int fd;

	unique_suffix(suf, sizeof(suf));
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%s", name, suf) >= sizeof(tmp))
		return err_set(e, "io.error", "name too long: %s", display);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return io_err(e, "cannot create a temporary file for", display);
	if (fs_write_all(fd, buf, n, -1) != 0 || fchmod(fd, mode) != 0 || fsync(fd) != 0) {
		io_err(e, "cannot write", display);
		close(fd);
		unlinkat(dirfd, tmp, 0);
		return -1;
	}
	if (close(fd) != 0 || renameat(dirfd, tmp, dirfd, name) != 0) {
		io_err(e, "cannot rename into", display);
		unlinkat(dirfd, tmp, 0);
		return -1;
	}
	if (fsync(dirfd) != 0)
		return io_err(e, "cannot fsync the directory of", display);
	return 0;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void
unescape(char *s)
{
	char *o = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
		    s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*o++ = *s++;
		}
	}
	*o = '\0';
}

static int
is_prefix_dir(const char *mp, const char *path)
{
	size_t n = strlen(mp);

	if (strcmp(mp, "/") == 0)
		return 1;
	return strncmp(mp, path, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

int
fs_mount_point(const char *path, char *buf, size_t cap)
{
	char real[PATH_MAX], line[4096], *mp, *fld[5], *p, *end, best[4096] = "";
	unsigned maj, min;
	size_t bestlen = 0;
	int best_dev = 0, dev_match, i;
	struct stat sb;
	FILE *f;

	if (cap == 0)
		return -1;
	snprintf(buf, cap, "%s", path);
	if (realpath(path, real) == NULL || stat(real, &sb) != 0)
		return -1;
	f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		/* "ID PARENT MAJOR:MINOR ROOT MOUNT-POINT ..." (proc(5)) */
		for (p = line, i = 0; i < 5 && (fld[i] = strsep(&p, " \n")) != NULL; i++)
			;
		if (i < 5)
			continue;
		maj = (unsigned)strtoul(fld[2], &end, 10);
		if (end == fld[2] || *end != ':')
			continue;
		min = (unsigned)strtoul(end + 1, &end, 10);
		if (*end != '\0')
			continue;
		mp = fld[4];
		unescape(mp);
		if (!is_prefix_dir(mp, real))
			continue;
		dev_match = maj == (unsigned)major(sb.st_dev) && min == (unsigned)minor(sb.st_dev);
		/* The device decides first (a bind mount shares a prefix with
		 * its parent), then the longest mount point. */
		if ((dev_match && !best_dev) || (dev_match == best_dev && strlen(mp) >= bestlen)) {
			snprintf(best, sizeof(best), "%s", mp);
			bestlen = strlen(mp);
			best_dev = dev_match;
		}
	}
	fclose(f);
	if (bestlen == 0)
		return -1;
	snprintf(buf, cap, "%s", best);
	return 0;
}

/* How many times a probe exec may meet ETXTBSY: another thread's fork can
 * hold our write fd for the moment before its own exec closes it. */
#define FS_PROBE_TRIES 5

int
fs_noexec_probe(const char *dir, struct err *e)
{
	char p[PATH_MAX], suf[64], mp[PATH_MAX];
	char *argv[2], *envp[1] = {NULL};
	int fd, rc, tries, status;
	pid_t pid;

	unique_suffix(suf, sizeof(suf));
	if ((size_t)snprintf(p, sizeof(p), "%s/.exec-probe.%s", dir, suf) >= sizeof(p))
		return err_set(e, "io.error", "path too long: %s", dir);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700);
	if (fd < 0)
		return io_err(e, "cannot write a probe file in", dir);
	/* One byte that is neither "#!" nor ELF: exec can only fail, with
	 * ENOEXEC where exec is allowed and EACCES where it is not. */
	if (fs_write_all(fd, "\n", 1, -1) != 0 || fchmod(fd, 0700) != 0) {
		io_err(e, "cannot write a probe file in", dir);
		close(fd);
		unlink(p);
		return -1;
	}
	close(fd);
	argv[0] = p;
	argv[1] = NULL;
	for (tries = 0;; tries++) {
		rc = posix_spawn(&pid, p, NULL, NULL, argv, envp);
		if (rc != ETXTBSY || tries + 1 >= FS_PROBE_TRIES)
			break;
		usleep(10000);
	}
	if (rc == 0)
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	unlink(p);
	if (rc == 0 || rc == ENOEXEC)
		return 0;
	if (rc == EACCES || rc == EPERM) {
		fs_mount_point(dir, mp, sizeof(mp));
		return err_set(e, "install.noexec",
		               "files in %s cannot be executed (mount %s is noexec or exec is denied)", dir,
		               mp);
	}
	errno = rc;
	return io_err(e, "cannot run the exec probe in", dir);
}

void
fs_rand_hex(char *out, int nbytes)
{
	unsigned char b[16];
	int i;

	if (nbytes > 16)
		nbytes = 16;
	if (getrandom(b, (size_t)nbytes, 0) != (ssize_t)nbytes) {
		static unsigned long n;
		struct timespec ts;
		unsigned long x;

		clock_gettime(CLOCK_REALTIME, &ts);
		x = (unsigned long)getpid() ^ (unsigned long)ts.tv_nsec ^ ((unsigned long)ts.tv_sec << 20) ^
		    (__atomic_add_fetch(&n, 1, __ATOMIC_RELAXED) * 0x9e3779b97f4a7c15ul);
		for (i = 0; i < nbytes; i++)
			b[i] = (unsigned char)(x >> ((i % 8) * 8)) ^ (unsigned char)(i * 0x5b);
	}
	hex_encode(b, (size_t)nbytes, out);
}

/* FS_IOC_GETFLAGS, FS_IOC_SETFLAGS and FS_TOPDIR_FL of <linux/fs.h> (not
 * in musl's headers); the flags argument is an int whatever the macro says. */
#define ABX_FS_IOC_GETFLAGS 0x80086601UL
#define ABX_FS_IOC_SETFLAGS 0x40086602UL
#define ABX_FS_TOPDIR_FL 0x00020000

void
fs_mark_topdir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), fl = 0;

	if (fd < 0)
		return;
	if (ioctl(fd, ABX_FS_IOC_GETFLAGS, &fl) == 0 && !(fl & ABX_FS_TOPDIR_FL)) {
		fl |= ABX_FS_TOPDIR_FL;
		(void)ioctl(fd, ABX_FS_IOC_SETFLAGS, &fl);
	}
	close(fd);
}
