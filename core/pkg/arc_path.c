/*
 * The extractor's path rules (arc_int.h): entry names normalised, link
 * targets kept inside the tree, directories opened one component at a time
 * without following links, and the kept fds of the previous entry's path.
 */
#include "pkg/arc_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The process umask, read once from /proc/self/status (umask(2) cannot be
 * read without being set, which races with other threads); -1 when unknown.
 * When a mode survives the umask, files and directories are created with
 * their final mode and need no fchmod. */
static int arc_umask_val = -1;
static pthread_once_t arc_umask_once = PTHREAD_ONCE_INIT;

static void
arc_umask_read(void)
{
	char buf[2048], *p;
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	p = strstr(buf, "\nUmask:");
	if (p != NULL)
		arc_umask_val = (int)(strtol(p + 7, NULL, 8) & 0777);
}

/* 1 when creating with mode gives exactly mode. */
int
arc_mode_survives(int mode)
{
	pthread_once(&arc_umask_once, arc_umask_read);
	return arc_umask_val >= 0 && (mode & arc_umask_val) == 0;
}

/* A hostile name may hold control bytes or be huge: show a printable,
 * bounded copy. */
static const char *
show(const char *s, char *buf, size_t cap)
{
	size_t i;

	if (s == NULL)
		s = "";
	for (i = 0; s[i] != '\0' && i + 4 < cap && i < ARC_SHOW_MAX; i++)
		buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	if (s[i] != '\0') {
		memcpy(buf + i, "...", 3);
		i += 3;
	}
	buf[i] = '\0';
	return buf;
}

/* The one way extraction fails: install.failed, phase extract, naming the
 * entry and the rule. */
static int
refusev(struct err *e, const char *cur, const char *fmt, va_list ap)
{
	char rule[200], name[ARC_SHOW_MAX + 8];

	err_fmtv(rule, sizeof(rule), fmt, ap);
	if (cur != NULL)
		err_set(e, "install.failed", "extract: entry '%s': %s", show(cur, name, sizeof(name)), rule);
	else
		err_set(e, "install.failed", "extract: %s", rule);
	err_detail_str(e, "phase", "extract");
	return -1;
}

int
arc_refuse(struct xs *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	refusev(x->e, x->cur, fmt, ap);
	va_end(ap);
	return -1;
}

int
arc_refuse_sys(struct xs *x, int errnum, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	refusev(x->e, x->cur, fmt, ap);
	va_end(ap);
	if (x->e != NULL)
		x->e->sys = errnum;
	return -1;
}

int
arc_refuse_at(struct err *e, const char *cur, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	refusev(e, cur, fmt, ap);
	va_end(ap);
	return -1;
}

/*
 * Normalise an entry or hard-link name into out: refuse absolute names,
 * "..", backslashes and over-long names; drop "." and empty components, then
 * the first `strip` components. Returns the number of components kept
 * (0: nothing left, the entry is skipped), or -1 after arc_refuse().
 */
int
arc_norm_name(struct xs *x, const char *raw, int strip, char *out, size_t cap, const char *what)
{
	const char *p = raw, *q;
	size_t len, n = 0, clen;
	int comps = 0, seen = 0;

	if (raw == NULL || raw[0] == '\0')
		return arc_refuse(x, "%s is empty", what);
	len = strlen(raw);
	if (len > x->max_path || len >= cap)
		return arc_refuse(x, "%s is longer than %zu bytes", what, x->max_path);
	if ((ARC_SAFE_FLAGS & ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS) && raw[0] == '/')
		return arc_refuse(x, "%s is an absolute path", what);
	/* A backslash is a separator to Windows tools and to some zip
	 * writers; a name holding one means something else to someone. */
	if (strchr(raw, '\\') != NULL)
		return arc_refuse(x, "%s contains a backslash", what);
	while (*p != '\0') {
		q = strchr(p, '/');
		clen = q ? (size_t)(q - p) : strlen(p);
		if (clen == 0 || (clen == 1 && p[0] == '.')) {
			/* dropped */
		} else if ((ARC_SAFE_FLAGS & ARCHIVE_EXTRACT_SECURE_NODOTDOT) && clen == 2 && p[0] == '.' &&
		           p[1] == '.') {
			return arc_refuse(x, "%s has a '..' component", what);
		} else if (clen > ARC_NAME_MAX) {
			return arc_refuse(x, "%s has a component longer than %d bytes", what, ARC_NAME_MAX);
		} else if (seen++ >= strip) {
			if (comps >= ARC_MAX_DEPTH)
				return arc_refuse(x, "%s has more than %d components", what, ARC_MAX_DEPTH);
			if (n > 0)
				out[n++] = '/';
			memcpy(out + n, p, clen);
			n += clen;
			comps++;
		}
		p += clen;
		if (*p == '/')
			p++;
	}
	out[n] = '\0';
	return comps;
}

/*
 * A symlink at `name` (depth = its number of components) may point to
 * `target` only if, resolved from the link's directory, it stays inside the
 * root: not absolute, ".." only before any name and at most depth-1 of them.
 * Leading ".." climb real directories (every parent was opened O_NOFOLLOW),
 * and each later component is a directory or a symlink checked by this same
 * rule, so the whole resolution stays inside. A ".." after a name could
 * climb out of a symlinked directory, which lexical checking cannot see.
 */
int
arc_check_link_target(struct xs *x, const char *target, int depth)
{
	const char *p = target, *q;
	size_t clen;
	int ups = 0, names = 0;

	if (target == NULL || target[0] == '\0')
		return arc_refuse(x, "symlink with an empty target");
	if (strlen(target) > x->max_path)
		return arc_refuse(x, "symlink target longer than %zu bytes", x->max_path);
	if (target[0] == '/')
		return arc_refuse(x, "symlink target is absolute");
	while (*p != '\0') {
		q = strchr(p, '/');
		clen = q ? (size_t)(q - p) : strlen(p);
		if (clen == 0 || (clen == 1 && p[0] == '.')) {
			/* no effect */
		} else if (clen == 2 && p[0] == '.' && p[1] == '.') {
			if (names > 0)
				return arc_refuse(x, "symlink target has '..' after a name");
			if (++ups > depth - 1)
				return arc_refuse(x, "symlink target leaves the extraction root");
		} else {
			names++;
		}
		p += clen;
		if (*p == '/')
			p++;
	}
	return 0;
}

/* Split "a/b/c" into dir "a/b" (in place: the slash becomes NUL) and leaf. */
const char *
arc_split_leaf(char *name, const char **dir)
{
	char *s = strrchr(name, '/');

	if (s == NULL) {
		*dir = "";
		return name;
	}
	*s = '\0';
	*dir = name;
	return s + 1;
}

static int
why_not_dir(struct xs *x, int dfd, const char *comp)
{
	struct stat sb;

	if (fstatat(dfd, comp, &sb, AT_SYMLINK_NOFOLLOW) != 0)
		return arc_refuse_sys(x, errno, "cannot open parent '%s': %s", comp, strerror(errno));
	if (S_ISLNK(sb.st_mode))
		return arc_refuse(x, "path passes through the symlink '%s'", comp);
	return arc_refuse(x, "path passes through the non-directory '%s'", comp);
}

/*
 * Open the directory dir (relative to the root, "" = the root) without
 * following any symlink, creating missing components (mode 0755) when
 * create is set. Returns a new fd, or -1 after arc_refuse().
 */
/*
 * Open the directory comp (one component) in fd without following a
 * symlink, creating it (mode 0755) when missing and create is set. Returns
 * a new fd, or -1 after arc_refuse(). fd is not closed.
 */
static int
open_comp(struct xs *x, int fd, const char *comp, int create)
{
	int nfd;

	nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (nfd < 0 && errno == ENOENT && create) {
		int direct = arc_mode_survives(0755);

		if (mkdirat(fd, comp, direct ? 0755 : 0700) != 0 && errno != EEXIST)
			return arc_refuse_sys(x, errno, "cannot create directory '%s': %s", comp,
			                      strerror(errno));
		nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd >= 0 && !direct && fchmod(nfd, 0755) != 0) {
			arc_refuse_sys(x, errno, "cannot chmod directory '%s': %s", comp, strerror(errno));
			close(nfd);
			return -1;
		}
		if (nfd >= 0)
			x->st->entries++;
	}
	if (nfd < 0) {
		if (errno == ENOENT)
			arc_refuse(x, "'%s' does not exist", comp);
		else if (errno == ELOOP || errno == ENOTDIR)
			why_not_dir(x, fd, comp);
		else
			arc_refuse_sys(x, errno, "cannot open '%s': %s", comp, strerror(errno));
		return -1;
	}
	return nfd;
}

/* The next component of *p into comp; advances *p past it and its slash. */
static void
next_comp(const char **p, char comp[ARC_NAME_MAX + 1])
{
	const char *q = strchr(*p, '/');
	size_t clen = q ? (size_t)(q - *p) : strlen(*p);

	memcpy(comp, *p, clen);
	comp[clen] = '\0';
	*p += clen + (q != NULL);
}

int
arc_walk(struct xs *x, const char *dir, int create)
{
	char comp[ARC_NAME_MAX + 1];
	const char *p = dir;
	int fd, nfd;

	fd = openat(x->root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return arc_refuse_sys(x, errno, "cannot open the extraction root: %s", strerror(errno));
	while (*p != '\0') {
		next_comp(&p, comp);
		nfd = open_comp(x, fd, comp, create);
		close(fd);
		if (nfd < 0)
			return -1;
		fd = nfd;
	}
	return fd;
}

void
arc_stack_pop(struct xs *x, int keep)
{
	while (x->sn > keep)
		close(x->sfd[--x->sn]);
}

/* The directory fd for dir (created as needed), from the stack of open
 * directories of the previous entry's path, opening only the levels that
 * differ; a directory deeper than the stack comes from the one-entry cache
 * or a fresh walk. The fd belongs to the cache: do not close it. */
int
arc_parent_fd(struct xs *x, const char *dir)
{
	char comp[ARC_NAME_MAX + 1];
	size_t n = strlen(dir);
	const char *p;
	int k = 0, depth = 0, fd;

	if (*dir != '\0') {
		depth = 1;
		for (p = dir; *p; p++)
			depth += *p == '/';
	}
	if (depth > ARC_FD_STACK) {
		if (x->cfd >= 0 && strcmp(x->cdir, dir) == 0)
			return x->cfd;
		fd = arc_walk(x, dir, 1);
		if (fd < 0)
			return -1;
		if (x->cfd >= 0)
			close(x->cfd);
		x->cfd = fd;
		memcpy(x->cdir, dir, n + 1);
		return fd;
	}
	/* The kept levels that are a prefix of dir, component-wise. */
	while (k < x->sn && k < depth) {
		size_t e = x->send[k];
		if (e > n || memcmp(dir, x->spath, e) != 0 || (dir[e] != '/' && dir[e] != '\0'))
			break;
		k++;
	}
	arc_stack_pop(x, k);
	p = k > 0 && k < depth ? dir + x->send[k - 1] + 1 : dir;
	while (x->sn < depth) {
		const char *start = p;
		next_comp(&p, comp);
		fd = open_comp(x, x->sn ? x->sfd[x->sn - 1] : x->root, comp, 1);
		if (fd < 0)
			return -1;
		x->sfd[x->sn] = fd;
		x->send[x->sn] = (size_t)(start - dir) + strlen(comp);
		x->sn++;
	}
	memcpy(x->spath, dir, n + 1);
	return x->sn ? x->sfd[x->sn - 1] : x->root;
}
