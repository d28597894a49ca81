/*
 * A download's bytes hashed and written beside the thread that reads the
 * connection (cache.h, struct cache_pipe): the reader only copies each
 * record into a bounded ring of chunks; each digest and the write have a
 * thread of their own (a consumer), so decryption, sha512, sha256 and the
 * page-cache writes all overlap, and the slowest of them, not their sum,
 * sets the pace. A slot is refilled once every consumer is past it. The
 * writer also starts the disk's writeback as it goes.
 *
 * A follower (cache_pipe_follow) is one more consumer of the same ring:
 * an extractor on a thread of its own reading each chunk in place once it
 * is handed over, while the digests hash it. A slot is refilled only when
 * it is past it too, so memory stays the ring's, and the bytes extracted
 * are the very bytes hashed (not read back from a file another process
 * could change).
 */
#include "pkg/cache.h"

#include "base/clock.h"
#include "base/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PIPE_CHUNK (256u << 10)
#define PIPE_SLOTS 4
/* With a follower: 2 MiB of ring, so the download runs ahead of the
 * extractor's bursts (a large file written, a directory made) instead of
 * stalling on each. */
#define PIPE_FOLLOW_SLOTS 8
/* consumers: the digests (at most 2), then the write */
#define PIPE_CONSUMERS 3
/* Rings kept for the next download while the pool is held
 * (cache_pipe_pool): one per npm worker. */
#define POOL_MAX 8

struct cache_pipe;

struct consumer {
	struct cache_pipe *p;
	int i;
	unsigned tail;  /* slots this consumer is done with (mod 2^32) */
	int64_t cpu_us; /* the thread's CPU, added as it ends */
	pthread_t th;
};

struct cache_pipe {
	int fd;
	struct digest_ctx d[2];
	int nd, nc;                    /* digests; consumers (nd + 1) */
	unsigned char *ring;           /* nslots chunks, allocated on first use */
	size_t len[PIPE_FOLLOW_SLOTS]; /* bytes in each slot */
	unsigned nslots;
	unsigned head; /* slots handed over (mod 2^32) */
	struct consumer c[PIPE_CONSUMERS];
	uint64_t unflushed; /* bytes written since the last writeback start */
	int err;            /* a consumer's errno, 0 */
	int done, started;
	int waiting; /* the reader waits for room */
	int idle;    /* consumers (and the follower) waiting for work */
	/* the follower: xtail is the slot it reads (held until its next
	 * call); fin once every byte is handed over, gone once abandoned;
	 * refs counts the owner and the follower, the last frees */
	int following, held, fin, gone, refs;
	unsigned xtail;
	pthread_mutex_t mu;
	pthread_cond_t work; /* consumers wait for a slot */
	pthread_cond_t room; /* the reader waits for a free slot */
};

/* Consumer i's part of a chunk: a digest, or the write. 0 or an errno. */
static int
consume(struct cache_pipe *p, int i, const unsigned char *b, size_t n)
{
	if (i < p->nd) {
		digest_update(&p->d[i], b, n);
		return 0;
	}
	/* i == nd: the write (a pipe without a file has no such consumer) */
	if (fs_write_all(p->fd, b, n, -1) != 0)
		return errno;
	/* the disk works while the download goes on: an fsync or syncfs
	 * at the end has little left to wait for */
	fs_writeback_every(p->fd, &p->unflushed, n);
	return 0;
}

/* Every consumer's part, in line. 0 or an errno. */
static int
drain(struct cache_pipe *p, const unsigned char *b, size_t n)
{
	int i, er = 0;

	for (i = 0; i < p->nc && er == 0; i++)
		er = consume(p, i, b, n);
	return er;
}

/* Slots every consumer is done with. */
static unsigned
min_tail(const struct cache_pipe *p)
{
	unsigned t = p->c[0].tail;
	int i;

	for (i = 1; i < p->nc; i++)
		if (p->head - p->c[i].tail > p->head - t)
			t = p->c[i].tail;
	if (p->following && p->head - p->xtail > p->head - t)
		t = p->xtail;
	return t;
}

static void *
worker(void *arg)
{
	struct consumer *c = arg;
	struct cache_pipe *p = c->p;
	unsigned slot;
	int er, skip;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (c->tail == p->head && !p->done) {
			p->idle++;
			pthread_cond_wait(&p->work, &p->mu);
			p->idle--;
		}
		if (c->tail == p->head)
			break;
		slot = c->tail % p->nslots;
		/* after an error the rest is dropped, not hashed: the reader
		 * sees p->err on its next hand-over */
		skip = p->err != 0;
		pthread_mutex_unlock(&p->mu);
		er = skip ? 0 : consume(p, c->i, p->ring + (size_t)slot * PIPE_CHUNK, p->len[slot]);
		pthread_mutex_lock(&p->mu);
		if (er != 0)
			p->err = er;
		c->tail++;
		if (p->waiting)
			pthread_cond_signal(&p->room);
	}
	pthread_mutex_unlock(&p->mu);
	c->cpu_us += clock_thread_cpu_us(); /* read after the join */
	return NULL;
}

struct cache_pipe *
cache_pipe_new(int fd, enum digest_alg a, enum digest_alg b)
{
	struct cache_pipe *p = calloc(1, sizeof(*p));
	int i;

	if (p == NULL)
		return NULL;
	p->fd = fd;
	p->nslots = PIPE_SLOTS;
	p->refs = 1;
	digest_init(&p->d[p->nd++], a);
	if (b != DIGEST_NONE)
		digest_init(&p->d[p->nd++], b);
	p->nc = fd >= 0 ? p->nd + 1 : p->nd;
	for (i = 0; i < p->nc; i++) {
		p->c[i].p = p;
		p->c[i].i = i;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->room, NULL);
	return p;
}

/* Stop the consumers after what was handed over; the error one met, or 0. */
static int
stop(struct cache_pipe *p)
{
	int i;

	if (!p->started)
		return 0;
	pthread_mutex_lock(&p->mu);
	p->done = 1;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (i = 0; i < p->started; i++)
		pthread_join(p->c[i].th, NULL);
	p->started = 0;
	p->done = 0;
	return p->err;
}

/* Start the consumers (on the first full chunk, so a small download costs
 * no thread): 0, or -1 when one could not start (then none runs). */
static int
start(struct cache_pipe *p)
{
	for (p->started = 0; p->started < p->nc; p->started++)
		if (pthread_create(&p->c[p->started].th, NULL, worker, &p->c[p->started]) != 0)
			break;
	if (p->started == p->nc)
		return 0;
	stop(p);
	return -1;
}

/* Hand the filling slot to the consumers. Returns 0 or -1 with errno. */
static int
hand_over(struct cache_pipe *p)
{
	if (!p->started && start(p) != 0) {
		int er;
		pthread_mutex_lock(&p->mu);
		er = p->following;
		pthread_mutex_unlock(&p->mu);
		if (er) {
			errno = EAGAIN; /* a follower reads handed-over slots */
			return -1;
		}
		/* no threads: the same work, in line */
		er = p->err ? p->err : drain(p, p->ring, p->len[0]);
		p->len[0] = 0;
		p->err = er;
		return er ? (errno = er, -1) : 0;
	}
	pthread_mutex_lock(&p->mu);
	p->head++;
	/* a busy consumer finds the new slot by itself */
	if (p->idle > 0)
		pthread_cond_broadcast(&p->work);
	while (p->head - min_tail(p) == p->nslots && !p->err) {
		p->waiting = 1;
		pthread_cond_wait(&p->room, &p->mu);
		p->waiting = 0;
	}
	if (p->err) {
		errno = p->err;
		pthread_mutex_unlock(&p->mu);
		return -1;
	}
	p->len[p->head % p->nslots] = 0;
	pthread_mutex_unlock(&p->mu);
	return 0;
}

/* A ring of PIPE_SLOTS chunks freed and allocated again per package is a
 * fresh mapping each time (musl maps an allocation this large on its own):
 * page faults as it fills and an munmap, a TLB shootdown on every core
 * running one of the process's threads, as it goes. While a caller that
 * downloads many packages holds the pool, rings are kept for the next
 * download instead; a follower's larger ring is not. A kept ring is only
 * ever the filling side's scratch space: every byte a download hashes,
 * writes or hands to its follower is written into it by that download
 * first. */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *pool[POOL_MAX];
static int pool_n, pool_holders;

static unsigned char *
ring_get(unsigned nslots)
{
	unsigned char *r = NULL;

	if (nslots == PIPE_SLOTS) {
		pthread_mutex_lock(&pool_mu);
		if (pool_n > 0)
			r = pool[--pool_n];
		pthread_mutex_unlock(&pool_mu);
	}
	return r != NULL ? r : malloc((size_t)nslots * PIPE_CHUNK);
}

static void
ring_put(unsigned char *r, unsigned nslots)
{
	if (r != NULL && nslots == PIPE_SLOTS) {
		pthread_mutex_lock(&pool_mu);
		if (pool_holders > 0 && pool_n < POOL_MAX) {
			pool[pool_n++] = r;
			r = NULL;
		}
		pthread_mutex_unlock(&pool_mu);
	}
	free(r);
}

void
cache_pipe_pool(int hold)
{
	unsigned char *drop[POOL_MAX];
	int i, n = 0;

	pthread_mutex_lock(&pool_mu);
	if (hold)
		pool_holders++;
	else if (pool_holders > 0 && --pool_holders == 0) {
		for (n = 0; n < pool_n; n++)
			drop[n] = pool[n];
		pool_n = 0;
	}
	pthread_mutex_unlock(&pool_mu);
	for (i = 0; i < n; i++)
		free(drop[i]);
}

int
cache_pipe_write(struct cache_pipe *p, const void *data, size_t len)
{
	const unsigned char *s = data;

	if (p->ring == NULL && (p->ring = ring_get(p->nslots)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	while (len > 0) {
		/* the filling slot is the reader's alone until handed over */
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

static void
pipe_free(struct cache_pipe *p)
{
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->room);
	ring_put(p->ring, p->nslots);
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
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	if (last)
		pipe_free(p);
}

int
cache_pipe_finish(struct cache_pipe *p, struct digest *a, struct digest *b)
{
	return cache_pipe_finish_cpu(p, a, b, NULL);
}

int
cache_pipe_finish_cpu(struct cache_pipe *p, struct digest *a, struct digest *b, struct cache_pipe_cpu *cpu)
{
	unsigned slot;
	int i, er = stop(p);

	slot = p->head % p->nslots;
	if (er == 0 && p->ring != NULL && p->len[slot] > 0) {
		er = drain(p, p->ring + (size_t)slot * PIPE_CHUNK, p->len[slot]);
		/* the last, partial chunk is the follower's too (its slot is
		 * free: the reader waited for room before filling it) */
		pthread_mutex_lock(&p->mu);
		p->head++;
		pthread_mutex_unlock(&p->mu);
	}
	if (er == 0 && p->fd >= 0)
		fs_writeback_start(p->fd); /* and the tail, now the file is whole */
	digest_final(&p->d[0], a);
	if (b != NULL && p->nd > 1)
		digest_final(&p->d[1], b);
	if (cpu != NULL)
		for (i = 0; i < p->nc; i++)
			*(i < p->nd ? &cpu->digest_us : &cpu->write_us) += p->c[i].cpu_us;
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
		if (p->waiting)
			pthread_cond_signal(&p->room);
	}
	while (p->xtail == p->head && !p->fin && !p->gone) {
		p->idle++;
		pthread_cond_wait(&p->work, &p->mu);
		p->idle--;
	}
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
	pthread_cond_broadcast(&p->room);
	pthread_mutex_unlock(&p->mu);
	if (last)
		pipe_free(p);
}
