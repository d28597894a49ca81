/*
 * libFuzzer target: the HTTP client's whole response path through the real
 * http_request() (core/net/http.c, core/net/http_conn.c): status line, headers,
 * 1xx answers, framing (Content-Length, chunked, read to close), redirects,
 * keep-alive reuse, error answers, and the peer closing at any byte.
 *
 * Input: byte 0 picks request options (HEAD, a body cap, a sink that stops,
 * how many redirects), bytes 1-2 a cut point; the rest is what the server
 * sends. Every new connection (the http_test_connect hook, ABX_TEST only)
 * is a socketpair whose peer end holds the next segment of it (segments
 * split at SEP) and is then shut for writing: the client reads exactly
 * those bytes, then end of stream. The stream is run whole (two requests on
 * one client, so the second meets whatever the first left on a kept
 * connection) and again cut at the cut point, so a close at every byte is
 * explored. Invariants: a success is a 2xx whose body reached the sink
 * whole (its Content-Length, under the cap); a failure has a code of the
 * client's (http.*, tls.* after a redirect to https, or the sink's); the
 * message ends inside its buffer; the snippet and the hop count stay in
 * their bounds.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "net/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__asan_default_options(void);

/* Freed memory is overwritten (0x55), so a view read after its buffer was
 * freed shows as other bytes (status_line_sent) even where ASan's printf
 * does not check the read. */
const char *
__asan_default_options(void)
{
	return "max_free_fill_size=65536";
}

/* More than a socketpair buffer takes without a reader would block. */
#define STREAM_MAX 32768
/* Connections per request: the first, ten redirect hops, one retry each. */
#define PEERS_MAX 32
static const char SEP[] = "\n#next-connection#\n";

static struct {
	const uint8_t *p;
	size_t len, off;
	int peer[PEERS_MAX];
	int npeers;
} feed;

static int
peer_connect(const struct http_url *u, struct err *e)
{
	const uint8_t *p = feed.p + feed.off, *sep;
	size_t n = feed.len - feed.off, take, done = 0;
	ssize_t w;
	int sv[2];

	(void)u;
	if (feed.npeers == PEERS_MAX || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return err_set(e, "http.connect", "no more fuzz peers");
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	sep = n > 0 ? memmem(p, n, SEP, sizeof(SEP) - 1) : NULL;
	take = sep != NULL ? (size_t)(sep - p) : n;
	while (done < take && (w = write(sv[1], p + done, take - done)) > 0)
		done += (size_t)w;
	feed.off += take + (sep != NULL ? sizeof(SEP) - 1 : 0);
	shutdown(sv[1], SHUT_WR);
	feed.peer[feed.npeers++] = sv[1];
	return sv[0];
}

struct count {
	int64_t bytes, stop_after;
};

static int
count_sink(void *arg, const void *buf, size_t len, struct err *e)
{
	struct count *k = arg;

	(void)buf;
	k->bytes += (int64_t)len;
	if (k->stop_after > 0 && k->bytes > k->stop_after)
		return err_set(e, "io.error", "the sink stops");
	return 0;
}

static int
client_code(const char *code)
{
	return code != NULL && (strncmp(code, "http.", 5) == 0 || strncmp(code, "tls.", 4) == 0 ||
	                        strcmp(code, "io.error") == 0);
}

/* The status and reason an http.status message names ("...: HTTP 503
 * Service Unavailable") were sent by the server as they are: read from the
 * head after its body or the connection was gone, they are other bytes.
 * ASan does not see a freed buffer read through printf's %.*s. */
static int
status_line_sent(const struct err *e, int status)
{
	char needle[64], *m;
	int n;

	snprintf(needle, sizeof(needle), "HTTP %d ", status);
	m = strstr(e->msg, needle);
	if (m == NULL)
		return 0;
	/* "NNN reason", cut to what fits here (an empty reason: nothing to
	 * compare) */
	n = snprintf(needle, sizeof(needle), "%s", m + strlen("HTTP "));
	return n <= 4 || memmem(feed.p, feed.len, needle, strlen(needle)) != NULL;
}

static void
one_request(struct http_client *cl, uint8_t opt)
{
	struct http_request rq;
	static struct http_response rs;
	struct count k = {0, (opt & 4) ? 7 : 0};
	struct err e;
	int r, head = opt & 1;

	http_request_init(&rq, "http://fuzz.invalid/a/b?c");
	rq.method = head ? "HEAD" : "GET";
	rq.limits.connect_ms = 1000;
	rq.limits.read_ms = 1000;
	rq.limits.max_body = (opt & 2) ? 100 : 0;
	rq.limits.max_redirects = (opt >> 3) % (HTTP_REDIRECTS_MAX + 1);
	rq.sink = count_sink;
	rq.sink_arg = &k;
	err_clear(&e);
	r = http_request(cl, &rq, &rs, &e);
	FUZZ_CHECK(r == 0 || r == -1);
	FUZZ_CHECK(memchr(e.msg, '\0', sizeof(e.msg)) != NULL);
	FUZZ_CHECK(rs.snippet_len <= HTTP_SNIPPET_MAX);
	FUZZ_CHECK(rs.redirects <= rq.limits.max_redirects);
	FUZZ_CHECK(memchr(rs.url, '\0', sizeof(rs.url)) != NULL);
	if (r == 0) {
		FUZZ_CHECK(rs.status >= 200 && rs.status < 300);
		FUZZ_CHECK(k.bytes == rs.body_bytes);
		FUZZ_CHECK(!head || rs.body_bytes == 0);
		if (!head && rs.content_length >= 0 && rs.status != 204)
			FUZZ_CHECK(rs.body_bytes == rs.content_length);
		FUZZ_CHECK(rq.limits.max_body == 0 || rs.body_bytes <= rq.limits.max_body);
	} else {
		FUZZ_CHECK(client_code(e.code));
		if (strcmp(e.code, "http.status") == 0) {
			FUZZ_CHECK(rs.status / 100 != 2 && rs.status >= 100 && rs.status <= 599);
			FUZZ_CHECK(status_line_sent(&e, rs.status));
		}
	}
}

/* n requests on one client over the first len bytes of the stream. */
static void
run(const uint8_t *stream, size_t len, uint8_t opt, int n)
{
	struct http_client *cl;
	struct err e;
	int i;

	feed.p = stream;
	feed.len = len;
	feed.off = 0;
	feed.npeers = 0;
	cl = http_client_new(&e);
	FUZZ_CHECK(cl != NULL);
	for (i = 0; i < n; i++)
		one_request(cl, (uint8_t)(opt + i));
	http_client_free(cl);
	for (i = 0; i < feed.npeers; i++)
		close(feed.peer[i]);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len, cut;
	uint8_t opt;

	if (size < 3)
		return 0;
	opt = data[0];
	len = size - 3 < STREAM_MAX ? size - 3 : STREAM_MAX;
	cut = ((size_t)data[1] | (size_t)data[2] << 8) % (len + 1);
	http_test_connect = peer_connect;
	run(data + 3, len, opt, 2);
	if (cut < len)
		run(data + 3, cut, opt, 1);
	return 0;
}
