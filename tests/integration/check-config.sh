# check-config: layers and their sources, restrict-only, unknown keys,
# presets, policy, commands, the endpoint table, --json, introspection.
. "$TOP/tests/lib.sh"

mkdir -p "$T/m"
cp "$FIXTURES"/manifests/*.json "$T/m/"
echo '{}' >"$T/empty.json"
cat >"$T/server.json" <<'J'
{"agents": ["codex"], "manifests_dir": "m", "install": {"mode": "offline"}, "tools_dir": "/from/file"}
J
CC="$BIN check-config"

run env ABX_SERVER_CONFIG="$T/empty.json" $CC
expect "defaults: mode lazy from default" 0 "install.mode: lazy (default)"
check "defaults: principal default is admin" grep -q "principal default: preset admin" "$T/out"

run $CC --config "$T/server.json"
expect "file layer: mode from the file" 0 "install.mode: offline (file $T/server.json)"
run env ABX_SERVER_INSTALL_MODE=lazy $CC --config "$T/server.json"
expect "env beats file" 0 "install.mode: lazy (env ABX_SERVER_INSTALL_MODE)"
run env ABX_SERVER_INSTALL_MODE=lazy $CC --config "$T/server.json" --mode build
expect "flag beats env" 0 "install.mode: build (flag --mode)"
run env ABX_SERVER_CONFIG="$T/server.json" $CC
expect "ABX_SERVER_CONFIG names the file" 0 "install.mode: offline (file $T/server.json)"

run $CC --config "$T/server.json" -v
check "tools_dir from the file" sh -c "grep -E '^  tools_dir +/from/file +file ' '$T/out'"
check "-v shows the real default of server.max_streams (64, not 0)" \
	sh -c "grep -E '^  server.max_streams +64 +default' '$T/out'"
run env ABX_TOOLS_DIR=/from/env $CC --config "$T/server.json" -v
check "tools_dir from env" sh -c "grep -E '^  tools_dir +/from/env +env ABX_TOOLS_DIR' '$T/out'"
run env ABX_TOOLS_DIR=/from/env $CC --config "$T/server.json" -v --tools-dir /from/flag
check "tools_dir from the flag" sh -c "grep -E '^  tools_dir +/from/flag +flag --tools-dir' '$T/out'"
check "manifests_dir resolved against the file" sh -c "grep -E '^  manifests_dir +$T/m +file' '$T/out'"

# restrict-only
run env ABX_SERVER_INSTALL_MODE=build $CC --config "$T/server.json"
expect "env build holds over the file's offline" 0 "install.mode: build (env ABX_SERVER_INSTALL_MODE)"
check "restrict-only floor reported" grep -q "restrict-only: build set by ABX_SERVER_INSTALL_MODE" "$T/out"
run env ABX_SERVER_INSTALL_MODE=build $CC --mode lazy
expect "a flag cannot loosen env build" 2 "" "config.invalid: --mode lazy: would loosen install.mode build"
run env ABX_SERVER_INSTALL_MODE=off $CC --mode build
expect "a flag cannot loosen env off" 2 "" "restrict-only"
run env ABX_SERVER_INSTALL_MODE=build $CC --mode off
expect "a flag may tighten env build" 0 "install.mode: off (flag --mode)"
run env ABX_INSTALL_MODE=build $CC
expect "deprecated alias works" 0 "install.mode: build (env ABX_INSTALL_MODE)" "ABX_INSTALL_MODE is deprecated"
run env ABX_INSTALL_MODE=off ABX_SERVER_INSTALL_MODE=lazy $CC
expect "the stricter of alias and new name holds" 0 "install.mode: off (env ABX_INSTALL_MODE)"

# strict schema
echo '{"install": {"mdoe": "build"}}' >"$T/typo.json"
run $CC --config "$T/typo.json"
expect "unknown key exits 2 with did-you-mean" 2 "" \
	"agent-sandbox-server: config.invalid: install.mdoe: unknown key (did you mean install.mode?)"
# an unknown agent name gets a did-you-mean and the list
echo '{"agents": ["codx"]}' >"$T/agent-typo.json"
run $CC --config "$T/agent-typo.json"
expect "an unknown agent has a did-you-mean and the agents there are" 2 "" \
	"agents: codx: no manifest of that name (did you mean codex? agents: claude-code, codex, gemini)"
echo '{"agents": ["zzzzzzzz"]}' >"$T/agent-far.json"
run $CC --config "$T/agent-far.json"
expect "an unknown agent far from any lists them" 2 "" "agents: zzzzzzzz: no manifest of that name (agents: claude-code, codex, gemini)"
# check-config's own fix line does not send you to check-config
expect "a configuration error's fix names what to correct" 2 "" "fix: correct the key, flag or file named above"
check "a configuration error's fix is not 'run check-config'" sh -c "! grep -q 'fix: run .agent-sandbox-server check-config' '$T/err'"
printf '{"install": {\n  "mode": "lazy",,\n}}' >"$T/bad.json"
run $CC --config "$T/bad.json"
expect "not JSON is json.syntax with line:col" 2 "" "json.syntax: $T/bad.json:2:"
echo '{"server": {"port": "9000"}}' >"$T/type.json"
run $CC --config "$T/type.json"
expect "a string port is refused" 2 "" "server.port: expected an integer"
run $CC --config "$T/missing.json"
expect "a missing --config file exits 2" 2 "" "missing.json"
run env ABX_SERVER_INSTAL_MODE=off $CC --config "$T/empty.json"
expect "a misspelt variable warns with did-you-mean" 0 "install.mode: lazy" "did you mean ABX_SERVER_INSTALL_MODE?"
run $CC --mode auto
expect "mode auto does not exist" 2 "" "is not a mode"

# presets and the endpoint table
row() { grep -E "^$1 " "$T/out" | awk '{print $2}'; }
run $CC --config "$T/server.json" --preset agents
expect "preset agents loads" 0 "agents.codex.run"
check "agents: default may run" test "$(row agents.codex.run)" = default
check "agents: run installs codex" sh -c "grep -E '^agents.codex.run +default +codex$' '$T/out'"
check "agents: not the install endpoint" test "$(row agents.codex.install)" = "(none)"
check "agents: reading installs nothing" sh -c "grep -E '^agents.codex.sessions.events +default +-$' '$T/out'"
run $CC --config "$T/server.json" --preset readonly
check "readonly: may not run" test "$(row agents.codex.run)" = "(none)"
check "readonly: may read events" test "$(row agents.codex.sessions.events)" = default
run $CC --config "$T/server.json" --preset admin
check "admin: the install endpoint" test "$(row agents.codex.install)" = default
run $CC --config "$T/server.json" --preset root
expect "unknown preset exits 2" 2 "" "not a preset"

cat >"$T/policy.json" <<'J'
{"principals": {
  "ci": {"token_sha256": "1111111111111111111111111111111111111111111111111111111111111111",
         "preset": "agents", "allow": ["tests.*"]},
  "boss": {"preset": "admin", "deny": ["agents.codex.install"]}}}
J
cat >"$T/cmds.json" <<'J'
[{"id": "tests.run", "argv": ["/usr/bin/make", "-C", "{dir}", "test"], "install": ["node-runtime"],
  "params": {"dir": {"type": "string", "required": true}}, "description": "the tests"}]
J
run $CC --config "$T/server.json" --policy "$T/policy.json" --commands "$T/cmds.json"
expect "policy and commands load" 0 "tests.run"
check "install deny is absolute even for admin" test "$(row agents.codex.run)" = ci
check "admin without install may still read" test "$(row agents.codex.sessions.get)" = "ci,boss"
check "command row lists principals and installs" sh -c "grep -E '^tests.run +ci,boss +node-runtime$' '$T/out'"
check "default has no rules with a policy file" grep -q "principal default: no rules" "$T/out"
echo '{"principals": {"ci": {"alow": []}}}' >"$T/badpol.json"
run $CC --policy "$T/badpol.json"
expect "policy typo exits 2" 2 "" "principals.ci.alow: unknown key (did you mean principals.ci.allow?)"
echo '[{"id": "x", "argv": ["/bin/echo", "{who}"]}]' >"$T/badcmd.json"
run $CC --commands "$T/badcmd.json"
expect "undeclared placeholder exits 2" 2 "" "x.argv[1]: {who} is not a declared parameter"
# Keys with NUL were hidden duplicates ("argv" and "argv\u0000"): a visible
# /bin/echo op ran /bin/sh -c, a readonly principal got admin, fetch took the
# hidden URL. The parser refuses them with their place in every input.
printf '[{"id": "x", "argv": ["/bin/echo", "{m}"], "params": {"m": {}},\n "argv\\u0000": ["/bin/sh", "-c", "{m}"]}]\n' >"$T/nulcmd.json"
run $CC --commands "$T/nulcmd.json"
expect "a hidden argv key in the commands file exits 2" 2 "" \
	"json.syntax: $T/nulcmd.json:2:7: \\u0000 in an object key, keys may not hold NUL"
printf '{"principals": {"ro": {"preset": "readonly",\n "preset\\u0000": "admin"}}}\n' >"$T/nulpol.json"
run $CC --policy "$T/nulpol.json"
expect "a hidden preset key in the policy exits 2" 2 "" "json.syntax: $T/nulpol.json:2:9: \\u0000 in an object key"
mkdir -p "$T/nulm"
sed 's/"linux-x64": *{/"linux-x64\\u0000": {"url": "https:\/\/127.0.0.1:1\/hidden.tar.gz", "sha256": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}, &/' \
	"$FIXTURES/manifests/ripgrep.json" >"$T/nulm/ripgrep.json"
run $CC --manifest "$T/nulm/ripgrep.json"
expect "a hidden platform key in a manifest exits 2" 2 "" "\\u0000 in an object key"
check "the hidden platform key is named by its place" grep -q "json.syntax: .*nulm/ripgrep.json:[0-9]*:[0-9]*: " "$T/err"
# A FIFO as an input is refused at once instead of blocking in open(2)
# (timeout: before, check-config waited for a writer forever).
mkfifo "$T/fifo.json"
for opt in --config --commands --policy --manifest; do
	run timeout 20 $CC $opt "$T/fifo.json"
	expect "a FIFO as $opt exits 2 at once" 2 "" "$T/fifo.json is not a regular file (a FIFO)"
done
# ConfigMap-style mounts: every input a symlink through ..data (followed for
# operator inputs; inside tool trees nothing is followed).
mkdir -p "$T/cm/..2026_12_01" "$T/cmm/..2026_12_01"
echo '{"install": {"mode": "offline"}}' >"$T/cm/..2026_12_01/server.json"
echo '{"principals": {"ci": {"preset": "readonly"}}}' >"$T/cm/..2026_12_01/policy.json"
echo '[{"id": "x", "argv": ["/bin/echo"]}]' >"$T/cm/..2026_12_01/commands.json"
cp "$FIXTURES/manifests/ripgrep.json" "$T/cmm/..2026_12_01/"
ln -s ..2026_12_01 "$T/cm/..data"
ln -s ..2026_12_01 "$T/cmm/..data"
for f in server.json policy.json commands.json; do ln -s "..data/$f" "$T/cm/$f"; done
ln -s ..data/ripgrep.json "$T/cmm/ripgrep.json"
run $CC --config "$T/cm/server.json" --policy "$T/cm/policy.json" --commands "$T/cm/commands.json"
expect "symlinked configuration, policy and commands load" 0 "install.mode: offline (file $T/cm/server.json)"
check "... the symlinked commands file's op is listed" grep -q '^x ' "$T/out"
run $CC --manifest "$T/cmm/ripgrep.json"
expect "a symlinked manifest loads (not 'Symbolic link loop')" 0
run $CC --manifests "$T/cmm" --config "$T/empty.json"
expect "a ConfigMap-style --manifests directory loads" 0
run $BIN prepare --manifests "$T/cmm" --only ripgrep --dry-run --tools-dir "$T/cmtools"
expect "prepare plans a tool whose manifest is a ConfigMap symlink" 0 "ripgrep "
check "... without a symbolic-link error" sh -c "! grep -q 'Symbolic link' '$T/err'"
echo '{"agents": ["nosuch"]}' >"$T/noagent.json"
run $CC --config "$T/noagent.json"
expect "unknown agent exits 2" 2 "" "agents: nosuch: no manifest"
run $CC --config "$T/server.json" --preset agents --policy "$T/policy.json" --json
expect "--json exits 0" 0
check "--json is one JSON document with mode and ops" python3 -c "
import json,sys
d=json.load(open('$T/out'))
assert d['mode']['value']=='offline' and d['mode']['source'].startswith('file '), d['mode']
ops={o['id']:o for o in d['ops']}
assert ops['agents.codex.run']['principals']==['ci','default'], ops['agents.codex.run']
assert ops['agents.codex.run']['installs']==['codex']
assert ops['agents.codex.sessions.get']['installs']==[]
assert d['settings']['tools_dir']['source']=='file'
"

check "docs/configuration.md documents every configuration key" python3 -c "
import json
d = json.load(open('$T/out'))
readme = open('$TOP/docs/configuration.md').read()
missing = [k for k in d['settings'] if '| \`%s\` |' % k not in readme]
assert not missing, missing
"

# the worked template of the README is a valid configuration
mkdir "$T/tpl"
python3 - "$TOP/README.md" "$T/tpl" <<'PY'
import sys, re
text = open(sys.argv[1]).read()
blocks = dict(re.findall(r"<!-- template: (\S+) -->\n```[a-z]*\n(.*?)```", text, re.S))
open(sys.argv[2] + '/server.json', 'w').write(blocks['server.json'])
open(sys.argv[2] + '/commands.json', 'w').write(blocks['commands.json'])
PY
# as the image's user runs it: its state directory is the one the template's
# audit_file is in (check-config applies serve's audit_file rule, creating nothing)
run env ABX_SERVER_STATE_DIR=/home/user/.local/state/agent-sandbox $CC --config "$T/tpl/server.json"
expect "the README's server.json and commands.json are valid" 0 "codex.version"
check "the README template's commands install codex" sh -c "grep -E '^codex.version +default +codex$' '$T/out'"

# introspection: no socket, no process, no secret
mkdir -m 700 "$T/state"
echo secret >"$T/state/token"
if strace -V >/dev/null 2>&1; then
	run env ABX_SERVER_STATE_DIR="$T/state" ABX_SERVER_TOKEN=tok strace -f -qq -s 4096 -o "$T/trace" \
		-e trace=network,process,%file $CC --config "$T/server.json" --policy "$T/policy.json" \
		--commands "$T/cmds.json"
	expect "check-config runs under strace" 0 "agents.codex.run"
	check "introspection opens no socket" sh -c "! grep -E 'socket\\(|connect\\(|bind\\(' '$T/trace'"
	check "introspection spawns nothing" sh -c "test \$(grep -cE 'execve\\(|fork\\(|clone3?\\(' '$T/trace') -eq 1"
	check "introspection reads no token file" sh -c "! grep -q '$T/state' '$T/trace'"
	check "strace saw the configuration read" grep -q "open.*\"$T/server.json\"" "$T/trace"
else
	skip "introspection under strace" "strace not installed"
fi

# manifests
run $CC --manifest "$T/m/codex.json" "$T/m/node-runtime.json"
expect "--manifest lints good files" 0 "ok $T/m/codex.json: codex 1.2.0 (agent)"
mkdir "$T/bad"
sed 's/"hosts": \[[^]]*\],//' "$T/m/codex.json" >"$T/bad/codex.json"
cp "$T/m/node-runtime.json" "$T/bad/"
run $CC --manifest "$T/m/node-runtime.json" "$T/bad/codex.json"
expect "--manifest names the bad file and path" 2 "ok $T/m/node-runtime.json" "install.manifest_invalid: $T/bad/codex.json: \$.hosts"
printf '{"schema": 1,\n "name": }' >"$T/bad/notjson.json"
run $CC --manifest "$T/bad/notjson.json"
expect "--manifest tells not-JSON apart" 2 "" "json.syntax: $T/bad/notjson.json:2:"
run $CC --manifest
expect "--manifest without files exits 2" 2 "" "needs at least one FILE"
rm "$T/bad/notjson.json"
echo '{"agents": ["codex"]}' >"$T/badagent.json"
run $CC --config "$T/badagent.json" --manifests "$T/bad"
expect "an enabled agent with a broken manifest names the manifest error" 2 "" \
	"install.manifest_invalid: $T/bad/codex.json: \$.hosts"

run $CC --bogus
expect "unknown option exits 2" 2 "" "usage: agent-sandbox-server check-config"
run $CC --help
expect "--help exits 0" 0 "usage: agent-sandbox-server check-config"

# every command op's program must run in this image
echo '[{"id": "tests.run", "argv": ["/nonexistent/bin/make", "test"]}]' >"$T/cmd-missing.json"
run $CC --commands "$T/cmd-missing.json"
expect "a command whose program is missing exits 2" 2 "" \
	"command.unavailable: tests.run: program /nonexistent/bin/make: No such file or directory"
expect "... with a fix" 2 "" "fix: install the program in the image, or correct argv[0]"
: >"$T/notexec"
chmod 644 "$T/notexec"
echo "[{\"id\": \"x.run\", \"argv\": [\"$T/notexec\"]}]" >"$T/cmd-noexec.json"
run $CC --commands "$T/cmd-noexec.json"
expect "a command whose program is not executable exits 2" 2 "" "command.unavailable: x.run: program $T/notexec is not executable"
echo '[{"id": "y.run", "argv": ["no-such-program-abx"]}]' >"$T/cmd-bare.json"
run $CC --commands "$T/cmd-bare.json"
expect "a bare program not on PATH exits 2" 2 "" "command.unavailable: y.run: program no-such-program-abx: not found on PATH"
echo '[{"id": "z.run", "argv": ["sh", "-c", "true"]}, {"id": "c.v", "argv": ["codex", "--version"], "install": ["codex"]}]' >"$T/cmd-ok.json"
run $CC --commands "$T/cmd-ok.json"
expect "programs on PATH and tools' binaries pass" 0

# what serve refuses at start, check-config refuses by the same rule:
# an audit_file in a directory that does not exist (outside the state
# directory) is not created; one in the state directory serve creates passes
printf '{"audit_file": "%s"}' "$T/nodir/sub/audit.jsonl" >"$T/audit_bad.json"
run env ABX_SERVER_STATE_DIR="$T/st" $CC --config "$T/audit_bad.json"
expect "an audit_file serve cannot write: check-config exits 2 as serve does" 2 "" "audit_file $T/nodir/sub/audit.jsonl: cannot be written"
check "... creating nothing" test ! -e "$T/nodir"
run env ABX_SERVER_STATE_DIR="$T/st" ABX_SERVER_TOKEN=tok $BIN serve --config "$T/audit_bad.json" --host 127.0.0.1 --port 0
expect "... the same refusal from serve" 2 "" "audit_file $T/nodir/sub/audit.jsonl: cannot be written"
printf '{"audit_file": "%s"}' "$T/st2/audit.jsonl" >"$T/audit_ok.json"
run env ABX_SERVER_STATE_DIR="$T/st2" $CC --config "$T/audit_ok.json"
expect "an audit_file in the state directory serve creates passes" 0
check "... and check-config created nothing" test ! -e "$T/st2"
