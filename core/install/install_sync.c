/*
 * Making a staged tree durable before its name is: the syncfs that runs
 * while the tree is listed (install_bg_sync_*). install_int.h says why.
 */
#include "install/install_int.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

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
