/*
 * The events of agent sessions (see sessions.h): the names of a session's
 * statuses, finding a slot, what a session thread writes to its journal,
 * and what readers get back from it. The bottom of the sessions floor
 * (sessions_int.h): it calls no other file of it.
 */
#include "server/sessions_int.h"
#include "base/buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- statuses and slots --------------------------------------------------- */

static const char *const status_names[] = {"in_progress", "completed",   "failed",
                                           "cancelled",   "interrupted", "idle"};

const char *
session_status_name(enum session_status s)
{
	return (unsigned)s < 6 ? status_names[s] : "?";
}

int
sessions_status_parse(const char *s, enum session_status *out)
{
	int i;

	for (i = 0; i < 6; i++)
		if (strcmp(s, status_names[i]) == 0) {
			*out = (enum session_status)i;
			return 0;
		}
	return -1;
}

struct slot *
sessions_find(struct sessions *S, const char *agent, const char *id)
{
	int i;

	for (i = 0; i < S->hw; i++) {
		struct slot *s = &S->slot[i];

		if (s->used && !s->deleted && strcmp(s->v.id, id) == 0 &&
		    (agent == NULL || strcmp(s->v.agent, agent) == 0))
			return s;
	}
	return NULL;
}

/* The session has not ended. It ends for clients (limits, cancel, readers
 * and waiters alike) as soon as its last event is out: a thread past it is
 * only tidying up, and s->running says just that the slot is not free. */
int
sessions_live(const struct slot *s)
{
	return s->running && s->v.status == SESSION_IN_PROGRESS;
}

int
sessions_open(const struct slot *s)
{
	return sessions_live(s) || (s->v.conv && !s->deleted &&
	                            (s->v.status == SESSION_IDLE || s->v.status == SESSION_IN_PROGRESS));
}

/* ---- the wire's objects --------------------------------------------------- */

static void
kunix(struct json_w *w, const char *key, int64_t ms)
{
	json_w_key(w, key);
	if (ms > 0)
		json_w_int(w, ms / 1000);
	else
		json_w_null(w);
}

void
sessions_turn_json(struct json_w *w, const struct slot *s, const char *status, const char *code,
                   const char *msg)
{
	char id[32];
	int end = strcmp(status, "queued") != 0 && strcmp(status, "in_progress") != 0;

	snprintf(id, sizeof(id), "turn_%u", s->v.turns);
	json_w_obj(w);
	json_w_kstr(w, "id", id);
	json_w_kstr(w, "object", "agent.session.turn");
	json_w_kstr(w, "agent_id", s->v.agent);
	json_w_kstr(w, "session_id", s->v.id);
	json_w_kstr(w, "status", status);
	kunix(w, "created_at", s->turn_created_ms);
	kunix(w, "started_at", s->turn_started_ms);
	kunix(w, "completed_at", end ? clock_wall_ms() : 0);
	json_w_key(w, "error");
	if (code != NULL) {
		json_w_obj(w);
		json_w_kstr(w, "code", code);
		json_w_kstr(w, "message", msg != NULL ? msg : code);
		json_w_end(w);
	} else
		json_w_null(w);
	json_w_key(w, "subagent_id");
	json_w_null(w);
	json_w_key(w, "usage");
	json_w_null(w);
	json_w_end(w);
}

void
sessions_session_json(struct json_w *w, const struct slot *s, int created)
{
	enum session_status st = created ? SESSION_IN_PROGRESS : s->v.status;

	json_w_obj(w);
	json_w_kstr(w, "id", s->v.id);
	json_w_kstr(w, "object", "agent.session");
	if (s->conf != NULL)
		json_w_members(w, s->conf);
	else {
		json_w_key(w, "agent");
		json_w_obj(w);
		json_w_kstr(w, "id", s->v.agent);
		json_w_kstr(w, "name", s->v.agent);
		json_w_end(w);
		json_w_key(w, "environment");
		json_w_obj(w);
		json_w_kstr(w, "type", "self_hosted");
		json_w_end(w);
		json_w_key(w, "metadata");
		json_w_obj(w);
		json_w_end(w);
	}
	kunix(w, "created_at", s->created_ms);
	kunix(w, "last_active_at", s->v.active_ms > 0 && !created ? s->v.active_ms : s->created_ms);
	json_w_kstr(w, "status",
	            st == SESSION_IN_PROGRESS ? "in_progress"
	            : st == SESSION_FAILED    ? "failed"
	                                      : "idle");
	json_w_key(w, "error");
	if (st == SESSION_FAILED && s->v.error[0] != '\0')
		json_w_str(w, s->v.error);
	else
		json_w_null(w);
	json_w_key(w, "required_actions");
	json_w_arr(w);
	json_w_end(w);
	json_w_key(w, "usage");
	json_w_null(w);
	json_w_key(w, "vault_ids");
	json_w_arr(w);
	json_w_end(w);
	json_w_end(w);
}

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
	return journal_bytes(&s->j) + (s->staging ? s->st.b.len : 0);
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
	char *o;

	if (!s->staging)
		return journal_reserve(&s->j, len);
	if (len >= JOURNAL_LINE_MAX)
		return NULL;
	if (g->b.max == 0) {
		g->b.max = SESSION_STAGE_MAX(s->S);
		g->offs.max = (size_t)JOURNAL_LINES_MAX * sizeof(uint32_t);
	}
	/* Not sticky: the next, smaller event may still fit. */
	if ((o = buf_room(&g->b, len + 1)) == NULL || buf_room(&g->offs, sizeof(uint32_t)) == NULL) {
		g->b.over = g->offs.over = 0;
		return NULL;
	}
	return o;
}

/* The line of n bytes written at out_reserve's place is an event (n under
 * the room reserved; checked by the caller). */
static void
out_commit(struct slot *s, size_t n)
{
	struct stage *g = &s->st;
	struct err e = {0};

	if (!s->staging) {
		if (journal_commit(&s->j, n, &e) > 0) {
			s->v.events = journal_count(&s->j);
			s->S->events++;
		}
		return;
	}
	g->b.p[g->b.len + n] = '\n';
	((uint32_t *)(void *)g->offs.p)[g->n++] = (uint32_t)g->b.len;
	g->b.len += n + 1;
	g->offs.len += sizeof(uint32_t);
}

/* An event line made elsewhere (emit): the journal's checks, then in. */
static void
out_append(struct slot *s, const char *line, size_t n)
{
	struct err e = {0};
	char *o;

	if (!s->staging) {
		if (journal_append(&s->j, line, n, &e) > 0) {
			s->v.events = journal_count(&s->j);
			s->S->events++;
		}
		return;
	}
	if (n == 0 || n >= JOURNAL_LINE_MAX || memchr(line, '\n', n) != NULL ||
	    (o = out_reserve(s, n)) == NULL)
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
	const uint32_t *off;
	uint32_t n;
	size_t len;
	int pre;

	if (g->n == 0 && !g->truncated)
		return; /* only part of a line: nothing to announce */
	pthread_mutex_lock(&S->mu);
	if (g->truncated)
		s->v.truncated = 1;
	s->v.active_ms = s->tms;
	n = g->n > 0 ? journal_reserve_lines(&s->j, g->b.len, g->n) : 0;
	pthread_mutex_unlock(&S->mu);
	/* Past JOURNAL_LINES_MAX what does not fit is lost, as one append at
	 * a time would lose it. */
	off = (const uint32_t *)(const void *)g->offs.p;
	len = n == g->n ? g->b.len : n > 0 ? off[n] : 0;
	pre = n > 0 && journal_prewrite(&s->j, (const char *)g->b.p, len);
	pthread_mutex_lock(&S->mu);
	if (n > 0 && journal_append_lines(&s->j, (const char *)g->b.p, len, off, n, pre) > 0) {
		s->v.events = journal_count(&s->j);
		S->events += n;
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&S->mu);
	buf_reset(&g->b);
	buf_reset(&g->offs);
	g->n = 0;
	g->truncated = 0;
	/* A burst of tiny lines can blow the stage up (to the journal limit
	 * at most): keep only a usual chunk's worth for the next read. */
	if (g->b.cap > SESSION_STAGE_KEEP) {
		buf_free(&g->b);
		buf_free(&g->offs);
	}
}

void
sessions_event_head(struct slot *s, struct json_w *w, const char *type)
{
	int64_t now;

	/* Lines come in bursts: format the time once per millisecond (or
	 * once per read, staged). */
	now = s->tfixed ? s->tms : clock_wall_ms();
	if (now != s->tms) {
		clock_iso(now, 1, s->tstr, sizeof(s->tstr));
		s->tms = now;
	}
	json_w_reset(w);
	json_w_obj(w);
	json_w_kint(w, "seq", next_seq(s));
	json_w_kstr(w, "type", type);
	json_w_kstr(w, "time", s->tstr);
}

/* End the event in w ("status" when status >= 0) and append it. */
static void
event_tail(struct slot *s, struct json_w *w, int status)
{
	if (status >= 0)
		json_w_kstr(w, "status", session_status_name((enum session_status)status));
	json_w_end(w);
	if (!w->overflow)
		out_append(s, w->buf, w->len);
	if (status >= 0)
		s->v.status = (enum session_status)status;
	if (!s->staging)
		s->v.active_ms = s->tms; /* staged: stage_commit, under the lock */
}

/*
 * Append an event: {"seq","type","time", the members of the object
 * members (written by a json_w; NULL for none), "status" when status >= 0}.
 * Always goes in: the journal keeps room for the events that end a session.
 */
void
sessions_emit(struct slot *s, const char *type, const char *members, int status)
{
	struct json_w w;

	json_w_init(&w, JOURNAL_LINE_MAX - 1);
	sessions_event_head(s, &w, type);
	json_w_members(&w, members);
	event_tail(s, &w, status);
	json_w_free(&w);
	if (!s->staging)
		pthread_cond_broadcast(&s->cv);
}

void
sessions_emit_turn(struct slot *s, const char *type, const char *status, const char *code, const char *msg)
{
	struct json_w w;
	char id[32];

	snprintf(id, sizeof(id), "turn_%u", s->v.turns);
	json_w_init(&w, JOURNAL_LINE_MAX / 2);
	json_w_obj(&w);
	json_w_kstr(&w, "turn_id", id);
	json_w_key(&w, "turn");
	sessions_turn_json(&w, s, status, code, msg);
	if (strcmp(status, "in_progress") != 0 && strcmp(status, "queued") != 0) {
		json_w_key(&w, "usage");
		json_w_null(&w);
	}
	json_w_end(&w);
	sessions_emit(s, type, w.overflow ? NULL : w.buf, -1);
	json_w_free(&w);
}

void
sessions_emit_env(struct slot *s, const char *status, const char *code, const char *msg)
{
	struct json_w w;
	char id[40], type[64];

	snprintf(id, sizeof(id), "env_%s", s->v.id);
	snprintf(type, sizeof(type), "agent.session.environment.%s", status);
	json_w_init(&w, JOURNAL_LINE_MAX / 2);
	json_w_obj(&w);
	json_w_key(&w, "environment");
	json_w_obj(&w);
	json_w_kstr(&w, "id", id);
	json_w_kstr(&w, "type", "self_hosted");
	json_w_kstr(&w, "status", status);
	json_w_key(&w, "error");
	if (code != NULL) {
		json_w_obj(&w);
		json_w_kstr(&w, "code", code);
		json_w_kstr(&w, "message", msg != NULL ? msg : code);
		json_w_kstr(&w, "type", "environment_error");
		json_w_end(&w);
	} else
		json_w_null(&w);
	json_w_end(&w);
	if (s->v.job[0] != '\0')
		json_w_kstr(&w, "job", s->v.job);
	json_w_key(&w, "turn_id");
	json_w_null(&w);
	if (code != NULL)
		json_w_kstr(&w, "code", code);
	json_w_end(&w);
	sessions_emit(s, type, w.overflow ? NULL : w.buf, -1);
	json_w_free(&w);
}

void
sessions_emit_session(struct slot *s, const char *type, int status)
{
	struct json_w w;

	if (status >= 0)
		s->v.status = (enum session_status)status;
	json_w_init(&w, JOURNAL_LINE_MAX / 2);
	json_w_obj(&w);
	json_w_key(&w, "session");
	sessions_session_json(&w, s, 0);
	json_w_end(&w);
	sessions_emit(s, type, w.overflow ? NULL : w.buf, status);
	json_w_free(&w);
}

/* The journal limit is reached: one truncated event, and the output that
 * follows is dropped (counted). */
static void
emit_truncated(struct slot *s, size_t data_len)
{
	struct json_w w;

	set_truncated(s);
	s->dropped += data_len;
	json_w_init(&w, 64);
	json_w_obj(&w);
	json_w_kint(&w, "limit_bytes", (int64_t)s->S->c.journal_max);
	json_w_end(&w);
	sessions_emit(s, "agent.session.truncated", w.buf, -1);
	json_w_free(&w);
}

/* The two-byte JSON escape of c, 0 for none (other control bytes and
 * UTF-8 are left to the JSON writer). */
static char
short_escape(unsigned char c)
{
	switch (c) {
	case '"':
		return '"';
	case '\\':
		return '\\';
	case '\b':
		return 'b';
	case '\f':
		return 'f';
	case '\n':
		return 'n';
	case '\r':
		return 'r';
	case '\t':
		return 't';
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
#define PLAIN(c) ((plain_map[(c) >> 6] >> ((c)&63)) & 1)

/*
 * emit_output's fast path: the event written straight into the journal,
 * byte for byte what sessions_event_head, the writer and event_tail make
 * of it. Returns 0 when done, 1 when the data is not plain ASCII (or the
 * event would cross the journal limit, or the journal has no room): then
 * nothing was added and the caller takes the general path.
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
		now = clock_wall_ms();
		if (now != s->tms) {
			clock_iso(now, 1, s->tstr, sizeof(s->tstr));
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
		while (end - p >= 8 && (memcpy(&w8, p, 8), json_plain8(w8))) {
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
	/* sessions_emit_output's limit: the members plus 256 must fit under it. */
	if (bytes_now(s) + (size_t)(o - extra) + 256 > s->S->c.journal_max)
		return 1;
	*o++ = '}';
	out_commit(s, (size_t)(o - line));
	return 0;
}

/* One output event for data[0..n) of stream i, partial or not. Caller
 * holds S->mu. Output events obey the journal limit: the first one over it
 * is replaced by one truncated event. Announced once per chunk read
 * (on_output), not here. */
void
sessions_emit_output(struct slot *s, int i, const char *data, size_t n, int partial)
{
	struct json_w *w = &s->ow;
	size_t head;

	if (is_truncated(s)) {
		s->dropped += n;
		return;
	}
	if (emit_output_fast(s, i, data, n, partial, 0, NULL) == 0)
		return;
	sessions_event_head(s, w, "agent.session.output");
	head = w->len;
	json_w_kstr(w, "stream", i == PROC_STDOUT ? "stdout" : "stderr");
	json_w_key(w, "data");
	json_w_strn(w, data, n);
	if (partial)
		json_w_kbool(w, "partial", 1);
	if (w->overflow)
		return;
	/* The members (after their comma) and 256 bytes must fit under the
	 * limit, as in emit_output_fast. */
	if (bytes_now(s) + (w->len - head - 1) + 256 > s->S->c.journal_max) {
		emit_truncated(s, n);
		return;
	}
	event_tail(s, w, -1);
}

char *
sessions_place_head(struct slot *s, const char *type, size_t len, char **line)
{
	size_t tl = strlen(s->tstr), yl = strlen(type);
	char *o;

	if (!s->staging || is_truncated(s) || (o = out_reserve(s, 48 + yl + tl + len)) == NULL)
		return NULL;
	*line = o;
	memcpy(o, "{\"seq\":", 7);
	o += 7;
	o += dec_put(&s->seq, next_seq(s), o);
	memcpy(o, ",\"type\":\"", 9);
	memcpy(o + 9, type, yl);
	o += 9 + yl;
	memcpy(o, "\",\"time\":\"", 10);
	memcpy(o + 10, s->tstr, tl);
	o += 10 + tl;
	*o++ = '"';
	return o;
}

int
sessions_place_end(struct slot *s, char *line, const char *head, char *o)
{
	if (bytes_now(s) + (size_t)(o - head) + 1 + 256 > s->S->c.journal_max)
		return 1;
	*o++ = '}';
	out_commit(s, (size_t)(o - line));
	return 0;
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

void
sessions_stage(struct slot *s, int on)
{
	int64_t now;

	if (!on) {
		s->tfixed = 0;
		s->staging = 0;
		stage_commit(s);
		return;
	}
	/* Formatted without the lock (see stage_commit). */
	s->staging = 1;
	/* Every line of one read is stamped with the time it was read. */
	now = clock_wall_ms();
	if (now != s->tms) {
		clock_iso(now, 1, s->tstr, sizeof(s->tstr));
		s->tms = now;
	}
	s->tfixed = 1;
}

void
sessions_emit_limited(struct slot *s, struct json_w *w, size_t head)
{
	/* The members' bytes, as an object of their own: "{" for the comma
	 * before them, "}" */
	size_t n = w->len - head + 1;

	if (w->overflow)
		return;
	if (is_truncated(s))
		s->dropped += n;
	else if (bytes_now(s) + n + 256 > s->S->c.journal_max)
		emit_truncated(s, n);
	else
		event_tail(s, w, -1);
}

void
sessions_emit_text(struct slot *s, int i, const char *data, size_t n)
{
	size_t cut;

	while (n > SESSION_EVENT_DATA_MAX) {
		cut = utf8_cut(data, SESSION_EVENT_DATA_MAX);
		sessions_emit_output(s, i, data, cut, 1);
		data += cut;
		n -= cut;
	}
	sessions_emit_output(s, i, data, n, 0);
}

/* proc's sink: split into lines (runs on the session thread). */
void
sessions_on_output(void *arg, enum proc_stream st, const char *data, size_t len)
{
	struct slot *s = ((struct sink_ctx *)arg)->s;
	int i = (int)st;
	char *lb = s->line[i];
	const char *p = data, *end = data + len, *nl;
	size_t k;

	sessions_stage(s, 1);
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
			sessions_emit_output(s, i, p, k, 0);
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

				sessions_emit_output(s, i, lb, cut, 1);
				memmove(lb, lb + cut, s->llen[i] - cut);
				s->llen[i] -= cut;
			}
		}
		if (nl != NULL) {
			sessions_emit_output(s, i, lb, s->llen[i], 0);
			s->llen[i] = 0;
			p = nl + 1;
		}
	}
	sessions_stage(s, 0);
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
                  size_t max_bytes, int sse, struct buf *b, uint32_t *last, int *done)
{
	struct dec idt = {0, 0, {0}};
	struct slot *s;
	size_t l, before;
	const char *line;
	uint32_t k, count;
	int cnt = 0;

	buf_reset(b);
	*last = after;
	*done = 0;
	pthread_mutex_lock(&S->mu);
	s = sessions_find(S, agent, id);
	if (s == NULL) {
		pthread_mutex_unlock(&S->mu);
		return -1;
	}
	count = journal_count(&s->j);
	for (k = after + 1; k <= count && cnt < max_events && (cnt == 0 || b->len < max_bytes); k++) {
		char head[192];
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
		before = b->len;
		if (sse && l > 1) {
			/* {"event_id":"K","session_id":"ID", then the line's members */
			head[hn++] = '{';
			memcpy(head + hn, "\"event_id\":\"", 12);
			hn += 12;
			hn += dec_put(&idt, k, head + hn);
			memcpy(head + hn, "\",\"session_id\":\"", 16);
			hn += 16;
			memcpy(head + hn, s->v.id, strlen(s->v.id));
			hn += strlen(s->v.id);
			memcpy(head + hn, "\",", 2);
			hn += 2;
			line++;
			l--;
		}
		if (buf_put(b, head, hn) != 0 || buf_put(b, line, l) != 0 ||
		    buf_put(b, "\n\n", sse ? 2 : 1) != 0) {
			/* Out of memory (or a max under SESSIONS_READ_ROOM): the
			 * events read so far, none of this one. */
			b->len = before;
			if (b->p != NULL)
				b->p[before] = '\0';
			break;
		}
		cnt++;
		*last = k;
	}
	*done = !sessions_open(s) && *last >= journal_count(&s->j);
	pthread_mutex_unlock(&S->mu);
	return cnt;
}

int
sessions_read(struct sessions *S, const char *agent, const char *id, uint32_t after, int max_events,
              size_t max_bytes, int sse, char **out, size_t *len, uint32_t *last, int *done)
{
	struct buf b = BUF_INIT(SESSIONS_READ_ROOM(max_bytes));
	int rc = sessions_read_buf(S, agent, id, after, max_events, max_bytes, sse, &b, last, done);

	if (rc <= 0)
		buf_free(&b);
	*out = (char *)b.p;
	*len = b.len;
	return rc;
}

int
sessions_wait(struct sessions *S, const char *id, uint32_t after, int wait_ms)
{
	struct timespec until;
	struct slot *s;
	int rc;

	clock_wall_after(wait_ms, &until);
	pthread_mutex_lock(&S->mu);
	s = sessions_find(S, NULL, id);
	if (s == NULL) {
		pthread_mutex_unlock(&S->mu);
		return -1;
	}
	while (s->used && !s->deleted && strcmp(s->v.id, id) == 0 && sessions_open(s) &&
	       journal_count(&s->j) <= after)
		if (pthread_cond_timedwait(&s->cv, &S->mu, &until) == ETIMEDOUT)
			break;
	rc = !s->used || s->deleted || strcmp(s->v.id, id) != 0
	         ? -1
	         : (!sessions_open(s) || journal_count(&s->j) > after);
	pthread_mutex_unlock(&S->mu);
	return rc;
}

int
sessions_scan(struct sessions *S, const char *id, const char *prefix,
              void (*fn)(void *arg, uint32_t seq, const char *line, size_t len), void *arg)
{
	size_t pl = strlen(prefix), l, tl;
	const char *line, *type;
	struct slot *s;
	uint32_t k;

	pthread_mutex_lock(&S->mu);
	s = sessions_find(S, NULL, id);
	for (k = 1; s != NULL && k <= journal_count(&s->j); k++) {
		line = journal_line(&s->j, k, &l);
		type = line_type(line, l, &tl);
		if (type != NULL && tl >= pl && has_prefix(type, prefix, pl))
			fn(arg, k, line, l);
	}
	pthread_mutex_unlock(&S->mu);
	return s != NULL ? 0 : -1;
}
