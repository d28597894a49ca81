/* Bench helper for tools/bench/sessions.sh and tools/bench/wire.sh: a
 * minimal Server-Sent Events client, so a session row can be measured without
 * curl's own costs (two process start-ups, its per-buffer work).
 *
 *   sse_drv PORT TOKEN AGENT N OUT [TYPE]
 *
 * POSTs a session of AGENT whose message is N to
 * http://127.0.0.1:PORT/v1/agents/sessions (the sessions wire), then GETs
 * that session's events with Accept: text/event-stream over a plain socket,
 * reads in 1 MiB buffers, undoes the framing the server uses (chunked for
 * HTTP/1.1; close-delimited otherwise), writes the event stream to OUT,
 * counts "event: TYPE" lines (TYPE: agent.session.output unless given) and stops at the end of the
 * agent.session.exited event or of the stream. Prints the count on stdout;
 * exits 1 on any error (the count is then not printed). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define RBUF (1 << 20)
#define LINE_KEEP 64
#define NIOV 64

static char rbuf[RBUF];
static int out_fd = -1;
/* Decoded pieces of one read, written to OUT together. */
static struct iovec iov[NIOV];
static int niov;

static int
flush_out(void)
{
	ssize_t k, want = 0;
	int i;

	for (i = 0; i < niov; i++)
		want += (ssize_t)iov[i].iov_len;
	k = niov > 0 ? writev(out_fd, iov, niov) : 0;
	niov = 0;
	return k == want ? 0 : -1;
}

/* Line scanner over the decoded stream. */
static char line[LINE_KEEP];
static size_t line_len;
static long outputs;
static int exited, finished;

static char ev_count[LINE_KEEP] = "event: agent.session.output";
static size_t ev_count_len = sizeof("event: agent.session.output") - 1;
static const char EV_EXIT[] = "event: agent.session.exited";

static void
end_line(void)
{
	size_t n = line_len < LINE_KEEP ? line_len : LINE_KEEP;

	if (line_len == ev_count_len && memcmp(line, ev_count, n) == 0)
		outputs++;
	else if (line_len == sizeof(EV_EXIT) - 1 && memcmp(line, EV_EXIT, n) == 0)
		exited = 1;
	else if (line_len == 0 && exited)
		finished = 1; /* the blank line that ends the exited event */
	line_len = 0;
}

static int
consume(const char *p, size_t n)
{
	const char *q;
	size_t seg, room;

	if (n > 0) {
		if (niov == NIOV && flush_out() != 0)
			return -1;
		iov[niov].iov_base = (void *)p;
		iov[niov++].iov_len = n;
	}
	while (n > 0 && !finished) {
		q = memchr(p, '\n', n);
		seg = q != NULL ? (size_t)(q - p) : n;
		if (line_len < LINE_KEEP) {
			room = LINE_KEEP - line_len;
			memcpy(line + line_len, p, seg < room ? seg : room);
		}
		line_len += seg;
		if (q == NULL)
			break;
		end_line();
		p = q + 1;
		n -= seg + 1;
	}
	return 0;
}

static int
dial(int port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int
send_all(int fd, const char *p, size_t n)
{
	ssize_t k;

	while (n > 0) {
		k = write(fd, p, n);
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Read until the end of the response head; its length (the body's first
 * bytes follow it in rbuf, up to *have), or -1. */
static long
read_head(int fd, size_t *have)
{
	char *e;
	ssize_t k;

	*have = 0;
	for (;;) {
		k = read(fd, rbuf + *have, RBUF - 1 - *have);
		if (k <= 0)
			return -1;
		*have += (size_t)k;
		rbuf[*have] = '\0';
		if ((e = strstr(rbuf, "\r\n\r\n")) != NULL)
			return (long)(e + 4 - rbuf);
		if (*have >= RBUF - 1)
			return -1;
	}
}

static int
status_ok(const char *head, int want)
{
	int st;

	return sscanf(head, "HTTP/1.%*d %d", &st) == 1 && st == want;
}

/* Whether the head (NUL-terminated after its blank line by the caller) has
 * Transfer-Encoding: chunked. */
static int
is_chunked(const char *head)
{
	const char *p = head;

	while ((p = strchr(p, '\n')) != NULL) {
		p++;
		if (strncasecmp(p, "transfer-encoding:", 18) == 0) {
			p += 18;
			while (*p == ' ' || *p == '\t')
				p++;
			return strncasecmp(p, "chunked", 7) == 0;
		}
	}
	return 0;
}

static int
create(int port, const char *tok, const char *agent, long n, char *id, size_t cap)
{
	char req[1024], body[256], *p, *q;
	size_t have;
	long hl;
	int fd, bl;
	ssize_t k;

	bl = snprintf(
	    body, sizeof(body),
	    "{\"agent_id\": \"%s\", \"environment\": {\"type\": \"self_hosted\"}, \"input\": \"%ld\"}", agent,
	    n);
	snprintf(req, sizeof(req),
	         "POST /v1/agents/sessions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Access-Token: %s\r\n"
	         "Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
	         port, tok, bl, body);
	if ((fd = dial(port)) < 0 || send_all(fd, req, strlen(req)) != 0)
		return -1;
	if ((hl = read_head(fd, &have)) < 0 || !(status_ok(rbuf, 201) || status_ok(rbuf, 200))) {
		close(fd);
		return -1;
	}
	/* The answer is small: read it all (the server closes). */
	while (have < RBUF - 1 && (k = read(fd, rbuf + have, RBUF - 1 - have)) > 0)
		have += (size_t)k;
	rbuf[have] = '\0';
	close(fd);
	if ((p = strstr(rbuf + hl, "\"id\":\"")) == NULL)
		return -1;
	p += 6;
	if ((q = strchr(p, '"')) == NULL || (size_t)(q - p) >= cap)
		return -1;
	memcpy(id, p, (size_t)(q - p));
	id[q - p] = '\0';
	return 0;
}

enum { CK_SIZE, CK_EXT, CK_SIZE_LF, CK_DATA, CK_DATA_CR, CK_DATA_LF, CK_DONE };

struct chunked {
	int st;
	unsigned long left;
};

/* Feed n framed bytes; passes the data on to consume. 0, 1 at the last
 * chunk, -1 on bad framing. */
static int
dechunk(struct chunked *c, const char *p, size_t n)
{
	size_t take;
	int h;

	while (n > 0) {
		switch (c->st) {
		case CK_SIZE:
			if (*p == '\r') {
				c->st = CK_SIZE_LF;
			} else if (*p == ';') {
				c->st = CK_EXT;
			} else {
				h = *p >= '0' && *p <= '9'                 ? *p - '0'
				    : (*p | 32) >= 'a' && (*p | 32) <= 'f' ? (*p | 32) - 'a' + 10
				                                           : -1;
				if (h < 0 || c->left > (1UL << 40))
					return -1;
				c->left = c->left * 16 + (unsigned long)h;
			}
			p++, n--;
			break;
		case CK_EXT:
			if (*p == '\r')
				c->st = CK_SIZE_LF;
			p++, n--;
			break;
		case CK_SIZE_LF:
			if (*p != '\n')
				return -1;
			p++, n--;
			if (c->left == 0) {
				c->st = CK_DONE;
				return 1;
			}
			c->st = CK_DATA;
			break;
		case CK_DATA:
			take = n < c->left ? n : (size_t)c->left;
			if (consume(p, take) != 0)
				return -1;
			p += take, n -= take, c->left -= take;
			if (c->left == 0)
				c->st = CK_DATA_CR;
			break;
		case CK_DATA_CR:
			if (*p != '\r')
				return -1;
			c->st = CK_DATA_LF;
			p++, n--;
			break;
		case CK_DATA_LF:
			if (*p != '\n')
				return -1;
			c->st = CK_SIZE;
			p++, n--;
			break;
		default:
			return 1;
		}
	}
	return 0;
}

int
main(int argc, char **argv)
{
	char id[128], req[1024], save;
	struct chunked ck = {CK_SIZE, 0};
	int port, fd, chunked, r = 0;
	size_t have;
	long hl, n;
	ssize_t k;

	if (argc != 6 && !(argc == 7 && strlen(argv[6]) < LINE_KEEP - 7)) {
		fprintf(stderr, "usage: sse_drv PORT TOKEN AGENT N OUT [TYPE]\n");
		return 2;
	}
	if (argc == 7)
		ev_count_len = (size_t)snprintf(ev_count, sizeof(ev_count), "event: %s", argv[6]);
	port = atoi(argv[1]);
	n = atol(argv[4]);
	if ((out_fd = open(argv[5], O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0) {
		perror(argv[5]);
		return 1;
	}
	if (create(port, argv[2], argv[3], n, id, sizeof(id)) != 0) {
		fprintf(stderr, "sse_drv: creating the session failed\n");
		return 1;
	}
	snprintf(req, sizeof(req),
	         "GET /v1/agents/sessions/%s/events HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Access-Token: %s\r\n"
	         "Accept: text/event-stream\r\n\r\n",
	         id, port, argv[2]);
	if ((fd = dial(port)) < 0 || send_all(fd, req, strlen(req)) != 0) {
		fprintf(stderr, "sse_drv: connecting failed\n");
		return 1;
	}
	if ((hl = read_head(fd, &have)) < 0 || !status_ok(rbuf, 200)) {
		fprintf(stderr, "sse_drv: bad answer to the event stream request\n");
		return 1;
	}
	save = rbuf[hl];
	rbuf[hl] = '\0';
	chunked = is_chunked(rbuf);
	rbuf[hl] = save;
	k = (ssize_t)(have - (size_t)hl);
	memmove(rbuf, rbuf + hl, (size_t)k);
	for (;;) {
		if (k > 0)
			r = chunked ? dechunk(&ck, rbuf, (size_t)k) : consume(rbuf, (size_t)k);
		if (flush_out() != 0)
			r = -1;
		if (r != 0 || finished)
			break;
		k = read(fd, rbuf, RBUF);
		if (k <= 0)
			break;
	}
	close(fd);
	close(out_fd);
	if (r < 0 || k < 0 || (chunked && !finished && ck.st != CK_DONE)) {
		fprintf(stderr, "sse_drv: the stream broke off (framing %s)\n",
		        chunked ? "chunked" : "close-delimited");
		return 1;
	}
	printf("%ld\n", outputs);
	return 0;
}
