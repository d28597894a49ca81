/*
 * healthcheck: GET /health (or /ready) on the local server; exit 0 iff it answers 200
 * in time. Run every few seconds for a container's whole life, so it does
 * the least possible: no DNS for numeric hosts (getaddrinfo takes them as
 * they are), then net_connect's non-blocking sockets, one address of the
 * name after another, and every wait bounded by one 2-second deadline.
 */
#include "base/clock.h"
#include "common.h"
#include "base/net.h"
#include "opts.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct healthcheck_opts {
	const char *host;
	int port, verbose, ready;
};

static int
set_port(void *dst, const struct opt *o, const char *arg, struct err *e)
{
	struct healthcheck_opts *h = dst;
	char *end;
	long v = strtol(arg, &end, 10);

	if (arg[0] < '0' || arg[0] > '9' || *end != '\0' || v < 1 || v > 65535)
		return err_set(e, "usage", "--port %s: expected 1..65535", arg);
	h->port = (int)v;
	return 0;
}

#define O(f) offsetof(struct healthcheck_opts, f)
static const struct opt options[] = {
    OPT(0, "port", "N", set_port, 0),
    OPT(0, "host", "H", NULL, O(host)),
    OPT(0, "ready", NULL, NULL, O(ready)),
    OPT('v', "verbose", NULL, NULL, O(verbose)),
    OPT_END,
};
#undef O

static const struct opts usage = {
    "healthcheck", "healthcheck.txt", options, 0, EXIT_FAIL, NULL,
};

/* The whole check, connect to status line: an answer within 2 s, well
 * inside what container health probes allow by default. */
#define HEALTHCHECK_TIMEOUT_MS 2000

static int
unhealthy(int verbose, const char *host, int port, const char *why)
{
	if (verbose)
		fprintf(stderr, "%s: healthcheck: %s port %d: %s\n", PROG, host, port, why);
	return EXIT_FAIL;
}

static int
check(const char *host, int port, int verbose, const char *path)
{
	int64_t end = clock_ms() + HEALTHCHECK_TIMEOUT_MS;
	int v6 = strchr(host, ':') != NULL;
	char req[320], resp[512], *eol;
	size_t got = 0, sent = 0, reqlen;
	struct err e = {0};
	ssize_t k;
	int fd;

	reqlen =
	    (size_t)snprintf(req, sizeof(req),
	                     "GET %s HTTP/1.1\r\nHost: %s%s%s:%d\r\nUser-Agent: agent-sandbox-healthcheck\r\n"
	                     "Connection: close\r\n\r\n",
	                     path, v6 ? "[" : "", host, v6 ? "]" : "", port);
	if (reqlen >= sizeof(req))
		return unhealthy(verbose, host, port, "host name too long");
	/* Every address of the name in turn, all within the one deadline. */
	fd = net_connect(host, port, HEALTHCHECK_TIMEOUT_MS, end, &e);
	if (fd < 0) {
		if (verbose)
			fprintf(stderr, "%s: healthcheck: %s\n", PROG, e.msg);
		return EXIT_FAIL;
	}
	while (sent < reqlen) {
		k = send(fd, req + sent, reqlen - sent, MSG_NOSIGNAL);
		if (k > 0) {
			sent += (size_t)k;
		} else if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (net_wait(fd, POLLOUT, HEALTHCHECK_TIMEOUT_MS, end, "send", &e) != 0)
				break;
		} else {
			break;
		}
	}
	if (sent < reqlen) {
		close(fd);
		return unhealthy(verbose, host, port, "cannot send the request");
	}
	/* Only the status line matters. */
	while (got < sizeof(resp) - 1 && memchr(resp, '\n', got) == NULL) {
		k = recv(fd, resp + got, sizeof(resp) - 1 - got, 0);
		if (k > 0) {
			got += (size_t)k;
		} else if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (net_wait(fd, POLLIN, HEALTHCHECK_TIMEOUT_MS, end, "answer", &e) != 0) {
				close(fd);
				return unhealthy(verbose, host, port, "no answer within 2 seconds");
			}
		} else {
			break;
		}
	}
	close(fd);
	resp[got] = '\0';
	eol = strchr(resp, '\r');
	if (eol == NULL)
		eol = strchr(resp, '\n');
	if (eol == NULL)
		return unhealthy(verbose, host, port,
		                 got ? "malformed answer" : "connection closed without an answer");
	*eol = '\0';
	if (strncmp(resp, "HTTP/1.", 7) != 0 ||
	    (strncmp(resp + 8, " 200 ", 5) != 0 && strcmp(resp + 8, " 200") != 0)) {
		char why[160];

		snprintf(why, sizeof(why), "answered \"%.120s\"", resp);
		return unhealthy(verbose, host, port, why);
	}
	if (verbose)
		printf("%s\n", resp);
	return EXIT_OK;
}

int
healthcheck_main(int argc, char **argv)
{
	struct healthcheck_opts o = {"127.0.0.1", 9000, 0, 0};
	int rc, n;

	if ((rc = opts_parse(&usage, argc, argv, &o, &n)) >= 0)
		return rc;
	return check(o.host, o.port, o.verbose, o.ready ? "/ready" : "/health");
}
