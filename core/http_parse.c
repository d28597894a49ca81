#include "http_parse.h"

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
	 (IS_HEX(c) ? C_HEX : 0) | ((c) >= 0x21 && (c) != 0x7f ? C_VALUE : 0) |                             \
	 ((c) == ' ' || (c) == '\t' ? C_VALUE : 0))
#define CLS4(c) CLS(c), CLS((c) + 1), CLS((c) + 2), CLS((c) + 3)
#define CLS16(c) CLS4(c), CLS4((c) + 4), CLS4((c) + 8), CLS4((c) + 12)
#define CLS64(c) CLS16(c), CLS16((c) + 16), CLS16((c) + 32), CLS16((c) + 48)

static const unsigned char cls[256] = {CLS64(0), CLS64(64), CLS64(128), CLS64(192)};

static int
fail(struct http_req *r, int status, const char *why)
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

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	return lower(c) - 'a' + 10;
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
				return fail(r, 400, "bad percent-encoding in the request target");
			continue;
		}
		if (!(cls[c] & C_TARGET))
			return fail(r, 400, "invalid character in the request target");
	}
	if (r->target.n == 1 && p[0] == '*') {
		if (r->method.n != 7 || memcmp(r->method.p, "OPTIONS", 7) != 0)
			return fail(r, 400, "asterisk-form target outside OPTIONS");
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
			return fail(r, 400, "request target is not origin-form or absolute-form");
		p += skip;
		while (p < end && *p != '/' && *p != '?')
			p++;
		if (p == r->target.p + skip)
			return fail(r, 400, "absolute-form target without a host");
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
	int nhost = 0, ncl = 0, nte = 0, close = 0, keep = 0, i;
	size_t k;

	for (i = 0; i < r->nfields; i++) {
		struct http_view n = r->fields[i].name, v = r->fields[i].value;

		if (view_ieq(n, "host")) {
			nhost++;
			for (k = 0; k < v.n; k++)
				if (!(cls[(unsigned char)v.p[k]] & C_HOST))
					return fail(r, 400, "invalid Host");
		} else if (view_ieq(n, "content-length")) {
			int64_t cl = 0;

			if (++ncl > 1)
				return fail(r, 400, "repeated Content-Length");
			if (v.n == 0 || v.n > 18)
				return fail(r, 400, "malformed Content-Length");
			for (k = 0; k < v.n; k++) {
				if (v.p[k] < '0' || v.p[k] > '9')
					return fail(r, 400, "malformed Content-Length");
				cl = cl * 10 + (v.p[k] - '0');
			}
			r->content_length = cl;
		} else if (view_ieq(n, "transfer-encoding")) {
			if (++nte > 1)
				return fail(r, 400, "repeated Transfer-Encoding");
			if (!view_ieq(v, "chunked"))
				return fail(r, 501, "unsupported Transfer-Encoding");
			r->chunked = 1;
		} else if (view_ieq(n, "connection")) {
			connection_opts(v, &close, &keep);
		} else if (view_ieq(n, "expect")) {
			if (view_ieq(v, "100-continue"))
				r->expect_continue = 1;
		}
	}
	if (nhost > 1)
		return fail(r, 400, "more than one Host");
	if (nhost == 0 && r->minor == 1)
		return fail(r, 400, "HTTP/1.1 request without Host");
	if (ncl && nte)
		return fail(r, 400, "both Content-Length and Transfer-Encoding");
	/* RFC 9112 §6.1: framing of an HTTP/1.0 message with
	 * Transfer-Encoding is faulty. */
	if (nte && r->minor == 0)
		return fail(r, 400, "Transfer-Encoding in an HTTP/1.0 request");
	r->keep_alive = r->minor == 1 ? !close : (keep && !close);
	return 0;
}

/* Running out of bytes mid-head: need more, unless the limit is reached. */
static int
more(struct http_req *r, size_t len, size_t max)
{
	if (len >= max)
		return fail(r, 431, "request head too large");
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
	int c;

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
			return fail(r, 400, "bare CR");
		pos += 2;
	}

	/* method SP */
	s = pos;
	while (pos < len && (cls[(unsigned char)buf[pos]] & C_TCHAR)) {
		if (pos - s >= HTTP_REQ_METHOD_MAX)
			return fail(r, 501, "method too long");
		pos++;
	}
	if (pos == len)
		return more(r, len, max);
	if (buf[pos] != ' ' || pos == s)
		return fail(r, 400, "malformed request line");
	r->method = (struct http_view){buf + s, pos - s};
	pos++;

	/* request-target SP: anything visible here, the grammar is checked
	 * once the whole target is known */
	s = pos;
	while (pos < len && (unsigned char)buf[pos] > 0x20 && (unsigned char)buf[pos] < 0x7f) {
		if (pos - s >= HTTP_REQ_TARGET_MAX)
			return fail(r, 414, "request target too long");
		pos++;
	}
	if (pos == len)
		return more(r, len, max);
	if (buf[pos] != ' ' || pos == s)
		return fail(r, 400, "malformed request line");
	r->target = (struct http_view){buf + s, pos - s};
	pos++;

	/* HTTP-version CRLF */
	for (s = 0; s < 5; s++, pos++) {
		if (pos == len)
			return more(r, len, max);
		if (buf[pos] != ver[s])
			return fail(r, 400, "malformed HTTP version");
	}
	if (pos + 3 > len) {
		for (; pos < len; pos++)
			if (!((buf[pos] >= '0' && buf[pos] <= '9') || buf[pos] == '.'))
				return fail(r, 400, "malformed HTTP version");
		return more(r, len, max);
	}
	if (buf[pos] < '0' || buf[pos] > '9' || buf[pos + 1] != '.' || buf[pos + 2] < '0' ||
	    buf[pos + 2] > '9')
		return fail(r, 400, "malformed HTTP version");
	if (buf[pos] != '1')
		return fail(r, 505, "HTTP version not supported");
	r->minor = buf[pos + 2] == '0' ? 0 : 1;
	pos += 3;
	if (pos == len)
		return more(r, len, max);
	if (buf[pos] != '\r')
		return fail(r, 400, "malformed request line");
	if (++pos == len)
		return more(r, len, max);
	if (buf[pos++] != '\n')
		return fail(r, 400, "bare CR");

	/* fields, then the blank line */
	for (;;) {
		struct http_req_field *f;
		size_t vs, ve;

		if (pos > max)
			return fail(r, 431, "request head too large");
		if (pos == len)
			return more(r, len, max);
		c = (unsigned char)buf[pos];
		if (c == '\r') {
			if (pos + 1 == len)
				return more(r, len, max);
			if (buf[pos + 1] != '\n')
				return fail(r, 400, "bare CR");
			pos += 2;
			break;
		}
		if (c == ' ' || c == '\t')
			return fail(r, 400, "obsolete line folding");
		if (r->nfields == HTTP_REQ_MAX_FIELDS)
			return fail(r, 431, "too many header fields");
		s = pos;
		while (pos < len && (cls[(unsigned char)buf[pos]] & C_TCHAR))
			pos++;
		if (pos == len)
			return more(r, len, max);
		if (buf[pos] != ':' || pos == s)
			return fail(r, 400, "invalid header field name");
		f = &r->fields[r->nfields];
		f->name = (struct http_view){buf + s, pos - s};
		pos++;
		while (pos < len && (buf[pos] == ' ' || buf[pos] == '\t'))
			pos++;
		vs = pos;
		while (pos < len && (cls[(unsigned char)buf[pos]] & C_VALUE))
			pos++;
		if (pos == len)
			return more(r, len, max);
		if (buf[pos] != '\r')
			return fail(r, 400,
			            buf[pos] == '\n' ? "bare LF" : "invalid byte in a header field value");
		ve = pos;
		while (ve > vs && (buf[ve - 1] == ' ' || buf[ve - 1] == '\t'))
			ve--;
		f->value = (struct http_view){buf + vs, ve - vs};
		r->nfields++;
		if (++pos == len)
			return more(r, len, max);
		if (buf[pos++] != '\n')
			return fail(r, 400, "bare CR");
	}
	if (pos > max)
		return fail(r, 431, "request head too large");
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

/* ---- chunked ---------------------------------------------------------- */

enum {
	CK_SIZE,    /* hex digits */
	CK_EXT_BWS, /* blanks after the size: only ';' or CR may follow */
	CK_EXT,     /* inside extensions */
	CK_SIZE_LF,
	CK_DATA,
	CK_DATA_CR,
	CK_DATA_LF,
	CK_TR_START, /* start of a trailer line or the final CRLF */
	CK_TR_NAME,
	CK_TR_VALUE,
	CK_TR_LF,
	CK_END_LF,
	CK_DONE,
};

void
http_req_chunked_init(struct http_req_chunked *c, uint64_t max_body)
{
	memset(c, 0, sizeof(*c));
	c->max_body = max_body;
	c->state = CK_SIZE;
}

static int
ck_fail(struct http_req_chunked *c, int status, const char *why)
{
	c->status = status;
	c->why = why;
	return -1;
}

int
http_req_chunked_decode(struct http_req_chunked *c, const char *in, size_t len, char *out, size_t *nout)
{
	size_t pos = 0, o = 0;

	*nout = 0;
	if (c->status != 0)
		return -1;
	if (len > INT_MAX)
		len = INT_MAX;
	while (pos < len && c->state != CK_DONE) {
		int ch = (unsigned char)in[pos];

		if (c->state == CK_DATA) {
			size_t n = len - pos;

			if (n > c->left)
				n = (size_t)c->left;
			if (c->total + n > c->max_body)
				return ck_fail(c, 413, "request body too large");
			memmove(out + o, in + pos, n);
			o += n;
			pos += n;
			c->total += n;
			c->left -= n;
			*nout = o;
			if (c->left == 0)
				c->state = CK_DATA_CR;
			continue;
		}
		pos++;
		switch (c->state) {
		case CK_SIZE:
		case CK_EXT_BWS:
		case CK_EXT:
			if (++c->line > HTTP_REQ_CHUNK_LINE_MAX)
				return ck_fail(c, 400, "chunk size line too long");
			if (ch == '\r') {
				if (c->digits == 0)
					return ck_fail(c, 400, "missing chunk size");
				c->state = CK_SIZE_LF;
			} else if (c->state == CK_SIZE && (cls[ch] & C_HEX)) {
				if (c->digits == 16)
					return ck_fail(c, 400, "chunk size overflow");
				c->digits++;
				c->left = (c->left << 4) | (uint64_t)hexval(ch);
			} else if (c->state != CK_EXT && (ch == ' ' || ch == '\t') && c->digits > 0) {
				c->state = CK_EXT_BWS;
			} else if (c->state != CK_EXT && ch == ';' && c->digits > 0) {
				c->state = CK_EXT;
			} else if (c->state == CK_EXT && (cls[ch] & C_VALUE)) {
				;
			} else {
				return ck_fail(c, 400, "malformed chunk size line");
			}
			break;
		case CK_SIZE_LF:
			if (ch != '\n')
				return ck_fail(c, 400, "bare CR in chunk framing");
			c->line = 0;
			c->digits = 0;
			if (c->left > c->max_body - c->total)
				return ck_fail(c, 413, "request body too large");
			c->state = c->left == 0 ? CK_TR_START : CK_DATA;
			break;
		case CK_DATA_CR:
			if (ch != '\r')
				return ck_fail(c, 400, "chunk data not followed by CRLF");
			c->state = CK_DATA_LF;
			break;
		case CK_DATA_LF:
			if (ch != '\n')
				return ck_fail(c, 400, "chunk data not followed by CRLF");
			c->state = CK_SIZE;
			break;
		case CK_TR_START:
			if (++c->trailer_bytes > HTTP_REQ_TRAILER_MAX)
				return ck_fail(c, 400, "trailer section too large");
			if (ch == '\r') {
				c->state = CK_END_LF;
			} else if (cls[ch] & C_TCHAR) {
				if (++c->ntrailers > HTTP_REQ_MAX_TRAILERS)
					return ck_fail(c, 400, "too many trailer fields");
				c->state = CK_TR_NAME;
			} else {
				return ck_fail(c, 400, "malformed trailer field");
			}
			break;
		case CK_TR_NAME:
			if (++c->trailer_bytes > HTTP_REQ_TRAILER_MAX)
				return ck_fail(c, 400, "trailer section too large");
			if (ch == ':')
				c->state = CK_TR_VALUE;
			else if (!(cls[ch] & C_TCHAR))
				return ck_fail(c, 400, "malformed trailer field");
			break;
		case CK_TR_VALUE:
			if (++c->trailer_bytes > HTTP_REQ_TRAILER_MAX)
				return ck_fail(c, 400, "trailer section too large");
			if (ch == '\r')
				c->state = CK_TR_LF;
			else if (!(cls[ch] & C_VALUE))
				return ck_fail(c, 400, "malformed trailer field");
			break;
		case CK_TR_LF:
			if (ch != '\n')
				return ck_fail(c, 400, "bare CR in trailers");
			c->state = CK_TR_START;
			break;
		case CK_END_LF:
			if (ch != '\n')
				return ck_fail(c, 400, "bare CR at the end of the body");
			c->state = CK_DONE;
			c->done = 1;
			break;
		}
	}
	*nout = o;
	return (int)pos;
}
