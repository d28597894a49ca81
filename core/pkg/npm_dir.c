/*
 * The staged node_modules tree's directories (npm_int.h): a package's made
 * under the root without following a link, and the root package's bin
 * links.
 */
#include "pkg/npm.h"
#include "pkg/npm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"

/* install.failed in the extract phase (npm.h's errors): -1. */
static int extract_fail(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
extract_fail(struct err *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err_setv(e, "install.failed", fmt, ap);
	va_end(ap);
	err_detail_str(e, "phase", "extract");
	return -1;
}

int
npm_dir_open(int rootfd, const char *rel, struct err *e)
{
	char part[NPMLOCK_PATH_MAX];
	const char *p = rel, *q;
	int fd = dup(rootfd), nfd;
	size_t n;

	if (fd < 0)
		return extract_fail(e, "dup: %s", strerror(errno));
	while (*p) {
		q = strchr(p, '/');
		n = q ? (size_t)(q - p) : strlen(p);
		if (n == 0 || n >= sizeof(part)) {
			close(fd);
			return extract_fail(e, "bad path %s", rel);
		}
		memcpy(part, p, n);
		part[n] = '\0';
		if (mkdirat(fd, part, 0755) != 0 && errno != EEXIST) {
			close(fd);
			return extract_fail(e, "%s: %s", rel, strerror(errno));
		}
		nfd = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (nfd < 0)
			return extract_fail(e, "%s: %s", rel, strerror(errno));
		fd = nfd;
		p = q ? q + 1 : p + n;
	}
	return fd;
}

/* Make fd (a regular file, sb its stat) executable (0755). One that is
 * already is left alone, its ctime too: a chmod moves the ctime even when
 * it changes nothing, and the tree listing takes the digest extraction
 * computed only for a file whose ctime is unchanged
 * (core/install/install_known.c), so a needless chmod has an agent's whole
 * binary read and hashed again. */
static int
make_exec(int fd, const struct stat *sb)
{
	return (sb->st_mode & 07777) == 0755 ? 0 : fchmod(fd, 0755);
}

int
npm_link_bins(const struct npmlock *l, const char *staging, struct err *e)
{
	char pkgdir[4096], bindir[4096], link[4096], target[4096], full[8192];
	struct stat sb;
	size_t i;
	int rootfd, pfd;

	if (l->root == NULL || l->nbins == 0)
		return 0;
	snprintf(pkgdir, sizeof(pkgdir), "%s", l->root->path);
	if (fs_path_join(bindir, sizeof(bindir), staging, "node_modules/.bin", e) < 0)
		return -1;
	rootfd = open(staging, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0)
		return extract_fail(e, "%s: %s", staging, strerror(errno));
	pfd = npm_dir_open(rootfd, pkgdir, e);
	close(rootfd);
	if (pfd < 0)
		return -1;
	if (mkdir(bindir, 0755) != 0 && errno != EEXIST) {
		close(pfd);
		return extract_fail(e, "%s: %s", bindir, strerror(errno));
	}
	for (i = 0; i < l->nbins; i++) {
		const struct npmlock_bin *b = &l->bins[i];
		/* Every component of the target is checked without following
		 * links: extraction drops links, so a link here is foreign. */
		char part[NPMLOCK_PATH_MAX], *q;
		int fd = dup(pfd), nfd;
		snprintf(part, sizeof(part), "%s", b->target);
		q = part;
		for (;;) {
			char *s = strchr(q, '/');
			if (s)
				*s = '\0';
			nfd = openat(fd, q, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (s ? O_DIRECTORY : 0));
			close(fd);
			fd = nfd;
			if (fd < 0 || !s)
				break;
			q = s + 1;
		}
		if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
			if (fd >= 0)
				close(fd);
			close(pfd);
			return extract_fail(e, "bin %s: %s/%s is not a regular file in the package", b->name,
			                    l->root->name, b->target);
		}
		if (make_exec(fd, &sb) != 0) {
			close(fd);
			close(pfd);
			return extract_fail(e, "bin %s: chmod: %s", b->name, strerror(errno));
		}
		close(fd);
		/* node_modules/.bin/<name> -> ../<package>/<target> */
		if ((size_t)snprintf(target, sizeof(target), "../%s/%s",
		                     l->root->path + strlen("node_modules/"), b->target) >= sizeof(target) ||
		    fs_path_join(link, sizeof(link), bindir, b->name, NULL) != 0 ||
		    (size_t)snprintf(full, sizeof(full), "%s.tmp%d", link, (int)getpid()) >= sizeof(full)) {
			close(pfd);
			return extract_fail(e, "bin %s: path too long", b->name);
		}
		unlink(full);
		if (symlink(target, full) != 0 || rename(full, link) != 0) {
			unlink(full);
			close(pfd);
			return extract_fail(e, "bin %s: %s", b->name, strerror(errno));
		}
	}
	close(pfd);
	return 0;
}

int
npm_bin_exec(const char *staging, const char *rel, struct err *e)
{
	char dir[NPMLOCK_PATH_MAX];
	const char *base = strrchr(rel, '/');
	struct stat sb;
	int rootfd, dfd, fd;

	if (base == NULL || (size_t)(base - rel) >= sizeof(dir))
		return extract_fail(e, "bin %s: not inside a package", rel);
	memcpy(dir, rel, (size_t)(base - rel));
	dir[base - rel] = '\0';
	rootfd = open(staging, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0)
		return extract_fail(e, "%s: %s", staging, strerror(errno));
	dfd = npm_dir_open(rootfd, dir, e);
	close(rootfd);
	if (dfd < 0)
		return -1;
	fd = openat(dfd, base + 1, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || make_exec(fd, &sb) != 0) {
		if (fd >= 0)
			close(fd);
		return extract_fail(e, "bin %s: not a regular file in the tree", rel);
	}
	close(fd);
	return 0;
}
