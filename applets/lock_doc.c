/*
 * The manifest text lock edits (struct doc: loaded, changed where the
 * values stand, rendered back) and the file and download helpers both of
 * lock's sources use: the bottom of lock's files, calling neither
 * applets/lock.c nor applets/lock_npm.c.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "net/hostrule.h"
#include "net/http.h"
#include "base/json.h"
#include "pkg/manifests_embed.h"
#include "lock.h"

int lock_quiet;

void
lock_say(const char *fmt, ...)
{
	va_list ap;

	if (lock_quiet)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static int
read_embedded(const char *name, size_t max, char **out, size_t *len, struct err *e)
{
	struct embedded_file *f;
	const char *text;

	while (*name == '/')
		name++;
	for (f = embedded_manifests; f->path != NULL; f++)
		if (strcmp(f->path, name) == 0)
			break;
	if (f->path == NULL)
		return err_set(e, "not_found", "%s%s: not embedded in this binary", LOCK_EMBEDDED, name);
	if (f->len > max)
		return err_set(e, "io.error", "%s%s: larger than %zu bytes", LOCK_EMBEDDED, name, max);
	if ((text = embedded_text(f, e)) == NULL)
		return -1;
	if ((*out = malloc(f->len + 1)) == NULL)
		return err_set(e, "internal", "out of memory");
	memcpy(*out, text, f->len);
	(*out)[f->len] = '\0';
	*len = f->len;
	return 0;
}

int
lock_read_file(const char *path, size_t max, char **out, size_t *len, struct err *e)
{
	FILE *f;
	char *b;
	size_t n;

	if (strncmp(path, LOCK_EMBEDDED, strlen(LOCK_EMBEDDED)) == 0)
		return read_embedded(path + strlen(LOCK_EMBEDDED), max, out, len, e);
	if ((f = fopen(path, "rb")) == NULL)
		return err_sys(e, "io.error", errno, "%s: %s", path, strerror(errno));
	b = malloc(max + 1);
	if (b == NULL) {
		fclose(f);
		return err_set(e, "internal", "out of memory");
	}
	n = fread(b, 1, max + 1, f);
	fclose(f);
	if (n > max) {
		free(b);
		return err_set(e, "io.error", "%s: larger than %zu bytes", path, max);
	}
	b[n] = '\0';
	*out = b;
	*len = n;
	return 0;
}

/* Write buf to path through a temporary file and rename. */
int
lock_write_atomic(const char *path, const char *buf, size_t n, struct err *e)
{
	char tmp[PATH_MAX + 32];
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return err_sys(e, "io.error", errno, "%s: %s", tmp, strerror(errno));
	if (write(fd, buf, n) != (ssize_t)n || fsync(fd) != 0 || close(fd) != 0) {
		unlink(tmp);
		return err_sys(e, "io.error", errno, "%s: %s", tmp, strerror(errno));
	}
	if (rename(tmp, path) != 0) {
		unlink(tmp);
		return err_sys(e, "io.error", errno, "%s: %s", path, strerror(errno));
	}
	return 0;
}

int
lock_mkdir_parents(const char *path)
{
	char b[PATH_MAX], *p;

	snprintf(b, sizeof(b), "%s", path);
	for (p = b + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(b, 0755) != 0 && errno != EEXIST)
				return -1;
			*p = '/';
		}
	return 0;
}

/* ---- the manifest text and its edits ---------------------------------- */

int
lock_doc_load(struct doc *d, const char *path, struct err *e)
{
	size_t i;

	memset(d, 0, sizeof(*d));
	snprintf(d->path, sizeof(d->path), "%s", path);
	if (lock_read_file(path, LOCK_MANIFEST_MAX, &d->text, &d->len, e) != 0)
		return -1;
	if (json_parse(&d->j, d->text, d->len, NULL, e) != 0)
		return -1;
	if (d->j.root->type != JSON_OBJECT)
		return err_set(e, "install.manifest_invalid", "%s: not a JSON object", path);
	d->lines = malloc((d->len + 2) * sizeof(size_t));
	if (d->lines == NULL)
		return err_set(e, "internal", "out of memory");
	d->lines[d->nlines++] = 0;
	for (i = 0; i < d->len; i++)
		if (d->text[i] == '\n')
			d->lines[d->nlines++] = i + 1;
	return 0;
}

void
lock_doc_free(struct doc *d)
{
	int i;

	for (i = 0; i < d->ned; i++)
		free(d->ed[i].with);
	json_free(&d->j);
	free(d->text);
	free(d->lines);
}

/* Byte span [start, end) of a string value in the text, quotes included. */
static int
span_of(const struct doc *d, const struct json_val *v, size_t *start, size_t *end)
{
	size_t o, i;

	if (v->line < 1 || (size_t)v->line > d->nlines)
		return -1;
	o = d->lines[v->line - 1] + (size_t)v->col - 1;
	if (o >= d->len || d->text[o] != '"')
		return -1;
	for (i = o + 1; i < d->len; i++) {
		if (d->text[i] == '\\')
			i++;
		else if (d->text[i] == '"')
			break;
	}
	if (i >= d->len)
		return -1;
	*start = o;
	*end = i + 1;
	return 0;
}

int
lock_edit(struct doc *d, size_t start, size_t end, const char *with, struct err *e)
{
	if (d->ned >= LOCK_EDITS_MAX)
		return err_set(e, "internal", "too many edits");
	d->ed[d->ned].start = start;
	d->ed[d->ned].end = end;
	d->ed[d->ned].with = strdup(with);
	if (d->ed[d->ned].with == NULL)
		return err_set(e, "internal", "out of memory");
	d->ned++;
	return 0;
}

/* Replace string value v by s (JSON-escaped here). */
int
lock_set_string(struct doc *d, const struct json_val *v, const char *s, struct err *e)
{
	char q[4096];
	size_t a, b;

	if (v == NULL || v->type != JSON_STRING || span_of(d, v, &a, &b) != 0)
		return err_set(e, "install.manifest_invalid", "%s: cannot locate a string value to edit",
		               d->path);
	if (json_escape(q, sizeof(q), s) < 0)
		return err_set(e, "internal", "value too long");
	if (b - a == strlen(q) && memcmp(d->text + a, q, b - a) == 0)
		return 0; /* unchanged: no edit, no diff */
	return lock_edit(d, a, b, q, e);
}

/* Insert `, "key": "value"` after string value after (same indentation as
 * the line that holds it). */
int
lock_insert_after(struct doc *d, const struct json_val *after, const char *key, const char *value,
                  struct err *e)
{
	char ins[1024], k[256], v[512];
	size_t a, b, ls, ind = 0;

	if (span_of(d, after, &a, &b) != 0)
		return err_set(e, "install.manifest_invalid", "%s: cannot locate where to add %s", d->path,
		               key);
	ls = d->lines[after->line - 1];
	while (ls + ind < d->len && (d->text[ls + ind] == ' ' || d->text[ls + ind] == '\t'))
		ind++;
	/* The document keeps its own layout: only the strings come from the
	 * writer's escaping. */
	if (json_escape(k, sizeof(k), key) < 0 || json_escape(v, sizeof(v), value) < 0)
		return err_set(e, "internal", "value too long");
	snprintf(ins, sizeof(ins), ",\n%.*s%s: %s", (int)ind, d->text + ls, k, v);
	return lock_edit(d, b, b, ins, e);
}

static int
cmp_edit(const void *x, const void *y)
{
	const struct edit *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

/* The text with every edit applied (malloc'd). */
char *
lock_doc_render(struct doc *d, size_t *outlen)
{
	size_t n = d->len, o = 0, at = 0;
	char *out;
	int i;

	qsort(d->ed, (size_t)d->ned, sizeof(d->ed[0]), cmp_edit);
	for (i = 0; i < d->ned; i++)
		n += strlen(d->ed[i].with);
	out = malloc(n + 1);
	if (out == NULL)
		return NULL;
	for (i = 0; i < d->ned; i++) {
		memcpy(out + o, d->text + at, d->ed[i].start - at);
		o += d->ed[i].start - at;
		memcpy(out + o, d->ed[i].with, strlen(d->ed[i].with));
		o += strlen(d->ed[i].with);
		at = d->ed[i].end;
	}
	memcpy(out + o, d->text + at, d->len - at);
	o += d->len - at;
	out[o] = '\0';
	*outlen = o;
	return out;
}

/* s with every occurrence of from replaced by to, into out. */
int
lock_replace_all(const char *s, const char *from, const char *to, char *out, size_t cap)
{
	size_t o = 0, fl = strlen(from), tl = strlen(to);
	const char *p;

	if (fl == 0)
		return snprintf(out, cap, "%s", s) < (int)cap ? 0 : -1;
	while ((p = strstr(s, from)) != NULL) {
		if (o + (size_t)(p - s) + tl >= cap)
			return -1;
		memcpy(out + o, s, (size_t)(p - s));
		o += (size_t)(p - s);
		memcpy(out + o, to, tl);
		o += tl;
		s = p + fl;
	}
	if (o + strlen(s) >= cap)
		return -1;
	memcpy(out + o, s, strlen(s) + 1);
	return 0;
}

/* version, verify.expect, path.min follow a version change. */
int
lock_edit_version(struct doc *d, const char *old, const char *new, struct err *e)
{
	const struct json_val *root = d->j.root, *x;
	char buf[1024];

	if (strcmp(old, new) == 0)
		return 0;
	if (lock_set_string(d, json_get(root, "version"), new, e) != 0)
		return -1;
	x = json_get(json_get(root, "verify"), "expect");
	if (x && x->type == JSON_STRING && strstr(x->u.str.s, old) &&
	    (lock_replace_all(x->u.str.s, old, new, buf, sizeof(buf)) != 0 ||
	     lock_set_string(d, x, buf, e) != 0))
		return -1;
	x = json_get(json_get(root, "path"), "min");
	if (x && x->type == JSON_STRING && strcmp(x->u.str.s, old) == 0 && lock_set_string(d, x, new, e) != 0)
		return -1;
	return 0;
}

/* ---- hosts ------------------------------------------------------------ */

int
lock_load_hosts(const struct doc *d, struct hosts *h, struct err *e)
{
	const struct json_val *a = json_get(d->j.root, "hosts");
	size_t i;

	h->n = 0;
	if (a == NULL || a->type != JSON_ARRAY || a->u.arr.n == 0)
		return err_set(e, "install.manifest_invalid", "%s: $.hosts: missing or empty", d->path);
	for (i = 0; i < a->u.arr.n && h->n < LOCK_HOSTS_MAX; i++)
		if (a->u.arr.v[i].type == JSON_STRING)
			h->h[h->n++] = a->u.arr.v[i].u.str.s;
	return 0;
}

int
lock_get(struct http_client *hc, const char *url, struct hosts *h, const char *const *headers, http_sink sink,
         void *sink_arg, uint64_t max, int *status, struct err *e)
{
	struct http_request rq;
	struct http_response *rs = malloc(sizeof(*rs));
	struct hostrule hr;
	int rc, i;

	if (rs == NULL)
		return err_set(e, "internal", "out of memory");
	http_request_init(&rq, url);
	for (i = 0; headers != NULL && headers[i] != NULL && i < HTTP_REQ_HEADERS_MAX; i++)
		rq.headers[rq.nheaders++] = headers[i];
	hostrule_init(&hr, 0, "the manifest's hosts");
	hostrule_add(&hr, h->h, (int)h->n);
	rq.host_ok = hostrule_check;
	rq.host_arg = &hr;
	rq.sink = sink;
	rq.sink_arg = sink_arg;
	rq.limits.max_body = max;
	rc = http_request(hc, &rq, rs, e);
	if (status != NULL)
		*status = rs->status;
	free(rs);
	return rc;
}
