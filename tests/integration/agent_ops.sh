# Command ops that run installed tools: the README's worked
# template as written (its commands.json block, read from README.md) against
# the real codex manifest with fixture packages (tests/fixtures/agent_pkgs.sh),
# a JavaScript tool through node-runtime's node with no node on PATH, the
# manifest's env, and the tools' bin/ on the PATH of every op.
. "$TOP/tests/lib.sh"
. "$FIXTURES/agent_pkgs.sh"

export SSL_CERT_FILE=$PKI/ca.pem HOME=$T
mkdir -m 700 "$T/tools" "$T/state"
# The README's commands.json, verbatim, then ops of this test.
python3 - "$TOP/README.md" "$T/commands.json" <<'PYEOF' || { not_ok "README commands.json" "not found"; exit 1; }
import json, re, sys
text = open(sys.argv[1]).read()
block = text.split("`commands.json` (next to it", 1)[1].split("```json", 1)[1].split("```", 1)[0]
ops = json.loads(block)
assert any(o["id"] == "codex.version" for o in ops)
ops += [
    {"id": "gemini.version", "argv": ["gemini", "--version"], "install": ["gemini"]},
    {"id": "codex.root", "argv": ["codex", "--env", "CODEX_MANAGED_PACKAGE_ROOT"], "install": ["codex"]},
    {"id": "path", "argv": ["/bin/sh", "-c", "echo \"$PATH\""]},
    {"id": "by.name", "argv": ["/bin/sh", "-c", "codex --env CODEX_MANAGED_BY_NPM"], "install": ["codex"]},
]
json.dump(ops, open(sys.argv[2], "w"))
PYEOF
cat >"$T/server.json" <<EOM
{"agents": ["codex"], "commands": "commands.json", "manifests_dir": "$T/m", "tools_dir": "$T/tools",
 "state_dir": "$T/state",
 "install": {"mode": "build", "use_path": false, "mirrors": {"npm": "$REG"},
             "allow_hosts": ["${REG#https://}"]}}
EOM
run "$BIN" prepare --config "$T/server.json"
expect "prepare the configuration's tools" 0 "codex 1.0.0: installed"
check "codex did not need node-runtime, gemini did" grep -q "node-runtime 99.0.0: installed" "$T/out"

export ABX_SERVER_TOKEN=tok
start_serve --config "$T/server.json" || { not_ok "serve starts" "$(cat "$T/serve.err")"; exit 1; }
U=http://127.0.0.1:$PORT
op() { curl -s -o "$T/body" -w '%{http_code}' -H 'X-Access-Token: tok' -H 'Content-Type: application/json' \
	-X POST --data '{}' "$U/v1/ops/$1"; }

code=$(op codex.version)
check "README: codex.version answers 200" test "$code" = 200
check "README: exit_code 0" test "$(json_eval "$T/body" 'd["exit_code"]')" = 0
check "README: with the version" test "$(json_eval "$T/body" 'd["stdout"].strip()')" = "codex 1.0.0"
op codex.root >/dev/null
check "the manifest's env, as codex.js sets it" test "$(json_eval "$T/body" 'd["stdout"].strip()')" = \
	"CODEX_MANAGED_PACKAGE_ROOT=$T/tools/codex/1.0.0-$PLAT/node_modules/@openai/codex"
op gemini.version >/dev/null
check "a JavaScript tool runs through node-runtime's node" test "$(json_eval "$T/body" 'd["exit_code"]')" = 0
check "node was node-runtime's, the script the tool's" \
	sh -c "grep -q 'argv\\[0\\]=$T/tools/node-runtime/' '$T/body' && grep -q 'argv\\[1\\]=$T/tools/gemini/.*gemini' '$T/body'"
op path >/dev/null
check "the tools' bin/ leads the PATH of an op" test "$(json_eval "$T/body" 'd["stdout"].split(":")[0]')" = "$T/tools/bin"
op by.name >/dev/null
check "a tool started by name from an op goes through its shim" test "$(json_eval "$T/body" 'd["stdout"].strip()')" = \
	"CODEX_MANAGED_BY_NPM=1"
