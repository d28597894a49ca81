/* The server core through real loopback sockets: worker routes, streaming,
 * bodies, a handler that forgets to answer, a slow handler not blocking
 * others, drain on stop, the error envelope. */
#include "unit.h"
#include "base/json.h"
#include "net/httpd.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int header_rc = 99;

static void
h_stream(const struct httpd_req *q, struct httpd_resp *w, void *arg)
{
	static const char *parts[] = {"data: one\n\n", "data: two\n\n", "data: three\n\n"};
	int i;

	if (httpd_stream_begin(w, 200, "text/event-stream") != 0)
		return;
	for (i = 0; i < 3; i++)
		if (httpd_stream_write(w, parts[i], strlen(parts[i])) != 0)
			return;
	/* an explicit end for /stream, an implicit one for /stream-auto */
	if (arg == NULL)
		httpd_stream_end(w);
}

static void
h_echo(const struct httpd_req *q, struct httpd_resp *w, void *arg)
{
	const char *a = httpd_req_header(q, "x-a");
	char buf[256];

	snprintf(buf, sizeof(buf), "%s|%s|%zu|%s|%s|%d", q->path, q->query, q->body_len, q->body, a ? a : "-",
	         httpd_req_header_count(q, "x-a"));
	header_rc = httpd_resp_header(w, "X-Bad", "a\r\nInjected: 1");
	/* one grammar for every field line: these are refused as well */
	if (header_rc == -1 &&
	    (httpd_resp_header(w, "Bad Name", "x") == 0 || httpd_resp_header(w, "X-Ctl", "a\x01") == 0 ||
	     httpd_resp_header(w, "", "x") == 0 || httpd_resp_header(w, "X:Y", "x") == 0))
		header_rc = 1;
	httpd_resp_header(w, "X-Good", "yes");
	httpd_respond(w, 200, "text/plain", buf, strlen(buf));
}

static void
h_silent(const struct httpd_req *q, struct httpd_resp *w, void *arg)
{
}

/* How long a test waits for something the server is expected to do: far
 * beyond what it takes on a loaded machine, reached only when it fails. */
#define WAIT_S 10.0

static double
mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Until *v >= want or secs pass; the last value seen. */
static int
wait_at_least(int *v, int want, double secs)
{
	struct timespec ts = {0, 2 * 1000000L};
	double t0 = mono();
	int x;

	while ((x = __atomic_load_n(v, __ATOMIC_SEQ_CST)) < want && mono() - t0 < secs)
		nanosleep(&ts, NULL);
	return x;
}

/* /slow holds its worker until the test lets it go (slow_release), so
 * "answered while /slow was still running" needs no clock: slow_entered
 * counts the calls that got into the handler. */
static int slow_entered, slow_release = 1;

static void
h_slow(const struct httpd_req *q, struct httpd_resp *w, void *arg)
{
	__atomic_add_fetch(&slow_entered, 1, __ATOMIC_SEQ_CST);
	wait_at_least(&slow_release, 1, WAIT_S);
	httpd_respond(w, 200, "text/plain", "slow", 4);
}

static void
h_fast(const struct httpd_req *q, struct httpd_resp *w, void *arg)
{
	httpd_respond(w, 200, "text/plain", "fast", 4);
}

static void
h_err(const struct httpd_req *q, struct httpd_resp *w, void *arg)
{
	struct err e = {0};
	char ed[ERR_DETAILS_MAX];

	err_keep_details(&e, ed, sizeof(ed));

	err_set(&e, "install.failed", "tool \"x\" failed\nbadly");
	err_details(&e, "{\"phase\":\"fetch\"}");
	httpd_respond_err(w, &e);
}

static int observed, last_status;

static void
observe(void *arg, const struct httpd_route *route, int status, size_t bytes, int64_t usec)
{
	__atomic_add_fetch(&observed, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&last_status, status, __ATOMIC_SEQ_CST);
}

static int
gate(struct httpd_req *q, const struct httpd_route *route, struct httpd_resp *w, void *arg)
{
	if (httpd_req_header(q, "x-deny") != NULL)
		return httpd_respond_errf(w, "auth.missing", "no token"), 1;
	q->ctx = "alice";
	return 0;
}

static void
h_whoami(const struct httpd_req *q, struct httpd_resp *w, void *arg)
{
	httpd_respond(w, 200, "text/plain", q->ctx ? (const char *)q->ctx : "nobody",
	              q->ctx ? strlen(q->ctx) : 6);
}

/* Streams until the client is gone or too slow; records what it saw. */
static int forever_rc = 1, forever_closing;

static void
h_forever(const struct httpd_req *q, struct httpd_resp *w, void *arg)
{
	static char chunk[16384];
	int i, rc = 0;

	memset(chunk, 'x', sizeof(chunk));
	if (httpd_stream_begin(w, 200, "text/event-stream") != 0)
		return;
	for (i = 0; i < 100000 && rc == 0; i++)
		rc = httpd_stream_write(w, chunk, sizeof(chunk));
	__atomic_store_n(&forever_closing, httpd_resp_closing(w), __ATOMIC_SEQ_CST);
	__atomic_store_n(&forever_rc, rc, __ATOMIC_SEQ_CST);
}

/* Deferred answers, given by a thread of their own. */
struct later {
	struct httpd_resp *w;
	const char *path;
	long delay_ms;
	int stream;
	int all; /* /defer: answer once DEFER_ALL handlers have run */
};

/* /defer handlers run so far; their answers wait for DEFER_ALL of them,
 * which only happens if a deferred answer frees its worker. */
#define DEFER_ALL 6
static int defer_entered;

static void *
answer_later(void *arg)
{
	struct later *l = arg;
	struct timespec ts = {l->delay_ms / 1000, (l->delay_ms % 1000) * 1000000L};
	char buf[128];

	nanosleep(&ts, NULL);
	if (l->all)
		snprintf(buf, sizeof(buf), "later:%s after %d", l->path,
		         wait_at_least(&defer_entered, DEFER_ALL, WAIT_S));
	else
		snprintf(buf, sizeof(buf), "later:%s", l->path);
	if (l->stream) {
		httpd_stream_begin(l->w, 200, "text/event-stream");
		httpd_stream_write(l->w, buf, strlen(buf));
	} else {
		httpd_respond(l->w, 200, "text/plain", buf, strlen(buf));
	}
	httpd_complete(l->w);
	free(l);
	return NULL;
}

static void
h_defer(const struct httpd_req *q, struct httpd_resp *w, void *arg)
{
	struct later *l = malloc(sizeof(*l));
	struct timespec ts = {0, 30 * 1000000L};
	int fast = strcmp(q->path, "/defer-fast") == 0;
	pthread_t t;

	l->w = w;
	l->path = q->path;
	l->all = strcmp(q->path, "/defer") == 0;
	l->delay_ms = fast || l->all ? 0 : 300;
	l->stream = strcmp(q->path, "/defer-stream") == 0;
	if (l->all)
		__atomic_add_fetch(&defer_entered, 1, __ATOMIC_SEQ_CST);
	httpd_defer(w);
	pthread_create(&t, NULL, answer_later, l);
	pthread_detach(t);
	/* /defer-fast: the answer is complete before this handler returns
	 * (l belongs to the other thread now) */
	if (fast)
		nanosleep(&ts, NULL);
}

static const struct httpd_route routes[] = {
    {"GET", "/defer", HTTPD_EXACT, h_defer, NULL},
    {"GET", "/defer-fast", HTTPD_EXACT, h_defer, NULL},
    {"GET", "/defer-stream", HTTPD_EXACT, h_defer, NULL},
    {"GET", "/defer-inline", HTTPD_EXACT | HTTPD_INLINE, h_defer, NULL},
    {"GET", "/forever", HTTPD_EXACT, h_forever, NULL},
    {"GET", "/whoami", HTTPD_EXACT | HTTPD_INLINE, h_whoami, NULL},
    {"GET", "/public", HTTPD_EXACT | HTTPD_INLINE | HTTPD_PUBLIC, h_whoami, NULL},
    {"GET", "/stream", HTTPD_EXACT, h_stream, NULL},
    {"GET", "/stream-auto", HTTPD_EXACT, h_stream, (void *)1},
    {"POST", "/echo/", HTTPD_PREFIX, h_echo, NULL},
    {"GET", "/silent", HTTPD_EXACT, h_silent, NULL},
    {"GET", "/slow", HTTPD_EXACT, h_slow, NULL},
    {"GET", "/fast", HTTPD_EXACT | HTTPD_INLINE, h_fast, NULL},
    {"GET", "/err", HTTPD_EXACT, h_err, NULL},
};

static struct httpd *srv;
static pthread_t loop;
static int loop_rc;

static void *
run_loop(void *arg)
{
	struct err e = {0};

	loop_rc = httpd_run(srv, &e);
	return NULL;
}

static int
setup(void **state)
{
	struct httpd_config c;
	struct err e = {0};

	httpd_config_defaults(&c);
	c.host = "127.0.0.1";
	c.port = 0;
	c.max_conns = 16;
	c.workers = 2;
	c.access_log = 0;
	c.routes = routes;
	c.nroutes = sizeof(routes) / sizeof(routes[0]);
	c.gate = gate;
	c.observe = observe;
	c.write_timeout_ms = 500;
	srv = httpd_new(&c, &e);
	if (srv == NULL)
		return -1;
	return pthread_create(&loop, NULL, run_loop, NULL);
}

static int
teardown(void **state)
{
	httpd_stop(srv);
	pthread_join(loop, NULL);
	httpd_free(srv);
	return 0;
}

static int
dial(void)
{
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)httpd_port(srv));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Send req, read until the server closes (or WAIT_S), return the length. */
static size_t
exchange_fd(int fd, const char *req, size_t reqlen, char *out, size_t cap)
{
	struct pollfd p = {fd, POLLIN, 0};
	size_t got = 0;
	ssize_t k;

	assert_int_equal(send(fd, req, reqlen, 0), (ssize_t)reqlen);
	while (got < cap - 1 && poll(&p, 1, (int)(WAIT_S * 1000)) == 1) {
		k = recv(fd, out + got, cap - 1 - got, 0);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	out[got] = '\0';
	return got;
}

static size_t
exchange_fd_close(const char *req, size_t len, char *out, size_t cap)
{
	int fd = dial();
	size_t n = exchange_fd(fd, req, len, out, cap);

	close(fd);
	return n;
}

static size_t
exchange(const char *req, char *out, size_t cap)
{
	int fd = dial();
	size_t n = exchange_fd(fd, req, strlen(req), out, cap);

	close(fd);
	return n;
}

static void
test_stream_chunked(void **state)
{
	char out[4096];

	exchange("GET /stream HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(out, "Content-Type: text/event-stream\r\n"));
	assert_non_null(strstr(out, "Transfer-Encoding: chunked\r\n"));
	assert_null(strstr(out, "Content-Length"));
	assert_non_null(strstr(
	    out, "\r\n\r\nb\r\ndata: one\n\n\r\nb\r\ndata: two\n\n\r\nd\r\ndata: three\n\n\r\n0\r\n\r\n"));
	/* the implicit end */
	exchange("GET /stream-auto HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "d\r\ndata: three\n\n\r\n0\r\n\r\n"));
}

static void
test_stream_keeps_connection(void **state)
{
	char out[4096];
	const char two[] = "GET /stream HTTP/1.1\r\nHost: t\r\n\r\nGET /fast HTTP/1.1\r\nHost: "
	                   "t\r\nConnection: close\r\n\r\n";

	exchange(two, out, sizeof(out));
	assert_non_null(strstr(out, "0\r\n\r\nHTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(out, "\r\n\r\nfast"));
}

static void
test_stream_http10_is_close_delimited(void **state)
{
	char out[4096];

	exchange("GET /stream HTTP/1.0\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "Connection: close\r\n"));
	assert_null(strstr(out, "Transfer-Encoding"));
	assert_non_null(strstr(out, "\r\n\r\ndata: one\n\ndata: two\n\ndata: three\n\n"));
}

static void
test_bodies_reach_the_handler(void **state)
{
	char out[4096];

	exchange("POST /echo/x?q=1 HTTP/1.1\r\nHost: t\r\nX-A: v1\r\nX-A: v2\r\nContent-Length: 5\r\n"
	         "Connection: close\r\n\r\nhello",
	         out, sizeof(out));
	assert_non_null(strstr(out, "\r\n\r\n/echo/x|q=1|5|hello|v1|2"));
	assert_non_null(strstr(out, "X-Good: yes\r\n"));
	assert_null(strstr(out, "Injected"));
	assert_int_equal(header_rc, -1);
	exchange("POST /echo/y HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
	         "3\r\nabc\r\n4;e=1\r\ndefg\r\n0\r\nTr: x\r\n\r\n",
	         out, sizeof(out));
	assert_non_null(strstr(out, "\r\n\r\n/echo/y||7|abcdefg|-|0"));
}

/* The body buffer holds exactly max_body (1 MiB by default) whatever the
 * framing; a chunk that would pass it is 413 as soon as its size line ends. */
static void
test_body_at_and_over_the_limit(void **state)
{
	size_t max = HTTPD_MAX_BODY_DEFAULT, n = 0, i;
	char *req = malloc(max + max / 1024 * 16 + 256), out[4096], want[64];
	static const char over[] = "POST /echo/z HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
	                           "Connection: close\r\n\r\n100001\r\n";

	assert_non_null(req);
	n += (size_t)sprintf(req, "POST /echo/z HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
	                          "Connection: close\r\n\r\n");
	for (i = 0; i < max / 1024; i++) {
		n += (size_t)sprintf(req + n, "400\r\n");
		memset(req + n, 'b', 1024);
		n += 1024;
		n += (size_t)sprintf(req + n, "\r\n");
	}
	n += (size_t)sprintf(req + n, "0\r\n\r\n");
	exchange_fd_close(req, n, out, sizeof(out));
	snprintf(want, sizeof(want), "\r\n\r\n/echo/z||%zu|bbb", max);
	assert_non_null(strstr(out, want));

	n = (size_t)sprintf(req,
	                    "POST /echo/z HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n"
	                    "Connection: close\r\n\r\n",
	                    max);
	memset(req + n, 'c', max);
	exchange_fd_close(req, n + max, out, sizeof(out));
	snprintf(want, sizeof(want), "\r\n\r\n/echo/z||%zu|ccc", max);
	assert_non_null(strstr(out, want));

	exchange(over, out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 413 "));
	snprintf(want, sizeof(want), "is over the limit of %zu bytes", max);
	assert_non_null(strstr(out, want));
	free(req);
}

static void
test_expect_continue(void **state)
{
	char out[4096];
	int fd = dial();
	struct pollfd p = {fd, POLLIN, 0};
	const char head[] =
	    "POST /echo/c HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n"
	    "Connection: close\r\n\r\n";
	ssize_t k;

	assert_int_equal(send(fd, head, sizeof(head) - 1, 0), (ssize_t)sizeof(head) - 1);
	assert_int_equal(poll(&p, 1, (int)(WAIT_S * 1000)), 1);
	k = recv(fd, out, sizeof(out) - 1, 0);
	assert_true(k > 0);
	out[k] = '\0';
	assert_string_equal(out, "HTTP/1.1 100 Continue\r\n\r\n");
	exchange_fd(fd, "ok", 2, out, sizeof(out));
	assert_non_null(strstr(out, "/echo/c||2|ok"));
	close(fd);
}

static void
test_handler_without_answer_is_500(void **state)
{
	char out[4096];

	exchange("GET /silent HTTP/1.1\r\nHost: t\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 500 Internal Server Error\r\n"));
	assert_non_null(strstr(out, "\"code\":\"internal\""));
}

static void
test_error_envelope(void **state)
{
	char out[4096], buf[64];

	exchange("GET /err HTTP/1.1\r\nHost: t\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 502 Bad Gateway\r\n"));
	assert_non_null(strstr(
	    out, "{\"error\":{\"code\":\"install.failed\",\"message\":\"tool \\\"x\\\" failed\\nbadly\","
	         "\"details\":{\"phase\":\"fetch\"},\"remedy\":\"the message names the step"));
	assert_int_equal(httpd_error_body(buf, sizeof(buf), "not_found", "x", NULL), -1);
	{
		/* a message and details that carry quotes, backslashes,
		 * newlines and control bytes read back as they were */
		static const char odd[] = "/p/q\"b\\s\n\001";
		struct json_doc d;
		struct err e = {0};
		char ed[ERR_DETAILS_MAX];
		const struct json_val *x;

		err_keep_details(&e, ed, sizeof(ed));
		err_set(&e, "install.failed", "cannot read %s", odd);
		err_detail_str(&e, "path", odd);
		assert_true(httpd_error_body(out, sizeof(out), e.code, e.msg, err_details_text(&e)) > 0);
		assert_int_equal(json_parse(&d, out, strlen(out), NULL, &e), 0);
		x = json_get(d.root, "error");
		assert_string_equal(json_get_str(x, "code"), "install.failed");
		assert_string_equal(json_get_str(x, "message"), "cannot read /p/q\"b\\s\n\001");
		assert_string_equal(json_get_str(json_get(x, "details"), "path"), odd);
		assert_non_null(json_get_str(x, "remedy"));
		json_free(&d);
	}
	assert_true(httpd_error_body(out, sizeof(out), "no.such.code", NULL, NULL) > 0);
	assert_non_null(strstr(out, "\"message\":\"internal error\""));
}

static void
test_slow_handler_does_not_block_others(void **state)
{
	const char slow[] = "GET /slow HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
	char out[4096];
	int fd = dial(), n = __atomic_load_n(&slow_entered, __ATOMIC_SEQ_CST) + 1;
	struct pollfd p = {fd, POLLIN, 0};

	__atomic_store_n(&slow_release, 0, __ATOMIC_SEQ_CST);
	assert_int_equal(send(fd, slow, sizeof(slow) - 1, 0), (ssize_t)sizeof(slow) - 1);
	assert_int_equal(wait_at_least(&slow_entered, n, WAIT_S), n);
	exchange("GET /fast HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "fast"));
	/* ... answered while /slow still holds its worker */
	assert_int_equal(poll(&p, 1, 0), 0);
	__atomic_store_n(&slow_release, 1, __ATOMIC_SEQ_CST);
	exchange_fd(fd, "", 0, out, sizeof(out));
	assert_non_null(strstr(out, "\r\n\r\nslow"));
	close(fd);
}

static void
test_gate_runs_before_routing(void **state)
{
	char out[4096];
	int before = __atomic_load_n(&observed, __ATOMIC_SEQ_CST);

	exchange("GET /whoami HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "\r\n\r\nalice"));
	/* denied: the same 401 for a route, an unknown path, a wrong method */
	exchange("GET /whoami HTTP/1.1\r\nHost: t\r\nX-Deny: 1\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 401 Unauthorized\r\n"));
	assert_non_null(strstr(out, "\"code\":\"auth.missing\""));
	exchange("GET /no/such/path HTTP/1.1\r\nHost: t\r\nX-Deny: 1\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 401 Unauthorized\r\n"));
	exchange("DELETE /whoami HTTP/1.1\r\nHost: t\r\nX-Deny: 1\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 401 Unauthorized\r\n"));
	/* a public route skips the gate */
	exchange("GET /public HTTP/1.1\r\nHost: t\r\nX-Deny: 1\r\nConnection: close\r\n\r\n", out,
	         sizeof(out));
	assert_non_null(strstr(out, "\r\n\r\nnobody"));
	assert_int_equal(__atomic_load_n(&observed, __ATOMIC_SEQ_CST) - before, 5);
	assert_int_equal(__atomic_load_n(&last_status, __ATOMIC_SEQ_CST), 200);
}

static void
test_deferred_answers_free_the_workers(void **state)
{
	const char req[] = "GET /defer HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
	char out[4096];
	int fds[DEFER_ALL], i;

	/* Each answer waits until all six handlers have run, on two workers:
	 * only handlers that give their worker back get there. */
	__atomic_store_n(&defer_entered, 0, __ATOMIC_SEQ_CST);
	for (i = 0; i < DEFER_ALL; i++) {
		fds[i] = dial();
		assert_int_equal(send(fds[i], req, sizeof(req) - 1, 0), (ssize_t)sizeof(req) - 1);
	}
	for (i = 0; i < DEFER_ALL; i++) {
		exchange_fd(fds[i], "", 0, out, sizeof(out));
		assert_non_null(strstr(out, "\r\n\r\nlater:/defer after 6"));
		close(fds[i]);
	}
	exchange("GET /defer-fast HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "\r\n\r\nlater:/defer-fast"));
	exchange("GET /defer-inline HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "\r\n\r\nlater:/defer-inline"));
	exchange("GET /defer-stream HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", out, sizeof(out));
	assert_non_null(strstr(out, "Transfer-Encoding: chunked\r\n"));
	assert_non_null(strstr(out, "\r\n\r\n13\r\nlater:/defer-stream\r\n0\r\n\r\n"));
}

static int
wait_forever_done(double secs)
{
	struct timespec ts = {0, 10 * 1000000L};
	double t0 = mono();

	while (__atomic_load_n(&forever_rc, __ATOMIC_SEQ_CST) == 1 && mono() - t0 < secs)
		nanosleep(&ts, NULL);
	return __atomic_load_n(&forever_rc, __ATOMIC_SEQ_CST);
}

static void
test_stream_to_a_client_that_leaves(void **state)
{
	const char req[] = "GET /forever HTTP/1.1\r\nHost: t\r\n\r\n";
	char buf[4096];
	int fd = dial();

	__atomic_store_n(&forever_rc, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(send(fd, req, sizeof(req) - 1, 0), (ssize_t)sizeof(req) - 1);
	assert_true(recv(fd, buf, sizeof(buf), 0) > 0);
	close(fd);
	assert_int_equal(wait_forever_done(WAIT_S), -1);
	assert_int_equal(__atomic_load_n(&forever_closing, __ATOMIC_SEQ_CST), 1);
}

static void
test_stream_to_a_client_that_does_not_read(void **state)
{
	const char req[] = "GET /forever HTTP/1.1\r\nHost: t\r\n\r\n";
	double t0;
	int fd = dial(), small = 4096;

	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	__atomic_store_n(&forever_rc, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(send(fd, req, sizeof(req) - 1, 0), (ssize_t)sizeof(req) - 1);
	t0 = mono();
	/* write_timeout_ms is 500 here: the stream gives up, the worker is free */
	assert_int_equal(wait_forever_done(WAIT_S), -1);
	assert_true(mono() - t0 >= 0.4);
	close(fd);
}

static void
test_bad_config(void **state)
{
	struct httpd_config c;
	struct err e = {0};

	httpd_config_defaults(&c);
	c.workers = 0;
	assert_null(httpd_new(&c, &e));
	assert_string_equal(e.code, "config.invalid");
	httpd_config_defaults(&c);
	c.host = "no such host.invalid";
	c.port = 0;
	assert_null(httpd_new(&c, &e));
	assert_string_equal(e.code, "config.invalid");
	httpd_config_defaults(&c);
	c.max_head = HTTP_REQ_HEAD_LIMIT_MIN - 1;
	assert_null(httpd_new(&c, &e));
	assert_string_equal(e.code, "config.invalid");
	c.max_head = HTTP_REQ_HEAD_LIMIT_MAX + 1;
	assert_null(httpd_new(&c, &e));
	assert_string_equal(e.code, "config.invalid");
}

static int
dial_port(int port)
{
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* What arrives on fd until the server closes it (or WAIT_S). */
static void
read_all(int fd, char *out, size_t cap)
{
	struct pollfd p = {fd, POLLIN, 0};
	size_t got = 0;
	ssize_t k;

	while (got < cap - 1 && poll(&p, 1, (int)(WAIT_S * 1000)) == 1) {
		k = recv(fd, out + got, cap - 1 - got, 0);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	out[got] = '\0';
}

static void *
run_other(void *arg)
{
	struct err e = {0};

	httpd_run(arg, &e);
	return NULL;
}

/* A head or a body that does not arrive within its deadline is answered 408
 * naming which part and the limit. */
static void
test_head_and_body_deadlines(void **state)
{
	static const struct {
		const char *req, *msg;
	} cases[] = {
	    {"GET /echo/t HTTP/1.1\r\nHost: t\r\n", "the request head was not received within 300 ms"},
	    {"POST /echo/t HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc",
	     "the request body was not received within 400 ms"},
	};
	struct httpd_config c;
	struct httpd *s;
	struct err e = {0};
	pthread_t th;
	char out[4096];
	size_t k;
	int fd;

	httpd_config_defaults(&c);
	c.host = "127.0.0.1";
	c.port = 0;
	c.workers = 1;
	c.access_log = 0;
	c.routes = routes;
	c.nroutes = sizeof(routes) / sizeof(routes[0]);
	c.header_timeout_ms = 300;
	c.body_timeout_ms = 400;
	s = httpd_new(&c, &e);
	assert_non_null(s);
	assert_int_equal(pthread_create(&th, NULL, run_other, s), 0);
	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		fd = dial_port(httpd_port(s));
		assert_int_equal(send(fd, cases[k].req, strlen(cases[k].req), 0),
		                 (ssize_t)strlen(cases[k].req));
		read_all(fd, out, sizeof(out));
		close(fd);
		assert_non_null(strstr(out, "HTTP/1.1 408 "));
		if (strstr(out, cases[k].msg) == NULL)
			fail_msg("case %zu: %s", k, out);
	}
	httpd_stop(s);
	pthread_join(th, NULL);
	httpd_free(s);
}

/* Is fd closed by the server (within ms)? */
static int
closed_within(int fd, int ms)
{
	struct pollfd p = {fd, POLLIN, 0};
	char b[64];

	return poll(&p, 1, ms) == 1 && recv(fd, b, sizeof(b), MSG_DONTWAIT) == 0;
}

/* Partly sent requests (heads, and bodies of complete heads) of one address:
 * at most HTTPD_PARTIAL_PER_PEER stay, the oldest close first; with the
 * table full of them a new connection closes the oldest and is served. */
static void
test_partial_requests_capped(void **state)
{
	const char half_head[] = "GET /fast HTTP/1.1\r\nHo";
	const char half_body[] = "POST /echo/x HTTP/1.1\r\nHost: t\r\nContent-Length: 9\r\n\r\nab";
	const char fast[] = "GET /fast HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
	enum { N = HTTPD_PARTIAL_PER_PEER + 4 };
	struct httpd_config c;
	struct httpd *s;
	struct err e = {0};
	pthread_t th;
	char out[4096];
	int fds[N], i, k, fd;

	for (k = 0; k < 2; k++) {
		httpd_config_defaults(&c);
		c.host = "127.0.0.1";
		c.port = 0;
		c.max_conns = k == 0 ? 64 : 4;
		c.reserve = 0;
		c.workers = 2;
		c.access_log = 0;
		c.routes = routes;
		c.nroutes = sizeof(routes) / sizeof(routes[0]);
		s = httpd_new(&c, &e);
		assert_non_null(s);
		assert_int_equal(pthread_create(&th, NULL, run_other, s), 0);
		for (i = 0; i < (k == 0 ? N : 4); i++) {
			const char *m = i % 2 ? half_body : half_head;

			fds[i] = dial_port(httpd_port(s));
			assert_int_equal(send(fds[i], m, strlen(m), 0), (ssize_t)strlen(m));
			/* in order: the server sees each one stall before the next */
			usleep(20000);
		}
		if (k == 0) {
			/* the oldest go first; the newest 8 stay */
			for (i = 0; i < N; i++)
				if (closed_within(fds[i], i < N - HTTPD_PARTIAL_PER_PEER ? 2000 : 50) !=
				    (i < N - HTTPD_PARTIAL_PER_PEER))
					fail_msg("connection %d of %d: wrong one closed or kept", i, N);
		}
		fd = dial_port(httpd_port(s));
		assert_int_equal(send(fd, fast, sizeof(fast) - 1, 0), (ssize_t)sizeof(fast) - 1);
		read_all(fd, out, sizeof(out));
		close(fd);
		if (strstr(out, "HTTP/1.1 200 OK") == NULL)
			fail_msg("case %d: %s", k, out);
		if (k == 1)
			assert_true(closed_within(fds[0], 2000));
		for (i = 0; i < (k == 0 ? N : 4); i++)
			close(fds[i]);
		httpd_stop(s);
		pthread_join(th, NULL);
		httpd_free(s);
	}
}

/* With a gate: a request it refuses is answered 401 and closed before its
 * body is sent. A body it admitted that stalls is closed neither for the
 * unvetted half heads of its own address nor for a new connection in a full
 * table, only for its address's admitted bodies over HTTPD_PARTIAL_PER_PEER
 * (the oldest first), and is answered when the rest arrives. */
static void
test_gate_before_the_body(void **state)
{
	const char half_head[] = "GET /fast HTTP/1.1\r\nHo";
	const char upload[] = "POST /echo/up HTTP/1.1\r\nHost: t\r\nContent-Length: 9\r\n\r\nab";
	const char denied[] =
	    "POST /echo/up HTTP/1.1\r\nHost: t\r\nX-Deny: 1\r\nContent-Length: 900000\r\n\r\n";
	const char fast[] = "GET /fast HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
	enum { P = HTTPD_PARTIAL_PER_PEER, HEADS = HTTPD_PARTIAL_PER_PEER + 4 };
	struct pollfd pf;
	struct httpd_config c;
	struct httpd *s;
	struct err e = {0};
	pthread_t th;
	char out[4096];
	int up[P + 1], heads[HEADS + 1], i, fd;
	ssize_t k;

	httpd_config_defaults(&c);
	c.host = "127.0.0.1";
	c.port = 0;
	c.max_conns = 2 * P;
	c.reserve = 0;
	c.workers = 2;
	c.access_log = 0;
	c.routes = routes;
	c.nroutes = sizeof(routes) / sizeof(routes[0]);
	c.gate = gate;
	s = httpd_new(&c, &e);
	assert_non_null(s);
	assert_int_equal(pthread_create(&th, NULL, run_other, s), 0);

	fd = dial_port(httpd_port(s));
	assert_int_equal(send(fd, denied, strlen(denied), 0), (ssize_t)strlen(denied));
	pf = (struct pollfd){fd, POLLIN, 0};
	assert_int_equal(poll(&pf, 1, 1000), 1);
	k = recv(fd, out, sizeof(out) - 1, 0);
	out[k > 0 ? k : 0] = '\0';
	if (strstr(out, "HTTP/1.1 401 Unauthorized\r\n") == NULL ||
	    strstr(out, "Connection: close\r\n") == NULL)
		fail_msg("refused before the body: %s", out);
	close(fd);

	up[0] = dial_port(httpd_port(s));
	assert_int_equal(send(up[0], upload, strlen(upload), 0), (ssize_t)strlen(upload));
	usleep(20000);
	for (i = 0; i < HEADS; i++) {
		heads[i] = dial_port(httpd_port(s));
		assert_int_equal(send(heads[i], half_head, strlen(half_head), 0), (ssize_t)strlen(half_head));
		usleep(20000);
	}
	if (closed_within(up[0], 50))
		fail_msg("an admitted upload was closed for half heads of its address");
	/* 8 heads and 8 uploads fill the table; the 9th upload closes the
	 * first, a head (never an upload) makes room for the last of them */
	for (i = 1; i <= P; i++) {
		up[i] = dial_port(httpd_port(s));
		assert_int_equal(send(up[i], upload, strlen(upload), 0), (ssize_t)strlen(upload));
		usleep(20000);
	}
	assert_true(closed_within(up[0], 2000));
	heads[HEADS] = dial_port(httpd_port(s));
	assert_int_equal(send(heads[HEADS], half_head, strlen(half_head), 0), (ssize_t)strlen(half_head));
	usleep(20000);
	fd = dial_port(httpd_port(s));
	assert_int_equal(send(fd, fast, sizeof(fast) - 1, 0), (ssize_t)sizeof(fast) - 1);
	read_all(fd, out, sizeof(out));
	close(fd);
	if (strstr(out, "HTTP/1.1 200 OK") == NULL)
		fail_msg("a new request in a full table: %s", out);
	for (i = 1; i <= P; i++)
		if (closed_within(up[i], 50))
			fail_msg("admitted upload %d of %d was closed", i, P);
	assert_int_equal(send(up[P], "cdefghi", 7, 0), 7);
	read_all(up[P], out, sizeof(out));
	if (strstr(out, "/echo/up||9|abcdefghi|") == NULL)
		fail_msg("the stalled upload, completed: %s", out);
	for (i = 0; i <= P; i++)
		close(up[i]);
	for (i = 0; i <= HEADS; i++)
		close(heads[i]);
	httpd_stop(s);
	pthread_join(th, NULL);
	httpd_free(s);
}

/* Without a reserve (other addresses than loopback), a client over a limit
 * with nothing to reclaim is refused at once: the table full, or its address
 * at max_conns_per_peer. The held connections are in a handler (/slow), so
 * neither clock nor luck decides whether they could be reclaimed. */
static void
test_limits_refuse_without_reserve(void **state)
{
	static const struct {
		int max, per_peer;
		const char *msg;
	} cases[] = {
	    {2, 0, "all 2 connection slots are in use"},
	    {4, 2, "127.0.0.1 already holds 2 connections, the limit per client address"},
	};
	const char slow[] = "GET /slow HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
	struct httpd_config c;
	struct httpd *s;
	struct err e = {0};
	pthread_t th;
	char out[4096];
	int held[2], i, k, fd, n;

	for (k = 0; k < 2; k++) {
		httpd_config_defaults(&c);
		c.host = "127.0.0.1";
		c.port = 0;
		c.max_conns = cases[k].max;
		c.max_conns_per_peer = cases[k].per_peer;
		c.reserve = 0;
		c.workers = 2;
		c.access_log = 0;
		c.routes = routes;
		c.nroutes = sizeof(routes) / sizeof(routes[0]);
		s = httpd_new(&c, &e);
		assert_non_null(s);
		assert_int_equal(pthread_create(&th, NULL, run_other, s), 0);
		__atomic_store_n(&slow_release, 0, __ATOMIC_SEQ_CST);
		n = __atomic_load_n(&slow_entered, __ATOMIC_SEQ_CST) + 2;
		for (i = 0; i < 2; i++) {
			held[i] = dial_port(httpd_port(s));
			assert_int_equal(send(held[i], slow, sizeof(slow) - 1, 0), (ssize_t)sizeof(slow) - 1);
		}
		assert_int_equal(wait_at_least(&slow_entered, n, WAIT_S), n);
		fd = dial_port(httpd_port(s));
		read_all(fd, out, sizeof(out));
		close(fd);
		assert_non_null(strstr(out, "HTTP/1.1 503 Service Unavailable"));
		assert_non_null(strstr(out, "Retry-After: 1"));
		assert_non_null(strstr(out, "\"code\":\"request.busy\""));
		if (strstr(out, cases[k].msg) == NULL)
			fail_msg("case %d: %s", k, out);
		/* the held ones are still answered */
		__atomic_store_n(&slow_release, 1, __ATOMIC_SEQ_CST);
		for (i = 0; i < 2; i++) {
			read_all(held[i], out, sizeof(out));
			assert_non_null(strstr(out, "HTTP/1.1 200 OK"));
			close(held[i]);
		}
		httpd_stop(s);
		pthread_join(th, NULL);
		httpd_free(s);
	}
	httpd_config_defaults(&c);
	c.reserve = -1;
	assert_null(httpd_new(&c, &e));
	assert_string_equal(e.code, "config.invalid");
	httpd_config_defaults(&c);
	c.max_conns_per_peer = -1;
	assert_null(httpd_new(&c, &e));
	assert_string_equal(e.code, "config.invalid");
}

/* Until a connection to the server is refused (its listener is closed:
 * it drains), or secs pass. */
static int
refused_within(double secs)
{
	struct timespec ts = {0, 5 * 1000000L};
	struct sockaddr_in a;
	double t0 = mono();
	int fd, rc;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)httpd_port(srv));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	do {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
		close(fd);
		if (rc != 0)
			return 1;
		nanosleep(&ts, NULL);
	} while (mono() - t0 < secs);
	return 0;
}

/* Last: stops the shared server. A request in a worker when stop arrives
 * completes, then httpd_run returns 0. */
static void
test_stop_drains_in_flight(void **state)
{
	const char slow[] = "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n";
	char out[4096];
	int fd = dial(), n = __atomic_load_n(&slow_entered, __ATOMIC_SEQ_CST) + 1;

	__atomic_store_n(&slow_release, 0, __ATOMIC_SEQ_CST);
	assert_int_equal(send(fd, slow, sizeof(slow) - 1, 0), (ssize_t)sizeof(slow) - 1);
	assert_int_equal(wait_at_least(&slow_entered, n, WAIT_S), n);
	httpd_stop(srv);
	assert_true(refused_within(WAIT_S));
	__atomic_store_n(&slow_release, 1, __ATOMIC_SEQ_CST);
	exchange_fd(fd, "", 0, out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(out, "Connection: close\r\n"));
	assert_non_null(strstr(out, "\r\n\r\nslow"));
	close(fd);
	pthread_join(loop, NULL);
	assert_int_equal(loop_rc, 0);
	httpd_free(srv);
	srv = NULL;
}

static int
teardown_if_running(void **state)
{
	return srv ? teardown(state) : 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stream_chunked),
	    cmocka_unit_test(test_stream_keeps_connection),
	    cmocka_unit_test(test_stream_http10_is_close_delimited),
	    cmocka_unit_test(test_bodies_reach_the_handler),
	    cmocka_unit_test(test_body_at_and_over_the_limit),
	    cmocka_unit_test(test_expect_continue),
	    cmocka_unit_test(test_handler_without_answer_is_500),
	    cmocka_unit_test(test_error_envelope),
	    cmocka_unit_test(test_slow_handler_does_not_block_others),
	    cmocka_unit_test(test_gate_runs_before_routing),
	    cmocka_unit_test(test_deferred_answers_free_the_workers),
	    cmocka_unit_test(test_stream_to_a_client_that_leaves),
	    cmocka_unit_test(test_stream_to_a_client_that_does_not_read),
	    cmocka_unit_test(test_bad_config),
	    cmocka_unit_test(test_head_and_body_deadlines),
	    cmocka_unit_test(test_limits_refuse_without_reserve),
	    cmocka_unit_test(test_partial_requests_capped),
	    cmocka_unit_test(test_gate_before_the_body),
	    cmocka_unit_test(test_stop_drains_in_flight),
	};
	return cmocka_run_group_tests(tests, setup, teardown_if_running);
}
