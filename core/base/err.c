#include "base/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct err_info table[] = {
#define ERRCODE(c, s, t, r) {c, s, t, r},
#include "base/errcodes.h"
#undef ERRCODE
};

#define NTABLE ((int)(sizeof(table) / sizeof(table[0])))

/* The mark of an elision or a cut: U+2026, an ellipsis. */
#define MARK "\xe2\x80\xa6"
#define MARK_LEN 3
/* A path is never elided below this many bytes, the mark included. */
#define PATH_KEEP 48

static int
is_cont(char c)
{
	return ((unsigned char)c & 0xC0) == 0x80;
}

/* Cut s (a message that filled cap) so that it ends in the mark: never
 * inside a UTF-8 sequence, whose half would make the JSON body that
 * carries it invalid text. */
static void
cut(char *s, size_t cap)
{
	size_t at = cap - MARK_LEN - 1;

	while (at > 0 && is_cont(s[at]))
		at--;
	memcpy(s + at, MARK, MARK_LEN + 1);
}

/* Elide the middle of the path p (len bytes, in a string) so that it is
 * at most t bytes (t > MARK_LEN): its head and its last component stay,
 * the mark between them, at '/' boundaries where that costs at most half
 * of a side, else at character boundaries. A mark already in p (an elided
 * message wrapped again) is inside what goes. Returns the bytes removed. */
static size_t
elide(char *p, size_t len, size_t t_max)
{
	size_t keep = t_max - MARK_LEN, h, t, name, k;
	const char *m = strstr(p, MARK);

	for (k = len - 1; k > 0 && p[k - 1] != '/'; k--)
		;
	name = k > 0 ? len - k + 1 : len; /* the last component, with its '/' */
	t = keep / 2;
	if (name > t)
		t = name < keep - keep / 4 ? name : keep - keep / 4;
	h = keep - t;
	if (m != NULL && m < p + len) {
		k = (size_t)(m - p);
		if (h > k)
			t += h - k, h = k;
		if (t > len - k - MARK_LEN)
			h += t - (len - k - MARK_LEN), t = len - k - MARK_LEN;
	}
	for (k = h; k > h / 2 && p[k - 1] != '/'; k--)
		;
	h = k > h / 2 ? k : h;
	while (h > 0 && is_cont(p[h]))
		h--;
	for (k = len - t; k < len - t / 2 && p[k] != '/'; k++)
		;
	t = k < len - t / 2 ? len - k : t;
	while (t > 0 && is_cont(p[len - t]))
		t--;
	memcpy(p + h, MARK, MARK_LEN);
	memmove(p + h + MARK_LEN, p + len - t, strlen(p + len - t) + 1);
	return len - h - MARK_LEN - t;
}

/* The paths of s, runs without spaces that hold a '/' (a path, a URL;
 * quotes and punctuation around them come along), longer than t bytes:
 * the bytes they have past t, each elided to t when apply is set. */
static size_t
paths_over(char *s, size_t t, int apply)
{
	size_t i = 0, j, over = 0;

	while (s[i] != '\0') {
		j = i + strcspn(s + i, " ");
		if (j - i > t && memchr(s + i, '/', j - i) != NULL) {
			over += j - i - t;
			if (apply)
				j -= elide(s + i, j - i, t);
		}
		i = j + (s[j] != '\0');
	}
	return over;
}

int
err_fmtv(char *buf, size_t cap, const char *fmt, va_list ap)
{
	size_t n, lo = PATH_KEEP, hi, t;
	va_list aq;
	char *s;
	int r;

	va_copy(aq, ap);
	r = vsnprintf(buf, cap, fmt, ap);
	n = r < 0 ? strlen(buf) : (size_t)r;
	if (n >= cap && (s = malloc(n + 1)) != NULL) {
		/* Whole, then its long paths elided to one length: the
		 * longest that makes room (not below PATH_KEEP). */
		if (vsnprintf(s, n + 1, fmt, aq) == r) {
			for (hi = n; lo < hi;) {
				t = (lo + hi + 1) / 2;
				if (paths_over(s, t, 0) >= n - cap + 1)
					lo = t;
				else
					hi = t - 1;
			}
			paths_over(s, lo, 1);
			n = strlen(s);
			memcpy(buf, s, n < cap ? n + 1 : cap);
		}
		free(s);
	}
	va_end(aq);
	if (n >= cap) {
		cut(buf, cap);
		n = strlen(buf);
	}
	return (int)n;
}

int
err_setv(struct err *e, const char *code, const char *fmt, va_list ap)
{
	if (e == NULL)
		return -1;
	/* Formatted aside first: callers may pass e->msg (or details) among
	 * the arguments, and vsnprintf's source and destination must not
	 * overlap. */
	char tmp[ERR_MSG_MAX];

	tmp[0] = '\0';
	if (fmt != NULL)
		err_fmtv(tmp, sizeof(tmp), fmt, ap);
	e->code = code;
	if (e->details != NULL)
		e->details[0] = '\0';
	e->sys = 0;
	e->cause = NULL;
	memcpy(e->msg, tmp, sizeof(tmp));
	return -1;
}

int
err_sys(struct err *e, const char *code, int errnum, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err_setv(e, code, fmt, ap);
	va_end(ap);
	if (e != NULL)
		e->sys = errnum;
	return -1;
}

int
err_wrap(struct err *e, const char *code, const char *fmt, ...)
{
	const char *cause;
	va_list ap;
	int sys;

	if (e == NULL)
		return -1;
	sys = e->sys;
	cause = e->cause;
	if (cause == NULL && e->code != NULL && (code == NULL || strcmp(e->code, code) != 0))
		cause = e->code;
	va_start(ap, fmt);
	err_setv(e, code, fmt, ap);
	va_end(ap);
	e->sys = sys;
	e->cause = cause;
	return -1;
}

const char *
err_root(const struct err *e)
{
	return e->cause != NULL ? e->cause : e->code;
}

int
err_set(struct err *e, const char *code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err_setv(e, code, fmt, ap);
	va_end(ap);
	return -1;
}

void
err_keep_details(struct err *e, char *buf, size_t cap)
{
	if (buf == NULL || cap == 0) {
		e->details = NULL;
		e->details_cap = 0;
		return;
	}
	e->details = buf;
	e->details_cap = cap > 65535 ? 65535 : (unsigned short)cap;
	buf[0] = '\0';
}

const char *
err_details_text(const struct err *e)
{
	return e != NULL && e->details != NULL ? e->details : "";
}

void
err_details(struct err *e, const char *json_object)
{
	size_t n;

	if (e == NULL || e->details == NULL || json_object == e->details)
		return;
	n = strlen(json_object);
	if (n >= e->details_cap)
		json_object = "{}", n = 2;
	memmove(e->details, json_object, n + 1);
}

void
err_copy(struct err *dst, const struct err *src)
{
	size_t n;

	if (dst == NULL || src == dst)
		return;
	dst->code = src->code;
	dst->sys = src->sys;
	dst->cause = src->cause;
	n = strnlen(src->msg, sizeof(src->msg) - 1);
	memmove(dst->msg, src->msg, n);
	dst->msg[n] = '\0';
	err_details(dst, err_details_text(src));
}

void
err_clear(struct err *e)
{
	if (e == NULL)
		return;
	e->code = NULL;
	e->msg[0] = '\0';
	if (e->details != NULL)
		e->details[0] = '\0';
	e->sys = 0;
	e->cause = NULL;
}

const struct err_info *
err_info(const char *code)
{
	int i;

	for (i = 0; code != NULL && i < NTABLE; i++)
		if (strcmp(table[i].code, code) == 0)
			return &table[i];
	for (i = 0; i < NTABLE; i++)
		if (strcmp(table[i].code, "internal") == 0)
			break;
	return &table[i];
}

const struct err_info *
err_table(int *n)
{
	*n = NTABLE;
	return table;
}

/* The fix for e: a failed or unreachable install's is its cause's
 * (tls.unknown_ca: the CA bundle; http.proxy: the proxy), when that cause
 * has one; else its code's. */
static const char *
err_remedy(const struct err *e)
{
	const struct err_info *c = e->cause != NULL ? err_info(e->cause) : NULL;

	if (c != NULL && c->remedy != NULL && strcmp(c->code, e->cause) == 0 && e->code != NULL &&
	    (strcmp(e->code, "install.failed") == 0 || strcmp(e->code, "install.network_unreachable") == 0))
		return c->remedy;
	return err_info(e->code)->remedy;
}

int
err_format(const struct err *e, char *buf, int cap)
{
	const struct err_info *in = err_info(e->code);
	const char *code = e->code ? e->code : "internal", *remedy = err_remedy(e);
	const char *msg = e->msg[0] ? e->msg : in->sentence;
	int n;

	if (cap <= 0)
		return 0;
	if (remedy != NULL)
		n = snprintf(buf, cap, "agent-sandbox-server: %s: %s\n  fix: %s\n", code, msg, remedy);
	else
		n = snprintf(buf, cap, "agent-sandbox-server: %s: %s\n", code, msg);
	if (n >= cap) {
		n = cap - 1;
		buf[n - 1] = '\n';
	}
	return n < 0 ? 0 : n;
}

void
err_print(const struct err *e)
{
	char buf[ERR_MSG_MAX + 512];
	int n = err_format(e, buf, sizeof(buf));

	/* One write, so threads never interleave; a short write to stderr is
	 * not worth retrying. */
	if (write(2, buf, n) < 0)
		return;
}

void
err_printf(const char *code, const char *fmt, ...)
{
	struct err e = {0};
	va_list ap;

	va_start(ap, fmt);
	err_setv(&e, code, fmt, ap);
	va_end(ap);
	err_print(&e);
}

static void
line_v(const char *prefix, const char *fmt, va_list ap)
{
	char buf[ERR_MSG_MAX + 64];
	int n;

	n = snprintf(buf, sizeof(buf), "agent-sandbox-server: %s", prefix);
	n += err_fmtv(buf + n, sizeof(buf) - n - 1, fmt, ap);
	buf[n++] = '\n';
	if (write(2, buf, n) < 0)
		return;
}

void
warnx_line(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	line_v("warning: ", fmt, ap);
	va_end(ap);
}

void
note_line(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	line_v("", fmt, ap);
	va_end(ap);
}
