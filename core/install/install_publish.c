/*
 * One install: stage (extract the artifact or the npm packages), verify
 * (install_verify.c runs verify.argv), list, publish the tree with its
 * marker, link bin/.
 */
#include "install/install_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pkg/arc.h"
#include "base/proof.h"
#include "base/clock.h"
#include "base/digest.h"
#include "base/fs.h"
#include "config/config.h"
#include "install/launch.h"
#include "pkg/npm.h"
#include "pkg/npmlock.h"

/* ---- staging ------------------------------------------------------------ */

void
install_collect_abandoned(const char *w, const char *own)
{
	char root[PATH_MAX], tool[NAME_MAX + 1], **names = NULL;
	const char *dash;
	struct err e = {0};
	size_t i, n = 0;
	int d = -1;

	if (fs_path_join(root, sizeof(root), w, ".staging", NULL) < 0 ||
	    (d = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    fs_dir_names(d, root, "io.error", &names, &n, &e) != 0)
		n = 0;
	for (i = 0; i < n; i++) {
		if (names[i][0] == '.' || (dash = strrchr(names[i], '-')) == NULL || dash == names[i])
			continue;
		snprintf(tool, sizeof(tool), "%.*s", (int)(dash - names[i]), names[i]);
		/* an installer makes its staging only while it holds the lock,
		 * and removes it before it lets go: a staging directory whose
		 * lock is free is a dead one's (another name is left to age) */
		if (strcmp(tool, own) == 0 || install_lock_held(w, tool) == 0)
			fs_rm_treeat(d, names[i], &e);
	}
	free(names);
	if (d >= 0)
		close(d);
}

/* The free space installing m alone needs: its unpacked size as lock
 * measured it, plus a quarter for its downloads (kept until the install ends)
 * and the filesystem's blocks, plus 16 MiB for markers, listings and small
 * tools; a manifest without one for this platform: twice its size hint. */
static uint64_t
tool_need(const struct install_env *c, const manifest_t *m)
{
	uint64_t u = manifest_unpacked_size(m, c->platform);

	if (u > 0)
		return u + u / 4 + (16u << 20);
	return (uint64_t)m->size_hint_mb * 2 << 20;
}

/* The needs of m's requires not installed in w yet: they are staged beside
 * m, on the same filesystem, at the same time, so each one's own check
 * passing does not mean their sum fits. */
static uint64_t
requires_need(struct install_env *c, const manifest_t *m, const char *w)
{
	char mk[PATH_MAX];
	const manifest_t *r;
	struct err e = {0};
	uint64_t sum = 0;
	int i;

	for (i = 0; i < m->nrequires; i++) {
		if ((r = manifest_get(c->ms, m->requires[i].name, &e)) == NULL)
			continue;
		if (fs_path_join(mk, sizeof(mk), w, r->name, NULL) < 0 ||
		    fs_path_join(mk, sizeof(mk), mk, ".installed.json", NULL) < 0 || access(mk, F_OK) != 0)
			sum += tool_need(c, r) + requires_need(c, r, w);
	}
	return sum;
}

/* install.no_space before anything is fetched when w's filesystem has less
 * free than m and its uninstalled requires need; 0 otherwise (also when the
 * free space cannot be read: the install then says what fills). */
static int
space_check(struct install_env *c, const manifest_t *m, const char *w, const char *staging, struct err *e)
{
	uint64_t own = tool_need(c, m), need = own + requires_need(c, m, w), free_b = 0;
	const char *req = need > own ? ", its requires' included" : "";

	if (need == 0 || fs_free_bytes(staging, &free_b, e) != 0 || free_b >= need)
		return 0;
	if (manifest_unpacked_size(m, c->platform) > 0)
		return err_set(e, "install.no_space",
		               "%s %s needs %llu MiB free (unpacked_size %llu MiB, plus a quarter and 16 MiB "
		               "for downloads and filesystem blocks%s) in %s; %llu MiB available",
		               m->name, m->version, (unsigned long long)((need + 1048575) >> 20),
		               (unsigned long long)((manifest_unpacked_size(m, c->platform) + 1048575) >> 20),
		               req, w, (unsigned long long)(free_b >> 20));
	return err_set(e, "install.no_space",
	               "%s %s needs %llu MiB free (2 x size_hint_mb%s) in %s; %llu MiB available", m->name,
	               m->version, (unsigned long long)(need >> 20), req, w,
	               (unsigned long long)(free_b >> 20));
}

/* A full disk or a missing CA bundle, wherever in the install it struck
 * (a download, an extraction, a copy, npm's fetch), has a fix of its own:
 * its code and remedy, not install.failed's generic one. Told by e->sys and
 * e->cause, never by the message (cut, translated, or quoting a path). */
void
install_specific_code(struct err *e)
{
	const char *root = err_root(e);

	if (e->sys == ENOSPC || e->sys == EDQUOT)
		e->code = "install.no_space";
	else if (root != NULL && strcmp(root, "tls.no_trust_anchors") == 0)
		e->code = "tls.no_trust_anchors";
}

/* ---- the staged tree made durable --------------------------------------- */

/*
 * syncfs of the staged tree on a thread of its own, so the disk writes run
 * while the tree is listed and hashed (which reads what the page cache
 * already holds); bg_sync_wait is called before the tree is renamed into
 * place, so the content still reaches the disk before the name does. With
 * no thread the wait does the syncfs itself. It finds little left to write:
 * every writer of a staged file (and of the cache's downloads and kept
 * trees beside it) started that file's writeback once it was written
 * (fs_writeback_start; an extracted file only from ARC_WRITEBACK_MIN on:
 * the small ones go in the syncfs's merged requests), so the disk wrote
 * while the rest was staged; the
 * kernel would start none before vm.dirty_background_ratio (gigabytes on
 * a large machine) or 30 s. Only our files: another process writing to
 * the same filesystem is no longer written back at our pace (a syncfs
 * every 100 ms while staging did that). What it has left unwritten when
 * this syncfs runs is written too (a syncfs cannot leave it out), so
 * beside a heavy writer publish/sync waits for that backlog once. Tried
 * and dropped: an fsync per file (a disk flush each: ~5 s for 2,700 files
 * here), and sync_file_range of each file only once the tree was complete
 * (only the verify run was left to overlap).
 */
struct bg_sync {
	pthread_t th;
	int fd, started;
};

static void *
bg_sync_main(void *arg)
{
	struct bg_sync *s = arg;

	syncfs(s->fd);
	return NULL;
}

static void
bg_sync_start(struct bg_sync *s, const char *dir)
{
	pthread_attr_t at;

	s->started = 0;
	s->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->fd < 0 || pthread_attr_init(&at) != 0)
		return;
	pthread_attr_setstacksize(&at, 65536);
	s->started = pthread_create(&s->th, &at, bg_sync_main, s) == 0;
	pthread_attr_destroy(&at);
}

static void
bg_sync_wait(struct bg_sync *s)
{
	if (s->fd < 0)
		return;
	if (s->started)
		pthread_join(s->th, NULL);
	else
		syncfs(s->fd);
	s->started = 0;
	close(s->fd);
	s->fd = -1;
}

/* ---- extract, verify, publish ------------------------------------------ */

/* The npm installer's progress, into the install's own (install_one). */
static void
npm_progress(void *arg, const char *name, const char *phase, const struct install_progress *p)
{
	struct install_progress_state *ps = arg;

	(void)name;
	ps->cur = *p;
	install_progress_write(ps, phase, 0);
}

struct xprog {
	struct install_progress_state *ps;
	int paused;
};

static void
extract_progress(void *arg, uint64_t out, uint64_t in)
{
	struct xprog *x = arg;

	(void)out;
	install_progress_write(x->ps, "extract", 0);
	if (!x->paused) {
		x->paused = 1;
		install_test_pause(x->ps->c, "extract");
	}
}

/* bin/<binary> -> this binary, by symlink to a temporary name + rename. */
static int
link_bin(struct install_env *c, const char *w, const manifest_t *m, struct err *e)
{
	char dir[PATH_MAX], tmp[PATH_MAX], link[PATH_MAX], rnd[17], cur[PATH_MAX],
	    leaf[MANIFEST_NAME_MAX + 24];
	ssize_t n;

	if (c->self[0] == '\0')
		return 0;
	if (fs_path_join(dir, sizeof(dir), w, "bin", e) < 0 || install_mkdir(dir, 0755, e) < 0 ||
	    fs_path_join(link, sizeof(link), dir, m->binary, e) < 0)
		return -1;
	n = readlink(link, cur, sizeof(cur) - 1);
	if (n > 0 && (size_t)n < sizeof(cur) - 1) {
		cur[n] = '\0';
		if (strcmp(cur, c->self) == 0)
			return 0;
	}
	fs_rand_hex(rnd, 8);
	snprintf(leaf, sizeof(leaf), ".%s.tmp-%s", m->binary, rnd);
	if (fs_path_join(tmp, sizeof(tmp), dir, leaf, e) < 0)
		return -1;
	if (symlink(c->self, tmp) != 0)
		return err_sys(e, "install.failed", errno, "symlink %s: %s", tmp, strerror(errno));
	if (rename(tmp, link) != 0) {
		unlink(tmp);
		return err_sys(e, "install.failed", errno, "rename %s: %s", link, strerror(errno));
	}
	return fs_fsync_dir(dir, e);
}

/* Move every other tree of this tool out of the way (into staging, then
 * removed): an upgrade leaves one tree. */
static void
remove_old_trees(const char *w, const char *name, const char *keep, const char *trash)
{
	char dir[PATH_MAX], dst[PATH_MAX], **names = NULL;
	struct err e = {0};
	size_t i, n = 0;
	int d = -1, k = 0;

	if (fs_path_join(dir, sizeof(dir), w, name, NULL) < 0 ||
	    (d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    fs_dir_names(d, dir, "io.error", &names, &n, &e) != 0)
		n = 0;
	for (i = 0; i < n; i++) {
		/* the byte before each name is its d_type (core/base/fs.h) */
		if (names[i][0] == '.' || strcmp(names[i], keep) == 0 || names[i][-1] != DT_DIR)
			continue;
		if ((size_t)snprintf(dst, sizeof(dst), "%s/old-%d", trash, k++) < sizeof(dst) &&
		    renameat(d, names[i], AT_FDCWD, dst) == 0)
			fs_rm_tree(dst, &e);
	}
	free(names);
	if (d >= 0)
		close(d);
}

static void
known_tap(void *arg, const char *name, const struct stat *st, const unsigned char sha256[32])
{
	install_known_add(arg, "", name, st, sha256);
}

/* One install in progress: what install_one's steps share. */
struct publish_job {
	struct install_env *c;
	const manifest_t *m;
	const char *w;          /* the writable tools directory */
	char tooldir[PATH_MAX]; /* <w>/<name> */
	char staging[PATH_MAX]; /* <w>/.staging/<name>-<random> */
	char tree[PATH_MAX];    /* <staging>/tree */
	char final[PATH_MAX];   /* <tooldir>/<treename> */
	char treename[MANIFEST_VERSION_MAX + 20];
	const struct manifest_artifact *a; /* tarball: the artifact */
	char sha[65];                      /* its sha256 */
	uint64_t asize;
	char hex[FS_HEX_LEN]; /* the listing's digest */
	char *listing;        /* owned */
	size_t listing_len;
	uint64_t files, bytes;
	struct install_known *known; /* owned */
	struct install_keep *keep;   /* owned: the tree to keep, being written */
	struct install_npm_info npminfo;
	struct install_progress_state ps;
	int64_t ph[INSTALL_PH_N];
	int64_t cpu[INSTALL_CPU_N]; /* where its CPU went */
};

/* Unless ao says otherwise, a tree four times size_hint_mb (plus slack for
 * tiny tools) is a bomb, stopped early. */
static void
extract_caps(const manifest_t *m, struct arc_opts *ao)
{
	uint64_t cap;

	if (m->size_hint_mb <= 0)
		return;
	cap = ((uint64_t)m->size_hint_mb * 4 + 64) << 20;
	if (cap < ARC_DEFAULT_MAX_TOTAL)
		ao->max_total = cap;
	if (cap < ARC_DEFAULT_MAX_ENTRY)
		ao->max_entry = cap;
}

/* The extraction options of a tarball source. */
static void
tarball_opts(struct publish_job *j, struct arc_opts *ao, enum arc_format f)
{
	arc_opts_init(ao, f);
	ao->flags = ARC_STRICT_MODES;
	ao->strip_components = j->m->source.strip_components;
	extract_caps(j->m, ao);
	ao->on_file = known_tap;
	ao->file_ctx = j->known;
	/* a tree to keep is written by the extraction too (install_trees.c);
	 * each attempt starts its own (a streamed one may be started again) */
	install_tree_keep_end(j->keep);
	j->keep = install_tree_keep_begin(j->c, j->m, j->a, j->known, ao);
}

/* install_stream.run of a tarball source (the extractor's thread): into
 * j->tree as the artifact downloads. No progress from here: the download
 * writes it meanwhile. */
static int
stream_run(void *arg, arc_read_fn read, void *rctx, struct err *e)
{
	struct publish_job *j = arg;
	struct arc_opts ao;
	struct arc_stats as;
	int dfd, rc;

	if (j->known == NULL)
		return err_set(e, "internal", "out of memory");
	dfd = open(j->tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		err_sys(e, "install.failed", errno, "extract: cannot open directory %s: %s", j->tree,
		        strerror(errno));
		install_details_phase(e, "extract");
		return -1;
	}
	tarball_opts(j, &ao, arc_format_from_name(j->a->url));
	rc = arc_extract_read(read, rctx, dfd, &ao, &as, e);
	close(dfd);
	/* this thread's own entries: the download's are the caller's */
	j->cpu[INSTALL_CPU_DECOMPRESS] += as.cpu_read_us;
	j->cpu[INSTALL_CPU_TREE] += as.cpu_write_us;
	return rc;
}

/* install_stream.reset: what a streamed extraction staged is discarded
 * (the tree emptied, its listing started again). */
static void
stream_reset(void *arg)
{
	struct publish_job *j = arg;

	fs_rm_tree(j->tree, NULL);
	(void)install_mkdir(j->tree, 0755, NULL);
	install_tree_keep_end(j->keep);
	j->keep = NULL;
	install_known_free(j->known);
	j->known = install_known_new();
}

/* A private copy of the artifact open at afd in the staging directory
 * (0700, ours: nobody else can write it), hashed as it is written: the fd
 * at offset 0, *got the digest of the bytes it holds; -1 with e. */
static int
private_copy(struct publish_job *j, int afd, struct digest *got, struct err *e)
{
	char path[PATH_MAX], rnd[17];
	struct digest_ctx dc;
	unsigned char *b = malloc(1u << 17);
	ssize_t n, w = 0;
	off_t off = 0;
	int fd;

	fs_rand_hex(rnd, 8);
	if ((size_t)snprintf(path, sizeof(path), "%s/artifact-%s", j->staging, rnd) >= sizeof(path)) {
		free(b);
		return err_set(e, "io.error", "%s/artifact-: too long a path", j->staging);
	}
	fd = b == NULL ? -1 : open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		free(b);
		return err_sys(e, "io.error", errno, "%s: %s", path,
		               b == NULL ? "out of memory" : strerror(errno));
	}
	unlink(path);
	digest_init(&dc, DIGEST_SHA256);
	while ((n = pread(afd, b, 1u << 17, off)) > 0) {
		digest_update(&dc, b, (size_t)n);
		if ((w = write(fd, b, (size_t)n)) != n)
			break;
		off += n;
	}
	free(b);
	if (n != 0 || lseek(fd, 0, SEEK_SET) != 0) {
		err_sys(e, "io.error", n > 0 && w >= 0 ? 0 : errno, "copying the artifact to %s: %s",
		        j->staging, n > 0 && w >= 0 ? "short write" : strerror(errno));
		close(fd);
		return -1;
	}
	digest_final(&dc, got);
	return fd;
}

/*
 * Extract the artifact whose bytes were hashed through afd into j->tree,
 * from afd itself: its name may hold other bytes by now (renamed over by
 * anyone who can write the cache or mirror directory). A tar or tar.gz is
 * hashed again as the extractor reads it (arc_opts.tee: one more sha256
 * pass, no second read) and refused unless those very bytes are the pinned
 * ones, since whoever can write the file itself (a mirror file's owner)
 * could change it after the first hash; a zip, read by seeking, is copied
 * into the private staging while hashed, and extracted from that copy.
 */
static int
extract_artifact(struct publish_job *j, int afd, const char *path, struct xprog *xp, struct err *e)
{
	enum arc_format f = arc_format_from_name(j->a->url);
	struct digest_ctx tee;
	struct digest want, got;
	struct arc_opts ao;
	struct arc_stats as;
	char hex[DIGEST_HEX_MAX];
	int dfd, src = afd, zfd = -1, rc;

	if (f == ARC_FMT_NONE)
		f = arc_format_of_fd(afd);
	tarball_opts(j, &ao, f);
	if (ao.format == ARC_FMT_NONE) {
		err_set(e, "install.failed", "%s: %s is not a tar, tar.gz or zip archive", j->m->name,
		        j->a->url);
		install_details_phase(e, "extract");
		return -1;
	}
	ao.progress = extract_progress;
	ao.progress_ctx = xp;
	if (digest_parse_hex(DIGEST_SHA256, j->sha, &want, "internal", e) < 0)
		return -1;
	if (f == ARC_FMT_ZIP) {
		if ((zfd = src = private_copy(j, afd, &got, e)) < 0)
			return -1;
	} else if (lseek(afd, 0, SEEK_SET) != 0) {
		return err_sys(e, "io.error", errno, "%s: %s", path, strerror(errno));
	} else {
		digest_init(&tee, DIGEST_SHA256);
		ao.tee = &tee;
	}
	rc = 0;
	if (f == ARC_FMT_ZIP && !digest_equal(&want, &got))
		rc = -2;
	if (rc == 0 && (dfd = open(j->tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		err_sys(e, "install.failed", errno, "extract: cannot open directory %s: %s", j->tree,
		        strerror(errno));
		install_details_phase(e, "extract");
		rc = -1;
	}
	if (rc == 0) {
		rc = arc_extract_fd(src, dfd, &ao, &as, e);
		close(dfd);
		j->cpu[INSTALL_CPU_DECOMPRESS] += as.cpu_read_us;
		j->cpu[INSTALL_CPU_TREE] += as.cpu_write_us;
		if (rc == 0 && ao.tee != NULL) {
			digest_final(&tee, &got);
			if (!digest_equal(&want, &got))
				rc = -2;
		}
	}
	if (zfd >= 0)
		close(zfd);
	if (rc == -2) {
		err_set(e, "install.checksum_mismatch",
		        "%s %s %s: %s changed after it was verified: expected sha256 %s, read sha256 %s; "
		        "nothing installed",
		        j->m->name, j->m->version, j->c->platform, path, j->sha, digest_hex(&got, hex));
		install_details_phase(e, "extract");
		return -1;
	}
	return rc;
}

/* Tarball source: the verified artifact (cache, mirrors, download),
 * extracted into j->tree: a tar or tar.gz while it downloads, a copy found
 * locally or a zip once it is there. */
static int
stage_tarball(struct publish_job *j, struct err *e)
{
	struct install_env *c = j->c;
	const manifest_t *m = j->m;
	char cache[PATH_MAX], art_path[PATH_MAX];
	struct xprog xp = {&j->ps, 0};
	struct install_stream xs = {stream_run, stream_reset, j, 0, 0, 0};
	enum arc_format uf;
	struct stat st;
	int64_t tp;
	int placed, rc, afd;

	if ((j->a = manifest_artifact(m, c->platform)) == NULL)
		return err_set(e, "install.failed", "%s has no artifact for %s", m->name, c->platform);
	/* the listing takes each file's digest from extraction, or from the
	 * kept tree's sealed manifest when one is placed */
	if ((j->known = install_known_new()) == NULL)
		return err_set(e, "internal", "out of memory");
	tp = clock_us();
	if ((placed = install_tree_place(c, m, j->a, j->staging, j->known, &j->asize, e)) < 0)
		return -1;
	if (placed) {
		snprintf(j->sha, sizeof(j->sha), "%s", j->a->sha256);
		install_known_settle(j->known);
		j->ph[INSTALL_PH_PLACE] = clock_us() - tp;
		return 0;
	}
	/* downloads go to the cache when it is writable, else to staging */
	snprintf(cache, sizeof(cache), "%s", c->cache_dir);
	if (cache[0] == '\0' || install_mkdir(cache, 0755, NULL) < 0 || access(cache, W_OK) != 0)
		snprintf(cache, sizeof(cache), "%s", j->staging);
	else
		install_collect_stale(cache, ".tmp-");
	uf = arc_format_from_name(j->a->url);
	tp = clock_us();
	if (install_get_artifact(c, m, j->a, cache, &j->ps,
	                         uf == ARC_FMT_TAR || uf == ARC_FMT_TAR_GZ ? &xs : NULL, &afd, art_path,
	                         sizeof(art_path), j->sha, e) < 0)
		return -1;
	j->ph[INSTALL_PH_DOWNLOAD] = clock_us() - tp - xs.tail_us;
	j->ps.cur.count = j->ps.cur.done = 1;
	if (m->unpinned) {
		struct install_audit_extra ax = {-1, -1, -1, NULL, NULL, NULL, j->a->url, j->sha, NULL};
		warnx_line("UNPINNED INSTALL: %s %s from %s has no pinned digest; it got sha256 %s. "
		           "ABX_INSTALL_UNPINNED=1 allowed this; pin it with `agent-sandbox-server lock %s`.",
		           m->name, m->version, j->a->url, j->sha, m->name);
		install_audit_event(c, "install.unpinned", m, &ax);
	}
	if (afd < 0) /* extracted as it arrived, no blob written */
		j->asize = xs.bytes;
	else if (fstat(afd, &st) == 0)
		j->asize = (uint64_t)st.st_size;
	install_progress_write(&j->ps, "extract", 1);
	tp = clock_us();
	rc = xs.done ? 0 : extract_artifact(j, afd, art_path, &xp, e);
	if (afd >= 0)
		close(afd);
	if (rc < 0)
		return -1;
	install_known_settle(j->known);
	install_tree_keep(c, m, j->a, j->tree, j->asize, j->known, j->keep);
	if (!c->keep_later) {
		install_tree_keep_end(j->keep);
		j->keep = NULL;
	}
	/* streamed: what extraction took beyond the download */
	j->ph[INSTALL_PH_EXTRACT] = clock_us() - tp + xs.tail_us;
	if (!xp.paused)
		install_test_pause(c, "extract");
	return 0;
}

/* npm-lock source: every package of the lockfile into j->tree. */
static int
stage_npm(struct publish_job *j, struct err *e)
{
	struct install_env *c = j->c;
	const struct install_observer *own = c->obs;
	struct install_observer via = {0};
	int64_t tp;
	int staged;

	install_progress_write(&j->ps, "fetch", 1);
	if ((j->known = install_known_new()) == NULL)
		return err_set(e, "internal", "out of memory");
	/* the npm installer reports through ps (and .progress.json) */
	if (own != NULL)
		via = *own;
	via.progress = npm_progress;
	via.arg = &j->ps;
	c->obs = &via;
	tp = clock_us();
	staged = install_npm_stage(c, j->m, j->tree, j->known, &j->npminfo, e);
	c->obs = own;
	if (staged < 0)
		return -1;
	for (int i = 0; i < INSTALL_CPU_N; i++)
		j->cpu[i] += j->npminfo.cpu[i];
	j->ph[INSTALL_PH_NPM] = clock_us() - tp;
	return 0;
}

/* The staged tree to j->final: renamed, or exchanged with a stale or
 * drifted tree of the same version. */
static int
publish_tree(struct publish_job *j, struct err *e)
{
	char old[PATH_MAX];

	if (fs_path_join(j->final, sizeof(j->final), j->tooldir, j->treename, e) < 0)
		return -1;
	if (rename(j->tree, j->final) == 0)
		return 0;
	if (errno != EEXIST && errno != ENOTEMPTY)
		return err_sys(e, "install.failed", errno, "rename to %s: %s", j->final, strerror(errno));
	/* atomically where the kernel can, else two renames (the path is
	 * briefly absent, never half-written) */
	if (syscall(SYS_renameat2, AT_FDCWD, j->tree, AT_FDCWD, j->final, 2 /* RENAME_EXCHANGE */) == 0)
		return 0;
	if (fs_path_join(old, sizeof(old), j->staging, "old", e) < 0)
		return -1;
	if (rename(j->final, old) != 0 || rename(j->tree, j->final) != 0)
		return err_sys(e, "install.failed", errno, "replacing %s: %s", j->final, strerror(errno));
	return 0;
}

/* The published tree's listing and proof list, then the marker that vouches
 * for both, then the bin link: a marker never names a missing file. */
static int
publish_marker(struct publish_job *j, struct err *e)
{
	char lp[PATH_MAX], *plist = NULL, proof_sha[FS_HEX_LEN];
	size_t plen = 0;
	struct digest dg;

	if (fs_fsync_dir(j->tooldir, e) < 0)
		return -1;
	if (fs_path_join(lp, sizeof(lp), j->tooldir, ".installed.files", e) < 0 ||
	    fs_write_atomic(lp, j->listing, j->listing_len, 0644, e) < 0)
		return -1;
	if (fs_path_join(lp, sizeof(lp), j->tooldir, ".installed.proof", e) < 0 ||
	    proof_make(j->final, "install.failed", &plist, &plen, e) < 0 ||
	    fs_write_atomic(lp, plist, plen, 0644, e) < 0) {
		free(plist);
		return -1;
	}
	digest_buf(DIGEST_SHA256, plist, plen, &dg);
	digest_hex(&dg, proof_sha);
	free(plist);
	if (install_marker_write(j->c, j->w, j->m, j->treename, j->a, j->sha, j->asize, j->hex, proof_sha,
	                         j->files, j->bytes, e) < 0)
		return -1;
	return link_bin(j->c, j->w, j->m, e);
}

/* The staged tree's listing, timed (while its content syncs). */
static int
list_tree(struct publish_job *j, struct bg_sync *bs, struct err *e)
{
	int64_t tp = clock_us();

	if (bs->fd < 0)
		bg_sync_start(bs, j->tree);
	/* verify ran with HOME=staging: whatever it wrote there is not ours
	 * to publish, and the tree itself must be what was extracted */
	if (install_tree_list_known(j->tree, j->known, &j->listing, &j->listing_len, j->hex, &j->files,
	                            &j->bytes, e) < 0)
		return -1;
	j->ph[INSTALL_PH_LIST] = clock_us() - tp;
	return 0;
}

/* A pass the cache recorded for exactly this tree and this run (ident):
 * the tree is listed first, and only the same listing counts. 1 (not run
 * again, said), 0 (run it), -1 with e. */
static int
verify_recorded(struct publish_job *j, const struct verify_run *v, struct bg_sync *bs, struct err *e)
{
	char tree[65], at[64];

	if (install_verified_get(j->c, j->m, v->ident, tree, at, sizeof(at)) != 1)
		return 0;
	if (list_tree(j, bs, e) < 0)
		return -1;
	if (strcmp(tree, j->hex) != 0) {
		free(j->listing);
		j->listing = NULL;
		j->ph[INSTALL_PH_LIST] = -1;
		return 0;
	}
	note_line("%s %s: verify.argv: passed for this tree on %s%s (sealed); not run again", j->m->name,
	          j->m->version, at, v->with);
	return 1;
}

/* Verify the staged tree (unless the cache recorded a pass for it), list
 * it (while its content syncs), publish it, record a pass. */
static int
check_and_publish(struct publish_job *j, struct err *e)
{
	char entry[PATH_MAX];
	struct bg_sync bs = {.fd = -1};
	struct verify_run *v;
	struct stat st;
	int64_t tp;
	int rc = -1, reused;

	if (fs_path_join(entry, sizeof(entry), j->tree, j->m->source.bin, e) < 0)
		return -1;
	if (lstat(entry, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
		err_set(e, "install.failed", "%s: the archive has no %s", j->m->name, j->m->source.bin);
		install_details_phase(e, "extract");
		return -1;
	}
	if ((v = calloc(1, sizeof(*v))) == NULL)
		return err_set(e, "internal", "out of memory");
	install_progress_write(&j->ps, "verify", 1);
	tp = clock_us();
	install_verify_setup(j->c, j->m, entry, v);
	if ((reused = verify_recorded(j, v, &bs, e)) < 0)
		goto out;
	if (reused) {
		j->ph[INSTALL_PH_VERIFY_ARGV] = INSTALL_PH_NOT_RUN;
	} else {
		if (install_verify_run(j->m, v, j->staging, e) < 0) {
			bg_sync_wait(&bs);
			free(v);
			return -1;
		}
		j->ph[INSTALL_PH_VERIFY_ARGV] = clock_us() - tp;
		/* the staged content reaches the disk before the name does: the
		 * syncfs runs while the tree is listed, and is waited for below */
		if (list_tree(j, &bs, e) < 0)
			goto out;
	}
	tp = clock_us();
	install_progress_write(&j->ps, "publish", 1);
	install_test_pause(j->c, "publish");
	bg_sync_wait(&bs);
	if (publish_tree(j, e) < 0 || publish_marker(j, e) < 0)
		goto out;
	remove_old_trees(j->w, j->m->name, j->treename, j->staging);
	j->ph[INSTALL_PH_PUBLISH] = clock_us() - tp;
	if (!reused)
		install_verified_put(j->c, j->m, v->ident, j->hex);
	rc = 0;
out:
	bg_sync_wait(&bs);
	free(v);
	if (rc < 0)
		install_details_phase(e, "publish");
	return rc;
}

/* The install's audit record (npm-lock: the bytes of every package and
 * the lockfile's digest stand where a tarball has its artifact's). */
static void
audit_finish(struct publish_job *j, int64_t t0, int rc, const struct err *e)
{
	struct install_audit_extra ax = {
	    1, clock_ms() - t0, (int64_t)j->asize, NULL, j->sha, j->hex, NULL, NULL, NULL};

	if (rc < 0) {
		ax = (struct install_audit_extra){
		    0, clock_ms() - t0, -1, e->code ? e->code : "internal", NULL, NULL, NULL, NULL, NULL};
	} else if (j->m->source.type != MANIFEST_SRC_TARBALL) {
		ax.bytes = (int64_t)j->npminfo.bytes;
		ax.artifact_sha256 = NULL;
		ax.npm = &j->npminfo;
	}
	install_audit_event(j->c, "install.finish", j->m, &ax);
}

/* Stage, fetch, extract, verify and publish one tool, holding its lock in writable directory w. */
int
install_one(struct install_env *c, const manifest_t *m, const char *w, struct install_result *r,
            struct err *e)
{
	char staging_root[PATH_MAX], rnd[17], leaf[MANIFEST_NAME_MAX + 20];
	struct publish_job *j = calloc(1, sizeof(*j));
	int64_t t0 = clock_ms();
	int rc = -1, i;

	if (j == NULL)
		return err_set(e, "internal", "out of memory");
	j->c = c;
	j->m = m;
	j->w = w;
	for (i = 0; i < INSTALL_PH_N; i++)
		j->ph[i] = -1;
	j->ph[INSTALL_PH_PROBE] = c->probe_us;
	snprintf(j->treename, sizeof(j->treename), "%s-%s", m->version, c->platform);
	if (fs_path_join(j->tooldir, sizeof(j->tooldir), w, m->name, e) < 0 ||
	    fs_path_join(staging_root, sizeof(staging_root), w, ".staging", e) < 0 ||
	    install_mkdir(j->tooldir, 0755, e) < 0 || install_mkdir(staging_root, 0700, e) < 0) {
		free(j);
		return -1;
	}
	fs_mark_topdir(staging_root);
	install_collect_abandoned(w, m->name);
	install_collect_stale(staging_root, NULL);
	j->ps.c = c;
	j->ps.cpu = j->cpu;
	j->ps.m = m;
	j->ps.started = time(NULL);
	j->ps.fn = c->obs != NULL ? c->obs->progress : NULL;
	j->ps.arg = c->obs != NULL ? c->obs->arg : NULL;
	if (fs_path_join(j->ps.path, sizeof(j->ps.path), j->tooldir, ".progress.json", NULL) < 0)
		j->ps.path[0] = '\0'; /* no .progress.json: "" = none */
	install_progress_write(&j->ps, "stage", 1);

	fs_rand_hex(rnd, 8);
	snprintf(leaf, sizeof(leaf), "%s-%s", m->name, rnd);
	if (fs_path_join(j->staging, sizeof(j->staging), staging_root, leaf, e) < 0 ||
	    fs_path_join(j->tree, sizeof(j->tree), j->staging, "tree", e) < 0 ||
	    install_mkdir(j->staging, 0700, e) < 0 || install_mkdir(j->tree, 0755, e) < 0)
		goto out;
	if (space_check(c, m, w, j->staging, e) < 0)
		goto out;
	/* the requires (staged beside this one) are ready before verify */
	if ((m->source.type == MANIFEST_SRC_TARBALL ? stage_tarball(j, e) : stage_npm(j, e)) < 0 ||
	    install_requires_join(c, &j->ph[INSTALL_PH_REQUIRES], e) < 0 || check_and_publish(j, e) < 0 ||
	    fs_path_join(r->entry, sizeof(r->entry), j->final, m->source.bin, e) < 0)
		goto out;
	if (c->obs != NULL && c->obs->timing != NULL)
		c->obs->timing(c->obs->arg, m, j->ph, j->cpu);
	c->n.installs++;
	r->state = INSTALL_READY;
	r->installed = 1;
	snprintf(r->dir, sizeof(r->dir), "%s", w);
	snprintf(r->tree, sizeof(r->tree), "%s", j->final);
	rc = 0;
out:
	if (rc < 0)
		install_specific_code(e);
	/* a require's copies move into the cache once its dependent may go on */
	install_tree_keep_done(c, j->keep);
	install_known_free(j->known);
	free(j->listing);
	fs_rm_tree(j->staging, NULL);
	unlink(j->ps.path);
	/* a first install that failed leaves no <tools>/<name>/ behind
	 * (rmdir removes only an empty one) */
	if (rc < 0)
		rmdir(j->tooldir);
	audit_finish(j, t0, rc, e);
	free(j);
	return rc;
}
