/*
 * core/arc: hostile archives first. The archives are built at test time by
 * tests/fixtures/mkarchives.py. For every refusal: install.failed with
 * phase extract, nothing created or changed outside the staging root (a
 * sentinel directory beside it is compared before and after), and the
 * caller can remove what was staged.
 */
#include "unit.h"
#include "pkg/arc.h"
#include "base/digest.h"
#include "base/fs.h"
#include "install/install.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

/* The suite runs twice: every file written on the calling thread, then on
 * the writer's own thread from the first entry (arc_opts.threads). */
static int threads_mode = ARC_THREADS_ONE;

static void
opts_init(struct arc_opts *o, enum arc_format f)
{
	arc_opts_init(o, f);
	o->threads = threads_mode;
}
#define arc_opts_init(o, f) opts_init(o, f)

static char base[256], arch[300], stage[300], outside[300];
static char outside_digest[FS_HEX_LEN];

static void
path_of(char *buf, size_t cap, const char *dir, const char *name)
{
	snprintf(buf, cap, "%s/%s", dir, name);
}

static int
group_setup(void **state)
{
	char cmd[1024], p[400];
	struct err e = {0};
	int fd;

	snprintf(base, sizeof(base), "/tmp/abx-test-arc.XXXXXX");
	if (mkdtemp(base) == NULL)
		return -1;
	path_of(arch, sizeof(arch), base, "arch");
	path_of(stage, sizeof(stage), base, "stage");
	path_of(outside, sizeof(outside), base, "outside");
	if (mkdir(outside, 0755) != 0)
		return -1;
	path_of(p, sizeof(p), outside, "secret");
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	if (fd < 0 || write(fd, "secret\n", 7) != 7)
		return -1;
	close(fd);
	snprintf(cmd, sizeof(cmd), "python3 tests/fixtures/mkarchives.py %s %s", arch, outside);
	if (system(cmd) != 0)
		return -1;
	if (install_tree_list(outside, NULL, NULL, outside_digest, NULL, NULL, &e) != 0)
		return -1;
	return 0;
}

static int
group_teardown(void **state)
{
	struct err e = {0};

	return fs_rm_tree(base, &e);
}

/* Set while the tests run again through arc_extract_mem (1) or, a tar or
 * tar.gz, through arc_extract_read in odd-sized pieces (2). */
static int via_mem;

/* arc_read_fn over memory: at most step bytes a call; fail_at (if not 0)
 * bytes in, an EIO. */
struct rd {
	const char *p;
	size_t len, off, step, fail_at;
};

static ssize_t
rd_read(void *ctx, const void **out)
{
	struct rd *r = ctx;
	size_t n = r->len - r->off < r->step ? r->len - r->off : r->step;

	if (r->fail_at > 0 && r->off >= r->fail_at) {
		errno = EIO;
		return -1;
	}
	*out = r->p + r->off;
	r->off += n;
	return (ssize_t)n;
}

static int
stage_reset(void)
{
	struct err e = {0};

	if (fs_rm_tree(stage, &e) != 0)
		return -1;
	return mkdir(stage, 0700);
}

static int
fresh_stage(void **state)
{
	via_mem = 0;
	return stage_reset();
}

/* Nothing outside the stage changed: the sentinel tree is identical and the
 * base holds only arch, stage, outside; /tmp/x was not created. */
static void
assert_outside_untouched(void)
{
	char d[FS_HEX_LEN], p[400];
	struct err e = {0};
	struct stat sb;

	assert_int_equal(install_tree_list(outside, NULL, NULL, d, NULL, NULL, &e), 0);
	assert_string_equal(d, outside_digest);
	path_of(p, sizeof(p), base, "outside-evil");
	assert_int_equal(lstat(p, &sb), -1);
	assert_int_equal(lstat("/tmp/x/evil", &sb), -1);
}

static int
extract(const char *name, enum arc_format f, unsigned flags, struct arc_stats *st, struct err *e)
{
	char p[400];
	struct arc_opts o;

	arc_opts_init(&o, f);
	o.flags = flags;
	path_of(p, sizeof(p), arch, name);
	if (via_mem) {
		char *buf = NULL;
		size_t len = 0;
		int dfd, rc;

		if (fs_read_alloc(p, 256u << 20, &buf, &len, e) != 0)
			fail_msg("%s: %s", p, e->msg);
		dfd = open(stage, O_RDONLY | O_DIRECTORY);
		assert_true(dfd >= 0);
		if (via_mem == 2 && f != ARC_FMT_ZIP) {
			struct rd r = {buf, len, 0, 777, 0};
			rc = arc_extract_read(rd_read, &r, dfd, &o, st, e);
		} else {
			rc = arc_extract_mem(buf, len, dfd, &o, st, e);
		}
		close(dfd);
		free(buf);
		return rc;
	}
	return arc_extract(p, stage, &o, st, e);
}

/* Refused with install.failed / extract, naming the rule; nothing outside;
 * the stage can be removed. */
static void
refused(const char *name, enum arc_format f, const char *rule)
{
	struct arc_stats st;
	struct err e = {0};
	char ed[ERR_DETAILS_MAX];

	err_keep_details(&e, ed, sizeof(ed));
	struct stat sb;
	int fds = unit_open_fds();

	err_clear(&e);
	assert_int_equal(extract(name, f, 0, &st, &e), -1);
	assert_int_equal(unit_open_fds(), fds);
	assert_non_null(e.code);
	assert_string_equal(e.code, "install.failed");
	assert_string_equal(e.details, "{\"phase\":\"extract\"}");
	if (strstr(e.msg, rule) == NULL)
		fail_msg("%s: message '%s' lacks '%s'", name, e.msg, rule);
	assert_outside_untouched();
	assert_int_equal(fs_rm_tree(stage, &e), 0);
	assert_int_equal(lstat(stage, &sb), -1);
	assert_int_equal(mkdir(stage, 0700), 0);
}

#define T ARC_FMT_TAR
#define Z ARC_FMT_ZIP
#define G ARC_FMT_TAR_GZ

static void
t_dotdot(void **s)
{
	refused("dotdot.tar", T, "'..' component");
}
static void
t_dotdot_inner(void **s)
{
	refused("dotdot_inner.tar", T, "'..' component");
}
static void
t_absolute(void **s)
{
	refused("absolute.tar", T, "absolute path");
}
static void
t_symlink_out(void **s)
{
	refused("symlink_out.tar", T, "leaves the extraction root");
}
static void
t_symlink_abs(void **s)
{
	refused("symlink_abs.tar", T, "target is absolute");
}
static void
t_symlink_deep_out(void **s)
{
	refused("symlink_deep_out.tar", T, "leaves the extraction root");
}
static void
t_symlink_dotdot_after_name(void **s)
{
	refused("symlink_dotdot_after_name.tar", T, "'..' after a name");
}
static void
t_hardlink_out(void **s)
{
	refused("hardlink_out.tar", T, "'..' component");
}
static void
t_hardlink_abs(void **s)
{
	refused("hardlink_abs.tar", T, "absolute path");
}
static void
t_hardlink_missing(void **s)
{
	refused("hardlink_missing.tar", T, "was not extracted");
}
static void
t_hardlink_data(void **s)
{
	refused("hardlink_data.tar.gz", G, "hard link carries 67108864 bytes");
}
static void
t_hardlink_to_symlink(void **s)
{
	refused("hardlink_to_symlink.tar", T, "a symlink, not a file");
}
static void
t_through_symlink_abs(void **s)
{
	refused("through_symlink_abs.tar", T, "target is absolute");
}
static void
t_through_symlink(void **s)
{
	refused("through_symlink.tar", T, "passes through the symlink 'a'");
}
static void
t_device(void **s)
{
	refused("device.tar", T, "device nodes are not accepted");
}
static void
t_blockdev(void **s)
{
	refused("blockdev.tar", T, "device nodes are not accepted");
}
static void
t_fifo(void **s)
{
	refused("fifo.tar", T, "FIFOs are not accepted");
}
static void
t_setuid(void **s)
{
	refused("setuid.tar", T, "setuid");
}
static void
t_setgid(void **s)
{
	refused("setgid.tar", T, "setuid, setgid or sticky");
}
static void
t_overlay_dir_link(void **s)
{
	refused("overlay_dir_link.tar", T, "a symlink over a directory");
}
static void
t_overlay_link_file(void **s)
{
	refused("overlay_link_file.tar", T, "a file over a symlink");
}
static void
t_overlay_file_dir(void **s)
{
	refused("overlay_file_dir.tar", T, "a directory over a file");
}
static void
t_dup_file(void **s)
{
	refused("dup_file.tar", T, "a file over a file");
}
static void
t_long_path(void **s)
{
	refused("long_path.tar", T, "longer than 4096 bytes");
}
static void
t_deep(void **s)
{
	refused("deep.tar", T, "more than 64 components");
}
static void
t_long_component(void **s)
{
	refused("long_component.tar", T, "component longer than 255");
}
static void
t_backslash(void **s)
{
	refused("backslash.tar", T, "backslash");
}
static void
t_truncated(void **s)
{
	refused("truncated.tar.gz", G, "extract:");
}
static void
t_garbage(void **s)
{
	refused("garbage.tar.gz", G, "not a valid tar.gz archive");
}
static void
t_zip_dotdot(void **s)
{
	refused("zip_dotdot.zip", Z, "'..' component");
}
static void
t_zip_absolute(void **s)
{
	refused("zip_absolute.zip", Z, "absolute path");
}
static void
t_zip_symlink_out(void **s)
{
	refused("zip_symlink_out.zip", Z, "leaves the extraction root");
}
static void
t_zip_symlink_through(void **s)
{
	refused("zip_symlink_through.zip", Z, "passes through the symlink");
}
static void
t_zip_backslash(void **s)
{
	refused("zip_backslash.zip", Z, "'..' component");
}
/* 10 GiB declared: refused by the default 1 GiB per-entry cap before a byte
 * is written. */
static void
t_bomb(void **s)
{
	refused("bomb.tar.gz", G, "per-entry cap");
}

/* The same bomb behind a name that strip_components (or npm mode) removes:
 * skipping it would still decompress 10 GiB, so its declared size is
 * capped like a written entry's. */
static void
t_bomb_stripped(void **s)
{
	char p[400];
	struct arc_opts o;
	struct arc_stats st;
	struct err e = {0};
	int i;

	for (i = 0; i < 2; i++) {
		arc_opts_init(&o, G);
		if (i == 0)
			o.strip_components = 1;
		else
			o.flags = ARC_NPM;
		path_of(p, sizeof(p), arch, "bomb.tar.gz");
		err_clear(&e);
		assert_int_equal(arc_extract(p, stage, &o, &st, &e), -1);
		assert_string_equal(e.code, "install.failed");
		if (strstr(e.msg, "per-entry cap") == NULL)
			fail_msg("message '%s' lacks 'per-entry cap'", e.msg);
		assert_outside_untouched();
	}
}

/* A zip read as tar (the caller's format decides; nothing is sniffed). */
static void
t_wrong_format(void **s)
{
	refused("good.zip", T, "not a valid tar archive");
}

static void
t_total_cap_stops(void **s)
{
	char p[400];
	struct arc_opts o;
	struct arc_stats st;
	struct err e = {0};

	arc_opts_init(&o, G);
	o.max_total = 4u << 20;
	path_of(p, sizeof(p), arch, "many.tar.gz");
	assert_int_equal(arc_extract(p, stage, &o, &st, &e), -1);
	assert_non_null(strstr(e.msg, "cap of 4194304 bytes"));
	assert_true(st.bytes <= o.max_total);
	assert_true(st.bytes_in < 40000);
	assert_outside_untouched();
}

static void
t_entry_cap(void **s)
{
	char p[400];
	struct arc_opts o;
	struct arc_stats st;
	struct err e = {0};

	arc_opts_init(&o, T);
	o.max_entries = 100;
	path_of(p, sizeof(p), arch, "entries.tar");
	assert_int_equal(arc_extract(p, stage, &o, &st, &e), -1);
	assert_non_null(strstr(e.msg, "more than 100 entries"));
	assert_int_equal(st.entries, 100);
}

static void
t_path_cap(void **s)
{
	char p[400];
	struct arc_opts o;
	struct err e = {0};

	arc_opts_init(&o, G);
	o.max_path = 10;
	path_of(p, sizeof(p), arch, "good.tar.gz");
	assert_int_equal(arc_extract(p, stage, &o, NULL, &e), -1);
	assert_non_null(strstr(e.msg, "longer than 10 bytes"));
}

/* A zip is read through its central directory: from a pipe it is refused
 * before a byte is written. */
static void
t_zip_pipe(void **s)
{
	char p[400], cmd[500];
	struct arc_opts o;
	struct arc_stats st;
	struct err e = {0};
	FILE *f;
	int dfd;

	arc_opts_init(&o, Z);
	path_of(p, sizeof(p), arch, "good.zip");
	snprintf(cmd, sizeof(cmd), "cat %s", p);
	f = popen(cmd, "r");
	assert_non_null(f);
	dfd = open(stage, O_RDONLY | O_DIRECTORY);
	assert_int_equal(arc_extract_fd(fileno(f), dfd, &o, &st, &e), -1);
	close(dfd);
	pclose(f);
	assert_string_equal(e.code, "install.failed");
	assert_non_null(strstr(e.msg, "from a file, not a pipe"));
	assert_int_equal(st.bytes, 0);
	assert_int_equal(st.entries, 0);
	assert_outside_untouched();
}

/* Sizes written after each entry (zip data descriptors): the per-entry cap
 * stops the 8 MiB entry at 1 MiB. */
static void
t_stream_bomb(void **s)
{
	struct arc_opts o;
	struct arc_stats st;
	struct err e = {0};
	char p[400];

	arc_opts_init(&o, Z);
	o.max_entry = 1u << 20;
	path_of(p, sizeof(p), arch, "stream_bomb.zip");
	assert_int_equal(arc_extract(p, stage, &o, &st, &e), -1);
	assert_non_null(strstr(e.msg, "per-entry cap of 1048576"));
	assert_true(st.bytes <= o.max_entry);
	assert_outside_untouched();
}

static void
t_strict_modes(void **s)
{
	struct err e = {0};

	assert_int_equal(extract("writable.tar", T, ARC_STRICT_MODES, NULL, &e), -1);
	assert_non_null(strstr(e.msg, "group- or world-writable"));
}

static void
t_writable_normalised(void **s)
{
	char p[400];
	struct stat sb;
	struct err e = {0};

	assert_int_equal(extract("writable.tar", T, 0, NULL, &e), 0);
	path_of(p, sizeof(p), stage, "ww");
	assert_int_equal(lstat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0644);
	path_of(p, sizeof(p), stage, "dd");
	assert_int_equal(lstat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0755);
}

static void
t_owner_read_added(void **s)
{
	char p[400], hex[FS_HEX_LEN];
	struct stat sb;
	struct err e = {0};

	assert_int_equal(extract("unreadable.tar", T, 0, NULL, &e), 0);
	path_of(p, sizeof(p), stage, "f");
	assert_int_equal(lstat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0400);
	path_of(p, sizeof(p), stage, "d");
	assert_int_equal(lstat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0511); /* u+w only while filling */
	path_of(p, sizeof(p), stage, "d/g");
	assert_int_equal(lstat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0600);
	assert_int_equal(install_tree_list(stage, NULL, NULL, hex, NULL, NULL, &e), 0);
}

static void
assert_file(const char *rel, const char *content, mode_t mode)
{
	char p[600], buf[256];
	struct stat sb;
	size_t n;
	FILE *f;

	path_of(p, sizeof(p), stage, rel);
	assert_int_equal(stat(p, &sb), 0); /* through internal symlinks */
	assert_true(S_ISREG(sb.st_mode));
	if ((sb.st_mode & 07777) != mode)
		fail_msg("%s: mode %04o, want %04o", rel, sb.st_mode & 07777, mode);
	f = fopen(p, "r"); /* follows a final symlink, unlike fs_read_small */
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	assert_string_equal(buf, content);
}

static void
assert_link(const char *rel, const char *target)
{
	char p[600], t[256];
	ssize_t n;

	path_of(p, sizeof(p), stage, rel);
	n = readlink(p, t, sizeof(t) - 1);
	assert_true(n > 0);
	t[n] = '\0';
	assert_string_equal(t, target);
}

static void
assert_good_tree(const char *pre)
{
	char r[300], p[600];
	struct stat sb, sb2;

#define R(x) (snprintf(r, sizeof(r), "%s%s", pre, x), r)
	assert_file(R("lib/tool.js"), "console.log(1)\n", 0755);
	assert_file(R("lib/data.txt"), "hello\n", 0644); /* 0664 normalised */
	assert_file(R("lib/hard.txt"), "hello\n", 0644);
	assert_file(R("ro/inside"), "ro\n", 0444);
	assert_file(R("implicit/deep/file"), "deep\n", 0644);
	assert_file(R("dot/slashes"), "s\n", 0644);
	assert_link(R("bin/tool"), "../lib/tool.js");
	assert_link(R("lib/here"), ".");
	/* the internal symlink resolves */
	assert_file(R("bin/tool"), "console.log(1)\n", 0755);
	path_of(p, sizeof(p), stage, R("lib/data.txt"));
	assert_int_equal(stat(p, &sb), 0);
	path_of(p, sizeof(p), stage, R("lib/hard.txt"));
	assert_int_equal(stat(p, &sb2), 0);
	assert_int_equal(sb.st_ino, sb2.st_ino);
	path_of(p, sizeof(p), stage, R("ro"));
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0555); /* applied after its file */
	path_of(p, sizeof(p), stage, R("lib"));
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0755); /* 0775 normalised */
	path_of(p, sizeof(p), stage, R("sg"));
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0755); /* setgid dir cleared */
	path_of(p, sizeof(p), stage, R("lib/tool.js"));
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mtime, 1700000000);
#undef R
}

static void
t_good_targz(void **s)
{
	struct arc_stats st;
	struct err e = {0};

	if (extract("good.tar.gz", G, 0, &st, &e) != 0)
		fail_msg("%s", e.msg);
	assert_good_tree("pkg-1.0/");
	assert_int_equal(st.bytes, 15 + 6 + 3 + 5 + 2);
	assert_true(st.entries >= 14);
	assert_int_equal(st.skipped, 0);
	assert_outside_untouched();
}

static void
t_good_tar_strip(void **s)
{
	char p[400];
	struct arc_opts o;
	struct arc_stats st;
	struct err e = {0};

	arc_opts_init(&o, T);
	o.strip_components = 1;
	path_of(p, sizeof(p), arch, "good.tar");
	if (arc_extract(p, stage, &o, &st, &e) != 0)
		fail_msg("%s", e.msg);
	assert_good_tree("");
	assert_int_equal(st.skipped, 1); /* the top directory itself */
}

static void
t_good_gnu_tar(void **s)
{
	struct err e = {0};

	if (extract("good_gnu.tar", T, 0, NULL, &e) != 0)
		fail_msg("%s", e.msg);
	assert_good_tree("pkg-1.0/");
}

static void
t_tar_gz_reads_plain_tar_only_as_tar(void **s)
{
	struct err e = {0};

	/* gzip filter only; the tar reader still reads an uncompressed tar
	 * (libarchive's pass-through), which is harmless: no other format
	 * or filter is enabled. */
	assert_int_equal(extract("good.tar", G, 0, NULL, &e), 0);
}

/* An entry whose local header is in the file but not in the central
 * directory is not extracted: what a zip holds is what its directory
 * lists (a stream reader would have written "smuggled"). */
static void
t_zip_smuggled(void **s)
{
	struct err e = {0};
	char p[400];
	struct stat sb;

	if (extract("zip_smuggled.zip", Z, 0, NULL, &e) != 0)
		fail_msg("%s", e.msg);
	assert_file("ok.txt", "ok\n", 0644);
	path_of(p, sizeof(p), stage, "smuggled");
	assert_int_equal(lstat(p, &sb), -1);
}

static void
t_good_zip(void **s)
{
	struct err e = {0};

	if (extract("good.zip", Z, 0, NULL, &e) != 0)
		fail_msg("%s", e.msg);
	assert_file("dir/a.txt", "alpha\n", 0644);
	assert_file("dir/run", "run\n", 0755);
	assert_link("dir/ln", "a.txt");
	assert_file("caf\xc3\xa9.txt", "u\n", 0644);
}

/* A zip entry's DOS time (2023-11-14 00:00, no zone) is read as UTC, so the
 * tree's times do not depend on the TZ of the machine that unpacks it. */
static void
t_zip_time_utc(void **s)
{
	struct err e = {0};
	struct stat st;
	char p[400];

	setenv("TZ", "EST5", 1);
	tzset();
	if (extract("good.zip", Z, 0, NULL, &e) != 0)
		fail_msg("%s", e.msg);
	unsetenv("TZ");
	tzset();
	snprintf(p, sizeof(p), "%s/dir/a.txt", stage);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal((long long)st.st_mtime, 1699920000LL);
}

static void
t_nonascii_tar(void **s)
{
	struct err e = {0};

	if (extract("nonascii.tar", T, 0, NULL, &e) != 0)
		fail_msg("%s", e.msg);
	assert_file("caf\xc3\xa9/\xc3\xbc.txt", "u\n", 0644);
}

static void
t_npm_mode(void **s)
{
	struct arc_stats st;
	struct err e = {0};
	char p[400];
	struct stat sb;

	if (extract("npm.tgz", G, ARC_NPM, &st, &e) != 0)
		fail_msg("%s", e.msg);
	assert_file("package.json", "{}\n", 0644);
	assert_file("cli.js", "#!/usr/bin/env node\n", 0755);
	assert_file("lib/x.js", "2\n", 0644); /* the later duplicate wins */
	assert_file("su", "s", 0755);         /* setuid dropped, exec kept */
	path_of(p, sizeof(p), stage, "link");
	assert_int_equal(lstat(p, &sb), -1);
	path_of(p, sizeof(p), stage, "hard");
	assert_int_equal(lstat(p, &sb), -1);
	path_of(p, sizeof(p), stage, "fifo");
	assert_int_equal(lstat(p, &sb), -1);
	assert_int_equal(st.skipped, 4); /* package/, link, hard, fifo */
	assert_int_equal(lstat(stage, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0700); /* the root is the caller's */
}

static void
t_interleave(void **s)
{
	static const char *const files[] = {"a/x",   "a/b/c/y", "ab/y",    "a/z",
	                                    "a/b/w", "top",     "a/b/c/v", "ab/b/c/u"};
	char deep[200] = "", p[400];
	struct arc_stats st;
	struct err e = {0};
	size_t i;

	if (extract("interleave.tgz", G, ARC_NPM, &st, &e) != 0)
		fail_msg("%s", e.msg);
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		assert_file(files[i], files[i], 0644);
	for (i = 0; i < 20; i++)
		snprintf(deep + strlen(deep), sizeof(deep) - strlen(deep), "%sd%zu", i ? "/" : "", i);
	snprintf(p, sizeof(p), "%s/deep1", deep);
	assert_file(p, "deep1", 0644);
	snprintf(p, sizeof(p), "%s/deep2", deep);
	assert_file(p, "deep2", 0644);
	snprintf(p, sizeof(p), "%s/e/deep3", deep);
	assert_file(p, "deep3", 0644);
	assert_file("d0/d1/d2/d3/d4/d5/d6/d7/d8/d9/d10/d11/d12/mid", "mid", 0644);
	/* 12 files, and every directory once: a, a/b, a/b/c, ab, ab/b, ab/b/c,
	 * d0..d19, d19/e */
	assert_int_equal(st.entries, 12 + 6 + 21);
}

static int tapped;

static void
on_file(void *ctx, const char *name, const struct stat *st, const unsigned char sha256[32])
{
	char p[600];
	struct stat now;
	struct digest d;

	(void)ctx;
	path_of(p, sizeof(p), stage, name);
	assert_int_equal(lstat(p, &now), 0);
	/* the stat is the finished file's: mode and times final */
	assert_int_equal(now.st_ino, st->st_ino);
	assert_int_equal(now.st_ctim.tv_sec, st->st_ctim.tv_sec);
	assert_int_equal(now.st_ctim.tv_nsec, st->st_ctim.tv_nsec);
	assert_int_equal(now.st_mode, st->st_mode);
	assert_int_equal(now.st_mtime, 1700000000);
	if (strcmp(name, "pkg-1.0/lib/tool.js") == 0) {
		digest_buf(DIGEST_SHA256, "console.log(1)\n", 15, &d);
		assert_memory_equal(sha256, d.v, 32);
	}
	if (strcmp(name, "pkg-1.0/implicit/deep/file") == 0) {
		digest_buf(DIGEST_SHA256, "deep\n", 5, &d);
		assert_memory_equal(sha256, d.v, 32);
	}
	tapped++;
}

/* Each regular file written is reported once with the sha256 of its
 * content (hard links and symlinks are not files written). */
static void
t_on_file(void **s)
{
	char p[400];
	struct arc_opts o;
	struct err e = {0};

	arc_opts_init(&o, G);
	o.on_file = on_file;
	path_of(p, sizeof(p), arch, "good.tar.gz");
	tapped = 0;
	if (arc_extract(p, stage, &o, NULL, &e) != 0)
		fail_msg("%s", e.msg);
	assert_int_equal(tapped, 5); /* tool.js, data.txt, inside, file, slashes */
}

/* Every rule again with the archive in memory (how npm packages are
 * extracted): the same refusals with the same messages, the same trees. */
static void
t_mem_same_rules(void **s)
{
	static void (*const fns[])(void **) = {
	    t_dotdot,
	    t_dotdot_inner,
	    t_absolute,
	    t_symlink_out,
	    t_symlink_abs,
	    t_symlink_deep_out,
	    t_symlink_dotdot_after_name,
	    t_hardlink_out,
	    t_hardlink_abs,
	    t_hardlink_missing,
	    t_hardlink_to_symlink,
	    t_hardlink_data,
	    t_through_symlink_abs,
	    t_through_symlink,
	    t_device,
	    t_blockdev,
	    t_fifo,
	    t_setuid,
	    t_setgid,
	    t_overlay_dir_link,
	    t_overlay_link_file,
	    t_overlay_file_dir,
	    t_dup_file,
	    t_long_path,
	    t_long_component,
	    t_deep,
	    t_backslash,
	    t_truncated,
	    t_garbage,
	    t_zip_dotdot,
	    t_zip_absolute,
	    t_zip_symlink_out,
	    t_zip_symlink_through,
	    t_zip_backslash,
	    t_zip_smuggled,
	    t_bomb,
	    t_good_targz,
	    t_good_zip,
	    t_nonascii_tar,
	    t_npm_mode,
	    t_interleave,
	};
	size_t i;
	int via;

	/* and through a read callback (extraction while downloading) */
	for (via = 1; via <= 2; via++)
		for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
			assert_int_equal(stage_reset(), 0);
			via_mem = via;
			fns[i](s);
		}
	via_mem = 0;
}

/* arc_extract_read: a read error is install.failed, after what was
 * extracted before it; a zip or a tee is refused. */
static void
t_read_error(void **s)
{
	char p[400], *buf = NULL;
	size_t len = 0;
	struct digest_ctx c;
	struct arc_opts o;
	struct arc_stats st;
	struct err e = {0};
	int dfd;

	path_of(p, sizeof(p), arch, "many.tar.gz");
	assert_int_equal(fs_read_alloc(p, 256u << 20, &buf, &len, &e), 0);
	dfd = open(stage, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	arc_opts_init(&o, ARC_FMT_TAR_GZ);
	{
		struct rd r = {buf, len, 0, 4096, len / 2};
		assert_int_equal(arc_extract_read(rd_read, &r, dfd, &o, &st, &e), -1);
	}
	/* (gzip reports it as its input cut short) */
	assert_string_equal(e.code, "install.failed");
	assert_true(st.entries > 0 && st.entries < 32);
	arc_opts_init(&o, ARC_FMT_ZIP);
	{
		struct rd r = {buf, len, 0, 4096, 0};
		assert_int_equal(arc_extract_read(rd_read, &r, dfd, &o, NULL, &e), -1);
		arc_opts_init(&o, ARC_FMT_TAR_GZ);
		digest_init(&c, DIGEST_SHA256);
		o.tee = &c;
		assert_int_equal(arc_extract_read(rd_read, &r, dfd, &o, NULL, &e), -1);
	}
	close(dfd);
	free(buf);
}

static uint64_t progress_calls, progress_last;

static void
on_progress(void *ctx, uint64_t out, uint64_t in)
{
	(void)ctx;
	assert_true(out >= progress_last);
	assert_true(in > 0);
	progress_last = out;
	progress_calls++;
}

static void
t_progress(void **s)
{
	char p[400];
	struct arc_opts o;
	struct arc_stats st;
	struct err e = {0};

	arc_opts_init(&o, G);
	o.progress = on_progress;
	path_of(p, sizeof(p), arch, "many.tar.gz");
	progress_calls = progress_last = 0;
	assert_int_equal(arc_extract(p, stage, &o, &st, &e), 0);
	assert_int_equal(st.bytes, 32u << 20);
	assert_int_equal(st.entries, 32);
	assert_true(progress_calls >= 32 / 4);
	assert_int_equal(progress_last, 32u << 20);
}

static void
t_format_names(void **s)
{
	assert_int_equal(arc_format_from_name("https://x/node-v20.tar.gz?x=1"), ARC_FMT_TAR_GZ);
	assert_int_equal(arc_format_from_name("a.TGZ"), ARC_FMT_TAR_GZ);
	assert_int_equal(arc_format_from_name("a.tar"), ARC_FMT_TAR);
	assert_int_equal(arc_format_from_name("a.zip#frag"), ARC_FMT_ZIP);
	assert_int_equal(arc_format_from_name("a.tar.xz"), ARC_FMT_NONE);
	assert_int_equal(arc_format_from_name("tar"), ARC_FMT_NONE);
	assert_int_equal(arc_format_from_name(NULL), ARC_FMT_NONE);
	assert_string_equal(arc_format_name(ARC_FMT_ZIP), "zip");
}

static void
t_no_format(void **s)
{
	struct err e = {0};

	assert_int_equal(extract("good.tar", ARC_FMT_NONE, 0, NULL, &e), -1);
	assert_string_equal(e.code, "install.failed");
}

#define C(f) cmocka_unit_test_setup(f, fresh_stage)

/* arc_opts.tee: the bytes read are hashed, to the end of the file (the
 * ones after the archive's end too), so the digest is the file's; a memory
 * archive is refused; the same tree as without the tee. */
static void
t_tee(void **s)
{
	const char *names[2] = {"good.tar.gz", "good.tar"};
	char p[400], junk[400], cmd[900];
	struct digest_ctx c;
	struct digest got, want;
	struct arc_opts o;
	struct err e = {0};
	int i, fd, dfd;

	for (i = 0; i < 2; i++) {
		assert_int_equal(stage_reset(), 0);
		path_of(p, sizeof(p), arch, names[i]);
		/* a copy with more bytes past the archive's end than one read
		 * takes: the reader stops short of them */
		snprintf(junk, sizeof(junk), "%s/tee-%d", base, i);
		snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && head -c 1000000 /dev/urandom >>'%s'", p, junk,
		         junk);
		assert_int_equal(system(cmd), 0);
		assert_int_equal(digest_file(DIGEST_SHA512, junk, &want, NULL, &e), 0);
		arc_opts_init(&o, i == 0 ? ARC_FMT_TAR_GZ : ARC_FMT_TAR);
		digest_init(&c, DIGEST_SHA512);
		o.tee = &c;
		fd = open(junk, O_RDONLY);
		dfd = open(stage, O_RDONLY | O_DIRECTORY);
		assert_true(fd >= 0 && dfd >= 0);
		if (arc_extract_fd(fd, dfd, &o, NULL, &e) != 0)
			fail_msg("%s: %s", names[i], e.msg);
		close(fd);
		digest_final(&c, &got);
		assert_true(digest_equal(&got, &want));
		assert_good_tree("pkg-1.0/");
		close(dfd);
	}
	dfd = open(stage, O_RDONLY | O_DIRECTORY);
	arc_opts_init(&o, ARC_FMT_TAR);
	o.tee = &c;
	assert_int_equal(arc_extract_mem("x", 1, dfd, &o, NULL, &e), -1);
	assert_string_equal(e.code, "internal");
	close(dfd);
}

/* A tar.gz of a few MiB made here: big (3 MiB of random bytes), then 40
 * small files. */
static void
make_big(char *out, size_t cap)
{
	char src[400], cmd[1200];

	snprintf(src, sizeof(src), "%s/bigsrc", base);
	snprintf(out, cap, "%s/big.tar.gz", base);
	if (access(out, F_OK) == 0)
		return;
	snprintf(cmd, sizeof(cmd),
	         "mkdir -p '%s/pkg/lib' && head -c 3145728 /dev/urandom >'%s/pkg/big' && "
	         "for i in $(seq 1 40); do echo \"file $i\" >\"%s/pkg/lib/f$i.js\"; done && "
	         "tar -C '%s' -czf '%s' pkg",
	         src, src, src, src, out);
	assert_int_equal(system(cmd), 0);
}

struct tapped {
	pthread_mutex_t mu;
	int files, bad, other_thread;
	pthread_t caller;
};

/* Records (no assertion off the test's thread): the digest reported is the
 * file's, and which thread reported it. */
static void
tap_record(void *ctx, const char *name, const struct stat *st, const unsigned char sha256[32])
{
	struct tapped *t = ctx;
	char p[600];
	struct digest d;
	struct err e = {0};
	int ok;

	path_of(p, sizeof(p), stage, name);
	ok = digest_file(DIGEST_SHA256, p, &d, NULL, &e) == 0 && memcmp(d.v, sha256, 32) == 0 &&
	     (st->st_mode & 0777) != 0;
	pthread_mutex_lock(&t->mu);
	t->files++;
	t->bad += !ok;
	t->other_thread += !pthread_equal(pthread_self(), t->caller);
	pthread_mutex_unlock(&t->mu);
}

/* Large enough for a second thread by default: every file written and
 * reported with its own digest, from the writer's thread (on the caller's
 * with ARC_THREADS_ONE), and the same counts either way. */
static void
t_threaded_digests(void **s)
{
	static const int modes[] = {ARC_THREADS_AUTO, ARC_THREADS_ONE, ARC_THREADS_TWO};
	char p[400];
	struct arc_opts o;
	struct arc_stats st;
	struct err e = {0};
	size_t i;

	make_big(p, sizeof(p));
	for (i = 0; i < 3; i++) {
		struct tapped t = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, pthread_self()};
		int fds = unit_open_fds();

		assert_int_equal(stage_reset(), 0);
		arc_opts_init(&o, G);
		o.threads = modes[i];
		o.flags = ARC_NPM;
		o.on_file = tap_record;
		o.file_ctx = &t;
		if (arc_extract(p, stage, &o, &st, &e) != 0)
			fail_msg("%s", e.msg);
		assert_int_equal(t.files, 41);
		assert_int_equal(t.bad, 0);
		if (modes[i] == ARC_THREADS_ONE)
			assert_int_equal(t.other_thread, 0);
		else if (modes[i] == ARC_THREADS_TWO)
			assert_int_equal(t.other_thread, 41);
		else /* from the first MiB on */
			assert_true(t.other_thread > 0);
		assert_int_equal(st.entries, 41 + 1); /* and lib/ */
		assert_true(st.bytes > 3145728);
		assert_int_equal(unit_open_fds(), fds);
	}
}

/* A write that fails on the writer's thread in the middle of an entry (the
 * file-size limit: EFBIG) fails the archive naming that entry, on the
 * caller's thread; no descriptor is left open; staging can be removed. */
static void
t_writer_fails_mid_entry(void **s)
{
	static const int modes[] = {ARC_THREADS_TWO, ARC_THREADS_AUTO, ARC_THREADS_ONE};
	char p[400];
	struct arc_opts o;
	struct arc_stats st;
	struct rlimit old, lim;
	struct err e = {0};
	char ed[ERR_DETAILS_MAX];

	err_keep_details(&e, ed, sizeof(ed));
	size_t i;

	make_big(p, sizeof(p));
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	for (i = 0; i < 3; i++) {
		int fds = unit_open_fds(), rc;

		assert_int_equal(stage_reset(), 0);
		arc_opts_init(&o, G);
		o.threads = modes[i];
		o.flags = ARC_NPM;
		lim = old;
		lim.rlim_cur = 2u << 20;
		assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
		err_clear(&e);
		rc = arc_extract(p, stage, &o, &st, &e);
		assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
		assert_int_equal(rc, -1);
		assert_string_equal(e.code, "install.failed");
		assert_string_equal(e.details, "{\"phase\":\"extract\"}");
		if (strstr(e.msg, "entry 'pkg/big': write failed") == NULL)
			fail_msg("message: %s", e.msg);
		/* the small files, and the big one's chunks up to the limit */
		assert_true(st.bytes <= (2u << 20) + 4096);
		assert_int_equal(unit_open_fds(), fds);
		assert_outside_untouched();
		assert_int_equal(stage_reset(), 0);
	}
	signal(SIGXFSZ, SIG_DFL);
}

/* A cap met by the reader while the writer has chunks in hand: refused with
 * the cap's message, what was handed over written, nothing left open. */
static void
t_threaded_cap(void **s)
{
	char p[400];
	struct arc_opts o;
	struct arc_stats st;
	struct err e = {0};
	int fds = unit_open_fds();

	make_big(p, sizeof(p));
	arc_opts_init(&o, G);
	o.threads = ARC_THREADS_TWO;
	o.max_total = 1u << 20;
	assert_int_equal(arc_extract(p, stage, &o, &st, &e), -1);
	if (strstr(e.msg, "cap of 1048576 bytes") == NULL)
		fail_msg("message: %s", e.msg);
	assert_true(st.bytes <= 1u << 20);
	assert_int_equal(unit_open_fds(), fds);
	assert_outside_untouched();
}

struct copytap {
	int cdir, files, copied, bad;
	char copy[32], name[600];
};

static void
copy_rec(void *ctx, const char *name, const char *copy)
{
	struct copytap *t = ctx;

	snprintf(t->copy, sizeof(t->copy), "%s", copy);
	snprintf(t->name, sizeof(t->name), "%s", name);
}

/* A file reported after its copy: the copy holds the bytes reported. */
static void
copy_file_rec(void *ctx, const char *name, const struct stat *st, const unsigned char sha256[32])
{
	struct copytap *t = ctx;
	struct digest d;
	struct err e = {0};
	char p[700];

	t->files++;
	if (t->copy[0] == '\0')
		return;
	snprintf(p, sizeof(p), "%s/copies/%s", base, t->copy);
	t->copied++;
	t->bad += strcmp(t->name, name) != 0 || digest_file(DIGEST_SHA256, p, &d, NULL, &e) != 0 ||
	          memcmp(d.v, sha256, 32) != 0;
	t->copy[0] = '\0';
}

/* Every file under dir (but skip) of ARC_WRITEBACK_MIN bytes or more had
 * its writeback started when it was written: no page of it is still dirty
 * (unit.h: when that can be told). The smaller ones are the syncfs's. */
static void
assert_written_back(const char *dir, const char *skip)
{
	char p[1200];
	struct dirent *de;
	struct stat sb;
	DIR *d = opendir(dir);
	long n;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || (skip != NULL && strcmp(de->d_name, skip) == 0))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		assert_int_equal(lstat(p, &sb), 0);
		if (S_ISDIR(sb.st_mode))
			assert_written_back(p, NULL);
		else if (S_ISREG(sb.st_mode) && sb.st_size >= (off_t)ARC_WRITEBACK_MIN &&
		         (n = unit_dirty_pages(p)) > 0)
			fail_msg("%s: %ld pages still dirty", p, n);
	}
	closedir(d);
}

/* arc_opts.copy_dirfd: every file reported has a whole copy, told of just
 * before it; a copy that cannot be made ("0" is taken) is skipped and the
 * extraction goes on, the name taken left alone. */
static void
t_copies(void **s)
{
	static const int modes[] = {ARC_THREADS_ONE, ARC_THREADS_TWO};
	char p[400], c[900];
	struct arc_opts o;
	struct err e = {0};
	size_t i;

	make_big(p, sizeof(p));
	for (i = 0; i < 2; i++) {
		struct copytap t = {-1, 0, 0, 0, "", ""};
		int fds = unit_open_fds();

		assert_int_equal(stage_reset(), 0);
		snprintf(c, sizeof(c), "rm -rf '%s/copies' && mkdir '%s/copies' && echo mine >'%s/copies/0'",
		         base, base, base);
		assert_int_equal(system(c), 0);
		snprintf(c, sizeof(c), "%s/copies", base);
		t.cdir = open(c, O_RDONLY | O_DIRECTORY);
		assert_true(t.cdir >= 0);
		arc_opts_init(&o, G);
		o.threads = modes[i];
		o.flags = ARC_NPM;
		o.on_file = copy_file_rec;
		o.on_copy = copy_rec;
		o.file_ctx = &t;
		o.copy_dirfd = t.cdir;
		if (arc_extract(p, stage, &o, NULL, &e) != 0)
			fail_msg("%s", e.msg);
		close(t.cdir);
		assert_int_equal(t.files, 41);
		assert_int_equal(t.copied, 40);
		assert_int_equal(t.bad, 0);
		assert_int_equal(unit_open_fds(), fds);
		snprintf(c, sizeof(c),
		         "test \"$(cat '%s/copies/0')\" = mine && test $(ls '%s/copies' | wc -l) = 41", base,
		         base);
		assert_int_equal(system(c), 0);
		/* the disk writes each file and its copy while the next are
		 * extracted */
		assert_written_back(stage, NULL);
		snprintf(c, sizeof(c), "%s/copies", base);
		assert_written_back(c, "0");
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    C(t_dotdot),
	    C(t_dotdot_inner),
	    C(t_absolute),
	    C(t_symlink_out),
	    C(t_symlink_abs),
	    C(t_symlink_deep_out),
	    C(t_symlink_dotdot_after_name),
	    C(t_hardlink_out),
	    C(t_hardlink_abs),
	    C(t_hardlink_missing),
	    C(t_hardlink_to_symlink),
	    C(t_hardlink_data),
	    C(t_through_symlink_abs),
	    C(t_through_symlink),
	    C(t_device),
	    C(t_blockdev),
	    C(t_fifo),
	    C(t_setuid),
	    C(t_setgid),
	    C(t_overlay_dir_link),
	    C(t_overlay_link_file),
	    C(t_overlay_file_dir),
	    C(t_dup_file),
	    C(t_long_path),
	    C(t_long_component),
	    C(t_deep),
	    C(t_backslash),
	    C(t_truncated),
	    C(t_garbage),
	    C(t_zip_dotdot),
	    C(t_zip_absolute),
	    C(t_zip_symlink_out),
	    C(t_zip_symlink_through),
	    C(t_zip_backslash),
	    C(t_interleave),
	    C(t_mem_same_rules),
	    C(t_on_file),
	    C(t_bomb),
	    C(t_bomb_stripped),
	    C(t_wrong_format),
	    C(t_total_cap_stops),
	    C(t_entry_cap),
	    C(t_path_cap),
	    C(t_zip_pipe),
	    C(t_zip_time_utc),
	    C(t_stream_bomb),
	    C(t_zip_smuggled),
	    C(t_strict_modes),
	    C(t_writable_normalised),
	    C(t_owner_read_added),
	    C(t_good_targz),
	    C(t_good_tar_strip),
	    C(t_good_gnu_tar),
	    C(t_tar_gz_reads_plain_tar_only_as_tar),
	    C(t_good_zip),
	    C(t_nonascii_tar),
	    C(t_npm_mode),
	    C(t_progress),
	    C(t_format_names),
	    C(t_no_format),
	    C(t_tee),
	    C(t_read_error),
	    C(t_threaded_digests),
	    C(t_writer_fails_mid_entry),
	    C(t_threaded_cap),
	    C(t_copies),
	};
	int rc = cmocka_run_group_tests_name("arc, one thread", tests, group_setup, group_teardown);

	threads_mode = ARC_THREADS_TWO;
	return rc | cmocka_run_group_tests_name("arc, writer thread", tests, group_setup, group_teardown);
}
