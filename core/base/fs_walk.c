/*
 * The one tree walk (fs_walk, fs_dir_names) and removal through it
 * (fs_rm_tree): openat()/fstatat()/unlinkat() and O_NOFOLLOW relative to
 * directory descriptors, so a symlink planted in the tree is never
 * followed and a concurrent rename of a parent cannot redirect the walk.
 */
#include "base/fs.h"

#include "base/buf.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int
io_err(struct err *e, const char *what, const char *path)
{
	return err_sys(e, "io.error", errno, "%s %s: %s", what, path, strerror(errno));
}

/* chmod u+rwx a directory we cannot open or empty, without following a
 * symlink: through an O_PATH fd and /proc (fchmod() refuses O_PATH fds). */
static int
make_accessible(int dirfd, const char *name)
{
	char proc[64];
	struct stat sb;
	int fd, r;

	fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &sb) != 0) {
		close(fd);
		return -1;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	r = chmod(proc, (sb.st_mode & 07777) | 0700);
	close(fd);
	return r;
}

/* ---- the tree walk ---- */

struct fw {
	char rel[PATH_MAX]; /* the entry's path below the root */
	size_t len;
	int flags;
	const char *code; /* for a tree over the limits */
	fs_visit_fn visit;
	void *arg;
	struct err *e;
};

static int
cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
fs_dir_names(int dfd, const char *display, const char *limit_code, char ***names, size_t *count,
             struct err *e)
{
	struct vec offs = VEC_INIT(sizeof(size_t), FS_MAX_DIR_ENTRIES);
	struct buf s = BUF_INIT((size_t)FS_MAX_DIR_ENTRIES * (NAME_MAX + 2));
	struct dirent *de;
	char **v;
	size_t *o, i;
	DIR *d;
	int fd, rc = -1;

	*names = NULL;
	*count = 0;
	/* a new open, not a dup: reading leaves dfd's offset alone and
	 * starts at the beginning whatever was read through dfd */
	fd = openat(dfd, dfd == AT_FDCWD ? display : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return io_err(e, "cannot read directory", display);
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (vec_full(&offs)) {
			err_set(e, limit_code, "%s: more than %d entries in one directory (the entry cap)",
			        display, FS_MAX_DIR_ENTRIES);
			goto out;
		}
		if ((o = vec_push(&offs)) == NULL)
			goto oom;
		/* each name follows its d_type byte (the walk's FS_WALK_STATLESS) */
		*o = s.len + 1;
		if (buf_put(&s, &de->d_type, 1) != 0 || buf_put(&s, de->d_name, strlen(de->d_name) + 1) != 0)
			goto oom;
	}
	if (errno != 0) {
		io_err(e, "cannot read directory", display);
		goto out;
	}
	o = offs.p;
	if ((v = malloc(offs.n * sizeof(char *) + s.len + 1)) == NULL)
		goto oom;
	if (s.len > 0)
		memcpy(v + offs.n, s.p, s.len);
	for (i = 0; i < offs.n; i++)
		v[i] = (char *)(v + offs.n) + o[i];
	qsort(v, offs.n, sizeof(char *), cmp_names);
	*names = v;
	*count = offs.n;
	rc = 0;
	goto out;
oom:
	err_set(e, "internal", "out of memory reading %s", display);
out:
	closedir(d);
	vec_free(&offs);
	buf_free(&s);
	return rc;
}

/* Open the directory name in dfd for the walk into ent (fd, st): never
 * following a link; for a removal made u+rwx first. 0, 1 when it is gone
 * (a removal passes it over), or -1 with e. */
static int
open_dir(struct fw *w, int dfd, const char *name, struct fs_ent *ent)
{
	int force = w->flags & FS_WALK_REMOVE;

	ent->fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ent->fd < 0 && errno == EACCES && force && make_accessible(dfd, name) == 0)
		ent->fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ent->fd < 0 && errno == ENOENT && force)
		return 1;
	if (ent->fd < 0 || fstat(ent->fd, &ent->st) != 0)
		return err_sys(w->e, "io.error", errno, "%s: %s", w->rel, strerror(errno));
	if (force && (ent->st.st_mode & 0700) != 0700 &&
	    fchmod(ent->fd, (ent->st.st_mode & 07777) | 0700) == 0)
		ent->st.st_mode |= 0700;
	return 0;
}

/* With FS_WALK_STATLESS, an entry readdir says is neither a directory nor
 * of unknown type gets only its type in st (1): no fstatat. */
static int
stat_less(const struct fw *w, const char *name, struct stat *st)
{
	unsigned char t = ((const unsigned char *)name)[-1];

	if (!(w->flags & FS_WALK_STATLESS) || t == DT_DIR || t == DT_UNKNOWN)
		return 0;
	memset(st, 0, sizeof(*st));
	st->st_mode = (mode_t)DTTOIF(t);
	return 1;
}

static int
walk_dir(struct fw *w, const struct fs_ent *dir, int dfd, int depth)
{
	const char *here = w->len ? w->rel : ".";
	char **names;
	size_t n, i, l, saved = w->len;
	int rc = 0;

	if (fs_dir_names(dfd, here, w->code, &names, &n, w->e) != 0)
		return -1;
	for (i = 0; rc == 0 && i < n; i++) {
		struct fs_ent ent = {.dfd = dfd, .name = names[i], .rel = w->rel, .fd = -1, .aux = -1};

		ent.depth = depth;
		ent.parent = dir;
		l = strlen(names[i]);
		if (saved + 1 + l >= sizeof(w->rel)) {
			rc = err_set(w->e, w->code, "path too long under %s", here);
			break;
		}
		if (saved > 0)
			w->rel[saved] = '/';
		memcpy(w->rel + saved + (saved > 0), names[i], l + 1);
		w->len = saved + (saved > 0) + l;
		if (stat_less(w, names[i], &ent.st)) {
			rc = w->visit(w->arg, &ent, w->e) < 0 ? -1 : 0;
		} else if (fstatat(dfd, names[i], &ent.st, AT_SYMLINK_NOFOLLOW) != 0) {
			if (errno != ENOENT || !(w->flags & FS_WALK_REMOVE))
				rc = err_sys(w->e, "io.error", errno, "%s: %s", w->rel, strerror(errno));
		} else if (S_ISDIR(ent.st.st_mode) && depth > FS_MAX_DEPTH) {
			rc = err_set(w->e, w->code, "%s: tree deeper than %d levels", w->rel, FS_MAX_DEPTH);
		} else if (!S_ISDIR(ent.st.st_mode) || (rc = open_dir(w, dfd, names[i], &ent)) == 0) {
			rc = w->visit(w->arg, &ent, w->e);
			if (rc == FS_WALK_SKIP || ent.fd < 0)
				rc = rc < 0 ? -1 : 0;
			else if (rc == 0 && (rc = walk_dir(w, &ent, ent.fd, depth + 1)) == 0 &&
			         (w->flags & FS_WALK_POST)) {
				ent.post = 1;
				rc = w->visit(w->arg, &ent, w->e) < 0 ? -1 : 0;
			}
		} else {
			rc = rc < 0 ? -1 : 0; /* gone: a removal passes it over */
		}
		if (ent.fd >= 0)
			close(ent.fd);
		if (ent.aux >= 0)
			close(ent.aux);
		w->len = saved;
		w->rel[saved] = '\0';
	}
	free(names);
	return rc;
}

int
fs_walk(int rootfd, int flags, const char *limit_code, fs_visit_fn visit, void *arg, struct err *e)
{
	struct fw *w = calloc(1, sizeof(*w));
	int rc;

	if (w == NULL)
		return err_set(e, "internal", "out of memory");
	w->flags = flags;
	w->code = limit_code;
	w->visit = visit;
	w->arg = arg;
	w->e = e;
	rc = walk_dir(w, NULL, rootfd, 1);
	free(w);
	return rc;
}

/* ---- removal ---- */

/* Removal state: the directory the removal started in (where subtrees too
 * deep to enter are moved, to be removed from there) and how many were
 * moved. */
struct rm {
	int top;
	unsigned long moved;
	char tag[48];
};

static void
moved_name(struct rm *r, unsigned long i, char *buf, size_t cap)
{
	snprintf(buf, cap, ".rm-deep.%s.%lu", r->tag, i);
}

/* fs_walk's visitor for a removal: anything but a directory unlinked at
 * once, a directory once emptied; one at FS_MAX_DEPTH moved up beside
 * the tree instead of entered (no limit on what can be removed). */
static int
rm_visit(void *arg, struct fs_ent *ent, struct err *e)
{
	struct rm *rm = arg;
	char deep[96];

	if (!S_ISDIR(ent->st.st_mode)) {
		if (unlinkat(ent->dfd, ent->name, 0) != 0 && errno != ENOENT)
			return io_err(e, "cannot remove", ent->rel);
		return 0;
	}
	if (ent->post) {
		if (unlinkat(ent->dfd, ent->name, AT_REMOVEDIR) != 0 && errno != ENOENT)
			return io_err(e, "cannot remove directory", ent->rel);
		return 0;
	}
	if (ent->depth < FS_MAX_DEPTH)
		return 0;
	moved_name(rm, rm->moved, deep, sizeof(deep));
	if (renameat(ent->dfd, ent->name, rm->top, deep) != 0)
		return io_err(e, "cannot move a deep subtree", ent->rel);
	rm->moved++;
	return FS_WALK_SKIP;
}

/* Remove name in dirfd: unlinked, or walked and emptied, then removed. */
static int
rm_at(struct rm *rm, int dirfd, const char *name, struct err *e)
{
	struct fs_ent top = {.fd = -1, .aux = -1};
	struct fw *w;
	int rc;

	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return io_err(e, "cannot remove", name);
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return err_set(e, "internal", "out of memory");
	w->flags = FS_WALK_REMOVE | FS_WALK_POST | FS_WALK_STATLESS;
	w->code = "io.error";
	w->visit = rm_visit;
	w->arg = rm;
	w->e = e;
	snprintf(w->rel, sizeof(w->rel), "%s", name);
	if ((rc = open_dir(w, dirfd, name, &top)) == 0) {
		w->rel[0] = '\0';
		rc = walk_dir(w, NULL, top.fd, 1);
		close(top.fd);
		if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
			rc = io_err(e, "cannot remove directory", name);
	}
	free(w);
	return rc < 0 ? -1 : 0;
}

int
fs_rm_treeat(int dirfd, const char *name, struct err *e)
{
	struct rm rm;
	char deep[96];
	unsigned long i;

	if (name[0] == '\0' || strchr(name, '/') != NULL || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return err_set(e, "io.error", "refusing to remove '%s'", name);
	rm.top = dirfd;
	rm.moved = 0;
	fs_rand_hex(rm.tag, 8);
	if (rm_at(&rm, dirfd, name, e) != 0)
		return -1;
	/* rm.moved may grow while this runs: a moved subtree can be deep too. */
	for (i = 0; i < rm.moved; i++) {
		moved_name(&rm, i, deep, sizeof(deep));
		if (rm_at(&rm, dirfd, deep, e) != 0)
			return -1;
	}
	return 0;
}

int
fs_rm_tree(const char *path, struct err *e)
{
	char buf[PATH_MAX], dir[PATH_MAX];
	const char *base;
	size_t n = strlen(path);
	int dfd, r;

	if (n == 0 || n >= sizeof(buf))
		return err_set(e, "io.error", "remove: bad path length");
	memcpy(buf, path, n + 1);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	base = strrchr(buf, '/');
	base = base ? base + 1 : buf;
	if (fs_dirname(buf, dir, sizeof(dir)) != 0)
		return err_set(e, "io.error", "remove: bad path %s", path);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		if (errno == ENOENT)
			return 0;
		return io_err(e, "cannot open directory", dir);
	}
	r = fs_rm_treeat(dfd, base, e);
	close(dfd);
	return r;
}

static int
du_visit(void *arg, struct fs_ent *ent, struct err *e)
{
	uint64_t *acc = arg;

	if (!ent->post) {
		acc[0] += (uint64_t)ent->st.st_blocks * 512;
		acc[1]++;
	}
	return 0;
}

int
fs_du(int dirfd, const char *name, uint64_t *bytes, uint64_t *files, struct err *e)
{
	uint64_t acc[2] = {0, 0};
	struct stat st;
	int fd, rc = 0;

	*bytes = 0, *files = 0;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0 : io_err(e, "cannot stat", name);
	acc[0] = (uint64_t)st.st_blocks * 512, acc[1] = 1;
	if (S_ISDIR(st.st_mode)) {
		if ((fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
			return io_err(e, "cannot open directory", name);
		rc = fs_walk(fd, 0, "io.error", du_visit, acc, e);
		close(fd);
	}
	*bytes = acc[0], *files = acc[1];
	return rc;
}
