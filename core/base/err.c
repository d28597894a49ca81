#include "base/err.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const struct err_info table[] = {
#define ERRCODE(c, s, t, r) {c, s, t, r},
#include "base/errcodes.h"
#undef ERRCODE
};

#define NTABLE ((int)(sizeof(table) / sizeof(table[0])))

/* Cut s (a message that filled cap) so that it ends in an ellipsis: never
 * inside a UTF-8 sequence, whose half would make the JSON body that
 * carries it invalid text. */
static void
cut(char *s, size_t cap)
{
	size_t at = cap - 4; /* the ellipsis is 3 bytes, then the NUL */

	while (at > 0 && ((unsigned char)s[at] & 0xC0) == 0x80)
		at--;
	memcpy(s + at, "\xe2\x80\xa6", 4);
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
	if (fmt != NULL && vsnprintf(tmp, sizeof(tmp), fmt, ap) >= (int)sizeof(tmp))
		cut(tmp, sizeof(tmp));
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
	n += vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
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
