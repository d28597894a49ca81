# make e2e: the real agent CLIs -- codex, claude-code and gemini, installed by
# prepare from the real npm registry -- each hold a two-turn conversation with
# a scripted model server on loopback (tests/fixtures/modelsrv.py), through
# the agent's own JSON mode and its own resume option. In turn 1 the model
# has the agent run `cat secret.txt` (a random value this test wrote) and
# repeats what it printed; in turn 2 the model can only name that value by
# finding it in the history the agent sent back, so a second turn that did
# not continue the first fails. The agents reach nothing but loopback: the
# model server is also their https proxy, refusing and logging any tunnel.
# Each agent's model and instructions options are checked to reach the model.
# A third turn, which the model answers with a 400, shows how each agent
# reports a failed turn; a fourth is cancelled with SIGINT while its command
# runs, and a fifth still continues the session. claude-code also takes a
# second message into a running turn (--input-format stream-json) and shows
# its partial messages. ABX_E2E_RECORD=DIR copies each agent's JSON streams
# to DIR/<agent>/NAME.jsonl (this run's directory shown as /tmp/abx-test):
# tests/fixtures/dialects holds such a recording, its README what each
# agent needed.
. "$TOP/tests/lib.sh"

export HOME=$T/home
mkdir -p "$HOME" "$T/ws"
VALUE=abx-secret-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
echo "$VALUE" >"$T/ws/secret.txt"
export V="$VALUE"
INSTR="Answer as the scripted test model $$."
export INSTR

run "$BIN" prepare --only codex --only claude-code --only gemini --tools-dir "$T/tools"
expect "prepare installs codex, claude-code and gemini from registry.npmjs.org" 0 "gemini 0.61.0: "
[ "$RC" = 0 ] || exit 1

. "$FIXTURES/modelsrv_agents.sh"

# jsonl FILE EXPR: Python's EXPR over L, FILE's lines that parse as JSON
# objects (others skipped), with os.environ as E; prints the value.
jsonl() {
	python3 -c 'import json, os, sys
L = []
for l in open(sys.argv[1], errors="replace"):
    try:
        o = json.loads(l)
    except ValueError:
        continue
    if isinstance(o, dict):
        L.append(o)
E = os.environ
print(eval("(" + sys.argv[2] + ")"))' "$1" "$2"
}
# requests PATH-PREFIX EXPR: EXPR over R, the logged requests whose path
# starts with PATH-PREFIX, from the log lines after line $MARK.
requests() {
	tail -n +"$((MARK + 1))" "$T/model.log" >"$T/model.part"
	P=$1 jsonl "$T/model.part" "(lambda R: $2)([o for o in L if o.get('method') == 'POST' and \
o['path'].startswith(E['P'])])"
}
mark() { MARK=$(wc -l <"$T/model.log"); }
record() { # AGENT: its streams ($T/AGENT.NAME.jsonl) into $ABX_E2E_RECORD/AGENT/NAME.jsonl
	[ -n "${ABX_E2E_RECORD:-}" ] || return 0
	mkdir -p "$ABX_E2E_RECORD/$1"
	for f in "$T/$1".*.jsonl; do sed "s#$T#/tmp/abx-test#g" "$f" >"$ABX_E2E_RECORD/$1/${f##*/$1.}"; done
}
# cancel AGENT N CMD...: run CMD in the workspace (stdout to
# $T/AGENT.turnN-cancelled.jsonl), its prompt has the model run `cat
# hang.fifo`; once that command has opened the fifo, SIGINT to the agent;
# its exit status in RC. The fifo's writer then goes, so a reader the agent
# left behind ends too.
mkfifo "$T/ws/hang.fifo"
cancel() {
	_a=$1 _n=$2
	shift 2
	rm -f "$T/hang.done" "$T/hang.open"
	fifo_writer "$T/ws/hang.fifo" "$T/hang.done" "$T/hang.open"
	_w=$BGPID
	bg sh -c 'cd "$0" && exec "$@"' "$T/ws" "$@" >"$T/$_a.turn$_n-cancelled.jsonl" 2>"$T/$_a.turn$_n.err" </dev/null
	_p=$BGPID
	if wait_for_line "$T/hang.open" open 120; then kill -INT "$_p"; else kill "$_p" "$_w"; fi
	wait "$_p"
	RC=$?
	: >"$T/hang.done"
	wait "$_w"
}
# turn AGENT N CMD...: run CMD in the workspace, stdout to $T/AGENT.turnN.jsonl
turn() {
	_a=$1 _n=$2
	shift 2
	(cd "$T/ws" && timeout 300 "$@" >"$T/$_a.turn$_n.jsonl" 2>"$T/$_a.turn$_n.err" </dev/null)
	RC=$?
	[ "$RC" = 0 ] || echo "$_a turn $_n: exit $RC: $(tail -c 600 "$T/$_a.turn$_n.err")" >&2
}

# codex: a model provider for the server in $CODEX_HOME/config.toml
# (Responses API), `exec --json`, then `exec resume --json THREAD PROMPT`;
# without the plugins features it would sync a plugin catalogue from
# github.com and chatgpt.com at start.
# gpt-5.5 is a model codex has metadata for (another name works, with a
# warning item in the stream).
CX="$T/tools/bin/codex exec"
CXF="--json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox -m gpt-5.5"
mark
turn codex 1 env $ENV_CODEX $CX $CXF -c "developer_instructions=\"$INSTR\"" \
	"Run the command you are asked to run."
check "codex turn 1 exits 0" test "$RC" = 0
check "codex turn 1: a command_execution item ran cat secret.txt, exit 0, output $VALUE" \
	test "$(jsonl "$T/codex.turn1.jsonl" 'any(o.get("type") == "item.completed" and
o["item"].get("type") == "command_execution" and "cat secret.txt" in o["item"]["command"] and
o["item"]["exit_code"] == 0 and E["V"] in o["item"]["aggregated_output"] for o in L)')" = True
check "codex turn 1: the agent's answer repeats it" test "$(jsonl "$T/codex.turn1.jsonl" '[o["item"]["text"]
for o in L if o.get("type") == "item.completed" and o["item"].get("type") == "agent_message"][-1:] ==
["The command printed %s." % E["V"]]')" = True
check "codex: -m and developer_instructions reach the model (Bearer from env_key)" test "$(requests /v1/responses \
	'len(R) == 2 and all(r["body"]["model"] == "gpt-5.5" and E["INSTR"] in json.dumps(r["body"]["input"]) and
r["headers"].get("authorization") == "Bearer k-codex" for r in R)')" = True
TID=$(jsonl "$T/codex.turn1.jsonl" 'next(o["thread_id"] for o in L if o.get("type") == "thread.started")')
turn codex 2 env $ENV_CODEX $CX resume $CXF "$TID" "What did the command print?"
check "codex turn 2 (exec resume $TID) exits 0" test "$RC" = 0
check "codex turn 2 continues turn 1: its answer names $VALUE" test "$(jsonl "$T/codex.turn2.jsonl" '[o["item"]["text"]
for o in L if o.get("type") == "item.completed" and o["item"].get("type") == "agent_message"][-1:] ==
["Earlier the command printed %s." % E["V"]]')" = True
check "codex turn 2 reports the same thread" test "$(jsonl "$T/codex.turn2.jsonl" 'next(o["thread_id"]
for o in L if o.get("type") == "thread.started")')" = "$TID"
turn codex 3 env $ENV_CODEX $CX resume $CXF "$TID" "Now abx-fail, please."
check "codex turn 3, which the model fails (400), exits 1 with turn.failed naming the error" \
	test "$RC:$(jsonl "$T/codex.turn3.jsonl" '[o.get("type") for o in L if "scripted failure" in json.dumps(o)]')" = \
	"1:['error', 'turn.failed']"
cancel codex 4 env $ENV_CODEX $CX resume $CXF "$TID" "Now abx-hang, please."
check "codex turn 4, SIGINT while its command runs: exit $RC, no turn.completed" test "$RC:$(jsonl \
	"$T/codex.turn4-cancelled.jsonl" '[o["type"] for o in L if o["type"].startswith("turn.")]')" = "1:['turn.started']"
turn codex 5 env $ENV_CODEX $CX resume $CXF "$TID" "What did the command print?"
check "codex turn 5 after the cancelled turn continues the session: its answer names $VALUE" \
	test "$RC:$(jsonl "$T/codex.turn5.jsonl" '[o["item"]["text"] for o in L if o.get("type") == "item.completed" and
o["item"].get("type") == "agent_message"][-1:]')" = "0:['Earlier the command printed $VALUE.']"

# claude-code: ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY (sent as x-api-key),
# `-p --output-format stream-json --verbose`, then the same with --resume
# SESSION. --dangerously-skip-permissions is refused as root: --allowedTools
# Bash lets the one tool run. Without CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC
# and with a proxy set, it retries its first request without ever sending it.
CL="env $ENV_CLAUDE $T/tools/bin/claude -p --output-format stream-json --verbose --model claude-scripted-1 \
--allowedTools Bash"
# claude-result FILE: the text of the stream's last result event
clres() { jsonl "$1" '[o.get("result") for o in L if o.get("type") == "result"][-1:]'; }
mark
turn claude-code 1 $CL --append-system-prompt "$INSTR" -- "Run the command you are asked to run."
check "claude turn 1 exits 0" test "$RC" = 0
check "claude turn 1: a Bash tool_use ran cat secret.txt, its tool_result holds $VALUE" \
	test "$(jsonl "$T/claude-code.turn1.jsonl" 'any(o.get("type") == "assistant" and any(c.get("type") == "tool_use" and
c["name"] == "Bash" and c["input"]["command"] == "cat secret.txt" for c in o["message"]["content"]) for o in L) and
any(o.get("type") == "user" and any(c.get("type") == "tool_result" and E["V"] in str(c["content"]) and
not c.get("is_error") for c in o["message"]["content"]) for o in L)')" = True
check "claude turn 1: the result repeats it" \
	test "$(clres "$T/claude-code.turn1.jsonl")" = "['The command printed $VALUE.']"
check "claude: --model and --append-system-prompt reach the model (x-api-key)" test "$(requests /v1/messages \
	'len(R) == 2 and all(r["body"]["model"] == "claude-scripted-1" and E["INSTR"] in json.dumps(r["body"]["system"])
and r["headers"].get("x-api-key") == "k-claude" for r in R)')" = True
SID=$(jsonl "$T/claude-code.turn1.jsonl" 'next(o["session_id"] for o in L if o.get("type") == "system")')
export SID
turn claude-code 2 $CL --resume "$SID" -- "What did the command print?"
check "claude turn 2 (--resume $SID) exits 0" test "$RC" = 0
check "claude turn 2 continues turn 1: its result names $VALUE" \
	test "$(clres "$T/claude-code.turn2.jsonl")" = "['Earlier the command printed $VALUE.']"
check "claude turn 2 reports the same session" test "$(jsonl "$T/claude-code.turn2.jsonl" 'set(o.get("session_id")
for o in L if "session_id" in o) == {E["SID"]}')" = True
turn claude-code 3 $CL --resume "$SID" -- "Now abx-fail, please."
check "claude turn 3, which the model fails (400), exits 1 with a result is_error (subtype success)" \
	test "$RC:$(jsonl "$T/claude-code.turn3.jsonl" '[(o.get("subtype"), o.get("is_error"), o.get("result"))
for o in L if o.get("type") == "result"]')" = \
	"1:[('success', True, 'API Error: 400 scripted failure: the prompt asked for it')]"
cancel claude-code 4 $CL --resume "$SID" -- "Now abx-hang, please."
check "claude turn 4, SIGINT while its command runs: exit $RC, result error_during_execution" test "$(jsonl \
	"$T/claude-code.turn4-cancelled.jsonl" '[o.get("subtype") for o in L if o.get("type") == "result"]')" = \
	"['error_during_execution']"
turn claude-code 5 $CL --resume "$SID" -- "What did the command print?"
check "claude turn 5 after the cancelled turn continues the session: its result names $VALUE" \
	test "$RC:$(clres "$T/claude-code.turn5.jsonl")" = "0:['Earlier the command printed $VALUE.']"

# claude --input-format stream-json: one process, user messages as JSON lines
# on stdin. A second message written before the first turn ends (here: at
# once) is steered into that turn -- it reaches the model beside the next
# tool result -- rather than queued as a turn of its own.
mkfifo "$T/claude.in"
mark
bg sh -c "cd '$T/ws' && exec timeout 300 $CL --input-format stream-json <'$T/claude.in' \
>'$T/claude-code.steer.jsonl' 2>'$T/claude.steer.err'"
STEER=$BGPID
exec 3>"$T/claude.in"
printf '%s\n' '{"type":"user","message":{"role":"user","content":"Run the command you are asked to run."}}' \
	'{"type":"user","message":{"role":"user","content":"A second message, sent mid-turn."}}' >&3
wait_for_line "$T/claude-code.steer.jsonl" '"type":"result"' 300
exec 3>&-
wait "$STEER"
check "claude stream-json input: a second message steers the running turn (beside its tool result)" \
	test "$(requests /v1/messages 'any(any(c.get("type") == "tool_result" for c in r["body"]["messages"][-1]["content"])
and "A second message, sent mid-turn." in json.dumps(r["body"]["messages"][-1]) for r in R)')" = True
check "claude stream-json input: one turn, one result" \
	test "$(jsonl "$T/claude-code.steer.jsonl" '[o.get("subtype") for o in L if o.get("type") == "result"]')" = "['success']"

# --include-partial-messages: the model's stream events as they come
# ({"type":"stream_event","event":{...content_block_delta...}}), before each
# whole assistant message.
turn claude-code partial $CL --include-partial-messages -- "Run the command you are asked to run."
check "claude --include-partial-messages: the text deltas join to the answer" test "$RC:$(jsonl \
	"$T/claude-code.turnpartial.jsonl" '"".join(o["event"]["delta"].get("text", "") for o in L if
o.get("type") == "stream_event" and o["event"].get("type") == "content_block_delta")')" = "0:The command printed $VALUE."
mv "$T/claude-code.turnpartial.jsonl" "$T/claude-code.partial.jsonl"

# gemini: GOOGLE_GEMINI_BASE_URL and GEMINI_API_KEY (sent as
# x-goog-api-key) with the gemini-api-key auth type in ~/.gemini/settings.json
# and the workspace trusted in ~/.gemini/trustedFolders.json (else it exits 55
# in headless mode), `-p PROMPT -o stream-json --approval-mode yolo`, then
# the same with --resume SESSION. GEMINI_SYSTEM_MD names a file that
# replaces the system prompt. With -m it skips its router (a JSON side
# request to another model).
GM="env $ENV_GEMINI $T/tools/bin/gemini -o stream-json --approval-mode yolo -m gemini-scripted"
gmres() { # FILE: the stream's assistant text and its result status
	jsonl "$1" '("".join(o["content"] for o in L if o.get("type") == "message" and o.get("role") == "assistant"),
[o.get("status") for o in L if o.get("type") == "result"])'
}
mark
turn gemini 1 $GM -p "Run the command you are asked to run."
check "gemini turn 1 exits 0" test "$RC" = 0
check "gemini turn 1: a run_shell_command tool_use ran cat secret.txt, its tool_result holds $VALUE" \
	test "$(jsonl "$T/gemini.turn1.jsonl" 'any(o.get("type") == "tool_use" and o["tool_name"] == "run_shell_command" and
o["parameters"]["command"] == "cat secret.txt" and any(r.get("type") == "tool_result" and r["tool_id"] == o["tool_id"]
and r["status"] == "success" and E["V"] in r["output"] for r in L) for o in L)')" = True
check "gemini turn 1: the answer repeats it" \
	test "$(gmres "$T/gemini.turn1.jsonl")" = "('The command printed $VALUE.', ['success'])"
check "gemini: -m and GEMINI_SYSTEM_MD reach the model (x-goog-api-key)" test "$(requests /v1beta/models/ \
	'len(R) == 2 and all(r["path"].startswith("/v1beta/models/gemini-scripted:streamGenerateContent") and
E["INSTR"] in json.dumps(r["body"]["systemInstruction"]) and r["headers"].get("x-goog-api-key") == "k-gemini"
for r in R)')" = True
GID=$(jsonl "$T/gemini.turn1.jsonl" 'next(o["session_id"] for o in L if o.get("type") == "init")')
export GID
turn gemini 2 $GM --resume "$GID" -p "What did the command print?"
check "gemini turn 2 (--resume $GID) exits 0" test "$RC" = 0
check "gemini turn 2 continues turn 1: its answer names $VALUE" \
	test "$(gmres "$T/gemini.turn2.jsonl")" = "('Earlier the command printed $VALUE.', ['success'])"
check "gemini turn 2 reports the same session" test "$(jsonl "$T/gemini.turn2.jsonl" 'set(o.get("session_id")
for o in L if "session_id" in o) == {E["GID"]}')" = True
turn gemini 3 $GM --resume "$GID" -p "Now abx-fail, please."
check "gemini turn 3, which the model fails (400), exits non-zero with a result status error" \
	test "$(jsonl "$T/gemini.turn3.jsonl" '[(o.get("status"), "scripted failure" in o["error"]["message"])
for o in L if o.get("type") == "result"]')" = "[('error', True)]"
check "gemini turn 3 exit status ($RC) is not 0" test "$RC" != 0
cancel gemini 4 $GM --resume "$GID" -p "Now abx-hang, please."
check "gemini turn 4, SIGINT while its command runs: exit $RC, no result" test "$(jsonl \
	"$T/gemini.turn4-cancelled.jsonl" '[o["type"] for o in L if o.get("type") in ("tool_use", "result")]')" = \
	"['tool_use']"
turn gemini 5 $GM --resume "$GID" -p "What did the command print?"
check "gemini turn 5 after the cancelled turn continues the session: its answer names $VALUE" \
	test "$RC:$(gmres "$T/gemini.turn5.jsonl")" = "0:('Earlier the command printed $VALUE.', ['success'])"

out=$(jsonl "$T/model.log" '" ".join(sorted(set(o["path"] for o in L if o.get("method") == "CONNECT")))')
check "no agent tried to leave loopback through the proxy (${out:-none})" test -z "$out"
for a in codex claude-code gemini; do record $a; done
