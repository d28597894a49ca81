# Agent sessions on the wire (/v1/agents/sessions…, core/server/api_wire.c)
# with an agent that has no JSON dialect: create answers at once, the
# environment pending → ready → started order during a first-use install,
# each output line an event with its stream, the exit code in the exited
# event, Server-Sent Events (ids, Last-Event-ID resume, heartbeats), get and
# list, a cancellation (the whole process group dies), journals replayed
# after kill -9 (the running turn failed), limits (429, journal truncation,
# long lines split), memory-only journals, 50 concurrent sessions; the old
# /v1/agents/<a>/sessions paths are the API's 404. The agent is a static C
# program (tests/fixtures/fakeagent.c) installed as a tarball tool from the
# local HTTPS fixture.
. "$TOP/tests/lib.sh"

AGENT_ENV_NAME=sessions
. "$FIXTURES/agent_env.sh"
gets() { grep -c " GET $1" "$T/req.log" || true; }
for t in fake slowfake unused; do mktool $t; done
mkman fake /f/fake-1.0.0.tgz
mkman slowfake /slow/1.5/slowfake-1.0.0.tgz
mkman unused /f/unused-1.0.0.tgz

TOK=sessions-token-$$
export ABX_SERVER_TOKEN=$TOK
cat >"$T/config.json" <<EOM
{"agents": ["fake", "slowfake", "unused"], "preset": "admin", "manifests_dir": "$M",
 "server": {"max_sessions_per_agent": 3, "sse_heartbeat": 1}}
EOM
ST=$T/state
mkdir -p "$ST" && chmod 700 "$ST"

serve_up() {
	bg "$BIN" serve --host 127.0.0.1 --port 0 --config "$T/config.json" --tools-dir "$T/tools" \
		--state-dir "${STATE:-$ST}" -q "$@" >"$T/serve.out" 2>"$T/serve.err"
	SERVE_PID=$BGPID
	wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10 || { not_ok "serve starts" "$(head -5 "$T/serve.err")"; exit 1; }
	PORT=$(head -1 "$T/serve.out")
	U=http://127.0.0.1:$PORT
}
# alive PID: the process exists and is not a zombie (PID 1 here may not reap)
alive() { [ -r "/proc/$1/stat" ] && ! grep -q ') Z ' "/proc/$1/stat" 2>/dev/null; }
# gone PID...: none of them alive within 10 s (a loaded machine)
gone() {
	_t=0
	while [ $_t -lt 100 ]; do
		_any=0
		for _p in "$@"; do alive "$_p" && _any=1; done
		[ $_any = 0 ] && return 0
		sleep 0.1
		_t=$((_t + 1))
	done
	return 1
}
# types: the event types of $T/ev without "agent.session."
types() { js "$T/ev" '" ".join(e["type"][14:] for e in d["data"])'; }
# tail3: the last three events of $T/ev as (type, exit_code)
tail3() { js "$T/ev" '[(e["type"][14:], e.get("exit_code")) for e in d["data"][-3:]]'; }
serve_up

# ---- first use: pending → ready → started -----------------------------------------
wire_new slowfake "print:2"
check "create answers 200 at once while the tool installs" test "$S" = 200
check "the answer is the session object, in_progress" \
	test "$(js "$T/body" 'd["object"]+" "+d["status"]+" "+d["agent"]["id"]+" "+str(d["created_at"] > 0)')" = \
	"agent.session in_progress slowfake True"
wire_events "$SID" agent.session.idle
check "events: environment pending → ready → started → output → exited, the turn completed, idle" \
	test "$(types)" = "created environment.pending turn.created turn.item.added environment.ready started turn.in_progress output output output exited turn.completed idle"
check "one download of the tool" test "$(gets /slow/1.5/slowfake-1.0.0.tgz)" = 1

# ---- a turn from start to end ------------------------------------------------------------
wire_new fake "print:3 err:2 exit:3"
check "create (fake installs within the session's turn)" test "$S" = 200
FID=$SID
wire_events "$FID" agent.session.idle
FTYPES=$(types)
check "non-zero exit: the exited event has exit_code 3, then the turn failed, the session idle" \
	test "$(tail3)" = "[('exited', 3), ('turn.failed', None), ('idle', None)]"
check "... and the exited event a duration" test "$(js "$T/ev" '[e["duration_ms"] >= 0 for e in d["data"] if e["type"].endswith("exited")]')" = "[True]"
check "every stdout and stderr line is an event with its stream" \
	test "$(js "$T/ev" 'sorted((e["stream"],e["data"]) for e in d["data"] if e["type"].endswith("output"))')" = \
	"[('stderr', 'err 1 of 2'), ('stderr', 'err 2 of 2'), ('stdout', 'out 1 of 3'), ('stdout', 'out 2 of 3'), ('stdout', 'out 3 of 3'), ('stdout', 'prompt: print:3 err:2 exit:3')]"
check "seq runs 1..N, event_id is the seq, every event has a time" \
	test "$(js "$T/ev" '[e["seq"] for e in d["data"]]==list(range(1,len(d["data"])+1)) and all(e["event_id"]==str(e["seq"]) and e["time"].endswith("Z") for e in d["data"])')" = True
check "stdout lines keep their order" \
	test "$(js "$T/ev" '[e["data"] for e in d["data"] if e.get("stream")=="stdout"]')" = "['prompt: print:3 err:2 exit:3', 'out 1 of 3', 'out 2 of 3', 'out 3 of 3']"
wire GET "/$FID/turns/turn_1" >/dev/null
check "the turn says why it failed" test "$(js "$T/body" 'd["status"]+": "+d["error"]["message"]')" = "failed: the agent failed (exit status 3)"
check "after=abc: 400" test "$(wire GET "/$FID/events?after=abc")" = 400
check "GET the session" test "$(wire GET "/$FID") $(js "$T/body" 'd["id"]+" "+d["status"]')" = "200 $FID idle"
check "GET an unknown session: 404" test "$(wire GET /as_0000000000000000)" = 404
wire GET "?agent_id=fake" >/dev/null
check "the list of fake's sessions has it" test "$(js "$T/body" '[s["id"] for s in d["data"]]')" = "['$FID']"
wire_new fake "partial"
wire_events "$SID" agent.session.idle
check "a last line without newline is an event" \
	test "$(js "$T/ev" '[e["data"] for e in d["data"] if e.get("stream")]')" = "['prompt: partial', 'no newline']"
wire_new fake "long:20000"
wire_events "$SID" agent.session.idle
check "a 20000-byte line is split into partial events that join to it" \
	test "$(js "$T/ev" '[e.get("partial",False) for e in d["data"] if e.get("stream")][1:]+[sum(len(e["data"]) for e in d["data"] if e.get("stream"))-len("prompt: long:20000")]')" = "[True, True, False, 20000]"

# ---- requests that are refused -----------------------------------------------------
s=$(wire POST "" '{"agent_id": "fake", "environment": {"type": "self_hosted"}, "input": "--dangerous"}')
check "a message that would be an option: 400" sh -c "test $s = 400 && grep -q 'read as an option' '$T/body'"
check "an input that is an object: 400" \
	test "$(wire POST "" '{"agent_id": "fake", "environment": {"type": "self_hosted"}, "input": {}}')" = 400
check "not JSON: 400" test "$(wire POST "" '{"agent_id": ')" = 400
check "an agent that is not enabled: 404" test "$(wire POST "" '{"agent_id": "nope", "environment": {"type": "self_hosted"}}')" = 404
check "no token: 401" \
	test "$(curl -s -o /dev/null -w '%{http_code}' --data '{"agent_id": "fake"}' "$U/v1/agents/sessions")" = 401
check "DELETE on the sessions: 405" test "$(wire DELETE "")" = 405
old() { # METHOD PATH: the API's 404 envelope
	_s=$(A -X "$1" -H 'Content-Type: application/json' --data '{"prompt": "print:1"}' "$U$2")
	test "$_s" = 404 && test "$(js "$T/body" 'd["error"]["code"]')" = not_found && grep -q 'no such resource' "$T/body"
}
check "the old POST /v1/agents/<a>/sessions is the API's 404" old POST /v1/agents/fake/sessions
for p in /v1/agents/fake/sessions "/v1/agents/fake/sessions/$FID" "/v1/agents/fake/sessions/$FID/events"; do
	check "GET $p: the API's 404" old GET "$p"
done
check "POST /v1/agents/fake/sessions/<id>/cancel: the API's 404" old POST "/v1/agents/fake/sessions/$FID/cancel"
wire GET "?agent_id=unused" >/dev/null
wire GET /as_0000000000000000/events >/dev/null
check "reading sessions never installs" test "$(gets /f/unused-1.0.0.tgz)" = 0

# ---- Server-Sent Events with resume ---------------------------------------------------
# The agent stays quiet until the resumed stream has had a heartbeat (or
# 10 s), then prints the rest: no race between its sleep and the clients.
wire_new fake "print:2 wait:$T/sse.go print:2"
SSID=$SID
"$PY" "$FIXTURES/sessclient.py" sse "$PORT" "$TOK" "/v1/agents/sessions/$SSID/events" - 10 2 >"$T/sse1"
check "SSE: 200 text/event-stream with a retry hint" \
	sh -c "grep -q '^status 200 text/event-stream' '$T/sse1' && grep -q '^retry ' '$T/sse1'"
check "SSE: events carry id: and event: (created, then environment.pending); dropped after 2" \
	test "$(grep -E '^[0-9]+ |^dropped' "$T/sse1" | tr '\n' ' ')" = "1 agent.session.created 2 agent.session.environment.pending dropped "
bg "$PY" "$FIXTURES/sessclient.py" sse "$PORT" "$TOK" "/v1/agents/sessions/$SSID/events" 2 30 0 agent.session.idle >"$T/sse2"
wait_for_line "$T/sse2" '^comment keep-alive' 10
: >"$T/sse.go"
wait "$BGPID"
check "resume with Last-Event-ID: 2 continues at 3 and goes on to the idle event" \
	test "$(grep -E '^[0-9]+ ' "$T/sse2" | head -1 | cut -d' ' -f1)/$(grep -E '^[0-9]+ ' "$T/sse2" | tail -1 | cut -d' ' -f2)" = "3/agent.session.idle"
check "the idle stretch got heartbeats (comment lines)" grep -q '^comment keep-alive' "$T/sse2"
check "the two streams together are the journal, no gap or duplicate" \
	test "$(cat "$T/sse1" "$T/sse2" | grep -E '^[0-9]+ ' | cut -d' ' -f1 | tr '\n' ' ')" = \
	"$(tail -n +2 "$ST/sessions/$SSID.jsonl" | "$PY" -c 'import json,sys; print(" ".join(str(json.loads(l)["seq"]) for l in sys.stdin))') "

# ---- cancel: the whole group ---------------------------------------------------------
wire_new fake "ignterm pid:$T/me.pid child:$T/gc.pid sleep:60000"
CID=$SID
wait_for_line "$T/gc.pid" '[0-9]' 10
check "a cancellation is accepted (202)" test "$(wire_cancel "$CID")" = 202
wire_events "$CID" agent.session.idle
check "the turn ends cancelled, SIGKILL after the ignored SIGTERM (137), the session idle" \
	test "$(tail3)" = "[('exited', 137), ('turn.cancelled', None), ('idle', None)]"
check "no orphan: the agent and its grandchild are gone" \
	gone "$(cat "$T/me.pid")" "$(cat "$T/gc.pid")"
s=$(wire_cancel "$CID")
check "cancel again: 409 session.idle, the session goes on" sh -c "test $s = 409 && grep -q session.idle '$T/body'"

# ---- limits ---------------------------------------------------------------------------
LIDS=""
for i in 1 2 3; do wire_new fake "sleep:60000"; LIDS="$LIDS $SID"; done
wire_new fake "x"
check "the 4th running session of an agent: 429 with Retry-After" \
	sh -c "test $S = 429 && grep -qi '^Retry-After: ' '$T/hdr' && grep -q request.rate_limited '$T/body'"
for i in $LIDS; do wire_cancel "$i" >/dev/null; done

# ---- kill -9, restart: replay, the running turn failed ---------------------------------------
rm -f "$T/me.pid" "$T/gc.pid"
wire_new slowfake "pid:$T/me.pid child:$T/gc.pid print:1 sleep:60000"
KID=$SID
wait_for_line "$T/gc.pid" '[0-9]' 10
# serve has journaled both lines before it is killed
wait_for_line "$ST/sessions/$KID.jsonl" 'out 1 of 1' 10
check "journals are JSON lines in <state>/sessions/<id>.jsonl (0600), header first" \
	sh -c "test \"\$(stat -c %a '$ST/sessions/$KID.jsonl')\" = 600 && head -1 '$ST/sessions/$KID.jsonl' | grep -q '\"object\":\"agent.session.journal\"'"
kill -9 "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
check "after kill -9 of serve the agent still runs (own process group)" alive "$(cat "$T/me.pid")"
# A crash mid-write leaves half a line.
printf '{"seq":99,"type":"agent.sess' >>"$ST/sessions/$KID.jsonl"
serve_up
wire GET "/$KID" >/dev/null
check "after restart the session is served again, idle" test "$(js "$T/body" 'd["status"]')" = idle
wire_events "$KID" agent.session.idle
check "its events are replayed, the partial line dropped, the turn failed and idle appended" \
	test "$(types)" = "created environment.pending turn.created turn.item.added environment.ready started turn.in_progress output output turn.failed idle"
check "the orphaned group was killed at replay" \
	gone "$(cat "$T/me.pid")" "$(cat "$T/gc.pid")"
wire GET "/$FID/turns/turn_1" >/dev/null
check "finished turns keep their status across the restart" \
	test "$(js "$T/body" 'd["status"]+": "+d["error"]["message"]')" = "failed: the agent failed (exit status 3)"
wire_events "$FID" agent.session.idle
check "and their sessions their events" test "$(types)" = "$FTYPES"
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null

# ---- journal limit, SIGTERM of serve, memory-only journals ---------------------------------
export ABX_SERVER_SESSION_JOURNAL_MAX_BYTES=65536
serve_up
wire_new fake "flood:3000"
wire_events "$SID" agent.session.idle
check "over the journal limit: one truncated event, output dropped and counted, the turn's end kept" \
	test "$(js "$T/ev" '[e["type"][14:] for e in d["data"] if e["type"][14:] not in ("output", "created", "environment.pending", "turn.created", "turn.item.added", "environment.ready", "turn.in_progress")]')" = \
	"['started', 'truncated', 'output_dropped', 'exited', 'turn.completed', 'idle']"
check "the journal file stays near the limit" test "$(stat -c %s "$ST/sessions/$SID.jsonl")" -lt 70000
wire_new fake "pid:$T/me2.pid sleep:60000"
wait_for_line "$T/me2.pid" '[0-9]' 10
TID=$SID
kill "$SERVE_PID"; wait "$SERVE_PID"; rc=$?
sigterm_ok() { test "$rc" = 0 && gone "$(cat "$T/me2.pid")"; }
check "SIGTERM with a session running: serve exits 0 and the agent is gone" sigterm_ok
check "that session's journal ends with the turn failed (the server stopped), then idle" \
	sh -c "tail -2 '$ST/sessions/$TID.jsonl' | head -1 | grep -q 'turn.failed.*the server stopped' && tail -1 '$ST/sessions/$TID.jsonl' | grep -q '\"status\":\"idle\"'"
unset ABX_SERVER_SESSION_JOURNAL_MAX_BYTES

chmod 500 "$ST/sessions"
if [ "$(id -u)" != 0 ]; then
	serve_up
	check "no writable journal directory: serve says replay is limited to the process" \
		grep -q 'in memory, replay is limited' "$T/serve.err"
	wire_new fake "print:1"
	wire_events "$SID" agent.session.idle
	check "sessions still work with journals in memory" test "$(tail3)" = "[('exited', 0), ('turn.completed', None), ('idle', None)]"
	check "no file was written" test ! -e "$ST/sessions/$SID.jsonl"
	kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
fi
chmod 700 "$ST/sessions"
mkdir -p "$T/ro" && chmod 500 "$T/ro"
STATE=/proc/self/nonexistent serve_up
check "no state directory at all: serve says journals live in memory" grep -q 'in memory, replay is limited' "$T/serve.err"
wire_new fake "print:1"
wire_events "$SID" agent.session.idle
check "sessions still work with journals in memory" test "$(tail3)" = "[('exited', 0), ('turn.completed', None), ('idle', None)]"
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
ABX_SERVER_STATE_DIR=/proc/self/nonexistent run "$BIN" doctor
check "doctor: session replay is limited to the process lifetime" \
	grep -q 'sessions: .*replay is limited to the process lifetime' "$T/out"

# A journal write that fails (the file size limit here, as a full disk
# would): one warning that names the journal by its path under the state
# directory (serve writes through the directory's descriptor, which no
# message shows), and the session goes on in memory.
mkdir -p "$T/state-fsize" && chmod 700 "$T/state-fsize"
bg "$PY" -c 'import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))
os.execv(sys.argv[1], sys.argv[1:])' "$BIN" serve --host 127.0.0.1 --port 0 --config "$T/config.json" \
	--tools-dir "$T/tools" --state-dir "$T/state-fsize" -q >"$T/serve.out" 2>"$T/serve.err"
SERVE_PID=$BGPID
if wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10; then
	PORT=$(head -1 "$T/serve.out")
	U=http://127.0.0.1:$PORT
	wire_new fake "print:100"
	wire_events "$SID" agent.session.idle
	check "a journal write fails: one warning names it by its path under the state directory ($(grep -m1 'io.error' "$T/serve.err"))" \
		sh -c "grep -qF \"warning: io.error: $T/state-fsize/sessions/$SID.jsonl: File too large: the rest of session $SID's journal is kept in memory only\" '$T/serve.err' &&
			test \$(grep -c 'io.error' '$T/serve.err') = 1"
	check "... never by a descriptor's path" sh -c "! grep -q /proc/self/fd '$T/serve.err'"
	check "... and the session completes with every event in memory" \
		test "$(js "$T/ev" 'd["data"][-2]["type"]+" "+str(len(d["data"]) >= 102)')" = "agent.session.turn.completed True"
	kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
else
	not_ok "serve with a file size limit starts" "$(head -5 "$T/serve.err")"
fi

# Without /proc (a mount namespace with an empty one): journals are still
# written in the sessions directory serve opened at start, even after an
# ancestor of its path is moved and another directory put in its place
# (journals are opened relative to the directory's descriptor, not through
# /proc/self/fd, nor by the path again).
if [ "$(id -u)" = 0 ] && unshare -m sh -c 'mount -t tmpfs none /proc' 2>/dev/null; then
	mkdir -p "$T/pin/state" && chmod 700 "$T/pin/state"
	bg unshare -m sh -c 'mount -t tmpfs none /proc && exec "$@"' sh "$BIN" serve --host 127.0.0.1 --port 0 \
		--config "$T/config.json" --tools-dir "$T/tools" --state-dir "$T/pin/state" -q \
		>"$T/serve.out" 2>"$T/serve.err"
	SERVE_PID=$BGPID
	if wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10; then
		PORT=$(head -1 "$T/serve.out")
		U=http://127.0.0.1:$PORT
		mv "$T/pin" "$T/pin-moved"
		mkdir -p "$T/pin/state/sessions"
		wire_new fake "print:2"
		wire_events "$SID" agent.session.idle
		check "no /proc: a session's turn completes" test "$(tail3)" = "[('exited', 0), ('turn.completed', None), ('idle', None)]"
		check "no /proc, an ancestor moved: its journal is in the directory serve opened" \
			sh -c "test -s '$T/pin-moved/state/sessions/$SID.jsonl' && test ! -e '$T/pin/state/sessions/$SID.jsonl'"
		kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
	else
		not_ok "serve without /proc starts" "$(head -5 "$T/serve.err")"
	fi
else
	skip "journals without /proc" "needs root and mount namespaces"
fi

# ---- 50 concurrent sessions --------------------------------------------------------------
export ABX_SERVER_MAX_SESSIONS=64 ABX_SERVER_MAX_SESSIONS_PER_AGENT=64
serve_up
"$PY" "$FIXTURES/sessclient.py" many "$PORT" "$TOK" fake 50 "print:5 sleep:300" 60 >"$T/many"
check "50 concurrent sessions: all created and completed, every event there in order ($(cat "$T/many"))" \
	test "$(cat "$T/many")" = 'created=50 codes=200 statuses={"completed": 50} outputs_ok=50'
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
