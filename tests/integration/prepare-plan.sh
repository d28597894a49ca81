# prepare without --only: the plan derived from the configuration. For a
# matrix of configurations, `prepare --dry-run --json` must equal the set
# derived here, independently, from the mounted ops that `check-config
# --json` reports, the requires of the manifests, and what a fake `node` on
# PATH satisfies.
. "$TOP/tests/lib.sh"

if ! "$BIN" --list | grep -q '^prepare$'; then
	skip "prepare plan" "prepare is not in this build yet"
	exit 0
fi
mkdir -p "$T/m" "$T/nodebin" "$T/empty" "$T/tools"
chmod 700 "$T/tools"
cp "$FIXTURES"/manifests/*.json "$T/m/"
echo '{}' >"$T/empty.json"
export ABX_SERVER_CONFIG="$T/empty.json" ABX_SERVER_STATE_DIR="$T/state" ABX_TOOLS_DIR="$T/tools"
BASEPATH="$T/empty"

fake_node() { # VERSION: a node on PATH that prints vVERSION
	printf '#!/bin/sh\necho "v%s"\n' "$1" >"$T/nodebin/node"
	chmod 755 "$T/nodebin/node"
}

# derive NAME PATHVER ARGS...: the expected plan, as "a b c" sorted, from
# check-config --json and the manifests; PATHVER is the fake node's version
# or "" for none.
derive() {
	_name=$1 _pv=$2; shift 2
	"$BIN" check-config --json --manifests "$T/m" "$@" >"$T/cc.json" 2>"$T/cc.err" || {
		not_ok "$_name" "check-config failed: $(cat "$T/cc.err")"; return 1; }
	python3 - "$T/cc.json" "$T/m" "$_pv" <<'PY'
import json, sys, os
cc = json.load(open(sys.argv[1]))
mdir, pathver = sys.argv[2], sys.argv[3]
def ver(s): return [int(x) for x in s.lstrip('v').split('.')]
def man(n): return json.load(open(os.path.join(mdir, n + '.json')))
use_path = cc['settings']['install.use_path']['value'] == 'true'
direct = set()
for op in cc['ops']:
    if op['principals']:
        direct.update(op['installs'])
# closure with the strongest minimum asked of each tool
mins, seen, todo = {}, set(), list(direct)
while todo:
    n = todo.pop()
    if n in seen: continue
    seen.add(n)
    for r in man(n).get('requires', []):
        name, _, mn = r.partition('>=')
        if mn and (name not in mins or ver(mn) > ver(mins[name])): mins[name] = mn
        todo.append(name)
def on_path(n):
    m = man(n)
    if not use_path or 'path' not in m or m['binary'] != 'node' or not pathver: return False
    if ver(pathver) < ver(m['path'].get('min', '0')): return False
    return n not in mins or ver(pathver) >= ver(mins[n])
plan, todo, seen = set(), list(direct), set()
while todo:
    n = todo.pop()
    if n in seen: continue
    seen.add(n)
    if on_path(n): continue
    plan.add(n)
    todo.extend(r.partition('>=')[0] for r in man(n).get('requires', []))
print(' '.join(sorted(plan)))
PY
}

# planned NAME PATHVER ARGS...: prepare --dry-run --json's plan, sorted; also
# checks that the order puts every tool after what it requires.
planned() {
	_name=$1 _pv=$2; shift 2
	if [ -n "$_pv" ]; then fake_node "$_pv"; P="$T/nodebin:$BASEPATH"; else P="$BASEPATH"; fi
	env PATH="$P" "$BIN" prepare --dry-run --json --manifests "$T/m" "$@" >"$T/plan.json" 2>"$T/plan.err" || {
		echo "prepare failed: $(cat "$T/plan.err")"; return 1; }
	python3 - "$T/plan.json" "$T/m" <<'PY'
import json, sys, os
d = json.load(open(sys.argv[1]))
names = [t['name'] for t in d['plan']]
for i, n in enumerate(names):
    m = json.load(open(os.path.join(sys.argv[2], n + '.json')))
    for r in m.get('requires', []):
        r = r.partition('>=')[0]
        if r in names and names.index(r) > i:
            print('ORDER: %s before its requirement %s' % (n, r)); sys.exit(0)
print(' '.join(sorted(names)))
PY
}

case_() { # NAME PATHVER ARGS...
	_n=$1 _v=$2; shift 2
	want=$(derive "$_n" "$_v" "$@") || return
	got=$(planned "$_n" "$_v" "$@")
	if [ "$want" = "$got" ]; then ok "$_n: {$got}"; else not_ok "$_n" "plan {$got}, derived {$want}"; fi
}

cat >"$T/codex.json" <<'J'
{"agents": ["codex"]}
J
cat >"$T/both.json" <<'J'
{"agents": ["codex", "gemini"]}
J
cat >"$T/three.json" <<'J'
{"agents": ["codex", "cursor", "gemini"]}
J
cat >"$T/nopath.json" <<'J'
{"agents": ["codex"], "install": {"use_path": false}}
J
cat >"$T/cmds.json" <<'J'
[{"id": "lint", "argv": ["jq", "."], "install": ["jq"]},
 {"id": "search", "argv": ["rg", "{q}"], "params": {"q": {"type": "string", "required": true}}, "install": ["ripgrep"]}]
J
cat >"$T/policy.json" <<'J'
{"principals": {"ci": {"preset": "admin", "deny": ["agents.codex.install", "search"]}}}
J
cat >"$T/viewer.json" <<'J'
{"principals": {"viewer": {"preset": "readonly"}, "ci": {"allow": ["lint"]}}}
J

case_ "codex alone plans node-runtime and codex" "" --config "$T/codex.json"
case_ "codex with a PATH node 22 plans codex only" 22.1.0 --config "$T/codex.json"
case_ "a PATH node below the manifest's minimum does not count" 16.20.0 --config "$T/codex.json"
case_ "the strongest minimum of the dependents decides (gemini wants 20)" 19.0.0 --config "$T/both.json"
case_ "node 20 satisfies codex and gemini" 20.0.0 --config "$T/both.json"
case_ "install.use_path false ignores PATH" 22.1.0 --config "$T/nopath.json"
case_ "three agents" "" --config "$T/three.json"
case_ "preset readonly mounts nothing that installs" "" --config "$T/three.json" --preset readonly
case_ "preset agents plans without the install endpoint" "" --config "$T/three.json" --preset agents
case_ "commands plan their installs with requires" "" --commands "$T/cmds.json"
case_ "a deny of install and of an op removes them" 22.1.0 --config "$T/both.json" --commands "$T/cmds.json" --policy "$T/policy.json"
case_ "only what some principal may call" "" --config "$T/three.json" --commands "$T/cmds.json" --policy "$T/viewer.json"
export ABX_SERVER_AGENTS=gemini
case_ "agents from ABX_SERVER_AGENTS" 22.1.0
unset ABX_SERVER_AGENTS
case_ "no agents, no commands: nothing" ""

# the exact answer of the issue, spelled out
run env PATH="$BASEPATH" "$BIN" prepare --dry-run --json --manifests "$T/m" --config "$T/codex.json"
expect "codex: --dry-run --json exits 0" 0
check "codex: exactly node-runtime then codex" python3 -c "
import json; d = json.load(open('$T/out'))
assert [t['name'] for t in d['plan']] == ['node-runtime', 'codex'], d['plan']
n, c = d['plan']
assert n['required_by'] == ['codex'] and 'agents.codex.run' in n['needed_by'], n
assert c['version'] == '1.2.0' and c['size_hint_mb'] == 5 and c['hosts'] == ['127.0.0.1:1'], c
assert 'agents.codex.sessions.get' not in c['needed_by'], c
assert d['on_path'] == []
"
fake_node 22.1.0
run env PATH="$T/nodebin:$BASEPATH" "$BIN" prepare --dry-run --json --manifests "$T/m" --config "$T/codex.json"
check "codex with PATH node: only codex, node named as on PATH" python3 -c "
import json; d = json.load(open('$T/out'))
assert [t['name'] for t in d['plan']] == ['codex'], d['plan']
assert [t['name'] for t in d['on_path']] == ['node-runtime'], d['on_path']
assert d['on_path'][0]['path_entry'] == '$T/nodebin/node' and d['on_path'][0]['path_version'] == '22.1.0'
"
run env PATH="$T/nodebin:$BASEPATH" "$BIN" prepare --dry-run --manifests "$T/m" --config "$T/codex.json"
expect "the table names the ops that need codex" 0 "agents.codex.run,agents.codex.sessions.create,agents.codex.install"
check "the table says node is on PATH" grep -q "on PATH, not installed: node-runtime 22.1.0 at $T/nodebin/node" "$T/out"
check "the table has sizes (a hint marked ~) and hosts" sh -c "grep -E '^codex +1.2.0 +~5 MiB +127.0.0.1:1 ' '$T/out'"
# the unpacked size lock records, for this platform, is the SIZE shown
cp "$T/m/codex.json" "$T/codex.keep"
python3 -c "
import json; m = json.load(open('$T/m/codex.json'))
m['unpacked_size'] = {'$PLATFORM': 444596224}
json.dump(m, open('$T/m/codex.json', 'w'))"
run env PATH="$T/nodebin:$BASEPATH" "$BIN" prepare --dry-run --manifests "$T/m" --config "$T/codex.json"
check "the table shows unpacked_size, not the hint" sh -c "grep -E '^codex +1.2.0 +424 MiB +127.0.0.1:1 ' '$T/out'"
run env PATH="$T/nodebin:$BASEPATH" "$BIN" prepare --dry-run --manifests "$T/m" --config "$T/codex.json" --only codex
check "... and so does prepare --dry-run --only" sh -c "grep -E '^codex +1.2.0 +424 MiB ' '$T/out'"
run env PATH="$T/nodebin:$BASEPATH" "$BIN" prepare --dry-run --json --manifests "$T/m" --config "$T/codex.json"
check "... and --json has unpacked_size in bytes" python3 -c "
import json; d = json.load(open('$T/out'))
assert d['plan'][0]['unpacked_size'] == 444596224, d"
mv "$T/codex.keep" "$T/m/codex.json"
# --state-dir is listed in the configuration table: prepare takes it, and
# its value reaches the configuration loader (an empty one is refused there).
mkdir -p "$T/state-flag" && chmod 700 "$T/state-flag"
run env PATH="$T/nodebin:$BASEPATH" "$BIN" prepare --dry-run --manifests "$T/m" --config "$T/codex.json" \
	--state-dir "$T/state-flag"
expect "prepare takes --state-dir" 0 "agents.codex.run"
run "$BIN" prepare --dry-run --manifests "$T/m" --config "$T/codex.json" --state-dir ""
expect "prepare --state-dir reaches the configuration" 2 "" "config.invalid: --state-dir: empty path"
# prepare without --only: the plan, then the install, from one load of the
# configuration; each warning is said once.
mkdir -p "$T/tw" && chmod 700 "$T/tw"
run env PATH="$T/nodebin:$BASEPATH" ABX_SERVER_INSTALL_MODE=build ABX_SERVER_FOO=1 "$BIN" prepare \
	--manifests "$T/m" --config "$T/codex.json" --tools-dir "$T/tw"
check "prepare says an unknown-variable warning once" test "$(grep -c 'ABX_SERVER_FOO: unknown variable' "$T/err")" -eq 1
# The plan's configuration is the install's too: the file is read once.
opens() { # NAME FILE CMD...: FILE is opened once while CMD runs
	_n=$1 _f=$2; shift 2
	if ! command -v strace >/dev/null || ! strace -f -o /dev/null true 2>/dev/null; then
		skip "$_n" "no strace that may trace here"
		return
	fi
	strace -f -e trace=open,openat -o "$T/strace" "$@" >"$T/out" 2>"$T/err"
	_c=$(grep -v ENOENT "$T/strace" | grep -cF "\"$_f\"")
	check "$_n (opened $_c times)" test "$_c" -eq 1
}
opens "prepare reads the configuration file once" "$T/codex.json" env PATH="$T/nodebin:$BASEPATH" \
	ABX_SERVER_INSTALL_MODE=build "$BIN" prepare --manifests "$T/m" --config "$T/codex.json" --tools-dir "$T/tw"
opens "prepare reads the manifests directory once" "$T/m" env PATH="$T/nodebin:$BASEPATH" \
	ABX_SERVER_INSTALL_MODE=build "$BIN" prepare --manifests "$T/m" --config "$T/codex.json" --tools-dir "$T/tw"
opens "prepare --cache-only reads the configuration file once" "$T/codex.json" env PATH="$T/nodebin:$BASEPATH" \
	"$BIN" prepare --cache-only --manifests "$T/m" --config "$T/codex.json" --tools-dir "$T/tw" --cache "$T/cacheonce"
opens "fetch without --only reads the configuration file once" "$T/codex.json" env PATH="$T/nodebin:$BASEPATH" \
	"$BIN" fetch --platform all --manifests "$T/m" --config "$T/codex.json" --tools-dir "$T/tw" --cache "$T/cacheonce"
# A plan for another platform: this machine's node on PATH satisfies nothing there.
case "$(uname -m)" in aarch64 | arm64) OTHER=linux-x64 ;; *) OTHER=linux-arm64 ;; esac
run env PATH="$T/nodebin:$BASEPATH" "$BIN" prepare --dry-run --json --manifests "$T/m" --config "$T/codex.json" \
	--platform "$OTHER"
check "--dry-run --platform $OTHER plans node-runtime despite the PATH node" python3 -c \
	"import json; d = json.load(open('$T/out')); assert 'node-runtime' in [p['name'] for p in d['plan']] and not d['on_path'], d"
run env PATH="$T/nodebin:$BASEPATH" "$BIN" prepare --dry-run --manifests "$T/m" --config "$T/codex.json" \
	--only codex --platform all
expect "--dry-run --platform all is a plan, as with --cache-only" 0 "codex"

# mode and its source travel with the plan
run env PATH="$BASEPATH" ABX_SERVER_INSTALL_MODE=build "$BIN" prepare --dry-run --json --manifests "$T/m" --config "$T/codex.json"
check "the plan names the mode and its source" python3 -c "
import json; d = json.load(open('$T/out'))
assert d['mode'] == 'build' and d['mode_source'] == 'env ABX_SERVER_INSTALL_MODE', d
"

# a cache for another machine ignores this machine's PATH
run env PATH="$T/nodebin:$BASEPATH" "$BIN" prepare --cache-only --json --manifests "$T/m" --config "$T/codex.json" \
	--tools-dir "$T/tools" --cache "$T/cachex"
check "--cache-only plans node-runtime even with a PATH node" grep -q '"name":"node-runtime"' "$T/out"

# configuration errors exit 2
echo '{"agents": ["codex"], "instal": {}}' >"$T/typo.json"
run "$BIN" prepare --dry-run --manifests "$T/m" --config "$T/typo.json"
expect "an unknown key exits 2" 2 "" "config.invalid: instal: unknown key (did you mean install?)"
echo '{"agents": ["nosuch"]}' >"$T/noagent.json"
run "$BIN" prepare --dry-run --manifests "$T/m" --config "$T/noagent.json"
expect "an unknown agent exits 2" 2 "" "agents: nosuch: no manifest"

# introspection: planning opens no socket; the only process is the PATH probe
if strace -V >/dev/null 2>&1; then
	run strace -f -qq -s 256 -o "$T/trace" -e trace=network,process env PATH="$T/nodebin:$BASEPATH" "$BIN" prepare --dry-run \
		--json --manifests "$T/m" --config "$T/codex.json"
	expect "prepare --dry-run under strace" 0
	check "planning opens no socket" sh -c "! grep -E 'socket\\(|connect\\(' '$T/trace'"
	check "planning runs only the PATH probe" sh -c \
		"test \$(grep -c 'execve(' '$T/trace') -eq 3 && grep -q 'execve(\"$T/nodebin/node\", \\[\"$T/nodebin/node\", \"--version\"\\]' '$T/trace'"
else
	skip "introspection under strace" "strace not installed"
fi

# ---- a real prepare from the configuration, against a local HTTPS server ----
if sh "$FIXTURES/mkcerts.sh" "$T/pki" >/dev/null 2>&1; then
	W=$T/www M2=$T/m2
	mkdir -p "$W" "$M2" "$T/src"
	PKI=$T/pki
	start_httpd "$W" "$T/req.log"
	HP=$HTTPD_PORT
	for tool in dep hello unused; do
		rm -rf "$T/src/pkg" && mkdir -p "$T/src/pkg/bin"
		printf '#!/bin/sh\necho "%s 1.0.0"\n' "$tool" >"$T/src/pkg/bin/$tool"
		chmod 755 "$T/src/pkg/bin/$tool"
		tar czf "$W/$tool.tgz" -C "$T/src" pkg
		sha=$(sha "$W/$tool.tgz")
		req='[]'; [ "$tool" = hello ] && req='["dep"]'
		cat >"$M2/$tool.json" <<J
{"schema":1,"name":"$tool","binary":"$tool","version":"1.0.0","requires":$req,
 "source":{"type":"tarball","bin":"bin/$tool","strip_components":1,
  "platforms":{"linux-x64":{"url":"https://localhost:$HP/f/$tool.tgz","sha256":"$sha"},
               "linux-arm64":{"url":"https://localhost:$HP/f/$tool.tgz","sha256":"$sha"}}},
 "hosts":["localhost"],"verify":{"argv":["{bin}"],"expect":"$tool 1.0.0"},
 "platforms":["linux-x64","linux-arm64"],"size_hint_mb":1}
J
	done
	echo '[{"id": "greet", "argv": ["hello"], "install": ["hello"]}]' >"$T/greet.json"
	echo '{"commands": "greet.json"}' >"$T/greetcfg.json"
	mkdir -m 700 "$T/it"
	run env SSL_CERT_FILE="$T/pki/ca.pem" PATH="$BASEPATH" "$BIN" prepare --config "$T/greetcfg.json" \
		--manifests "$M2" --tools-dir "$T/it"
	expect "prepare installs what the configuration needs" 0 "hello 1.0.0: installed"
	check "dependencies first" sh -c "grep -n '^dep 1.0.0' '$T/out' | cut -d: -f1 | { read a; test \$a -lt \$(grep -n '^hello 1.0.0' '$T/out' | cut -d: -f1); }"
	check "the required tool is installed" test -x "$T/it/dep/1.0.0-linux-x64/bin/dep"
	check "the needed tool is installed" test -x "$T/it/hello/1.0.0-linux-x64/bin/hello"
	check "a tool no op needs is not downloaded" sh -c "! grep -q 'unused.tgz' '$T/req.log'"
	run env SSL_CERT_FILE="$T/pki/ca.pem" PATH="$BASEPATH" "$BIN" prepare --config "$T/greetcfg.json" \
		--manifests "$M2" --tools-dir "$T/it"
	expect "a second prepare finds everything ready" 0 "hello 1.0.0: ready"
	check "and downloads nothing more" test "$(grep -c 'GET /f/hello.tgz' "$T/req.log")" -eq 1

	mkdir -m 700 "$T/co" "$T/cache"
	run env SSL_CERT_FILE="$T/pki/ca.pem" PATH="$BASEPATH" "$BIN" prepare --cache-only --config "$T/greetcfg.json" \
		--manifests "$M2" --tools-dir "$T/co" --cache "$T/cache"
	expect "--cache-only exits 0" 0
	check "--cache-only fills the cache by sha256" sh -c \
		"test -f '$T/cache/$(sha256sum "$W/hello.tgz" | cut -d' ' -f1)' && test -f '$T/cache/$(sha256sum "$W/dep.tgz" | cut -d' ' -f1)'"
	check "--cache-only skips what no op needs" test ! -f "$T/cache/$(sha256sum "$W/unused.tgz" | cut -d' ' -f1)"
	check "--cache-only installs nothing" test ! -e "$T/co/hello"

	# fetch on a CI machine: the configuration's tools for every platform
	mkdir -m 700 "$T/ci" "$T/cache2"
	run env SSL_CERT_FILE="$T/pki/ca.pem" PATH="$BASEPATH" "$BIN" fetch --platform all --config "$T/greetcfg.json" \
		--manifests "$M2" --tools-dir "$T/ci" --cache "$T/cache2"
	expect "fetch --platform all without --only fills from the configuration" 0
	check "fetch: the needed tools are cached" sh -c \
		"test -f '$T/cache2/$(sha256sum "$W/hello.tgz" | cut -d' ' -f1)' && test -f '$T/cache2/$(sha256sum "$W/dep.tgz" | cut -d' ' -f1)'"
	check "fetch: the unneeded tool is not" test ! -f "$T/cache2/$(sha256sum "$W/unused.tgz" | cut -d' ' -f1)"
else
	skip "prepare from the configuration against HTTPS" "cannot make a test PKI"
fi
