#include "unit.h"

#include <unistd.h>

#include "base/buf.h"
#include "base/json.h"
#include "server/sessions.h"

static char dir[] = "/tmp/abx-sessions-XXXXXX";
static struct config set;

static int
setup(void **state)
{
	return mkdtemp(dir) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	return unit_rmtree(dir);
}

static struct sessions *
table(const char *d, size_t journal_max)
{
	struct sessions_config c;

	memset(&c, 0, sizeof(c));
	c.dir = d;
	c.max_running = 4;
	c.max_per_agent = 2;
	c.journal_max = journal_max;
	c.kill_grace_ms = 200;
	c.max_streams = 1;
	return sessions_new(&c, NULL);
}

static int
start(struct sessions *S, const char *script, struct session_view *v, struct err *e)
{
	char *argv[] = {"{bin}", "-c", (char *)script};
	char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	struct session_spec sp;
	int ra;

	memset(&sp, 0, sizeof(sp));
	sp.agent = "sh";
	sp.principal = "p";
	sp.op = "agents.sh.sessions.create";
	sp.argv = argv;
	sp.argc = 3;
	sp.envp = envp;
	sp.cfg = &set;
	sp.entry = "/bin/sh";
	return sessions_create(S, &sp, v, &ra, e);
}

static void
wait_end(struct sessions *S, const char *id, struct session_view *v)
{
	int i;

	for (i = 0; i < 500; i++) {
		assert_int_equal(sessions_get(S, "sh", id, v), 0);
		if (v->status != SESSION_IN_PROGRESS)
			return;
		sessions_wait(S, id, v->events, 20);
	}
	fail_msg("session %s did not end", id);
}

/* The types of the events, space-separated, last segment only. */
static void
types(struct sessions *S, const char *id, char *out, size_t cap)
{
	struct json_doc doc;
	struct err e = {0};
	char *buf, *p, *nl;
	size_t len, n = 0;
	uint32_t last;
	int done;

	out[0] = '\0';
	assert_true(sessions_read(S, "sh", id, 0, 1000, 1 << 20, 0, &buf, &len, &last, &done) >= 0);
	for (p = buf; p != NULL && p < buf + len; p = nl + 1) {
		const char *t;

		nl = memchr(p, '\n', (size_t)(buf + len - p));
		assert_non_null(nl);
		assert_int_equal(json_parse(&doc, p, (size_t)(nl - p), NULL, &e), 0);
		t = strrchr(json_get_str(doc.root, "type"), '.') + 1;
		if (n < cap)
			n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? " " : "", t);
		json_free(&doc);
	}
	free(buf);
}

/* A conversation's turn (or its first, with conv): sh -c script. */
static int
turn(struct sessions *S, const char *id, const char *script, struct session_view *v, struct err *e)
{
	char *argv[] = {"{bin}", "-c", (char *)script};
	char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	struct session_spec sp;
	int ra;

	memset(&sp, 0, sizeof(sp));
	sp.agent = "sh";
	sp.principal = "p";
	sp.op = "agents.sh.sessions.create";
	sp.argv = argv;
	sp.argc = 3;
	sp.bin_at = 0;
	sp.envp = envp;
	sp.cfg = &set;
	sp.entry = "/bin/sh";
	sp.conv = 1;
	sp.conf = "{\"agent\":{\"id\":\"sh\"},\"metadata\":{}}";
	sp.text = script;
	return id == NULL ? sessions_create(S, &sp, v, &ra, e) : sessions_turn(S, id, &sp, script, v, e);
}

static void
wait_idle(struct sessions *S, const char *id, struct session_view *v)
{
	int i;

	for (i = 0; i < 500; i++) {
		assert_int_equal(sessions_get(S, NULL, id, v), 0);
		if (v->status == SESSION_IDLE || v->status == SESSION_FAILED)
			return;
		sessions_wait(S, id, v->events, 20);
	}
	fail_msg("session %s did not go idle", id);
}

static void
test_conversation(void **state)
{
	struct sessions *S = table(dir, 1 << 20), *S2;
	struct session_view v;
	struct err e = {0};
	char t[16384], id[SESSION_ID_MAX];
	int loaded, intr, skipped;

	assert_non_null(S);
	assert_int_equal(turn(S, NULL, "echo one", &v, &e), 0);
	assert_true(v.conv);
	snprintf(id, sizeof(id), "%s", v.id);
	wait_idle(S, id, &v);
	assert_int_equal(v.status, SESSION_IDLE);
	assert_int_equal(v.turns, 1);
	types(S, id, t, sizeof(t));
	assert_string_equal(
	    t, "created pending created added ready started in_progress output exited completed idle");
	/* a turn that fails leaves the session idle; a message sent as soon
	 * as it is idle is taken */
	assert_int_equal(turn(S, id, "exit 2", &v, &e), 0);
	wait_idle(S, id, &v);
	assert_int_equal(v.status, SESSION_IDLE);
	/* a message while a turn runs is refused; a cancel ends the turn only */
	assert_int_equal(turn(S, id, "sleep 30", &v, &e), 0);
	assert_int_equal(turn(S, id, "echo no", &v, &e), -1);
	assert_string_equal(e.code, "session.busy");
	assert_int_equal(sessions_delete(S, id, &e), -1);
	assert_string_equal(e.code, "session.busy");
	assert_int_equal(sessions_cancel(S, NULL, id, &v), 0);
	wait_idle(S, id, &v);
	assert_int_equal(v.status, SESSION_IDLE);
	assert_int_equal(v.turns, 3);
	types(S, id, t, sizeof(t));
	assert_non_null(strstr(t, "cancelled idle"));
	sessions_free(S);

	/* replayed: the same turns, and the next one runs */
	S2 = table(dir, 1 << 20);
	sessions_replay(S2, &loaded, &intr, &skipped);
	assert_int_equal(sessions_get(S2, NULL, id, &v), 0);
	assert_true(v.conv);
	assert_int_equal(v.turns, 3);
	assert_int_equal(v.status, SESSION_IDLE);
	assert_int_equal(turn(S2, id, "echo four", &v, &e), 0);
	wait_idle(S2, id, &v);
	assert_int_equal(v.turns, 4);
	assert_int_equal(sessions_delete(S2, id, &e), 0);
	assert_int_equal(sessions_get(S2, NULL, id, &v), -1);
	assert_int_equal(access(dir, F_OK), 0);
	sessions_free(S2);
}

static void
test_lifecycle_and_replay(void **state)
{
	struct sessions *S = table(dir, 1 << 20), *S2;
	struct session_view v;
	struct err e = {0};
	char t[16384], id[SESSION_ID_MAX];
	int loaded, intr, skipped;

	assert_non_null(S);
	assert_int_equal(start(S, "echo a; echo b >&2; printf tail; exit 3", &v, &e), 0);
	assert_int_equal(v.status, SESSION_IN_PROGRESS);
	snprintf(id, sizeof(id), "%s", v.id);
	wait_end(S, id, &v);
	assert_int_equal(v.status, SESSION_FAILED);
	assert_int_equal(v.exit_code, 3);
	types(S, id, t, sizeof(t));
	assert_string_equal(t, "started output output output exited");
	assert_int_equal(sessions_get(S, "other", id, &v), -1);

	/* A second table over the same directory replays it as it was. */
	S2 = table(dir, 1 << 20);
	sessions_replay(S2, &loaded, &intr, &skipped);
	assert_int_equal(loaded, 1);
	assert_int_equal(intr, 0);
	assert_int_equal(sessions_get(S2, "sh", id, &v), 0);
	assert_int_equal(v.status, SESSION_FAILED);
	assert_int_equal(v.exit_code, 3);
	types(S2, id, t, sizeof(t));
	assert_string_equal(t, "started output output output exited");
	sessions_free(S);
	sessions_free(S2);
}

static void
test_cancel_limits_truncation(void **state)
{
	struct sessions *S = table(NULL, 65536);
	struct session_view v, v2;
	struct err e = {0};
	char t[16384], id[SESSION_ID_MAX];
	int i;

	assert_int_equal(start(S, "trap '' TERM; echo up; sleep 30", &v, &e), 0);
	snprintf(id, sizeof(id), "%s", v.id);
	assert_int_equal(start(S, "sleep 30", &v2, &e), 0);
	assert_int_equal(start(S, "true", &v2, &e), -1);
	assert_string_equal(e.code, "request.rate_limited");
	/* "up" says the TERM trap is set (10 s at most on a loaded machine) */
	for (i = 0; i < 500 && (sessions_get(S, "sh", id, &v), v.events < 2); i++)
		sessions_wait(S, id, v.events, 20);
	assert_true(v.events >= 2);
	assert_int_equal(sessions_cancel(S, "sh", id, &v), 0);
	wait_end(S, id, &v);
	assert_int_equal(v.status, SESSION_CANCELLED);
	assert_int_equal(v.exit_code, 137);
	assert_int_equal(sessions_cancel(S, "sh", id, &v), 1);
	assert_int_equal(sessions_cancel(S, "sh", v2.id, &v), 0);
	wait_end(S, v2.id, &v);
	assert_int_equal(v.status, SESSION_CANCELLED);

	assert_int_equal(start(S,
	                       "i=0; while [ $i -lt 2000 ]; do echo "
	                       "line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; i=$((i+1)); done",
	                       &v, &e),
	                 0);
	snprintf(id, sizeof(id), "%s", v.id);
	wait_end(S, id, &v);
	assert_int_equal(v.status, SESSION_COMPLETED);
	assert_true(v.truncated);
	types(S, id, t, sizeof(t));
	assert_non_null(strstr(t, "output truncated output_dropped exited"));
	assert_int_equal(sessions_shutdown(S, 100), 0);
	sessions_free(S);
}

/* The SSE form of events after `after` (the wire's: each data object
 * starts with "event_id" and "session_id"), built from the JSON lines. */
static void
expect_sse(struct sessions *S, const char *id, uint32_t after, char *out, size_t cap)
{
	struct json_doc doc;
	struct err e = {0};
	char *buf, *p, *nl;
	size_t len, n = 0;
	uint32_t last, k = after;
	int done;

	out[0] = '\0';
	assert_true(sessions_read(S, "sh", id, after, 1000, 1 << 20, 0, &buf, &len, &last, &done) >= 0);
	for (p = buf; p != NULL && p < buf + len; p = nl + 1) {
		const char *t;

		nl = memchr(p, '\n', (size_t)(buf + len - p));
		assert_non_null(nl);
		assert_int_equal(json_parse(&doc, p, (size_t)(nl - p), NULL, &e), 0);
		t = json_get_str(doc.root, "type");
		n += (size_t)snprintf(out + n, cap - n, "id: %u\n", ++k);
		if (t != NULL)
			n += (size_t)snprintf(out + n, cap - n, "event: %s\n", t);
		n += (size_t)snprintf(out + n, cap - n,
		                      "data: {\"event_id\":\"%u\",\"session_id\":\"%s\",%.*s\n\n", k, id,
		                      (int)(nl - p - 1), p + 1);
		assert_true(n < cap);
		json_free(&doc);
	}
	free(buf);
}

/* A stream's reads into one kept buffer, in small batches, join to the
 * SSE form of the journal; lines of a journal written elsewhere (type not
 * second, or none) get their event: field found, or none. */
static void
test_read_sse(void **state)
{
	struct sessions *S = table(dir, 1 << 20), *S2;
	struct buf b = BUF_INIT(SESSIONS_READ_ROOM(1 << 20)), small = BUF_INIT(16);
	struct session_view v;
	struct err e = {0};
	char want[16384], got[16384], path[512];
	size_t n = 0;
	uint32_t last = 0;
	int done = 0, rc, loaded, intr, skipped, reads = 0;
	FILE *f;

	assert_non_null(S);
	assert_int_equal(start(S, "echo 'a \"q\" \\\\'; echo b >&2; echo c; echo d", &v, &e), 0);
	wait_end(S, v.id, &v);
	expect_sse(S, v.id, 0, want, sizeof(want));
	while (!done) {
		rc = sessions_read_buf(S, "sh", v.id, last, 2, 1 << 20, 1, &b, &last, &done);
		assert_true(rc >= 0 && rc <= 2);
		if (rc == 0)
			break;
		memcpy(got + n, b.p, b.len);
		n += b.len;
		reads++;
	}
	got[n] = '\0';
	assert_true(done);
	assert_true(reads >= 3);
	assert_string_equal(got, want);
	assert_non_null(strstr(got, "event: agent.session.exited\n"));
	/* after the last event: nothing, done */
	assert_int_equal(sessions_read_buf(S, "sh", v.id, last, 2, 1 << 20, 1, &b, &last, &done), 0);
	assert_int_equal(b.len, 0);
	assert_int_equal(
	    sessions_read_buf(S, "sh", "as_0000000000000000", 0, 2, 1 << 20, 1, &b, &last, &done), -1);
	/* A buffer that cannot hold one event stays within its max: nothing
	 * read, no part of an event, and the next read starts where it was. */
	assert_int_equal(sessions_read_buf(S, "sh", v.id, 0, 2, 1 << 20, 1, &small, &last, &done), 0);
	assert_int_equal(small.len, 0);
	assert_int_equal(last, 0);
	assert_false(done);
	assert_true(small.cap <= small.max + 1);
	buf_free(&small);
	sessions_free(S);

	/* A journal from elsewhere. */
	snprintf(path, sizeof(path), "%s/as_00000000000000aa.jsonl", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"object\":\"agent.session.journal\",\"version\":1,\"id\":\"as_00000000000000aa\",\"agent\":"
	      "\"sh\","
	      "\"principal\":\"p\",\"created_at\":\"2026-01-01T00:00:00.000Z\",\"created_ms\":1}\n"
	      "{\"time\":\"t\",\"type\":\"x.moved\",\"seq\":1}\n"
	      "{\"seq\":2,\"note\":\"no type\"}\n"
	      "{\"seq\":3,\"type\":\"x.end\",\"status\":\"completed\"}\n",
	      f);
	fclose(f);
	S2 = table(dir, 1 << 20);
	sessions_replay(S2, &loaded, &intr, &skipped);
	assert_int_equal(intr, 0);
	rc = sessions_read_buf(S2, "sh", "as_00000000000000aa", 0, 100, 1 << 20, 1, &b, &last, &done);
	assert_int_equal(rc, 3);
	assert_int_equal(last, 3);
	assert_true(done);
#define W(k) "{\"event_id\":\"" #k "\",\"session_id\":\"as_00000000000000aa\","
	assert_int_equal(
	    b.len,
	    strlen("id: 1\nevent: x.moved\ndata: " W(
	        1) "\"time\":\"t\",\"type\":\"x.moved\",\"seq\":1}\n\n"
	           "id: 2\ndata: " W(2) "\"seq\":2,\"note\":\"no type\"}\n\n"
	                                "id: 3\nevent: x.end\ndata: " W(
	                                    3) "\"seq\":3,\"type\":\"x.end\",\"status\":\"completed\"}\n\n"));
	assert_memory_equal(
	    b.p,
	    "id: 1\nevent: x.moved\ndata: " W(
	        1) "\"time\":\"t\",\"type\":\"x.moved\",\"seq\":1}\n\n"
	           "id: 2\ndata: " W(2) "\"seq\":2,\"note\":\"no type\"}\n\n"
	                                "id: 3\nevent: x.end\ndata: " W(
	                                    3) "\"seq\":3,\"type\":\"x.end\",\"status\":\"completed\"}\n\n",
	    b.len);
#undef W
	buf_free(&b);
	sessions_free(S2);
}

/* A burst of empty lines (200000 events from a few reads: the stage grows
 * past what it keeps between reads): every one is an event, in order. */
static void
test_burst_of_empty_lines(void **state)
{
	struct sessions *S = table(NULL, 64u << 20);
	struct session_view v;
	struct err e = {0};
	char *buf, *p, *nl, want[128];
	size_t len;
	uint32_t last, k = 0;
	int done, outputs = 0;

	assert_non_null(S);
	/* written from a file by cat: 128 KiB writes, 131072 events a read */
	assert_int_equal(
	    start(S, "f=$(mktemp) && head -c 200000 /dev/zero | tr '\\0' '\\n' >$f && cat $f; rm -f $f", &v,
	          &e),
	    0);
	wait_end(S, v.id, &v);
	assert_int_equal(v.status, SESSION_COMPLETED);
	assert_int_equal(v.events, 200002);
	assert_false(v.truncated);
	assert_int_equal(sessions_read(S, "sh", v.id, 0, 300000, 64u << 20, 0, &buf, &len, &last, &done),
	                 200002);
	assert_int_equal(last, 200002);
	for (p = buf; p < buf + len; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(buf + len - p));
		assert_non_null(nl);
		k++;
		snprintf(want, sizeof(want), "{\"seq\":%u,\"type\":\"agent.session.output\",\"time\":\"", k);
		if ((size_t)(nl - p) > strlen(want) && memcmp(p, want, strlen(want)) == 0) {
			assert_memory_equal(nl - 30, "\",\"stream\":\"stdout\",\"data\":\"\"}", 30);
			outputs++;
		} else {
			snprintf(want, sizeof(want), "{\"seq\":%u,", k);
			assert_memory_equal(p, want, strlen(want));
		}
	}
	assert_int_equal(k, 200002);
	assert_int_equal(outputs, 200000);
	free(buf);
	sessions_free(S);
}

/* The event of stream data or of a message that carries a quote, a
 * backslash, a newline and control bytes is one JSON line that reads back
 * to the same bytes: the output event, and a start_failed event whose
 * message names an entry's path of 1,600 bytes (escaped: ~9,000): elided
 * in its middle (core/base/err.h), its head and last component whole. */
static void
test_odd_values_round_trip(void **state)
{
	struct sessions *S = table(NULL, 1 << 20);
	char *argv[] = {"{bin}"}, *envp[] = {"PATH=/usr/bin:/bin", NULL};
	char entry[1600], *buf, *p, *nl;
	const char *msg, *data, *head, *mark, *tail_end;
	struct session_spec sp;
	struct session_view v;
	struct json_doc doc;
	struct err e = {0};
	size_t len, i, n;
	uint32_t last;
	int ra, done, seen = 0;

	assert_non_null(S);
	assert_int_equal(start(S, "printf 'q\"b\\\\s\\001\\n'", &v, &e), 0);
	wait_end(S, v.id, &v);
	assert_true(sessions_read(S, "sh", v.id, 0, 100, 1 << 20, 0, &buf, &len, &last, &done) >= 0);
	for (p = buf; p < buf + len; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(buf + len - p));
		assert_non_null(nl);
		assert_int_equal(json_parse(&doc, p, (size_t)(nl - p), NULL, &e), 0);
		if ((data = json_get_str(doc.root, "data")) != NULL) {
			assert_string_equal(data, "q\"b\\s\001");
			seen++;
		}
		json_free(&doc);
	}
	free(buf);
	assert_int_equal(seen, 1);

	/* components of 200 bytes, most of them control bytes (six each) */
	memcpy(entry, "/no/q\"b\\s\n", 10);
	for (i = 10; i < sizeof(entry) - 1; i++)
		entry[i] = i % 200 == 0 ? '/' : 1;
	entry[sizeof(entry) - 1] = '\0';
	memset(&sp, 0, sizeof(sp));
	sp.agent = "sh";
	sp.principal = "p";
	sp.op = "agents.sh.sessions.create";
	sp.argv = argv;
	sp.argc = 1;
	sp.envp = envp;
	sp.cfg = &set;
	sp.entry = entry;
	assert_int_equal(sessions_create(S, &sp, &v, &ra, &e), 0);
	wait_end(S, v.id, &v);
	assert_int_equal(v.status, SESSION_FAILED);
	assert_true(sessions_read(S, "sh", v.id, 0, 100, 1 << 20, 0, &buf, &len, &last, &done) >= 0);
	seen = 0;
	for (p = buf; p < buf + len; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(buf + len - p));
		assert_non_null(nl);
		assert_int_equal(json_parse(&doc, p, (size_t)(nl - p), NULL, &e), 0);
		if (strcmp(json_get_str(doc.root, "type"), "agent.session.start_failed") == 0) {
			msg = json_get_str(doc.root, "message");
			assert_non_null(msg);
			assert_true(strlen(msg) < ERR_MSG_MAX);
			/* head: a prefix of the path; then one mark; then a
			 * suffix of it from its last component on, and ": " */
			assert_non_null(head = strstr(msg, "/no/q\"b\\s\n"));
			assert_non_null(mark = strstr(head, "\xe2\x80\xa6"));
			assert_null(strstr(mark + 3, "\xe2\x80\xa6"));
			assert_true(mark - head >= 10);
			assert_memory_equal(head, entry, (size_t)(mark - head));
			assert_non_null(tail_end = strstr(mark + 3, ": "));
			n = (size_t)(tail_end - (mark + 3));
			assert_true(n >= strlen(entry + 1400) && n < sizeof(entry));
			assert_memory_equal(mark + 3, entry + sizeof(entry) - 1 - n, n);
			seen++;
		}
		json_free(&doc);
	}
	free(buf);
	assert_int_equal(seen, 1);
	sessions_free(S);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lifecycle_and_replay),     cmocka_unit_test(test_conversation),
	    cmocka_unit_test(test_cancel_limits_truncation), cmocka_unit_test(test_read_sse),
	    cmocka_unit_test(test_burst_of_empty_lines),     cmocka_unit_test(test_odd_values_round_trip),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
