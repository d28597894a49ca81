/*
 * The process-wide cache of proof lists (install.h, install_proof_cache_get;
 * the lists themselves are base/proof.c's).
 */
#include "install/install_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/digest.h"
#include "base/fs.h"
#include "base/proof.h"

/* ---- the process-wide cache of parsed lists ------------------------------ */

/*
 * serve makes an install environment per request, so the per-environment copy in
 * the marker's slot is read and hashed again by every request (~0.2 ms of a
 * Node.js-sized check). This cache keeps the last few lists read, each with
 * the identity of the file it came from (one fstat: dev, ino, size, ctime,
 * mtime) and the sha256 of the bytes held. A list is reused only when a
 * fresh stat of the file shows the same identity and the bytes' sha256 is
 * the one the caller's marker names; anything else reads the file again.
 * The bytes held are always exactly what the marker vouches for, and the
 * per-entry stat check of the tree still runs on every call: the cache
 * saves reading and hashing the list, never a check of the tree.
 */
struct install_proof_ref {
	unsigned refs; /* under pc_mu; the cache's own reference counts one */
	size_t len;
	char *buf; /* malloc'd, so 8-byte aligned */
};

struct pc_ent {
	struct install_proof_ref *ref; /* NULL: free entry */
	char path[PATH_MAX];
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec ctim, mtim;
	char sha[FS_HEX_LEN];
	uint64_t used; /* LRU clock */
};

static pthread_mutex_t pc_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pc_ent pc_ents[INSTALL_PROOF_CACHE];
static uint64_t pc_clock;
static unsigned long pc_hits, pc_loads;

static int
pc_same(const struct pc_ent *c, const struct stat *st)
{
	return c->dev == st->st_dev && c->ino == st->st_ino && c->size == st->st_size &&
	       c->ctim.tv_sec == st->st_ctim.tv_sec && c->ctim.tv_nsec == st->st_ctim.tv_nsec &&
	       c->mtim.tv_sec == st->st_mtim.tv_sec && c->mtim.tv_nsec == st->st_mtim.tv_nsec;
}

/* Drop one reference; under pc_mu. */
static void
pc_unref(struct install_proof_ref *r)
{
	if (r != NULL && --r->refs == 0) {
		free(r->buf);
		free(r);
	}
}

static int
valid_hex64(const char *s)
{
	int i;

	for (i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[64] == '\0';
}

const char *
install_proof_cache_get(const char *path, const char *sha256_hex, size_t *len,
                        struct install_proof_ref **refp)
{
	struct install_proof_ref *r = NULL;
	struct pc_ent *c;
	struct digest dg;
	struct stat st;
	char hex[FS_HEX_LEN], *buf = NULL;
	ssize_t got;
	int i, fd, victim;

	*refp = NULL;
	if (path == NULL || sha256_hex == NULL || !valid_hex64(sha256_hex) || strlen(path) >= PATH_MAX)
		return NULL;
	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
		pthread_mutex_lock(&pc_mu);
		for (i = 0; i < INSTALL_PROOF_CACHE; i++) {
			c = &pc_ents[i];
			if (c->ref != NULL && pc_same(c, &st) && strcmp(c->path, path) == 0 &&
			    ct_equal(c->sha, sha256_hex, 64)) {
				r = c->ref;
				r->refs++;
				c->used = ++pc_clock;
				pc_hits++;
				break;
			}
		}
		pthread_mutex_unlock(&pc_mu);
		if (r != NULL) {
			*len = r->len;
			*refp = r;
			return r->buf;
		}
	}
	/* read it: the identity recorded is that of the fstat the read
	 * followed, so a later change to the file moves it */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > PROOF_MAX ||
	    (buf = malloc((size_t)st.st_size)) == NULL) {
		close(fd);
		return NULL;
	}
	got = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (got != (ssize_t)st.st_size) {
		free(buf);
		return NULL;
	}
	digest_buf(DIGEST_SHA256, buf, (size_t)got, &dg);
	digest_hex(&dg, hex);
	if (!ct_equal(hex, sha256_hex, 64) || (r = malloc(sizeof(*r))) == NULL) {
		free(buf);
		return NULL;
	}
	r->refs = 2; /* the cache's and the caller's */
	r->len = (size_t)got;
	r->buf = buf;
	pthread_mutex_lock(&pc_mu);
	pc_loads++;
	/* the entry for this path, else a free one, else the least recently used */
	victim = -1;
	for (i = 0; i < INSTALL_PROOF_CACHE && victim < 0; i++)
		if (pc_ents[i].ref != NULL && strcmp(pc_ents[i].path, path) == 0)
			victim = i;
	for (i = 0; i < INSTALL_PROOF_CACHE && victim < 0; i++)
		if (pc_ents[i].ref == NULL)
			victim = i;
	if (victim < 0) {
		victim = 0;
		for (i = 1; i < INSTALL_PROOF_CACHE; i++)
			if (pc_ents[i].used < pc_ents[victim].used)
				victim = i;
	}
	c = &pc_ents[victim];
	pc_unref(c->ref);
	c->ref = r;
	snprintf(c->path, sizeof(c->path), "%s", path);
	c->dev = st.st_dev;
	c->ino = st.st_ino;
	c->size = st.st_size;
	c->ctim = st.st_ctim;
	c->mtim = st.st_mtim;
	memcpy(c->sha, hex, sizeof(c->sha));
	c->used = ++pc_clock;
	pthread_mutex_unlock(&pc_mu);
	*len = r->len;
	*refp = r;
	return r->buf;
}

void
install_proof_cache_put(struct install_proof_ref *r)
{
	if (r == NULL)
		return;
	pthread_mutex_lock(&pc_mu);
	pc_unref(r);
	pthread_mutex_unlock(&pc_mu);
}

void
install_proof_cache_stats(unsigned long *hits, unsigned long *loads)
{
	pthread_mutex_lock(&pc_mu);
	*hits = pc_hits;
	*loads = pc_loads;
	pthread_mutex_unlock(&pc_mu);
}

void
install_proof_cache_clear(void)
{
	int i;

	pthread_mutex_lock(&pc_mu);
	for (i = 0; i < INSTALL_PROOF_CACHE; i++) {
		pc_unref(pc_ents[i].ref);
		pc_ents[i].ref = NULL;
	}
	pthread_mutex_unlock(&pc_mu);
}
