#include "base/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The wait for this step: step_ms, cut at end_ms. Returns -1 when end_ms
 * has passed. */
static int
step_left(int step_ms, int64_t end_ms, int *deadline_hit)
{
	int64_t left;

	*deadline_hit = 0;
	if (end_ms <= 0)
		return step_ms;
	left = end_ms - clock_ms();
	if (left <= 0) {
		*deadline_hit = 1;
		return -1;
	}
	if (left < step_ms) {
		*deadline_hit = 1;
		return (int)left;
	}
	return step_ms;
}

int
net_wait(int fd, int events, int step_ms, int64_t end_ms, const char *what, struct err *e)
{
	struct pollfd p;
	int ms, dl, r;

	for (;;) {
		ms = step_left(step_ms, end_ms, &dl);
		if (ms < 0)
			return err_set(e, "http.timeout", "%s: the transfer deadline passed", what);
		p.fd = fd;
		p.events = (short)events;
		p.revents = 0;
		r = poll(&p, 1, ms);
		if (r > 0)
			return 0;
		if (r == 0) {
			if (dl)
				return err_set(e, "http.timeout", "%s: the transfer deadline passed", what);
			return err_set(e, "http.timeout", "%s: nothing for %d ms", what, step_ms);
		}
		if (errno != EINTR)
			return err_sys(e, "http.connect", errno, "%s: poll: %s", what, strerror(errno));
	}
}

static int
connect_one(const struct addrinfo *ai, int timeout_ms, int64_t end_ms, struct err *e)
{
	int fd, one = 1, soerr = 0;
	socklen_t sl = sizeof(soerr);

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0)
		return err_sys(e, "http.connect", errno, "socket: %s", strerror(errno));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		err_sys(e, "http.connect", errno, "%s", strerror(errno));
		close(fd);
		return -1;
	}
	if (net_wait(fd, POLLOUT, timeout_ms, end_ms, "connect", e) != 0) {
		close(fd);
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
		soerr = errno;
	if (soerr != 0) {
		err_sys(e, "http.connect", soerr, "%s", strerror(soerr));
		close(fd);
		return -1;
	}
	return fd;
}

/* host as a numeric IPv4 or IPv6 address with port into ss, and ai made
 * its one answer: 1, or 0 when host is a name. */
static int
numeric(const char *host, int port, struct sockaddr_storage *ss, struct addrinfo *ai)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		ai->ai_addrlen = sizeof(*a4);
	} else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		ai->ai_addrlen = sizeof(*a6);
	} else {
		return 0;
	}
	ai->ai_family = ss->ss_family;
	ai->ai_protocol = IPPROTO_TCP;
	ai->ai_next = NULL;
	return 1;
}

int
net_connect(const char *host, int port, int timeout_ms, int64_t end_ms, struct err *e)
{
	struct addrinfo hints, *res = NULL, *ai;
	struct sockaddr_storage ss;
	char sport[16];
	struct err last = {0};
	int r, fd = -1, late = 0;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	/* A numeric address is its own one answer: no resolver, no allocation
	 * (healthcheck runs every few seconds for a container's life). */
	if (numeric(host, port, &ss, &hints)) {
		hints.ai_addr = (struct sockaddr *)&ss;
	} else {
		snprintf(sport, sizeof(sport), "%d", port);
		r = getaddrinfo(host, sport, &hints, &res);
		if (r != 0)
			return err_set(e, "http.resolve", "%s: %s", host,
			               r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
	}
	err_set(&last, "http.connect", "no address");
	for (ai = res ? res : &hints; ai != NULL && fd < 0; ai = ai->ai_next) {
		fd = connect_one(ai, timeout_ms, end_ms, &last);
		/* The deadline is for the whole transfer: no point trying on. */
		late = fd < 0 && end_ms > 0 && end_ms - clock_ms() <= 0;
		if (late)
			break;
	}
	if (res != NULL)
		freeaddrinfo(res);
	if (fd < 0) {
		if (last.code != NULL && strcmp(last.code, "http.timeout") == 0 && !late)
			return err_set(e, "http.connect", "%s port %d: no answer within %d ms", host, port,
			               timeout_ms);
		return err_sys(e, last.code, last.sys, "%s port %d: %s", host, port, last.msg);
	}
	return fd;
}

int
net_sockaddr(const char *host, int port, int passive, struct sockaddr_storage *ss, socklen_t *sl)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	struct addrinfo hints, *res;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		*sl = sizeof(*a4);
	} else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		*sl = sizeof(*a6);
	} else {
		memset(&hints, 0, sizeof(hints));
		hints.ai_socktype = SOCK_STREAM;
		if (passive)
			hints.ai_flags = AI_PASSIVE;
		if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
			return -1;
		if (res->ai_addrlen > sizeof(*ss)) {
			freeaddrinfo(res);
			return -1;
		}
		memcpy(ss, res->ai_addr, res->ai_addrlen);
		*sl = res->ai_addrlen;
		freeaddrinfo(res);
	}
	if (ss->ss_family == AF_INET6)
		a6->sin6_port = htons((uint16_t)port);
	else
		a4->sin_port = htons((uint16_t)port);
	return 0;
}
