/*
 * Making a staged tree durable before its name is: the syncfs that runs
 * while the tree is listed (install_bg_sync_*), and the pacer that syncs
 * while it is staged (install_pacer_*). install_int.h says why each.
 */
#include "install/install_int.h"

#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PACER_MS 100

static void *
bg_sync_main(void *arg)
{
	struct bg_sync *s = arg;

	syncfs(s->fd);
	return NULL;
}

void
install_bg_sync_start(struct bg_sync *s, const char *dir)
{
	pthread_attr_t at;

	s->started = 0;
	s->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->fd < 0 || pthread_attr_init(&at) != 0)
		return;
	pthread_attr_setstacksize(&at, 65536);
	s->started = pthread_create(&s->th, &at, bg_sync_main, s) == 0;
	pthread_attr_destroy(&at);
}

void
install_bg_sync_wait(struct bg_sync *s)
{
	if (s->fd < 0)
		return;
	if (s->started)
		pthread_join(s->th, NULL);
	else
		syncfs(s->fd);
	s->started = 0;
	close(s->fd);
	s->fd = -1;
}

static void *
pacer_main(void *arg)
{
	struct pacer *p = arg;
	struct timespec ts;

	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		pthread_mutex_unlock(&p->mu);
		syncfs(p->fd);
		pthread_mutex_lock(&p->mu);
		if (p->stop)
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += PACER_MS * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&p->cv, &p->mu, &ts);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

void
install_pacer_start(struct pacer *p, const char *dir)
{
	pthread_attr_t at;

	memset(p, 0, sizeof(*p));
	p->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (p->fd < 0)
		return;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	if (pthread_attr_init(&at) != 0)
		return;
	pthread_attr_setstacksize(&at, 65536);
	p->started = pthread_create(&p->th, &at, pacer_main, p) == 0;
	pthread_attr_destroy(&at);
}

void
install_pacer_stop(struct pacer *p)
{
	if (p->fd < 0)
		return;
	if (p->started) {
		pthread_mutex_lock(&p->mu);
		p->stop = 1;
		pthread_cond_signal(&p->cv);
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->th, NULL);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	close(p->fd);
	p->fd = -1;
}
