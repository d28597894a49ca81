# make e2e: an agents.codex.run running the real Codex CLI: serve installs
# codex (its native binary, no node-runtime) from the real npm registry on
# first use, the run's session's events (read on the wire) say pending →
# ready → started, and the CLI's `--version` line comes back as an output
# event and in the run's stdout. The built-in codex manifest's run template
# needs a prompt (`codex exec PROMPT`); this test copies it with the template
# `["{bin}", "--version"]`.
. "$TOP/tests/lib.sh"

export HOME=$T/home
mkdir -p "$HOME" "$T/man"
cp -r "$TOP/manifests/codex" "$T/man/"
python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
m["run"] = ["{bin}", "--version"]
json.dump(m, open(sys.argv[2], "w"))' "$TOP/manifests/codex.json" "$T/man/codex.json"
check "the copied manifest runs --version" test "$(json_eval "$T/man/codex.json" 'd["run"]')" = "['{bin}', '--version']"
VER=$(json_eval "$T/man/codex.json" 'd["version"]')
TOK=e2e-sessions-$$
printf '{"agents": ["codex"], "preset": "admin", "manifests_dir": "%s"}\n' "$T/man" >"$T/config.json"
ABX_SERVER_TOKEN=$TOK bg "$BIN" serve --host 127.0.0.1 --port 0 -q --config "$T/config.json" \
	--tools-dir "$T/tools" --state-dir "$T/state" >"$T/serve.out" 2>"$T/serve.err"
SERVE_PID=$BGPID
wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10 || { not_ok "serve starts" "$(head -3 "$T/serve.err")"; exit 1; }
PORT=$(head -1 "$T/serve.out")
U=http://127.0.0.1:$PORT
s=$(curl -s -m 900 -o "$T/body" -w '%{http_code}' -H "X-Access-Token: $TOK" -H 'Content-Type: application/json' \
	--data '{}' "$U/v1/ops/agents.codex.run")
check "the run answers 200 once codex is installed and has run ($(head -c 200 "$T/body"))" test "$s" = 200
check "its stdout is codex's version ($VER)" \
	test "$(json_eval "$T/body" 'd["exit_code"], d["stdout"].strip()')" = "(0, 'codex-cli $VER')"
SID=$(json_eval "$T/body" 'd["session"]')
python3 "$FIXTURES/sessclient.py" events "$PORT" "$TOK" "$SID" - 1 30 >"$T/ev"
types=$(json_eval "$T/ev" '" ".join(e["type"][14:] for e in d["data"])')
check "its session: environment pending → ready → started → output… → exited ($types)" \
	sh -c "echo '$types' | grep -Eq '^environment.pending environment.ready started( output)+ exited\$'"
# (stdout's: codex may warn on stderr, e.g. that its home is under /tmp)
check "the stdout output event is codex's version" \
	test "$(json_eval "$T/ev" '[e["data"] for e in d["data"] if e.get("stream") == "stdout"]')" = "['codex-cli $VER']"
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
