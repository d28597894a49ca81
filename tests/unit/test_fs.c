/* core/fs: every error path first, then the digests and the probes. */
#include "unit.h"
#include "base/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static char base[256];

static char *
P(const char *rel)
{
	static char buf[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", base, rel);
	return buf[i];
}

static void
put(const char *rel, const char *content)
{
	FILE *f = fopen(P(rel), "w");

	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

static int
setup(void **state)
{
	snprintf(base, sizeof(base), "/tmp/abx-test-fs.XXXXXX");
	return mkdtemp(base) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	struct err e = {0};

	return fs_rm_tree(base, &e);
}

static void
t_mkdir_p(void **s)
{
	struct err e = {0};
	struct stat sb;

	assert_int_equal(fs_mkdir_p(P("a/b/c/"), 0755, &e), 0);
	assert_int_equal(stat(P("a/b/c"), &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));
	assert_int_equal(fs_mkdir_p(P("a/b/c"), 0755, &e), 0); /* exists: fine */
	put("a/file", "x");
	assert_int_equal(fs_mkdir_p(P("a/file/d"), 0755, &e), -1);
	assert_string_equal(e.code, "io.error");
	assert_int_equal(fs_mkdir_p(P("a/file"), 0755, &e), -1);
	assert_non_null(strstr(e.msg, "Not a directory"));
	assert_int_equal(fs_mkdir_p("", 0755, &e), -1);
}

static void
t_write_atomic(void **s)
{
	char buf[64];
	struct err e = {0};
	struct stat sb;
	mode_t old = umask(077);
	DIR *d;
	struct dirent *de;
	int n = 0;

	assert_int_equal(fs_write_atomic(P("m.json"), "{\"a\":1}", 7, 0644, &e), 0);
	umask(old);
	assert_int_equal(stat(P("m.json"), &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0644); /* umask did not decide */
	assert_int_equal(fs_read_small(P("m.json"), buf, sizeof(buf), &e), 7);
	assert_string_equal(buf, "{\"a\":1}");
	assert_int_equal(fs_write_atomic(P("m.json"), "new", 3, 0600, &e), 0);
	assert_int_equal(fs_read_small(P("m.json"), buf, sizeof(buf), &e), 3);
	assert_string_equal(buf, "new");
	d = opendir(base);
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	assert_int_equal(n, 1); /* no temporary left behind */
	assert_int_equal(fs_write_atomic(P("missing/dir/x"), "x", 1, 0644, &e), -1);
	assert_string_equal(e.code, "io.error");
}

static void
t_read_small_caps(void **s)
{
	char buf[8], *p;
	size_t len;
	struct err e = {0};

	put("seven", "1234567");
	assert_int_equal(fs_read_small(P("seven"), buf, 8, &e), 7); /* fits exactly */
	put("eight", "12345678");
	assert_int_equal(fs_read_small(P("eight"), buf, 8, &e), -1);
	assert_non_null(strstr(e.msg, "larger than 7 bytes"));
	assert_int_equal(fs_read_small(P("nothere"), buf, 8, &e), -1);
	assert_string_equal(e.code, "not_found");
	assert_int_equal(symlink(P("seven"), P("ln")), 0);
	assert_int_equal(fs_read_small(P("ln"), buf, 8, &e), -1); /* never followed */
	assert_string_equal(e.code, "io.error");
	assert_int_equal(fs_read_small(base, buf, 8, &e), -1); /* a directory */
	assert_int_equal(fs_read_alloc(P("eight"), 8, &p, &len, &e), 0);
	assert_int_equal(len, 8);
	assert_string_equal(p, "12345678");
	free(p);
	assert_int_equal(fs_read_alloc(P("eight"), 7, &p, &len, &e), -1);
	assert_null(p);
	put("empty", "");
	assert_int_equal(fs_read_alloc(P("empty"), 7, &p, &len, &e), 0);
	assert_int_equal(len, 0);
	free(p);
}

static void
t_rm_tree_does_not_follow(void **s)
{
	struct err e = {0};
	struct stat sb;

	assert_int_equal(fs_mkdir_p(P("out/keep"), 0755, &e), 0);
	put("out/keep/precious", "p");
	assert_int_equal(fs_mkdir_p(P("t/sub/ro/locked"), 0755, &e), 0);
	put("t/sub/ro/locked/f", "f");
	assert_int_equal(symlink(P("out/keep"), P("t/sub/dirlink")), 0);
	assert_int_equal(symlink(P("out/keep/precious"), P("t/filelink")), 0);
	assert_int_equal(symlink("../../out", P("t/sub/rel")), 0);
	assert_int_equal(mkfifo(P("t/fifo"), 0600), 0);
	assert_int_equal(chmod(P("t/sub/ro/locked"), 0), 0);
	assert_int_equal(chmod(P("t/sub/ro"), 0555), 0);
	assert_int_equal(fs_rm_tree(P("t/"), &e), 0);
	assert_int_equal(lstat(P("t"), &sb), -1);
	assert_int_equal(stat(P("out/keep/precious"), &sb), 0);
	assert_int_equal(fs_rm_tree(P("t"), &e), 0); /* missing: success */
	/* a symlink given as the path is removed, not its target */
	assert_int_equal(symlink(P("out"), P("top")), 0);
	assert_int_equal(fs_rm_tree(P("top"), &e), 0);
	assert_int_equal(lstat(P("top"), &sb), -1);
	assert_int_equal(stat(P("out/keep/precious"), &sb), 0);
	assert_int_equal(fs_rm_treeat(AT_FDCWD, "..", &e), -1);
	assert_int_equal(fs_rm_treeat(AT_FDCWD, "a/b", &e), -1);
}

/* fs_walk's visitor: "rel:type" lines (a directory's second visit
 * "rel:D") into a struct buf-like text. */
struct seen {
	char text[4096];
	size_t len;
	int stop_at; /* stop (with an error) at this entry, 0 = never */
	int n;
	int flags;        /* fs_walk's */
	const char *skip; /* answer FS_WALK_SKIP for this directory */
	const char *aux;  /* give this directory an aux descriptor */
	int aux_fd;       /* the one given */
	int aux_seen;     /* its entries saw it as parent->aux */
};

static int
seen_visit(void *arg, struct fs_ent *ent, struct err *e)
{
	struct seen *w = arg;
	struct stat again;
	int dir = S_ISDIR(ent->st.st_mode);

	/* dfd holds the entry under its name; a directory's fd is the one
	 * its st is of */
	assert_int_equal(fstatat(ent->dfd, ent->name, &again, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(again.st_ino, ent->st.st_ino);
	assert_int_equal(ent->fd >= 0, dir);
	if (dir) {
		assert_int_equal(fstat(ent->fd, &again), 0);
		assert_int_equal(again.st_ino, ent->st.st_ino);
	}
	assert_true(ent->depth >= 1);
	assert_int_equal(ent->parent == NULL, ent->depth == 1);
	if (ent->parent != NULL && w->aux != NULL && strcmp(ent->parent->name, w->aux) == 0 &&
	    ent->parent->aux == w->aux_fd)
		w->aux_seen++;
	if (w->len < sizeof(w->text))
		w->len += (size_t)snprintf(w->text + w->len, sizeof(w->text) - w->len, "%s:%c\n", ent->rel,
		                           ent->post                  ? 'D'
		                           : dir                      ? 'd'
		                           : S_ISLNK(ent->st.st_mode) ? 'l'
		                                                      : 'f');
	if (++w->n == w->stop_at)
		return err_set(e, "test.stop", "stopped at %s", ent->rel);
	if (dir && !ent->post && w->aux != NULL && strcmp(ent->rel, w->aux) == 0)
		w->aux_fd = ent->aux = dup(ent->fd);
	if (dir && !ent->post && w->skip != NULL && strcmp(ent->rel, w->skip) == 0)
		return FS_WALK_SKIP;
	return 0;
}

static int
walk(const char *rel, struct seen *w, struct err *e)
{
	int fd = open(P(rel), O_RDONLY | O_DIRECTORY), rc;

	assert_true(fd >= 0);
	rc = fs_walk(fd, w->flags, "test.limit", seen_visit, w, e);
	close(fd);
	return rc;
}

/* Depth first, names sorted bytewise, a directory before its entries,
 * symlinks not followed; a visitor's error stops the walk and is kept. */
static void
t_walk(void **s)
{
	struct seen w = {0};
	struct err e = {0};

	assert_int_equal(fs_mkdir_p(P("w/b/c"), 0755, &e), 0);
	put("w/b/c/f", "x");
	put("w/a", "a");
	put("w/B", "B");
	put("w/b/z", "");
	assert_int_equal(symlink("b", P("w/ln")), 0);
	assert_int_equal(walk("w", &w, &e), 0);
	assert_string_equal(w.text, "B:f\na:f\nb:d\nb/c:d\nb/c/f:f\nb/z:f\nln:l\n");
	memset(&w, 0, sizeof(w));
	w.stop_at = 4;
	assert_int_equal(walk("w", &w, &e), -1);
	assert_string_equal(e.code, "test.stop");
	assert_string_equal(e.msg, "stopped at b/c");
	assert_int_equal(w.n, 4);
}

/* FS_WALK_POST: each directory visited again after its entries (D),
 * innermost first; FS_WALK_SKIP keeps the walk out of a directory (and
 * out of its second visit); an aux descriptor is seen by the directory's
 * entries as parent->aux and closed by the walk once it is done, also
 * when the walk stops inside it. */
static void
t_walk_post(void **s)
{
	struct seen w = {0};
	struct err e = {0};
	int fd;

	assert_int_equal(fs_mkdir_p(P("w/b/c"), 0755, &e), 0);
	assert_int_equal(fs_mkdir_p(P("w/s/t"), 0755, &e), 0);
	put("w/b/c/f", "x");
	put("w/a", "a");
	put("w/b/z", "");
	w.flags = FS_WALK_POST;
	w.skip = "s";
	w.aux = "b";
	assert_int_equal(walk("w", &w, &e), 0);
	assert_string_equal(w.text, "a:f\nb:d\nb/c:d\nb/c/f:f\nb/c:D\nb/z:f\nb:D\ns:d\n");
	assert_int_equal(w.aux_seen, 3); /* b/c (both visits), b/z; not b/c/f */
	/* closed by the walk: the number is free again */
	assert_int_equal(fcntl(w.aux_fd, F_GETFD), -1);
	assert_int_equal(errno, EBADF);
	/* without the flag, one visit each */
	memset(&w, 0, sizeof(w));
	assert_int_equal(walk("w", &w, &e), 0);
	assert_string_equal(w.text, "a:f\nb:d\nb/c:d\nb/c/f:f\nb/z:f\ns:d\ns/t:d\n");
	/* stopped inside b: no second visit of b, its aux closed all the same */
	memset(&w, 0, sizeof(w));
	w.flags = FS_WALK_POST;
	w.aux = "b";
	w.stop_at = 4;
	assert_int_equal(walk("w", &w, &e), -1);
	assert_string_equal(e.msg, "stopped at b/c/f");
	fd = dup(0);
	assert_true(fd <= w.aux_fd); /* the lowest free number: b's aux was closed */
	close(fd);
}

/* The walk reads a directory through the descriptor whose fstat it
 * showed: a directory that cannot be opened is an error before its visit,
 * and a link to a directory is an entry, never entered. */
static void
t_walk_by_descriptor(void **s)
{
	struct seen w = {0};
	struct err e = {0};

	assert_int_equal(fs_mkdir_p(P("w/shut"), 0755, &e), 0);
	assert_int_equal(fs_mkdir_p(P("elsewhere/x"), 0755, &e), 0);
	assert_int_equal(symlink(P("elsewhere"), P("w/link")), 0);
	assert_int_equal(walk("w", &w, &e), 0);
	assert_string_equal(w.text, "link:l\nshut:d\n");
	if (geteuid() == 0)
		return; /* root opens a 0000 directory */
	assert_int_equal(chmod(P("w/shut"), 0), 0);
	memset(&w, 0, sizeof(w));
	assert_int_equal(walk("w", &w, &e), -1);
	assert_string_equal(e.code, "io.error");
	assert_string_equal(w.text, "link:l\n");
	assert_int_equal(chmod(P("w/shut"), 0755), 0);
}

/* The one sorted directory reader: bytewise order, read from the start
 * whatever was read through the descriptor before, one block. */
static void
t_dir_names(void **s)
{
	char **v;
	size_t n;
	struct err e = {0};
	DIR *d;
	int fd;

	assert_int_equal(fs_mkdir_p(P("n"), 0755, &e), 0);
	put("n/b", "");
	put("n/B", "");
	put("n/a", "");
	fd = open(P("n"), O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	d = fdopendir(dup(fd));
	while (readdir(d) != NULL)
		;
	closedir(d);
	assert_int_equal(fs_dir_names(fd, "n", "test.limit", &v, &n, &e), 0);
	assert_int_equal(n, 3);
	assert_string_equal(v[0], "B");
	assert_string_equal(v[1], "a");
	assert_string_equal(v[2], "b");
	free(v);
	close(fd);
	/* AT_FDCWD: the display is the path read; a missing one is io.error with its errno */
	assert_int_equal(fs_dir_names(AT_FDCWD, P("n"), "test.limit", &v, &n, &e), 0);
	assert_int_equal(n, 3);
	assert_string_equal(v[1], "a");
	assert_int_equal(v[1][-1], DT_REG);
	free(v);
	assert_int_equal(fs_dir_names(AT_FDCWD, P("none"), "test.limit", &v, &n, &e), -1);
	assert_string_equal(e.code, "io.error");
	assert_int_equal(e.sys, ENOENT);
}

static void
t_free_bytes(void **s)
{
	uint64_t n = 0;
	struct err e = {0};

	assert_int_equal(fs_free_bytes(base, &n, &e), 0);
	assert_true(n > 0);
	assert_int_equal(fs_free_bytes(P("nothere"), &n, &e), -1);
	assert_string_equal(e.code, "io.error");
}

static void
t_dir_safe(void **s)
{
	struct err e = {0};

	assert_int_equal(fs_mkdir_p(P("safe"), 0700, &e), 0);
	assert_int_equal(fs_dir_safe(P("safe"), &e), 0);
	assert_int_equal(chmod(P("safe"), 0777), 0);
	assert_int_equal(fs_dir_safe(P("safe"), &e), -1);
	assert_string_equal(e.code, "config.state_dir_unsafe");
	assert_non_null(strstr(e.msg, "mode 0777"));
	assert_int_equal(chmod(P("safe"), 0720), 0);
	assert_int_equal(fs_dir_safe(P("safe"), &e), -1);
	assert_int_equal(chmod(P("safe"), 0755), 0);
	assert_int_equal(fs_dir_safe(P("safe"), &e), 0);
	assert_int_equal(fs_dir_safe(P("nothere"), &e), -1);
	assert_string_equal(e.code, "not_found");
	put("plain", "x");
	assert_int_equal(fs_dir_safe(P("plain"), &e), -1);
	assert_string_equal(e.code, "config.state_dir_unsafe");
	if (geteuid() == 0) {
		assert_int_equal(chown(P("safe"), 65534, 65534), 0);
		assert_int_equal(fs_dir_safe(P("safe"), &e), -1);
		assert_string_equal(e.code, "config.state_dir_unsafe");
		assert_non_null(strstr(e.msg, "owned by uid 65534"));
	}
}

static void
t_noexec_probe(void **s)
{
	struct statvfs v;
	struct err e = {0};
	int rc;

	assert_int_equal(statvfs(base, &v), 0);
	rc = fs_noexec_probe(base, &e);
	if (v.f_flag & ST_NOEXEC) {
		assert_int_equal(rc, -1);
		assert_string_equal(e.code, "install.noexec");
	} else {
		if (rc != 0)
			fail_msg("%s", e.msg);
	}
	assert_int_equal(fs_noexec_probe(P("nothere"), &e), -1);
	assert_string_equal(e.code, "io.error");
}

/* A real noexec mount needs root and mount(2); skipped without them. */
static void
t_noexec_mount(void **s)
{
	struct err e = {0};
	int rc;

	assert_int_equal(fs_mkdir_p(P("mnt"), 0700, &e), 0);
	if (geteuid() != 0 || mount("tmpfs", P("mnt"), "tmpfs", MS_NOEXEC, "size=64k") != 0) {
		skip();
		return;
	}
	rc = fs_noexec_probe(P("mnt"), &e);
	umount(P("mnt"));
	assert_int_equal(rc, -1);
	assert_string_equal(e.code, "install.noexec");
	assert_non_null(strstr(e.msg, "mount "));
	assert_non_null(strstr(e.msg, P("mnt")));
}

static void
t_mount_point_and_dirname(void **s)
{
	char buf[256];

	assert_int_equal(fs_mount_point("/proc/self", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/proc");
	assert_int_equal(fs_mount_point("/", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/");
	assert_int_equal(fs_mount_point("/no/such/path", buf, sizeof(buf)), -1);
	assert_int_equal(fs_dirname("/a/b", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/a");
	assert_int_equal(fs_dirname("/a", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/");
	assert_int_equal(fs_dirname("a", buf, sizeof(buf)), 0);
	assert_string_equal(buf, ".");
	assert_int_equal(fs_dirname("a//b", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "a");
	assert_int_equal(fs_dirname("/abc/d", buf, 3), -1);
}

static void
t_syncfs_and_fsync_dir(void **s)
{
	struct err e = {0};

	assert_int_equal(fs_syncfs(base, &e), 0);
	assert_int_equal(fs_fsync_dir(base, &e), 0);
	assert_int_equal(fs_fsync_dir(P("nothere"), &e), -1);
}

/* fs_writeback_start: the file's dirty pages are under writeback (or
 * written) when it returns, though it does not wait for them; a hint, so
 * what cannot be written back is ignored and errno is as it was. */
static void
t_writeback_start(void **s)
{
	static char block[1 << 16];
	uint64_t pending = 0;
	long before;
	int fd, i, pfd[2];

	fd = open(P("wb"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	memset(block, 'w', sizeof(block));
	for (i = 0; i < 64; i++)
		assert_int_equal(write(fd, block, sizeof(block)), (ssize_t)sizeof(block));
	before = unit_dirty_pages(P("wb"));
	fs_writeback_start(fd);
	if (before > 0)
		assert_int_equal(unit_dirty_pages(P("wb")), 0);
	/* every FS_WRITEBACK_EVERY bytes, the count kept by the caller */
	for (i = 0; i < 64; i++)
		assert_int_equal(write(fd, block, sizeof(block)), (ssize_t)sizeof(block));
	assert_int_equal(fs_writeback_every(fd, &pending, FS_WRITEBACK_EVERY - 1), 0);
	assert_int_equal(pending, FS_WRITEBACK_EVERY - 1);
	if (unit_dirty_pages(P("wb")) < 0)
		print_message("(cachestat unavailable here: writeback not observed)\n");
	assert_int_equal(fs_writeback_every(fd, &pending, 1), 1);
	assert_int_equal(pending, 0);
	if (before > 0)
		assert_int_equal(unit_dirty_pages(P("wb")), 0);
	close(fd);
	/* nothing to write back: ignored, errno kept */
	assert_int_equal(pipe(pfd), 0);
	fd = open(base, O_RDONLY | O_DIRECTORY);
	errno = EDOM;
	fs_writeback_start(pfd[1]);
	fs_writeback_start(fd);
	fs_writeback_start(-1);
	assert_int_equal(fs_writeback_every(-1, &pending, FS_WRITEBACK_EVERY), 1);
	assert_int_equal(errno, EDOM);
	close(fd);
	close(pfd[0]);
	close(pfd[1]);
}

static void
make_deep(const char *rel, int levels)
{
	int fd, nfd, i;

	assert_int_equal(mkdir(P(rel), 0755), 0);
	fd = open(P(rel), O_RDONLY | O_DIRECTORY);
	for (i = 0; i < levels; i++) {
		assert_int_equal(mkdirat(fd, "d", 0755), 0);
		nfd = openat(fd, "d", O_RDONLY | O_DIRECTORY);
		close(fd);
		fd = nfd;
	}
	assert_int_equal(symlinkat("..", fd, "up"), 0);
	close(fd);
}

struct deep_job {
	struct seen w;
	int rc;
	struct err e;
};

static void *
deep_thread(void *arg)
{
	struct deep_job *j = arg;

	j->w.len = 0;
	j->rc = walk("deep", &j->w, &j->e);
	return NULL;
}

/* The server walks trees in threads: 120 levels fit musl's 128 KiB default
 * thread stack. Deeper than FS_MAX_DEPTH is a clean error. */
static void
t_deep_trees(void **s)
{
	pthread_attr_t at;
	pthread_t th;
	struct deep_job j;
	struct err e = {0};
	struct seen w;

	/* the walk reads every field of j.w (skip, aux, stop_at, flags) */
	memset(&j, 0, sizeof(j));
	make_deep("deep", 120);
	pthread_attr_init(&at);
	/* ASan's frames are larger; give it the same margin over ours. */
	pthread_attr_setstacksize(&at, 4 * 128 * 1024);
	assert_int_equal(pthread_create(&th, &at, deep_thread, &j), 0);
	pthread_join(th, NULL);
	pthread_attr_destroy(&at);
	if (j.rc != 0)
		fail_msg("%s", j.e.msg);
	make_deep("deeper", 2 * FS_MAX_DEPTH + 50);
	memset(&w, 0, sizeof(w));
	assert_int_equal(walk("deeper", &w, &e), -1);
	assert_string_equal(e.code, "test.limit");
	if (strstr(e.msg, "deeper than") == NULL)
		fail_msg("%s", e.msg);
	assert_int_equal(fs_rm_tree(P("deep"), &e), 0);
	/* removal has no depth limit: deep parts are moved up and removed */
	if (fs_rm_tree(P("deeper"), &e) != 0)
		fail_msg("%s", e.msg);
	{
		DIR *d = opendir(base);
		struct dirent *de;
		int n = 0;

		while ((de = readdir(d)) != NULL)
			n += de->d_name[0] != '.';
		closedir(d);
		assert_int_equal(n, 0);
		d = opendir(base);
		while ((de = readdir(d)) != NULL)
			assert_null(strstr(de->d_name, "rm-deep"));
		closedir(d);
	}
}

/* Operator inputs follow symlinks (ConfigMap "..data" links); reads inside
 * tool trees never do; neither blocks on a FIFO (open(2) of one waits for
 * a writer, forever if none comes) nor takes anything but a regular file. */
static void
t_read_input_follows_and_never_blocks(void **s)
{
	char link[512], *p = NULL;
	size_t len;
	struct err e = {0};
	struct stat sb;
	int fd;

	put("real.json", "{}");
	snprintf(link, sizeof(link), "%s", P("link.json"));
	assert_int_equal(symlink(P("real.json"), link), 0);
	assert_int_equal(fs_read_input(link, 64, &p, &len, &e), 0);
	assert_int_equal(len, 2);
	free(p);
	fd = fs_open_input(link, &sb, &e);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(fs_read_alloc(link, 64, &p, &len, &e), -1);
	assert_string_equal(e.code, "io.error");
	assert_non_null(strstr(e.msg, "is a symbolic link, which is not followed here"));
	assert_int_equal(mkfifo(P("fifo"), 0600), 0);
	assert_int_equal(fs_read_input(P("fifo"), 64, &p, &len, &e), -1);
	assert_non_null(strstr(e.msg, "is not a regular file (a FIFO)"));
	assert_int_equal(fs_read_alloc(P("fifo"), 64, &p, &len, &e), -1);
	assert_non_null(strstr(e.msg, "is not a regular file (a FIFO)"));
	assert_int_equal(fs_open_input(base, &sb, &e), -1);
	assert_non_null(strstr(e.msg, "is not a regular file (a directory)"));
	assert_int_equal(fs_open_input(P("nothere"), &sb, &e), -1);
	assert_string_equal(e.code, "not_found");
}

/* fs_dir_open_safe: missing components are made (0700); a link is
 * followed only where nobody but us or root could have made it; the
 * directory must be ours and not writable by others. The parts that need
 * another owner run as root only. */
static void
t_dir_open_safe(void **s)
{
	struct err e = {0};
	struct stat sb;
	int fd;

	chmod(base, 0700);
	fd = fs_dir_open_safe(P("st/a/b"), 0, &e);
	assert_int_equal(fd, -1);
	assert_string_equal(e.code, "not_found");
	fd = fs_dir_open_safe(P("st/a/b"), 1, &e);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	assert_int_equal(fs_write_atomic_at(fd, "token", "x\n", 2, 0600, "token", &e), 0);
	close(fd);
	assert_int_equal(stat(P("st/a/b/token"), &sb), 0);
	/* a link in a directory only we can write is ours: followed */
	assert_int_equal(symlink(P("st/a/b"), P("st/link")), 0);
	fd = fs_dir_open_safe(P("st/link"), 0, &e);
	assert_true(fd >= 0);
	close(fd);
	/* group- or world-writable: refused */
	chmod(P("st/a/b"), 0770);
	assert_int_equal(fs_dir_open_safe(P("st/a/b"), 0, &e), -1);
	assert_string_equal(e.code, "config.state_dir_unsafe");
	assert_non_null(strstr(e.msg, "group- or world-writable"));
	chmod(P("st/a/b"), 0700);
	/* a link in a directory others can write: refused, even to a safe target */
	mkdir(P("open"), 0777);
	chmod(P("open"), 0777);
	assert_int_equal(symlink(P("st/a/b"), P("open/state")), 0);
	assert_int_equal(fs_dir_open_safe(P("open/state"), 1, &e), -1);
	assert_string_equal(e.code, "config.state_dir_unsafe");
	assert_non_null(strstr(e.msg, "is a symbolic link"));
	/* a file where a directory should be */
	put("st/file", "x");
	assert_int_equal(fs_dir_open_safe(P("st/file"), 1, &e), -1);
	assert_int_equal(fs_subdir_open_safe(AT_FDCWD, P("st/file"), 0, "f", &e), -1);
	assert_int_equal(fs_dir_open_safe("relative", 1, &e), -1);
	if (geteuid() != 0)
		return;
	/* another user's home: a link there is refused; a directory it
	 * owns is not ours; one we make in it is */
	mkdir(P("home"), 0755);
	assert_int_equal(chown(P("home"), 65534, 65534), 0);
	assert_int_equal(symlink(P("st/a/b"), P("home/state")), 0);
	assert_int_equal(lchown(P("home/state"), 65534, 65534), 0);
	assert_int_equal(fs_dir_open_safe(P("home/state"), 1, &e), -1);
	assert_non_null(strstr(e.msg, "uid 65534 owns"));
	mkdir(P("home/theirs"), 0700);
	assert_int_equal(chown(P("home/theirs"), 65534, 65534), 0);
	assert_int_equal(fs_dir_open_safe(P("home/theirs"), 1, &e), -1);
	assert_non_null(strstr(e.msg, "owned by uid 65534"));
	fd = fs_dir_open_safe(P("home/ours/x"), 1, &e);
	assert_true(fd >= 0);
	assert_int_equal(fs_subdir_open_safe(fd, "sessions", 0, "sessions", &e), -1);
	assert_string_equal(e.code, "not_found");
	close(fd);
}

/* fs_write_all: at the position, at an offset without moving it, and the
 * errors of a descriptor that cannot take the bytes. */
static void
t_write_all(void **state)
{
	char big[256 * 1024], back[16];
	int fd = open(P("w"), O_RDWR | O_CREAT | O_TRUNC, 0600), p[2];

	assert_true(fd >= 0);
	assert_int_equal(fs_write_all(fd, "hello world", 11, -1), 0);
	assert_int_equal(fs_write_all(fd, "W", 1, 6), 0);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 11);
	assert_int_equal(fs_write_all(fd, "!", 1, -1), 0);
	assert_int_equal(fs_write_all(fd, "", 0, -1), 0);
	assert_int_equal(pread(fd, back, sizeof(back), 0), 12);
	assert_memory_equal(back, "hello World!", 12);
	close(fd);
	errno = 0;
	assert_int_equal(fs_write_all(fd, "x", 1, -1), -1);
	assert_int_equal(errno, EBADF);
	/* A full non-blocking pipe: the part that fits goes, then EAGAIN. */
	assert_int_equal(pipe2(p, O_NONBLOCK), 0);
	memset(big, 'x', sizeof(big));
	assert_int_equal(fs_write_all(p[1], big, sizeof(big), -1), -1);
	assert_int_equal(errno, EAGAIN);
	close(p[0]);
	close(p[1]);
}

/* One join: exactly fitting is fine, one byte short is an error and
 * leaves "", never a cut path. */
static void
t_path_join(void **s)
{
	char b[8];
	struct err e = {0};

	assert_int_equal(fs_path_join(b, sizeof(b), "ab", "cdef", &e), 0);
	assert_string_equal(b, "ab/cdef");
	assert_int_equal(fs_path_join(b, sizeof(b), "ab", "cdefg", &e), -1);
	assert_string_equal(b, "");
	assert_string_equal(e.code, "io.error");
	assert_non_null(strstr(e.msg, "path too long"));
	assert_int_equal(fs_path_join(b, sizeof(b), "abcdefgh", "", NULL), -1);
	assert_int_equal(fs_path_join(b, 0, "", "", NULL), -1);
	/* a directory of 5,000 bytes: the message names its head and the
	 * name, the middle elided (core/base/err.h) */
	char *dir = malloc(5001), big[PATH_MAX];
	assert_non_null(dir);
	memset(dir, 'd', 5000);
	memcpy(dir, "/top/", 5);
	dir[5000] = '\0';
	assert_int_equal(fs_path_join(big, sizeof(big), dir, "the-name", &e), -1);
	assert_memory_equal(e.msg, "path too long: /top/ddd", 23);
	assert_non_null(strstr(e.msg, "\xe2\x80\xa6"));
	assert_non_null(strstr(e.msg, "ddd/the-name"));
	assert_true(strlen(e.msg) < ERR_MSG_MAX);
	free(dir);
}

#define C(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    C(t_mkdir_p),
	    C(t_write_atomic),
	    C(t_write_all),
	    C(t_read_small_caps),
	    C(t_rm_tree_does_not_follow),
	    C(t_walk),
	    C(t_walk_post),
	    C(t_walk_by_descriptor),
	    C(t_dir_names),
	    C(t_path_join),
	    C(t_free_bytes),
	    C(t_dir_safe),
	    C(t_dir_open_safe),
	    C(t_noexec_probe),
	    C(t_noexec_mount),
	    C(t_mount_point_and_dirname),
	    C(t_syncfs_and_fsync_dir),
	    C(t_deep_trees),
	    C(t_read_input_follows_and_never_blocks),
	    C(t_writeback_start),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
