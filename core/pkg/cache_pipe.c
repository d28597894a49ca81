/*
 * A download's bytes hashed and written on a second thread (cache.h,
 * struct cache_pipe): the reader of the connection only copies each
 * record into a bounded ring of chunks, so decryption overlaps hashing
 * and the page-cache writes, which go out one chunk at a time.
 *
 * A follower (cache_pipe_follow) is a second consumer of the same ring:
 * an extractor reading each chunk in place once it is handed over, while
 * the worker hashes it. A slot is refilled only when both are past it, so
 * memory stays the ring's, and the bytes extracted are the very bytes
 * hashed (not read back from a file another process could change).
 */
#include "pkg/cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PIPE_CHUNK (128u << 10)
#define PIPE_SLOTS 4
/* With a follower: 2 MiB of ring, so the download runs ahead of the
 * extractor's bursts (a large file written, a directory made) instead of
 * stalling on each. */
#define PIPE_FOLLOW_SLOTS 16

struct cache_pipe {
	int fd;
	struct digest_ctx d[2];
	int nd;
	unsigned char *ring;           /* nslots chunks, allocated on first use */
	size_t len[PIPE_FOLLOW_SLOTS]; /* bytes in each slot */
	unsigned nslots;
	unsigned head, tail; /* slots handed over / drained (mod 2^32) */
	int err;             /* the worker's errno, 0 */
	int done, started;
	/* the follower: xtail is the slot it reads (held until its next
	 * call); fin once every byte is handed over, gone once abandoned;
	 * refs counts the owner and the follower, the last frees */
	int following, held, fin, gone, refs;
	unsigned xtail;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

/* Hash and write one chunk: 0, or an errno. */
static int
drain(struct cache_pipe *p, const unsigned char *b, size_t n)
{
	size_t off = 0;
	int i;

	for (i = 0; i < p->nd; i++)
		digest_update(&p->d[i], b, n);
	while (off < n) {
		ssize_t w = write(p->fd, b + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		off += (size_t)w;
	}
	return 0;
}

static void *
worker(void *arg)
{
	struct cache_pipe *p = arg;
	unsigned slot;
	int er;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (p->tail == p->head && !p->done)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->tail == p->head)
			break;
		slot = p->tail % p->nslots;
		pthread_mutex_unlock(&p->mu);
		/* after an error the rest is dropped, not hashed: the writer
		 * sees p->err on its next hand-over */
		er = p->err ? 0 : drain(p, p->ring + (size_t)slot * PIPE_CHUNK, p->len[slot]);
		pthread_mutex_lock(&p->mu);
		if (er != 0)
			p->err = er;
		p->tail++;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

struct cache_pipe *
cache_pipe_new(int fd, enum digest_alg a, enum digest_alg b)
{
	struct cache_pipe *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	p->fd = fd;
	p->nslots = PIPE_SLOTS;
	p->refs = 1;
	digest_init(&p->d[p->nd++], a);
	if (b != DIGEST_NONE)
		digest_init(&p->d[p->nd++], b);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	return p;
}

/* Slots handed over that a consumer still has to pass (p->mu held). */
static unsigned
in_use(const struct cache_pipe *p)
{
	unsigned n = p->head - p->tail;

	if (p->following && p->head - p->xtail > n)
		n = p->head - p->xtail;
	return n;
}

/* Hand the filling slot to the worker (started on the first full chunk, so
 * a small download costs no thread). Returns 0 or -1 with errno. */
static int
hand_over(struct cache_pipe *p)
{
	if (!p->started) {
		if (pthread_create(&p->th, NULL, worker, p) != 0) {
			int er, following;
			pthread_mutex_lock(&p->mu);
			following = p->following;
			pthread_mutex_unlock(&p->mu);
			if (following) {
				errno = EAGAIN; /* a follower reads handed-over slots */
				return -1;
			}
			/* no thread: the same work, in line */
			er = drain(p, p->ring, p->len[0]);
			p->len[0] = 0;
			return er ? (errno = er, -1) : 0;
		}
		p->started = 1;
	}
	pthread_mutex_lock(&p->mu);
	p->head++;
	pthread_cond_broadcast(&p->cv);
	while (in_use(p) == p->nslots && !p->err)
		pthread_cond_wait(&p->cv, &p->mu);
	if (p->err) {
		errno = p->err;
		pthread_mutex_unlock(&p->mu);
		return -1;
	}
	p->len[p->head % p->nslots] = 0;
	pthread_mutex_unlock(&p->mu);
	return 0;
}

int
cache_pipe_write(struct cache_pipe *p, const void *data, size_t len)
{
	const unsigned char *s = data;

	if (p->ring == NULL && (p->ring = malloc((size_t)p->nslots * PIPE_CHUNK)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	while (len > 0) {
		/* the filling slot is the writer's alone until handed over */
		unsigned slot = p->head % p->nslots;
		size_t room = PIPE_CHUNK - p->len[slot], n = len < room ? len : room;
		memcpy(p->ring + (size_t)slot * PIPE_CHUNK + p->len[slot], s, n);
		p->len[slot] += n;
		s += n;
		len -= n;
		if (p->len[slot] == PIPE_CHUNK && hand_over(p) < 0)
			return -1;
	}
	return 0;
}

/* Stop the worker after what was handed over; the error it met, or 0. */
static int
stop(struct cache_pipe *p)
{
	int er;

	if (!p->started)
		return 0;
	pthread_mutex_lock(&p->mu);
	p->done = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->th, NULL);
	p->started = 0;
	er = p->err;
	return er;
}

static void
pipe_free(struct cache_pipe *p)
{
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->ring);
	free(p);
}

/* The owner is done with p (fin: every byte handed over; else abandoned):
 * freed now, or by the follower when it lets go. */
static void
owner_release(struct cache_pipe *p, int fin)
{
	int last;

	pthread_mutex_lock(&p->mu);
	if (fin)
		p->fin = 1;
	else
		p->gone = 1;
	last = --p->refs == 0;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (last)
		pipe_free(p);
}

int
cache_pipe_finish(struct cache_pipe *p, struct digest *a, struct digest *b)
{
	unsigned slot;
	int er = stop(p);

	slot = p->head % p->nslots;
	if (er == 0 && p->ring != NULL && p->len[slot] > 0) {
		er = drain(p, p->ring + (size_t)slot * PIPE_CHUNK, p->len[slot]);
		/* the last, partial chunk is the follower's too (its slot is
		 * free: the writer waited for room before filling it) */
		pthread_mutex_lock(&p->mu);
		p->head++;
		pthread_mutex_unlock(&p->mu);
	}
	digest_final(&p->d[0], a);
	if (b != NULL && p->nd > 1)
		digest_final(&p->d[1], b);
	owner_release(p, er == 0);
	if (er != 0) {
		errno = er;
		return -1;
	}
	return 0;
}

void
cache_pipe_free(struct cache_pipe *p)
{
	if (p == NULL)
		return;
	stop(p);
	owner_release(p, 0);
}

int
cache_pipe_follow(struct cache_pipe *p)
{
	if (p->following || p->ring != NULL) {
		errno = EINVAL;
		return -1;
	}
	p->following = 1;
	p->nslots = PIPE_FOLLOW_SLOTS;
	p->refs++;
	return 0;
}

ssize_t
cache_pipe_next(struct cache_pipe *p, const void **out)
{
	ssize_t n;

	pthread_mutex_lock(&p->mu);
	if (p->held) {
		p->held = 0;
		p->xtail++;
		pthread_cond_broadcast(&p->cv);
	}
	while (p->xtail == p->head && !p->fin && !p->gone)
		pthread_cond_wait(&p->cv, &p->mu);
	if (p->gone) {
		pthread_mutex_unlock(&p->mu);
		errno = ECANCELED;
		return -1;
	}
	if (p->xtail == p->head) {
		pthread_mutex_unlock(&p->mu);
		return 0; /* every byte read */
	}
	*out = p->ring + (size_t)(p->xtail % p->nslots) * PIPE_CHUNK;
	n = (ssize_t)p->len[p->xtail % p->nslots];
	p->held = 1;
	pthread_mutex_unlock(&p->mu);
	return n;
}

void
cache_pipe_unfollow(struct cache_pipe *p)
{
	int last;

	pthread_mutex_lock(&p->mu);
	p->following = 0;
	p->held = 0;
	last = --p->refs == 0;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (last)
		pipe_free(p);
}
