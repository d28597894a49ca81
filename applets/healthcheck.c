/*
 * healthcheck: GET /health on the local server; exit 0 iff it answers 200
 * in time. Run every few seconds for a container's whole life, so it does
 * the least possible: no allocation, no DNS for numeric hosts, one
 * non-blocking socket polled against one 2-second deadline.
 */
#include "base/clock.h"
#include "common.h"
#include "base/net.h"
#include "opts.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct healthcheck_opts {
	const char *host;
	int port, verbose;
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
    OPT(0, "port", "N", set_port, 0, "port (default 9000)"),
    OPT(0, "host", "H", NULL, O(host), "host (default 127.0.0.1)"),
    OPT('v', "verbose", NULL, NULL, O(verbose), "print the status line, or why the check failed"),
    OPT_END,
};
#undef O

static const struct opts usage = {
    "healthcheck",
    "usage: agent-sandbox-server healthcheck [--port N] [--host H] [-v]\n"
    "\n"
    "GET /health on the local server. Exit 0 when it answers 200 within 2\n"
    "seconds, 1 otherwise (also for usage errors: container runtimes reserve\n"
    "exit code 2). Silent unless -v.\n"
    "\n",
    options,
    NULL,
    0,
    EXIT_FAIL,
    NULL,
};

/* The whole check, connect to status line: an answer within 2 s, well
 * inside what container health probes allow by default. */
#define HEALTHCHECK_TIMEOUT_MS 2000

/* Wait for events on fd until end; 1 ready, 0 timed out, -1 error. */
static int
wait_fd(int fd, short events, int64_t end)
{
	struct pollfd p = {fd, events, 0};
	int64_t left;
	int rc;

	for (;;) {
		left = end - clock_ms();
		if (left <= 0)
			return 0;
		rc = poll(&p, 1, (int)left);
		if (rc > 0)
			return 1;
		if (rc == 0)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

static int
unhealthy(int verbose, const char *host, int port, const char *why)
{
	if (verbose)
		fprintf(stderr, "%s: healthcheck: %s port %d: %s\n", PROG, host, port, why);
	return EXIT_FAIL;
}

static int
check(const char *host, int port, int verbose)
{
	struct sockaddr_storage ss;
	int64_t end = clock_ms() + HEALTHCHECK_TIMEOUT_MS;
	char req[320], resp[512], *eol;
	socklen_t sl;
	size_t got = 0, sent = 0, reqlen;
	ssize_t k;
	int fd, soerr = 0, rc;

	if (net_sockaddr(host, port, 0, &ss, &sl) != 0)
		return unhealthy(verbose, host, port, "cannot resolve the host");
	reqlen = (size_t)snprintf(
	    req, sizeof(req),
	    "GET /health HTTP/1.1\r\nHost: %s%s%s:%d\r\nUser-Agent: agent-sandbox-healthcheck\r\n"
	    "Connection: close\r\n\r\n",
	    ss.ss_family == AF_INET6 ? "[" : "", host, ss.ss_family == AF_INET6 ? "]" : "", port);
	if (reqlen >= sizeof(req))
		return unhealthy(verbose, host, port, "host name too long");

	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return unhealthy(verbose, host, port, strerror(errno));
	if (connect(fd, (struct sockaddr *)&ss, sl) != 0) {
		if (errno != EINPROGRESS) {
			close(fd);
			return unhealthy(verbose, host, port, strerror(errno));
		}
		rc = wait_fd(fd, POLLOUT, end);
		sl = sizeof(soerr);
		if (rc <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
			close(fd);
			return unhealthy(verbose, host, port,
			                 rc == 0 ? "connect timed out" : strerror(soerr ? soerr : errno));
		}
	}
	while (sent < reqlen) {
		k = send(fd, req + sent, reqlen - sent, MSG_NOSIGNAL);
		if (k > 0) {
			sent += (size_t)k;
		} else if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (wait_fd(fd, POLLOUT, end) <= 0)
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
			if (wait_fd(fd, POLLIN, end) <= 0) {
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
	struct healthcheck_opts o = {"127.0.0.1", 9000, 0};
	int rc, n;

	if ((rc = opts_parse(&usage, argc, argv, &o, &n)) >= 0)
		return rc;
	return check(o.host, o.port, o.verbose);
}
