# Agent sessions: create answers at once, the pending →
# ready → started order during a first-use install, events as JSON pages and
# Server-Sent Events (ids, Last-Event-ID resume, heartbeats), get/list/cancel
# (the whole process group dies), journals replayed after kill -9 with
# running sessions marked interrupted, limits (429, journal truncation, long
# lines split), memory-only journals, 50 concurrent sessions. The agent is a
# static C program (tests/fixtures/fakeagent.c) installed as a tarball tool
# from the local HTTPS fixture.
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
waitdone() { # AGENT ID -> $T/final
	"$PY" "$FIXTURES/sessclient.py" wait "$PORT" "$TOK" "$1" "$2" 20 >"$T/final"
}
events() { # AGENT ID [QUERY] -> $T/ev
	curl -s -H "X-Access-Token: $TOK" "$U/v1/agents/$1/sessions/$2/events${3:-}" >"$T/ev"
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
types() { js "$T/ev" '" ".join(e["type"].split(".")[-1] for e in d["data"])'; }
serve_up

# ---- first use: pending → ready → started -----------------------------------------
create slowfake "print:2"
check "create answers 201 while the tool installs" test "$S" = 201
check "the answer is the session object, in_progress" \
	test "$(js "$T/body" 'd["object"]+" "+d["status"]+" "+d["agent"]+" "+str(bool(d["created_at"]))')" = \
	"agent.session in_progress slowfake True"
check "Location names the session" grep -qi "^Location: /v1/agents/slowfake/sessions/$SID" "$T/hdr"
waitdone slowfake "$SID"
check "the session ends completed with exit code 0" \
	test "$(js "$T/final" 'd["status"]+" "+str(d["exit_code"])')" = "completed 0"
events slowfake "$SID"
check "events: pending → ready → started → output → exited" \
	test "$(types)" = "pending ready started output output output exited"
JOB=$(js "$T/final" 'd["install_job"]')
check "the pending event names the install job ($JOB)" \
	test "$(js "$T/ev" 'd["data"][0]["job"]')" = "$JOB" -a "${JOB#ij_}" != "$JOB"
check "one download of the tool" test "$(gets /slow/1.5/slowfake-1.0.0.tgz)" = 1

# ---- the whole lifecycle ---------------------------------------------------------------
create fake "print:3 err:2 exit:3"
check "create (fake installs within the request's session)" test "$S" = 201
FID=$SID
waitdone fake "$FID"
check "non-zero exit: status failed, exit_code 3, duration, ended_at" \
	test "$(js "$T/final" 'd["status"]+" "+str(d["exit_code"])+" "+str(d["duration_ms"]>=0)+" "+str(d["ended_at"] is not None)')" = "failed 3 True True"
events fake "$FID"
check "every stdout and stderr line is an event with its stream" \
	test "$(js "$T/ev" 'sorted((e["stream"],e["data"]) for e in d["data"] if e["type"].endswith("output"))')" = \
	"[('stderr', 'err 1 of 2'), ('stderr', 'err 2 of 2'), ('stdout', 'out 1 of 3'), ('stdout', 'out 2 of 3'), ('stdout', 'out 3 of 3'), ('stdout', 'prompt: print:3 err:2 exit:3')]"
check "seq runs 1..N, every event has a time" \
	test "$(js "$T/ev" '[e["seq"] for e in d["data"]]==list(range(1,len(d["data"])+1)) and all(e["time"].endswith("Z") for e in d["data"])')" = True
check "stdout lines keep their order" \
	test "$(js "$T/ev" '[e["data"] for e in d["data"] if e.get("stream")=="stdout"]')" = "['prompt: print:3 err:2 exit:3', 'out 1 of 3', 'out 2 of 3', 'out 3 of 3']"
check "exited comes last with exit_code and duration_ms" \
	test "$(js "$T/ev" 'd["data"][-1]["type"]+" "+str(d["data"][-1]["exit_code"])+" "+str("duration_ms" in d["data"][-1])')" = "agent.session.exited 3 True"
events fake "$FID" "?after=2&limit=3"
check "?after=2&limit=3 pages from seq 3" \
	test "$(js "$T/ev" '[e["seq"] for e in d["data"]]+[d["has_more"]]')" = "[3, 4, 5, True]"
check "after=abc: 400" test "$(A "$U/v1/agents/fake/sessions/$FID/events?after=abc")" = 400
check "GET the session" test "$(A "$U/v1/agents/fake/sessions/$FID") $(js "$T/body" 'd["id"]')" = "200 $FID"
check "GET an unknown session: 404" test "$(A "$U/v1/agents/fake/sessions/as_0000000000000000")" = 404
check "the session under another agent: 404" test "$(A "$U/v1/agents/slowfake/sessions/$FID")" = 404
A "$U/v1/agents/fake/sessions" >/dev/null
check "list has the session" test "$(js "$T/body" '[s["id"] for s in d["data"]]')" = "['$FID']"
create fake "partial"
waitdone fake "$SID"; events fake "$SID"
check "a last line without newline is an event" \
	test "$(js "$T/ev" '[e["data"] for e in d["data"] if e.get("stream")]')" = "['prompt: partial', 'no newline']"
create fake "long:20000"
waitdone fake "$SID"; events fake "$SID"
check "a 20000-byte line is split into partial events that join to it" \
	test "$(js "$T/ev" '[e.get("partial",False) for e in d["data"] if e.get("stream")][1:]+[sum(len(e["data"]) for e in d["data"] if e.get("stream"))-len("prompt: long:20000")]')" = "[True, True, False, 20000]"

# ---- requests that are refused -----------------------------------------------------
s=$(A -X POST --data '{"prompt": "x", "model": "y"}' "$U/v1/agents/fake/sessions")
check "a body member that is no template slot: 400" sh -c "test $s = 400 && grep -q 'model is not a parameter' '$T/body'"
check "no prompt: 400" test "$(A -X POST --data '{}' "$U/v1/agents/fake/sessions")" = 400
s=$(A -X POST --data '{"prompt": "--dangerous"}' "$U/v1/agents/fake/sessions")
check "a prompt that would be an option: 400" sh -c "test $s = 400 && grep -q 'read as an option' '$T/body'"
check "a prompt that is an object: 400" test "$(A -X POST --data '{"prompt": {}}' "$U/v1/agents/fake/sessions")" = 400
check "not JSON: 400" test "$(A -X POST --data '{"prompt": ' "$U/v1/agents/fake/sessions")" = 400
check "an agent that is not enabled: 404" test "$(A -X POST --data '{"prompt":"x"}' "$U/v1/agents/nope/sessions")" = 404
check "no token: 401" \
	test "$(curl -s -o /dev/null -w '%{http_code}' -X POST --data '{"prompt":"x"}' "$U/v1/agents/fake/sessions")" = 401
check "DELETE on sessions: 405" test "$(A -X DELETE "$U/v1/agents/fake/sessions")" = 405
A "$U/v1/agents/unused/sessions" >/dev/null
A "$U/v1/agents/unused/sessions/as_0000000000000000/events" >/dev/null
check "reading sessions never installs" test "$(gets /f/unused-1.0.0.tgz)" = 0

# ---- Server-Sent Events with resume ---------------------------------------------------
# The agent stays quiet until the resumed stream has had a heartbeat (or
# 10 s), then prints the rest: no race between its sleep and the clients.
create fake "print:2 wait:$T/sse.go print:2"
SSID=$SID
"$PY" "$FIXTURES/sessclient.py" sse "$PORT" "$TOK" "/v1/agents/fake/sessions/$SSID/events" - 10 2 >"$T/sse1"
check "SSE: 200 text/event-stream with a retry hint" \
	sh -c "grep -q '^status 200 text/event-stream' '$T/sse1' && grep -q '^retry ' '$T/sse1'"
check "SSE: events carry id: and event: (started, then output); dropped after 2" \
	test "$(grep -E '^[0-9]+ |^dropped' "$T/sse1" | tr '\n' ' ')" = "1 agent.session.started 2 agent.session.output dropped "
bg "$PY" "$FIXTURES/sessclient.py" sse "$PORT" "$TOK" "/v1/agents/fake/sessions/$SSID/events" 2 30 >"$T/sse2"
wait_for_line "$T/sse2" '^comment keep-alive' 10
: >"$T/sse.go"
wait "$BGPID"
check "resume with Last-Event-ID: 2 continues at 3 and ends with exited" \
	test "$(grep -E '^[0-9]+ ' "$T/sse2" | head -1 | cut -d' ' -f1)/$(grep -E '^[0-9]+ ' "$T/sse2" | tail -1)" = "3/7 agent.session.exited"
check "the stream ends when the session has ended" test "$(tail -1 "$T/sse2")" = end
check "the idle stretch got heartbeats (comment lines)" grep -q '^comment keep-alive' "$T/sse2"
events fake "$SSID"
check "the two streams together are the journal, no gap or duplicate" \
	test "$(cat "$T/sse1" "$T/sse2" | grep -E '^[0-9]+ ' | cut -d' ' -f1 | tr '\n' ' ')" = "$(js "$T/ev" '" ".join(str(e["seq"]) for e in d["data"])') "

# ---- cancel: the whole group ---------------------------------------------------------
create fake "ignterm pid:$T/me.pid child:$T/gc.pid sleep:60000"
CID=$SID
wait_for_line "$T/gc.pid" '[0-9]' 10
s=$(A -X POST "$U/v1/agents/fake/sessions/$CID/cancel")
check "cancel answers with the ended session: cancelled, SIGKILL after the ignored SIGTERM" \
	test "$s $(js "$T/body" 'd["status"]+" "+str(d["exit_code"])')" = "200 cancelled 137"
check "no orphan: the agent and its grandchild are gone" \
	gone "$(cat "$T/me.pid")" "$(cat "$T/gc.pid")"
check "cancel again: 200, still cancelled" \
	test "$(A -X POST "$U/v1/agents/fake/sessions/$CID/cancel") $(js "$T/body" 'd["status"]')" = "200 cancelled"

# ---- limits ---------------------------------------------------------------------------
LIDS=""
for i in 1 2 3; do create fake "sleep:60000"; LIDS="$LIDS $SID"; done
s=$(A -X POST --data '{"prompt": "x"}' "$U/v1/agents/fake/sessions")
check "the 4th concurrent session of an agent: 429 with Retry-After" \
	sh -c "test $s = 429 && grep -qi '^Retry-After: ' '$T/hdr' && grep -q request.rate_limited '$T/body'"
for i in $LIDS; do A -X POST "$U/v1/agents/fake/sessions/$i/cancel" >/dev/null; done

# ---- kill -9, restart: replay and interrupted ---------------------------------------------
rm -f "$T/me.pid" "$T/gc.pid"
create slowfake "pid:$T/me.pid child:$T/gc.pid print:1 sleep:60000"
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
A "$U/v1/agents/slowfake/sessions/$KID" >/dev/null
check "after restart the session is served again, interrupted" test "$(js "$T/body" 'd["status"]')" = interrupted
events slowfake "$KID"
check "its events are replayed, the partial line dropped, interrupted appended" \
	test "$(types)" = "started output output interrupted"
check "the orphaned group was killed at replay" \
	gone "$(cat "$T/me.pid")" "$(cat "$T/gc.pid")"
A "$U/v1/agents/fake/sessions/$FID" >/dev/null
check "finished sessions keep their status across the restart" \
	test "$(js "$T/body" 'd["status"]+" "+str(d["exit_code"])')" = "failed 3"
events fake "$FID"
check "and their events" test "$(types)" = "pending ready started output output output output output output exited"
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null

# ---- journal limit, SIGTERM of serve, memory-only journals ---------------------------------
export ABX_SERVER_SESSION_JOURNAL_MAX_BYTES=65536
serve_up
create fake "flood:3000"
waitdone fake "$SID"; events fake "$SID" "?limit=1000"
check "over the journal limit: one truncated event, output dropped and counted, exited kept" \
	test "$(js "$T/ev" '[e["type"].split(".")[-1] for e in d["data"] if not e["type"].endswith("output")]')" = \
	"['started', 'truncated', 'output_dropped', 'exited']"
check "the journal file stays near the limit" test "$(stat -c %s "$ST/sessions/$SID.jsonl")" -lt 70000
create fake "pid:$T/me2.pid sleep:60000"
wait_for_line "$T/me2.pid" '[0-9]' 10
TID=$SID
kill "$SERVE_PID"; wait "$SERVE_PID"; rc=$?
sigterm_ok() { test "$rc" = 0 && gone "$(cat "$T/me2.pid")"; }
check "SIGTERM with a session running: serve exits 0 and the agent is gone" sigterm_ok
check "that session's journal ends interrupted" \
	sh -c "tail -1 '$ST/sessions/$TID.jsonl' | grep -q '\"status\":\"interrupted\"'"
unset ABX_SERVER_SESSION_JOURNAL_MAX_BYTES

chmod 500 "$ST/sessions"
if [ "$(id -u)" != 0 ]; then
	serve_up
	check "no writable journal directory: serve says replay is limited to the process" \
		grep -q 'in memory, replay is limited' "$T/serve.err"
	create fake "print:1"
	waitdone fake "$SID"
	check "sessions still work with journals in memory" test "$(js "$T/final" 'd["status"]')" = completed
	check "no file was written" test ! -e "$ST/sessions/$SID.jsonl"
	kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
fi
chmod 700 "$ST/sessions"
mkdir -p "$T/ro" && chmod 500 "$T/ro"
STATE=/proc/self/nonexistent serve_up
check "no state directory at all: serve says journals live in memory" grep -q 'in memory, replay is limited' "$T/serve.err"
create fake "print:1"
waitdone fake "$SID"
check "sessions still work with journals in memory" test "$(js "$T/final" 'd["status"]')" = completed
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
	create fake "print:100"
	waitdone fake "$SID"
	check "a journal write fails: one warning names it by its path under the state directory ($(grep -m1 'io.error' "$T/serve.err"))" \
		sh -c "grep -qF \"warning: io.error: $T/state-fsize/sessions/$SID.jsonl: File too large: the rest of session $SID's journal is kept in memory only\" '$T/serve.err' &&
			test \$(grep -c 'io.error' '$T/serve.err') = 1"
	check "... never by a descriptor's path" sh -c "! grep -q /proc/self/fd '$T/serve.err'"
	check "... and the session completes with every event in memory" \
		test "$(js "$T/final" 'd["status"]+" "+str(d["events"] >= 102)')" = "completed True"
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
		create fake "print:2"
		waitdone fake "$SID"
		check "no /proc: a session completes" test "$(js "$T/final" 'd["status"]')" = completed
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
	test "$(cat "$T/many")" = 'created=50 codes=201 statuses={"completed": 50} outputs_ok=50'
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
