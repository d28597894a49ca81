/*
 * Sealed notes (cache.h, cache_note_put/get): small texts the cache vouches
 * for with the trees' key.
 */
#include "pkg/cache.h"

#include "base/fs.h"
#include "pkg/cache_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* <cache>/trees/<name> for a note: a plain file name, never a tree key's
 * (keys have no '.'-suffix of this kind) nor hidden. */
static int
note_path(const char *cache, const char *name, char *out, size_t cap)
{
	size_t n = strlen(name);

	if (n == 0 || n > CACHE_KEY_MAX || name[0] == '.' || strchr(name, '/') || strchr(name, ' ') ||
	    strchr(name, '\n'))
		return -1;
	if (fs_path_join(out, cap, cache, "trees", NULL) < 0)
		return -1;
	return fs_path_join(out, cap, out, name, NULL);
}

int
cache_note_put(const char *cache, const char *keyfile, const char *name, const char *body, size_t len)
{
	char trees[4096], path[4400], tmp[4400], rnd[17], leaf[32], mac[65];
	unsigned char sk[KEY_LEN];
	struct buf text = BUF_INIT(CACHE_NOTE_MAX + 300);
	const char *why = NULL;
	ssize_t n = -1;
	int fd, rc = 0;

	if (fs_path_join(trees, sizeof(trees), cache, "trees", NULL) < 0 || len > CACHE_NOTE_MAX ||
	    memchr(body, '\0', len) != NULL || note_path(cache, name, path, sizeof(path)) < 0 ||
	    (mkdir(trees, 0755) != 0 && errno != EEXIST) || cache_seal_key(keyfile, sk, &why) < 0)
		return 0;
	buf_put(&text, "abx-note 1 ", 11);
	buf_put(&text, name, strlen(name));
	buf_put(&text, "\n", 1);
	buf_put(&text, body, len);
	cache_seal(sk, text.p, text.len, mac);
	buf_put(&text, "mac ", 4);
	buf_put(&text, mac, 64);
	buf_put(&text, "\n", 1);
	fs_rand_hex(rnd, 8);
	snprintf(leaf, sizeof(leaf), ".tmp-note-%s", rnd);
	fd = text.over || fs_path_join(tmp, sizeof(tmp), trees, leaf, NULL) < 0
	         ? -1
	         : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0) {
		n = write(fd, text.p, text.len);
		if (close(fd) != 0)
			n = -1;
	}
	/* one rename: a reader sees the old note or the new one, whole */
	if (fd >= 0 && n == (ssize_t)text.len && rename(tmp, path) == 0)
		rc = 1;
	else if (fd >= 0)
		unlink(tmp);
	buf_free(&text);
	return rc;
}

int
cache_note_get(const char *cache, const char *keyfile, const char *name, char *body, size_t cap,
               const char **why)
{
	char path[4400], head[CACHE_KEY_MAX + 20], mac[65];
	unsigned char sk[KEY_LEN];
	size_t len, hl, ml = 4 + 64 + 1;
	struct err e = {0};
	char *t = NULL;
	int rc = -1;

	if (note_path(cache, name, path, sizeof(path)) < 0 || access(path, F_OK) != 0)
		return 0;
	if (cache_seal_key(keyfile, sk, why) < 0)
		return -1;
	if (fs_read_alloc(path, CACHE_NOTE_MAX + 300, &t, &len, &e) < 0) {
		*why = "it is unreadable or too large";
		return -1;
	}
	hl = (size_t)snprintf(head, sizeof(head), "abx-note 1 %s\n", name);
	if (len < hl + ml || memcmp(t, head, hl) != 0 || memcmp(t + len - ml, "mac ", 4) != 0 ||
	    t[len - 1] != '\n') {
		*why = "it is not a note of this name";
	} else if (len - ml - hl >= cap) {
		*why = "it is larger than a note of this kind";
	} else {
		cache_seal(sk, t, len - ml, mac);
		if (!ct_equal(mac, t + len - ml + 4, 64)) {
			*why = "its seal does not match (edited, or sealed with another machine's or user's "
			       "key: a copied or "
			       "restored cache)";
		} else {
			memcpy(body, t + hl, len - ml - hl);
			body[len - ml - hl] = '\0';
			rc = 1;
		}
	}
	free(t);
	return rc;
}
