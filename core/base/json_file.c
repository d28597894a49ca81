/*
 * JSON from a file (json_parse_file: bounded read, the path in front of
 * every error) and errors that point at a value's line and column.
 */
#include "base/json.h"
#include "base/buf.h"
#include "base/fs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Put "path:" in front of e->msg: "path:line:col: ..." or "path: ...". */
static int
prefix_path(struct err *e, const char *path)
{
	if (e == NULL)
		return -1;
	return err_set(e, e->code, "%s:%s%s", path, e->msg[0] >= '0' && e->msg[0] <= '9' ? "" : " ", e->msg);
}

/* The first read buffer for a file whose size is unknown (a pipe). */
#define JSON_FILE_CHUNK 4096

int
json_parse_file(struct json_doc *doc, const char *path, const struct json_limits *lim, struct err *e)
{
	struct stat st;
	struct buf b;
	size_t want, bound;
	unsigned char *at;
	ssize_t n;
	int fd, rc;

	doc->root = NULL;
	doc->arena = NULL;
	if (lim == NULL)
		lim = &json_default_limits;
	/* One byte past max_bytes tells a file over the limit; the buffer's
	 * ceiling leaves room for its NUL. */
	bound = lim->max_bytes < SIZE_MAX / 2 ? lim->max_bytes + 1 : SIZE_MAX / 2;
	/* Every file parsed here is an operator's input: links followed, a
	 * FIFO refused instead of blocking the open forever. */
	fd = fs_open_input(path, &st, e);
	if (fd < 0) {
		if (e != NULL && e->code != NULL && strcmp(e->code, "not_found") == 0)
			err_sys(e, "io.error", ENOENT, "%s: %s", path, strerror(ENOENT));
		return -1;
	}
	if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size > lim->max_bytes) {
		close(fd);
		return err_set(e, "json.too_large", "%s: %jd bytes, over the limit of %zu", path,
		               (intmax_t)st.st_size, lim->max_bytes);
	}
	/* Read until want bytes are held, then double it. One byte more than
	 * the size first, so a file that grew since fstat is noticed; never
	 * more than bound. */
	want = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : JSON_FILE_CHUNK;
	if (want > bound)
		want = bound;
	b = (struct buf)BUF_INIT(bound);
	for (;;) {
		if (b.len == want) {
			if (want >= bound) {
				buf_free(&b);
				close(fd);
				return err_set(e, "json.too_large", "%s: more than %zu bytes", path,
				               lim->max_bytes);
			}
			want = want > bound / 2 ? bound : want * 2;
		}
		/* Within bound, so NULL is only memory running out. */
		at = buf_room(&b, want - b.len);
		if (at == NULL) {
			buf_free(&b);
			close(fd);
			return err_set(e, "internal", "%s: out of memory", path);
		}
		n = read(fd, at, want - b.len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = errno;
			buf_free(&b);
			close(fd);
			return err_sys(e, "io.error", rc, "%s: %s", path, strerror(rc));
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
	}
	close(fd);
	rc = json_parse(doc, (const char *)b.p, b.len, lim, e);
	buf_free(&b);
	if (rc < 0)
		return prefix_path(e, path);
	return 0;
}

int
json_verr_at(struct err *e, const char *code, const char *file, const struct json_val *v, const char *fmt,
             va_list ap)
{
	char msg[ERR_MSG_MAX];

	err_fmtv(msg, sizeof(msg), fmt, ap);
	return err_set(e, code, "%s (%s:%d:%d)", msg, file, v ? v->line : 0, v ? v->col : 0);
}

int
json_err_at(struct err *e, const char *code, const char *file, const struct json_val *v, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	json_verr_at(e, code, file, v, fmt, ap);
	va_end(ap);
	return -1;
}
