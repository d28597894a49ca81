/* Bench helper for tools/bench/sessions.sh: `flood N` writes N lines of 64
 * bytes to stdout, in 64 KiB writes, then exits 0. Started as codex exec
 * --json is (tools/bench/wire.sh: a word "--json"), it writes codex's
 * thread.started and then N agent_message items of about the same size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	static char buf[65536];
	long n = argc > 1 ? atol(argv[argc - 1]) : 0, i;
	size_t len = 0;
	int json = 0;

	for (i = 1; i < argc; i++)
		json |= strcmp(argv[i], "--json") == 0;
	if (json)
		len = (size_t)snprintf(
		    buf, 128, "{\"type\":\"thread.started\",\"thread_id\":\"flood-%ld\"}\n", (long)getpid());

	for (i = 0; i < n; i++) {
		if (len + 128 > sizeof(buf)) {
			if (write(1, buf, len) != (ssize_t)len)
				return 1;
			len = 0;
		}
		/* 64 bytes with the newline */
		if (json)
			len += (size_t)snprintf(
			    buf + len, 128,
			    "{\"type\":\"item.completed\",\"item\":{\"id\":\"i%ld\",\"type\":"
			    "\"agent_message\",\"text\":\"%010ld the agent says something\"}}\n",
			    i, i);
		else
			len += (size_t)snprintf(
			    buf + len, 128, "%010ld the agent says something of moderate length here....\n",
			    i);
	}
	if (len > 0 && write(1, buf, len) != (ssize_t)len)
		return 1;
	return 0;
}
