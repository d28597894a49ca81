/*
 * Safe archive extraction: libarchive reads, we write (see arc.h for the
 * policy and why archive_write_disk is not used).
 */
#include "pkg/arc_int.h"
#include "base/clock.h"
#include "base/digest.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert((ARC_SAFE_FLAGS & ARCHIVE_EXTRACT_OWNER) == 0, "never restore owners");
_Static_assert((ARC_SAFE_FLAGS & ARCHIVE_EXTRACT_SECURE_SYMLINKS) != 0, "no writes through symlinks");

/* libarchive's read block: large enough that a 100 MiB archive is read in
 * few syscalls, small enough for the 8 MiB peak-memory goal. */
#define ARC_READ_BLOCK (128u << 10)
/* Directories whose final mode forbids our own writes (no u+rwx) get that
 * mode after every entry is written; their names are kept until then, in at
 * most this many bytes, so a hostile archive cannot make the list grow
 * without bound. Real archives have none or a handful. */
#define ARC_DEFER_MAX_BYTES (1u << 20)

/* libarchive's zip reader turns an entry's DOS date and time (which carry
 * no zone) into a time with mktime(). This one reads them as UTC, as
 * timegm() does: an extracted tree's times do not depend on the TZ of the
 * machine that unpacks it, and no time zone database is read or linked. */
time_t
mktime(struct tm *tm)
{
	return timegm(tm);
}
void
arc_opts_init(struct arc_opts *o, enum arc_format format)
{
	memset(o, 0, sizeof(*o));
	o->format = format;
	o->copy_dirfd = -1;
}

static int
ends_with(const char *s, size_t n, const char *suf)
{
	size_t m = strlen(suf);

	return n >= m && strncasecmp(s + n - m, suf, m) == 0;
}

enum arc_format
arc_format_from_name(const char *name)
{
	size_t n;

	if (name == NULL)
		return ARC_FMT_NONE;
	n = strcspn(name, "?#");
	if (ends_with(name, n, ".tar.gz") || ends_with(name, n, ".tgz"))
		return ARC_FMT_TAR_GZ;
	if (ends_with(name, n, ".tar"))
		return ARC_FMT_TAR;
	if (ends_with(name, n, ".zip"))
		return ARC_FMT_ZIP;
	return ARC_FMT_NONE;
}

const char *
arc_format_name(enum arc_format f)
{
	switch (f) {
	case ARC_FMT_TAR:
		return "tar";
	case ARC_FMT_TAR_GZ:
		return "tar.gz";
	case ARC_FMT_ZIP:
		return "zip";
	default:
		return "none";
	}
}

static const char *
type_word(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISLNK(m))
		return "a symlink";
	if (S_ISREG(m))
		return "a file";
	return "a special file";
}

static int
dup_refuse(struct xs *x, int pfd, const char *leaf, const char *what)
{
	struct stat sb;

	if (fstatat(pfd, leaf, &sb, AT_SYMLINK_NOFOLLOW) != 0)
		return arc_refuse_sys(x, errno, "duplicate entry: cannot stat: %s", strerror(errno));
	return arc_refuse(x, "duplicate entry: %s over %s", what, type_word(sb.st_mode));
}

/* The final mode of a file or directory, or -1 after arc_refuse(). */
static int
entry_mode(struct xs *x, struct archive_entry *ent, int is_dir)
{
	mode_t m = archive_entry_perm(ent) & 07777;

	if (x->o->flags & ARC_NPM) {
		if (is_dir)
			return 0755;
		return (m & 0111) ? 0755 : 0644;
	}
	if (is_dir) {
		/* setgid on a directory only picks the group of new files
		 * (we never chown) and sticky only limits deletion; neither
		 * grants privilege, and both occur in tarballs made in shared
		 * directories. Cleared, not refused. */
		m &= 0777;
	} else if (m & 07000) {
		return arc_refuse(x, "mode %04o has setuid, setgid or sticky bits", (unsigned)m);
	}
	if (m & 022) {
		if (x->o->flags & ARC_STRICT_MODES)
			return arc_refuse(x, "mode %04o is group- or world-writable", (unsigned)m);
		m &= ~(mode_t)022;
	}
	/* The engine hashes the tree as its owner: it must read every file
	 * and search every directory. */
	return (int)(m | (is_dir ? 0500 : 0400));
}

static void
progress(struct xs *x, int force)
{
	if (x->o->progress == NULL)
		return;
	if (!force && x->st->bytes < x->next_progress)
		return;
	x->next_progress = x->st->bytes + ARC_PROGRESS_STEP;
	x->o->progress(x->o->progress_ctx, x->st->bytes, (uint64_t)archive_filter_bytes(x->a, -1));
}

static int
do_file(struct xs *x, struct archive_entry *ent, int pfd, const char *leaf, const char *name)
{
	const void *buf;
	size_t len;
	la_int64_t off, declared = -1;
	struct arc_wfile *f = &x->wf;
	int fd, mode, r, direct;

	mode = entry_mode(x, ent, 0);
	if (mode < 0)
		return -1;
	if (archive_entry_size_is_set(ent)) {
		declared = archive_entry_size(ent);
		if (declared < 0 || (uint64_t)declared > x->max_entry)
			return arc_refuse(x, "size %lld exceeds the per-entry cap of %llu bytes",
			                  (long long)declared, (unsigned long long)x->max_entry);
		if (x->st->bytes + x->passed + (uint64_t)declared > x->max_total)
			return arc_refuse(x, "extracted size would exceed the cap of %llu bytes",
			                  (unsigned long long)x->max_total);
	}
	/* Created with its final mode (the descriptor is writable whatever
	 * the mode says); fchmod only when the umask would take bits away. */
	direct = arc_mode_survives(mode);
	fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	            direct ? (mode_t)mode : 0600);
	if (fd < 0 && errno == EEXIST && (x->o->flags & ARC_NPM)) {
		struct stat sb;

		if (fstatat(pfd, leaf, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode) &&
		    unlinkat(pfd, leaf, 0) == 0)
			fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			            direct ? (mode_t)mode : 0600);
		else
			errno = EEXIST;
	}
	if (fd < 0) {
		if (errno == EEXIST)
			return dup_refuse(x, pfd, leaf, "a file");
		return arc_refuse_sys(x, errno, "cannot create: %s", strerror(errno));
	}
	/* From here the file is the writer's (arc_write.c): it writes what
	 * is checked here, hashes it, sets the mode and time, reports it. */
	f->fd = fd;
	f->mode = mode;
	f->direct = direct;
	f->hashing = x->o->on_file != NULL;
	f->declared = declared;
	f->has_mtime = archive_entry_mtime_is_set(ent);
	f->mtime.tv_sec = f->has_mtime ? archive_entry_mtime(ent) : 0;
	f->mtime.tv_nsec = f->has_mtime ? archive_entry_mtime_nsec(ent) : 0;
	snprintf(f->name, sizeof(f->name), "%s", name);
	snprintf(f->raw, sizeof(f->raw), "%s", x->cur ? x->cur : name);
	if (arc_w_begin(x, f) != 0)
		return -1;
	for (;;) {
		r = archive_read_data_block(x->a, &buf, &len, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK)
			return arc_refuse(x, "%s: %s",
			                  r == ARCHIVE_WARN ? "libarchive warning" : "unreadable data",
			                  archive_error_string(x->a) ? archive_error_string(x->a) : "?");
		if (off < 0 || (uint64_t)off + len > x->max_entry)
			return arc_refuse(x, "data exceeds the per-entry cap of %llu bytes",
			                  (unsigned long long)x->max_entry);
		if (x->st->bytes + x->passed + len > x->max_total)
			return arc_refuse(x, "extracted size exceeds the cap of %llu bytes",
			                  (unsigned long long)x->max_total);
		if (arc_w_data(x, off, buf, len) != 0)
			return -1;
		x->st->bytes += len;
		progress(x, 0);
	}
	return arc_w_end(x);
}

static int
defer_mode(struct xs *x, const char *name, int mode)
{
	size_t n = strlen(name) + 1;

	if (n + sizeof(int) > x->dfr.max - x->dfr.len)
		return arc_refuse(x, "too many directories without owner write permission");
	if (buf_put(&x->dfr, name, n) != 0 || buf_put(&x->dfr, &mode, sizeof(int)) != 0)
		return arc_refuse(x, "out of memory");
	return 0;
}

static int
do_dir(struct xs *x, struct archive_entry *ent, int pfd, const char *leaf, const char *name)
{
	struct stat sb;
	int mode, fd, created = 1, direct;

	mode = entry_mode(x, ent, 1);
	if (mode < 0)
		return -1;
	/* Until the end the directory must stay writable by us. */
	if ((mode & 0700) != 0700) {
		if (defer_mode(x, name, mode) != 0)
			return -1;
		mode |= 0700;
	}
	direct = arc_mode_survives(mode);
	if (mkdirat(pfd, leaf, direct ? (mode_t)mode : 0700) != 0) {
		if (errno != EEXIST)
			return arc_refuse_sys(x, errno, "cannot create directory: %s", strerror(errno));
		if (fstatat(pfd, leaf, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(sb.st_mode))
			return dup_refuse(x, pfd, leaf, "a directory");
		created = 0;
		/* Already there with this mode (npm's are all 0755): done. */
		direct = (sb.st_mode & 07777) == (mode_t)mode;
	}
	if (direct) {
		if (created)
			x->st->entries++;
		return 0;
	}
	fd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fchmod(fd, (mode_t)mode) != 0) {
		arc_refuse_sys(x, errno, "cannot set directory mode: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	if (created)
		x->st->entries++;
	return 0;
}

static int
do_symlink(struct xs *x, struct archive_entry *ent, int pfd, const char *leaf, int depth)
{
	const char *target = archive_entry_symlink(ent);

	if (arc_check_link_target(x, target, depth) != 0)
		return -1;
	if (symlinkat(target, pfd, leaf) != 0) {
		if (errno == EEXIST)
			return dup_refuse(x, pfd, leaf, "a symlink");
		return arc_refuse_sys(x, errno, "cannot create symlink: %s", strerror(errno));
	}
	x->st->entries++;
	return 0;
}

static int
do_hardlink(struct xs *x, const char *raw_target, int pfd, const char *leaf)
{
	char t[ARC_DEFAULT_MAX_PATH + 1];
	const char *tdir, *tleaf;
	struct stat sb;
	int n, tfd, r;

	n = arc_norm_name(x, raw_target, x->strip, t, sizeof(t), "hard link target");
	if (n < 0)
		return -1;
	if (n == 0)
		return arc_refuse(x, "hard link target is outside the extracted tree");
	tleaf = arc_split_leaf(t, &tdir);
	tfd = arc_walk(x, tdir, 0);
	if (tfd < 0)
		return -1;
	if (fstatat(tfd, tleaf, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
		close(tfd);
		return arc_refuse(x, "hard link target '%s' was not extracted", tleaf);
	}
	if (!S_ISREG(sb.st_mode)) {
		close(tfd);
		return arc_refuse(x, "hard link target is %s, not a file", type_word(sb.st_mode));
	}
	r = linkat(tfd, tleaf, pfd, leaf, 0);
	close(tfd);
	if (r != 0) {
		if (errno == EEXIST)
			return dup_refuse(x, pfd, leaf, "a hard link");
		return arc_refuse_sys(x, errno, "cannot create hard link: %s", strerror(errno));
	}
	x->st->entries++;
	return 0;
}

/* An entry that is not extracted (stripped away, or dropped in npm mode)
 * still has to be decompressed to reach the next header: its declared size
 * counts against the caps, so a bomb behind a skipped name stops as early
 * as one that would be written. */
static int
skip_entry(struct xs *x, struct archive_entry *ent)
{
	la_int64_t n = archive_entry_size_is_set(ent) ? archive_entry_size(ent) : 0;

	if (n < 0 || (uint64_t)n > x->max_entry)
		return arc_refuse(x, "size %lld exceeds the per-entry cap of %llu bytes", (long long)n,
		                  (unsigned long long)x->max_entry);
	if (x->st->bytes + x->passed + (uint64_t)n > x->max_total)
		return arc_refuse(x, "extracted size would exceed the cap of %llu bytes",
		                  (unsigned long long)x->max_total);
	x->passed += (uint64_t)n;
	x->st->skipped++;
	return 0;
}

static int
do_entry(struct xs *x, struct archive_entry *ent)
{
	char name[ARC_DEFAULT_MAX_PATH + 1];
	const char *raw, *hl, *dir, *leaf;
	mode_t type = archive_entry_filetype(ent);
	int n, pfd, depth, npm = (x->o->flags & ARC_NPM) != 0;

	raw = archive_entry_pathname_utf8(ent);
	if (raw == NULL)
		raw = archive_entry_pathname(ent);
	x->cur = raw;
	if (++x->seen > x->max_entries) {
		arc_refuse(x, "more than %llu entries (the entry cap)", (unsigned long long)x->max_entries);
		/* arc_refuse set the phase */
		err_detail_str(x->e, "rule", "max_entries");
		err_detail_int(x->e, "limit", (long long)x->max_entries);
		return -1;
	}
	hl = archive_entry_hardlink(ent);
	n = arc_norm_name(x, raw, x->strip, name, sizeof(name), "name");
	if (n < 0)
		return -1;
	if (n == 0) {
		return skip_entry(x, ent);
	}
	/* Type checks before anything is created. */
	if (hl == NULL && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
		if (npm) {
			return skip_entry(x, ent);
		}
		return arc_refuse(x, "%s are not accepted",
		                  type == AE_IFCHR || type == AE_IFBLK ? "device nodes"
		                  : type == AE_IFIFO                   ? "FIFOs"
		                  : type == AE_IFSOCK                  ? "sockets"
		                                                       : "entries of unknown type");
	}
	if (npm && (hl != NULL || type == AE_IFLNK)) {
		return skip_entry(x, ent);
	}
	depth = n;
	leaf = arc_split_leaf(name, &dir);
	pfd = arc_parent_fd(x, dir);
	if (pfd < 0)
		return -1;
	/* pax lets a hard link carry data (meant to replace the target's);
	 * libarchive would decompress it uncounted while skipping it. No
	 * real tool archive needs one. */
	if (hl != NULL && archive_entry_size_is_set(ent) && archive_entry_size(ent) > 0)
		return arc_refuse(x, "hard link carries %lld bytes of data",
		                  (long long)archive_entry_size(ent));
	if (hl != NULL)
		return do_hardlink(x, hl, pfd, leaf);
	if (type == AE_IFLNK)
		return do_symlink(x, ent, pfd, leaf, depth);
	if (dir == name)
		name[strlen(dir)] = '/'; /* undo split_leaf for the record */
	if (type == AE_IFDIR)
		return do_dir(x, ent, pfd, leaf, name);
	return do_file(x, ent, pfd, leaf, name);
}

static int
apply_deferred(struct xs *x)
{
	size_t i = 0, n;
	const char *dir, *leaf;
	char name[ARC_DEFAULT_MAX_PATH + 1];
	int mode, fd, dfd;

	x->cur = NULL;
	while (i < x->dfr.len) {
		n = strlen((const char *)x->dfr.p + i);
		memcpy(name, x->dfr.p + i, n + 1);
		memcpy(&mode, x->dfr.p + i + n + 1, sizeof(int));
		i += n + 1 + sizeof(int);
		leaf = arc_split_leaf(name, &dir);
		dfd = arc_walk(x, dir, 0);
		if (dfd < 0)
			return -1;
		fd = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(dfd);
		if (fd < 0 || fchmod(fd, (mode_t)mode) != 0) {
			if (fd >= 0)
				close(fd);
			return arc_refuse_sys(x, errno, "cannot set the mode of a directory: %s",
			                      strerror(errno));
		}
		close(fd);
	}
	return 0;
}

static struct archive *
reader(enum arc_format f, struct err *e)
{
	struct archive *a = archive_read_new();
	int ok;

	if (a == NULL) {
		err_set(e, "install.failed", "extract: out of memory");
		return NULL;
	}
	switch (f) {
	case ARC_FMT_TAR:
		ok = archive_read_support_format_tar(a) == ARCHIVE_OK &&
		     archive_read_support_filter_none(a) == ARCHIVE_OK;
		break;
	case ARC_FMT_TAR_GZ:
		/* ARCHIVE_WARN here means "will run gzip(1)": refused. */
		ok = archive_read_support_format_tar(a) == ARCHIVE_OK &&
		     archive_read_support_filter_gzip(a) == ARCHIVE_OK;
		break;
	case ARC_FMT_ZIP:
		/* The central directory's reader alone: a zip's entries are
		 * what its directory lists, never local headers read in
		 * stream order, which a crafted zip can make disagree. */
		ok = archive_read_support_format_zip_seekable(a) == ARCHIVE_OK &&
		     archive_read_support_filter_none(a) == ARCHIVE_OK;
		break;
	default:
		archive_read_free(a);
		err_set(e, "install.failed", "extract: unsupported archive format");
		err_detail_str(e, "phase", "extract");
		return NULL;
	}
	if (!ok) {
		err_set(e, "install.failed", "extract: %s support unavailable: %s", arc_format_name(f),
		        archive_error_string(a) ? archive_error_string(a) : "?");
		err_detail_str(e, "phase", "extract");
		archive_read_free(a);
		return NULL;
	}
	return a;
}

/* The archive comes from a descriptor (mem == NULL) or from memory. */
/* The reader of a hashed archive (arc_opts.tee): each block read is hashed
 * as libarchive takes it; tee_drain hashes what it did not read. */
struct tee {
	int fd;
	struct digest_ctx *d;
	unsigned char *buf;
};

static la_ssize_t
tee_read(struct archive *a, void *arg, const void **out)
{
	struct tee *t = arg;
	ssize_t n;

	do
		n = read(t->fd, t->buf, ARC_READ_BLOCK);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (a != NULL)
			archive_set_error(a, errno, "read: %s", strerror(errno));
		return -1;
	}
	digest_update(t->d, t->buf, (size_t)n);
	*out = t->buf;
	return n;
}

static int
tee_drain(struct tee *t)
{
	const void *p;
	la_ssize_t n;

	while ((n = tee_read(NULL, t, &p)) > 0)
		;
	return n == 0 ? 0 : -1;
}

/* The reader of arc_extract_read: the caller's function. */
struct src {
	arc_read_fn fn;
	void *ctx;
};

static la_ssize_t
src_read(struct archive *a, void *arg, const void **out)
{
	struct src *s = arg;
	ssize_t n = s->fn(s->ctx, out);

	if (n < 0)
		archive_set_error(a, errno, "reading the archive: %s", strerror(errno));
	return n;
}

static int
extract(int archive_fd, const void *mem, size_t memlen, struct src *src, int root_dirfd,
        const struct arc_opts *o, struct arc_stats *st, struct err *e)
{
	struct arc_stats local;
	struct archive_entry *ent;
	struct tee tee = {archive_fd, o->tee, NULL};
	struct arc_writer wr;
	struct xs x;
	locale_t utf8, old = (locale_t)0;
	int r, rc = -1, opened;
	int64_t cpu0 = clock_thread_cpu_us();

	if (st == NULL)
		st = &local;
	if (o->tee != NULL && (mem != NULL || src != NULL || o->format == ARC_FMT_ZIP))
		return err_set(e, "internal", "a hashed extraction reads a tar or tar.gz from a file");
	if (o->tee != NULL && (tee.buf = malloc(ARC_READ_BLOCK)) == NULL)
		return err_set(e, "internal", "out of memory");
	memset(st, 0, sizeof(*st));
	memset(&x, 0, sizeof(x));
	x.dfr = (struct buf)BUF_INIT(ARC_DEFER_MAX_BYTES);
	x.root = root_dirfd;
	x.o = o;
	x.st = st;
	x.e = e;
	x.cfd = -1;
	x.max_total = o->max_total ? o->max_total : ARC_DEFAULT_MAX_TOTAL;
	x.max_entries = o->max_entries ? o->max_entries : ARC_DEFAULT_MAX_ENTRIES;
	x.max_entry = o->max_entry ? o->max_entry : ARC_DEFAULT_MAX_ENTRY;
	x.max_path = o->max_path ? o->max_path : ARC_DEFAULT_MAX_PATH;
	if (x.max_path > ARC_DEFAULT_MAX_PATH)
		x.max_path = ARC_DEFAULT_MAX_PATH;
	x.strip = o->strip_components < 0 ? 0 : o->strip_components;
	if (o->flags & ARC_NPM)
		x.strip++;
	x.next_progress = ARC_PROGRESS_STEP;
	x.w = &wr;
	arc_w_init(&wr, o);
	/* libarchive converts names to the thread's locale and warns (fatal
	 * here) when it cannot: in the "C" locale every non-ASCII name of a
	 * pax or zip archive would be refused. A UTF-8 locale for this thread
	 * only (uselocale, not setlocale) keeps names as bytes-in-UTF-8. */
	utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	if (utf8 != (locale_t)0)
		old = uselocale(utf8);
	x.a = reader(o->format, e);
	if (x.a == NULL)
		goto out_locale;
	if (mem != NULL)
		opened = archive_read_open_memory(x.a, mem, memlen);
	else if (src != NULL)
		opened = archive_read_open(x.a, src, NULL, src_read, NULL);
	else if (o->tee != NULL)
		opened = archive_read_open(x.a, &tee, NULL, tee_read, NULL);
	else
		opened = archive_read_open_fd(x.a, archive_fd, ARC_READ_BLOCK);
	if (opened != ARCHIVE_OK) {
		arc_refuse(&x, "not a valid %s archive: %s", arc_format_name(o->format),
		           archive_error_string(x.a) ? archive_error_string(x.a) : "?");
		goto out;
	}
	for (;;) {
		x.cur = NULL;
		ent = NULL;
		r = archive_read_next_header(x.a, &ent);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK) {
			if (ent != NULL && r == ARCHIVE_WARN)
				x.cur = archive_entry_pathname(ent);
			arc_refuse(&x, "%s: %s",
			           r == ARCHIVE_WARN ? "libarchive warning" : "not a valid archive",
			           archive_error_string(x.a) ? archive_error_string(x.a) : "?");
			goto out;
		}
		if (do_entry(&x, ent) != 0)
			goto out;
	}
	/* every file written before the directories get their last modes */
	if (arc_w_finish(&x, 1) != 0 || apply_deferred(&x) != 0)
		goto out;
	if (o->tee != NULL && tee_drain(&tee) != 0) {
		err_sys(e, "io.error", errno, "reading the archive: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	arc_w_finish(&x, 0);
	st->bytes_in = (uint64_t)archive_filter_bytes(x.a, -1);
	if (rc == 0)
		progress(&x, 1);
	arc_stack_pop(&x, 0);
	if (x.cfd >= 0)
		close(x.cfd);
	buf_free(&x.dfr);
	archive_read_free(x.a);
out_locale:
	arc_w_destroy(&wr);
	if (utf8 != (locale_t)0) {
		uselocale(old);
		freelocale(utf8);
	}
	free(tee.buf);
	st->cpu_read_us = clock_thread_cpu_us() - cpu0;
	return rc;
}

enum arc_format
arc_format_of_fd(int fd)
{
	unsigned char b[512];
	ssize_t n = pread(fd, b, sizeof(b), 0);

	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return ARC_FMT_TAR_GZ;
	if (n >= 4 && b[0] == 'P' && b[1] == 'K' && b[2] == 3 && b[3] == 4)
		return ARC_FMT_ZIP;
	if (n >= 262 && memcmp(b + 257, "ustar", 5) == 0)
		return ARC_FMT_TAR;
	return ARC_FMT_NONE;
}

int
arc_extract_fd(int archive_fd, int root_dirfd, const struct arc_opts *o, struct arc_stats *st, struct err *e)
{
	struct stat sb;

	if (o->format == ARC_FMT_ZIP && (fstat(archive_fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
		if (st)
			memset(st, 0, sizeof(*st));
		err_set(e, "install.failed",
		        "extract: a zip is read through its central directory, from a file, not a pipe");
		err_detail_str(e, "phase", "extract");
		return -1;
	}
	return extract(archive_fd, NULL, 0, NULL, root_dirfd, o, st, e);
}

int
arc_extract_mem(const void *buf, size_t len, int root_dirfd, const struct arc_opts *o, struct arc_stats *st,
                struct err *e)
{
	/* libarchive takes a NULL buffer for an empty one badly */
	static const char empty[1];

	return extract(-1, len ? buf : empty, len, NULL, root_dirfd, o, st, e);
}

int
arc_extract_read(arc_read_fn read, void *ctx, int root_dirfd, const struct arc_opts *o, struct arc_stats *st,
                 struct err *e)
{
	struct src s = {read, ctx};

	if (o->format == ARC_FMT_ZIP)
		return err_set(e, "internal", "a zip is extracted from a file or memory, not a stream");
	return extract(-1, NULL, 0, &s, root_dirfd, o, st, e);
}

int
arc_extract(const char *archive_path, const char *root_dir, const struct arc_opts *o, struct arc_stats *st,
            struct err *e)
{
	int afd, dfd, rc;

	afd = open(archive_path, O_RDONLY | O_CLOEXEC);
	if (afd < 0) {
		err_sys(e, "install.failed", errno, "extract: cannot open %s: %s", archive_path,
		        strerror(errno));
		err_detail_str(e, "phase", "extract");
		return -1;
	}
	dfd = open(root_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		err_sys(e, "install.failed", errno, "extract: cannot open directory %s: %s", root_dir,
		        strerror(errno));
		err_detail_str(e, "phase", "extract");
		close(afd);
		return -1;
	}
	rc = arc_extract_fd(afd, dfd, o, st, e);
	close(dfd);
	close(afd);
	return rc;
}
