#include "net/http_parse.h"
#include "base/digest.h"

#include <limits.h>
#include <string.h>

/* Character classes, one bit each, in one 256-entry table. */
enum {
	C_TCHAR = 1,  /* token (RFC 9110 §5.6.2) */
	C_TARGET = 2, /* RFC 3986 pchar / "/" / "?" (the '%' is checked apart) */
	C_VALUE = 4,  /* field-vchar or SP/HTAB (obs-text allowed) */
	C_HEX = 8,
	C_HOST = 16, /* reg-name, IP literals and the port */
};

/* The classes of one byte c, a constant expression. */
#define IS_ALNUM(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z') || ((c) >= '0' && (c) <= '9'))
#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')
#define IS_HEX(c) (((c) >= '0' && (c) <= '9') || ((c) >= 'a' && (c) <= 'f') || ((c) >= 'A' && (c) <= 'F'))
/* "-._~" plus the sub-delims "!$&'()*+,;=" (RFC 3986 §2.2, §2.3) */
#define IS_UNRES_SUB(c)                                                                                      \
	((c) == '-' || (c) == '.' || (c) == '_' || (c) == '~' || (c) == '!' || (c) == '$' || (c) == '&' ||   \
	 (c) == '\'' || (c) == '(' || (c) == ')' || (c) == '*' || (c) == '+' || (c) == ',' || (c) == ';' ||  \
	 (c) == '=')
/* tchar punctuation "!#$%&'*+-.^_`|~" */
#define IS_TPUNCT(c)                                                                                         \
	((c) == '!' || (c) == '#' || (c) == '$' || (c) == '%' || (c) == '&' || (c) == '\'' || (c) == '*' ||  \
	 (c) == '+' || (c) == '-' || (c) == '.' || (c) == '^' || (c) == '_' || (c) == '`' || (c) == '|' ||   \
	 (c) == '~')
#define CLS(c)                                                                                               \
	((IS_ALNUM(c) ? C_TCHAR | C_TARGET | C_HOST : 0) | (IS_TPUNCT(c) ? C_TCHAR : 0) |                    \
	 (IS_UNRES_SUB(c) || (c) == ':' || (c) == '@' || (c) == '/' || (c) == '?' ? C_TARGET : 0) |          \
	 (IS_UNRES_SUB(c) || (c) == ':' || (c) == '[' || (c) == ']' || (c) == '%' ? C_HOST : 0) |            \
	 (IS_HEX(c) ? C_HEX : 0) | ((c) >= 0x21 && (c) != 0x7f ? C_VALUE : 0) |                              \
	 ((c) == ' ' || (c) == '\t' ? C_VALUE : 0))
#define CLS4(c) CLS(c), CLS((c) + 1), CLS((c) + 2), CLS((c) + 3)
#define CLS16(c) CLS4(c), CLS4((c) + 4), CLS4((c) + 8), CLS4((c) + 12)
#define CLS64(c) CLS16(c), CLS16((c) + 16), CLS16((c) + 32), CLS16((c) + 48)

static const unsigned char cls[256] = {CLS64(0), CLS64(64), CLS64(128), CLS64(192)};

static int
req_reject(struct http_req *r, int status, const char *why)
{
	r->status = status;
	r->why = why;
	return -1;
}

static int
lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static int
view_ieq(struct http_view v, const char *s)
{
	size_t i;

	for (i = 0; i < v.n; i++)
		if (s[i] == '\0' || lower((unsigned char)v.p[i]) != lower((unsigned char)s[i]))
			return 0;
	return s[i] == '\0';
}

/* ---- the field-line grammar ------------------------------------------ */

enum {
	FL_START,    /* first byte of a line */
	FL_NAME,     /* token characters up to ':' */
	FL_VALUE,    /* after ':' */
	FL_CR,       /* CR after a value: LF must follow */
	FL_BLANK_CR, /* CR of the blank line */
};
enum { LINE_MORE, LINE_FIELD, LINE_BLANK };

/* Feed one byte of a field line (or of the blank line that ends a section)
 * to the machine at *st. Returns LINE_MORE, or LINE_FIELD / LINE_BLANK when
 * the byte ended a field line / the blank line (*st is then FL_START
 * again), or -1 with *why. */
static int
field_byte(int *st, int ch, unsigned flags, const char **why)
{
	int lf_ends = ch == '\n' && (flags & HTTP_LF_OK);

	switch (*st) {
	case FL_START:
		if (ch == '\r') {
			*st = FL_BLANK_CR;
			return LINE_MORE;
		}
		if (lf_ends)
			return LINE_BLANK;
		if (ch == ' ' || ch == '\t')
			return *why = "obsolete line folding", -1;
		if (!(cls[ch] & C_TCHAR))
			return *why = ch == '\n' ? "bare LF" : "invalid header field name", -1;
		*st = FL_NAME;
		return LINE_MORE;
	case FL_NAME:
		if (ch == ':')
			*st = FL_VALUE;
		else if (!(cls[ch] & C_TCHAR))
			return *why = "invalid header field name", -1;
		return LINE_MORE;
	case FL_VALUE:
		if (cls[ch] & C_VALUE)
			return LINE_MORE;
		if (ch == '\r') {
			*st = FL_CR;
			return LINE_MORE;
		}
		if (lf_ends) {
			*st = FL_START;
			return LINE_FIELD;
		}
		return *why = ch == '\n' ? "bare LF" : "invalid byte in a header field value", -1;
	default: /* FL_CR, FL_BLANK_CR */
		if (ch != '\n')
			return *why = "bare CR", -1;
		ch = *st == FL_CR ? LINE_FIELD : LINE_BLANK;
		*st = FL_START;
		return ch;
	}
}

/* One line at p[0..n) through field_byte, from FL_START: LINE_FIELD or
 * LINE_BLANK with *used the bytes through its end, LINE_MORE when the
 * bytes run out first, or -1 with *why. For a field, name and value are
 * its views (the value trimmed). The common bytes (name and value runs, the
 * colon, CRLF) take the transitions field_byte would, without a call each:
 * a head is mostly such runs. */
static int
field_run(const char *p, size_t n, unsigned flags, const char **why, size_t *used, struct http_view *name,
          struct http_view *value)
{
	size_t i = 0, colon = 0, end;
	int st = FL_START, rc = LINE_MORE;

	while (i < n && rc == LINE_MORE) {
		if (st == FL_START && (cls[(unsigned char)p[i]] & C_TCHAR))
			st = FL_NAME;
		if (st == FL_NAME) {
			while (i < n && (cls[(unsigned char)p[i]] & C_TCHAR))
				i++;
			if (i < n && p[i] == ':') {
				colon = i++;
				st = FL_VALUE;
			}
		}
		if (st == FL_VALUE) {
			while (i < n && (cls[(unsigned char)p[i]] & C_VALUE))
				i++;
			if (i + 1 < n && p[i] == '\r' && p[i + 1] == '\n') {
				i += 2;
				rc = LINE_FIELD;
				break;
			}
		}
		if (i < n)
			rc = field_byte(&st, (unsigned char)p[i++], flags, why);
	}
	*used = i;
	if (rc != LINE_FIELD)
		return rc;
	end = i - 1; /* the LF */
	if (end > colon + 1 && p[end - 1] == '\r')
		end--;
	i = colon + 1;
	while (i < end && (p[i] == ' ' || p[i] == '\t'))
		i++;
	while (end > i && (p[end - 1] == ' ' || p[end - 1] == '\t'))
		end--;
	*name = (struct http_view){p, colon};
	*value = (struct http_view){p + i, end - i};
	return rc;
}

const char *
http_field_check(const char *line, size_t n)
{
	const char *why = NULL;
	int st = FL_START, rc = LINE_MORE;
	size_t i;

	for (i = 0; i < n + 2 && rc == LINE_MORE; i++)
		rc = field_byte(&st, i < n ? (unsigned char)line[i] : "\r\n"[i - n], 0, &why);
	if (rc == LINE_BLANK)
		return "no field name";
	return rc == LINE_FIELD && i == n + 2 ? NULL : why ? why : "a line end inside the field";
}

/* Split the target into path and query; absolute-form loses its scheme and
 * authority (RFC 9112 §3.2.2: a server must accept it). */
static int
split_target(struct http_req *r)
{
	const char *p = r->target.p, *end = p + r->target.n, *q;
	size_t i;

	for (i = 0; i < r->target.n; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c == '%') {
			if (i + 2 >= r->target.n || !(cls[(unsigned char)p[i + 1]] & C_HEX) ||
			    !(cls[(unsigned char)p[i + 2]] & C_HEX))
				return req_reject(r, 400, "bad percent-encoding in the request target");
			continue;
		}
		if (!(cls[c] & C_TARGET))
			return req_reject(r, 400, "invalid character in the request target");
	}
	if (r->target.n == 1 && p[0] == '*') {
		if (r->method.n != 7 || memcmp(r->method.p, "OPTIONS", 7) != 0)
			return req_reject(r, 400, "asterisk-form target outside OPTIONS");
		r->path = r->target;
		return 0;
	}
	if (p[0] != '/') {
		size_t skip;

		if (r->target.n > 7 && view_ieq((struct http_view){p, 7}, "http://"))
			skip = 7;
		else if (r->target.n > 8 && view_ieq((struct http_view){p, 8}, "https://"))
			skip = 8;
		else
			return req_reject(r, 400, "request target is not origin-form or absolute-form");
		p += skip;
		while (p < end && *p != '/' && *p != '?')
			p++;
		if (p == r->target.p + skip)
			return req_reject(r, 400, "absolute-form target without a host");
	}
	q = memchr(p, '?', end - p);
	if (p == end || *p == '?')
		r->path = (struct http_view){"/", 1};
	else
		r->path = (struct http_view){p, (size_t)((q ? q : end) - p)};
	if (q != NULL) {
		r->has_query = 1;
		r->query = (struct http_view){q + 1, (size_t)(end - q - 1)};
	}
	return 0;
}

/* ---- framing ------------------------------------------------------------ */

void
http_framing_init(struct http_framing *f)
{
	f->ncl = f->nte = 0;
	f->length = -1;
	f->status = 0;
	f->why = NULL;
}

static int
framing_fail(struct http_framing *f, int status, const char *why)
{
	f->status = status;
	f->why = why;
	return -1;
}

int
http_framing_field(struct http_framing *f, const char *name, size_t nlen, const char *value, size_t vlen)
{
	struct http_view n = {name, nlen}, v = {value, vlen};
	int64_t cl = 0;
	size_t k;

	/* Most fields are neither: the lengths say so without a compare. */
	if (nlen == 14 && view_ieq(n, "content-length")) {
		if (++f->ncl > 1)
			return framing_fail(f, 400, "repeated Content-Length");
		if (v.n == 0 || v.n > 18)
			return framing_fail(f, 400, "malformed Content-Length");
		for (k = 0; k < v.n; k++) {
			if (!IS_DIGIT(v.p[k]))
				return framing_fail(f, 400, "malformed Content-Length");
			cl = cl * 10 + (v.p[k] - '0');
		}
		f->length = cl;
	} else if (nlen == 17 && view_ieq(n, "transfer-encoding")) {
		if (++f->nte > 1)
			return framing_fail(f, 400, "repeated Transfer-Encoding");
		if (!view_ieq(v, "chunked"))
			return framing_fail(f, 501, "unsupported Transfer-Encoding");
	}
	return 0;
}

int
http_framing_end(struct http_framing *f, int minor, int response)
{
	if (f->ncl && f->nte)
		return framing_fail(f, 400, "both Content-Length and Transfer-Encoding");
	if (f->nte && minor == 0)
		return framing_fail(f, 400, "Transfer-Encoding in an HTTP/1.0 message");
	if (f->nte)
		return HTTP_BODY_CHUNKED;
	if (f->ncl)
		return HTTP_BODY_LENGTH;
	return response ? HTTP_BODY_CLOSE : HTTP_BODY_NONE;
}

/* ---- the request head ----------------------------------------------------- */

/* Connection: a comma-separated list of tokens. */
static void
connection_opts(struct http_view v, int *close, int *keep)
{
	size_t i = 0, s;

	while (i < v.n) {
		while (i < v.n && (v.p[i] == ' ' || v.p[i] == '\t' || v.p[i] == ','))
			i++;
		s = i;
		while (i < v.n && v.p[i] != ',' && v.p[i] != ' ' && v.p[i] != '\t')
			i++;
		if (view_ieq((struct http_view){v.p + s, i - s}, "close"))
			*close = 1;
		else if (view_ieq((struct http_view){v.p + s, i - s}, "keep-alive"))
			*keep = 1;
	}
}

/* Framing and the fields whose misuse enables smuggling. */
static int
semantics(struct http_req *r)
{
	int nhost = 0, close = 0, keep = 0, i, body;
	struct http_framing f;
	size_t k;

	http_framing_init(&f);
	for (i = 0; i < r->nfields; i++) {
		struct http_view n = r->fields[i].name, v = r->fields[i].value;

		if (view_ieq(n, "host")) {
			nhost++;
			for (k = 0; k < v.n; k++)
				if (!(cls[(unsigned char)v.p[k]] & C_HOST))
					return req_reject(r, 400, "invalid Host");
		} else if (view_ieq(n, "connection")) {
			connection_opts(v, &close, &keep);
		} else if (view_ieq(n, "expect")) {
			if (view_ieq(v, "100-continue"))
				r->expect_continue = 1;
		} else if (http_framing_field(&f, n.p, n.n, v.p, v.n) != 0) {
			return req_reject(r, f.status, f.why);
		}
	}
	if (nhost > 1)
		return req_reject(r, 400, "more than one Host");
	if (nhost == 0 && r->minor == 1)
		return req_reject(r, 400, "HTTP/1.1 request without Host");
	body = http_framing_end(&f, r->minor, 0);
	if (body < 0)
		return req_reject(r, f.status, f.why);
	r->content_length = f.length;
	r->chunked = body == HTTP_BODY_CHUNKED;
	r->keep_alive = r->minor == 1 ? !close : (keep && !close);
	return 0;
}

/* Running out of bytes mid-head: need more, unless the limit is reached. */
static int
more(struct http_req *r, size_t len, size_t max)
{
	if (len >= max)
		return req_reject(r, 431, "request head too large");
	return 0;
}

int
http_req_parse(struct http_req *r, const char *buf, size_t len)
{
	return http_req_parse_max(r, buf, len, HTTP_REQ_HEAD_MAX);
}

int
http_req_parse_max(struct http_req *r, const char *buf, size_t len, size_t max)
{
	static const char ver[] = "HTTP/";
	size_t pos = 0, s;

	if (max < HTTP_REQ_HEAD_LIMIT_MIN)
		max = HTTP_REQ_HEAD_LIMIT_MIN;
	if (max > HTTP_REQ_HEAD_LIMIT_MAX)
		max = HTTP_REQ_HEAD_LIMIT_MAX;
	r->method = r->target = r->path = r->query = (struct http_view){NULL, 0};
	r->has_query = r->minor = r->nfields = r->chunked = r->keep_alive = r->expect_continue = 0;
	r->content_length = -1;
	r->status = 0;
	r->why = NULL;

	while (pos < len && buf[pos] == '\r') {
		if (pos + 1 == len)
			return more(r, len, max);
		if (buf[pos + 1] != '\n')
			return req_reject(r, 400, "bare CR");
		pos += 2;
	}

	/* method SP */
	s = pos;
	while (pos < len && (cls[(unsigned char)buf[pos]] & C_TCHAR)) {
		if (pos - s >= HTTP_REQ_METHOD_MAX)
			return req_reject(r, 501, "method too long");
		pos++;
	}
	if (pos == len)
		return more(r, len, max);
	if (buf[pos] != ' ' || pos == s)
		return req_reject(r, 400, "malformed request line");
	r->method = (struct http_view){buf + s, pos - s};
	pos++;

	/* request-target SP: anything visible here, the grammar is checked
	 * once the whole target is known */
	s = pos;
	while (pos < len && (unsigned char)buf[pos] > 0x20 && (unsigned char)buf[pos] < 0x7f) {
		if (pos - s >= HTTP_REQ_TARGET_MAX)
			return req_reject(r, 414, "request target too long");
		pos++;
	}
	if (pos == len)
		return more(r, len, max);
	if (buf[pos] != ' ' || pos == s)
		return req_reject(r, 400, "malformed request line");
	r->target = (struct http_view){buf + s, pos - s};
	pos++;

	/* HTTP-version CRLF */
	for (s = 0; s < 5; s++, pos++) {
		if (pos == len)
			return more(r, len, max);
		if (buf[pos] != ver[s])
			return req_reject(r, 400, "malformed HTTP version");
	}
	if (pos + 3 > len) {
		for (; pos < len; pos++)
			if (!((buf[pos] >= '0' && buf[pos] <= '9') || buf[pos] == '.'))
				return req_reject(r, 400, "malformed HTTP version");
		return more(r, len, max);
	}
	if (buf[pos] < '0' || buf[pos] > '9' || buf[pos + 1] != '.' || buf[pos + 2] < '0' ||
	    buf[pos + 2] > '9')
		return req_reject(r, 400, "malformed HTTP version");
	if (buf[pos] != '1')
		return req_reject(r, 505, "HTTP version not supported");
	r->minor = buf[pos + 2] == '0' ? 0 : 1;
	pos += 3;
	if (pos == len)
		return more(r, len, max);
	if (buf[pos] != '\r')
		return req_reject(r, 400, "malformed request line");
	if (++pos == len)
		return more(r, len, max);
	if (buf[pos++] != '\n')
		return req_reject(r, 400, "bare CR");

	/* fields, then the blank line */
	for (;;) {
		struct http_view name, value;
		size_t used;
		int rc;

		if (pos > max)
			return req_reject(r, 431, "request head too large");
		rc = field_run(buf + pos, len - pos, 0, &r->why, &used, &name, &value);
		pos += used;
		if (rc < 0)
			return req_reject(r, 400, r->why);
		if (rc == LINE_MORE)
			return more(r, len, max);
		if (rc == LINE_BLANK)
			break;
		if (r->nfields == HTTP_REQ_MAX_FIELDS)
			return req_reject(r, 431, "too many header fields");
		r->fields[r->nfields].name = name;
		r->fields[r->nfields].value = value;
		r->nfields++;
	}
	if (pos > max)
		return req_reject(r, 431, "request head too large");
	if (split_target(r) != 0 || semantics(r) != 0)
		return -1;
	return (int)pos;
}

const struct http_req_field *
http_req_field(const struct http_req *r, const char *name)
{
	int i;

	for (i = 0; i < r->nfields; i++)
		if (view_ieq(r->fields[i].name, name))
			return &r->fields[i];
	return NULL;
}

int
http_req_field_count(const struct http_req *r, const char *name)
{
	int i, n = 0;

	for (i = 0; i < r->nfields; i++)
		n += view_ieq(r->fields[i].name, name);
	return n;
}

/* ---- response head ----------------------------------------------------- */

static int
head_fail(struct http_head *h, const char *why)
{
	h->why = why;
	return -1;
}

/* "HTTP/1.x NNN reason" in line[0..n), the line end removed. */
static int
status_line(struct http_head *h, const char *p, size_t n)
{
	size_t i;

	if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') || p[8] != ' ' ||
	    !IS_DIGIT(p[9]) || !IS_DIGIT(p[10]) || !IS_DIGIT(p[11]) || (n > 12 && p[12] != ' '))
		return head_fail(h, "bad status line");
	h->minor = p[7] - '0';
	h->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	if (h->status < 100 || h->status > 599)
		return head_fail(h, "bad status code");
	h->reason = n > 12 ? p + 13 : p + n;
	h->reason_len = n > 12 ? n - 13 : 0;
	for (i = 0; i < h->reason_len; i++)
		if (!(cls[(unsigned char)h->reason[i]] & C_VALUE))
			return head_fail(h, "control byte in the status line");
	return 0;
}

int
http_parse_head(const char *buf, size_t len, struct http_head *h)
{
	size_t lim = len > HTTP_HEAD_MAX ? HTTP_HEAD_MAX : len, pos, n;
	const char *lf;

	memset(h, 0, sizeof(*h));
	if ((lf = memchr(buf, '\n', lim)) == NULL)
		goto more;
	n = (size_t)(lf - buf);
	if (n > 0 && buf[n - 1] == '\r')
		n--;
	if (status_line(h, buf, n) != 0)
		return -1;
	for (pos = (size_t)(lf - buf) + 1;;) {
		struct http_view name, value;
		struct http_field *f;
		size_t used;
		int rc;

		rc = field_run(buf + pos, lim - pos, HTTP_LF_OK, &h->why, &used, &name, &value);
		pos += used;
		if (rc < 0)
			return -1;
		if (rc == LINE_MORE)
			goto more;
		if (rc == LINE_BLANK)
			return (int)pos;
		if (h->nfields >= HTTP_FIELDS_MAX)
			return head_fail(h, "too many header fields");
		f = &h->fields[h->nfields++];
		*f = (struct http_field){name.p, name.n, value.p, value.n};
	}
more:
	if (len >= HTTP_HEAD_MAX)
		return head_fail(h, "response head too large");
	return 0;
}

const struct http_field *
http_head_get(const struct http_head *h, const char *name)
{
	int i;

	for (i = 0; i < h->nfields; i++)
		if (view_ieq((struct http_view){h->fields[i].name, h->fields[i].name_len}, name))
			return &h->fields[i];
	return NULL;
}

/* ---- chunked ----------------------------------------------------------- */

enum {
	CK_SIZE,    /* hex digits */
	CK_EXT_BWS, /* blanks after the size: only ';' or the line end may follow */
	CK_EXT,     /* inside extensions */
	CK_SIZE_LF,
	CK_DATA,
	CK_DATA_CR,
	CK_DATA_LF,
	CK_TRAILER, /* field lines, then the blank line */
	CK_DONE,
};

void
http_chunked_init(struct http_chunked *c, uint64_t max_body, unsigned flags)
{
	memset(c, 0, sizeof(*c));
	c->max_body = max_body;
	c->flags = flags;
	c->state = CK_SIZE;
	c->fl = FL_START;
}

static int
ck_fail(struct http_chunked *c, int status, const char *why)
{
	c->status = status;
	c->why = why;
	return -1;
}

/* The size line has ended: data, or the trailers after the last chunk. */
static int
size_done(struct http_chunked *c)
{
	c->line = 0;
	c->digits = 0;
	if (c->left > c->max_body - c->total)
		return ck_fail(c, 413, "chunked body over its size limit");
	c->state = c->left == 0 ? CK_TRAILER : CK_DATA;
	return 0;
}

static int
size_line_byte(struct http_chunked *c, int ch)
{
	if (++c->line > HTTP_CHUNK_LINE_MAX)
		return ck_fail(c, 400, "chunk size line too long");
	if (ch == '\r' || (ch == '\n' && (c->flags & HTTP_LF_OK))) {
		if (c->digits == 0)
			return ck_fail(c, 400, "missing chunk size");
		if (ch == '\n')
			return size_done(c);
		c->state = CK_SIZE_LF;
	} else if (c->state == CK_SIZE && (cls[ch] & C_HEX)) {
		if (c->left >= HTTP_CHUNK_SIZE_LIMIT >> 4)
			return ck_fail(c, 400, "chunk size too large");
		c->digits++;
		c->left = (c->left << 4) | (uint64_t)hex_digit(ch);
	} else if (c->state != CK_EXT && (ch == ' ' || ch == '\t') && c->digits > 0) {
		c->state = CK_EXT_BWS;
	} else if (c->state != CK_EXT && ch == ';' && c->digits > 0) {
		c->state = CK_EXT;
	} else if (c->state != CK_EXT || !(cls[ch] & C_VALUE)) {
		return ck_fail(c, 400, "malformed chunk size line");
	}
	return 0;
}

static int
trailer_byte(struct http_chunked *c, int ch)
{
	const char *why;
	int rc;

	if (++c->trailer_bytes > HTTP_CHUNK_TRAILER_MAX)
		return ck_fail(c, 400, "trailer section too large");
	rc = field_byte(&c->fl, ch, c->flags, &why);
	if (rc < 0)
		return ck_fail(c, 400, why);
	if (rc == LINE_FIELD && ++c->ntrailers > HTTP_CHUNK_TRAILERS_MAX)
		return ck_fail(c, 400, "too many trailer fields");
	if (rc == LINE_BLANK) {
		c->state = CK_DONE;
		c->done = 1;
	}
	return 0;
}

/* One framing byte (any state but CK_DATA and CK_DONE). */
static int
framing_byte(struct http_chunked *c, int ch)
{
	switch (c->state) {
	case CK_SIZE:
	case CK_EXT_BWS:
	case CK_EXT:
		return size_line_byte(c, ch);
	case CK_SIZE_LF:
		if (ch != '\n')
			return ck_fail(c, 400, "bare CR in chunk framing");
		return size_done(c);
	case CK_DATA_CR:
		if (ch == '\n' && (c->flags & HTTP_LF_OK))
			c->state = CK_SIZE;
		else if (ch == '\r')
			c->state = CK_DATA_LF;
		else
			return ck_fail(c, 400, "chunk data not followed by CRLF");
		return 0;
	case CK_DATA_LF:
		if (ch != '\n')
			return ck_fail(c, 400, "chunk data not followed by CRLF");
		c->state = CK_SIZE;
		return 0;
	default: /* CK_TRAILER */
		return trailer_byte(c, ch);
	}
}

long
http_chunked_step(struct http_chunked *c, const unsigned char *in, size_t len, const unsigned char **data,
                  size_t *dlen)
{
	size_t i;

	*dlen = 0;
	*data = in;
	if (c->status != 0)
		return -1;
	if (len == 0 || c->state == CK_DONE)
		return 0;
	if (len > LONG_MAX)
		len = LONG_MAX;
	if (c->state == CK_DATA) {
		size_t take = c->left < len ? (size_t)c->left : len;

		c->left -= take;
		c->total += take;
		if (c->left == 0)
			c->state = CK_DATA_CR;
		*dlen = take;
		return (long)take;
	}
	for (i = 0; i < len && c->state != CK_DATA && c->state != CK_DONE; i++)
		if (framing_byte(c, in[i]) != 0)
			return -1;
	return (long)i;
}
