/* Bench helper for tools/bench/api.sh: the floor under any server that runs
 * a program per request. `spawn_drv THREADS SECONDS PROGRAM` has THREADS
 * threads each posix_spawn PROGRAM (empty environment, its own session, as
 * core/base/proc.c does) and waitpid it, over and over for SECONDS, then prints
 * "<runs per second> <p50 ms> <p99 ms>". */
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#define MAX_RUNS 200000

static double lat[MAX_RUNS];
static int nlat;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static double end_at;
static char *prog;

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *
loop(void *arg)
{
	char *argv[] = {prog, NULL}, *envp[] = {NULL};
	posix_spawnattr_t at;
	double t;
	pid_t pid;
	int st;

	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
	while ((t = now()) < end_at) {
		if (posix_spawn(&pid, prog, NULL, &at, argv, envp) != 0 || waitpid(pid, &st, 0) != pid)
			exit(1);
		t = now() - t;
		pthread_mutex_lock(&mu);
		if (nlat < MAX_RUNS)
			lat[nlat++] = t;
		pthread_mutex_unlock(&mu);
	}
	return NULL;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	pthread_t th[64];
	int n, i;
	double secs, t0;

	if (argc != 4 || (n = atoi(argv[1])) < 1 || n > 64 || (secs = atof(argv[2])) <= 0) {
		fprintf(stderr, "usage: spawn_drv THREADS SECONDS PROGRAM\n");
		return 2;
	}
	prog = argv[3];
	t0 = now();
	end_at = t0 + secs;
	for (i = 0; i < n; i++)
		pthread_create(&th[i], NULL, loop, NULL);
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	if (nlat == 0)
		return 1;
	qsort(lat, (size_t)nlat, sizeof(lat[0]), cmp);
	printf("%.0f %.2f %.2f\n", nlat / (now() - t0), lat[nlat / 2] * 1e3,
	       lat[(size_t)nlat * 99 / 100] * 1e3);
	return 0;
}
