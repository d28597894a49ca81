/*
 * Directories a process keeps secrets and records in (state, tools): is one
 * safe (fs_dir_safe), and opening one without trusting a link another user
 * could have made (fs_dir_open_safe, fs_subdir_open_safe).
 */
#include "base/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int
io_err(struct err *e, const char *what, const char *path)
{
	return err_sys(e, "io.error", errno, "%s %s: %s", what, path, strerror(errno));
}

int
fs_dir_safe(const char *path, struct err *e)
{
	struct stat sb;

	if (stat(path, &sb) != 0) {
		if (errno == ENOENT)
			return err_set(e, "not_found", "%s does not exist", path);
		return io_err(e, "cannot stat", path);
	}
	if (!S_ISDIR(sb.st_mode))
		return err_set(e, "config.state_dir_unsafe", "%s is not a directory", path);
	if (sb.st_uid != geteuid() && sb.st_uid != 0)
		return err_set(e, "config.state_dir_unsafe", "%s is owned by uid %u, not by uid %u or root",
		               path, (unsigned)sb.st_uid, (unsigned)geteuid());
	if (sb.st_mode & 022)
		return err_set(e, "config.state_dir_unsafe", "%s has mode %04o: group- or world-writable",
		               path, (unsigned)(sb.st_mode & 07777));
	return 0;
}

/* Only euid or root can write dir fd: a link in it was made by one of us. */
static int
dir_trusted(int fd)
{
	struct stat sb;

	return fstat(fd, &sb) == 0 && (sb.st_uid == geteuid() || sb.st_uid == 0) && (sb.st_mode & 022) == 0;
}

/* fd is a directory owned by euid and not group- or world-writable. */
static int
dir_ours(int fd, const char *display, struct err *e)
{
	struct stat sb;

	if (fstat(fd, &sb) != 0)
		return io_err(e, "cannot stat", display);
	if (!S_ISDIR(sb.st_mode))
		return err_set(e, "config.state_dir_unsafe", "%s is not a directory", display);
	if (sb.st_uid != geteuid())
		return err_set(e, "config.state_dir_unsafe", "%s is owned by uid %u, not by uid %u", display,
		               (unsigned)sb.st_uid, (unsigned)geteuid());
	if (sb.st_mode & 022)
		return err_set(e, "config.state_dir_unsafe", "%s has mode %04o: group- or world-writable",
		               display, (unsigned)(sb.st_mode & 07777));
	return 0;
}

/* Open component name under parent fd (see fs_dir_open_safe); path is the
 * whole path up to and with name, for messages. */
static int
open_component(int fd, const char *name, int create, const char *path, struct err *e)
{
	struct stat sb;
	int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC, nfd;

	if (!dir_trusted(fd))
		flags |= O_NOFOLLOW;
	nfd = openat(fd, name, flags);
	if (nfd < 0 && errno == ENOENT && create) {
		if (mkdirat(fd, name, 0700) != 0 && errno != EEXIST)
			return io_err(e, "cannot create directory", path);
		nfd = openat(fd, name, flags | O_NOFOLLOW);
	}
	if (nfd >= 0)
		return nfd;
	if (errno == ENOENT)
		return err_set(e, "not_found", "%s does not exist", path);
	if ((errno == ELOOP || errno == ENOTDIR) && fstatat(fd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(sb.st_mode))
		return err_set(e, "config.state_dir_unsafe",
		               "%s is a symbolic link in a directory that uid %u owns or others can "
		               "write: whoever made it can point it anywhere; give the real directory",
		               path, fstat(fd, &sb) == 0 ? (unsigned)sb.st_uid : 0u);
	if (errno == ENOTDIR)
		return err_set(e, "config.state_dir_unsafe", "%s is not a directory", path);
	return io_err(e, "cannot open", path);
}

int
fs_dir_open_safe(const char *path, int create, struct err *e)
{
	char buf[PATH_MAX];
	size_t n = strlen(path), i, start;
	int fd, nfd;

	if (n == 0 || path[0] != '/' || n >= sizeof(buf))
		return err_set(e, "io.error", "%s: not an absolute path of a usable length", path);
	memcpy(buf, path, n + 1);
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return io_err(e, "cannot open", "/");
	for (start = 1; start <= n; start = i + 1) {
		for (i = start; i < n && buf[i] != '/'; i++)
			;
		if (i == start)
			continue;
		buf[i] = '\0';
		/* buf is the path up to this component, for messages */
		nfd = open_component(fd, buf + start, create, buf, e);
		close(fd);
		if (nfd < 0)
			return -1;
		fd = nfd;
		if (i < n)
			buf[i] = '/';
	}
	if (dir_ours(fd, path, e) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int
fs_subdir_open_safe(int dirfd, const char *name, int create, const char *display, struct err *e)
{
	int fd;

	if (create && mkdirat(dirfd, name, 0700) != 0 && errno != EEXIST)
		return io_err(e, "cannot create directory", display);
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return err_set(e, "not_found", "%s does not exist", display);
		if (errno == ELOOP || errno == ENOTDIR)
			return err_set(e, "config.state_dir_unsafe",
			               "%s is not a directory (a symbolic link?)", display);
		return io_err(e, "cannot open", display);
	}
	if (dir_ours(fd, display, e) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}
