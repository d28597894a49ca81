# Operator flows of the install engine: the explicit tools
# directory, shims that say what they install, backoff per tools directory,
# caps per artifact, one progress model, npm audit records, the registry
# probe, and fetch failures as install.failed. Real peers on loopback only:
# tests/fixtures/httpd.py (HTTPS, a test PKI made here) and npmreg.py.
. "$TOP/tests/lib.sh"

W=$T/www
M=$T/man
mkdir -p "$W" "$M" "$T/home" "$T/state/tools"
chmod 700 "$T/state" "$T/state/tools"
export HOME=$T/home ABX_SERVER_STATE_DIR=$T/state ABX_SERVER_AUDIT_FILE=$T/audit.jsonl
# /opt/agent-sandbox/tools belongs to the machine: these cases need it absent
if [ -e /opt/agent-sandbox/tools ]; then
	skip "install flows" "/opt/agent-sandbox/tools exists on this machine"
	exit 0
fi

make_pki
export SSL_CERT_FILE=$T/pki/ca.pem

start_httpd "$W" "$T/req.log"
P=$HTTPD_PORT
gets() { grep -c " GET /f/$1" "$T/req.log" || true; }


mktool hello 1.0.0
H=$(sha "$W/hello-1.0.0.tgz")
mkman hello /f/hello-1.0.0.tgz "$H"

# ---- an explicit tools directory is created and used, or refused -------------
# the chain's per-user directory ($ABX_SERVER_STATE_DIR/tools) exists and is
# writable; ABX_TOOLS_DIR names one that does not exist yet
run env ABX_TOOLS_DIR="$T/newdir" "$BIN" prepare --keep-cache --manifests "$M" --only hello
expect "ABX_TOOLS_DIR that does not exist: prepare installs" 0 "hello 1.0.0: installed"
check "... into the explicit directory, created" test -x "$T/newdir/hello/1.0.0-linux-x64/bin/hello"
check "... not into a later directory of the chain" test ! -e "$T/state/tools/hello"
: >"$T/afile"
run env ABX_TOOLS_DIR="$T/afile/sub" "$BIN" prepare --keep-cache --manifests "$M" --only hello --force
expect "an explicit directory that cannot be created is refused" 1 "" "install.read_only"
check "... naming it, where it came from, and why" grep -q "tools directory $T/afile/sub (env ABX_TOOLS_DIR): cannot create" "$T/err"
check "... and nothing went to the per-user directory" test ! -e "$T/state/tools/hello"
run "$BIN" prepare --keep-cache --manifests "$M" --only hello
expect "without ABX_TOOLS_DIR the per-user directory is used" 0 "hello 1.0.0: installed"
run "$BIN" prepare --keep-cache --manifests "$M" --only hello --tools-dir "$T/c1"
expect "ready in another directory of the chain: prepare says where" 0 \
	"hello 1.0.0: ready in $T/state/tools, not in $T/c1 (flag --tools-dir)"
run "$BIN" prepare --keep-cache --json --manifests "$M" --only hello --tools-dir "$T/c1"
expect "--json names the tools directory of the ready tree" 0 "\"tools_dir\":\"$T/state/tools\""

# ---- backoff per tools directory; a failed install leaves nothing ---------------
mktool bad 1.0.0
mkman bad /f/bad-1.0.0.tgz "$(printf '%064d' 1)"
run "$BIN" prepare --keep-cache --manifests "$M" --only bad
expect "a failing install (checksum mismatch)" 1 "" "install.checksum_mismatch"
check "... leaves no empty <tools>/bad/" test ! -e "$T/state/tools/bad"
check "... its backoff is recorded" test -f "$T/state/tools/.locks/bad.backoff"
n=$(gets bad-1.0.0.tgz)
run "$BIN" prepare --keep-cache --manifests "$M" --only bad --tools-dir "$T/b2"
expect "another tools directory is not held back by that backoff" 1 "" "install.checksum_mismatch"
check "... it downloaded again" test "$(gets bad-1.0.0.tgz)" -eq $((n + 1))
check "... and left no empty $T/b2/bad/" test ! -e "$T/b2/bad"
run "$BIN" prepare --keep-cache --manifests "$M" --only bad
expect "the first directory is still in backoff" 1 "" "install.backoff"

# ---- a fetch failure is install.failed with details.phase and the client's code --
mkman gone /f/nothing-here.tgz "$(printf %064d 2)"
run "$BIN" prepare --keep-cache --json --manifests "$M" --only gone --tools-dir "$T/f8"
expect "a 404 while fetching: install.failed" 1 '"code":"install.failed"'
check "... details.phase fetch and the client's code in details.code" \
	grep -q '"details":{"phase":"fetch","code":"http.status","url":"https://localhost:'"$P"'/f/nothing-here.tgz"}' "$T/out"
run "$BIN" prepare --keep-cache --manifests "$M" --only gone --tools-dir "$T/f8" --force
expect "... the message keeps the client's code" 1 "" "install.failed: gone 1.0.0: fetching https://localhost:$P/f/nothing-here.tgz: http.status:"

# ---- npm-lock tools against the fake registry (tests/fixtures/npmreg.py) ----------
export ABX_INSTALL_LIBC=glibc
npm_fixture
npmpy <<'PY'
import os
import npmpack as P
T, REG = os.environ["T"], os.environ["REG"]
root, m = T + "/reg", T + "/nm"
# the tool: a shell entry (no node needed) and four incompressible packages
entries = {"node_modules/@t/app": P.app(root, REG)}
for i in range(4):
    P.pack(root, "blob%d" % i, "1.0.0", {"blob.bin": os.urandom(300 << 10)})
    entries["node_modules/blob%d" % i] = P.entry(root, REG, "blob%d" % i, "1.0.0")
P.write_app(m, "napp", entries)
# the same lockfile resolved on a port where nothing listens (a blocked registry)
blocked = {k: dict(v, resolved=v["resolved"].replace(REG, "https://localhost:1")) for k, v in entries.items()}
P.write_app(m, "nblocked", blocked)
PY
NPKG=5
NBYTES=$(cat "$T"/reg/@t/app/-/app-1.0.0.tgz "$T"/reg/blob*/-/*.tgz | wc -c)
LOCKSHA=$(sha "$T/nm/napp/package-lock.json")

# ---- a blocked npm registry is install.network_unreachable, probed first -----
run "$BIN" prepare --keep-cache --json --manifests "$T/nm" --only nblocked --tools-dir "$T/n7"
expect "npm-lock, registry unreachable: install.network_unreachable" 1 '"code":"install.network_unreachable"'
check "... with the phase, the host and the hint" \
	grep -q '"details":{"phase":"probe","host":"localhost:1","hint":"install.mirrors.npm, or mode offline with a cache"}' "$T/out"
check "... and the npm mirror in the message" grep -q 'set install.mirrors.npm (ABX_INSTALL_NPM_REGISTRY)' "$T/out"

# ---- the audit record of an npm install: bytes, lockfile digest, packages -------
run "$BIN" prepare --keep-cache --manifests "$T/nm" --only napp --tools-dir "$T/n6"
expect "an npm-lock install" 0 "napp 1.0.0: installed"
grep '"event":"install.finish","tool":"napp"' "$T/audit.jsonl" | tail -1 >"$T/a6"
check "install.finish has the bytes of every package" grep -q "\"bytes\":$NBYTES," "$T/a6"
check "... the lockfile's digest and the package count" \
	grep -q "\"lockfile_sha256\":\"$LOCKSHA\",\"packages\":$NPKG,\"downloaded_bytes\":$NBYTES" "$T/a6"
check "... and no empty artifact digest" sh -c "! grep -q '\"artifact_sha256\":\"\"' '$T/a6'"

# ---- max_download_mb caps each artifact, not the sum --------------------------
# napp's five packages are 1.2 MB together, each under 1 MiB
run env ABX_SERVER_INSTALL_MAX_DOWNLOAD_MB=1 "$BIN" fetch --manifests "$T/nm" --only napp --platform all --cache "$T/c4"
expect "fetch: packages under the cap each, over it together" 0
run env ABX_SERVER_INSTALL_MAX_DOWNLOAD_MB=1 "$BIN" prepare --keep-cache --manifests "$T/nm" --only napp --tools-dir "$T/n4"
expect "prepare: the same npm tool installs under a 1 MiB cap" 0 "napp 1.0.0: installed"
mktool big 1.0.0 $((1500 * 1024))
mkman big /f/big-1.0.0.tgz "$(sha "$W/big-1.0.0.tgz")"
run env ABX_SERVER_INSTALL_MAX_DOWNLOAD_MB=1 "$BIN" prepare --keep-cache --json --manifests "$M" --only big --tools-dir "$T/n4"
expect "one artifact above the cap: install.failed" 1 '"code":"install.failed"'
check "... details.code http.too_large and the hint" \
	grep -q '"code":"http.too_large",.*"hint":"install.max_download_mb caps each download' "$T/out"

# ---- a shim says what it installs and why, obeys the mode, shows progress on a TTY --
mktool shy 1.0.0 $((200 * 1024))
mkman shy /f/shy-1.0.0.tgz "$(sha "$W/shy-1.0.0.tgz")"
run "$BIN" prepare --keep-cache -q --manifests "$M" --only shy --tools-dir "$T/s2"
expect "prepared" 0
S2=$T/s2/bin/shy
run env ABX_MANIFESTS_DIR="$M" "$S2"
expect "a ready tool: the shim installs nothing and says nothing" 0 "shy 1.0.0"
check "... stderr is empty" test ! -s "$T/err"
# drift: a file of the prepared tree changed
echo tampered >>"$T/s2/shy/1.0.0-linux-x64/share/data.bin"
n=$(gets shy-1.0.0.tgz)
run env ABX_MANIFESTS_DIR="$M" ABX_SERVER_INSTALL_MODE=build "$S2"
expect "drift in mode build: install.required, naming the drift" 1 "" \
	"install.required: shy 1.0.0: drift: $T/s2/shy/1.0.0-linux-x64 differs from what was installed, and install mode is build"
check "... nothing downloaded" test "$(gets shy-1.0.0.tgz)" -eq "$n"
run env ABX_MANIFESTS_DIR="$M" "$S2"
expect "drift in mode lazy: one line before the repair, from what the cache keeps" 0 "shy 1.0.0" \
	"agent-sandbox-server: repairing shy 1.0.0 in $T/s2 from local copies of its pinned downloads (drift: $T/s2/shy/1.0.0-linux-x64 differs from what was installed)"
check "... no progress without a terminal: that line, the placement's and the recorded verify pass" sh -c \
	"test \$(wc -l <'$T/err') -eq 3 && grep -q '^agent-sandbox-server: shy 1.0.0: placed [0-9]* files from the extracted tree' '$T/err' && grep -q '^agent-sandbox-server: shy 1.0.0: verify.argv: passed for this tree on .* (sealed); not run again$' '$T/err'"
# the manifest the shim sees is not the one the tree was installed from
mkman shy /f/shy-1.0.0.tgz "$(sha "$W/shy-1.0.0.tgz")" '"description":"changed"'
run env ABX_MANIFESTS_DIR="$M" ABX_SERVER_INSTALL_MODE=build "$S2"
expect "manifest changed in mode build: install.required, naming it" 1 "" \
	"install.required: shy 1.0.0: manifest changed: $T/s2 has shy 1.0.0 from another manifest than $M/shy.json"
rm -rf "$T/s2/.cache/$(sha "$W/shy-1.0.0.tgz")" "$T/s2/.cache/trees"
n=$(gets shy-1.0.0.tgz)
script -qec "env ABX_MANIFESTS_DIR='$M' '$S2'" /dev/null >"$T/tty.out" 2>&1
check "manifest changed on a terminal: the line, then progress" sh -c \
	"grep -q 'installing shy 1.0.0 into $T/s2, downloading from https://localhost:$P (manifest changed: ' '$T/tty.out' && grep -q 'shy: download' '$T/tty.out'"
check "... then the tool runs" grep -q "shy 1.0.0" "$T/tty.out"
check "... it downloaded once" test "$(gets shy-1.0.0.tgz)" -eq $((n + 1))

# ---- a partial download left by Ctrl-C is removed by the next run -----
# Its writer held a lock on it; one whose writer died is removed at once, one
# still locked (another process downloading) is left alone.
mkdir -p "$T/pd/.cache"
head -c 4096 /dev/urandom >"$T/pd/.cache/.tmp-00112233445566aa"
head -c 4096 /dev/urandom >"$T/pd/.cache/.tmp-00112233445566bb"
flock "$T/pd/.cache/.tmp-00112233445566bb" sh -c "echo held >'$T/pd.held'; exec sleep 30" &
HOLD=$!
wait_for_line "$T/pd.held" held 10
run env ABX_SERVER_STATE_DIR="$T/pdstate" "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/pd" --only hello
expect "a run after an interrupted download installs" 0 "hello 1.0.0: installed"
check "... and removed the partial download its dead writer left" test ! -e "$T/pd/.cache/.tmp-00112233445566aa"
check "... but not one another process still writes" test -e "$T/pd/.cache/.tmp-00112233445566bb"
kill "$HOLD" 2>/dev/null
