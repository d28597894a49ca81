/*
 * Child processes in their own process group, with deadlines and capture.
 */
#include "base/proc.h"
#include "base/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/fs.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every architecture */
#endif
/* Without a pidfd, how often exit is checked while the pipes are quiet. */
#define PROC_POLL_TICK_MS 10

int
proc_spawn(struct proc *p, const struct proc_spec *s, struct err *e)
{
	static char *const empty_env[] = {NULL};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t all, none;
	int out[2] = {-1, -1}, er[2] = {-1, -1};
	int rc;

	memset(p, 0, sizeof(*p));
	p->pid = -1;
	p->fd[0] = p->fd[1] = p->fd[2] = -1;
	p->pidfd = -1;
	if (s->argv == NULL || s->argv[0] == NULL || s->argv[0][0] != '/')
		return err_set(e, "internal", "proc: argv[0] must be an absolute path");
	if (pipe2(out, O_CLOEXEC) != 0 || pipe2(er, O_CLOEXEC) != 0) {
		rc = errno;
		if (out[0] >= 0) {
			close(out[0]);
			close(out[1]);
		}
		return err_sys(e, "io.error", rc, "pipe: %s", strerror(rc));
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, er[1], 2);
	if (s->cwd != NULL && s->cwd[0] != '\0')
		posix_spawn_file_actions_addchdir_np(&fa, s->cwd);
	posix_spawnattr_init(&at);
	sigfillset(&all);
	sigemptyset(&none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setsigmask(&at, &none);
	/* A session of its own: its own process group (killed as one) and no
	 * controlling terminal to reach back through. */
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
	rc = posix_spawn(&p->pid, s->argv[0], &fa, &at, s->argv, s->envp != NULL ? s->envp : empty_env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(out[1]);
	close(er[1]);
	if (rc != 0) {
		close(out[0]);
		close(er[0]);
		p->pid = -1;
		/* the cause first: callers that keep a short line cut the path */
		if (rc == ENOENT && access("/dev/null", F_OK) != 0)
			return err_set(
			    e, "io.error",
			    "/dev/null does not exist in this image (it is every program's stdin), "
			    "so %s cannot run: create it (mknod -m 666 /dev/null c 1 3) or mount /dev",
			    s->argv[0]);
		return err_sys(e, "io.error", rc, "cannot run %s: %s", s->argv[0], strerror(rc));
	}
	p->fd[1] = out[0];
	p->fd[2] = er[0];
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(er[0], F_SETFL, O_NONBLOCK);
	p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	if (p->pidfd >= 0)
		fcntl(p->pidfd, F_SETFD, FD_CLOEXEC);
	p->started_ms = clock_ms();
	p->deadline_ms = s->timeout_ms > 0 ? p->started_ms + s->timeout_ms : 0;
	p->grace_ms = s->kill_grace_ms > 0 ? s->kill_grace_ms : PROC_KILL_GRACE_MS_DEFAULT;
	return 0;
}

int
proc_kill(struct proc *p, int sig)
{
	if (p->pid <= 0)
		return -1;
	/* The group outlives its leader only while members remain, so the id
	 * cannot have been reused by then: kill(-pid) is safe even after the
	 * leader exited, up to the moment we reap it (we reap after this). */
	return kill(-p->pid, sig);
}

/* The parent of process pid (/proc/<pid>/stat field 4), or -1. */
static pid_t
parent_of(const char *pid)
{
	char path[64], buf[512], *q;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%.32s/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* comm may hold spaces and parentheses: count from the last ')' */
	if ((q = strrchr(buf, ')')) == NULL || (q = strchr(q + 2, ' ')) == NULL)
		return -1;
	return (pid_t)atoi(q + 1);
}

int
proc_kill_tree(struct proc *p, int sig)
{
	pid_t tree[PROC_TREE_MAX];
	int n = 1, grew = 1, i, rc;
	char **names;
	size_t nn, k;
	struct err e = {0};

	if (p->pid <= 0)
		return -1;
	tree[0] = p->pid;
	/* A process joins once its parent is in: passes until none joins (a
	 * listing may show a child before its parent). */
	while (grew && n < PROC_TREE_MAX &&
	       fs_dir_names(AT_FDCWD, "/proc", "io.error", &names, &nn, &e) == 0) {
		grew = 0;
		for (k = 0; k < nn && n < PROC_TREE_MAX; k++) {
			pid_t pid = (pid_t)atoi(names[k]), pp;

			for (i = 0; pid > 0 && i < n && tree[i] != pid; i++)
				;
			if (pid <= 0 || i < n || (pp = parent_of(names[k])) <= 0)
				continue;
			for (i = 0; i < n && tree[i] != pp; i++)
				;
			if (i < n) {
				tree[n++] = pid;
				grew = 1;
			}
		}
		free(names);
	}
	/* The agent first: a command that died before it would read as the
	 * command's end to the agent, which could still finish its turn. */
	rc = proc_kill(p, sig);
	for (i = 1; i < n; i++)
		(void)kill(tree[i], sig);
	return rc;
}

/* Read what is available on one pipe; close it at EOF. */
static void
drain_fd(struct proc *p, int i, proc_sink sink, void *arg)
{
	char sbuf[PROC_READ_CHUNK], *buf = p->rbuf != NULL ? p->rbuf : sbuf;
	size_t cap = p->rbuf != NULL ? p->rbuf_len : sizeof(sbuf);
	ssize_t n;

	for (;;) {
		n = read(p->fd[i], buf, cap);
		if (n > 0) {
			if (sink != NULL)
				sink(arg, (enum proc_stream)i, buf, (size_t)n);
			if ((size_t)n < cap)
				return;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		close(p->fd[i]);
		p->fd[i] = -1;
		return;
	}
}

/* Has the leader exited? Detected without reaping, so the group id stays
 * ours while we kill what is left of the group. */
static int
leader_gone(struct proc *p)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
		return errno == ECHILD;
	return si.si_pid == p->pid;
}

static void
reap(struct proc *p)
{
	int st;

	/* Stragglers of the group (a backgrounded grandchild) die with it. */
	proc_kill(p, SIGKILL);
	while (waitpid(p->pid, &st, 0) < 0)
		if (errno != EINTR) {
			st = 0;
			break;
		}
	p->status = st;
	p->exited = 1;
	p->ended_ms = clock_ms();
	if (p->pidfd >= 0) {
		close(p->pidfd);
		p->pidfd = -1;
	}
}

int
proc_step(struct proc *p, int wait_ms, proc_sink sink, void *arg)
{
	struct pollfd pf[3];
	int64_t now, until;
	int n = 0, i, t;

	if (p->pid <= 0)
		return 0;
	now = clock_ms();
	if (!p->exited) {
		if (p->deadline_ms != 0 && now >= p->deadline_ms && !p->timed_out) {
			p->timed_out = 1;
			proc_kill(p, SIGTERM);
			p->kill_at_ms = now + p->grace_ms;
		}
		if (p->kill_at_ms != 0 && now >= p->kill_at_ms) {
			proc_kill(p, SIGKILL);
			p->kill_at_ms = 0;
		}
		if (leader_gone(p)) {
			reap(p);
			/* Descendants are gone with the group; what they wrote is
			 * in the pipes, and EOF follows unless something escaped
			 * the group. */
			until = clock_ms() + PROC_DRAIN_MS;
			while ((p->fd[1] >= 0 || p->fd[2] >= 0) && (now = clock_ms()) < until) {
				n = 0;
				for (i = 1; i <= 2; i++)
					if (p->fd[i] >= 0) {
						pf[n].fd = p->fd[i];
						pf[n].events = POLLIN;
						n++;
					}
				if (poll(pf, (nfds_t)n, (int)(until - now)) <= 0)
					break;
				for (i = 1; i <= 2; i++)
					if (p->fd[i] >= 0)
						drain_fd(p, i, sink, arg);
			}
			for (i = 1; i <= 2; i++)
				if (p->fd[i] >= 0) {
					close(p->fd[i]);
					p->fd[i] = -1;
				}
			return 0;
		}
	}
	/* How long to sleep: the caller's wait, the deadline, the SIGKILL time,
	 * and without a pidfd a short tick to look for the exit. */
	t = wait_ms;
	if (p->deadline_ms != 0 && !p->timed_out && (t < 0 || p->deadline_ms - now < t))
		t = (int)(p->deadline_ms - now);
	if (p->kill_at_ms != 0 && (t < 0 || p->kill_at_ms - now < t))
		t = (int)(p->kill_at_ms - now);
	if (p->pidfd < 0 && (t < 0 || t > PROC_POLL_TICK_MS))
		t = PROC_POLL_TICK_MS;
	if (t < 0)
		t = -1;
	n = 0;
	for (i = 1; i <= 2; i++)
		if (p->fd[i] >= 0) {
			pf[n].fd = p->fd[i];
			pf[n].events = POLLIN;
			n++;
		}
	if (p->pidfd >= 0) {
		pf[n].fd = p->pidfd;
		pf[n].events = POLLIN;
		n++;
	}
	if (n == 0) {
		/* No pipe and no pidfd: sleep a tick. */
		struct timespec ts = {0, PROC_POLL_TICK_MS * 1000000L};

		nanosleep(&ts, NULL);
		return 1;
	}
	if (poll(pf, (nfds_t)n, t) > 0)
		for (i = 1; i <= 2; i++)
			if (p->fd[i] >= 0)
				drain_fd(p, i, sink, arg);
	return 1;
}

void
proc_terminate(struct proc *p)
{
	if (p->pid <= 0 || p->exited)
		return;
	proc_kill(p, SIGTERM);
	if (!p->timed_out) {
		p->kill_at_ms = clock_ms() + p->grace_ms;
		p->deadline_ms = 0;
	}
	while (proc_step(p, -1, NULL, NULL) == 1)
		;
}

void
proc_close(struct proc *p)
{
	int i;

	if (p->pid > 0 && !p->exited) {
		proc_kill(p, SIGKILL);
		reap(p);
	}
	for (i = 1; i <= 2; i++)
		if (p->fd[i] >= 0) {
			close(p->fd[i]);
			p->fd[i] = -1;
		}
	if (p->pidfd >= 0) {
		close(p->pidfd);
		p->pidfd = -1;
	}
}

int
proc_exit_code(const struct proc *p)
{
	if (WIFEXITED(p->status))
		return WEXITSTATUS(p->status);
	if (WIFSIGNALED(p->status))
		return 128 + WTERMSIG(p->status);
	return -1;
}

int64_t
proc_elapsed_ms(const struct proc *p)
{
	return (p->ended_ms != 0 ? p->ended_ms : clock_ms()) - p->started_ms;
}

void
proc_capture_sink(void *arg, enum proc_stream s, const char *data, size_t len)
{
	struct proc_capture *c = arg;
	int o = s == PROC_STDOUT || c->merge;
	char **out = o ? &c->out : &c->err;
	size_t *room = o ? &c->out_room : &c->err_room;
	size_t *have = o ? &c->out_len : &c->err_len;
	uint64_t *total = s == PROC_STDOUT ? &c->out_total : &c->err_total;
	/* The stream's bytes as a struct buf: a caller's buffer (room cap + 1)
	 * is never grown, a NULL one is grown as output arrives. */
	struct buf b = {(unsigned char *)*out, *have, *room, c->cap, 0};

	*total += len;
	if (len > c->cap - *have) {
		c->truncated = 1;
		len = c->cap - *have;
	}
	if (len == 0)
		return;
	if (buf_put(&b, data, len) != 0) {
		c->truncated = 1; /* out of memory: this chunk is dropped */
		return;
	}
	*out = (char *)b.p;
	*room = b.cap;
	*have = b.len;
}

/* A caller's buffer (room 0 = cap + 1) starts empty; none grows later. */
static void
stream_begin(char *buf, size_t *room, size_t cap)
{
	if (buf == NULL) {
		*room = 0;
		return;
	}
	if (*room == 0)
		*room = cap + 1;
	buf[0] = '\0';
}

void
proc_capture_begin(struct proc_capture *c)
{
	c->out_len = c->err_len = 0;
	c->out_total = c->err_total = 0;
	c->truncated = 0;
	stream_begin(c->out, &c->out_room, c->cap);
	stream_begin(c->err, &c->err_room, c->cap);
}

void
proc_capture_free(struct proc_capture *c)
{
	free(c->out);
	free(c->err);
	c->out = c->err = NULL;
	c->out_room = c->err_room = 0;
}

int
proc_run_until(struct proc *p, const struct proc_spec *s, struct proc_capture *c, int (*stop)(void *),
               void *arg, struct err *e)
{
	proc_capture_begin(c);
	if (proc_spawn(p, s, e) != 0)
		return -1;
	while (proc_step(p, stop != NULL ? PROC_STOP_CHECK_MS : -1, proc_capture_sink, c) == 1)
		if (stop != NULL && !p->stopped && !p->exited && stop(arg)) {
			p->stopped = 1;
			proc_kill(p, SIGTERM);
			p->deadline_ms = 0;
			p->kill_at_ms = clock_ms() + p->grace_ms;
		}
	proc_close(p);
	return 0;
}

int
proc_run(struct proc *p, const struct proc_spec *s, struct proc_capture *c, struct err *e)
{
	return proc_run_until(p, s, c, NULL, NULL, e);
}

/* An executable regular file (what execvp would run). */
static int
runnable(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

int
proc_which(const char *name, const char *path, char *out, size_t cap, struct err *e)
{
	char cwd[4096];
	const char *p, *q;
	size_t n;

	if (name == NULL || name[0] == '\0')
		return err_set(e, "not_found", "no program named");
	if (strchr(name, '/') != NULL) {
		if (name[0] == '/')
			cwd[0] = '\0';
		else if (getcwd(cwd, sizeof(cwd)) == NULL)
			return err_sys(e, "io.error", errno, "%s: getcwd: %s", name, strerror(errno));
		if ((size_t)snprintf(out, cap, "%s%s%s", cwd, cwd[0] ? "/" : "", name) >= cap)
			return err_set(e, "io.error", "%s: path too long", name);
		return 0;
	}
	for (p = path != NULL ? path : ""; p != NULL; p = q != NULL ? q + 1 : NULL) {
		q = strchr(p, ':');
		n = q != NULL ? (size_t)(q - p) : strlen(p);
		if (n == 0) {
			if (getcwd(cwd, sizeof(cwd)) == NULL)
				continue;
		} else if (n < sizeof(cwd)) {
			memcpy(cwd, p, n);
			cwd[n] = '\0';
		} else {
			continue;
		}
		if (fs_path_join(out, cap, cwd, name, NULL) != 0)
			continue;
		if (out[0] == '/' && runnable(out))
			return 0;
	}
	out[0] = '\0';
	return err_set(e, "not_found", "%s: not found on PATH", name);
}
