#ifndef ABX_TOKFILE_H
#define ABX_TOKFILE_H
/*
 * The token file (server.token_file): the access token of principal
 * default, written by the platform after a sandbox is created or resumed,
 * and watched by a thread of its own, so a request pays one uncontended
 * mutex and a 32-byte compare, never a file read.
 *
 * Until the file holds a token the server is not initialised. A token read
 * replaces the previous one at once. Where the platform names its
 * sandboxes (server.sandbox_id_file), the id seen when the token was read
 * is kept: a process resumed from a snapshot into another sandbox sees
 * another id and is not initialised until the token file changes again,
 * so a credential set in one sandbox never opens another. A missing id
 * file is a platform without ids: nothing is compared.
 *
 * The watch: inotify on the two files' directories (a write, rename,
 * create or delete there wakes the thread at once; a Kubernetes Secret's
 * symlink swap is a rename there), and a re-read every TOKFILE_POLL_MS in
 * any case, more often while a directory cannot be watched (not there yet).
 */
#include <pthread.h>
#include <sys/types.h>
#include <time.h>

#include "base/err.h"

/* A sandbox id is a short word (E2B's are 20 characters). */
#define TOKFILE_ID_MAX 128
/* The re-read when inotify said nothing: a missed event costs at most this;
 * a directory that cannot be watched yet is looked at 4 times as often. */
#define TOKFILE_POLL_MS 1000
/* Token bytes read (core/server/api.h's API_TOKEN_MAX): longer is invalid. */
#define TOKFILE_TOKEN_MAX 512

enum tokfile_state {
	TOKFILE_MISSING, /* no file (or unreadable) */
	TOKFILE_EMPTY,   /* nothing but white space */
	TOKFILE_INVALID, /* over TOKFILE_TOKEN_MAX, or a byte outside visible ASCII */
	TOKFILE_MOVED,   /* read in another sandbox than this one */
	TOKFILE_OK,
};

struct tokfile {
	pthread_mutex_t mu;
	pthread_mutex_t cmu; /* one tokfile_check at a time: a read never lands after a newer one */
	char path[1024], id_path[1024];
	enum tokfile_state state; /* under mu, with digest */
	unsigned char digest[32]; /* sha256 of the token when TOKFILE_OK */
	/* The watch thread's own: what the accepted read saw. */
	char id[TOKFILE_ID_MAX];
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	int ifd; /* inotify, -1 = none */
};

/* Read path (and id_path, "" = none) once and start the watch thread.
 * Returns 0, or -1 with e (config.invalid: a path too long; internal: no
 * thread). t must live as long as the process. */
int tokfile_start(struct tokfile *t, const char *path, const char *id_path, struct err *e);

/* Read both files now and update the state (the thread's step; safe from
 * any thread: checks run one at a time). */
void tokfile_check(struct tokfile *t);

/* 0 when initialised, else -1 with e server.not_initialised naming the
 * file and why. */
int tokfile_ready(struct tokfile *t, struct err *e);

/* 1 when initialised and digest is the token's sha256 (constant time),
 * else 0. */
int tokfile_match(struct tokfile *t, const unsigned char digest[32]);

#endif
