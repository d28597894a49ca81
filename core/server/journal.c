/*
 * Session journals: JSON lines in memory, mirrored to a file.
 */
#include "server/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/json.h"

/* A journal file is at most the largest per-session byte limit serve
 * accepts plus its header and the terminal events; anything bigger was not
 * written by us. */
#define JOURNAL_FILE_MAX (300u << 20)

static int
id_ok(const char *id)
{
	size_t i, n = strlen(id);

	if (n == 0 || n >= JOURNAL_ID_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
		      (id[i] >= '0' && id[i] <= '9') || id[i] == '-' || id[i] == '_'))
			return 0;
	return 1;
}

static void
init(struct journal *j)
{
	memset(j, 0, sizeof(*j));
	j->fd = -1;
	j->dfd = AT_FDCWD;
	j->name_at = 0;
	j->b.max = UINT32_MAX;
	j->offs.max = (size_t)JOURNAL_LINES_MAX * sizeof(uint32_t);
}

/* The start of line i + 1 in j->b. */
#define OFF(j) ((uint32_t *)(void *)(j)->offs.p)

/* Count len more bytes and nl more lines, written in the room reserve_n
 * made, as the journal's. */
static void
grow_by(struct journal *j, size_t len, uint32_t nl)
{
	j->b.len += len;
	j->offs.len += (size_t)nl * sizeof(uint32_t);
	j->n += nl;
}

/* The file is not written any more: say once which one and why (a
 * journal's owner serialises its writes, so no other line comes between). */
static void
write_failed(struct journal *j)
{
	int err = errno;

	j->write_failed = 1;
	warnx_line("io.error: %s: %s: the rest of session %s's journal is kept in memory only", j->path,
	           strerror(err), j->id);
}

/* Where the file is: path for messages, name under dfd for the calls. */
static int
place(struct journal *j, int dfd, const char *dir, const char *name)
{
	if (fs_path_join(j->path, sizeof(j->path), dir, name, NULL) != 0)
		return -1;
	j->dfd = dfd;
	j->name_at = dfd == AT_FDCWD ? 0 : strlen(j->path) - strlen(name);
	return 0;
}

int
journal_create(struct journal *j, const char *dir, const char *id, const char *header, struct err *e)
{
	return journal_create_at(j, AT_FDCWD, dir, id, header, e);
}

int
journal_create_at(struct journal *j, int dfd, const char *dir, const char *id, const char *header,
                  struct err *e)
{
	size_t hl = strlen(header);
	char *line, name[JOURNAL_ID_MAX + 8];

	init(j);
	if (!id_ok(id))
		return err_set(e, "request.invalid", "journal id %s: expected [A-Za-z0-9_-]", id);
	if (hl >= JOURNAL_HEADER_MAX || memchr(header, '\n', hl) != NULL)
		return err_set(e, "internal", "journal header too long or not one line");
	snprintf(j->id, sizeof(j->id), "%s", id);
	j->header = strdup(header);
	if (j->header == NULL)
		return err_set(e, "internal", "out of memory");
	if (dir == NULL)
		return 0;
	snprintf(name, sizeof(name), "%s.jsonl", id);
	if (place(j, dfd, dir, name) != 0) {
		journal_close(j, 0);
		return err_set(e, "io.error", "%s: path too long", dir);
	}
	j->fd = openat(j->dfd, j->path + j->name_at,
	               O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (j->fd < 0) {
		err_sys(e, "io.error", errno, "%s: %s", j->path, strerror(errno));
		j->path[0] = '\0';
		journal_close(j, 0);
		return -1;
	}
	line = malloc(hl + 1);
	if (line == NULL) {
		journal_close(j, 1);
		return err_set(e, "internal", "out of memory");
	}
	memcpy(line, header, hl);
	line[hl] = '\n';
	if (fs_write_all(j->fd, line, hl + 1, -1) != 0) {
		err_sys(e, "io.error", errno, "%s: %s", j->path, strerror(errno));
		free(line);
		journal_close(j, 1);
		return -1;
	}
	free(line);
	return 0;
}

/* Room for len more bytes and nl more lines; 0 or -1 (a failure is not
 * sticky: a later, smaller line may still fit). */
static int
reserve_n(struct journal *j, size_t len, uint32_t nl)
{
	if (nl > JOURNAL_LINES_MAX - j->n || buf_room(&j->b, len) == NULL ||
	    buf_room(&j->offs, (size_t)nl * sizeof(uint32_t)) == NULL) {
		j->b.over = j->offs.over = 0;
		return -1;
	}
	return 0;
}

/* Room for len more bytes and one more line; 0 or -1. */
static int
reserve(struct journal *j, size_t len)
{
	return reserve_n(j, len, 1);
}

/* Add a line to memory (no file write). */
static int
add_mem(struct journal *j, const char *line, size_t len)
{
	j->resv = 0;
	if (reserve(j, len + 1) != 0)
		return -1;
	OFF(j)[j->n] = (uint32_t)j->b.len;
	memcpy(j->b.p + j->b.len, line, len);
	j->b.p[j->b.len + len] = '\n';
	grow_by(j, len + 1, 1);
	return 0;
}

int64_t
journal_append(struct journal *j, const char *line, size_t len, struct err *e)
{
	if (len == 0 || len >= JOURNAL_LINE_MAX || memchr(line, '\n', len) != NULL)
		return err_set(e, "request.too_large", "journal line of %zu bytes", len);
	if (add_mem(j, line, len) != 0)
		return err_set(e, "internal", "journal %s: out of memory or lines", j->id);
	if (!j->defer)
		journal_flush(j);
	return j->n;
}

char *
journal_reserve(struct journal *j, size_t len)
{
	if (len >= JOURNAL_LINE_MAX || reserve(j, len + 1) != 0)
		return NULL;
	j->resv = len;
	return (char *)j->b.p + j->b.len;
}

int64_t
journal_commit(struct journal *j, size_t len, struct err *e)
{
	size_t room = j->resv;
	char *line;

	/* journal_reserve made room for room + 1 bytes and one more line. */
	j->resv = 0;
	if (len == 0 || len > room || memchr(j->b.p + j->b.len, '\n', len) != NULL)
		return err_set(e, "request.too_large", "journal line of %zu bytes", len);
	line = (char *)j->b.p + j->b.len;
	OFF(j)[j->n] = (uint32_t)j->b.len;
	line[len] = '\n';
	grow_by(j, len + 1, 1);
	if (!j->defer)
		journal_flush(j);
	return j->n;
}

uint32_t
journal_reserve_lines(struct journal *j, size_t len, uint32_t n)
{
	if (n > JOURNAL_LINES_MAX - j->n)
		n = JOURNAL_LINES_MAX - j->n;
	j->resv = 0;
	if (n == 0 || reserve_n(j, len, n) != 0)
		return 0;
	return n;
}

int
journal_prewrite(struct journal *j, const char *buf, size_t len)
{
	if (j->flushed != j->b.len)
		return 0;
	if (j->fd >= 0 && !j->write_failed && fs_write_all(j->fd, buf, len, -1) != 0)
		write_failed(j);
	return 1;
}

int64_t
journal_append_lines(struct journal *j, const char *buf, size_t len, const uint32_t *off, uint32_t n,
                     int prewritten)
{
	uint32_t k;

	/* journal_reserve_lines made the room (each buffer keeps one byte
	 * for its NUL). */
	if ((size_t)n * sizeof(uint32_t) >= j->offs.cap - j->offs.len || len >= j->b.cap - j->b.len)
		return -1;
	memcpy(j->b.p + j->b.len, buf, len);
	for (k = 0; k < n; k++)
		OFF(j)[j->n + k] = (uint32_t)j->b.len + off[k];
	grow_by(j, len, n);
	if (prewritten)
		j->flushed = j->b.len;
	else if (!j->defer)
		journal_flush(j);
	return j->n;
}

void
journal_flush(struct journal *j)
{
	if (j->flushed >= j->b.len)
		return;
	if (j->fd >= 0 && !j->write_failed &&
	    fs_write_all(j->fd, (const char *)j->b.p + j->flushed, j->b.len - j->flushed, -1) != 0)
		write_failed(j);
	j->flushed = j->b.len;
}

const char *
journal_line(const struct journal *j, uint32_t k, size_t *len)
{
	uint32_t end;

	if (k == 0 || k > j->n)
		return NULL;
	end = k < j->n ? OFF(j)[k] : (uint32_t)j->b.len;
	*len = end - OFF(j)[k - 1] - 1;
	return (const char *)j->b.p + OFF(j)[k - 1];
}

/* Whether text[0..n) is one JSON object. */
static int
is_object(const char *text, size_t n)
{
	struct json_limits lim = json_default_limits;
	struct json_doc doc;
	struct err e = {0};
	int ok;

	lim.max_bytes = JOURNAL_LINE_MAX;
	lim.max_depth = 8;
	lim.reject_dup_keys = 1;
	if (json_parse(&doc, text, n, &lim, &e) != 0)
		return 0;
	ok = doc.root->type == JSON_OBJECT;
	json_free(&doc);
	return ok;
}

/* Load the file under j->dfd (j->path names it); base is its file name. */
static int
load(struct journal *j, const char *base, struct err *e)
{
	const char *path = j->path;
	struct stat st;
	char *text = NULL, *p, *nl, *end;
	size_t got = 0, keep;
	ssize_t k;
	int fd;

	if ((size_t)snprintf(j->id, sizeof(j->id), "%s", base) >= sizeof(j->id))
		return err_set(e, "io.error", "%s: name too long", path);
	if ((p = strstr(j->id, ".jsonl")) == NULL || p[6] != '\0')
		return err_set(e, "io.error", "%s: not a .jsonl file", path);
	*p = '\0';
	if (!id_ok(j->id))
		return err_set(e, "io.error", "%s: not a journal name", path);
	fd = openat(j->dfd, j->path + j->name_at, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return err_sys(e, "io.error", errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > JOURNAL_FILE_MAX) {
		close(fd);
		return err_set(e, "io.error", "%s: not a regular file of at most %u bytes", path,
		               JOURNAL_FILE_MAX);
	}
	text = malloc((size_t)st.st_size + 1);
	if (text == NULL) {
		close(fd);
		return err_set(e, "internal", "out of memory");
	}
	while (got < (size_t)st.st_size) {
		k = read(fd, text + got, (size_t)st.st_size - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	text[got] = '\0';
	end = text + got;
	nl = memchr(text, '\n', got);
	if (nl == NULL || !is_object(text, (size_t)(nl - text))) {
		free(text);
		close(fd);
		return err_set(e, "json.syntax", "%s: the first line is not a journal header", path);
	}
	j->header = strndup(text, (size_t)(nl - text));
	if (j->header == NULL) {
		free(text);
		close(fd);
		return err_set(e, "internal", "out of memory");
	}
	keep = (size_t)(nl + 1 - text);
	for (p = nl + 1; p < end; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			break; /* a partial last line: cut off by a crash */
		if (nl - p >= (ptrdiff_t)JOURNAL_LINE_MAX || !is_object(p, (size_t)(nl - p)))
			break; /* what follows a bad line cannot be trusted to be in order */
		if (add_mem(j, p, (size_t)(nl - p)) != 0) {
			free(text);
			close(fd);
			journal_close(j, 0);
			return err_set(e, "internal", "out of memory");
		}
		keep = (size_t)(nl + 1 - text);
	}
	free(text);
	if (keep < got && ftruncate(fd, (off_t)keep) != 0) {
		close(fd);
		journal_close(j, 0);
		return err_sys(e, "io.error", errno, "%s: cannot cut the partial tail: %s", path,
		               strerror(errno));
	}
	j->fd = fd;
	j->flushed = j->b.len;
	return 0;
}

int
journal_load(struct journal *j, const char *path, struct err *e)
{
	const char *base = strrchr(path, '/');

	init(j);
	if ((size_t)snprintf(j->path, sizeof(j->path), "%s", path) >= sizeof(j->path))
		return err_set(e, "io.error", "%s: path too long", path);
	return load(j, base != NULL ? base + 1 : path, e);
}

int
journal_load_at(struct journal *j, int dfd, const char *dir, const char *name, struct err *e)
{
	init(j);
	if (place(j, dfd, dir, name) != 0)
		return err_set(e, "io.error", "%s/%s: path too long", dir, name);
	return load(j, name, e);
}

void
journal_close(struct journal *j, int unlink_file)
{
	if (j->fd >= 0)
		close(j->fd);
	if (unlink_file && j->path[0] != '\0')
		unlinkat(j->dfd, j->path + j->name_at, 0);
	free(j->header);
	buf_free(&j->b);
	buf_free(&j->offs);
	j->header = NULL;
	j->fd = -1;
	j->n = 0;
	j->flushed = 0;
}
