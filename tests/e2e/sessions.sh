# make e2e: an agent session running the real Codex CLI: serve
# installs codex (its native binary, no node-runtime) from the real npm registry on first
# use, the session's events say pending → ready → started, and the CLI's
# `--version` line comes back as an output event. The built-in codex
# manifest's run template needs a prompt (`codex exec PROMPT`); this test
# copies it with the template `["{bin}", "--version"]`.
. "$TOP/tests/lib.sh"

export HOME=$T/home
unset ABX_TOOLS_DIR ABX_MANIFESTS_DIR ABX_SERVER_INSTALL_MODE ABX_INSTALL_MIRROR ABX_SERVER_STATE_DIR \
	ABX_SERVER_CONFIG ABX_SERVER_AGENTS ABX_SERVER_POLICY ABX_SERVER_PRESET
mkdir -p "$HOME" "$T/man"
cp -r "$TOP/manifests/codex" "$T/man/"
sed 's|"run": \[[^]]*\]|"run": ["{bin}", "--version"]|' "$TOP/manifests/codex.json" >"$T/man/codex.json"
check "the copied manifest runs --version" grep -q '"run": \["{bin}", "--version"\]' "$T/man/codex.json"
VER=$(sed -n 's/.*"version": "\([^"]*\)".*/\1/p' "$T/man/codex.json" | head -1)
TOK=e2e-sessions-$$
printf '{"agents": ["codex"], "preset": "admin", "manifests_dir": "%s"}\n' "$T/man" >"$T/config.json"
ABX_SERVER_TOKEN=$TOK bg "$BIN" serve --host 127.0.0.1 --port 0 -q --config "$T/config.json" \
	--tools-dir "$T/tools" --state-dir "$T/state" >"$T/serve.out" 2>"$T/serve.err"
SERVE_PID=$BGPID
wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10 || { not_ok "serve starts" "$(head -3 "$T/serve.err")"; exit 1; }
U=http://127.0.0.1:$(head -1 "$T/serve.out")
s=$(curl -s -o "$T/body" -w '%{http_code}' -H "X-Access-Token: $TOK" --data '{}' "$U/v1/agents/codex/sessions")
check "create answers 201 at once" test "$s" = 201
SID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/body")
python3 "$FIXTURES/sessclient.py" wait "$(head -1 "$T/serve.out")" "$TOK" codex "$SID" 600 >"$T/final"
check "the session completes ($(cat "$T/final" | head -c 200))" grep -q '"status": "completed"' "$T/final"
curl -s -H "X-Access-Token: $TOK" "$U/v1/agents/codex/sessions/$SID/events" >"$T/ev"
types=$(python3 -c 'import json,sys; print(" ".join(e["type"].split(".")[-1] for e in json.load(open(sys.argv[1]))["data"]))' "$T/ev")
outs=$(python3 -c 'import json,sys; print(" | ".join(e["stream"]+": "+e["data"] for e in json.load(open(sys.argv[1]))["data"] if e.get("stream")))' "$T/ev")
check "pending → ready → started → output… → exited (output: $outs)" \
	sh -c "echo '$types' | grep -Eq '^pending ready started( output)+ exited\$'"
check "the output is codex's version ($VER)" grep -q "\"data\":\"codex-cli $VER\"" "$T/ev"
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
