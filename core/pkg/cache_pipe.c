/*
 * A download's bytes hashed and written on a second thread (cache.h,
 * struct cache_pipe): the reader of the connection only copies each
 * record into a bounded ring of chunks, so decryption overlaps hashing
 * and the page-cache writes, which go out one chunk at a time.
 */
#include "pkg/cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PIPE_CHUNK (128u << 10)
#define PIPE_SLOTS 4

struct cache_pipe {
	int fd;
	struct digest_ctx d[2];
	int nd;
	unsigned char *ring;    /* PIPE_SLOTS chunks, allocated on first use */
	size_t len[PIPE_SLOTS]; /* bytes in each slot */
	unsigned head, tail;    /* slots handed over / drained (mod 2^32) */
	int err;                /* the worker's errno, 0 */
	int done, started;
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
		slot = p->tail % PIPE_SLOTS;
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
	digest_init(&p->d[p->nd++], a);
	if (b != DIGEST_NONE)
		digest_init(&p->d[p->nd++], b);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	return p;
}

/* Hand the filling slot to the worker (started on the first full chunk, so
 * a small download costs no thread). Returns 0 or -1 with errno. */
static int
hand_over(struct cache_pipe *p)
{
	if (!p->started) {
		if (pthread_create(&p->th, NULL, worker, p) != 0) {
			/* no thread: the same work, in line */
			int er = drain(p, p->ring, p->len[0]);
			p->len[0] = 0;
			return er ? (errno = er, -1) : 0;
		}
		p->started = 1;
	}
	pthread_mutex_lock(&p->mu);
	p->head++;
	pthread_cond_broadcast(&p->cv);
	while (p->head - p->tail == PIPE_SLOTS && !p->err)
		pthread_cond_wait(&p->cv, &p->mu);
	if (p->err) {
		errno = p->err;
		pthread_mutex_unlock(&p->mu);
		return -1;
	}
	p->len[p->head % PIPE_SLOTS] = 0;
	pthread_mutex_unlock(&p->mu);
	return 0;
}

int
cache_pipe_write(struct cache_pipe *p, const void *data, size_t len)
{
	const unsigned char *s = data;

	if (p->ring == NULL && (p->ring = malloc((size_t)PIPE_SLOTS * PIPE_CHUNK)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	while (len > 0) {
		/* the filling slot is the writer's alone until handed over */
		unsigned slot = p->head % PIPE_SLOTS;
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

int
cache_pipe_finish(struct cache_pipe *p, struct digest *a, struct digest *b)
{
	unsigned slot;
	int er = stop(p);

	slot = p->head % PIPE_SLOTS;
	if (er == 0 && p->ring != NULL && p->len[slot] > 0)
		er = drain(p, p->ring + (size_t)slot * PIPE_CHUNK, p->len[slot]);
	digest_final(&p->d[0], a);
	if (b != NULL && p->nd > 1)
		digest_final(&p->d[1], b);
	pipe_free(p);
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
	pipe_free(p);
}
