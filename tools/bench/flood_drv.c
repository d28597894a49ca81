/* Bench helper for tools/bench/sessions.sh: `flood N` writes N lines of 64
 * bytes to stdout, in 64 KiB writes, then exits 0. */
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

	for (i = 0; i < n; i++) {
		if (len + 128 > sizeof(buf)) {
			if (write(1, buf, len) != (ssize_t)len)
				return 1;
			len = 0;
		}
		/* 64 bytes with the newline */
		len += (size_t)snprintf(buf + len, 128,
		                        "%010ld the agent says something of moderate length here....\n", i);
	}
	if (len > 0 && write(1, buf, len) != (ssize_t)len)
		return 1;
	return 0;
}
