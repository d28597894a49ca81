# A tool's requires install beside it: node-runtime (a tarball the fake
# registry sends slowly) is downloaded, extracted and published while the
# tool that requires it (npm-lock, no scripts) is staged, and joined before
# the tool's verify.argv (a JavaScript entry: it runs through that node).
# Observed by order, never by time: the dependent's staging ends before the
# requirement's publish; paused at the requirement's publish (ABX_TEST_PAUSE)
# the dependent has fetched its packages, and a kill -9 there leaves neither
# published. A requirement's failure is said once and discards the
# dependent's staging; a dependent's failure leaves the requirement
# published. prepare with several tools; serve's install on first use.
. "$TOP/tests/lib.sh"

make_pki
if ! command -v musl-gcc >/dev/null 2>&1; then
	not_ok "musl-gcc" "needed to build the fake node"
	exit 1
fi
export SSL_CERT_FILE="$PKI/ca.pem"
export ABX_INSTALL_LIBC=glibc
mkdir -p "$T/reg" "$T/m" "$T/mbad" "$T/nobin"
musl-gcc -static -Os -o "$T/fakenode" "$FIXTURES/fakenode.c" || { not_ok "fake node" "musl-gcc failed"; exit 1; }

# tarballs over 256 KiB: 64 KiB per 100 ms (node-runtime's ~1.6 MiB: ~2.5 s)
start_npmreg reg "$T/reg" "$PKI" --slow-ms 100
REG="https://localhost:$REG_PORT"

FIXTURES=$FIXTURES T=$T REG=$REG python3 - <<'EOF'
import hashlib, io, json, os, sys, tarfile
sys.path.insert(0, os.environ["FIXTURES"])
import npmpack as P
T, REG, root = os.environ["T"], os.environ["REG"], os.environ["T"] + "/reg"

def node_manifest(mdir, sha):
    arts = {p: {"url": REG + "/node/-/node-99.0.0.tgz", "sha256": sha} for p in ("linux-x64", "linux-arm64")}
    json.dump({"schema": 1, "name": "node-runtime", "binary": "node", "version": "99.0.0",
               "source": {"type": "tarball", "bin": "bin/node", "strip_components": 1, "platforms": arts},
               "hosts": ["localhost"], "verify": {"argv": ["{bin}", "--version"], "expect": "v99"},
               "path": {"argv": ["{bin}", "--version"], "min": "99.0.0"},
               "platforms": ["linux-x64", "linux-arm64"]}, open(mdir + "/node-runtime.json", "w"), indent=2)

# node-runtime: the fake node and 1.5 MiB that does not compress (slow to send)
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    for name, data, mode in (("node-v99/bin/node", open(T + "/fakenode", "rb").read(), 0o755),
                             ("node-v99/lib/blob", os.urandom(1536 << 10), 0o644)):
        ti = tarfile.TarInfo(name); ti.size = len(data); ti.mode = mode
        t.addfile(ti, io.BytesIO(data))
os.makedirs(root + "/node/-", exist_ok=True)
open(root + "/node/-/node-99.0.0.tgz", "wb").write(buf.getvalue())
node_manifest(T + "/m", hashlib.sha256(buf.getvalue()).hexdigest())
node_manifest(T + "/mbad", "0" * 64)  # a digest the artifact does not have

# app: a JavaScript bin (its verify runs through node-runtime's node)
P.pack(root, "@t/app", "1.0.0", {"cli.js": b"#!/usr/bin/env node\nconsole.log('app')\n"}, {"bin": {"app": "cli.js"}})
P.pack(root, "dep", "1.0.0", {"index.js": b"v1\n"})
E = lambda *a, **k: P.entry(root, REG, *a, **k)
good = {"node_modules/@t/app": E("@t/app", "1.0.0", bin={"app": "cli.js"}), "node_modules/dep": E("dep", "1.0.0")}
bad = {"node_modules/@t/app": good["node_modules/@t/app"],
       "node_modules/dep": dict(good["node_modules/dep"], integrity=P.sri(b"not the tarball"))}
for mdir in (T + "/m", T + "/mbad"):
    for name, entries, req in (("app", good, ["node-runtime"]), ("broken", bad, ["node-runtime"]),
                               ("solo", good, [])):
        P.write_manifest(mdir, name, "@t/app", ["localhost"], requires=req, bin_="node_modules/.bin/app",
                         binary=name)
        P.write_lock(mdir + "/%s/package-lock.json" % name, "@t/app", entries)
# app as an agent, for serve
m = json.load(open(T + "/m/app.json")); m["run"] = ["{bin}", "{prompt}"]
json.dump(m, open(T + "/m/app.json", "w"))
EOF
[ -f "$T/m/app.json" ] || { not_ok "fixtures" "the generator failed"; exit 1; }
export ABX_MANIFESTS_DIR="$T/m"
NODE_TREE=node-runtime/99.0.0-$PLATFORM
APP_TREE=app/1.0.0-$PLATFORM

# ---- the overlap, seen in the order of the lines -----------------------------
run env PATH="$T/nobin" "$BIN" prepare --keep-cache --only app --tools-dir "$T/t1"
expect "prepare --only app: app and node-runtime installed, no node on PATH" 0 \
	"app 1.0.0: installed ($T/t1/$APP_TREE/node_modules/.bin/app)"
check "... node-runtime's line first, 'installed' (by app's install), plan order kept" sh -c \
	"head -1 '$T/out' | grep -qx 'node-runtime 99.0.0: installed ($T/t1/$NODE_TREE/bin/node)'"
KEPT=$(grep -n "app 1.0.0: kept the extracted trees" "$T/err" | head -1 | cut -d: -f1)
PUB=$(grep -n "^node-runtime: publish" "$T/err" | head -1 | cut -d: -f1)
check "app's packages were staged while node-runtime downloaded (its 'kept' note, line ${KEPT:-none}, before node-runtime's publish, line ${PUB:-none})" \
	test -n "$KEPT" -a -n "$PUB" -a "${KEPT:-0}" -lt "${PUB:-0}"
check "... and app's verify ran through that node (published before app)" \
	test -x "$T/t1/$NODE_TREE/bin/node" -a -f "$T/t1/app/.installed.json"
NKEPT=$(grep -n "node-runtime 99.0.0: kept the extracted tree in $T/t1/.cache/trees/" "$T/err" | head -1 | cut -d: -f1)
check "node-runtime's tree was read for the cache before it ran and its copies moved in after its publish (its 'kept' note, line ${NKEPT:-none}, after line ${PUB:-none}): app's verify did not wait for them" \
	test -n "$NKEPT" -a -n "$PUB" -a "${NKEPT:-0}" -gt "${PUB:-0}"
run env PATH="$T/nobin" "$BIN" prepare --keep-cache --only app --tools-dir "$T/t1p" --cache "$T/t1/.cache"
expect "... a tools directory on that cache: node-runtime placed from that tree (every copy hashed against its sealed listing)" 0 \
	"app 1.0.0: installed" "node-runtime 99.0.0: placed "
check "every progress and note line is whole (one 'name: phase' or 'agent-sandbox-server: ' line each)" sh -c \
	"! grep -Ev '^(agent-sandbox-server: |node-runtime: [a-z]+|app: [a-z]+)' '$T/err' | grep -q ."
run "$BIN" verify app --tools-dir "$T/t1"
expect "... the installed app verifies" 0 "OK app"
run env PATH="$T/nobin" "$BIN" prepare --keep-cache -v --only app --tools-dir "$T/t1v"
expect "prepare -v --only app" 0
check "prepare -v: app's timing has the wait for its requires, node-runtime's has none" sh -c \
	"grep -Eq '^agent-sandbox-server: timing app 1.0.0:.* npm [0-9.]+ ms, requires [0-9.]+ ms, verify.argv ' '$T/err' && ! grep -q 'timing node-runtime.* requires ' '$T/err'"

# ---- a kill -9 while the requirement publishes ---------------------------------
ABX_TEST_PAUSE=publish "$BIN_HOOKS" prepare --keep-cache --only app --tools-dir "$T/t2" >"$T/p2.out" 2>"$T/p2.err" &
P2=$!
if wait_for_line "$T/p2.err" "install: paused at publish" 30; then
	check "paused at node-runtime's publish, app's packages are already staged" \
		wait_for_line "$T/p2.err" "app 1.0.0: kept the extracted trees" 20
	kill -9 $P2
	wait $P2 2>/dev/null
	check "kill -9 there: app is not published (its requirement is not)" \
		test ! -e "$T/t2/$APP_TREE" -a ! -e "$T/t2/app/.installed.json"
	check "... nor node-runtime" test ! -e "$T/t2/node-runtime/.installed.json"
	run env PATH="$T/nobin" "$BIN" prepare --keep-cache --only app --tools-dir "$T/t2"
	expect "... the next prepare installs both" 0 "app 1.0.0: installed"
else
	kill -9 $P2 2>/dev/null
	wait $P2 2>/dev/null
	not_ok "paused at node-runtime's publish" "$(head -c 300 "$T/p2.err")"
fi

# ---- the requirement fails -------------------------------------------------------
run env ABX_MANIFESTS_DIR="$T/mbad" "$BIN" prepare --keep-cache --only app --tools-dir "$T/t3"
expect "node-runtime's digest does not match: prepare --only app exits 1" 1 "" \
	"install.checksum_mismatch: app requires node-runtime: "
check "... said once (one error line)" test "$(grep -c '^agent-sandbox-server: install\.' "$T/err")" -eq 1
check "... app's staging discarded, nothing published" sh -c \
	"test -z \"\$(ls -A '$T/t3/.staging')\" && test ! -e '$T/t3/app/.installed.json' && test ! -e '$T/t3/node-runtime/.installed.json'"
check "... the backoff is node-runtime's, not app's" \
	test -f "$T/t3/.locks/node-runtime.backoff" -a ! -f "$T/t3/.locks/app.backoff"
run env ABX_MANIFESTS_DIR="$T/mbad" "$BIN" prepare --keep-cache --json --force --only app --tools-dir "$T/t3"
expect "--json: both entries fail with the requirement's code" 1
check "... node-runtime's own error, app's prefixed, in plan order" python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); t = d["tools"]
assert [x["name"] for x in t] == ["node-runtime", "app"], t
assert t[0]["error"]["code"] == t[1]["error"]["code"] == "install.checksum_mismatch", t
assert t[1]["error"]["message"].startswith("app requires node-runtime: " + t[0]["error"]["message"][:40]), t
assert d["ok"] is False' "$T/out"

# Derived from a configuration (no tool named, so none requested): the
# requirement's failure is still said once, inside app's ("app requires
# node-runtime: ..."), not again on a line of its own
mkdir -p "$T/mbadrun"
cp -R "$T/mbad/." "$T/mbadrun/"
python3 -c '
import json, sys
m = json.load(open(sys.argv[1])); m["run"] = {"argv": ["{bin}"]}
json.dump(m, open(sys.argv[1], "w"))' "$T/mbadrun/app.json"
printf '{"agents": ["app"]}\n' >"$T/cfg-app.json"
run env ABX_MANIFESTS_DIR="$T/mbadrun" ABX_SERVER_CONFIG="$T/cfg-app.json" PATH="$T/nobin" \
	"$BIN" prepare --keep-cache --force --tools-dir "$T/t3c"
expect "a configuration's plan whose requirement fails exits 1" 1 "" \
	"install.checksum_mismatch: app requires node-runtime: "
check "... said once (one error line)" test "$(grep -c '^agent-sandbox-server: install\.' "$T/err")" -eq 1

# ---- the dependent fails ---------------------------------------------------------
run env PATH="$T/nobin" "$BIN" prepare --keep-cache --only broken --tools-dir "$T/t4"
expect "broken's package has another integrity: exit 1" 1 "" "install.checksum_mismatch"
check "... said once" test "$(grep -c '^agent-sandbox-server: install\.' "$T/err")" -eq 1
check "... node-runtime is published all the same (a valid install on its own)" \
	test -f "$T/t4/node-runtime/.installed.json" -a -x "$T/t4/$NODE_TREE/bin/node"
check "... reported installed" grep -qx "node-runtime 99.0.0: installed ($T/t4/$NODE_TREE/bin/node)" "$T/out"
check "... broken is not published, its staging is gone" sh -c \
	"test ! -e '$T/t4/broken/.installed.json' && test -z \"\$(ls -A '$T/t4/.staging')\""
run "$BIN" verify node-runtime --tools-dir "$T/t4"
expect "... and node-runtime verifies" 0 "OK node-runtime"

# ---- several tools ----------------------------------------------------------------
run env PATH="$T/nobin" "$BIN" prepare --keep-cache --only solo app --tools-dir "$T/t5"
expect "--only solo app: all three installed" 0
cut -d' ' -f1 "$T/out" >"$T/order"
"$BIN" prepare --keep-cache --dry-run --only solo app --tools-dir "$T/t5x" 2>/dev/null | cut -d' ' -f1 >"$T/plan"
check "... the lines in the plan's order ($(tr '\n' ' ' <"$T/plan"))" sh -c \
	"test -s '$T/plan' && diff '$T/plan' '$T/order' >/dev/null"
run env PATH="$T/nobin" "$BIN" prepare --keep-cache --only node-runtime app --tools-dir "$T/t6"
expect "--only node-runtime app: node-runtime (named) installed first, app after it" 0 \
	"node-runtime 99.0.0: installed ($T/t6/$NODE_TREE/bin/node)"
check "... app too" grep -q "app 1.0.0: installed" "$T/out"
check "... one node-runtime download per run (no second install)" \
	test "$(grep -c "installing node-runtime" "$T/err")" -eq 1

# ---- serve: install on first use, the requirement beside the agent ----------------
mkdir -p "$T/st7"
: >"$T/reg.log"
bg env ABX_TEST_PAUSE=publish ABX_SERVER_TOKEN=tok ABX_SERVER_AGENTS=app ABX_SERVER_INSTALL_MODE=lazy \
	ABX_SERVER_INSTALL_WAIT=0 PATH="$T/nobin" "$BIN_HOOKS" serve --host 127.0.0.1 --port 0 --tools-dir "$T/t7" \
	--state-dir "$T/st7" >"$T/serve.out" 2>"$T/serve.err"
SP=$BGPID
if wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10; then
	run python3 - "http://127.0.0.1:$(head -1 "$T/serve.out")" <<'EOF'
import json, sys, urllib.error, urllib.request
rq = urllib.request.Request(sys.argv[1] + "/v1/agents/runtimes/app/install", method="POST", data=b"{}",
                            headers={"X-Access-Token": "tok", "Content-Type": "application/json"})
try:
    d = json.load(urllib.request.urlopen(rq, timeout=10))
except urllib.error.HTTPError as e:
    d = json.load(e)
print(json.dumps(d))
EOF
	expect "serve: POST install app starts a job" 0 '"install.job"'
	if wait_for_line "$T/serve.err" "install: paused at publish" 30; then
		check "serve: paused at node-runtime's publish, app's package is already fetched" \
			wait_for_line "$T/reg.log" "GET /@t/app/-/app-1.0.0.tgz" 20
	else
		not_ok "serve: paused at node-runtime's publish" "$(head -c 300 "$T/serve.err")"
	fi
	kill -9 "$SP" 2>/dev/null
	wait "$SP" 2>/dev/null
	check "serve killed there: nothing published" \
		test ! -e "$T/t7/app/.installed.json" -a ! -e "$T/t7/node-runtime/.installed.json"
else
	not_ok "serve starts" "$(head -c 300 "$T/serve.err")"
fi

# ---- serve: the job's progress is its tool's; the requirement's is under requires -------
mkdir -p "$T/st8"
bg env ABX_SERVER_TOKEN=tok ABX_SERVER_AGENTS=app ABX_SERVER_INSTALL_MODE=lazy ABX_SERVER_INSTALL_WAIT=0 \
	PATH="$T/nobin" "$BIN" serve --host 127.0.0.1 --port 0 --tools-dir "$T/t8" --state-dir "$T/st8" \
	>"$T/serve8.out" 2>"$T/serve8.err"
SP=$BGPID
if wait_for_line "$T/serve8.out" '^[0-9][0-9]*$' 10; then
	run python3 - "http://127.0.0.1:$(head -1 "$T/serve8.out")" "$T/reg/node/-/node-99.0.0.tgz" <<'EOF'
import json, os, sys, time, urllib.error, urllib.request
base, node_size = sys.argv[1], os.path.getsize(sys.argv[2])
def call(method, path, body=None):
    rq = urllib.request.Request(base + path, method=method, data=body,
                                headers={"X-Access-Token": "tok", "Content-Type": "application/json"})
    try:
        return json.load(urllib.request.urlopen(rq, timeout=10))
    except urllib.error.HTTPError as e:
        return json.load(e)
job = call("POST", "/v1/agents/runtimes/app/install", b"{}")
jid, seen, deadline = job["id"], [], time.time() + 60
while job.get("status") == "pending" and time.time() < deadline:
    seen.append(job)
    time.sleep(0.05)
    job = call("GET", "/v1/install/jobs/" + jid)
seen.append(job)
bad = [s for s in seen if s.get("total", 0) >= node_size]
reqs = job.get("requires", [])
node = [r for r in reqs if r.get("tool") == "node-runtime"]
print(json.dumps({"status": job.get("status"), "own": [job.get("bytes"), job.get("total"), job.get("packages_done"),
                  job.get("packages_total")], "requires": reqs, "polls": len(seen)}))
if job.get("status") != "succeeded":
    sys.exit("not succeeded: %s" % json.dumps(job))
if bad:
    sys.exit("the job's own progress showed the requirement's bytes: %s" % json.dumps(bad[0]))
if not (job["bytes"] == job["total"] > 0 and job["packages_done"] == job["packages_total"] >= 1):
    sys.exit("the tool's own progress is not complete: %s" % json.dumps(job))
if len(node) != 1 or not (node[0]["bytes"] == node[0]["total"] == node_size and node[0]["packages_done"] == 1):
    sys.exit("node-runtime is not under requires with its whole download (%d bytes): %s" % (node_size, reqs))
if node[0].get("phase") != "done":
    sys.exit("a finished job's requirement is not done: %s" % reqs)
EOF
	expect "serve: the job succeeds; its progress is app's own, node-runtime's (its whole tarball) under requires" 0 '"status": "succeeded"'
	kill "$SP" 2>/dev/null
	wait "$SP" 2>/dev/null
else
	not_ok "serve starts (requires progress)" "$(head -c 300 "$T/serve8.err")"
fi
