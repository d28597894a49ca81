/*
 * The state under every other httpd file: the connection table and the
 * per-address counts, the queues between the event thread and the workers,
 * buffers, deadlines, closing a connection, the log. It calls none of
 * httpd.c, httpd_conn.c or httpd_resp.c, which all use it.
 */
#include "net/httpd_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"

int
httpd__stopping(struct httpd *s)
{
	return __atomic_load_n(&s->stopping, __ATOMIC_RELAXED);
}

/* ---- logging ---------------------------------------------------------- */

void
httpd__log(struct httpd *s, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	if (!s->cfg.verbose)
		return;
	n = snprintf(line, sizeof(line), "agent-sandbox-server: serve: ");
	va_start(ap, fmt);
	n += err_fmtv(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(2, line, n) < 0)
		return;
}

/* ---- queues (guarded by s->mu) ------------------------------------------ */

void
httpd__q_push(struct queue *q, struct conn *c)
{
	q->ring[(q->head + q->n) % q->cap] = c;
	q->n++;
}

struct conn *
httpd__q_pop(struct queue *q)
{
	struct conn *c = q->ring[q->head];

	q->head = (q->head + 1) % q->cap;
	q->n--;
	return c;
}

/* ---- connection lifetime ----------------------------------------------- */

void
httpd__set_deadline(struct httpd *s, struct conn *c, int ms)
{
	c->deadline = ms < 0 ? INT64_MAX : clock_ms() + ms;
	if (c->deadline < s->next_wake)
		s->next_wake = c->deadline;
}

/* Free the answer buffer and give its bytes back to the server's budget. */
void
httpd__out_drop(struct conn *c)
{
	if (c->out.p != NULL)
		__atomic_sub_fetch(&c->srv->held, c->out.len, __ATOMIC_RELAXED);
	buf_free(&c->out);
	c->out_off = 0;
}

void
httpd__free_request(struct conn *c)
{
	buf_free(&c->body);
	c->body_left = 0;
	httpd__out_drop(c);
	c->route = NULL;
	c->status = 0;
}

static size_t
peer_hash(const struct httpd *s, const unsigned char *addr)
{
	uint32_t h = 2166136261u;
	int i;

	for (i = 0; i < 16; i++)
		h = (h ^ addr[i]) * 16777619u;
	return h & s->peer_mask;
}

/* The entry of addr, or the empty one where it would go. */
struct peer *
httpd__peer_slot(struct httpd *s, const unsigned char *addr)
{
	size_t i = peer_hash(s, addr);

	while (s->peers[i].n != 0 && memcmp(s->peers[i].addr, addr, 16) != 0)
		i = (i + 1) & s->peer_mask;
	return &s->peers[i];
}

static void
peer_release(struct httpd *s, const unsigned char *addr)
{
	struct peer *p = httpd__peer_slot(s, addr);
	size_t i, j, h;

	if (p->n == 0 || --p->n > 0)
		return;
	/* Backward-shift deletion keeps every probe run unbroken. */
	i = j = (size_t)(p - s->peers);
	for (;;) {
		j = (j + 1) & s->peer_mask;
		if (s->peers[j].n == 0)
			break;
		h = peer_hash(s, s->peers[j].addr);
		if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
			continue;
		s->peers[i] = s->peers[j];
		i = j;
	}
	s->peers[i].n = 0;
}

void
httpd__conn_close(struct httpd *s, struct conn *c)
{
	if (c->state == C_FREE)
		return;
	close(c->fd); /* also removes it from the epoll set */
	httpd__free_request(c);
	httpd__put_buf(c);
	c->fd = -1;
	c->state = C_FREE;
	s->free_slots[s->nfree++] = (int)(c - s->conns);
	s->active--;
	if (c->reserve)
		s->nreserve--;
	peer_release(s, c->addr);
}

/* Buffers come and go with every keep-alive request; a few are kept for
 * reuse (event thread only) so busy connections do not churn the allocator,
 * while the memory held after a burst stays bounded. */
struct cbuf *
httpd__get_buf(struct conn *c)
{
	struct httpd *s = c->srv;

	if (c->b == NULL) {
		c->b = s->ncache > 0 ? s->cache[--s->ncache] : malloc(sizeof(*c->b) + s->in_cap);
		if (c->b == NULL)
			return NULL;
		c->b->len = c->b->pos = c->b->parsed_at = c->b->scanned = c->b->head_len = 0;
	}
	return c->b;
}

void
httpd__put_buf(struct conn *c)
{
	struct httpd *s = c->srv;

	if (c->b != NULL && s->ncache < HTTPD_BUF_CACHE)
		s->cache[s->ncache++] = c->b;
	else
		free(c->b);
	c->b = NULL;
}

/* Why a client is over a limit, for its 503 and the log. */
void
httpd__busy_reason(struct httpd *s, int why, const char *peer, char *buf, size_t cap)
{
	char ip[64];
	const char *colon = strrchr(peer, ':');

	snprintf(ip, sizeof(ip), "%.*s", colon ? (int)(colon - peer) : (int)strlen(peer), peer);
	if (why == WHY_PEER)
		snprintf(buf, cap, "%s already holds %d connection%s, the limit per client address", ip,
		         s->cfg.max_conns_per_peer, s->cfg.max_conns_per_peer == 1 ? "" : "s");
	else if (why == WHY_FULL)
		snprintf(buf, cap, "all %d connection slots are in use", s->cfg.max_conns);
	else
		snprintf(buf, cap, "the server is stopping");
}

/* A request partly received whose client has stopped sending: a head or a
 * body the gate has not seen (admitted 0), or the body of a request the
 * gate let through (admitted 1). */
static int
stalled(const struct conn *c, int admitted)
{
	return c->partial && c->admitted == admitted && (c->state == C_HEAD || c->state == C_BODY) &&
	       !c->in_ready;
}

/* The connection of class admitted that has waited longest for the rest of
 * a request (since its last bytes arrived, so a client sending its head
 * in pieces is never the first victim), of one peer address or of any,
 * other than except. Of any address, the one whose address holds the most
 * connections goes first: a flood from many addresses closes its own
 * before a client with one connection whose head arrives in two pieces. */
struct conn *
httpd__oldest_stalled(struct httpd *s, const unsigned char *addr, const struct conn *except, int admitted)
{
	struct conn *best = NULL;
	int i, n, best_n = 0;

	for (i = 0; i < s->hiwater; i++) {
		struct conn *c = &s->conns[i];

		if (!stalled(c, admitted) || c == except)
			continue;
		if (addr != NULL && memcmp(c->addr, addr, 16) != 0)
			continue;
		n = addr != NULL ? 0 : httpd__peer_slot(s, c->addr)->n;
		if (best == NULL || n > best_n || (n == best_n && c->heard < best->heard)) {
			best = c;
			best_n = n;
		}
	}
	return best;
}

/* Admitted and unvetted requests are counted apart, each up to
 * HTTPD_PARTIAL_PER_PEER per address: heads and bodies that need no token
 * close only each other, and an admitted body that stalls is closed only
 * for its own address's admitted ones (or by its body deadline). */
void
httpd__stalled(struct httpd *s, struct conn *c)
{
	struct conn *v;
	int i, n = 0;

	if (c->partial || c->reserve)
		return;
	c->partial = 1;
	for (i = 0; i < s->hiwater; i++)
		n += stalled(&s->conns[i], c->admitted) && memcmp(s->conns[i].addr, c->addr, 16) == 0;
	if (n <= HTTPD_PARTIAL_PER_PEER || (v = httpd__oldest_stalled(s, c->addr, c, c->admitted)) == NULL)
		return;
	httpd__log(s, "%s: closed %s, the oldest of its %d partly sent %srequests (limit %d per address)",
	           c->peer, v->peer, n, c->admitted ? "admitted " : "", HTTPD_PARTIAL_PER_PEER);
	httpd__conn_close(s, v);
}
