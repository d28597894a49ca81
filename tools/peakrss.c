/*
 * peakrss CMD...: run CMD with its output discarded and print its resident
 * set size in KiB as it exits, on stdout; exit with CMD's status.
 *
 * Why not wait4's ru_maxrss: the kernel counts the forking parent's pages in
 * the child's maxrss until exec, and since Linux 6.2 the RSS counters behind
 * maxrss and VmHWM are per-CPU approximations that read 0 for a process as
 * small as ours. So the child is traced, stopped at PTRACE_EVENT_EXIT (before
 * its memory is released) and /proc/PID/smaps_rollup, which walks the page
 * tables, gives the exact Rss; the larger of that and VmHWM is printed. For a
 * short-lived command the RSS at exit is its peak unless it returned memory to
 * the system before exiting.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

static long
field(pid_t pid, const char *file, const char *name)
{
	char path[64], line[256];
	size_t n = strlen(name);
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, name, n) == 0) {
			sscanf(line + n, "%ld", &v);
			break;
		}
	fclose(f);
	return v;
}

int
main(int argc, char **argv)
{
	long kib = -1, hwm;
	int st, sig;
	pid_t pid;

	if (argc < 2) {
		fputs("usage: peakrss CMD...\n", stderr);
		return 2;
	}
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		execvp(argv[1], argv + 1);
		_exit(127);
	}
	/* The first stop is the SIGTRAP after exec. */
	if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st))
		return 1;
	ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_TRACEEXIT);
	sig = 0;
	for (;;) {
		ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
		if (waitpid(pid, &st, 0) != pid)
			return 1;
		if (WIFEXITED(st) || WIFSIGNALED(st))
			break;
		sig = 0;
		if (st >> 8 == (SIGTRAP | (PTRACE_EVENT_EXIT << 8))) {
			kib = field(pid, "smaps_rollup", "Rss:");
			hwm = field(pid, "status", "VmHWM:");
			if (hwm > kib)
				kib = hwm;
		} else if (WIFSTOPPED(st) && WSTOPSIG(st) != SIGTRAP) {
			sig = WSTOPSIG(st);
		}
	}
	if (kib < 0)
		return 1;
	printf("%ld\n", kib);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
