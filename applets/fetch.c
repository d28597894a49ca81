/*
 * fetch: a pinned download that is verified before it appears: nothing
 * unverified is ever left at the destination or written to stdout.
 *
 *   fetch URL (--sha256 HEX | --sha512 HEX | --integrity SRI) [-o FILE] [-q]
 *
 * The body goes to a temporary file beside FILE while it is hashed; only a
 * matching digest is fsynced and renamed into place (for a symlink to a
 * regular file, in place of the file it names: the link stays). Without -o,
 * with -o -, and with an -o that is no regular file (a FIFO, a device, a
 * symlink to one such as /dev/stdout) the body is buffered in an (already
 * unlinked) temporary file under $TMPDIR and copied there after
 * verification, through open(): such a node is never replaced, and its
 * reader never gets unverified bytes.
 *
 * The cache-filling form (fetch [--only NAME...] [--platform P|all]
 * [--cache DIR]) is fetch_cache() in fetch_cache.c, shared with prepare
 * --cache-only; fetch_main() takes it when no URL is given.
 */
#include "base/decimal.h"
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/digest.h"
#include "base/fs.h"
#include "base/net.h"
#include "config/config.h"
#include "net/hostrule.h"
#include "net/http.h"
#include "pkg/cache.h"
#include "cfgload.h"
#include "fetch_cache.h"
#include "opts.h"
#include "tooling.h"

/* --allow-host entries; a handful covers a download host and its CDN. */
#define FETCH_ALLOW_MAX 16

struct fetch_opts {
	const char *url;
	const char *output;
	int quiet;
	struct digest want;
	int have_digest;
	struct http_limits limits;
	const char *headers[HTTP_REQ_HEADERS_MAX];
	int nheaders;
	/* Hosts a redirect may lead to besides the URL's own. */
	const char *allow[FETCH_ALLOW_MAX];
	int nallow;
	char first_host[HTTP_HOST_MAX];
};

static int
set_digest(void *dst, const struct opt *opt, const char *arg, struct err *e)
{
	struct fetch_opts *o = dst;

	if (o->have_digest)
		return err_set(e, "usage", "give exactly one of --sha256, --sha512, --integrity");
	o->have_digest = 1;
	if (opt->name[1] == 'h')
		return digest_parse_hex(opt->name[3] == '2' ? DIGEST_SHA256 : DIGEST_SHA512, arg, &o->want,
		                        "usage", e);
	if (digest_parse_sri(arg, &o->want, "usage", e) != 0)
		return -1;
	if (o->want.alg == DIGEST_SHA1)
		return err_set(e, "usage",
		               "--integrity: sha1 is too weak to pin a download; use sha256 or sha512");
	return 0;
}

/* "-" is stdout, as for curl and wget. */
static int
set_output(void *dst, const struct opt *opt, const char *arg, struct err *e)
{
	((struct fetch_opts *)dst)->output = strcmp(arg, "-") == 0 ? NULL : arg;
	return 0;
}

static int
add_header(void *dst, const struct opt *opt, const char *arg, struct err *e)
{
	struct fetch_opts *o = dst;

	if (o->nheaders == HTTP_REQ_HEADERS_MAX)
		return err_set(e, "usage", "at most %d headers", HTTP_REQ_HEADERS_MAX);
	o->headers[o->nheaders++] = arg;
	return 0;
}

static int
add_allow(void *dst, const struct opt *opt, const char *arg, struct err *e)
{
	struct fetch_opts *o = dst;

	if (o->nallow == FETCH_ALLOW_MAX)
		return err_set(e, "usage", "at most %d --allow-host", FETCH_ALLOW_MAX);
	o->allow[o->nallow++] = arg;
	return 0;
}

/* Seconds with decimals, 0 .. 7 days, into the int milliseconds at off. */
static int
set_ms(void *dst, const struct opt *opt, const char *arg, struct err *e)
{
	const char *end;
	double v;
	int ms;

	if (dec_parse(arg, &end, &v) != 0 || *end != '\0' || !(v >= 0) || v > 86400.0 * 7)
		return err_set(e, "usage", "bad value '%s' for --%s", arg, opt->name);
	ms = (int)(v * 1000 + 0.5);
	memcpy((char *)dst + opt->off, &ms, sizeof(ms));
	return 0;
}

/* A byte count into the int64_t at off. */
static int
set_bytes(void *dst, const struct opt *opt, const char *arg, struct err *e)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(arg, &end, 10);
	if (end == arg || *end != '\0' || v < 0 || errno != 0)
		return err_set(e, "usage", "bad value '%s' for --%s", arg, opt->name);
	memcpy((char *)dst + opt->off, &(int64_t){v}, sizeof(int64_t));
	return 0;
}

#define O(f) offsetof(struct fetch_opts, f)
static const struct opt options[] = {
    OPT(0, "sha256", "HEX", set_digest, 0),
    OPT(0, "sha512", "HEX", set_digest, 0),
    OPT(0, "integrity", "SRI", set_digest, 0),
    OPT('o', "output", "FILE", set_output, 0),
    OPT('q', "quiet", NULL, NULL, O(quiet)),
    OPT('H', "header", "'NAME: VALUE'", add_header, 0),
    OPT(0, "allow-host", "HOST", add_allow, 0),
    OPT(0, "connect-timeout", "S", set_ms, O(limits.connect_ms)),
    OPT(0, "read-timeout", "S", set_ms, O(limits.read_ms)),
    OPT(0, "max-time", "S", set_ms, O(limits.total_ms)),
    OPT(0, "min-rate", "BYTES", set_bytes, O(limits.min_rate)),
    OPT(0, "rate-window", "S", set_ms, O(limits.rate_window_ms)),
    OPT(0, "max-size", "BYTES", set_bytes, O(limits.max_body)),
    OPT_END,
};
#undef O

static const struct opts usage = {
    "fetch", "fetch.txt", options, 1, EXIT_USAGE, &fetch_cache_usage,
};

/* ---- Temporary file, removed on any failure or signal ---------------- */

static char tmp_path[PATH_MAX];
static volatile sig_atomic_t tmp_live;

static void
on_signal(int sig)
{
	if (tmp_live)
		unlink(tmp_path);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
tmp_remove(void)
{
	if (tmp_live) {
		unlink(tmp_path);
		tmp_live = 0;
	}
}

/* Where the verified body goes. */
enum out_kind {
	OUT_STDOUT, /* no -o, or -o - */
	OUT_FILE,   /* a new name or a regular file: temporary file, rename */
	OUT_NODE,   /* a FIFO or device: written in place through open() */
};

/* Classify -o. A regular file (or a new name) is replaced by rename;
 * through a symlink the file it names is, so the link stays (-o
 * /dev/stdout with stdout on a file): *path is then the resolved name. A
 * node that is no regular file (a FIFO, a character or block device, or a
 * symlink to one: /dev/stdout on a pipe or a terminal) is written in place,
 * never replaced (as root, a rename over /dev/null or /dev/stdout would
 * replace the node itself). A directory, a socket and a symlink to nothing
 * are refused. */
static int
out_classify(const char *out, char *path, size_t cap, enum out_kind *kind, struct err *e)
{
	struct stat st, lst;

	*kind = OUT_STDOUT;
	if (out == NULL)
		return 0;
	*kind = OUT_FILE;
	if (snprintf(path, cap, "%s", out) >= (int)cap)
		return err_set(e, "usage", "-o path too long");
	if (stat(out, &st) != 0) {
		/* a new name; but a symlink is never replaced, not even one to
		 * nothing (/dev/stdout while stdout is closed) */
		if (lstat(out, &lst) == 0 && S_ISLNK(lst.st_mode))
			return err_set(e, "usage",
			               "-o %s is a symlink to nothing that exists; fetch never replaces a "
			               "symlink: name the file it should write",
			               out);
		return 0;
	}
	if (S_ISDIR(st.st_mode) || S_ISSOCK(st.st_mode))
		return err_set(e, "usage", "-o %s is a %s; name a file, a FIFO or a device, or - for stdout",
		               out, S_ISDIR(st.st_mode) ? "directory" : "socket");
	if (!S_ISREG(st.st_mode)) {
		*kind = OUT_NODE;
		return 0;
	}
	if (lstat(out, &lst) == 0 && S_ISLNK(lst.st_mode)) {
		char real[PATH_MAX];

		if (realpath(out, real) == NULL)
			return err_sys(e, "io.error", errno, "-o %s: cannot resolve the symlink: %s", out,
			               strerror(errno));
		if (snprintf(path, cap, "%s", real) >= (int)cap)
			return err_set(e, "usage", "-o path too long");
	}
	return 0;
}

/* Beside out ("dir/.name.abx-XXXXXX") so the final rename stays on one
 * filesystem; or, for stdout and nodes (out NULL), in $TMPDIR and unlinked
 * at once. */
static int
tmp_open(const char *out, struct err *e)
{
	const char *slash, *base, *tdir;
	int fd;

	if (out != NULL) {
		slash = strrchr(out, '/');
		base = slash ? slash + 1 : out;
		if (*base == '\0')
			return err_set(e, "usage", "-o %s names a directory", out);
		if (snprintf(tmp_path, sizeof(tmp_path), "%.*s.%s.abx-XXXXXX",
		             slash ? (int)(slash - out + 1) : 0, out, base) >= (int)sizeof(tmp_path))
			return err_set(e, "usage", "-o path too long");
	} else {
		tdir = config_env("TMPDIR");
		if (tdir == NULL || *tdir == '\0')
			tdir = "/tmp";
		if (snprintf(tmp_path, sizeof(tmp_path), "%s/abx-fetch-XXXXXX", tdir) >=
		    (int)sizeof(tmp_path))
			return err_set(e, "io.error", "TMPDIR too long");
	}
	fd = mkostemp(tmp_path, O_CLOEXEC);
	if (fd < 0)
		return err_sys(e, "io.error", errno, "cannot create a temporary file %s: %s", tmp_path,
		               strerror(errno));
	if (out == NULL)
		unlink(tmp_path);
	else
		tmp_live = 1;
	return fd;
}

/* ---- Progress ------------------------------------------------------------ */

/* How often a plain progress line is printed when stderr is not a terminal. */
#define PROGRESS_PLAIN_MS 5000
#define PROGRESS_TTY_MS 100

struct sink {
	int fd;
	struct cache_pipe *pipe; /* hashes and writes on a second thread */
	const struct http_response *rs;
	int quiet, tty;
	int64_t start_ms, last_ms;
	int drawn;
};

static void
progress(struct sink *s, int final)
{
	char line[256];
	int64_t now = clock_ms(), el;
	int64_t have = s->rs->body_bytes, total = s->rs->content_length;
	int n;

	if (s->quiet || now - s->last_ms < (s->tty ? PROGRESS_TTY_MS : PROGRESS_PLAIN_MS))
		if (!final)
			return;
	if (!s->tty && final)
		return;
	s->last_ms = now;
	el = now - s->start_ms;
	n = progress_format(line, sizeof(line), s->tty ? "" : "fetch", (uint64_t)have,
	                    total > 0 ? (uint64_t)total : 0,
	                    el > 0 ? (uint64_t)have * 1000 / (uint64_t)el : 0, "", s->tty, final);
	if (write(2, line, (size_t)n) < 0)
		return;
	s->drawn = 1;
}

static int
sink_write(void *arg, const void *buf, size_t len, struct err *e)
{
	struct sink *s = arg;

	if (cache_pipe_write(s->pipe, buf, len) < 0)
		return err_sys(e, "io.error", errno, "write %s: %s", tmp_path, strerror(errno));
	progress(s, 0);
	return 0;
}

/* ---- Mismatch report ----------------------------------------------------- */

/* The body starts like an HTML or JSON page (a login wall, a proxy error,
 * an API error) rather than an artifact. */
static int
looks_like_page(const unsigned char *p, size_t n)
{
	size_t i = 0;

	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
		i++;
	if (i == n)
		return 0;
	if (p[i] == '{' || p[i] == '[')
		return 1;
	return n - i >= 5 && (strncasecmp((const char *)p + i, "<!doc", 5) == 0 ||
	                      strncasecmp((const char *)p + i, "<html", 5) == 0 ||
	                      strncasecmp((const char *)p + i, "<?xml", 5) == 0 ||
	                      strncasecmp((const char *)p + i, "<head", 5) == 0);
}

static void
report_mismatch(const char *url, const struct digest *want, const struct digest *got,
                const struct http_response *rs)
{
	char buf[2048], wh[DIGEST_HEX_MAX], gh[DIGEST_HEX_MAX], snip[128];
	const struct err_info *in = err_info("install.checksum_mismatch");
	size_t i, k = 0;
	int n;

	n = snprintf(buf, sizeof(buf),
	             "agent-sandbox-server: install.checksum_mismatch: %.300s: expected %s %s, got %s\n"
	             "  bytes received: %lld%s%s%s\n",
	             url, digest_name(want->alg), digest_hex(want, wh), digest_hex(got, gh),
	             (long long)rs->body_bytes, rs->content_type[0] ? " (Content-Type: " : "",
	             rs->content_type, rs->content_type[0] ? ")" : "");
	if (looks_like_page(rs->snippet, rs->snippet_len)) {
		for (i = 0; i < rs->snippet_len && k < 100; i++) {
			unsigned char ch = rs->snippet[i];
			snip[k++] = ch >= 0x20 && ch < 0x7f ? (char)ch : ' ';
		}
		snip[k] = '\0';
		n += snprintf(buf + n, sizeof(buf) - n, "  the body looks like an error page: %s\n", snip);
	}
	n += snprintf(buf + n, sizeof(buf) - n, "  fix: %s\n", in->remedy);
	if (n > (int)sizeof(buf))
		n = sizeof(buf);
	if (write(2, buf, (size_t)n) < 0)
		return;
}

/* ---- The single-file download ------------------------------------------ */

/* The verified body in fd, from its start, to ofd (stdout or a node that
 * -o names, called name in errors). */
static int
copy_out(int fd, int ofd, const char *name, struct err *e)
{
	char buf[65536];
	ssize_t r;

	if (lseek(fd, 0, SEEK_SET) != 0)
		return err_sys(e, "io.error", errno, "seek: %s", strerror(errno));
	while ((r = read(fd, buf, sizeof(buf))) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return err_sys(e, "io.error", errno, "read back: %s", strerror(errno));
		if (fs_write_all(ofd, buf, (size_t)r, -1) != 0)
			return err_sys(e, "io.error", errno, "%s: %s", name, strerror(errno));
	}
	return 0;
}

/* Copy the verified body to the FIFO or device path names, opened only
 * now: a FIFO's reader sees nothing before verification (and open waits
 * for one, as a shell's redirection does). */
static int
copy_to_node(int fd, const char *path, struct err *e)
{
	int ofd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC), rc;

	if (ofd < 0)
		return err_sys(e, "io.error", errno, "open %s: %s", path, strerror(errno));
	rc = copy_out(fd, ofd, path, e);
	if (close(ofd) != 0 && rc == 0)
		return err_sys(e, "io.error", errno, "%s: %s", path, strerror(errno));
	return rc;
}

static int
publish(int fd, const char *out, struct err *e)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(out, '/');
	mode_t um = umask(0);
	int dfd;

	umask(um);
	if (fchmod(fd, 0666 & ~um) != 0 || fsync(fd) != 0)
		return err_sys(e, "io.error", errno, "%s: %s", tmp_path, strerror(errno));
	if (rename(tmp_path, out) != 0)
		return err_sys(e, "io.error", errno, "rename to %s: %s", out, strerror(errno));
	tmp_live = 0;
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - out) + (slash == out) : 1,
	         slash ? out : ".");
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

/* The URL's own host and --allow-host: a refused hop says how to allow it. */
static int
fetch_host_ok(void *arg, const struct http_url *u, struct err *e)
{
	size_t n;

	if (hostrule_check(arg, u, e) == 0)
		return 0;
	if (e != NULL && (n = strlen(e->msg)) < sizeof(e->msg))
		snprintf(e->msg + n, sizeof(e->msg) - n,
		         "\n  fix: if that host is trusted, add --allow-host %s (without --allow-host a "
		         "redirect may lead only to the URL's own host)",
		         u->host);
	return -1;
}

static int
fetch_one(const struct fetch_opts *o)
{
	struct http_client *cl;
	struct http_request rq;
	struct hostrule hr;
	const char *first[1] = {o->first_host};
	struct http_response *rs;
	struct sink s;
	struct digest got;
	struct err e = {0};
	char hex[DIGEST_HEX_MAX], h1[32], path[PATH_MAX];
	enum out_kind kind;
	int fd = -1, rc = EXIT_FAIL;

	err_clear(&e);
	rs = calloc(1, sizeof(*rs));
	if (rs == NULL) {
		err_set(&e, "internal", "out of memory");
		return fail(&e);
	}
	cl = config_http_client(&e);
	if (cl == NULL) {
		free(rs);
		return fail(&e);
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	memset(&s, 0, sizeof(s));
	if (out_classify(o->output, path, sizeof(path), &kind, &e) != 0)
		goto out;
	fd = tmp_open(kind == OUT_FILE ? path : NULL, &e);
	if (fd < 0)
		goto out;
	s.fd = fd;
	s.rs = rs;
	s.quiet = o->quiet;
	s.tty = isatty(2);
	s.start_ms = s.last_ms = clock_ms();
	s.pipe = cache_pipe_new(fd, o->have_digest ? o->want.alg : DIGEST_SHA256, DIGEST_NONE);
	if (s.pipe == NULL) {
		err_set(&e, "internal", "out of memory");
		goto out;
	}
	http_request_init(&rq, o->url);
	rq.limits = o->limits;
	rq.sink = sink_write;
	rq.sink_arg = &s;
	/* the URL's own host (any port), then only --allow-host ones */
	hostrule_init(&hr, 0, "--allow-host");
	hostrule_add(&hr, first, 1);
	hostrule_add(&hr, o->allow, o->nallow);
	rq.host_ok = fetch_host_ok;
	rq.host_arg = &hr;
	memcpy(rq.headers, o->headers, sizeof(rq.headers));
	rq.nheaders = o->nheaders;
	if (http_request(cl, &rq, rs, &e) != 0) {
		if (s.drawn && s.tty)
			(void)!write(2, "\n", 1);
		goto out;
	}
	progress(&s, 1);
	rc = cache_pipe_finish(s.pipe, &got, NULL);
	s.pipe = NULL;
	if (rc < 0) {
		err_sys(&e, "io.error", errno, "write %s: %s", tmp_path, strerror(errno));
		goto out;
	}
	rc = EXIT_FAIL;
	if (o->have_digest && !digest_equal(&got, &o->want)) {
		tmp_remove();
		report_mismatch(rs->url, &o->want, &got, rs);
		rc = EXIT_FAIL;
		e.code = NULL;
		goto done;
	}
	if (!o->have_digest)
		warnx_line("UNPINNED download %s: sha256 %s (pin it: --sha256 %s)", rs->url,
		           digest_hex(&got, hex), hex);
	if (kind == OUT_FILE) {
		if (publish(fd, path, &e) != 0)
			goto out;
	} else if (kind == OUT_NODE) {
		if (copy_to_node(fd, path, &e) != 0)
			goto out;
	} else if (copy_out(fd, 1, "stdout", &e) != 0) {
		goto out;
	}
	if (!o->quiet) {
		human_bytes((uint64_t)rs->body_bytes, h1, sizeof(h1));
		fprintf(stderr, "fetch: %s: %s verified (%s %s)%s%s\n", rs->url, h1, digest_name(got.alg),
		        digest_hex(&got, hex), o->output ? " -> " : "", o->output ? o->output : "");
	}
	rc = EXIT_OK;
	goto done;
out:
	tmp_remove();
	rc = fail(&e);
done:
	cache_pipe_free(s.pipe);
	if (fd >= 0)
		close(fd);
	tmp_remove();
	http_client_free(cl);
	free(rs);
	return rc;
}

int
fetch_main(int argc, char **argv)
{
	static struct config cfg;
	struct fetch_opts o;
	struct err e = {0};
	const char *env;
	int rc, n;

	if (fetch_cache_wanted(argc, argv)) {
		static struct tooling flags;
		char *names[FETCH_CACHE_MAX];
		struct fetch_cache_args ca;
		rc = fetch_cache_options(argc, argv, &flags, &ca, names);
		return rc >= 0 ? rc : fetch_cache(&ca);
	}
	memset(&o, 0, sizeof(o));
	err_clear(&e);
	http_limits_default(&o.limits);
	if ((rc = opts_parse(&usage, argc, argv, &o, &n)) >= 0)
		return rc;
	o.url = argv[1];
	if (o.url == NULL)
		return opts_error(&usage, "a URL is required");
	if (o.limits.connect_ms <= 0 || o.limits.read_ms <= 0)
		return opts_error(&usage, "timeouts must be positive");
	{
		struct http_url u;
		/* A URL we refuse is a bad argument: exit 2 like other usage errors. */
		if (http_url_parse(o.url, &u, &e) != 0) {
			err_print(&e);
			return EXIT_USAGE;
		}
		snprintf(o.first_host, sizeof(o.first_host), "%s", u.host);
	}
	if (!o.have_digest) {
		env = config_env("ABX_INSTALL_UNPINNED");
		if (env == NULL || strcmp(env, "1") != 0)
			return opts_error(&usage, "a digest is required (--sha256, --sha512 or --integrity); "
			                          "ABX_INSTALL_UNPINNED=1 allows an unpinned download");
		/* production is the configuration's (file or ABX_SERVER_ENV) */
		if (cfgload_config(&cfg, NULL, NULL, 1, &e) != 0) {
			err_print(&e);
			return EXIT_USAGE;
		}
		if (config_production(&cfg)) {
			err_printf("usage", "unpinned downloads are refused in production (environment, "
			                    "ABX_SERVER_ENV)");
			return EXIT_USAGE;
		}
		if (strncasecmp(o.url, "https://", 8) != 0) {
			err_printf("usage", "an unpinned download must use https://");
			return EXIT_USAGE;
		}
		warnx_line("*** ABX_INSTALL_UNPINNED=1: downloading %s WITHOUT a pinned digest; "
		           "its content is not verified ***",
		           o.url);
	}
	return fetch_one(&o);
}
