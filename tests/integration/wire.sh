# The sessions wire (/v1/agents/sessions…, core/server/api_wire.c) with curl:
# what the sandbox cannot honour is a 400 naming it, an unknown agent 404,
# an oversized message 413 naming the limit; messages to deleted, failed and
# one-shot sessions; an agent that fails mid-turn; two messages racing into
# one idle session; Last-Event-ID resume; a kill -9 during a turn (the turn
# ends failed after the restart, its child is killed, the session takes the
# next message); the session of an agents.<a>.run seen through the wire.
# The agent is tests/fixtures/fakeagent.c (its words: print:N, exit:C,
# wait:PATH, pid:PATH, ...), given as agent "fake" through ABX_TOOL_FAKE.
. "$TOP/tests/lib.sh"

command -v musl-gcc >/dev/null || { skip "wire" "musl-gcc is needed to build the fake agent"; exit 0; }
PY=$(python3 -c 'import sys; print(sys.executable)')
TOK=wire-token
export HOME=$T/home ABX_SERVER_TOKEN=$TOK
mkdir -p "$T/home" "$T/work" "$T/man"
mkdir -m 700 "$T/tools" "$T/state"
musl-gcc -static -O1 -o "$T/fake" "$FIXTURES/fakeagent.c" || { not_ok "fake agent" "musl-gcc failed"; exit 1; }
# fake: run through ABX_TOOL_FAKE; broken: its install fails at once (a
# registry on a port where nothing listens)
# fcodex, fgem: the fake agent started as codex and gemini (run.dialect)
cp "$T/fake" "$T/fcodex"
cp "$T/fake" "$T/fgem"
for a in fake broken fcodex fgem; do
	case $a in
	fcodex) RUN='{"argv":["{bin}","exec","{prompt}"],"dialect":"codex"}' ;;
	fgem) RUN='{"argv":["{bin}","-p","{prompt}"],"dialect":"gemini"}' ;;
	*) RUN='["{bin}","run","{prompt}"]' ;;
	esac
	fakeman $a "$RUN"
done
echo "{\"agents\": [\"fake\", \"broken\", \"fcodex\", \"fgem\"], \"preset\": \"admin\", \"manifests_dir\": \"$T/man\"}" >"$T/config.json"
export ABX_TOOL_FAKE=$T/fake ABX_TOOL_FCODEX=$T/fcodex ABX_TOOL_FGEM=$T/fgem
up() {
	start_serve --config "$T/config.json" --tools-dir "$T/tools" --state-dir "$T/state" -q ||
		{ not_ok "serve starts" "$(head -5 "$T/serve.err")"; exit 1; }
	U=http://127.0.0.1:$PORT/v1/agents/sessions
}
up
js() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T/body" "$1"; }
WIRE_ENV="{\"type\": \"self_hosted\", \"workspace_directory\": \"$T/work\"}"
ENV="\"environment\": $WIRE_ENV"
idle() { wire_upto "$1" agent.session.idle "${2:-1}"; }
# seq: the event types of $T/ev, one line
seq_of() { grep '^[0-9]' "$T/ev" | cut -d' ' -f2 | tr '\n' ' '; }

# ---- parameters the sandbox cannot honour: 400 naming them ------------------------
bad() { # NAME BODY-MEMBERS WANT
	S=$(wire POST "" "{\"agent_id\": \"fake\", $2}")
	check "create: $1 is 400 naming it" sh -c "test $S = 400 && grep -q '$3' '$T/body'"
}
bad "an openai_hosted environment" '"environment": {"type": "openai_hosted"}' 'environment.type openai_hosted'
bad "a prewarmed environment" '"environment": {"type": "prewarmed"}' 'environment.type prewarmed'
bad "spend_control" "$ENV, \"spend_control\": {\"limit\": 100}" 'spend_control is not supported'
bad "vault_ids" "$ENV, \"vault_ids\": [\"v1\"]" 'vault_ids is not supported'
bad "an unknown key" "$ENV, \"colour\": 1" 'colour is not supported'
bad "agent.tools" "$ENV, \"agent\": {\"tools\": []}" 'agent.tools is not supported'
bad "environment.setup_commands" '"environment": {"type": "self_hosted", "setup_commands": []}' \
	'environment.setup_commands is not supported'
bad "a workspace inside the state directory" \
	"\"environment\": {\"type\": \"self_hosted\", \"workspace_directory\": \"$T/state\"}" 'inside the state directory'
S=$(wire POST "" "{$ENV}")
check "create: no agent_id is 400" sh -c "test $S = 400 && grep -q 'agent_id is required' '$T/body'"
S=$(wire POST "" "{\"agent_id\": \"nosuch\", $ENV}")
check "create: an unknown agent is 404 not_found" sh -c "test $S = 404 && grep -q 'no agent nosuch is enabled' '$T/body'"
S=$(wire GET /as_0000000000000000)
check "retrieve: an unknown session is 404" test "$S" = 404

# ---- turns: a failing agent, raw lines, the next message ---------------------------
wire_new fake "exit:3"
idle "$SID"
check "an agent that fails mid-turn: the turn fails, the session is idle" \
	sh -c "seq_of() { grep '^[0-9]' '$T/ev' | cut -d' ' -f2 | tr '\n' ' '; }; seq_of | grep -q 'agent.session.turn.failed agent.session.idle'"
wire GET "/$SID/turns/turn_1" >/dev/null
check "... the turn says why (sandbox_error, the exit status)" \
	test "$(js 'd["status"]+" "+d["error"]["code"]+" "+d["error"]["message"]')" = "failed sandbox_error the agent failed (exit status 3)"
S=$(wire_msg "$SID" "print:1")
check "... and the next message is accepted (202)" test "$S" = 202
idle "$SID" 2
check "... a second turn runs: the agent's plain lines are output events" \
	sh -c "grep -q ' agent.session.turn.completed$' '$T/ev' && test \$(grep -c ' agent.session.output$' '$T/ev') -ge 3"
wire_upto "$SID" agent.session.idle 1 12
check "Last-Event-ID resumes after that event" sh -c "grep -q '^13 ' '$T/ev' && ! grep -q '^12 ' '$T/ev'"

# ---- an agent's JSON lines: items, resume, model and instructions -------------------
bad "agent.model for an agent without a dialect" "$ENV, \"agent\": {\"model\": \"m1\"}" \
	'agent.model cannot be passed to fake'
S=$(wire POST "" "{\"agent_id\": \"fgem\", $ENV, \"agent\": {\"instructions\": \"be brief\"}}")
check "create: gemini's instructions are 400 (no option for them)" sh -c "test $S = 400 && grep -q 'gemini has no option' '$T/body'"
wire POST "" "{\"agent_id\": \"fcodex\", $ENV, \"agent\": {\"model\": \"m1\", \"instructions\": \"be brief\"},
 \"input\": \"\`echo hello\` write:f.txt raw\"}" >/dev/null
CID=$(js 'd["id"]')
idle "$CID"
check "codex dialect: turn 1 completes with item events" \
	sh -c "grep -q ' agent.session.turn.item.done$' '$T/ev' && grep -q ' agent.session.turn.completed$' '$T/ev'"
wire GET "/$CID/items?order=asc" >/dev/null
check "... items: the command with its output and exit code" \
	test "$(js '[(i["command"], i["output"], i["exit_code"], i["status"]) for i in d["data"] if i["type"] == "command_execution"]')" = \
	"[('echo hello', 'hello\\n', 0, 'completed')]"
check "... a file change (function_call file_change, path and kind)" \
	test "$(js '[(i["arguments"]["path"], i["arguments"]["kind"]) for i in d["data"] if i.get("name") == "file_change"]')" = \
	"[('$T/work/f.txt', 'add')]"
check "... the answer got the model and the instructions through the agent's argv" \
	test "$(js '[i["content"][0]["text"] for i in d["data"] if i["type"] == "message" and i.get("role") == "assistant"]')" = \
	"['turn 1 (model m1, instructions be brief): The command printed hello.']"
wire_upto "$CID" agent.session.idle
check "... the line that is not JSON is kept as an output event" grep -q ' agent.session.output$' "$T/ev"
S=$(wire_msg "$CID" "again")
idle "$CID" 2
wire GET "/$CID/turns/turn_2/items" >/dev/null
check "turn 2 resumes turn 1's conversation (the agent answers from turn 1's command)" \
	test "$(js '[i["content"][0]["text"] for i in d["data"] if i["type"] == "message" and i.get("role") == "assistant"]')" = \
	"['turn 2 (model m1, instructions be brief): Earlier the command printed hello.']"
wire POST "" "{\"agent_id\": \"fcodex\", $ENV, \"input\": \"say\"}" >/dev/null
YID=$(js 'd["id"]')
idle "$YID"
# The same message in codex's own spacing (written in place, no parse) and
# spaced out (parsed, through the writer): the same event but for the seq,
# the output index and the item id.
"$PY" -c '
import re, sys
ev = [l for l in open(sys.argv[1]) if "\"id\":\"turn_1_say_" in l]
print(len(ev), len({re.sub(r"\"seq\":\d+|\"output_index\":\d+|say_[ab]", "", l) for l in ev}))' \
	"$T/state/sessions/$YID.jsonl" >"$T/say"
check "a codex message event is the same byte for byte whether its line is parsed or not" test "$(cat "$T/say")" = "2 1"
wire GET "/$YID/items?order=asc" >/dev/null
check "... and its text is the agent's" \
	test "$(js '[i["content"][0]["text"] == "tab\t \"q\" back\\ nl\n caf\u00e9 \u2014 end" for i in d["data"] if i.get("role") == "assistant"]')" = \
	"[True, True, False]"

wire POST "" "{\"agent_id\": \"fgem\", $ENV, \"input\": \"\`echo hi\`\"}" >/dev/null
GID=$(js 'd["id"]')
idle "$GID"
wire GET "/$GID/items?order=asc" >/dev/null
check "gemini dialect: its streamed answer is one message item; the command's item keeps the command" \
	test "$(js '[(i["type"], i["status"], i.get("command") or i["content"][0]["text"]) for i in d["data"] if i["type"] == "command_execution" or i.get("role") == "assistant"]')" = \
	"[('command_execution', 'completed', 'echo hi'), ('message', 'completed', 'turn 1: The command printed hi.')]"

# ---- an oversized message ---------------------------------------------------------
"$PY" -c 'import json; print(json.dumps({"events": [{"type": "agent.session.input.message", "input": "x" * (128 << 10)}]}))' >"$T/big.json"
S=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer wire-token" -H 'Content-Type: application/json' \
	--data-binary @"$T/big.json" "$U/$SID/events")
check "a message over 128 KiB is 413 naming the limit" sh -c "test $S = 413 && grep -q 'at most 131071 fit' '$T/body'"
S=$(wire POST "/$SID/events" '{"events": [{"type": "agent.session.input.tool_result", "call_id": "c", "turn_id": "turn_1", "success": true}]}')
check "a tool result is 400 naming it" sh -c "test $S = 400 && grep -q 'input.tool_result is not supported' '$T/body'"

# ---- two messages racing into one idle session -------------------------------------
wire_new fake
idle "$SID"
{ wire_msg "$SID" "wait:$T/go1"; echo; } >"$T/r1" &
P1=$!
{ wire_msg "$SID" "wait:$T/go1"; echo; } >"$T/r2" &
P2=$!
wait $P1 $P2
check "two racing messages: one is accepted, the other is 409 session.busy" \
	test "$(cat "$T/r1" "$T/r2" | sort | tr '\n' ' ')" = "202 409 "
touch "$T/go1"

# ---- a client that never reads its stream ------------------------------------------
wire_new fake
idle "$SID"
"$PY" - "$PORT" "$SID" "$T/unread.ready" <<'PYEOF' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.sendall(("GET /v1/agents/sessions/%s/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wire-token\r\n"
           "Accept: text/event-stream\r\n\r\n" % sys.argv[2]).encode())
open(sys.argv[3], "w").write("sent\n")
time.sleep(60)
PYEOF
UNREAD=$!
wait_for_line "$T/unread.ready" sent 10
wire_msg "$SID" "flood:20000" >/dev/null
idle "$SID" 2
check "a stream nobody reads holds no turn back: 20000 lines of output end in idle for another reader" grep -qx seen "$T/ev"
S=$(wire GET "/$SID")
check "... and the API answers meanwhile" test "$S" = 200
kill "$UNREAD" 2>/dev/null

# ---- deleted, failed and one-shot sessions take no message -------------------------
wire_new fake "print:1"
idle "$SID"
DEL=$SID
S=$(wire DELETE "/$DEL")
check "delete answers agent.session.deleted" sh -c "test $S = 200 && test \"\$(cd '$T' && $PY -c 'import json; d=json.load(open(\"body\")); print(d[\"object\"], d[\"deleted\"])')\" = 'agent.session.deleted True'"
S=$(wire_msg "$DEL" "print:1")
check "a message to a deleted session is 404" test "$S" = 404
wire POST "" "{\"agent_id\": \"broken\", $ENV, \"input\": \"hi\"}" >/dev/null
BID=$(js 'd["id"]')
wire_upto "$BID" agent.session.failed
check "an install that fails: environment.failed, the turn failed, the session failed" \
	sh -c "grep '^[0-9]' '$T/ev' | cut -d' ' -f2 | tr '\n' ' ' | grep -q 'agent.session.environment.failed agent.session.turn.failed agent.session.failed'"
S=$(wire_msg "$BID" "again")
check "a message to a failed session is 409 session.closed" sh -c "test $S = 409 && grep -q session.closed '$T/body'"
OLD=$(curl -s -H "Authorization: Bearer wire-token" -H 'Content-Type: application/json' --data '{"prompt": "print:1"}' \
	"http://127.0.0.1:$PORT/v1/ops/agents.fake.run" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["session"])')
S=$(wire_msg "$OLD" "again")
check "a message to the session of an agents.<a>.run is 409 session.closed" \
	sh -c "test $S = 409 && grep -q 'not a conversation (agents.<a>.run made it)' '$T/body'"
S=$(wire GET "/$OLD")
check "that session is seen through the wire too (one session table)" test "$S" = 200

# ---- kill -9 during a turn, restart -------------------------------------------------
wire_new fake
idle "$SID"
KID=$SID
wire_msg "$KID" "pid:$T/kpid wait:$T/never" >/dev/null
wait_for_line "$T/kpid" '^[0-9]' 10
CHILD=$(cat "$T/kpid")
kill -9 "$SERVE_PID"
wait "$SERVE_PID" 2>/dev/null
up
_i=0
while [ $_i -lt 100 ] && [ -r "/proc/$CHILD/stat" ] && ! grep -q ') Z ' "/proc/$CHILD/stat"; do
	sleep 0.1
	_i=$((_i + 1))
done
check "after a restart the running turn's child is gone" sh -c "! [ -r /proc/$CHILD/stat ] || grep -q ') Z ' /proc/$CHILD/stat"
wire GET "/$KID/turns/turn_1" >/dev/null
check "... its turn ended failed with a reason" \
	test "$(js 'd["status"]+" "+d["error"]["message"]')" = "failed the server stopped during the turn"
wire GET "/$KID" >/dev/null
check "... the session is idle" test "$(js 'd["status"]')" = idle
S=$(wire_msg "$KID" "print:1")
check "... and takes the next message" test "$S" = 202
wire_upto "$KID" agent.session.turn.completed
check "... whose turn completes" grep -qx seen "$T/ev"
wire GET "/$KID/items?order=asc" >/dev/null
check "... the items of both turns survived" test "$(js '" ".join(i["content"][0]["text"] for i in d["data"])')" = \
	"pid:$T/kpid wait:$T/never print:1"
S=$(wire_msg "$CID" "once more")
idle "$CID" 3
wire GET "/$CID/turns/turn_3/items" >/dev/null
check "after a restart the next message resumes the agent's conversation" \
	test "$(js '[i["content"][0]["text"] for i in d["data"] if i["type"] == "message" and i.get("role") == "assistant"]')" = \
	"['turn 3 (model m1, instructions be brief): Earlier the command printed hello.']"
