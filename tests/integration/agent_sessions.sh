# agents.<a>.run (a session run to its end) with the real agents'
# manifests: the built-in run templates (codex exec --skip-git-repo-check, claude -p,
# gemini -p) against fixture packages (tests/fixtures/agent_pkgs.sh), the
# working directory (request cwd, validated; default HOME), env from the
# configuration's allow-list, the tools' bin/ on PATH, the manifest's env,
# and a prompt that is exactly "{bin}" staying the prompt.
. "$TOP/tests/lib.sh"
. "$FIXTURES/agent_pkgs.sh"

PY=$(python3 -c 'import sys; print(sys.executable)')
TOK=tok
export SSL_CERT_FILE=$PKI/ca.pem HOME=$T/home ABX_SERVER_TOKEN=$TOK
mkdir -p "$T/home" "$T/work"
mkdir -m 700 "$T/tools" "$T/state"
cat >"$T/server.json" <<EOM
{"agents": ["codex", "claude-code", "gemini"], "manifests_dir": "$T/m", "tools_dir": "$T/tools",
 "state_dir": "$T/state", "install": {"use_path": false, "mirrors": {"npm": "$REG"},
 "allow_hosts": ["${REG#https://}"]},
 "server": {"session_env": ["GIT_AUTHOR_NAME"]}}
EOM
start_serve --config "$T/server.json" || { not_ok "serve starts" "$(cat "$T/serve.err")"; exit 1; }
U=http://127.0.0.1:$PORT
# agent_run AGENT JSON-BODY: POST /v1/ops/agents.AGENT.run -> $S (status), the
# answer in $T/body, its stdout and stderr lines in $T/lines (and "FAILED
# error" when it failed to start)
agent_run() {
	S=$(curl -s -o "$T/body" -w '%{http_code}' -H 'X-Access-Token: tok' -H 'Content-Type: application/json' \
		-X POST --data "$2" "$U/v1/ops/agents.$1.run")
	json_eval "$T/body" 'd.get("stdout","")+d.get("stderr","")+("FAILED "+d["error"] if "error" in d else "")' \
		>"$T/lines" 2>/dev/null
}
has() { grep -qxF -- "$1" "$T/lines" || { echo "# lines: $(head -c 400 "$T/lines" | tr '\n' '|')" >&2; return 1; }; }

agent_run codex '{"prompt": "cwd env:CODEX_MANAGED_BY_NPM env:PATH"}'
check "codex: a run with only a prompt answers 200" test "$S" = 200
curl -s -o /dev/null -H 'X-Access-Token: tok' "$U/v1/agents/sessions"
curl -s -o "$T/metrics" -H 'X-Access-Token: tok' "$U/metrics"
check "metrics: the sessions wire is counted as its route" \
	grep -q '^abx_http_requests_total{route="sessions",status="200"} [1-9]' "$T/metrics"
check "codex: the template is exec --skip-git-repo-check PROMPT" has "opts: exec --skip-git-repo-check"
check "codex: it runs in HOME by default" has "cwd: $T/home"
check "codex: with the manifest's env" has "env CODEX_MANAGED_BY_NPM=1"
check "codex: the tools' bin/ first on PATH" grep -q "^env PATH=$T/tools/bin:" "$T/lines"
check "codex: completed" test "$(json_eval "$T/body" 'd["status"]')" = completed

agent_run codex '{"prompt": "{bin}"}'
check "a prompt that is exactly {bin} stays the prompt" has "prompt: {bin}"

agent_run codex "{\"prompt\": \"cwd\", \"cwd\": \"$T/work\"}"
check "cwd: an existing absolute directory is taken" test "$S" = 200
check "cwd: the agent runs there" has "cwd: $T/work"
for bad in "work" "$T/missing" "$T/tools" "$T/tools/codex" "$T/state"; do
	agent_run codex "{\"prompt\": \"cwd\", \"cwd\": \"$bad\"}"
	check "cwd $bad is refused (400)" test "$S" = 400
done
check "cwd: the refusal says why" grep -q "inside the state directory" "$T/body"
# A cwd of ~2,000 bytes: the refusal names it elided in its middle (head,
# mark, last component; core/base/err.h), in a valid JSON envelope.
deep=$T/missing
i=1
while [ $i -le 150 ]; do deep=$deep/deep-dir-$i; i=$((i + 1)); done
agent_run codex "{\"prompt\": \"cwd\", \"cwd\": \"$deep/last-name\"}"
check "cwd of 2,000 bytes is refused (400)" test "$S" = 400
check "... its message names the head and the last component, marked, in 511 bytes" "$PY" -c '
import json, sys
m = json.load(open(sys.argv[1]))["error"]["message"]
head, mark, tail = m.partition("\u2026")
full = "cwd %s/last-name is not an existing directory" % sys.argv[2]
ok = (mark and "\u2026" not in tail and full.startswith(head) and full.endswith(tail)
      and head.startswith("cwd %s/deep-dir-1/" % sys.argv[3]) and head.endswith("/")
      and tail.startswith("/") and "/last-name is not an existing directory" in tail
      and len(m.encode()) <= 511 and len(m.encode()) > 400)
sys.exit(not ok)' "$T/body" "$deep" "$T/missing"
agent_run codex '{"prompt": "cwd", "cwd": 7}'
check "cwd: not a string is refused" test "$S" = 400

agent_run codex '{"prompt": "env:GIT_AUTHOR_NAME", "env": {"GIT_AUTHOR_NAME": "Ada"}}'
check "env: an allowed variable is taken" test "$S" = 200
check "env: the agent sees it" has "env GIT_AUTHOR_NAME=Ada"
agent_run codex '{"prompt": "x", "env": {"LD_PRELOAD": "/x.so"}}'
check "env: a variable not in server.session_env is refused" test "$S" = 400
check "env: the refusal names the key" grep -q "server.session_env" "$T/body"
agent_run codex '{"prompt": "x", "env": ["A"]}'
check "env: not an object is refused" test "$S" = 400

agent_run claude-code '{"prompt": "hello"}'
check "claude-code: the template is -p PROMPT" has "opts: -p"
agent_run gemini '{"prompt": "hello"}'
check "gemini: through node-runtime's node" grep -q "^argv\[0\]=$T/tools/node-runtime/" "$T/lines"
check "gemini: the template is -p PROMPT" has "argv[2]=-p"

# agents.<a>.run: its answer, the session it was
agent_run codex '{"prompt": "print:2 err:1 exit:3"}'
code=$S
check "run: answers 200 when the agent has ended" test "$code" = 200
check "run: the agent's exit code" test "$(json_eval "$T/body" 'd["exit_code"]')" = 3
check "run: its stdout" test "$(json_eval "$T/body" 'repr(d["stdout"])')" = \
	"'opts: exec --skip-git-repo-check\\nprompt: print:2 err:1 exit:3\\nout 1 of 2\\nout 2 of 2\\n'"
check "run: its stderr" test "$(json_eval "$T/body" 'repr(d["stderr"])')" = "'err 1 of 1\\n'"
check "run: the session it was" test "$(json_eval "$T/body" 'd["status"]')" = failed
SID=$(json_eval "$T/body" 'd["session"]')
check "run: the session stays readable on the wire" test "$(wire GET "/$SID")" = 200
wire_events "$SID" agent.session.exited
check "run: its events keep the exit code" test "$(json_eval "$T/ev" 'd["data"][-1]["exit_code"]')" = 3
agent_run claude-code "{\"prompt\": \"cwd\", \"cwd\": \"$T/work\"}"
code=$S
check "run: with a cwd" test "$(json_eval "$T/body" 'd["stdout"].splitlines()[-1]')" = "cwd: $T/work"
# 1,000,000 NUL bytes are 6 MB escaped: the answer's stream is cut at twice
# max_output_bytes escaped, as a command op's is, and says truncated
agent_run codex '{"prompt": "nul:1000000"}'
code=$S
check "run: a NUL flood answers 200" test "$code" = 200
check "run: its stdout is cut at 2 x max_output_bytes escaped, truncated" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["truncated"] is True, d["truncated"]
n = len(json.dumps(d["stdout"])) - 2
assert (2 << 20) - 6 < n <= 2 << 20, n' "$T/body"
agent_run codex '{"prompt": "-rf"}'
code=$S
check "run: a bad request is refused at once (400)" test "$code" = 400
curl -s -H 'X-Access-Token: tok' "$U/v1/ops" >"$T/body"
check "run: listed by GET /v1/ops" grep -q '"agents.codex.run"' "$T/body"
agent_run codex '{"prompt": "sleep:60000", "timeout": 1}'
code=$S
check "run: a timeout ends the agent (200)" test "$code" = 200
check "run: and says so" test "$(json_eval "$T/body" 'd["timed_out"], d["status"]')" = "(True, 'cancelled')"
agent_run codex '{"prompt": "x", "timeout": 0}'
code=$S
check "run: timeout 0 is refused (400)" test "$code" = 400
wire_new codex "" '"timeout": 5'
check "a session create on the wire takes no timeout (400)" sh -c "test $S = 400 && grep -q 'timeout is not supported' '$T/body'"
