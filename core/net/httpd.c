#include "net/httpd.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/net.h"
#include "base/json.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "net/httpd_int.h"

/* ---- accepting ------------------------------------------------------------ */

static void
format_peer(const struct sockaddr_storage *sa, char *buf, size_t cap)
{
	char ip[INET6_ADDRSTRLEN];

	if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		snprintf(buf, cap, "[%s]:%d", ip, ntohs(a->sin6_port));
	} else if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		snprintf(buf, cap, "%s:%d", ip, ntohs(a->sin_port));
	} else {
		snprintf(buf, cap, "-");
	}
}

/* The peer's address as 16 bytes (IPv4 v4-mapped); 1 when it is loopback. */
static int
peer_addr(const struct sockaddr_storage *sa, unsigned char addr[16])
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	memset(addr, 0, 16);
	if (sa->ss_family == AF_INET) {
		memcpy(addr, mapped, 12);
		memcpy(addr + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->ss_family == AF_INET6) {
		memcpy(addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
	if (memcmp(addr, mapped, 12) == 0)
		return addr[12] == 127;
	return memcmp(addr, in6addr_loopback.s6_addr, 16) == 0;
}

/* Over a limit (or draining): answer 503 without blocking and close. */
static void
reject_busy(struct httpd *s, int fd, const struct sockaddr_storage *sa, int why)
{
	struct conn tmp;
	char drop[1024], msg[160], body[512], resp[768];
	int n;

	memset(&tmp, 0, sizeof(tmp));
	peer_addr(sa, tmp.addr);
	format_peer(sa, tmp.peer, sizeof(tmp.peer));
	tmp.t_start = clock_us();
	httpd__busy_reason(s, why, tmp.peer, msg, sizeof(msg));
	n = httpd_error_body(body, sizeof(body), "request.busy", msg, NULL);
	n = snprintf(resp, sizeof(resp),
	             "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
	             "Content-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s",
	             n < 0 ? 0 : n, n < 0 ? "" : body);
	/* What already arrived is read first: closing with unread data would
	 * reset the connection before the client reads the 503. */
	(void)!recv(fd, drop, sizeof(drop), MSG_DONTWAIT);
	if (n > 0 && (size_t)n < sizeof(resp))
		(void)!send(fd, resp, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
	shutdown(fd, SHUT_WR);
	close(fd);
	httpd__log(s, "%s: refused: %s", tmp.peer, msg);
	httpd__log_request(s, &tmp, 503, 0);
}

/* The connection that has waited longest for a request's first byte (an
 * idle keep-alive one, or one that never sent a byte) or for its client to
 * close after an error answer (lingering: a refusal of the gate, a parse
 * error), of one peer address or of any; NULL when every connection is in
 * the middle of something. A lingering one already has its answer, so
 * closing it costs its client at most that answer, never a request: else
 * refused clients would hold slots for HTTPD_LINGER_MS each. */
static struct conn *
oldest_waiting(struct httpd *s, const unsigned char *addr)
{
	struct conn *best = NULL;
	int i;

	for (i = 0; i < s->hiwater; i++) {
		struct conn *c = &s->conns[i];

		if (c->state != C_LINGER &&
		    (c->state != C_HEAD || c->reserve || c->in_ready || (c->b != NULL && c->b->len > 0)))
			continue;
		if (addr != NULL && memcmp(c->addr, addr, 16) != 0)
			continue;
		if (best == NULL || c->since < best->since)
			best = c;
	}
	return best;
}

/* Idle first, then a request partly sent that no gate let through, then
 * an admitted body that has received nothing for HTTPD_STALL_MS: a client
 * that sent its whole request, or whose admitted upload is moving, never
 * loses its connection to a new one, which nobody has vouched for yet. */
static struct conn *
reclaimable(struct httpd *s, const unsigned char *addr)
{
	struct conn *v = oldest_waiting(s, addr);

	if (v == NULL)
		v = httpd__oldest_stalled(s, addr, NULL, 0);
	if (v == NULL && (v = httpd__oldest_stalled(s, addr, NULL, 1)) != NULL &&
	    clock_ms() - v->heard < HTTPD_STALL_MS)
		v = NULL;
	return v;
}

/* Make room for a new connection of peer addr by closing one that waits
 * for a request or for the rest of one, or say which limit holds (WHY_*).
 * Closing an idle keep-alive connection is what any HTTP/1.1 server may do
 * at any time (RFC 9112 9.8); here it keeps a flood of idle connections or
 * partly sent requests from locking out every new client until the idle,
 * header or body timeout. */
static int
make_room(struct httpd *s, const unsigned char *addr, const char *peer)
{
	struct conn *v;

	/* At max_conns the table-full rule below says the same, better. */
	if (s->cfg.max_conns_per_peer < s->cfg.max_conns &&
	    httpd__peer_slot(s, addr)->n >= s->cfg.max_conns_per_peer) {
		if ((v = reclaimable(s, addr)) == NULL)
			return WHY_PEER;
		httpd__log(
		    s, "%s: closed its longest-waiting connection %s for a new one (per-address limit %d)",
		    peer, v->peer, s->cfg.max_conns_per_peer);
		httpd__conn_close(s, v);
	}
	if (s->active - s->nreserve >= s->cfg.max_conns) {
		if ((v = reclaimable(s, NULL)) == NULL)
			return WHY_FULL;
		httpd__log(s,
		           "%s: closed the longest-waiting connection %s for a new one (all %d slots in use)",
		           peer, v->peer, s->cfg.max_conns);
		httpd__conn_close(s, v);
	}
	return WHY_NONE;
}

/* The reserve is full: close its oldest connection still reading a head,
 * or lingering after its answer (a 503 given before a body it announced).
 * A health check sends its whole request at once and is answered inline, so
 * a loopback client holding reserve slots with half heads only delays the
 * next probe by a moment instead of locking it out. */
static void
reserve_room(struct httpd *s, const char *peer)
{
	struct conn *v = NULL;
	int i;

	for (i = 0; i < s->hiwater; i++) {
		struct conn *c = &s->conns[i];

		if (c->reserve && (c->state == C_HEAD || c->state == C_LINGER) && !c->in_ready &&
		    (v == NULL || c->since < v->since))
			v = c;
	}
	if (v == NULL)
		return;
	httpd__log(
	    s,
	    "%s: closed reserve connection %s, which sent no whole request or has its answer, for a new one",
	    peer, v->peer);
	httpd__conn_close(s, v);
}

static void
accept_all(struct httpd *s)
{
	struct sockaddr_storage sa;
	struct epoll_event ev;
	socklen_t sl;
	struct conn *c;
	struct peer *p;
	unsigned char addr[16];
	char peer[64];
	int i, fd, one = 1, loopback, why;

	for (i = 0; i < HTTPD_ACCEPT_BATCH && s->lfd >= 0; i++) {
		sl = sizeof(sa);
		fd = accept4(s->lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if ((errno == EMFILE || errno == ENFILE) && s->reserve_fd >= 0) {
				/* Out of descriptors: free the reserve to accept
				 * and refuse one, so the backlog does not spin us. */
				close(s->reserve_fd);
				sl = sizeof(sa);
				fd = accept4(s->lfd, (struct sockaddr *)&sa, &sl,
				             SOCK_NONBLOCK | SOCK_CLOEXEC);
				if (fd >= 0)
					reject_busy(s, fd, &sa, WHY_FULL);
				s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			}
			return;
		}
		if (s->stopping) {
			reject_busy(s, fd, &sa, WHY_NONE);
			continue;
		}
		loopback = peer_addr(&sa, addr);
		format_peer(&sa, peer, sizeof(peer));
		why = make_room(s, addr, peer);
		if (why != WHY_NONE && loopback && s->nreserve >= s->cfg.reserve)
			reserve_room(s, peer);
		if (why != WHY_NONE && (!loopback || s->nreserve >= s->cfg.reserve)) {
			reject_busy(s, fd, &sa, why);
			continue;
		}
		c = &s->conns[s->free_slots[--s->nfree]];
		memset(c, 0, sizeof(*c));
		c->srv = s;
		c->fd = fd;
		c->state = C_HEAD;
		c->since = c->heard = clock_ms();
		c->reserve = why;
		if (why != WHY_NONE) {
			s->nreserve++;
			httpd__log(s, "%s: in a reserve slot (public routes only): %s", peer,
			           why == WHY_PEER ? "at the per-address limit" : "all slots in use");
		}
		memcpy(c->addr, addr, 16);
		p = httpd__peer_slot(s, addr);
		if (p->n == 0)
			memcpy(p->addr, addr, 16);
		p->n++;
		memcpy(c->peer, peer, sizeof(c->peer));
		if (c - s->conns >= s->hiwater)
			s->hiwater = (int)(c - s->conns) + 1;
		s->active++;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		/* Edge-triggered, registered once: every state change tries its
		 * read or write at once, so no edge is ever needed twice. */
		ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
		ev.data.ptr = c;
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
			httpd__conn_close(s, c);
			continue;
		}
		httpd__set_deadline(s, c, s->cfg.header_timeout_ms);
		/* What the client sent with its connection is read now: until
		 * then it would look idle, the first to be closed for the next
		 * connection of this batch. */
		httpd__drive(s, c);
	}
}

/* ---- the server ------------------------------------------------------------ */

void
httpd_config_defaults(struct httpd_config *c)
{
	memset(c, 0, sizeof(*c));
	c->host = "0.0.0.0";
	c->port = 9000;
	c->max_conns = HTTPD_MAX_CONNS_DEFAULT;
	c->reserve = HTTPD_RESERVE_DEFAULT;
	c->workers = HTTPD_WORKERS_DEFAULT;
	c->max_body = HTTPD_MAX_BODY_DEFAULT;
	c->max_head = HTTP_REQ_HEAD_MAX;
	c->header_timeout_ms = HTTPD_HEADER_TIMEOUT_MS;
	c->idle_timeout_ms = HTTPD_IDLE_TIMEOUT_MS;
	c->body_timeout_ms = HTTPD_BODY_TIMEOUT_MS;
	c->write_timeout_ms = HTTPD_WRITE_TIMEOUT_MS;
	c->drain_ms = HTTPD_DRAIN_MS;
	c->access_log = 1;
}

const char *
httpd_req_header(const struct httpd_req *r, const char *name)
{
	const struct http_req_field *f = http_req_field(r->head, name);

	return f ? f->value.p : NULL;
}

int
httpd_req_header_count(const struct httpd_req *r, const char *name)
{
	return http_req_field_count(r->head, name);
}

int
httpd_port(const struct httpd *s)
{
	return s->port;
}

void
httpd_stop(struct httpd *s)
{
	const uint64_t one = 1;

	__atomic_store_n(&s->stop_req, 1, __ATOMIC_SEQ_CST);
	if (write(s->evfd, &one, sizeof(one)) < 0)
		return;
}

static int
listen_on(struct httpd *s, const char *host, int port, struct err *e)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd, one = 1;

	if (net_sockaddr(host, port, 1, &ss, &sl) != 0)
		return err_set(e, "config.invalid", "--host %s: not an address or a known host name", host);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_sys(e, "io.error", errno, "socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, SOMAXCONN) != 0) {
		err_set(e, errno == EADDRINUSE ? "server.address_in_use" : "io.error",
		        "cannot listen on %s port %d: %s", host, port, strerror(errno));
		close(fd);
		return -1;
	}
	sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
	                                         : ((struct sockaddr_in *)&ss)->sin_port);
	s->lfd = fd;
	return 0;
}

/* Enough descriptors for every slot, raising the soft limit if needed. */
static int
fd_budget(int max_conns, struct err *e)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)max_conns + HTTPD_FD_SLACK;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
		return err_set(e, "config.invalid",
		               "--max-connections %d needs %llu file descriptors; the hard limit is %llu",
		               max_conns, (unsigned long long)need, (unsigned long long)rl.rlim_max);
	rl.rlim_cur = need;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return err_sys(e, "config.invalid", errno,
		               "cannot raise the file descriptor limit to %llu: %s", (unsigned long long)need,
		               strerror(errno));
	return 0;
}

struct httpd *
httpd_new(const struct httpd_config *cfg, struct err *e)
{
	struct httpd *s;
	struct epoll_event ev;
	pthread_attr_t attr;
	sigset_t all, old;
	size_t npeers;
	int i, slots;

	if (cfg->max_conns < 1 || cfg->max_conns > 65536) {
		err_set(e, "config.invalid", "max connections must be 1..65536, not %d", cfg->max_conns);
		return NULL;
	}
	if (cfg->workers < 1 || cfg->workers > 256) {
		err_set(e, "config.invalid", "workers must be 1..256, not %d", cfg->workers);
		return NULL;
	}
	if (cfg->port < 0 || cfg->port > 65535) {
		err_set(e, "config.invalid", "port must be 0..65535, not %d", cfg->port);
		return NULL;
	}
	if (cfg->header_timeout_ms <= 0 || cfg->idle_timeout_ms <= 0 || cfg->body_timeout_ms <= 0 ||
	    cfg->write_timeout_ms <= 0 || cfg->drain_ms < 0 || cfg->max_body > (1u << 30)) {
		err_set(e, "config.invalid", "timeouts must be positive and the body limit at most 1 GiB");
		return NULL;
	}
	if (cfg->max_head < HTTP_REQ_HEAD_LIMIT_MIN || cfg->max_head > HTTP_REQ_HEAD_LIMIT_MAX) {
		err_set(e, "config.invalid", "the request head limit must be %u..%u bytes, not %zu",
		        HTTP_REQ_HEAD_LIMIT_MIN, HTTP_REQ_HEAD_LIMIT_MAX, cfg->max_head);
		return NULL;
	}
	if (cfg->reserve < 0 || cfg->reserve > 64) {
		err_set(e, "config.invalid", "reserve slots must be 0..64, not %d", cfg->reserve);
		return NULL;
	}
	if (cfg->max_conns_per_peer < 0) {
		err_set(e, "config.invalid",
		        "connections per client address must be 0 (no limit) or more, not %d",
		        cfg->max_conns_per_peer);
		return NULL;
	}
	if (fd_budget(cfg->max_conns + cfg->reserve, e) != 0)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		err_set(e, "internal", "out of memory");
		return NULL;
	}
	s->cfg = *cfg;
	if (s->cfg.max_conns_per_peer == 0 || s->cfg.max_conns_per_peer > cfg->max_conns)
		s->cfg.max_conns_per_peer = cfg->max_conns;
	slots = cfg->max_conns + cfg->reserve;
	for (npeers = 16; npeers < 2 * (size_t)slots; npeers *= 2)
		;
	s->peer_mask = npeers - 1;
	s->in_cap = cfg->max_head + HTTPD_READ_EXTRA;
	s->lfd = s->epfd = s->evfd = s->reserve_fd = -1;
	s->next_wake = INT64_MAX;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	/* calloc'd pages stay untouched (and out of RSS) until a slot is used */
	s->conns = calloc((size_t)slots, sizeof(*s->conns));
	s->free_slots = malloc((size_t)slots * sizeof(int));
	s->work.ring = malloc((size_t)slots * sizeof(struct conn *));
	s->done.ring = malloc((size_t)slots * sizeof(struct conn *));
	s->peers = calloc(npeers, sizeof(*s->peers));
	s->threads = calloc((size_t)cfg->workers, sizeof(pthread_t));
	if (!s->conns || !s->free_slots || !s->work.ring || !s->done.ring || !s->peers || !s->threads) {
		err_set(e, "internal", "out of memory for %d connection slots", cfg->max_conns);
		goto fail;
	}
	s->work.cap = s->done.cap = slots;
	for (i = 0; i < slots; i++)
		s->free_slots[i] = slots - 1 - i;
	s->nfree = slots;

	if (listen_on(s, cfg->host ? cfg->host : "0.0.0.0", cfg->port, e) != 0)
		goto fail;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->epfd < 0 || s->evfd < 0) {
		err_sys(e, "io.error", errno, "epoll/eventfd: %s", strerror(errno));
		goto fail;
	}
	ev.events = EPOLLIN;
	ev.data.ptr = &s->lfd;
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev);
	ev.data.ptr = &s->evfd;
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &ev);
	s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	/* Workers never take signals: SIGTERM goes to the event thread. */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, HTTPD_STACK_SIZE);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < cfg->workers; i++) {
		if (pthread_create(&s->threads[i], &attr, httpd__worker, s) != 0)
			break;
		s->nthreads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (s->nthreads < cfg->workers) {
		err_set(e, "internal", "cannot start %d worker threads", cfg->workers);
		goto fail;
	}
	return s;
fail:
	httpd_free(s);
	return NULL;
}

static void
begin_drain(struct httpd *s)
{
	int i;

	__atomic_store_n(&s->stopping, 1, __ATOMIC_SEQ_CST);
	s->drain_end = clock_ms() + s->cfg.drain_ms;
	if (s->lfd >= 0) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
		close(s->lfd);
		s->lfd = -1;
	}
	for (i = 0; i < s->hiwater; i++) {
		struct conn *c = &s->conns[i];

		if (c->state == C_HEAD && (c->b == NULL || c->b->len == 0))
			httpd__conn_close(s, c);
	}
	httpd__log(s, "stopping: %d connection(s) in progress", s->active);
}

int
httpd_run(struct httpd *s, struct err *e)
{
	struct epoll_event ev[64];
	int64_t now, wait;
	int i, n, rc = 0, busy, tick_ms = -1;

	for (;;) {
		if (__atomic_load_n(&s->stop_req, __ATOMIC_SEQ_CST) && !s->stopping)
			begin_drain(s);
		now = clock_ms();
		if (s->stopping) {
			if (s->active == 0)
				break;
			if (now >= s->drain_end) {
				rc = 1;
				break;
			}
		}
		if (s->ready != NULL)
			wait = 0;
		else if (s->next_wake == INT64_MAX)
			wait = -1;
		else
			wait = s->next_wake > now ? s->next_wake - now + 1 : 0;
		if (s->stopping && (wait < 0 || wait > s->drain_end - now))
			wait = s->drain_end - now + 1;
		if (s->fold_held > 0 && (wait < 0 || wait > 1000))
			wait = 1000;
		if (tick_ms >= 0 && (wait < 0 || wait > tick_ms))
			wait = tick_ms;
		n = epoll_wait(s->epfd, ev, 64, (int)(wait > INT_MAX ? INT_MAX : wait));
		if (n < 0 && errno != EINTR) {
			err_sys(e, "io.error", errno, "epoll_wait: %s", strerror(errno));
			rc = -1;
			break;
		}
		for (i = 0; i < n; i++) {
			if (ev[i].data.ptr == &s->lfd)
				accept_all(s);
			else if (ev[i].data.ptr == &s->evfd)
				httpd__take_done(s);
			else if (((struct conn *)ev[i].data.ptr)->state != C_FREE)
				httpd__drive(s, ev[i].data.ptr);
		}
		while (s->ready != NULL) {
			struct conn *c = s->ready;

			s->ready = c->next_ready;
			c->in_ready = 0;
			httpd__drive(s, c);
		}
		if (clock_ms() >= s->next_wake)
			httpd__sweep(s);
		if (s->fold_held > 0 && time(NULL) != s->fold_sec)
			httpd__log_flush_repeats(s);
		if (s->cfg.tick != NULL)
			tick_ms = s->cfg.tick(s->cfg.tick_arg);
	}
	httpd__log_flush_repeats(s);

	pthread_mutex_lock(&s->mu);
	s->stop_workers = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	/* A handler runs only for a connection in C_BUSY (deferred ones too),
	 * which counts as active: with none active, the workers are at most
	 * finishing their loop and join at once. */
	busy = 0;
	for (i = 0; i < s->hiwater; i++)
		busy += s->conns[i].state == C_BUSY;
	if (busy > 0) {
		/* From now on, a worker (or the holder of a deferred answer)
		 * may still touch its connection: leave all of it to process
		 * exit. */
		s->stuck = 1;
		return rc;
	}
	for (i = 0; i < s->nthreads; i++)
		pthread_join(s->threads[i], NULL);
	s->nthreads = 0;
	for (i = 0; i < s->hiwater; i++)
		httpd__conn_close(s, &s->conns[i]);
	return rc;
}

void
httpd_free(struct httpd *s)
{
	int i;

	if (s == NULL)
		return;
	if (s->lfd >= 0)
		close(s->lfd);
	s->lfd = -1;
	if (s->stuck)
		return;
	if (s->nthreads > 0) {
		pthread_mutex_lock(&s->mu);
		s->stop_workers = 1;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		for (i = 0; i < s->nthreads; i++)
			pthread_join(s->threads[i], NULL);
	}
	for (i = 0; s->conns && i < s->hiwater; i++)
		httpd__conn_close(s, &s->conns[i]);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->evfd >= 0)
		close(s->evfd);
	if (s->reserve_fd >= 0)
		close(s->reserve_fd);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	while (s->ncache > 0)
		free(s->cache[--s->ncache]);
	free(s->conns);
	free(s->free_slots);
	free(s->peers);
	free(s->work.ring);
	free(s->done.ring);
	free(s->threads);
	free(s);
}
