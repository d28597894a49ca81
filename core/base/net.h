#ifndef ABX_NET_H
#define ABX_NET_H
/*
 * Sockets for the HTTP client and healthcheck: name resolution
 * (getaddrinfo: musl's resolver in the static build, /etc/hosts and DNS),
 * IPv4 and IPv6, non-blocking connect with a timeout, and waits bounded by
 * a step and a deadline.
 */
#include <stdint.h>
#include <sys/socket.h>

#include "base/clock.h"
#include "base/err.h"

/* Connect to host:port trying each resolved address in order until one
 * answers within timeout_ms (each) and before end_ms (absolute, 0 = none).
 * A numeric IPv4 or IPv6 host is used as it is: no resolver, no allocation.
 * Returns a non-blocking, close-on-exec socket with TCP_NODELAY, or -1 with
 * http.resolve, http.connect or http.timeout. */
int net_connect(const char *host, int port, int timeout_ms, int64_t end_ms, struct err *e);

/* Wait until fd is ready for events (POLLIN/POLLOUT) for at most step_ms and
 * never past end_ms. Returns 0, or -1 with http.timeout ("what" names the
 * wait in the message). */
int net_wait(int fd, int events, int step_ms, int64_t end_ms, const char *what, struct err *e);

/* One socket address for host:port, for a listener: a numeric IPv4 or IPv6
 * address without any lookup, else the first getaddrinfo answer
 * (AI_PASSIVE when passive, for a listener). Returns 0, or -1 when the name
 * does not resolve. */
int net_sockaddr(const char *host, int port, int passive, struct sockaddr_storage *ss, socklen_t *sl);

#endif
