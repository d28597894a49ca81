#include "unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/err.h"
#include "net/http.h"
#include "base/net.h"

const char *__asan_default_options(void);

/* Freed memory is overwritten (0x55): a view read after its buffer was
 * freed shows as other bytes, where ASan's printf does not check the read
 * (the reason of an error answer on a closed connection). */
const char *
__asan_default_options(void)
{
	return "max_free_fill_size=65536";
}

/* ---- URLs ------------------------------------------------------------- */

static void
test_url_refusals(void **state)
{
	static const char *const bad[] = {
	    "ftp://example.com/x",
	    "file:///etc/passwd",
	    "example.com/x",
	    "http://user:pw@example.com/x",
	    "http://user@example.com/x",
	    "http://example.com/a b",
	    "http://example.com/a\r\nX-Injected: 1",
	    "http://example.com/a\nb",
	    "http://exa mple.com/",
	    "http://example.com\\@evil.com/",
	    "http:///x",
	    "http://:80/x",
	    "http://example.com:0/",
	    "http://example.com:65536/",
	    "http://example.com:/",
	    "http://example.com:8o/",
	    "http://[::1/x",
	    "http://[::1]x/",
	    "http://[zz::1]/",
	    "http://ex%41mple.com/",
	    "http://example.com/\xc3\xa9",
	    "http://example.com/\x7f",
	};
	struct http_url u;
	struct err e = {0};
	char longurl[HTTP_URL_MAX + 10];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_clear(&e);
		if (http_url_parse(bad[i], &u, &e) != -1)
			fail_msg("accepted %s", bad[i]);
		assert_string_equal(e.code, "http.url");
	}
	memset(longurl, 'a', sizeof(longurl) - 1);
	memcpy(longurl, "http://h/", 9);
	longurl[sizeof(longurl) - 1] = '\0';
	assert_int_equal(http_url_parse(longurl, &u, &e), -1);
	assert_string_equal(e.code, "http.url");
}

static void
test_url_parts(void **state)
{
	struct http_url u;
	struct err e = {0};
	char buf[HTTP_URL_MAX];

	assert_int_equal(
	    http_url_parse("HTTPS://Registry.NPMjs.org/@scope%2fpkg/-/pkg-1.0.0.tgz?x=1#frag", &u, &e), 0);
	assert_int_equal(u.https, 1);
	assert_string_equal(u.host, "registry.npmjs.org");
	assert_int_equal(u.port, 443);
	assert_int_equal(u.port_explicit, 0);
	assert_string_equal(u.target, "/@scope%2fpkg/-/pkg-1.0.0.tgz?x=1");
	assert_int_equal(http_url_parse("http://example.com", &u, &e), 0);
	assert_string_equal(u.target, "/");
	assert_int_equal(u.port, 80);
	assert_int_equal(http_url_parse("http://example.com?q", &u, &e), 0);
	assert_string_equal(u.target, "/?q");
	assert_int_equal(http_url_parse("http://[::1]:8080/x", &u, &e), 0);
	assert_string_equal(u.host, "::1");
	assert_int_equal(u.port, 8080);
	assert_true(http_url_format(&u, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "http://[::1]:8080/x");
	assert_int_equal(http_url_parse("https://h:443/", &u, &e), 0);
	http_url_format(&u, buf, sizeof(buf));
	assert_string_equal(buf, "https://h/");
	assert_int_equal(http_url_format(&u, buf, 5), -1);
}

static void
test_url_resolve(void **state)
{
	static const struct {
		const char *ref, *want;
	} cases[] = {
	    {"https://other.example/p", "https://other.example/p"},
	    {"//cdn.example/x/y", "https://cdn.example/x/y"},
	    {"/abs?q=1", "https://h.example/abs?q=1"},
	    {"rel", "https://h.example/a/b/rel"},
	    {"../up", "https://h.example/a/up"},
	    {"../../../../top", "https://h.example/top"},
	    {"./same", "https://h.example/a/b/same"},
	    {"?only=query", "https://h.example/a/b/c?only=query"},
	    {"x#frag", "https://h.example/a/b/x"},
	};
	struct http_url base, out;
	struct err e = {0};
	char buf[HTTP_URL_MAX];
	size_t i;

	assert_int_equal(http_url_parse("https://h.example/a/b/c?z", &base, &e), 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(http_url_resolve(&base, cases[i].ref, &out, &e), 0);
		http_url_format(&out, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].want);
	}
	assert_int_equal(http_url_resolve(&base, "ftp://x/", &out, &e), -1);
	assert_int_equal(http_url_resolve(&base, "/a b", &out, &e), -1);
	assert_int_equal(http_url_resolve(&base, "//u:p@h/", &out, &e), -1);
}

/* ---- Response head ---------------------------------------------------- */

static void
test_head_good_and_incremental(void **state)
{
	const char *r = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Empty:\r\nETag:  \"abc\"  \r\n\r\nhello";
	struct http_head h;
	size_t n = strlen(r) - 5, i;
	const struct http_field *f;

	assert_int_equal(http_parse_head(r, strlen(r), &h), (int)n);
	assert_int_equal(h.status, 200);
	assert_int_equal(h.minor, 1);
	assert_int_equal(h.nfields, 3);
	f = http_head_get(&h, "etag");
	assert_non_null(f);
	assert_int_equal(f->value_len, 5);
	assert_memory_equal(f->value, "\"abc\"", 5);
	assert_int_equal(http_head_get(&h, "x-empty")->value_len, 0);
	assert_null(http_head_get(&h, "Location"));
	for (i = 0; i < n; i++)
		assert_int_equal(http_parse_head(r, i, &h), 0);
	/* Bare LF line ends are read too (many small servers send them). */
	assert_int_equal(http_parse_head("HTTP/1.0 404 Not Found\nA: b\n\n", 29, &h), 29);
	assert_int_equal(h.status, 404);
	assert_int_equal(h.reason_len, 9);
	assert_int_equal(http_parse_head("HTTP/1.1 204\r\n\r\n", 16, &h), 16);
	assert_int_equal(h.reason_len, 0);
}

static void
test_head_hostile(void **state)
{
	static const char *const bad[] = {
	    "HTTP/2 200 OK\r\n\r\n",
	    "HTTP/1.1 20 OK\r\n\r\n",
	    "HTTP/1.1 999 OK\r\n\r\n",
	    "HTTP/1.1 099 OK\r\n\r\n",
	    "HTTP/1.1 200OK\r\n\r\n",
	    "ICY 200 OK\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
	    "HTTP/1.1 200 OK\r\n: novalue\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nA: b\x01c\r\n\r\n",
	    "HTTP/1.1 200 O\x01K\r\n\r\n",
	};
	struct http_head h;
	char *big;
	size_t i, n;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (http_parse_head(bad[i], strlen(bad[i]), &h) != -1)
			fail_msg("accepted %s", bad[i]);
		assert_non_null(h.why);
	}
	/* Too many fields. */
	big = malloc(HTTP_HEAD_MAX + 100);
	n = (size_t)sprintf(big, "HTTP/1.1 200 OK\r\n");
	for (i = 0; i <= HTTP_FIELDS_MAX; i++)
		n += (size_t)sprintf(big + n, "F%zu: v\r\n", i);
	n += (size_t)sprintf(big + n, "\r\n");
	assert_int_equal(http_parse_head(big, n, &h), -1);
	/* A head that never ends within HTTP_HEAD_MAX. */
	n = (size_t)sprintf(big, "HTTP/1.1 200 OK\r\nX: ");
	memset(big + n, 'a', HTTP_HEAD_MAX + 50 - n);
	assert_int_equal(http_parse_head(big, HTTP_HEAD_MAX - 1, &h), 0);
	assert_int_equal(http_parse_head(big, HTTP_HEAD_MAX + 50, &h), -1);
	assert_string_equal(h.why, "response head too large");
	free(big);
}

/* ---- Chunked ---------------------------------------------------------- */

/* Decode in pieces of `step` bytes; returns the body length or -1. */
static long
dechunk(const char *in, size_t len, size_t step, char *out, size_t cap, int *done)
{
	struct http_chunked c;
	const unsigned char *d;
	size_t dl, off = 0, o = 0, lim;
	long k;

	http_chunked_init(&c, UINT64_MAX, HTTP_LF_OK);
	while (off < len && !c.done) {
		lim = off + step < len ? step : len - off;
		k = http_chunked_step(&c, (const unsigned char *)in + off, lim, &d, &dl);
		if (k < 0)
			return -1;
		assert_true(k > 0);
		if (dl > 0) {
			assert_true(o + dl <= cap);
			memcpy(out + o, d, dl);
			o += dl;
		}
		off += (size_t)k;
	}
	*done = c.done;
	return (long)o;
}

static void
test_chunked_every_split(void **state)
{
	const char *in = "5;name=val\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n";
	char out[64];
	size_t step;
	int done;

	for (step = 1; step <= strlen(in); step++) {
		assert_int_equal(dechunk(in, strlen(in), step, out, sizeof(out), &done), 16);
		assert_true(done);
		assert_memory_equal(out, "hello 0123456789", 16);
	}
	/* Upper-case hex, bare LF, no trailers. */
	assert_int_equal(dechunk("B\nhello world\n0\n\n", 18, 3, out, sizeof(out), &done), 11);
	assert_true(done);
	/* Not done without the last chunk. */
	assert_int_equal(dechunk("5\r\nhello\r\n", 10, 4, out, sizeof(out), &done), 5);
	assert_false(done);
}

static void
test_chunked_hostile(void **state)
{
	static const char *const bad[] = {
	    "\r\n",
	    "x\r\n",
	    "5\r\nhelloX\r\n",
	    "5\r\nhello\rX",
	    "1000000000000000\r\n",
	    "5\x01\r\n",
	    "5\rX",
	    "0\r\nTrailer\rX",
	    "0\r\n\rX",
	    /* the server's rules, now the client's too */
	    "5 x\r\nhello\r\n0\r\n\r\n",
	    "0\r\nX y: z\r\n\r\n",
	    "0\r\n X: y\r\n\r\n",
	    "0\r\nX: a\x01\r\n\r\n",
	};
	char out[64], *big;
	size_t i;
	int done;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (dechunk(bad[i], strlen(bad[i]), 1, out, sizeof(out), &done) != -1)
			fail_msg("accepted chunked %zu", i);
	big = malloc(20000);
	memcpy(big, "5;", 2);
	memset(big + 2, 'e', 9000);
	memcpy(big + 9002, "\r\n", 3);
	assert_int_equal(dechunk(big, strlen(big), 100, out, sizeof(out), &done), -1);
	memcpy(big, "0\r\n", 3);
	for (i = 3; i < 19990; i += 10)
		memcpy(big + i, "T: aaaaa\r\n", 10);
	big[19990] = '\0';
	assert_int_equal(dechunk(big, strlen(big), 100, out, sizeof(out), &done), -1);
	free(big);
}

/* ---- NO_PROXY --------------------------------------------------------- */

static void
test_no_proxy(void **state)
{
	assert_true(http_no_proxy_match("*", "anything.example", 443));
	assert_true(http_no_proxy_match("example.com", "example.com", 443));
	assert_true(http_no_proxy_match("example.com", "a.b.example.com", 443));
	assert_true(http_no_proxy_match(".example.com", "a.example.com", 443));
	assert_true(http_no_proxy_match(".example.com", "example.com", 443));
	assert_true(http_no_proxy_match("*.example.com", "x.example.com", 80));
	assert_false(http_no_proxy_match("example.com", "notexample.com", 443));
	assert_false(http_no_proxy_match("example.com", "example.com.evil", 443));
	assert_true(http_no_proxy_match("foo, EXAMPLE.com ,bar", "example.com", 443));
	assert_true(http_no_proxy_match("foo bar", "bar", 443));
	assert_true(http_no_proxy_match("example.com:8443", "example.com", 8443));
	assert_false(http_no_proxy_match("example.com:8443", "example.com", 443));
	assert_true(http_no_proxy_match("127.0.0.1", "127.0.0.1", 80));
	assert_false(http_no_proxy_match("127.0.0.1", "127.0.0.10", 80));
	assert_true(http_no_proxy_match("::1", "::1", 80));
	assert_true(http_no_proxy_match("[::1]:80", "::1", 80));
	assert_false(http_no_proxy_match("", "example.com", 80));
	assert_false(http_no_proxy_match(NULL, "example.com", 80));
	assert_false(http_no_proxy_match(",,", "example.com", 80));
}

/* ---- The client against an in-process server ------------------------- */

/* Canned answers by path. Thread per connection; requests are recorded so a
 * test can check what reached the server and on which connection. */
#define SRV_LOG 512
static struct srv {
	int lfd, port;
	pthread_mutex_t mu;
	int nconn, nreq;
	struct {
		int conn;
		char path[128];
		int auth;
	} log[SRV_LOG];
} srv;

static void
send_all(int fd, const char *p, size_t n)
{
	ssize_t w;

	while (n > 0 && (w = send(fd, p, n, MSG_NOSIGNAL)) > 0)
		p += w, n -= (size_t)w;
}

/* The reason phrases of the error answers the client must report. */
static const struct {
	int status;
	const char *reason;
} err_reasons[] = {
    {403, "Forbidden"},           {404, "Not Found"}, {410, "Gone"}, {500, "Internal Server Error"},
    {503, "Service Unavailable"},
};

/* /err/STATUS/CONN/FRAMING: an error answer, CONN "close" or "keep-alive",
 * FRAMING "length", "chunked" or "none" (read to close). The body is sent
 * apart from the head and is longer than it, so a client that reads the
 * head's views after reading the body sees body bytes there. Returns 1
 * when the connection must close. */
static int
srv_error_answer(int fd, const char *path)
{
	char conn[16] = "", framing[16] = "", head[256], body[400], frame[16];
	const char *reason = "Error";
	int status = 0, n;
	size_t i;

	if (sscanf(path, "/err/%d/%15[^/]/%15s", &status, conn, framing) != 3)
		return 1;
	for (i = 0; i < sizeof(err_reasons) / sizeof(err_reasons[0]); i++)
		if (err_reasons[i].status == status)
			reason = err_reasons[i].reason;
	memset(body, 'Z', sizeof(body));
	n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nConnection: %s\r\n%s%s\r\n", status, reason, conn,
	             strcmp(framing, "length") == 0 ? "Content-Length: 400\r\n" : "",
	             strcmp(framing, "chunked") == 0 ? "Transfer-Encoding: chunked\r\n" : "");
	send_all(fd, head, (size_t)n);
	usleep(5000);
	if (strcmp(framing, "chunked") == 0) {
		n = snprintf(frame, sizeof(frame), "%zx\r\n", sizeof(body));
		send_all(fd, frame, (size_t)n);
		send_all(fd, body, sizeof(body));
		send_all(fd, "\r\n0\r\n\r\n", 7);
	} else {
		send_all(fd, body, sizeof(body));
	}
	return strcmp(conn, "close") == 0 || strcmp(framing, "none") == 0;
}

static void *
srv_conn(void *arg)
{
	int fd = (int)(intptr_t)arg, conn, i, head;
	char buf[8192], out[70000], path[128];
	size_t len = 0;
	ssize_t r;
	char *end;
	int n;

	pthread_mutex_lock(&srv.mu);
	conn = ++srv.nconn;
	pthread_mutex_unlock(&srv.mu);
	for (;;) {
		while ((end = memmem(buf, len, "\r\n\r\n", 4)) == NULL) {
			r = recv(fd, buf + len, sizeof(buf) - len, 0);
			if (r <= 0)
				goto done;
			len += (size_t)r;
		}
		head = strncmp(buf, "HEAD ", 5) == 0;
		if (sscanf(buf, "GET %127s ", path) != 1 && sscanf(buf, "HEAD %127s ", path) != 1)
			goto done;
		pthread_mutex_lock(&srv.mu);
		if (srv.nreq < SRV_LOG) {
			srv.log[srv.nreq].conn = conn;
			snprintf(srv.log[srv.nreq].path, sizeof(srv.log[0].path), "%s", path);
			srv.log[srv.nreq].auth =
			    memmem(buf, (size_t)(end - buf), "Authorization:", 14) != NULL;
		}
		srv.nreq++;
		pthread_mutex_unlock(&srv.mu);
		memmove(buf, end + 4, len - (size_t)(end + 4 - buf));
		len -= (size_t)(end + 4 - buf);
		if (strncmp(path, "/ok/", 4) == 0 || strncmp(path, "/closeafter/", 12) == 0) {
			int sz = atoi(strrchr(path, '/') + 1);
			if (sz > 65536)
				sz = 65536;
			n = snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", sz);
			for (i = 0; i < sz; i++)
				out[n + i] = (char)('a' + i % 26);
			send_all(fd, out, (size_t)(n + (head ? 0 : sz)));
			if (path[1] == 'c')
				goto done; /* closes without saying so */
		} else if (strcmp(path, "/chunk") == 0) {
			const char *c = "HTTP/1.1 200 OK\r\nTransfer-Encoding: "
			                "chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
			send_all(fd, c, strlen(c));
		} else if (strcmp(path, "/other") == 0) {
			n = snprintf(out, sizeof(out),
			             "HTTP/1.1 302 Found\r\nLocation: "
			             "http://127.0.0.1:%d/ok/3\r\nContent-Length: 0\r\n\r\n",
			             srv.port);
			send_all(fd, out, (size_t)n);
		} else if (strcmp(path, "/same") == 0) {
			const char *c =
			    "HTTP/1.1 301 Moved\r\nLocation: /ok/4\r\nContent-Length: 3\r\n\r\nabc";
			send_all(fd, c, strlen(c));
		} else if (strcmp(path, "/short") == 0) {
			const char *c = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b";
			send_all(fd, c, strlen(c));
			goto done;
		} else if (strncmp(path, "/err/", 5) == 0) {
			if (srv_error_answer(fd, path))
				goto done;
		} else if (strncmp(path, "/frame/", 7) == 0) {
			/* Framing a server might send, each refused (see
			 * test_client_framing). */
			static const char *const heads[] = {
			    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
			    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
			    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
			    "5\r\nhello\r\n0\r\n\r\n",
			    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n"
			    "5\r\nhello\r\n0\r\n\r\n",
			    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
			    "chunked\r\n\r\n"
			    "5\r\nhello\r\n0\r\n\r\n",
			    "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
			    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nhello",
			    "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
			};
			int k = atoi(path + 7);
			if (k >= 0 && k < (int)(sizeof(heads) / sizeof(heads[0])))
				send_all(fd, heads[k], strlen(heads[k]));
			goto done;
		} else if (strcmp(path, "/garbage") == 0) {
			const char *c = "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n";
			send_all(fd, c, strlen(c));
		} else {
			const char *c = "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found";
			send_all(fd, c, strlen(c));
		}
	}
done:
	close(fd);
	return NULL;
}

static void *
srv_main(void *arg)
{
	pthread_t t;
	int fd;

	while ((fd = accept(srv.lfd, NULL, NULL)) >= 0) {
		pthread_create(&t, NULL, srv_conn, (void *)(intptr_t)fd);
		pthread_detach(t);
	}
	return NULL;
}

static int
srv_setup(void **state)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	pthread_t t;

	memset(&srv, 0, sizeof(srv));
	pthread_mutex_init(&srv.mu, NULL);
	srv.lfd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(srv.lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(srv.lfd, 64) != 0)
		return -1;
	getsockname(srv.lfd, (struct sockaddr *)&a, &al);
	srv.port = ntohs(a.sin_port);
	pthread_create(&t, NULL, srv_main, NULL);
	pthread_detach(t);
	/* Keep proxies of the machine running the tests out of the way. */
	unsetenv("HTTP_PROXY");
	unsetenv("http_proxy");
	unsetenv("HTTPS_PROXY");
	unsetenv("https_proxy");
	return 0;
}

static void
srv_reset(void)
{
	pthread_mutex_lock(&srv.mu);
	srv.nreq = 0;
	srv.nconn = 0;
	pthread_mutex_unlock(&srv.mu);
}

struct collect {
	char buf[70000];
	size_t len;
	int abort_after;
};

static int
collect_sink(void *arg, const void *p, size_t n, struct err *e)
{
	struct collect *c = arg;

	if (c->abort_after && c->len + n > (size_t)c->abort_after)
		return err_set(e, "io.error", "sink says stop");
	assert_true(c->len + n <= sizeof(c->buf));
	memcpy(c->buf + c->len, p, n);
	c->len += n;
	return 0;
}

static int
deny_ip(void *arg, const struct http_url *u, struct err *e)
{
	int *calls = arg;

	(*calls)++;
	return strcmp(u->host, "127.0.0.1") == 0 ? -1 : 0;
}

static void
get(struct http_client *cl, const char *path, const char *host, struct http_request *rq,
    struct http_response *rs, struct collect *c, int expect_rc, struct err *e)
{
	static char url[256];

	snprintf(url, sizeof(url), "http://%s:%d%s", host, srv.port, path);
	rq->url = url;
	rq->sink = collect_sink;
	rq->sink_arg = c;
	c->len = 0;
	err_clear(e);
	assert_int_equal(http_request(cl, rq, rs, e), expect_rc);
}

static void
test_client_keepalive_hundreds(void **state)
{
	struct http_client *cl;
	struct http_request rq;
	static struct http_response rs;
	static struct collect c;
	struct err e = {0};
	int i;

	srv_reset();
	cl = http_client_new(&e);
	assert_non_null(cl);
	http_request_init(&rq, NULL);
	for (i = 0; i < 300; i++) {
		get(cl, i % 3 == 2 ? "/chunk" : "/ok/1000", "127.0.0.1", &rq, &rs, &c, 0, &e);
		assert_int_equal(rs.status, 200);
		assert_int_equal(c.len, i % 3 == 2 ? 11 : 1000);
		assert_int_equal(rs.reused, i > 0);
	}
	assert_memory_equal(c.buf, "hello world", 11);
	assert_int_equal(srv.nconn, 1);
	assert_int_equal(srv.nreq, 300);
	http_client_free(cl);
}

static void
test_client_retries_closed_idle_connection(void **state)
{
	struct http_client *cl;
	struct http_request rq;
	static struct http_response rs;
	static struct collect c;
	struct err e = {0};

	srv_reset();
	cl = http_client_new(&e);
	http_request_init(&rq, NULL);
	get(cl, "/closeafter/10", "127.0.0.1", &rq, &rs, &c, 0, &e);
	usleep(20000);
	get(cl, "/ok/20", "127.0.0.1", &rq, &rs, &c, 0, &e);
	assert_int_equal(c.len, 20);
	assert_int_equal(srv.nconn, 2);
	http_client_free(cl);
}

static void
test_client_redirect_rules_and_headers(void **state)
{
	struct http_client *cl;
	struct http_request rq;
	static struct http_response rs;
	static struct collect c;
	struct err e = {0};
	int calls = 0;

	cl = http_client_new(&e);
	http_request_init(&rq, NULL);
	rq.headers[0] = "Authorization: Bearer t0ken";
	rq.nheaders = 1;

	/* Same-origin redirect: the header follows. */
	srv_reset();
	get(cl, "/same", "localhost", &rq, &rs, &c, 0, &e);
	assert_int_equal(rs.redirects, 1);
	assert_int_equal(c.len, 4);
	assert_int_equal(srv.nreq, 2);
	assert_true(srv.log[0].auth && srv.log[1].auth);
	assert_non_null(strstr(rs.url, "/ok/4"));

	/* Cross-host redirect: the header is dropped. */
	srv_reset();
	get(cl, "/other", "localhost", &rq, &rs, &c, 0, &e);
	assert_int_equal(srv.nreq, 2);
	assert_true(srv.log[0].auth);
	assert_false(srv.log[1].auth);

	/* A rule that refuses the hop: nothing is sent there. */
	srv_reset();
	rq.host_ok = deny_ip;
	rq.host_arg = &calls;
	get(cl, "/other", "localhost", &rq, &rs, &c, -1, &e);
	assert_string_equal(e.code, "http.redirect");
	assert_int_equal(calls, 2);
	assert_int_equal(srv.nreq, 1);
	/* ... and the first host too. */
	calls = 0;
	get(cl, "/ok/1", "127.0.0.1", &rq, &rs, &c, -1, &e);
	assert_int_equal(calls, 1);
	assert_int_equal(srv.nreq, 1);
	rq.host_ok = NULL;

	/* No redirects allowed. */
	rq.limits.max_redirects = 0;
	get(cl, "/same", "localhost", &rq, &rs, &c, -1, &e);
	assert_string_equal(e.code, "http.redirect");
	rq.limits.max_redirects = HTTP_REDIRECTS_MAX + 1;
	get(cl, "/same", "localhost", &rq, &rs, &c, -1, &e);
	assert_string_equal(e.code, "http.url");
	http_client_free(cl);
}

/* The client frames a response by the server's rule for requests
 * (http_framing_*): a repeated Content-Length, even with the same value, a
 * repeated Transfer-Encoding, both at once, chunked in HTTP/1.0 and an
 * unknown coding are all refused, and the body is never read. */
static void
test_client_framing(void **state)
{
	static const char *const why[] = {
	    "repeated Content-Length",
	    "repeated Content-Length",
	    "both Content-Length and Transfer-Encoding",
	    "repeated Transfer-Encoding",
	    "repeated Transfer-Encoding",
	    "Transfer-Encoding in an HTTP/1.0 message",
	    "unsupported Transfer-Encoding",
	    "malformed Content-Length",
	};
	struct http_client *cl;
	struct http_request rq;
	static struct http_response rs;
	static struct collect c;
	char path[32];
	struct err e = {0};
	int k;

	cl = http_client_new(&e);
	http_request_init(&rq, NULL);
	for (k = 0; k < (int)(sizeof(why) / sizeof(why[0])); k++) {
		snprintf(path, sizeof(path), "/frame/%d", k);
		get(cl, path, "127.0.0.1", &rq, &rs, &c, -1, &e);
		assert_string_equal(e.code, "http.protocol");
		if (strstr(e.msg, why[k]) == NULL) {
			print_error("%s: '%s' lacks '%s'\n", path, e.msg, why[k]);
			fail();
		}
		assert_int_equal(c.len, 0);
	}
	http_client_free(cl);
}

static void
test_client_errors(void **state)
{
	struct http_client *cl;
	struct http_request rq;
	static struct http_response rs;
	static struct collect c;
	struct err e = {0};

	cl = http_client_new(&e);
	http_request_init(&rq, NULL);
	get(cl, "/short", "127.0.0.1", &rq, &rs, &c, -1, &e);
	assert_string_equal(e.code, "http.truncated");
	get(cl, "/missing", "127.0.0.1", &rq, &rs, &c, -1, &e);
	assert_string_equal(e.code, "http.status");
	assert_int_equal(rs.status, 404);
	assert_int_equal(rs.snippet_len, 9);
	assert_int_equal(c.len, 0);
	get(cl, "/garbage", "127.0.0.1", &rq, &rs, &c, -1, &e);
	assert_string_equal(e.code, "http.protocol");
	rq.limits.max_body = 999;
	get(cl, "/ok/1000", "127.0.0.1", &rq, &rs, &c, -1, &e);
	assert_string_equal(e.code, "http.too_large");
	rq.limits.max_body = 0;
	c.abort_after = 500;
	get(cl, "/ok/1000", "127.0.0.1", &rq, &rs, &c, -1, &e);
	assert_string_equal(e.code, "io.error");
	c.abort_after = 0;
	rq.method = "HEAD";
	get(cl, "/ok/1000", "127.0.0.1", &rq, &rs, &c, 0, &e);
	assert_int_equal(rs.content_length, 1000);
	assert_int_equal(c.len, 0);
	rq.method = "DELETE";
	get(cl, "/ok/1", "127.0.0.1", &rq, &rs, &c, -1, &e);
	assert_string_equal(e.code, "http.url");
	/* a PUT needs a body it can send: a length, from memory or a file */
	rq.method = "PUT";
	rq.body_len = -1;
	get(cl, "/ok/1", "127.0.0.1", &rq, &rs, &c, -1, &e);
	assert_string_equal(e.code, "http.url");
	rq.body_len = 10;
	rq.body = NULL;
	rq.body_fd = -1;
	get(cl, "/ok/1", "127.0.0.1", &rq, &rs, &c, -1, &e);
	assert_string_equal(e.code, "http.url");
	rq.body_len = 0;
	rq.body_fd = 0;
	rq.method = "GET";
	rq.headers[0] = "Host: evil";
	rq.nheaders = 1;
	get(cl, "/ok/1", "127.0.0.1", &rq, &rs, &c, -1, &e);
	assert_string_equal(e.code, "http.url");
	rq.headers[0] = "X-Ok: a\r\nX-Injected: b";
	get(cl, "/ok/1", "127.0.0.1", &rq, &rs, &c, -1, &e);
	assert_string_equal(e.code, "http.url");
	rq.headers[0] = "Proxy-Authorization: x";
	get(cl, "/ok/1", "127.0.0.1", &rq, &rs, &c, -1, &e);
	assert_string_equal(e.code, "http.url");
	http_client_free(cl);
}

/* Every error answer: each status, said closed or kept, each framing. The
 * client reports http.status with the status and its reason, taken before
 * the body overwrites the head and the connection is freed or cached (read
 * after, it is body bytes or freed memory: the crash of a fetch answered
 * 503 with Connection: close), and the next request works, on the same
 * connection exactly when the answer allowed it. */
static void
test_client_error_answer_matrix(void **state)
{
	static const char *const conns[] = {"close", "keep-alive"};
	static const char *const framings[] = {"length", "chunked", "none"};
	struct http_client *cl;
	struct http_request rq;
	static struct http_response rs;
	static struct collect c;
	struct err e = {0};
	char path[64], want[64];
	size_t si, ci, fi;

	cl = http_client_new(&e);
	assert_non_null(cl);
	http_request_init(&rq, NULL);
	for (si = 0; si < sizeof(err_reasons) / sizeof(err_reasons[0]); si++)
		for (ci = 0; ci < 2; ci++)
			for (fi = 0; fi < 3; fi++) {
				snprintf(path, sizeof(path), "/err/%d/%s/%s", err_reasons[si].status,
				         conns[ci], framings[fi]);
				get(cl, path, "127.0.0.1", &rq, &rs, &c, -1, &e);
				assert_string_equal(e.code, "http.status");
				assert_int_equal(rs.status, err_reasons[si].status);
				snprintf(want, sizeof(want), "HTTP %d %s", err_reasons[si].status,
				         err_reasons[si].reason);
				if (strstr(e.msg, want) == NULL)
					fail_msg("%s: message \"%s\" lacks \"%s\"", path, e.msg, want);
				assert_int_equal(c.len, 0);
				get(cl, "/ok/10", "127.0.0.1", &rq, &rs, &c, 0, &e);
				assert_int_equal(rs.status, 200);
				assert_int_equal(c.len, 10);
				if (rs.reused != (ci == 1 && fi != 2))
					fail_msg("%s: the next request reused=%d", path, rs.reused);
			}
	http_client_free(cl);
}

/* The peer of http_test_connect: every new connection is a socketpair
 * holding cut_stream[0..cut_len), then closed for writing. */
static const char *cut_stream;
static size_t cut_len;
static int cut_peer[8], cut_npeers;

static int
cut_connect(const struct http_url *u, struct err *e)
{
	int sv[2];

	if (cut_npeers == 8 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return err_set(e, "http.connect", "no more peers");
	send_all(sv[1], cut_stream, cut_len);
	/* open for the request the client sends, shut for what it reads */
	shutdown(sv[1], SHUT_WR);
	cut_peer[cut_npeers++] = sv[1];
	return sv[0];
}

/* The server closing after every byte of an answer: each cut either fails
 * with a code of the client's or, only once the framing says the body is
 * complete, succeeds with all of it; an error answer is reported with its
 * status line; the same client serves each next cut (its kept connection,
 * now at its end, is retried on a new one). */
static void
test_client_peer_closes_at_every_byte(void **state)
{
	static const struct {
		const char *stream;
		int body; /* body bytes of a complete answer; -1: read to close */
	} cases[] = {
	    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 5},
	    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: "
	     "v\r\n\r\n",
	     5},
	    {"HTTP/1.0 200 OK\r\n\r\nuntil the close", -1},
	    {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\nContent-Length: 2\n\nok", 2},
	    {"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\nbusy", 0},
	    {"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbusy\r\n0\r\n\r\n",
	     0},
	};
	struct http_client *cl;
	struct http_request rq;
	static struct http_response rs;
	static struct collect c;
	struct err e = {0};
	size_t i, cut, len;
	int r;

	cl = http_client_new(&e);
	http_request_init(&rq, "http://cut.invalid/a");
	rq.sink = collect_sink;
	rq.sink_arg = &c;
	rq.limits.read_ms = 2000;
	http_test_connect = cut_connect;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		len = strlen(cases[i].stream);
		for (cut = 0; cut <= len; cut++) {
			cut_stream = cases[i].stream;
			cut_len = cut;
			c.len = 0;
			err_clear(&e);
			cut_npeers = 0;
			r = http_request(cl, &rq, &rs, &e);
			while (cut_npeers > 0)
				close(cut_peer[--cut_npeers]);
			if (r == 0) {
				if (cases[i].body >= 0 && (int)c.len != cases[i].body)
					fail_msg("case %zu cut %zu: success with %zu body bytes", i, cut,
					         c.len);
			} else if (e.code == NULL || strncmp(e.code, "http.", 5) != 0) {
				fail_msg("case %zu cut %zu: code %s", i, cut, e.code ? e.code : "(none)");
			} else if (cut == len && strcmp(e.code, "http.status") != 0) {
				fail_msg("case %zu whole: %s: %s", i, e.code, e.msg);
			}
			if (strcmp(e.code ? e.code : "", "http.status") == 0 &&
			    strstr(e.msg, "HTTP 503 Service Unavailable") == NULL)
				fail_msg("case %zu cut %zu: %s", i, cut, e.msg);
		}
	}
	http_client_free(cl);
}

static int
hook_reset(void **state)
{
	http_test_connect = NULL;
	return 0;
}

/* A listener whose accept queue is full drops new SYNs: connect hangs, so
 * the connect limit must end it. */
static void
test_client_connect_timeout(void **state)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	struct http_client *cl;
	struct http_request rq;
	static struct http_response rs;
	struct err e = {0};
	char url[64];
	int lfd, fill[3], i;
	int64_t t0;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 0), 0);
	getsockname(lfd, (struct sockaddr *)&a, &al);
	for (i = 0; i < 3; i++) {
		fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		connect(fill[i], (struct sockaddr *)&a, sizeof(a));
	}
	usleep(100000);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/x", ntohs(a.sin_port));
	cl = http_client_new(&e);
	http_request_init(&rq, url);
	rq.limits.connect_ms = 300;
	t0 = clock_ms();
	assert_int_equal(http_request(cl, &rq, &rs, &e), -1);
	assert_string_equal(e.code, "http.connect");
	assert_non_null(strstr(e.msg, "no answer within 300 ms"));
	assert_true(clock_ms() - t0 < 3000);
	/* The whole-transfer deadline wins over a longer connect limit. */
	rq.limits.connect_ms = 10000;
	rq.limits.total_ms = 200;
	t0 = clock_ms();
	assert_int_equal(http_request(cl, &rq, &rs, &e), -1);
	assert_string_equal(e.code, "http.timeout");
	assert_true(clock_ms() - t0 < 3000);
	rq.url = NULL;
	assert_int_equal(http_request(cl, &rq, &rs, &e), -1);
	assert_string_equal(e.code, "http.url");
	http_client_free(cl);
	for (i = 0; i < 3; i++)
		close(fill[i]);
	close(lfd);
}

static void
test_client_proxy_settings(void **state)
{
	struct http_client *cl;
	struct err e = {0};

	cl = http_client_new(&e);
	assert_non_null(cl);
	assert_int_equal(http_client_set_proxy(cl, "https://proxy:3128", NULL, NULL, &e), -1);
	assert_string_equal(e.code, "http.proxy");
	assert_int_equal(http_client_set_proxy(cl, "socks5://proxy:1080", NULL, NULL, &e), -1);
	assert_int_equal(
	    http_client_set_proxy(cl, "proxy.example:3128", "http://u:p@proxy:8080/", "localhost", &e), 0);
	assert_int_equal(http_client_set_proxy(cl, NULL, NULL, NULL, &e), 0);
	http_client_free(cl);
	http_client_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_url_refusals),
	    cmocka_unit_test(test_url_parts),
	    cmocka_unit_test(test_url_resolve),
	    cmocka_unit_test(test_head_good_and_incremental),
	    cmocka_unit_test(test_head_hostile),
	    cmocka_unit_test(test_chunked_every_split),
	    cmocka_unit_test(test_chunked_hostile),
	    cmocka_unit_test(test_no_proxy),
	    cmocka_unit_test(test_client_keepalive_hundreds),
	    cmocka_unit_test(test_client_retries_closed_idle_connection),
	    cmocka_unit_test(test_client_redirect_rules_and_headers),
	    cmocka_unit_test(test_client_errors),
	    cmocka_unit_test(test_client_framing),
	    cmocka_unit_test(test_client_error_answer_matrix),
	    cmocka_unit_test_teardown(test_client_peer_closes_at_every_byte, hook_reset),
	    cmocka_unit_test(test_client_connect_timeout),
	    cmocka_unit_test(test_client_proxy_settings),
	};
	return cmocka_run_group_tests(tests, srv_setup, NULL);
}
