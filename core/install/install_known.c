/*
 * Known files: digests computed while extracting, for the tree listing
 * (the contract is in install.h).
 */
#include "install/install_int.h"
#include "base/buf.h"
#include "base/clock.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* install_known_settle waits at most this long for the clock to pass the
 * newest recorded ctime (a filesystem with one-second timestamps needs up
 * to 1 s). A ctime further ahead of our clock than KNOWN_AHEAD_MS (a file
 * server's clock) is not waited for: the table is emptied at once and the
 * listing reads every file, as it would without one. */
#define KNOWN_SETTLE_MS 2500
#define KNOWN_AHEAD_MS 1100
/* Paths longer than this are not recorded (the file is read instead). */
#define KNOWN_PATH_MAX 4096
/* Records past this many are not kept (those files are read instead, as
 * when memory runs out): about 100 MB of table. */
#define KNOWN_RECS_MAX (1u << 20)

struct known_rec {
	char *path;
	uint64_t seq; /* order of arrival: the last one wins */
	uint64_t ino, size;
	int64_t ctime_s, mtime_s;
	long ctime_ns, mtime_ns;
	uint32_t mode;
	unsigned char sha[32];
};

struct install_known {
	pthread_mutex_t mu;
	struct vec recs; /* struct known_rec */
	uint64_t seq;
	struct timespec newest; /* newest ctime recorded */
	int settled;
};

struct install_known *
install_known_new(void)
{
	struct install_known *k = calloc(1, sizeof(*k));
	struct vec empty = VEC_INIT(sizeof(struct known_rec), KNOWN_RECS_MAX);

	if (k != NULL) {
		pthread_mutex_init(&k->mu, NULL);
		k->recs = empty;
	}
	return k;
}

static void
drop_all(struct install_known *k)
{
	struct known_rec *r = k->recs.p;
	size_t i;

	for (i = 0; i < k->recs.n; i++)
		free(r[i].path);
	vec_free(&k->recs);
}

void
install_known_free(struct install_known *k)
{
	if (k == NULL)
		return;
	drop_all(k);
	pthread_mutex_destroy(&k->mu);
	free(k);
}

size_t
install_known_count(const struct install_known *k)
{
	return k ? k->recs.n : 0;
}

void
install_known_add(struct install_known *k, const char *dir, const char *name, const struct stat *st,
                  const unsigned char sha256[32])
{
	size_t dl = strlen(dir), nl = strlen(name);
	struct known_rec rec, *slot;

	if (k == NULL || dl + 1 + nl >= KNOWN_PATH_MAX || (rec.path = malloc(dl + 1 + nl + 1)) == NULL)
		return;
	memcpy(rec.path, dir, dl);
	if (dl > 0)
		rec.path[dl++] = '/';
	memcpy(rec.path + dl, name, nl + 1);
	rec.ino = st->st_ino;
	rec.size = (uint64_t)st->st_size;
	rec.mode = st->st_mode;
	rec.ctime_s = st->st_ctim.tv_sec;
	rec.ctime_ns = st->st_ctim.tv_nsec;
	rec.mtime_s = st->st_mtim.tv_sec;
	rec.mtime_ns = st->st_mtim.tv_nsec;
	memcpy(rec.sha, sha256, 32);
	pthread_mutex_lock(&k->mu);
	slot = vec_push(&k->recs);
	if (slot == NULL) {
		pthread_mutex_unlock(&k->mu);
		free(rec.path);
		return;
	}
	rec.seq = k->seq++;
	*slot = rec;
	if (st->st_ctim.tv_sec > k->newest.tv_sec ||
	    (st->st_ctim.tv_sec == k->newest.tv_sec && st->st_ctim.tv_nsec > k->newest.tv_nsec))
		k->newest = st->st_ctim;
	pthread_mutex_unlock(&k->mu);
}

static int
rec_cmp(const void *a, const void *b)
{
	const struct known_rec *x = a, *y = b;
	int c = strcmp(x->path, y->path);

	if (c != 0)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void
install_known_settle(struct install_known *k)
{
	struct timespec now;
	struct known_rec *r;
	size_t i, j;

	if (k == NULL || k->settled)
		return;
	k->settled = 1;
	r = k->recs.p;
	if (k->recs.n > 0)
		qsort(r, k->recs.n, sizeof(*r), rec_cmp);
	/* one record per path: the last written (a file replaced by a later
	 * entry, or by a nested package's own file, may even have got the
	 * same inode back) */
	for (i = j = 0; i < k->recs.n; i++) {
		if (i + 1 < k->recs.n && strcmp(r[i].path, r[i + 1].path) == 0) {
			free(r[i].path);
			continue;
		}
		r[j++] = r[i];
	}
	k->recs.n = j;
	/* file times come from the coarse clock (a fine-grained ctime is
	 * never behind it): once it is past the newest recorded ctime, any
	 * later change gets a later ctime */
	clock_fs_now(&now);
	if ((int64_t)(k->newest.tv_sec - now.tv_sec) * 1000 + (k->newest.tv_nsec - now.tv_nsec) / 1000000 >
	    KNOWN_AHEAD_MS) {
		drop_all(k);
		return;
	}
	if (!clock_fs_wait_past(&k->newest, 0, KNOWN_SETTLE_MS))
		drop_all(k);
}

int
install_known_get(const struct install_known *k, const char *rel, const struct stat *st,
                  unsigned char sha256[32])
{
	size_t lo = 0, hi;
	const struct known_rec *recs, *r;

	if (k == NULL || !k->settled)
		return 0;
	recs = k->recs.p;
	hi = k->recs.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(recs[mid].path, rel);
		if (c == 0) {
			r = &recs[mid];
			if (r->ino != st->st_ino || r->size != (uint64_t)st->st_size ||
			    r->mode != st->st_mode || r->ctime_s != st->st_ctim.tv_sec ||
			    r->ctime_ns != st->st_ctim.tv_nsec || r->mtime_s != st->st_mtim.tv_sec ||
			    r->mtime_ns != st->st_mtim.tv_nsec)
				return 0;
			memcpy(sha256, r->sha, 32);
			return 1;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}
