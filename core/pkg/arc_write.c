/*
 * The writing half of an extraction (arc_int.h): the reader (arc.c) opens
 * and checks each regular file and hands its data over; the writer writes
 * it at the offsets the reader gave, hashes it, gives the file its mode and
 * time and reports it (arc_opts.on_file). From arc_opts.threads' point on
 * the writer runs on a second thread, fed through a ring of W_SLOTS chunks:
 * the reader copies each block libarchive decompressed into the filling
 * chunk and hands it over full (or at a file's end), so decompression
 * overlaps the writes and the hashing and memory stays bounded. Until then,
 * or when no thread can be started, the same functions run in line.
 *
 * A failure of the writer (a write, fchmod, close) is kept in w->e and seen
 * by the reader at its next hand-over, which fails the archive; the writer
 * then drops what is still handed to it, closing each file. A failure of
 * the reader ends the run: what was handed over is still written (it was
 * checked), a file left unfinished is closed unreported. The staging tree
 * is the caller's to remove either way.
 */
#include "pkg/arc_int.h"
#include "base/clock.h"
#include "base/digest.h"
#include "base/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define W_CHUNK (256u << 10)
#define W_SLOTS 8
/* A side that waits sleeps until half the ring is its to take: on a busy
 * machine each sleep costs a scheduling delay, so a pipeline in which one
 * side is the faster sleeps once per W_SLOTS/2 chunks, not once a chunk. */
#define W_HALF (W_SLOTS / 2)
/* The writer's stack: its frames are small (buffers are on the heap). */
#define W_STACK (256u << 10)

enum { S_BEGIN = 1, S_END = 2 };

/* One hand-over: a file's start (f), data at off (len bytes in the ring),
 * its end; any of them. */
struct slot {
	unsigned flags;
	struct arc_wfile f;
	int64_t off;
	size_t len;
};

/* ---- the writer's side ---------------------------------------------------- */

/* The copy cannot be whole: removed (the extraction goes on). */
static void
drop_copy(struct arc_writer *w)
{
	if (w->cfd < 0)
		return;
	close(w->cfd);
	unlinkat(w->o->copy_dirfd, w->cname, 0);
	w->cfd = -1;
}

static void w_fail(struct arc_writer *w, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* errnum: the errno of the failed call, kept in w->e.sys (0: none) */
static void
w_fail(struct arc_writer *w, int errnum, const char *fmt, ...)
{
	char rule[200];
	va_list ap;

	va_start(ap, fmt);
	err_fmtv(rule, sizeof(rule), fmt, ap);
	va_end(ap);
	arc_refuse_at(&w->e, w->f.raw, "%s", rule);
	w->e.sys = errnum;
	drop_copy(w);
	if (w->open)
		close(w->f.fd);
	w->open = 0;
	pthread_mutex_lock(&w->mu);
	w->failed = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void
w_begin(struct arc_writer *w, const struct arc_wfile *f)
{
	if (w->open)
		close(w->f.fd); /* abandoned by the reader: not reported */
	w->open = 0;
	drop_copy(w);
	if (w->failed) {
		close(f->fd);
		return;
	}
	memcpy(&w->f, f, sizeof(*f));
	w->open = 1;
	w->hashing = f->hashing;
	w->end = 0;
	w->unkicked = 0;
	if (w->hashing)
		digest_init(&w->dc, DIGEST_SHA256);
	if (w->hashing && w->o->copy_dirfd >= 0 && w->o->on_file != NULL) {
		snprintf(w->cname, sizeof(w->cname), "%llu", (unsigned long long)w->seq++);
		w->cfd = openat(w->o->copy_dirfd, w->cname,
		                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
}

static void
w_data(struct arc_writer *w, int64_t off, const unsigned char *buf, size_t len)
{
	if (!w->open || len == 0)
		return;
	if (fs_write_all(w->f.fd, buf, len, off) != 0) {
		w_fail(w, errno ? errno : EIO, "write failed: %s", strerror(errno ? errno : EIO));
		return;
	}
	/* the content hash holds only for data written end to end */
	if (w->hashing && off != w->end)
		w->hashing = 0;
	if (w->hashing)
		digest_update(&w->dc, buf, len);
	if (w->cfd >= 0 && (!w->hashing || fs_write_all(w->cfd, buf, len, off) != 0))
		drop_copy(w);
	if (fs_writeback_every(w->f.fd, &w->unkicked, len) && w->cfd >= 0)
		fs_writeback_start(w->cfd);
	w->bytes += len;
	if (off + (int64_t)len > w->end)
		w->end = off + (int64_t)len;
}

static void
w_end(struct arc_writer *w)
{
	struct arc_wfile *f = &w->f;
	struct timespec ts[2];

	if (!w->open)
		return;
	/* A sparse entry may end in a hole. */
	if (f->declared > w->end) {
		w->hashing = 0;
		if (ftruncate(f->fd, f->declared) != 0) {
			w_fail(w, errno, "cannot size file: %s", strerror(errno));
			return;
		}
	}
	if (!f->direct && fchmod(f->fd, (mode_t)f->mode) != 0) {
		w_fail(w, errno, "cannot chmod: %s", strerror(errno));
		return;
	}
	if (f->has_mtime) {
		ts[0].tv_sec = 0;
		ts[0].tv_nsec = UTIME_OMIT;
		ts[1] = f->mtime;
		(void)futimens(f->fd, ts); /* a time is not worth failing for */
	}
	if (!w->hashing)
		drop_copy(w);
	/* the disk writes this file (and the cache's copy) while the next
	 * ones are extracted; a small one is left to the syncfs before the
	 * tree is published (no durability is lost: this starts a write, it
	 * never waits for one), which sends thousands of them in a few merged
	 * requests where a start each costs a syscall and a request of a few
	 * pages, a VM exit on a virtual disk */
	if (w->end >= (int64_t)ARC_WRITEBACK_MIN)
		fs_writeback_start(f->fd);
	if (w->cfd >= 0) {
		if (w->end >= (int64_t)ARC_WRITEBACK_MIN)
			fs_writeback_start(w->cfd);
		w->copied = close(w->cfd) == 0;
		if (!w->copied)
			unlinkat(w->o->copy_dirfd, w->cname, 0);
		w->cfd = -1;
	}
	if (w->hashing && w->o->on_file != NULL) {
		struct stat sb;
		struct digest dg;

		digest_final(&w->dc, &dg);
		if (fstat(f->fd, &sb) == 0) {
			if (w->copied && w->o->on_copy != NULL)
				w->o->on_copy(w->o->file_ctx, f->name, w->cname);
			w->o->on_file(w->o->file_ctx, f->name, &sb, dg.v);
		}
	}
	w->copied = 0;
	w->open = 0;
	if (close(f->fd) != 0) {
		w_fail(w, errno, "close failed: %s", strerror(errno));
		return;
	}
	w->files++;
}

static void
w_slot(struct arc_writer *w, const struct slot *s, const unsigned char *data)
{
	if (s->flags & S_BEGIN)
		w_begin(w, &s->f);
	w_data(w, s->off, data, s->len);
	if (s->flags & S_END)
		w_end(w);
}

static void *
w_main(void *arg)
{
	struct arc_writer *w = arg;
	unsigned i;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		if (w->tail == w->head) {
			w->wwait = 1;
			while (w->head - w->tail < W_HALF && !w->done)
				pthread_cond_wait(&w->cv, &w->mu);
			w->wwait = 0;
		}
		if (w->tail == w->head)
			break;
		i = w->tail % W_SLOTS;
		pthread_mutex_unlock(&w->mu);
		w_slot(w, &w->slot[i], w->ring + (size_t)i * W_CHUNK);
		pthread_mutex_lock(&w->mu);
		w->tail++;
		if (w->rwait && w->head - w->tail <= W_HALF)
			pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	w->cpu_us = clock_thread_cpu_us(); /* read after the join */
	return NULL;
}

/* ---- the reader's side ---------------------------------------------------- */

void
arc_w_init(struct arc_writer *w, const struct arc_opts *o)
{
	memset(w, 0, sizeof(*w));
	w->o = o;
	w->mode = o->threads;
	w->cfd = -1;
	err_keep_details(&w->e, w->details, sizeof(w->details));
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
}

/* The writer's failure into x->e: -1; 0 when it has none. */
static int
w_failed(struct xs *x)
{
	struct arc_writer *w = x->w;
	int failed;

	pthread_mutex_lock(&w->mu);
	failed = w->failed;
	pthread_mutex_unlock(&w->mu);
	if (!failed)
		return 0;
	err_copy(x->e, &w->e);
	return -1;
}

/* Start the writer's thread when the archive has earned it; stay in line
 * when it cannot be started. */
static void
w_maybe_start(struct arc_writer *w)
{
	pthread_attr_t at;
	int ok;

	if (w->started || w->mode == ARC_THREADS_ONE ||
	    (w->mode == ARC_THREADS_AUTO && w->handed < ARC_THREAD_MIN))
		return;
	w->mode = ARC_THREADS_ONE; /* one try */
	w->ring = malloc((size_t)W_SLOTS * W_CHUNK);
	w->slot = calloc(W_SLOTS, sizeof(*w->slot));
	if (w->ring == NULL || w->slot == NULL) {
		free(w->ring);
		free(w->slot);
		w->ring = NULL;
		w->slot = NULL;
		return;
	}
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, W_STACK);
	ok = pthread_create(&w->th, &at, w_main, w) == 0;
	pthread_attr_destroy(&at);
	if (!ok) {
		free(w->ring);
		free(w->slot);
		w->ring = NULL;
		w->slot = NULL;
		return;
	}
	w->started = 1;
}

/* Hand the filling slot over and wait for a free one: 0, or -1 when the
 * writer failed. */
static int
hand_over(struct xs *x)
{
	struct arc_writer *w = x->w;
	int failed;

	pthread_mutex_lock(&w->mu);
	w->head++;
	if (w->wwait && w->head - w->tail >= W_HALF)
		pthread_cond_broadcast(&w->cv);
	if (w->head - w->tail == W_SLOTS) {
		w->rwait = 1;
		while (w->head - w->tail > W_HALF && !w->failed)
			pthread_cond_wait(&w->cv, &w->mu);
		w->rwait = 0;
	}
	failed = w->failed;
	pthread_mutex_unlock(&w->mu);
	if (failed) {
		err_copy(x->e, &w->e);
		return -1;
	}
	/* the slot the writer left is the reader's until handed over */
	w->slot[w->head % W_SLOTS].flags = 0;
	w->slot[w->head % W_SLOTS].len = 0;
	return 0;
}

static struct slot *
filling(struct arc_writer *w)
{
	return &w->slot[w->head % W_SLOTS];
}

int
arc_w_begin(struct xs *x, const struct arc_wfile *f)
{
	struct arc_writer *w = x->w;
	struct slot *s;

	w_maybe_start(w);
	if (!w->started) {
		w_begin(w, f);
		return w_failed(x);
	}
	s = filling(w);
	if ((s->flags != 0 || s->len > 0) && hand_over(x) != 0) {
		close(f->fd);
		return -1;
	}
	s = filling(w);
	s->flags = S_BEGIN;
	memcpy(&s->f, f, sizeof(*f));
	s->off = 0;
	return 0;
}

int
arc_w_data(struct xs *x, int64_t off, const void *buf, size_t len)
{
	struct arc_writer *w = x->w;
	const unsigned char *p = buf;
	struct slot *s;
	size_t n;

	w_maybe_start(w);
	w->handed += len;
	if (!w->started) {
		w_data(w, off, p, len);
		return w_failed(x);
	}
	while (len > 0) {
		s = filling(w);
		if (s->len > 0 && (s->off + (int64_t)s->len != off || s->len == W_CHUNK)) {
			if (hand_over(x) != 0)
				return -1;
			s = filling(w);
		}
		if (s->len == 0)
			s->off = off;
		n = W_CHUNK - s->len < len ? W_CHUNK - s->len : len;
		memcpy(w->ring + (size_t)(w->head % W_SLOTS) * W_CHUNK + s->len, p, n);
		s->len += n;
		p += n;
		off += (int64_t)n;
		len -= n;
	}
	return 0;
}

int
arc_w_end(struct xs *x)
{
	struct arc_writer *w = x->w;

	if (!w->started) {
		w_end(w);
		return w_failed(x);
	}
	filling(w)->flags |= S_END;
	return hand_over(x);
}

int
arc_w_finish(struct xs *x, int ok)
{
	struct arc_writer *w = x->w;
	struct slot *s;

	if (w->started) {
		s = filling(w);
		pthread_mutex_lock(&w->mu);
		if (s->flags != 0 || s->len > 0)
			w->head++; /* checked data, and an unfinished file to close */
		w->done = 1;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->th, NULL);
		w->started = 0;
		x->st->cpu_write_us += w->cpu_us;
		w->cpu_us = 0;
	}
	if (w->open)
		close(w->f.fd); /* the reader stopped inside it */
	w->open = 0;
	drop_copy(w);
	x->st->entries += w->files;
	x->st->bytes = w->bytes;
	w->files = 0;
	if (ok && w->failed) {
		err_copy(x->e, &w->e);
		return -1;
	}
	return 0;
}

void
arc_w_destroy(struct arc_writer *w)
{
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w->ring);
	free(w->slot);
}
