/*
 * The cache's extracted trees for tarball artifacts (the contract is in
 * install.h; the cache's rules in pkg/cache.h).
 */
#include "pkg/cache.h"
#include "install/install_int.h"
#include "base/clock.h"
#include "pkg/arc.h"
#include "pkg/npmlock.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The key: the artifact's sha256 and how install_one extracts it (strict
 * modes, strip_components). */
static int
tree_key(const manifest_t *m, const struct manifest_artifact *a, char key[CACHE_KEY_MAX])
{
	struct digest d;
	struct err e = {0};
	char variant[32];

	if (m->unpinned || a->sha256[0] == '\0' ||
	    digest_parse_hex(DIGEST_SHA256, a->sha256, &d, "internal", &e) < 0)
		return -1;
	snprintf(variant, sizeof(variant), "tar1-s%d", m->source.strip_components);
	return cache_tree_key(&d, variant, key);
}

/* A writable cache, or none (the tree cache is then not used). */
static int
usable(const struct install_env *c)
{
	return c->cache_dir[0] != '\0' && access(c->cache_dir, W_OK) == 0;
}

struct place_tap {
	struct install_known *known;
	int paused;
	const struct install_env *c;
};

static void
place_tap(void *arg, const char *name, const struct stat *st, const unsigned char sha256[32])
{
	struct place_tap *t = arg;

	install_known_add(t->known, "", name, st, sha256);
	if (!t->paused) {
		t->paused = 1;
		install_test_pause(t->c, "place");
	}
}

int
install_tree_place(struct install_env *c, const manifest_t *m, const struct manifest_artifact *a,
                   const char *staging, struct install_known *known, uint64_t *asize, struct err *e)
{
	char key[CACHE_KEY_MAX], meta[64], label[MANIFEST_VERSION_MAX + 300], kf[PATH_MAX];
	struct place_tap t = {known, 0, c};
	struct cache_placed pd = {0};
	int fd, rc;

	if (!usable(c) || tree_key(m, a, key) < 0 || !cache_tree_has(c->cache_dir, key))
		return 0;
	if ((fd = open(staging, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return err_set(e, "io.error", "%s: %m", staging);
	snprintf(label, sizeof(label), "%s %s", m->name, m->version);
	meta[0] = '\0';
	install_cache_key(c, kf, sizeof(kf));
	rc = cache_tree_place(c->cache_dir, kf, key, fd, "tree", label, place_tap, &t, meta, sizeof(meta),
	                      &pd, e);
	close(fd);
	if (rc <= 0)
		return rc;
	*asize = strncmp(meta, "size=", 5) == 0 ? strtoull(meta + 5, NULL, 10) : 0;
	note_line("%s: placed %" PRIu64 " files from the extracted tree in %s/trees/%s (%s; no download, no "
	          "decompression)",
	          label, pd.files, c->cache_dir, key,
	          pd.proved     ? "the kept tree proved unchanged by its stat proof: copied, not hashed again"
	          : pd.resealed ? "each copy hashed against its sealed listing, and the entry given a stat "
	                          "proof for the next placement"
	                        : "each copy hashed against its sealed listing");
	return 1;
}

/* The digest extraction recorded for rel (a cache_sum_fn over the settled
 * known files). */
static int
known_sum(void *arg, const char *rel, const struct stat *st, unsigned char sha256[32])
{
	return install_known_get(arg, rel, st, sha256);
}

/* The extraction's digests and copies of a tree to keep; once its walk is
 * done, the store that moves the copies in (install_tree_keep_end). */
struct install_keep {
	struct install_known *known;
	struct cache_sums sums;
	char copy[24]; /* the copy of the file reported next */
	struct cache_store *store;
	char label[MANIFEST_VERSION_MAX + 300], where[PATH_MAX + CACHE_KEY_MAX + 8];
	struct install_keep *next; /* install_env.kept */
};

static void
keep_copy(void *arg, const char *name, const char *copy)
{
	struct install_keep *k = arg;

	snprintf(k->copy, sizeof(k->copy), "%s", copy);
}

static void
keep_file(void *arg, const char *name, const struct stat *st, const unsigned char sha256[32])
{
	struct install_keep *k = arg;

	install_known_add(k->known, "", name, st, sha256);
	cache_sums_add_copy(&k->sums, name, st, sha256, k->copy);
	k->copy[0] = '\0';
}

struct install_keep *
install_tree_keep_begin(struct install_env *c, const manifest_t *m, const struct manifest_artifact *a,
                        struct install_known *known, struct arc_opts *ao)
{
	char key[CACHE_KEY_MAX];
	struct install_keep *k;

	if (!usable(c) || c->keep_no_trees || tree_key(m, a, key) < 0 || cache_tree_has(c->cache_dir, key) ||
	    (k = calloc(1, sizeof(*k))) == NULL)
		return NULL;
	k->known = known;
	ao->copy_dirfd = cache_sums_copies(&k->sums, c->cache_dir);
	ao->on_copy = keep_copy;
	ao->on_file = keep_file;
	ao->file_ctx = k;
	return k;
}

void
install_tree_keep_end(struct install_keep *k)
{
	if (k == NULL)
		return;
	if (k->store != NULL && cache_tree_store_end(k->store))
		note_line("%s: kept the extracted tree in %s for the next tools directory", k->label,
		          k->where);
	cache_sums_free(&k->sums);
	free(k);
}

void
install_tree_keep_done(struct install_env *c, struct install_keep *k)
{
	if (k != NULL && k->store != NULL && c->keep_later) {
		k->next = c->kept;
		c->kept = k;
		return;
	}
	install_tree_keep_end(k);
}

void
install_tree_keeps_end(struct install_env *c)
{
	struct install_keep *k;

	while ((k = c->kept) != NULL) {
		c->kept = k->next;
		install_tree_keep_end(k);
	}
}

void
install_tree_keep(struct install_env *c, const manifest_t *m, const struct manifest_artifact *a,
                  const char *tree, uint64_t asize, const struct install_known *known, struct install_keep *k)
{
	char key[CACHE_KEY_MAX], meta[64], label[MANIFEST_VERSION_MAX + 300], kf[PATH_MAX];
	int fd, kept;

	if (!usable(c) || c->keep_no_trees || tree_key(m, a, key) < 0 || cache_tree_has(c->cache_dir, key))
		return;
	if ((fd = open(tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return;
	snprintf(meta, sizeof(meta), "size=%" PRIu64, asize);
	install_cache_key(c, kf, sizeof(kf));
	snprintf(label, sizeof(label), "%s %s", m->name, m->version);
	if (k != NULL) {
		/* the tree is read now; its copies move in at install_tree_keep_end */
		snprintf(k->label, sizeof(k->label), "%s", label);
		snprintf(k->where, sizeof(k->where), "%s/trees/%s", c->cache_dir, key);
		k->store = cache_tree_store_begin(c->cache_dir, kf, key, fd, meta, label, cache_sums_get,
		                                  &k->sums, &kept);
	} else {
		kept = cache_tree_store(c->cache_dir, kf, key, fd, meta, label, known_sum, (void *)known);
	}
	if (kept)
		note_line("%s: kept the extracted tree in %s/trees/%s for the next tools directory", label,
		          c->cache_dir, key);
	close(fd);
}

/* ---- verify.argv passes, sealed ------------------------------------------------ */

/* The note of m's pass for the platform and libc (one each, so images of
 * either kind sharing a cache keep theirs):
 * <name>-<version>-<platform>-<libc>.verified. */
static int
verified_name(const struct install_env *c, const manifest_t *m, char *out, size_t cap)
{
	const char *libc = npmlock_detect_libc(NULL);

	return (size_t)snprintf(out, cap, "%s-%s-%s-%s.verified", m->name, m->version, c->platform,
	                        libc ? libc : "none") < cap
	           ? 0
	           : -1;
}

int
install_verified_get(struct install_env *c, const manifest_t *m, const char *ident, char tree[65], char *at,
                     size_t atcap)
{
	char name[MANIFEST_NAME_MAX + MANIFEST_VERSION_MAX + 40], *body, kf[PATH_MAX];
	const char *why = NULL, *p;
	size_t il = strlen(ident);
	int rc;

	if (!usable(c) || m->unpinned || c->force || ident[0] == '\0' ||
	    verified_name(c, m, name, sizeof(name)) < 0 || (body = malloc(CACHE_NOTE_MAX + 1)) == NULL)
		return 0;
	install_cache_key(c, kf, sizeof(kf));
	rc = cache_note_get(c->cache_dir, kf, name, body, CACHE_NOTE_MAX + 1, &why);
	if (rc < 0)
		warnx_line(
		    "cache: the verify.argv record of %s %s (%s/trees/%s) is not used: %s; verify.argv runs",
		    m->name, m->version, c->cache_dir, name, why);
	/* "tree <hex>\n" <ident> "at <time>\n", exactly */
	p = body + 5 + 64 + 1;
	if (rc <= 0 || strncmp(body, "tree ", 5) != 0 || strlen(body) < 5 + 64 + 1 || body[5 + 64] != '\n' ||
	    strncmp(p, ident, il) != 0 || strncmp(p + il, "at ", 3) != 0 || strchr(p + il, '\n') == NULL ||
	    strchr(p + il, '\n')[1] != '\0') {
		free(body);
		return 0;
	}
	memcpy(tree, body + 5, 64);
	tree[64] = '\0';
	snprintf(at, atcap, "%.*s", (int)(strchr(p + il, '\n') - (p + il + 3)), p + il + 3);
	free(body);
	return 1;
}

void
install_verified_put(struct install_env *c, const manifest_t *m, const char *ident, const char *tree)
{
	char name[MANIFEST_NAME_MAX + MANIFEST_VERSION_MAX + 40], at[32], *body, kf[PATH_MAX];
	int n;

	if (!usable(c) || c->keep_no_trees || m->unpinned || ident[0] == '\0' ||
	    verified_name(c, m, name, sizeof(name)) < 0 || (body = malloc(CACHE_NOTE_MAX)) == NULL)
		return;
	clock_iso(clock_wall_ms(), 0, at, sizeof(at));
	n = snprintf(body, CACHE_NOTE_MAX, "tree %s\n%sat %s\n", tree, ident, at);
	if (n > 0 && (size_t)n < CACHE_NOTE_MAX)
		cache_note_put(c->cache_dir, (install_cache_key(c, kf, sizeof(kf)), kf), name, body,
		               (size_t)n);
	free(body);
}
