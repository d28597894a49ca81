/*
 * prepare --prune: what the first writable tools directory and the cache
 * hold that no manifest of the set references, removed under the install
 * locks (install.h says what goes and what stays).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/digest.h"
#include "base/fs.h"
#include "install/install.h"
#include "install/install_int.h"
#include "pkg/cache.h"

/* "<alg>-<hex>" of every digest some manifest pins, and "<name>-<version>-"
 * of every manifest: a growable table, at most PRUNE_REFS_MAX (the set's
 * 128 manifests of lockfiles of a few hundred packages each fit many
 * times). */
#define PRUNE_REFS_MAX 200000
#define PRUNE_REF_LEN 140

struct prune {
	struct install_env *c;
	struct install_prune_report *r;
	char (*ref)[PRUNE_REF_LEN];
	size_t n, cap;
	int busy; /* another process holds an install lock: the cache's blobs and trees stay */
	time_t now;
};

static void
ref_add(struct prune *p, const char *s)
{
	void *nr;

	if (p->n == p->cap) {
		if (p->cap >= PRUNE_REFS_MAX ||
		    (nr = realloc(p->ref, (p->cap ? p->cap * 2 : 256) * PRUNE_REF_LEN)) == NULL)
			return;
		p->ref = nr;
		p->cap = p->cap ? p->cap * 2 : 256;
	}
	snprintf(p->ref[p->n++], PRUNE_REF_LEN, "%s", s);
}

static void
ref_digest(void *arg, const struct digest *d)
{
	struct prune *p = arg;
	char hex[DIGEST_HEX_MAX], s[PRUNE_REF_LEN];

	snprintf(s, sizeof(s), "%s-%s", digest_name(d->alg), digest_hex(d, hex));
	ref_add(p, s);
	/* the blob an alias names */
	if (d->alg != DIGEST_SHA256 && p->c->cache_dir[0] && cache_sha256_of(p->c->cache_dir, d, hex)) {
		snprintf(s, sizeof(s), "sha256-%s", hex);
		ref_add(p, s);
	}
}

/* 1 when s starts with (prefix) or equals a reference. */
static int
ref_has(const struct prune *p, const char *s, int prefix)
{
	size_t i, k;

	for (i = 0; i < p->n; i++) {
		k = strlen(p->ref[i]);
		if (prefix ? strncmp(s, p->ref[i], k) == 0 : strcmp(s, p->ref[i]) == 0)
			return 1;
	}
	return 0;
}

/* Every manifest of the set and what it pins. A manifest that does not
 * load references nothing, so a broken set would empty the cache: it stops
 * the prune instead. */
static int
collect_refs(struct prune *p, struct err *e)
{
	struct manifest_set *ms = p->c->ms;
	const manifest_t *m;
	char s[PRUNE_REF_LEN];
	int i, k;

	for (i = 0; i < ms->n; i++) {
		if ((m = manifest_get(ms, ms->ent[i].name, e)) == NULL)
			return -1;
		snprintf(s, sizeof(s), "%s-%s-", m->name, m->version);
		ref_add(p, s);
		for (k = 0; k < m->source.nart; k++)
			if (m->source.art[k].sha256[0] != '\0') {
				snprintf(s, sizeof(s), "sha256-%s", m->source.art[k].sha256);
				ref_add(p, s);
			}
		if (m->source.type == MANIFEST_SRC_NPM_LOCK &&
		    install_npm_digests(p->c, m, ref_digest, p, e) < 0)
			return -1;
	}
	return p->n < p->cap || p->cap < PRUNE_REFS_MAX ? 0
	                                                : err_set(e, "internal", "too many pins to prune");
}

/* Remove name in dfd (or only count it, dry), said with its path. */
static void
drop(struct prune *p, int dfd, const char *dir, const char *name)
{
	char path[PATH_MAX];
	uint64_t bytes = 0, files = 0;
	struct err e = {0};

	if (fs_du(dfd, name, &bytes, &files, &e) != 0)
		return;
	if (!p->r->dry && fs_rm_treeat(dfd, name, &e) != 0)
		return;
	p->r->bytes += bytes;
	p->r->entries++;
	if (p->r->say != NULL && fs_path_join(path, sizeof(path), dir, name, NULL) == 0)
		p->r->say(p->r->arg, path, bytes);
}

/* The entries of dir, each to fn; a directory that is not there is empty. */
static int
each(struct prune *p, const char *dir, void (*fn)(struct prune *, int, const char *, const char *),
     struct err *e)
{
	char **names;
	size_t i, n;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (dfd < 0)
		return errno == ENOENT ? 0 : err_sys(e, "io.error", errno, "%s: %s", dir, strerror(errno));
	if (fs_dir_names(dfd, dir, "io.error", &names, &n, e) != 0) {
		close(dfd);
		return -1;
	}
	for (i = 0; i < n; i++)
		fn(p, dfd, dir, names[i]);
	free(names);
	close(dfd);
	return 0;
}

static void
tmp_entry(struct prune *p, int dfd, const char *dir, const char *name)
{
	struct stat st;

	if (strncmp(name, ".tmp-", 5) == 0 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    install_tmp_stale(dfd, name, &st, p->now))
		drop(p, dfd, dir, name);
}

/* trees/: extracted trees by "<alg>-<hex>-<variant>", verify notes by
 * "<name>-<version>-<platform>-<libc>.verified". */
static void
tree_entry(struct prune *p, int dfd, const char *dir, const char *name)
{
	if (name[0] == '.')
		tmp_entry(p, dfd, dir, name);
	else if (!p->busy && !ref_has(p, name, 1))
		drop(p, dfd, dir, name);
}

/* the cache: blobs by their sha256 hex, aliases by "<alg>-<hex>" */
static void
cache_entry(struct prune *p, int dfd, const char *dir, const char *name)
{
	char s[PRUNE_REF_LEN];

	if (name[0] == '.') {
		tmp_entry(p, dfd, dir, name);
		return;
	}
	/* only what the cache's layout names: a blob, an alias */
	if (p->busy || !((strlen(name) == 64 && strspn(name, "0123456789abcdef") == 64) ||
	                 (strncmp(name, "sha", 3) == 0 && strchr(name, '-') != NULL)))
		return;
	snprintf(s, sizeof(s), "%s%s", strlen(name) == 64 && strchr(name, '-') == NULL ? "sha256-" : "",
	         name);
	if (!ref_has(p, s, 0))
		drop(p, dfd, dir, name);
}

/* <w>/<tool>/: every tree but the one its marker names, under its lock. */
static void
tool_entry(struct prune *p, int dfd, const char *w, const char *name)
{
	struct install_marker mk;
	char dir[PATH_MAX], lock[PATH_MAX], **names;
	struct err e = {0};
	size_t i, n;
	int fd, td;

	if (name[0] == '.' || strcmp(name, "bin") == 0 || manifest_get(p->c->ms, name, &e) == NULL ||
	    install_marker_read(w, name, &mk, &e) != 0)
		return;
	if (fs_path_join(dir, sizeof(dir), w, name, NULL) < 0 ||
	    (size_t)snprintf(lock, sizeof(lock), "%s/.locks/%s.lock", w, name) >= sizeof(lock))
		return;
	if ((fd = open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
		close(fd);
		if (p->r->held != NULL)
			p->r->held(p->r->arg, name);
		return;
	}
	if ((td = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0 &&
	    fs_dir_names(td, dir, "io.error", &names, &n, &e) == 0) {
		for (i = 0; i < n; i++)
			if (names[i][0] != '.' && strcmp(names[i], mk.tree) != 0)
				drop(p, td, dir, names[i]);
		free(names);
	}
	if (td >= 0)
		close(td);
	if (fd >= 0)
		close(fd);
}

/* <w>/.staging/<tool>-<random>: an installer's, while it holds its lock */
static void
staging_entry(struct prune *p, int dfd, const char *dir, const char *name)
{
	char tool[NAME_MAX + 1], w[PATH_MAX];
	const char *dash = strrchr(name, '-');

	if (name[0] == '.' || dash == NULL || dash == name || fs_dirname(dir, w, sizeof(w)) != 0)
		return;
	snprintf(tool, sizeof(tool), "%.*s", (int)(dash - name), name);
	if (install_lock_held(w, tool) != 1)
		drop(p, dfd, dir, name);
}

/* busy when another process holds some install lock of w */
static void
lock_entry(struct prune *p, int dfd, const char *dir, const char *name)
{
	char tool[NAME_MAX + 1], w[PATH_MAX];
	size_t k = strlen(name);

	if (k > 5 && strcmp(name + k - 5, ".lock") == 0 && fs_dirname(dir, w, sizeof(w)) == 0) {
		snprintf(tool, sizeof(tool), "%.*s", (int)(k - 5), name);
		if (install_lock_held(w, tool) == 1)
			p->busy = 1;
	}
}

int
install_prune(struct install_env *c, struct install_prune_report *r, struct err *e)
{
	struct prune p = {c, r, NULL, 0, 0, 0, time(NULL)};
	char sub[PATH_MAX];
	const char *w;
	int rc = -1;

	if (c->chain.writable < 0)
		return err_set(e, "install.read_only", "no writable tools directory to prune");
	w = c->chain.d[c->chain.writable].path;
	if (collect_refs(&p, e) != 0)
		goto out;
	if (fs_path_join(sub, sizeof(sub), w, ".locks", e) < 0 || each(&p, sub, lock_entry, e) != 0 ||
	    each(&p, w, tool_entry, e) != 0 || fs_path_join(sub, sizeof(sub), w, ".staging", e) < 0 ||
	    each(&p, sub, staging_entry, e) != 0)
		goto out;
	if (p.busy && r->held != NULL)
		r->held(r->arg, NULL);
	if (c->cache_dir[0] != '\0' && (each(&p, c->cache_dir, cache_entry, e) != 0 ||
	                                fs_path_join(sub, sizeof(sub), c->cache_dir, "trees", e) < 0 ||
	                                each(&p, sub, tree_entry, e) != 0))
		goto out;
	rc = 0;
out:
	free(p.ref);
	return rc;
}
