/*
 * Published trees: the marker that vouches for one, its content listing,
 * and the fast path that proves a tree unchanged without reading it.
 */
#include "install/install_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/proof.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/digest.h"
#include "base/fs.h"
#include "base/json.h"

/* ---- markers ------------------------------------------------------------ */

static void
copy_str(const struct json_val *o, const char *k, char *dst, size_t cap)
{
	const char *s = json_get_str(o, k);

	snprintf(dst, cap, "%s", s ? s : "");
}

int
install_marker_read(const char *dir, const char *name, struct install_marker *mk, struct err *e)
{
	char path[PATH_MAX], *buf = NULL;
	struct json_doc doc = {0};
	const struct json_val *v;
	size_t len;

	struct stat st;
	ssize_t got;
	int fd;

	memset(mk, 0, sizeof(*mk));
	if (fs_path_join(path, sizeof(path), dir, name, e) < 0 ||
	    fs_path_join(path, sizeof(path), path, ".installed.json", e) < 0)
		return -1;
	/* open + fstat + read + close: the fast path counts syscalls */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return err_sys(e, errno == ENOENT ? "not_found" : "io.error", errno, "%s: %s", path,
		               strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    st.st_size > INSTALL_MARKER_MAX || (buf = malloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		return err_set(e, "io.error", "%s: not a marker file", path);
	}
	got = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (got != (ssize_t)st.st_size) {
		free(buf);
		return err_set(e, "io.error", "%s: short read", path);
	}
	len = (size_t)got;
	buf[len] = '\0';
	mk->uid = st.st_uid;
	mk->mode = st.st_mode;
	if (json_parse(&doc, buf, len, NULL, e) < 0) {
		free(buf);
		return -1;
	}
	copy_str(doc.root, "name", mk->name, sizeof(mk->name));
	copy_str(doc.root, "version", mk->version, sizeof(mk->version));
	copy_str(doc.root, "platform", mk->platform, sizeof(mk->platform));
	copy_str(doc.root, "binary", mk->binary, sizeof(mk->binary));
	copy_str(doc.root, "bin", mk->bin, sizeof(mk->bin));
	copy_str(doc.root, "tree", mk->tree, sizeof(mk->tree));
	copy_str(doc.root, "manifest_sha256", mk->manifest_sha256, sizeof(mk->manifest_sha256));
	copy_str(doc.root, "tree_sha256", mk->tree_sha256, sizeof(mk->tree_sha256));
	copy_str(doc.root, "proof_sha256", mk->proof_sha256, sizeof(mk->proof_sha256));
	copy_str(doc.root, "installed_at", mk->installed_at, sizeof(mk->installed_at));
	if ((v = json_get(doc.root, "files")) && v->type == JSON_NUMBER)
		mk->files = (uint64_t)v->u.num.d;
	if ((v = json_get(doc.root, "bytes")) && v->type == JSON_NUMBER)
		mk->bytes = (uint64_t)v->u.num.d;
	json_free(&doc);
	free(buf);
	if (strcmp(mk->name, name) != 0 || mk->tree[0] == '\0' || strchr(mk->tree, '/') != NULL ||
	    strcmp(mk->tree, ".") == 0 || strcmp(mk->tree, "..") == 0 || mk->bin[0] == '\0' ||
	    strstr(mk->bin, "..") != NULL || mk->bin[0] == '/')
		return err_set(e, "io.error", "%s: not a valid marker", path);
	return 0;
}

/* ---- tree listings --------------------------------------------------------- */

struct tlist {
	struct buf b;
	uint64_t files, bytes;
	unsigned char *io;                 /* read buffer, TREE_IO bytes */
	const struct install_known *known; /* digests taken at extraction */
};

/* A listing over this is a hostile tree (npm trees of big CLIs are ~2 MiB). */
#define TREE_LIST_MAX (64u << 20)
#define TREE_IO 131072

static int
tl_put(struct tlist *t, const char *s, size_t n, struct err *e)
{
	if (buf_put(&t->b, s, n) == 0)
		return 0;
	if (n > t->b.max - t->b.len)
		return err_set(e, "install.failed", "tree listing larger than %u bytes", TREE_LIST_MAX);
	return err_set(e, "internal", "out of memory");
}

/* head, then rel with '\\' and newlines escaped, then '\n' */
static int
tl_line(struct tlist *t, const char *head, const char *rel, struct err *e)
{
	const char *p, *run;

	if (tl_put(t, head, strlen(head), e) < 0)
		return -1;
	for (run = p = rel;; p++) {
		if (*p != '\\' && *p != '\n' && *p != '\0')
			continue;
		if (tl_put(t, run, (size_t)(p - run), e) < 0)
			return -1;
		if (*p == '\0')
			break;
		if (tl_put(t, *p == '\\' ? "\\\\" : "\\n", 2, e) < 0)
			return -1;
		run = p + 1;
	}
	return tl_put(t, "\n", 1, e);
}

/* The sha256 and size of regular file name in dfd, read through t->io. */
static int
tl_hash(struct tlist *t, int dfd, const char *name, const char *rel, struct digest *dg, uint64_t *size,
        struct err *e)
{
	struct digest_ctx dc;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return err_sys(e, "io.error", errno, "%s: %s", rel, strerror(errno));
	*size = 0;
	digest_init(&dc, DIGEST_SHA256);
	while ((r = read(fd, t->io, TREE_IO)) > 0) {
		digest_update(&dc, t->io, (size_t)r);
		*size += (uint64_t)r;
	}
	close(fd);
	if (r < 0)
		return err_sys(e, "io.error", errno, "%s: %s", rel, strerror(errno));
	digest_final(&dc, dg);
	return 0;
}

/* One line per entry (fs_walk's visitor). */
static int
tl_visit(void *arg, struct fs_ent *ent, struct err *e)
{
	const struct stat *st = &ent->st;
	const char *rel = ent->rel, *name = ent->name;
	int dfd = ent->dfd;
	struct tlist *t = arg;
	char line[200], hex[DIGEST_HEX_MAX], target[PATH_MAX];
	unsigned mode = (unsigned)(st->st_mode & 07777);
	struct digest dg;
	uint64_t size = (uint64_t)st->st_size;
	ssize_t r;

	if (S_ISDIR(st->st_mode)) {
		snprintf(line, sizeof(line), "d %04o - - ", mode);
		return tl_line(t, line, rel, e);
	}
	if (S_ISREG(st->st_mode)) {
		if (install_known_get(t->known, rel, st, dg.v)) {
			dg.alg = DIGEST_SHA256;
			dg.len = 32;
		} else if (tl_hash(t, dfd, name, rel, &dg, &size, e) < 0) {
			return -1;
		}
		digest_hex(&dg, hex);
		t->files++;
		t->bytes += size;
		snprintf(line, sizeof(line), "f %04o %llu %s ", mode, (unsigned long long)size, hex);
		return tl_line(t, line, rel, e);
	}
	if (S_ISLNK(st->st_mode)) {
		if ((r = readlinkat(dfd, name, target, sizeof(target) - 1)) < 0)
			return err_sys(e, "io.error", errno, "%s: %s", rel, strerror(errno));
		digest_buf(DIGEST_SHA256, target, (size_t)r, &dg);
		digest_hex(&dg, hex);
		snprintf(line, sizeof(line), "l %04o %zd %s ", 0777u, r, hex);
		return tl_line(t, line, rel, e);
	}
	return err_set(e, "install.failed", "%s: not a file, directory or symlink", rel);
}

int
install_tree_list(const char *root, char **text, size_t *len, char hex[65], uint64_t *files, uint64_t *bytes,
                  struct err *e)
{
	return install_tree_list_known(root, NULL, text, len, hex, files, bytes, e);
}

int
install_tree_list_known(const char *root, const struct install_known *k, char **text, size_t *len,
                        char hex[65], uint64_t *files, uint64_t *bytes, struct err *e)
{
	struct tlist t = {.b = BUF_INIT(TREE_LIST_MAX), .known = k};
	struct digest dg;
	int dfd, rc;

	dfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return err_sys(e, "io.error", errno, "%s: %s", root, strerror(errno));
	if ((t.io = malloc(TREE_IO)) == NULL) {
		close(dfd);
		return err_set(e, "internal", "out of memory");
	}
	rc = fs_walk(dfd, 0, "install.failed", tl_visit, &t, e);
	close(dfd);
	free(t.io);
	if (rc == 0)
		rc = tl_put(&t, "", 0, e);
	if (rc < 0) {
		buf_free(&t.b);
		return -1;
	}
	digest_buf(DIGEST_SHA256, t.b.p, t.b.len, &dg);
	digest_hex(&dg, hex);
	if (files)
		*files = t.files;
	if (bytes)
		*bytes = t.bytes;
	if (text != NULL) {
		*text = (char *)t.b.p;
		*len = t.b.len;
	} else {
		buf_free(&t.b);
	}
	return 0;
}

/* ---- the fast path ------------------------------------------------------ */

/* Root-owned and not writable by us: a tree we cannot change, trusted on its
 * marker alone (the fast path needs no proof list for it). */
static int
root_trusted(const char *dir, const char *name, const char *tree, const struct install_marker *mk)
{
	char p[PATH_MAX];
	struct stat st;

	/* root itself can write anything: it re-proves the tree instead. A
	 * root-owned directory that is not group/world-writable cannot be
	 * written by another uid (which has no CAP_DAC_OVERRIDE). */
	if (geteuid() == 0 || mk->uid != 0 || (mk->mode & 022))
		return 0;
	if (lstat(tree, &st) != 0 || st.st_uid != 0 || (st.st_mode & 022) || !S_ISDIR(st.st_mode))
		return 0;
	if (fs_path_join(p, sizeof(p), dir, name, NULL) < 0 || lstat(p, &st) != 0 || st.st_uid != 0 ||
	    (st.st_mode & 022))
		return 0;
	return 1;
}

/*
 * The marker of name in dir, parsed once per environment: a marker whose inode,
 * size, mtime and ctime are unchanged has unchanged content (a rewrite or a
 * replacement moves the ctime, which nobody can set back), so a server
 * calling ensure() per request does one stat instead of a read and a parse.
 */
static int
marker_cached(struct install_env *c, const char *dir, const char *name, struct install_marker *mk,
              struct install_marker_slot **slotp)
{
	char path[PATH_MAX];
	struct stat st;
	struct err e = {0};
	int i, slot = -1;

	*slotp = NULL;
	if (fs_path_join(path, sizeof(path), dir, name, NULL) < 0 ||
	    fs_path_join(path, sizeof(path), path, ".installed.json", NULL) < 0 || lstat(path, &st) != 0)
		return -1;
	for (i = 0; i < INSTALL_MARKER_CACHE; i++) {
		struct install_marker_slot *s = &c->mcache[i];
		if (s->used && s->dev == st.st_dev && s->ino == st.st_ino && s->size == st.st_size &&
		    s->mtime_ns == (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec &&
		    s->ctime_ns == (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec &&
		    strcmp(s->path, path) == 0) {
			*mk = s->mk;
			*slotp = s;
			return 0;
		}
	}
	if (install_marker_read(dir, name, mk, &e) < 0)
		return -1;
	for (i = 0; i < INSTALL_MARKER_CACHE && slot < 0; i++)
		if (!c->mcache[i].used || strcmp(c->mcache[i].path, path) == 0)
			slot = i;
	if (slot < 0)
		slot = (int)(st.st_ino % INSTALL_MARKER_CACHE);
	{
		struct install_marker_slot *s = &c->mcache[slot];
		install_proof_cache_put(s->proof_ref);
		s->proof_ref = NULL;
		s->proof = NULL;
		s->proof_len = 0;
		s->used = 1;
		s->dev = st.st_dev;
		s->ino = st.st_ino;
		s->size = st.st_size;
		s->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		s->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
		snprintf(s->path, sizeof(s->path), "%s", path);
		s->mk = *mk;
		/* the fstat of the read saw the same file only if nothing moved */
		if (mk->uid != st.st_uid || mk->mode != st.st_mode)
			s->used = 0;
		else
			*slotp = s;
	}
	return 0;
}

/*
 * The proof list the marker names, read once per marker: the copy kept in
 * the marker's slot was checked against the marker's sha256, so it stays
 * what the marker vouches for whatever happens to the file later. Across
 * environments (serve makes one per request) the process-wide cache
 * (install_proof_cache_get) spares reading and hashing it again. Returns
 * the list, *ref to release when not kept in the slot, or NULL.
 */
static const char *
proof_list(const char *dir, const char *name, const struct install_marker *mk,
           struct install_marker_slot *slot, size_t *len, struct install_proof_ref **ref)
{
	char path[PATH_MAX];
	const char *buf;

	*ref = NULL;
	if (slot != NULL && slot->proof != NULL) {
		*len = slot->proof_len;
		return slot->proof;
	}
	if (fs_path_join(path, sizeof(path), dir, name, NULL) < 0 ||
	    fs_path_join(path, sizeof(path), path, ".installed.proof", NULL) < 0)
		return NULL;
	if ((buf = install_proof_cache_get(path, mk->proof_sha256, len, ref)) == NULL)
		return NULL;
	if (slot != NULL) {
		slot->proof = buf;
		slot->proof_len = *len;
		slot->proof_ref = *ref;
		*ref = NULL;
	}
	return buf;
}

/* Is the tool ready in dir? 1 yes (r filled), 0 no. */
static int
ready_in(struct install_env *c, const manifest_t *m, const char *dir, struct install_result *r)
{
	struct install_marker mk;
	struct install_marker_slot *slot;
	char tree[PATH_MAX], entry[PATH_MAX], hex[FS_HEX_LEN];
	struct stat st;
	struct err e = {0};

	if (marker_cached(c, dir, m->name, &mk, &slot) < 0)
		return 0;
	if (!ct_equal(mk.manifest_sha256, m->sha256, 64) || strcmp(mk.platform, c->platform) != 0 ||
	    strcmp(mk.version, m->version) != 0)
		return 0;
	if (fs_path_join(tree, sizeof(tree), dir, m->name, NULL) < 0 ||
	    fs_path_join(tree, sizeof(tree), tree, mk.tree, NULL) < 0 ||
	    fs_path_join(entry, sizeof(entry), tree, m->source.bin, NULL) < 0)
		return 0;
	if (stat(entry, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	if (!root_trusted(dir, m->name, tree, &mk)) {
		/* a tree we (or our user) can write: prove it unchanged by
		 * the proof list, else by the content digest */
		int same = 0;
		if (mk.proof_sha256[0] != '\0') {
			size_t plen = 0;
			struct install_proof_ref *ref;
			const char *pl = proof_list(dir, m->name, &mk, slot, &plen, &ref);
			same = pl != NULL && proof_check(tree, pl, plen) == 1;
			install_proof_cache_put(ref);
		}
		if (!same && (install_tree_list(tree, NULL, NULL, hex, NULL, NULL, &e) < 0 ||
		              !ct_equal(hex, mk.tree_sha256, 64)))
			return 0;
	}
	r->state = INSTALL_READY;
	snprintf(r->dir, sizeof(r->dir), "%s", dir);
	snprintf(r->tree, sizeof(r->tree), "%s", tree);
	snprintf(r->entry, sizeof(r->entry), "%s", entry);
	return 1;
}

int
install_fast_path(struct install_env *c, const manifest_t *m, struct install_result *r, struct err *e)
{
	int i;

	for (i = 0; i < c->chain.n; i++)
		if (c->chain.d[i].exists && c->chain.d[i].safe && ready_in(c, m, c->chain.d[i].path, r))
			return 1;
	return 0;
}

static void
write_sbom_row(struct json_w *w, const struct install_env *c, const manifest_t *m,
               const struct manifest_artifact *a, const char *sha)
{
	char purl[MANIFEST_URL_MAX + 200];

	json_w_obj(w);
	json_w_kstr(w, "name", m->name);
	json_w_kstr(w, "version", m->version);
	snprintf(purl, sizeof(purl), "pkg:generic/%s@%s?download_url=%s", m->name, m->version, a->url);
	json_w_kstr(w, "purl", purl);
	json_w_kstr(w, "sha256", sha);
	json_w_kstr(w, "url", a->url);
	/* where the bytes came from, when this install fetched or found them
	 * (a tree placed from the cache's extracted trees names none) */
	if (strcmp(c->src_sha, sha) == 0)
		json_w_kstr(w, "source", c->src);
	json_w_end(w);
}

int
install_marker_write(struct install_env *c, const char *w, const manifest_t *m, const char *treename,
                     const struct manifest_artifact *a, const char *sha, uint64_t size, const char *tree_sha,
                     const char *proof_sha, uint64_t files, uint64_t bytes, struct err *e)
{
	struct json_w j;
	char path[PATH_MAX], ts[32];
	int rc;

	if (fs_path_join(path, sizeof(path), w, m->name, e) < 0 ||
	    fs_path_join(path, sizeof(path), path, ".installed.json", e) < 0)
		return -1;
	clock_iso(clock_wall_ms(), 0, ts, sizeof(ts));
	json_w_init(&j, INSTALL_MARKER_MAX);
	json_w_obj(&j);
	json_w_kint(&j, "schema", 1);
	json_w_kstr(&j, "name", m->name);
	json_w_kstr(&j, "version", m->version);
	json_w_kstr(&j, "platform", c->platform);
	json_w_kstr(&j, "binary", m->binary);
	json_w_kstr(&j, "bin", m->source.bin);
	json_w_kstr(&j, "tree", treename);
	json_w_kstr(&j, "source_type", m->source.type == MANIFEST_SRC_TARBALL ? "tarball" : "npm-lock");
	json_w_kstr(&j, "manifest", m->file);
	json_w_kstr(&j, "manifest_sha256", m->sha256);
	json_w_key(&j, "artifacts");
	json_w_arr(&j);
	if (a != NULL) {
		json_w_obj(&j);
		json_w_kstr(&j, "url", a->url);
		json_w_kstr(&j, "sha256", sha);
		json_w_kint(&j, "size", (int64_t)size);
		json_w_end(&j);
	}
	json_w_end(&j);
	json_w_kstr(&j, "tree_sha256", tree_sha);
	json_w_kstr(&j, "proof_sha256", proof_sha);
	json_w_kint(&j, "files", (int64_t)files);
	json_w_kint(&j, "bytes", (int64_t)bytes);
	json_w_kstr(&j, "installed_at", ts);
	json_w_kint(&j, "installed_at_unix", (int64_t)time(NULL));
	json_w_kstr(&j, "installer", INSTALL_INSTALLER);
	json_w_kbool(&j, "unpinned", m->unpinned);
	json_w_key(&j, "sbom");
	json_w_arr(&j);
	if (a != NULL)
		write_sbom_row(&j, c, m, a, sha);
	else if (m->source.type == MANIFEST_SRC_NPM_LOCK)
		install_npm_sbom(c, m, &j);
	json_w_end(&j);
	json_w_end(&j);
	if (j.overflow) {
		json_w_free(&j);
		return err_set(e, "install.failed", "%s: marker too large", m->name);
	}
	rc = fs_write_atomic(path, j.buf, j.len, 0644, e);
	json_w_free(&j);
	return rc;
}
