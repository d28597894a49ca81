/*
 * Agent sessions: a table of slots, a thread per running session, journals.
 */
#include "sessions.h"

/* Copies into fixed fields (ids, names, times) cut what cannot fit. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"
#include "json.h"
#include "npm.h"
#include "proc.h"

/* A session thread keeps proc's read buffer and two line buffers. */
#define SESSION_STACK_SIZE (256u << 10)
/* The child's pipes and one read from them (heap): 256 KiB is 4000 lines
 * of 64 bytes per pass of on_output. */
#define SESSION_READ_BUF (256u << 10)
/* The stage (formatted events of one read) kept between reads: a read of
 * 64-byte lines needs about 600 KiB. */
#define SESSION_STAGE_KEEP (1u << 20)
/* Room above the journal limit for the events that end a session
 * (truncated, exited, interrupted): they are always written. */
#define SESSION_TAIL_RESERVE 4096

/* A decimal counter kept as text: the next number costs an increment of
 * its last digits, not a conversion (a stream writes an id per event). */
struct dec {
	uint32_t v;
	size_t n;        /* 0: not set */
	char d[12];
};

struct slot {
	int used;
	struct session_view v;
	struct journal j;
	pthread_cond_t cv;
	int64_t created_ms;        /* realtime, for eviction order */
	int inited;                /* cv initialised (slot_init) */
	int running;               /* a thread works on it: the slot is not free (see live()) */
	int holds;                 /* readers that must not see it evicted */
	int cancel;                /* cancel or shutdown asked */
	int shutdown;              /* ... by the server stopping: interrupted */
	uint64_t dropped;          /* output bytes not journaled (over the limit) */
	/* The thread's own, set before it starts. */
	char **argv;
	int argc;
	int bin_at;                /* the argv word the entry takes, -1 = none */
	char **envp;
	struct launch_tool *tool;  /* NULL = none */
	char *cwd;
	struct install_settings *set;
	char op[128];
	struct sessions *S;
	struct json_w ow;          /* the thread's writer for output events */
	int64_t tms;               /* fmt_time cache: the ms of tstr */
	char tstr[32];
	int tfixed;                /* on_output: tstr is the time of this chunk */
	struct dec seq;            /* emit_output_fast's last seq, as text */
	/* on_output formats a chunk's events here without the lock, then
	 * hands them to the journal at once (struct stage). */
	int staging;
	struct stage {
		char *buf;
		size_t len, cap;
		uint32_t *off;
		uint32_t n, offcap;
		int truncated;     /* the chunk crossed the journal limit */
	} st;
	/* Line assembly per stream (the thread's). */
	char *line[3];
	size_t llen[3];
};

struct sessions {
	pthread_mutex_t mu;
	struct sessions_config c;
	char dir[4096];
	struct jobs *J;
	int streams;
	uint64_t created, events;
	struct slot slot[SESSIONS_KEEP];
};

static const char *const status_names[] = {"in_progress", "completed", "failed", "cancelled", "interrupted"};

const char *
session_status_name(enum session_status s)
{
	return (unsigned)s < 5 ? status_names[s] : "?";
}

static int
status_parse(const char *s, enum session_status *out)
{
	int i;

	for (i = 0; i < 5; i++)
		if (strcmp(s, status_names[i]) == 0) {
			*out = (enum session_status)i;
			return 0;
		}
	return -1;
}

static int64_t
real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* RFC 3339 UTC with milliseconds. */
static void
fmt_time(int64_t ms, char *buf, size_t cap)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		 tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

struct sessions *
sessions_new(const struct sessions_config *c, struct jobs *J)
{
	struct sessions *S = calloc(1, sizeof(*S));

	if (S == NULL)
		return NULL;
	pthread_mutex_init(&S->mu, NULL);
	S->c = *c;
	if (c->dir != NULL) {
		snprintf(S->dir, sizeof(S->dir), "%s", c->dir);
		S->c.dir = S->dir;
	}
	if (S->c.journal_max == 0)
		S->c.journal_max = SESSIONS_JOURNAL_MAX_DEFAULT;
	S->J = J;
	/* Slots are set up when first used (slot_init): the table's pages
	 * stay untouched, and out of serve's resident memory, until then. */
	return S;
}

static struct slot *
find(struct sessions *S, const char *agent, const char *id)
{
	int i;

	for (i = 0; i < SESSIONS_KEEP; i++) {
		struct slot *s = &S->slot[i];

		if (s->used && strcmp(s->v.id, id) == 0 && (agent == NULL || strcmp(s->v.agent, agent) == 0))
			return s;
	}
	return NULL;
}

static void
slot_init(struct slot *s)
{
	if (!s->inited) {
		pthread_cond_init(&s->cv, NULL);
		s->inited = 1;
	}
}

/* ---- events (under S->mu) ----------------------------------------------- */

/* ---- the events a session thread writes ----------------------------------
 *
 * Outside on_output, events go straight into the journal under S->mu. In
 * on_output (s->staging) they are formatted into s->st without the lock
 * and reach the journal together (stage_commit): the stream threads
 * reading the journal wait for the lock only while a chunk is copied in,
 * not while it is formatted and written to the file. Only the session
 * thread appends to its journal, so it reads the journal's counts without
 * the lock; what readers see (the journal, s->v) changes under it.
 */

static uint32_t
next_seq(const struct slot *s)
{
	return journal_count(&s->j) + (s->staging ? s->st.n : 0) + 1;
}

static size_t
bytes_now(const struct slot *s)
{
	return journal_bytes(&s->j) + (s->staging ? s->st.len : 0);
}

static int
is_truncated(const struct slot *s)
{
	return s->v.truncated || (s->staging && s->st.truncated);
}

static void
set_truncated(struct slot *s)
{
	if (s->staging)
		s->st.truncated = 1;
	else
		s->v.truncated = 1;
}

/* Where the next line goes, with room for len bytes and its newline; NULL
 * when there is none (over the caps, out of memory). */
static char *
out_reserve(struct slot *s, size_t len)
{
	struct stage *g = &s->st;

	if (!s->staging)
		return journal_reserve(&s->j, len);
	if (len >= JOURNAL_LINE_MAX)
		return NULL;
	if (g->len + len + 1 > g->cap) {
		size_t nc = g->cap ? g->cap : 65536;
		char *nb;

		while (nc < g->len + len + 1)
			nc *= 2;
		if ((nb = realloc(g->buf, nc)) == NULL)
			return NULL;
		g->buf = nb;
		g->cap = nc;
	}
	if (g->n == g->offcap) {
		uint32_t nc = g->offcap ? g->offcap * 2 : 1024, *no = realloc(g->off, nc * sizeof(*no));

		if (no == NULL)
			return NULL;
		g->off = no;
		g->offcap = nc;
	}
	return g->buf + g->len;
}

/* The line of n bytes written at out_reserve's place is an event (n under
 * the room reserved; checked by the caller). */
static void
out_commit(struct slot *s, size_t n)
{
	struct stage *g = &s->st;
	struct err e;

	if (!s->staging) {
		if (journal_commit(&s->j, n, &e) > 0) {
			s->v.events = journal_count(&s->j);
			s->S->events++;
		}
		return;
	}
	g->buf[g->len + n] = '\n';
	g->off[g->n++] = (uint32_t)g->len;
	g->len += n + 1;
}

/* An event line made elsewhere (emit): the journal's checks, then in. */
static void
out_append(struct slot *s, const char *line, size_t n)
{
	struct err e;
	char *o;

	if (!s->staging) {
		if (journal_append(&s->j, line, n, &e) > 0) {
			s->v.events = journal_count(&s->j);
			s->S->events++;
		}
		return;
	}
	if (n == 0 || n >= JOURNAL_LINE_MAX || memchr(line, '\n', n) != NULL || (o = out_reserve(s, n)) == NULL)
		return;
	memcpy(o, line, n);
	out_commit(s, n);
}

/* The staged events join the journal (the file first), and readers are
 * woken. Takes S->mu. */
static void
stage_commit(struct slot *s)
{
	struct stage *g = &s->st;
	struct sessions *S = s->S;
	uint32_t n;
	size_t len;
	int pre;

	if (g->n == 0 && !g->truncated)
		return;   /* only part of a line: nothing to announce */
	pthread_mutex_lock(&S->mu);
	if (g->truncated)
		s->v.truncated = 1;
	n = g->n > 0 ? journal_reserve_lines(&s->j, g->len, g->n) : 0;
	pthread_mutex_unlock(&S->mu);
	/* Past JOURNAL_LINES_MAX what does not fit is lost, as one append at
	 * a time would lose it. */
	len = n == g->n ? g->len : n > 0 ? g->off[n] : 0;
	pre = n > 0 && journal_prewrite(&s->j, g->buf, len);
	pthread_mutex_lock(&S->mu);
	if (n > 0 && journal_append_lines(&s->j, g->buf, len, g->off, n, pre) > 0) {
		s->v.events = journal_count(&s->j);
		S->events += n;
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&S->mu);
	g->len = 0;
	g->n = 0;
	g->truncated = 0;
	/* A burst of tiny lines can blow the stage up (to the journal limit
	 * at most): keep only a usual chunk's worth for the next read. */
	if (g->cap > SESSION_STAGE_KEEP) {
		free(g->buf);
		free(g->off);
		g->buf = NULL;
		g->off = NULL;
		g->cap = 0;
		g->offcap = 0;
	}
}

/*
 * Append an event: {"seq","type","time", members of extra (a JSON object's
 * inside, "" for none), "status" when status >= 0}. Output events obey the
 * journal limit (the first one over it is replaced by one truncated event);
 * other events always go in.
 */
static void
emit(struct slot *s, const char *type, const char *extra, int status, int is_output, size_t data_len)
{
	char small[1024], *line;
	size_t cap = strlen(extra) + 256, max = s->S->c.journal_max;
	int64_t now;
	int n;

	if (is_output && is_truncated(s)) {
		s->dropped += data_len;
		return;
	}
	if (is_output && bytes_now(s) + cap > max) {
		char x[128];

		set_truncated(s);
		s->dropped += data_len;
		snprintf(x, sizeof(x), "\"limit_bytes\":%zu", max);
		emit(s, "agent.session.truncated", x, -1, 0, 0);
		return;
	}
	line = cap <= sizeof(small) ? small : malloc(cap);
	if (line == NULL)
		return;
	/* Lines come in bursts: format the time once per millisecond. */
	now = real_ms();
	if (now != s->tms) {
		fmt_time(now, s->tstr, sizeof(s->tstr));
		s->tms = now;
	}
	n = snprintf(line, cap, "{\"seq\":%u,\"type\":\"%s\",\"time\":\"%s\"%s%s", next_seq(s), type,
		     s->tstr, extra[0] != '\0' ? "," : "", extra);
	if (status >= 0)
		n += snprintf(line + n, cap - (size_t)n, ",\"status\":\"%s\"", status_names[status]);
	n += snprintf(line + n, cap - (size_t)n, "}");
	if ((size_t)n < cap)
		out_append(s, line, (size_t)n);
	if (line != small)
		free(line);
	if (status >= 0)
		s->v.status = (enum session_status)status;
	/* Output is announced once per chunk read (on_output). */
	if (!is_output && !s->staging)
		pthread_cond_broadcast(&s->cv);
}

/* The two-byte JSON escape of c, 0 for none (other control bytes and
 * UTF-8 are left to the JSON writer). */
static char
short_escape(unsigned char c)
{
	switch (c) {
	case '"': return '"';
	case '\\': return '\\';
	case '\b': return 'b';
	case '\f': return 'f';
	case '\n': return 'n';
	case '\r': return 'r';
	case '\t': return 't';
	}
	return 0;
}

/* Decimal digits of v at o; their count. v / 10 as a multiply and shift
 * (exact for every 32-bit v): -Os would make it a divide, per digit, per
 * event. */
static size_t
put_u32(char *o, uint32_t v)
{
	char t[10];
	size_t n = 0, k;
	uint32_t q;

	do {
		q = (uint32_t)(((uint64_t)v * 3435973837u) >> 35);
		t[n++] = (char)('0' + (v - q * 10));
		v = q;
	} while (v != 0);
	for (k = 0; k < n; k++)
		o[k] = t[n - 1 - k];
	return n;
}

/* The text of v into o; its length. */
static size_t
dec_put(struct dec *c, uint32_t v, char *o)
{
	size_t i;

	if (c->n == 0 || v != c->v + 1) {
		c->n = put_u32(c->d, v);
	} else {
		for (i = c->n; i > 0 && c->d[i - 1] == '9'; i--)
			c->d[i - 1] = '0';
		if (i > 0) {
			c->d[i - 1]++;
		} else {
			memmove(c->d + 1, c->d, c->n);
			c->d[0] = '1';
			c->n++;
		}
	}
	c->v = v;
	memcpy(o, c->d, c->n);
	return c->n;
}

/* Bytes copied as they are into a JSON string: printable ASCII (and DEL)
 * but '"' and '\\'. A bit map: one load and a shift per byte. */
static const uint64_t plain_map[4] = {0xfffffffb00000000ull, 0xffffffffefffffffull, 0, 0};
#define PLAIN(c) ((plain_map[(c) >> 6] >> ((c) & 63)) & 1)

/* Whether the 8 bytes of w are all PLAIN: none >= 0x80, none < 0x20, none
 * '"' or '\\' (the has-less and has-zero-byte word tests, exact once no
 * byte has its top bit). */
static inline int
plain8(uint64_t w)
{
	const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
	uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');

	return ((w | ((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((b - ones) & ~b)) & high) == 0;
}

/*
 * emit_output's fast path: the event written straight into the journal,
 * byte for byte what the JSON writer and emit would make of it. Returns 0
 * when done, 1 when the data is not plain ASCII (or the event would cross
 * the journal limit, or the journal has no room): then nothing was added
 * and the caller takes the general path.
 *
 * With to_nl set, data[0..n) is the rest of a chunk and the event is its
 * first line: the bytes before the first '\n', found in the same pass
 * that copies them (no memchr first); *used gets the line's length and
 * its newline. A line longer than SESSION_EVENT_DATA_MAX or without its
 * newline in data returns 1 too (the caller then splits it as before).
 */
static int
emit_output_fast(struct slot *s, int i, const char *data, size_t n, int partial, int to_nl, size_t *used)
{
	static const char pre[] = ",\"type\":\"agent.session.output\",\"time\":\"";
	static const char out[] = "\"stream\":\"stdout\",\"data\":\"";
	static const char err[] = "\"stream\":\"stderr\",\"data\":\"";
	const unsigned char *p = (const unsigned char *)data, *end, *run;
	size_t tl, worst;
	char *line, *o, *extra;
	int64_t now;

	if (!s->tfixed) {
		now = real_ms();
		if (now != s->tms) {
			fmt_time(now, s->tstr, sizeof(s->tstr));
			s->tms = now;
		}
	}
	tl = strlen(s->tstr);
	/* A line ends at most SESSION_EVENT_DATA_MAX bytes in. */
	if (to_nl && n > SESSION_EVENT_DATA_MAX + 1)
		n = SESSION_EVENT_DATA_MAX + 1;
	end = p + n;
	/* Two bytes per data byte at most here (others go the general way). */
	worst = 64 + sizeof(pre) + tl + sizeof(out) + 2 * n + 32;
	if ((line = out_reserve(s, worst)) == NULL)
		return 1;
	o = line;
	memcpy(o, "{\"seq\":", 7);
	o += 7;
	o += dec_put(&s->seq, next_seq(s), o);
	memcpy(o, pre, sizeof(pre) - 1);
	o += sizeof(pre) - 1;
	memcpy(o, s->tstr, tl);
	o += tl;
	*o++ = '"';
	*o++ = ',';
	extra = o;
	memcpy(o, i == PROC_STDOUT ? out : err, sizeof(out) - 1);
	o += sizeof(out) - 1;
	while (p < end) {
		uint64_t w8;

		/* Eight bytes at a time while they are plain, then byte by byte
		 * up to the next byte that is not. */
		while (end - p >= 8 && (memcpy(&w8, p, 8), plain8(w8))) {
			memcpy(o, p, 8);
			o += 8;
			p += 8;
		}
		run = p;
		while (p < end && PLAIN(*p))
			p++;
		memcpy(o, run, (size_t)(p - run));
		o += p - run;
		if (p >= end)
			break;
		if (to_nl && *p == '\n')
			break;
		if ((o[1] = short_escape(*p)) == 0)
			return 1;
		o[0] = '\\';
		o += 2;
		p++;
	}
	if (to_nl) {
		if (p >= end)
			return 1;
		*used = (size_t)(p + 1 - (const unsigned char *)data);
	}
	*o++ = '"';
	if (partial) {
		memcpy(o, ",\"partial\":true", 15);
		o += 15;
	}
	/* emit's limit: the members plus 256 must fit under the limit. */
	if (bytes_now(s) + (size_t)(o - extra) + 256 > s->S->c.journal_max)
		return 1;
	*o++ = '}';
	out_commit(s, (size_t)(o - line));
	return 0;
}

/* One output event for data[0..n) of stream i, partial or not. Caller
 * holds S->mu. */
static void
emit_output(struct slot *s, int i, const char *data, size_t n, int partial)
{
	struct json_w *w = &s->ow;

	if (is_truncated(s)) {
		s->dropped += n;
		return;
	}
	if (emit_output_fast(s, i, data, n, partial, 0, NULL) == 0)
		return;
	/* Reuse the writer's buffer: reset its state, keep its memory. */
	w->len = 0;
	w->depth = 0;
	w->overflow = 0;
	w->after_key = 0;
	memset(w->need_comma, 0, sizeof(w->need_comma));
	json_w_obj(w);
	json_w_kstr(w, "stream", i == PROC_STDOUT ? "stdout" : "stderr");
	json_w_key(w, "data");
	json_w_strn(w, data, n);
	if (partial)
		json_w_kbool(w, "partial", 1);
	json_w_end(w);
	if (!w->overflow && w->len >= 2) {
		/* The members without the braces. */
		w->buf[w->len - 1] = '\0';
		emit(s, "agent.session.output", w->buf + 1, -1, 1, n);
	}
}

/* Where to cut a too-long line so a UTF-8 sequence is not split: back up
 * over at most 3 continuation bytes. */
static size_t
utf8_cut(const char *p, size_t n)
{
	size_t k = n;
	int back = 0;

	while (k > 0 && back < 3 && ((unsigned char)p[k] & 0xc0) == 0x80) {
		k--;
		back++;
	}
	return k > 0 && back < 3 ? k : n;
}

struct sink_ctx {
	struct slot *s;
};

/* proc's sink: split into lines (runs on the session thread). */
static void
on_output(void *arg, enum proc_stream st, const char *data, size_t len)
{
	struct slot *s = ((struct sink_ctx *)arg)->s;
	int i = (int)st;
	char *lb = s->line[i];
	const char *p = data, *end = data + len, *nl;
	int64_t now;
	size_t k;

	/* Formatted without the lock (see stage_commit). */
	s->staging = 1;
	/* Every line of one read is stamped with the time it was read. */
	now = real_ms();
	if (now != s->tms) {
		fmt_time(now, s->tstr, sizeof(s->tstr));
		s->tms = now;
	}
	s->tfixed = 1;
	while (p < end) {
		if (s->llen[i] == 0 && !is_truncated(s) &&
		    emit_output_fast(s, i, p, (size_t)(end - p), 0, 1, &k) == 0) {
			/* The common case: a whole plain line, copied once. */
			p += k;
			continue;
		}
		nl = memchr(p, '\n', (size_t)(end - p));
		k = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
		if (s->llen[i] == 0 && nl != NULL && k <= SESSION_EVENT_DATA_MAX) {
			/* The common case: a whole line in the chunk, no copy. */
			emit_output(s, i, p, k, 0);
			p = nl + 1;
			continue;
		}
		while (k > 0) {
			size_t room = SESSION_EVENT_DATA_MAX - s->llen[i], take = k < room ? k : room;

			memcpy(lb + s->llen[i], p, take);
			s->llen[i] += take;
			p += take;
			k -= take;
			if (s->llen[i] == SESSION_EVENT_DATA_MAX && (k > 0 || nl == NULL)) {
				size_t cut = utf8_cut(lb, s->llen[i]);

				emit_output(s, i, lb, cut, 1);
				memmove(lb, lb + cut, s->llen[i] - cut);
				s->llen[i] -= cut;
			}
		}
		if (nl != NULL) {
			emit_output(s, i, lb, s->llen[i], 0);
			s->llen[i] = 0;
			p = nl + 1;
		}
	}
	s->tfixed = 0;
	s->staging = 0;
	stage_commit(s);
}

/* ---- the session thread --------------------------------------------------- */

static int
fill_pid_start(pid_t pid, unsigned long long *start)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* Field 2 (comm) may hold spaces and parentheses: count from the
	 * last ')'. starttime is field 22. */
	p = strrchr(buf, ')');
	if (p == NULL)
		return -1;
	for (field = 2; field < 22 && p != NULL; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL)
		return -1;
	*start = strtoull(p + 1, NULL, 10);
	return 0;
}

static void
fail_env(struct slot *s, const struct err *e)
{
	struct json_w w;

	json_w_init(&w, 2048);
	json_w_obj(&w);
	json_w_kstr(&w, "code", e->code != NULL ? e->code : "install.failed");
	json_w_kstr(&w, "message", e->msg);
	json_w_end(&w);
	pthread_mutex_lock(&s->S->mu);
	snprintf(s->v.error, sizeof(s->v.error), "%s", e->code != NULL ? e->code : "install.failed");
	if (!w.overflow) {
		w.buf[w.len - 1] = '\0';
		emit(s, "agent.session.environment.failed", w.buf + 1, SESSION_FAILED, 0, 0);
	}
	pthread_mutex_unlock(&s->S->mu);
	json_w_free(&w);
}

/* End a session that never started a child (cancelled while waiting). */
static void
end_unstarted(struct slot *s)
{
	pthread_mutex_lock(&s->S->mu);
	fmt_time(real_ms(), s->v.ended_at, sizeof(s->v.ended_at));
	if (s->shutdown)
		emit(s, "agent.session.interrupted", "\"reason\":\"server stopped\"", SESSION_INTERRUPTED, 0, 0);
	else
		emit(s, "agent.session.cancelled", "", SESSION_CANCELLED, 0, 0);
	pthread_mutex_unlock(&s->S->mu);
}

/* Wait for the install job: 0 ready (entry), 1 cancelled, -1 failed. */
static int
wait_install(struct slot *s, char *entry, size_t cap)
{
	struct sessions *S = s->S;
	struct job_view *v = malloc(sizeof(*v));
	struct err e;
	int rc, cancel;

	if (v == NULL) {
		err_set(&e, "internal", "out of memory");
		fail_env(s, &e);
		return -1;
	}
	for (;;) {
		pthread_mutex_lock(&S->mu);
		cancel = s->cancel;
		pthread_mutex_unlock(&S->mu);
		if (cancel) {
			free(v);
			return 1;
		}
		err_clear(&e);
		rc = jobs_need(S->J, s->set, s->v.agent, s->v.principal, s->op, SESSION_POLL_MS, v, &e);
		if (rc == 1)
			continue;
		break;
	}
	if (rc != 0) {
		fail_env(s, &e);
		free(v);
		return -1;
	}
	snprintf(entry, cap, "%s", v->entry);
	free(v);
	pthread_mutex_lock(&S->mu);
	emit(s, "agent.session.environment.ready", "", -1, 0, 0);
	pthread_mutex_unlock(&S->mu);
	return 0;
}

/* The node that runs a JavaScript entry: node-runtime's (or an acceptable
 * one on PATH), ready without waiting (it is installed with the agent that
 * requires it). 0, or -1 after failing the session. */
static int
node_entry(struct slot *s, char *out, size_t cap)
{
	struct job_view *v = malloc(sizeof(*v));
	struct err e;
	int rc;

	err_clear(&e);
	if (v == NULL) {
		err_set(&e, "internal", "out of memory");
		fail_env(s, &e);
		return -1;
	}
	rc = jobs_need(s->S->J, s->set, "node-runtime", s->v.principal, s->op, 0, v, &e);
	if (rc == 0)
		snprintf(out, cap, "%s", v->entry);
	else {
		if (rc == 1)
			err_set(&e, "install.pending", "node-runtime is still being installed");
		fail_env(s, &e);
	}
	free(v);
	return rc == 0 ? 0 : -1;
}

static void
run_child(struct slot *s, const char *entry, const char *node, char **flags, int nflags)
{
	struct sessions *S = s->S;
	char *argv[SESSION_ARGV_MAX + NPM_NODE_FLAGS_MAX + 2];
	struct sink_ctx sc = {s};
	unsigned long long pstart = 0;
	struct proc_spec spec;
	struct proc p;
	struct err e;
	char x[256], **env, tpath[4096];
	struct tools_chain *chain;
	int i, k, cancel_seen = 0, cancelled = 0, shutdown = 0, code;
	enum session_status st;

	k = 0;
	if (node != NULL) {
		/* A JavaScript entry runs as <node> [shebang options] <script>
		 * ARGS, as the shim runs it: no /usr/bin/env, no shell. */
		argv[k++] = (char *)node;
		for (i = 0; i < nflags; i++)
			argv[k++] = flags[i];
	}
	for (i = 0; i < s->argc; i++)
		argv[k++] = i == s->bin_at ? (char *)entry : s->argv[i];
	argv[k] = NULL;
	memset(&spec, 0, sizeof(spec));
	spec.argv = argv;
	/* The manifest's env only once the entry is known: a copy from PATH
	 * runs without it (core/launch.h). */
	tpath[0] = '\0';
	if ((chain = malloc(sizeof(*chain))) != NULL && tools_chain_build(chain, s->set, 0, &e) == 0)
		launch_tools_path(chain, tpath, sizeof(tpath));
	free(chain);
	env = launch_env(s->tool, entry, s->envp, tpath);
	spec.envp = env != NULL ? env : s->envp;
	spec.cwd = s->cwd;
	spec.kill_grace_ms = S->c.kill_grace_ms;
	err_clear(&e);
	if (env == NULL)
		err_set(&e, "internal", "out of memory");
	if (env == NULL || proc_spawn(&p, &spec, &e) != 0) {
		struct json_w w;

		json_w_init(&w, 2048);
		json_w_obj(&w);
		json_w_kstr(&w, "code", e.code);
		json_w_kstr(&w, "message", e.msg);
		json_w_end(&w);
		pthread_mutex_lock(&S->mu);
		snprintf(s->v.error, sizeof(s->v.error), "%s", e.code);
		fmt_time(real_ms(), s->v.ended_at, sizeof(s->v.ended_at));
		if (!w.overflow) {
			w.buf[w.len - 1] = '\0';
			emit(s, "agent.session.start_failed", w.buf + 1, SESSION_FAILED, 0, 0);
		}
		pthread_mutex_unlock(&S->mu);
		json_w_free(&w);
		launch_env_free(env);
		return;
	}
	launch_env_free(env);
	/* Big reads: a child that writes fast fills the pipe, and each read
	 * is one pass of on_output (lock, journal write, wake-up). */
	for (i = 1; i <= 2; i++)
		(void)fcntl(p.fd[i], F_SETPIPE_SZ, (int)SESSION_READ_BUF);
	p.rbuf = malloc(SESSION_READ_BUF);
	p.rbuf_len = p.rbuf != NULL ? SESSION_READ_BUF : 0;
	fill_pid_start(p.pid, &pstart);
	pthread_mutex_lock(&S->mu);
	fmt_time(real_ms(), s->v.started_at, sizeof(s->v.started_at));
	snprintf(x, sizeof(x), "\"pid\":%d,\"pid_start\":%llu", (int)p.pid, pstart);
	emit(s, "agent.session.started", x, -1, 0, 0);
	pthread_mutex_unlock(&S->mu);

	for (;;) {
		if (!cancel_seen) {
			pthread_mutex_lock(&S->mu);
			cancelled = s->cancel;
			shutdown = s->shutdown;
			pthread_mutex_unlock(&S->mu);
			if (cancelled) {
				cancel_seen = 1;
				proc_kill(&p, SIGTERM);
				p.kill_at_ms = clock_ms() + p.grace_ms;
				p.deadline_ms = 0;
			}
		}
		if (proc_step(&p, cancel_seen ? 50 : SESSION_POLL_MS, on_output, &sc) == 0)
			break;
	}
	code = proc_exit_code(&p);
	pthread_mutex_lock(&S->mu);
	/* What is left without a newline is a last line. */
	for (i = 1; i <= 2; i++)
		if (s->llen[i] > 0) {
			emit_output(s, i, s->line[i], s->llen[i], 0);
			s->llen[i] = 0;
		}
	if (s->dropped > 0) {
		snprintf(x, sizeof(x), "\"dropped_bytes\":%llu", (unsigned long long)s->dropped);
		emit(s, "agent.session.output_dropped", x, -1, 0, 0);
	}
	s->v.exited = 1;
	s->v.exit_code = code;
	s->v.duration_ms = proc_elapsed_ms(&p);
	fmt_time(real_ms(), s->v.ended_at, sizeof(s->v.ended_at));
	st = shutdown ? SESSION_INTERRUPTED : cancelled ? SESSION_CANCELLED
		       : code == 0		  ? SESSION_COMPLETED
						  : SESSION_FAILED;
	if (WIFSIGNALED(p.status))
		snprintf(x, sizeof(x), "\"exit_code\":%d,\"signal\":%d,\"duration_ms\":%lld", code,
			 WTERMSIG(p.status), (long long)s->v.duration_ms);
	else
		snprintf(x, sizeof(x), "\"exit_code\":%d,\"duration_ms\":%lld", code, (long long)s->v.duration_ms);
	emit(s, "agent.session.exited", x, (int)st, 0, 0);
	pthread_mutex_unlock(&S->mu);
	free(p.rbuf);
	p.rbuf = NULL;
	proc_close(&p);
}

static void
free_run(struct slot *s)
{
	int i;

	for (i = 0; s->argv != NULL && i < s->argc; i++)
		free(s->argv[i]);
	free(s->argv);
	for (i = 0; s->envp != NULL && s->envp[i] != NULL; i++)
		free(s->envp[i]);
	free(s->envp);
	free(s->tool);
	free(s->cwd);
	s->tool = NULL;
	s->cwd = NULL;
	free(s->set);
	free(s->line[1]);
	free(s->line[2]);
	free(s->st.buf);
	free(s->st.off);
	memset(&s->st, 0, sizeof(s->st));
	json_w_free(&s->ow);
	s->argv = s->envp = NULL;
	s->set = NULL;
	s->line[1] = s->line[2] = NULL;
	s->argc = 0;
}

static void *
session_thread(void *arg)
{
	struct slot *s = arg;
	struct sessions *S = s->S;
	char *entry = malloc(PATH_MAX);
	int need_install, rc = 0;

	pthread_mutex_lock(&S->mu);
	need_install = s->v.job[0] != '\0';
	pthread_mutex_unlock(&S->mu);
	if (entry == NULL) {
		struct err e;

		err_set(&e, "internal", "out of memory");
		fail_env(s, &e);
		rc = -1;
	} else if (need_install) {
		rc = wait_install(s, entry, PATH_MAX);
	} else {
		/* set by create: the ready entry travels in argv's place */
		snprintf(entry, PATH_MAX, "%s", s->line[0] != NULL ? s->line[0] : "");
	}
	if (rc == 0) {
		char shebang[256], *flags[NPM_NODE_FLAGS_MAX], *node = NULL;
		int nflags = 0, js = npm_js_entry(entry, shebang, sizeof(shebang), flags, &nflags);

		if (js == 1 && (node = malloc(PATH_MAX)) != NULL && node_entry(s, node, PATH_MAX) != 0) {
			free(node);
			node = NULL;
			js = -2;
		}
		if (js == 1 && node == NULL) {
			struct err e;

			err_set(&e, "internal", "out of memory");
			fail_env(s, &e);
		} else if (js != -2) {
			run_child(s, entry, node, flags, nflags);
		}
		free(node);
	}
	else if (rc == 1)
		end_unstarted(s);
	free(entry);
	pthread_mutex_lock(&S->mu);
	free(s->line[0]);
	s->line[0] = NULL;
	free_run(s);
	if (s->v.ended_at[0] == '\0')
		fmt_time(real_ms(), s->v.ended_at, sizeof(s->v.ended_at));
	s->running = 0;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&S->mu);
	return NULL;
}

/* ---- create -------------------------------------------------------------- */

static void
new_id(char *id)
{
	memcpy(id, "as_", 3);
	fs_rand_hex(id + 3, 8);
}

/* A slot for a new session (under mu): free, else the oldest finished one
 * nobody reads, whose journal goes with it. */
static struct slot *
slot_take(struct sessions *S)
{
	struct slot *best = NULL;
	int i;

	for (i = 0; i < SESSIONS_KEEP; i++) {
		struct slot *s = &S->slot[i];

		if (!s->used) {
			slot_init(s);
			return s;
		}
		if (!s->running && s->holds == 0 && (best == NULL || s->created_ms < best->created_ms))
			best = s;
	}
	if (best != NULL) {
		journal_close(&best->j, 1);
		best->used = 0;
	}
	return best;
}

/* The session has not ended. It ends for clients (limits, cancel, readers
 * and waiters alike) as soon as its last event is out: a thread past it is
 * only tidying up, and s->running says just that the slot is not free. */
static int
live(const struct slot *s)
{
	return s->running && s->v.status == SESSION_IN_PROGRESS;
}

static void
count_running(struct sessions *S, const char *agent, int *total, int *mine)
{
	int i;

	*total = *mine = 0;
	for (i = 0; i < SESSIONS_KEEP; i++)
		if (S->slot[i].used && live(&S->slot[i])) {
			(*total)++;
			if (strcmp(S->slot[i].v.agent, agent) == 0)
				(*mine)++;
		}
}

static char **
copy_strv(char *const *v, int n)
{
	char **c;
	int i;

	if (n < 0)
		for (n = 0; v != NULL && v[n] != NULL; n++)
			;
	c = calloc((size_t)n + 1, sizeof(*c));
	if (c == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if ((c[i] = strdup(v[i])) == NULL) {
			while (i-- > 0)
				free(c[i]);
			free(c);
			return NULL;
		}
	return c;
}

int
sessions_create(struct sessions *S, const struct session_spec *sp, struct session_view *v, int *retry_after,
		struct err *e)
{
	struct slot *s;
	struct json_w w;
	pthread_attr_t at;
	pthread_t th;
	int total, mine, rc;
	char x[256];

	*retry_after = 0;
	if (sp->argc < 1 || sp->argc > SESSION_ARGV_MAX)
		return err_set(e, "internal", "a run template of %d words", sp->argc);
	pthread_mutex_lock(&S->mu);
	count_running(S, sp->agent, &total, &mine);
	if (total >= S->c.max_running || mine >= S->c.max_per_agent) {
		pthread_mutex_unlock(&S->mu);
		*retry_after = 5;
		if (total >= S->c.max_running)
			return err_set(e, "request.rate_limited", "%d sessions are running (server.max_sessions)",
				       total);
		return err_set(e, "request.rate_limited", "%d sessions of %s are running (server.max_sessions_per_agent)",
			       mine, sp->agent);
	}
	s = slot_take(S);
	if (s == NULL) {
		pthread_mutex_unlock(&S->mu);
		*retry_after = 5;
		return err_set(e, "request.busy", "all %d session slots are running or being read", SESSIONS_KEEP);
	}
	memset(&s->v, 0, sizeof(s->v));
	s->holds = s->cancel = s->shutdown = 0;
	s->dropped = 0;
	s->llen[1] = s->llen[2] = 0;
	s->tms = -1;
	s->seq.n = 0;
	json_w_init(&s->ow, JOURNAL_LINE_MAX - 512);
	s->S = S;
	new_id(s->v.id);
	snprintf(s->v.agent, sizeof(s->v.agent), "%s", sp->agent);
	snprintf(s->v.principal, sizeof(s->v.principal), "%s", sp->principal != NULL ? sp->principal : "");
	snprintf(s->op, sizeof(s->op), "%s", sp->op != NULL ? sp->op : "");
	s->created_ms = real_ms();
	fmt_time(s->created_ms, s->v.created_at, sizeof(s->v.created_at));
	s->v.status = SESSION_IN_PROGRESS;
	if (sp->job != NULL && sp->entry[0] == '\0')
		snprintf(s->v.job, sizeof(s->v.job), "%s", sp->job);

	json_w_init(&w, JOURNAL_HEADER_MAX - 1);
	json_w_obj(&w);
	json_w_kstr(&w, "object", "agent.session.journal");
	json_w_kint(&w, "version", 1);
	json_w_kstr(&w, "id", s->v.id);
	json_w_kstr(&w, "agent", s->v.agent);
	json_w_kstr(&w, "principal", s->v.principal);
	json_w_kstr(&w, "created_at", s->v.created_at);
	json_w_kint(&w, "created_ms", s->created_ms);
	json_w_end(&w);
	rc = w.overflow ? err_set(e, "internal", "journal header too long")
			: journal_create(&s->j, S->c.dir, s->v.id, w.buf, e);
	if (rc != 0 && S->c.dir != NULL && !w.overflow) {
		/* The directory went away or filled up: keep the session in
		 * memory rather than refuse it. */
		err_clear(e);
		rc = journal_create(&s->j, NULL, s->v.id, w.buf, e);
	}
	json_w_free(&w);
	if (rc != 0) {
		pthread_mutex_unlock(&S->mu);
		return -1;
	}
	s->argv = copy_strv(sp->argv, sp->argc);
	s->argc = sp->argc;
	s->bin_at = sp->bin_at;
	s->envp = copy_strv(sp->envp, -1);
	s->tool = NULL;
	s->cwd = NULL;
	if (sp->tool != NULL && (s->tool = malloc(sizeof(*s->tool))) != NULL)
		*s->tool = *sp->tool;
	if (sp->cwd != NULL)
		s->cwd = strdup(sp->cwd);
	s->set = malloc(sizeof(*s->set));
	s->line[0] = strdup(sp->entry != NULL ? sp->entry : "");
	s->line[1] = malloc(SESSION_EVENT_DATA_MAX);
	s->line[2] = malloc(SESSION_EVENT_DATA_MAX);
	if (s->argv == NULL || s->envp == NULL || s->set == NULL || s->line[0] == NULL || s->line[1] == NULL ||
	    s->line[2] == NULL || (sp->tool != NULL && s->tool == NULL) || (sp->cwd != NULL && s->cwd == NULL)) {
		free(s->line[0]);
		s->line[0] = NULL;
		free_run(s);
		journal_close(&s->j, 1);
		pthread_mutex_unlock(&S->mu);
		return err_set(e, "internal", "out of memory");
	}
	*s->set = *sp->set;
	s->used = 1;
	s->running = 1;
	S->created++;
	if (s->v.job[0] != '\0') {
		snprintf(x, sizeof(x), "\"job\":\"%s\",\"tool\":\"%s\"", s->v.job, s->v.agent);
		emit(s, "agent.session.environment.pending", x, -1, 0, 0);
	}
	*v = s->v;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, SESSION_STACK_SIZE);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &at, session_thread, s);
	pthread_attr_destroy(&at);
	if (rc != 0) {
		free(s->line[0]);
		s->line[0] = NULL;
		free_run(s);
		journal_close(&s->j, 1);
		s->used = s->running = 0;
		pthread_mutex_unlock(&S->mu);
		*retry_after = 5;
		return err_set(e, "request.busy", "cannot start a session thread: %s", strerror(rc));
	}
	pthread_mutex_unlock(&S->mu);
	return 0;
}

int
sessions_admit(struct sessions *S, const char *agent, int *retry_after, struct err *e)
{
	int total, mine;

	*retry_after = 0;
	pthread_mutex_lock(&S->mu);
	count_running(S, agent, &total, &mine);
	pthread_mutex_unlock(&S->mu);
	if (total < S->c.max_running && mine < S->c.max_per_agent)
		return 0;
	*retry_after = 5;
	if (total >= S->c.max_running)
		return err_set(e, "request.rate_limited", "%d sessions are running (server.max_sessions)", total);
	return err_set(e, "request.rate_limited", "%d sessions of %s are running (server.max_sessions_per_agent)",
		       mine, agent);
}

/* ---- reading ------------------------------------------------------------- */

int
sessions_get(struct sessions *S, const char *agent, const char *id, struct session_view *v)
{
	struct slot *s;

	pthread_mutex_lock(&S->mu);
	s = find(S, agent, id);
	if (s != NULL)
		*v = s->v;
	pthread_mutex_unlock(&S->mu);
	return s != NULL ? 0 : -1;
}

int
sessions_list(struct sessions *S, const char *agent, struct session_view *v, int max)
{
	int64_t when[SESSIONS_KEEP];
	int i, k, n = 0;

	pthread_mutex_lock(&S->mu);
	for (i = 0; i < SESSIONS_KEEP; i++) {
		struct slot *s = &S->slot[i];

		if (!s->used || strcmp(s->v.agent, agent) != 0)
			continue;
		/* Insert, newest first; keep the max newest. */
		for (k = n; k > 0 && when[k - 1] < s->created_ms; k--)
			if (k < max) {
				v[k] = v[k - 1];
				when[k] = when[k - 1];
			}
		if (k < max) {
			v[k] = s->v;
			when[k] = s->created_ms;
			if (n < max)
				n++;
		}
	}
	pthread_mutex_unlock(&S->mu);
	return n;
}

int
sessions_cancel(struct sessions *S, const char *agent, const char *id, struct session_view *v)
{
	struct slot *s;
	int rc;

	pthread_mutex_lock(&S->mu);
	s = find(S, agent, id);
	if (s == NULL) {
		pthread_mutex_unlock(&S->mu);
		return -1;
	}
	rc = live(s) ? 0 : 1;
	if (rc == 0 && !s->cancel) {
		s->cancel = 1;
		s->v.cancel_requested = 1;
	}
	*v = s->v;
	pthread_mutex_unlock(&S->mu);
	return rc;
}

/* Whether a starts with the n bytes of b, inline: memcmp is a call that
 * walks byte by byte in musl, and two per streamed event showed (~7% of
 * the server's instructions on a flood). */
static inline int
has_prefix(const char *a, const char *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (a[i] != b[i])
			return 0;
	return 1;
}

/* The "type" of an event line: ours start {"seq":N,"type":"T" (read at
 * its place); other lines (a journal from elsewhere) are searched. NULL
 * when there is none. */
static const char *
line_type(const char *line, size_t l, size_t *tl)
{
	const char *p = line + 7, *end = line + l, *type = NULL, *te;

	if (l > 7 && has_prefix(line, "{\"seq\":", 7)) {
		while (p < end && *p >= '0' && *p <= '9')
			p++;
		if ((size_t)(end - p) > 9 && has_prefix(p, ",\"type\":\"", 9))
			type = p + 1;
	}
	if (type == NULL)
		type = memmem(line, l, "\"type\":\"", 8);
	if (type == NULL)
		return NULL;
	te = memchr(type + 8, '"', (size_t)(end - (type + 8)));
	if (te == NULL)
		return NULL;
	*tl = (size_t)(te - (type + 8));
	return type + 8;
}

int
sessions_read_buf(struct sessions *S, const char *agent, const char *id, uint32_t after, int max_events,
		  size_t max_bytes, int sse, struct sessions_rbuf *b, uint32_t *last, int *done)
{
	struct dec idt = {0, 0, {0}};
	struct slot *s;
	size_t n = 0, l, need;
	const char *line;
	uint32_t k, count;
	int cnt = 0;

	b->len = 0;
	*last = after;
	*done = 0;
	pthread_mutex_lock(&S->mu);
	s = find(S, agent, id);
	if (s == NULL) {
		pthread_mutex_unlock(&S->mu);
		return -1;
	}
	count = journal_count(&s->j);
	for (k = after + 1; k <= count && cnt < max_events && (cnt == 0 || n < max_bytes); k++) {
		char head[96];
		const char *type;
		size_t hn = 0, tl = 0;

		line = journal_line(&s->j, k, &l);
		if (sse) {
			/* The head is "id: K\n[event: T\n]data: ", built by hand
			 * (one snprintf per event was a good part of the cost). */
			type = line_type(line, l, &tl);
			memcpy(head, "id: ", 4);
			hn = 4 + dec_put(&idt, k, head + 4);
			if (type != NULL && tl < 64) {
				memcpy(head + hn, "\nevent: ", 8);
				hn += 8;
				memcpy(head + hn, type, tl);
				hn += tl;
			}
			memcpy(head + hn, "\ndata: ", 7);
			hn += 7;
		}
		need = n + hn + l + 3;
		if (need > b->cap) {
			/* Kept by the caller for the next read: a stream grows it
			 * to its batch size once. */
			size_t nc = b->cap ? b->cap : 16384;
			char *nb;

			while (nc < need)
				nc *= 2;
			nb = realloc(b->p, nc);
			if (nb == NULL)
				break;
			b->p = nb;
			b->cap = nc;
		}
		memcpy(b->p + n, head, hn);
		n += hn;
		memcpy(b->p + n, line, l);
		n += l;
		b->p[n++] = '\n';
		if (sse)
			b->p[n++] = '\n';
		cnt++;
		*last = k;
	}
	*done = !live(s) && *last >= journal_count(&s->j);
	pthread_mutex_unlock(&S->mu);
	b->len = n;
	return cnt;
}

int
sessions_read(struct sessions *S, const char *agent, const char *id, uint32_t after, int max_events,
	      size_t max_bytes, int sse, char **out, size_t *len, uint32_t *last, int *done)
{
	struct sessions_rbuf b = {NULL, 0, 0};
	int rc = sessions_read_buf(S, agent, id, after, max_events, max_bytes, sse, &b, last, done);

	if (rc <= 0) {
		free(b.p);
		b.p = NULL;
		b.len = 0;
	}
	*out = b.p;
	*len = b.len;
	return rc;
}

int
sessions_wait(struct sessions *S, const char *id, uint32_t after, int wait_ms)
{
	struct timespec until;
	struct slot *s;
	int rc;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += wait_ms / 1000;
	until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&S->mu);
	s = find(S, NULL, id);
	if (s == NULL) {
		pthread_mutex_unlock(&S->mu);
		return -1;
	}
	while (s->used && strcmp(s->v.id, id) == 0 && live(s) && journal_count(&s->j) <= after)
		if (pthread_cond_timedwait(&s->cv, &S->mu, &until) == ETIMEDOUT)
			break;
	rc = !s->used || strcmp(s->v.id, id) != 0 ? -1 : (!live(s) || journal_count(&s->j) > after);
	pthread_mutex_unlock(&S->mu);
	return rc;
}

int
sessions_stream_acquire(struct sessions *S)
{
	int rc = -1;

	pthread_mutex_lock(&S->mu);
	if (S->streams < S->c.max_streams) {
		S->streams++;
		rc = 0;
	}
	pthread_mutex_unlock(&S->mu);
	return rc;
}

void
sessions_stream_release(struct sessions *S)
{
	pthread_mutex_lock(&S->mu);
	S->streams--;
	pthread_mutex_unlock(&S->mu);
}

void
sessions_hold(struct sessions *S, const char *id, int hold)
{
	struct slot *s;

	pthread_mutex_lock(&S->mu);
	s = find(S, NULL, id);
	if (s != NULL)
		s->holds += hold ? 1 : -1;
	pthread_mutex_unlock(&S->mu);
}

void
sessions_get_stats(struct sessions *S, struct sessions_stats *st)
{
	int i;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&S->mu);
	for (i = 0; i < SESSIONS_KEEP; i++)
		if (S->slot[i].used) {
			st->kept++;
			st->running += S->slot[i].running;
		}
	st->streams = S->streams;
	st->created = S->created;
	st->events = S->events;
	st->persistent = S->c.dir != NULL;
	pthread_mutex_unlock(&S->mu);
}

int
sessions_shutdown(struct sessions *S, int wait_ms)
{
	int64_t until = clock_ms() + wait_ms;
	int i, n;

	pthread_mutex_lock(&S->mu);
	for (i = 0; i < SESSIONS_KEEP; i++)
		if (S->slot[i].used && S->slot[i].running) {
			S->slot[i].cancel = 1;
			S->slot[i].shutdown = 1;
		}
	for (;;) {
		struct timespec ts = {0, 20 * 1000000L};

		for (n = 0, i = 0; i < SESSIONS_KEEP; i++)
			n += S->slot[i].used && S->slot[i].running;
		if (n == 0 || clock_ms() >= until)
			break;
		pthread_mutex_unlock(&S->mu);
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&S->mu);
	}
	pthread_mutex_unlock(&S->mu);
	return n;
}

void
sessions_free(struct sessions *S)
{
	int i;

	if (S == NULL)
		return;
	/* A session thread touches its slot until its last critical section,
	 * even after the session looks ended: wait for every one. If one is
	 * still running after the grace, leaking the table beats a use after
	 * free. */
	if (sessions_shutdown(S, PROC_KILL_GRACE_MS_DEFAULT + 8000) > 0)
		return;
	for (i = 0; i < SESSIONS_KEEP; i++) {
		if (S->slot[i].used)
			journal_close(&S->slot[i].j, 0);
		if (S->slot[i].inited)
			pthread_cond_destroy(&S->slot[i].cv);
	}
	pthread_mutex_destroy(&S->mu);
	free(S);
}

/* ---- replay --------------------------------------------------------------- */

/* Kill the group a dead server left running, when pid is still that child
 * (same start time), never another process that reused the number. */
static void
kill_orphan(const struct json_val *ev)
{
	const struct json_val *pid = json_get(ev, "pid"), *ps = json_get(ev, "pid_start");
	unsigned long long now;

	if (pid == NULL || ps == NULL || pid->type != JSON_NUMBER || ps->type != JSON_NUMBER || !pid->u.num.is_int ||
	    pid->u.num.i <= 1 || !ps->u.num.is_int)
		return;
	if (fill_pid_start((pid_t)pid->u.num.i, &now) == 0 && now == (unsigned long long)ps->u.num.i)
		kill(-(pid_t)pid->u.num.i, SIGKILL);
}

static int
replay_one(struct sessions *S, const char *path, int *interrupted)
{
	struct json_limits lim = json_default_limits;
	const struct json_val *r, *x;
	struct json_doc doc;
	struct slot *s = NULL;
	struct journal j;
	struct err e;
	uint32_t k;
	int i, started = 0;
	const char *line;
	size_t l;

	if (journal_load(&j, path, &e) != 0)
		return -1;
	lim.max_depth = 8;
	if (json_parse(&doc, j.header, strlen(j.header), &lim, &e) != 0) {
		journal_close(&j, 0);
		return -1;
	}
	r = doc.root;
	if (json_get_str(r, "object") == NULL || strcmp(json_get_str(r, "object"), "agent.session.journal") != 0 ||
	    json_get_str(r, "id") == NULL || strcmp(json_get_str(r, "id"), j.id) != 0 ||
	    json_get_str(r, "agent") == NULL || json_get_str(r, "created_at") == NULL) {
		json_free(&doc);
		journal_close(&j, 0);
		return -1;
	}
	pthread_mutex_lock(&S->mu);
	for (i = 0; i < SESSIONS_KEEP; i++)
		if (!S->slot[i].used) {
			s = &S->slot[i];
			slot_init(s);
			break;
		}
	if (s == NULL || find(S, NULL, j.id) != NULL) {
		pthread_mutex_unlock(&S->mu);
		json_free(&doc);
		journal_close(&j, 0);
		return -1;
	}
	memset(&s->v, 0, sizeof(s->v));
	s->S = S;
	s->holds = s->cancel = s->shutdown = s->running = 0;
	s->j = j;
	snprintf(s->v.id, sizeof(s->v.id), "%s", j.id);
	snprintf(s->v.agent, sizeof(s->v.agent), "%s", json_get_str(r, "agent"));
	snprintf(s->v.principal, sizeof(s->v.principal), "%s",
		 json_get_str(r, "principal") != NULL ? json_get_str(r, "principal") : "");
	snprintf(s->v.created_at, sizeof(s->v.created_at), "%s", json_get_str(r, "created_at"));
	x = json_get(r, "created_ms");
	s->created_ms = x != NULL && x->type == JSON_NUMBER && x->u.num.is_int ? x->u.num.i : 0;
	json_free(&doc);
	s->v.status = SESSION_IN_PROGRESS;
	s->v.events = journal_count(&s->j);
	for (k = 1; k <= journal_count(&s->j); k++) {
		const char *type, *st, *tm;

		line = journal_line(&s->j, k, &l);
		if (json_parse(&doc, line, l, &lim, &e) != 0)
			continue;
		type = json_get_str(doc.root, "type");
		tm = json_get_str(doc.root, "time");
		if (type != NULL && strcmp(type, "agent.session.environment.pending") == 0 &&
		    json_get_str(doc.root, "job") != NULL)
			snprintf(s->v.job, sizeof(s->v.job), "%s", json_get_str(doc.root, "job"));
		if (type != NULL && strcmp(type, "agent.session.started") == 0) {
			started = (int)k;
			if (tm != NULL)
				snprintf(s->v.started_at, sizeof(s->v.started_at), "%s", tm);
		}
		if (type != NULL && strcmp(type, "agent.session.truncated") == 0)
			s->v.truncated = 1;
		if (type != NULL && (strcmp(type, "agent.session.environment.failed") == 0 ||
				     strcmp(type, "agent.session.start_failed") == 0)) {
			const char *c = json_get_str(doc.root, "code");

			snprintf(s->v.error, sizeof(s->v.error), "%s", c != NULL ? c : "install.failed");
		}
		if (type != NULL && strcmp(type, "agent.session.exited") == 0) {
			x = json_get(doc.root, "exit_code");
			s->v.exited = 1;
			s->v.exit_code = x != NULL && x->type == JSON_NUMBER ? (int)x->u.num.i : -1;
			x = json_get(doc.root, "duration_ms");
			s->v.duration_ms = x != NULL && x->type == JSON_NUMBER ? x->u.num.i : 0;
		}
		st = json_get_str(doc.root, "status");
		if (st != NULL && status_parse(st, &s->v.status) == 0 && tm != NULL)
			snprintf(s->v.ended_at, sizeof(s->v.ended_at), "%s", tm);
		json_free(&doc);
	}
	if (s->v.status == SESSION_IN_PROGRESS) {
		/* Running when the server died: its child's group may still be
		 * there, under the pid and start time the started event
		 * recorded. */
		if (started > 0 && (line = journal_line(&s->j, (uint32_t)started, &l)) != NULL &&
		    json_parse(&doc, line, l, &lim, &e) == 0) {
			kill_orphan(doc.root);
			json_free(&doc);
		}
		emit(s, "agent.session.interrupted", "\"reason\":\"the server stopped while the session ran\"",
		     SESSION_INTERRUPTED, 0, 0);
		fmt_time(real_ms(), s->v.ended_at, sizeof(s->v.ended_at));
		(*interrupted)++;
	}
	s->used = 1;
	pthread_mutex_unlock(&S->mu);
	return 0;
}

void
sessions_replay(struct sessions *S, int *loaded, int *interrupted, int *skipped)
{
	char path[4096 + 300];
	struct dirent *d;
	DIR *dir;
	size_t n;

	*loaded = *interrupted = *skipped = 0;
	if (S->c.dir == NULL || (dir = opendir(S->c.dir)) == NULL)
		return;
	while ((d = readdir(dir)) != NULL) {
		n = strlen(d->d_name);
		if (n < 7 || strcmp(d->d_name + n - 6, ".jsonl") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", S->c.dir, d->d_name);
		if (replay_one(S, path, interrupted) == 0)
			(*loaded)++;
		else
			(*skipped)++;
	}
	closedir(dir);
}
