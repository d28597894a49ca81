#ifndef ABX_ERR_H
#define ABX_ERR_H
/*
 * Errors: core functions never exit and never print to stdout. They return a
 * status and fill a struct err that the caller owns. Only applets turn errors
 * into exit codes.
 */
#include <stdarg.h>
#include <stddef.h>

/* A message names its cause and what to act on. Every message the
 * integration tests meet is under 450 bytes (the longest: a read-only
 * tools directory with its remedy; then checksum mismatches, a URL and two
 * digests); the longest format is ~300 bytes. A struct err lives on many
 * stacks (serve's worker threads among them), so a message that does not
 * fit (a path of thousands of bytes, nested causes) is made to fit by one
 * rule, in one place (err_fmtv): its paths (runs without spaces that hold
 * a '/': paths, URLs) longer than a common length, the longest that makes
 * room but not under 48 bytes, lose their middle to an ellipsis (U+2026),
 * cut at '/' where that costs little, keeping the head and the last
 * component (the file's name); all other text stays. What still does not
 * fit is cut at its end, at a character boundary, and ends in the
 * ellipsis. Nothing err_fmtv removes goes without the mark. */
#define ERR_MSG_MAX 512
/* Room for details a caller keeps: a small JSON object, e.g. {"phase":"fetch"}. */
#define ERR_DETAILS_MAX 512

/*
 * Details (a JSON object text) go to a buffer the caller supplies where it
 * shows them (err_keep_details): an API answer, --json output. Without one
 * (details NULL, as a zeroed struct err has) details are not kept. Every
 * struct err starts zeroed (`struct err e = {0};`, calloc), so that details
 * is NULL or the caller's buffer: err_set and its kin empty that buffer.
 */
struct err {
	const char *code; /* a code of core/base/errcodes.h; NULL = none */
	/* What the code alone does not carry, for callers that act on it
	 * (never the message text, which may be cut or translated): */
	int sys;                    /* the errno behind an io failure, 0 if none */
	unsigned short details_cap; /* details' room, NUL included */
	const char *cause;          /* the innermost code an err_wrap() wrapped, or NULL */
	char *details;              /* the caller's buffer for details, or NULL */
	char msg[ERR_MSG_MAX];      /* the specific message, no code prefix */
};

struct err_info {
	const char *code;
	int status;           /* HTTP status the API answers with */
	const char *sentence; /* generic sentence, used when msg is empty */
	const char *remedy;   /* one-line fix, or NULL */
};

/* vsnprintf into buf (cap bytes, more than 64), a message that does not
 * fit made to fit by the rule above (ERR_MSG_MAX); buf must not be among
 * the arguments. Returns the length written. For err_set and its kin, and
 * for message lines kept outside a struct err (configuration warnings). */
int err_fmtv(char *buf, size_t cap, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

/* Set e (if not NULL) to code with a printf-style message, sys 0 and no
 * cause. Returns -1 so callers can `return err_set(...)`. code must be a
 * static string. The arguments may name e->msg: the message is formatted
 * aside, then copied. */
int err_set(struct err *e, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int err_setv(struct err *e, const char *code, const char *fmt, va_list ap);

/* err_set() that also records errnum (an errno) in e->sys, for callers that
 * tell a full disk from other io failures. */
int err_sys(struct err *e, const char *code, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Replace e's code and message but keep what it wraps: e->sys stays, and
 * e->cause becomes the innermost wrapped code (the old cause, else the old
 * code when it differs from code). fmt may name e->msg. */
int err_wrap(struct err *e, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The code e stands for at its root: its cause, else its code (NULL if none). */
const char *err_root(const struct err *e);

/* Keep e's details in buf (cap bytes, at most 65535), emptied now; NULL buf:
 * details are not kept. buf must outlive e's use, and a copy of e
 * (err_copy) keeps its own. */
void err_keep_details(struct err *e, char *buf, size_t cap);

/* e's details: the JSON object text, or "" when there are none or none are
 * kept. */
const char *err_details_text(const struct err *e);

/* Copy src into dst (code, message, errno, cause), src's details into
 * dst's own buffer (dst keeps its buffer, or keeps no details); dst may
 * share src's buffer. The one way to copy a struct err: an assignment
 * would copy the pointer to src's buffer. */
void err_copy(struct err *dst, const struct err *src);

/* Set e's details to a JSON object text (not validated; callers build it
 * with json_w, or copy another err's). Text that does not fit is replaced
 * by "{}"; no buffer: nothing kept. */
void err_details(struct err *e, const char *json_object);

/* Details member by member (err_detail.c): "key": value appended to e's
 * details, the object started on first use (err_set and its kin empty
 * it). Keys and strings are escaped as the JSON writer escapes them, so any
 * path, URL or message is safe here. A member that would not fit the
 * buffer is left out whole: details stay one valid object. Each returns
 * 0, or -1 when the member was left out (no buffer kept: always -1). */
int err_detail_str(struct err *e, const char *key, const char *s); /* NULL s: null */
int err_detail_int(struct err *e, const char *key, long long v);
/* value: a JSON value a json_w wrote (array, object), not checked. */
int err_detail_json(struct err *e, const char *key, const char *value);

/* Empty e (code, message, errno, cause and details); its buffer stays. */
void err_clear(struct err *e);

/* The table entry for code; an unknown code answers the "internal" entry. */
const struct err_info *err_info(const char *code);

/* All entries, for doctor and documentation; *n receives the count. */
const struct err_info *err_table(int *n);

/* Format "agent-sandbox-server: <code>: <msg>\n[  fix: <remedy>\n]" into buf.
 * Returns the length (truncated to cap-1). */
int err_format(const struct err *e, char *buf, int cap);

/* Write err_format()'s text to fd 2 with a single write(2) so concurrent
 * threads never interleave. */
void err_print(const struct err *e);

/* Print "agent-sandbox-server: <code>: <printf message>" to stderr in one
 * write, with the code's remedy. For applets and warnings. */
void err_printf(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A warning line "agent-sandbox-server: warning: ..." in one write. */
void warnx_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A notice "agent-sandbox-server: ..." (what was done) in one write. */
void note_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
