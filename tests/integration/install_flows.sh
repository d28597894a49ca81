# Operator flows of the install engine (issue 12 §1-8): the explicit tools
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
unset ABX_TOOLS_DIR ABX_MANIFESTS_DIR ABX_SERVER_INSTALL_MODE ABX_INSTALL_MODE ABX_INSTALL_MIRROR \
	ABX_INSTALL_NPM_REGISTRY ABX_INSTALL_UNPINNED ABX_SERVER_ENV ABX_TEST_PAUSE SSL_CERT_DIR HTTPS_PROXY \
	https_proxy HTTP_PROXY http_proxy NO_PROXY no_proxy
# /opt/agent-sandbox/tools belongs to the machine: these cases need it absent
if [ -e /opt/agent-sandbox/tools ]; then
	skip "install flows" "/opt/agent-sandbox/tools exists on this machine"
	exit 0
fi

sh "$FIXTURES/mkcerts.sh" "$T/pki" >/dev/null 2>&1 || { not_ok "test PKI" "mkcerts.sh failed"; exit 1; }
export SSL_CERT_FILE=$T/pki/ca.pem

mktool() { # NAME VERSION [KIB of data] -> $W/NAME-VERSION.tgz
	rm -rf "$T/src" && mkdir -p "$T/src/pkg/bin" "$T/src/pkg/share"
	printf '#!/bin/sh\necho "%s %s"\n' "$1" "$2" >"$T/src/pkg/bin/$1"
	chmod 755 "$T/src/pkg/bin/$1"
	head -c $((${3:-20} * 1024)) /dev/urandom >"$T/src/pkg/share/data.bin"
	tar czf "$W/$1-$2.tgz" -C "$T/src" pkg
}
sha() { sha256sum "$1" | cut -d' ' -f1; }

: >"$T/req.log"
bg python3 "$FIXTURES/httpd.py" --root "$W" --log "$T/req.log" --cert "$T/pki/good.pem" \
	--key "$T/pki/good.key" >"$T/port" 2>"$T/httpd.err"
wait_for_line "$T/port" '^[0-9]' 10 || { not_ok "start https fixture" "$(cat "$T/httpd.err")"; exit 1; }
P=$(head -1 "$T/port")
gets() { grep -c " GET /f/$1" "$T/req.log" || true; }

# mkman NAME URLPATH SHA [EXTRA-JSON-MEMBERS]: a tarball manifest in $M
mkman() {
	cat >"$M/$1.json" <<EOM
{"schema":1,"name":"$1","binary":"$1","version":"1.0.0",
 "source":{"type":"tarball","bin":"bin/$1","strip_components":1,
  "platforms":{"linux-x64":{"url":"https://localhost:$P$2","sha256":"$3"},"linux-arm64":{"url":"https://localhost:$P$2","sha256":"$3"}}},
 "hosts":["localhost"],"verify":{"argv":["{bin}"],"expect":"$1 1.0.0"},
 "platforms":["linux-x64","linux-arm64"],"size_hint_mb":1${4:+,$4}}
EOM
}

mktool hello 1.0.0
H=$(sha "$W/hello-1.0.0.tgz")
mkman hello /f/hello-1.0.0.tgz "$H"

# ---- §1 an explicit tools directory is created and used, or refused -------------
# the chain's per-user directory ($ABX_SERVER_STATE_DIR/tools) exists and is
# writable; ABX_TOOLS_DIR names one that does not exist yet
run env ABX_TOOLS_DIR="$T/newdir" "$BIN" prepare --manifests "$M" --only hello
expect "§1 ABX_TOOLS_DIR that does not exist: prepare installs" 0 "hello 1.0.0: installed"
check "§1 ... into the explicit directory, created" test -x "$T/newdir/hello/1.0.0-linux-x64/bin/hello"
check "§1 ... not into a later directory of the chain" test ! -e "$T/state/tools/hello"
: >"$T/afile"
run env ABX_TOOLS_DIR="$T/afile/sub" "$BIN" prepare --manifests "$M" --only hello --force
expect "§1 an explicit directory that cannot be created is refused" 3 "" "install.read_only"
check "§1 ... naming it, where it came from, and why" grep -q "tools directory $T/afile/sub (env ABX_TOOLS_DIR): cannot create" "$T/err"
check "§1 ... and nothing went to the per-user directory" test ! -e "$T/state/tools/hello"
run "$BIN" prepare --manifests "$M" --only hello
expect "§1 without ABX_TOOLS_DIR the per-user directory is used" 0 "hello 1.0.0: installed"
run "$BIN" prepare --manifests "$M" --only hello --tools-dir "$T/c1"
expect "§1 ready in another directory of the chain: prepare says where" 0 \
	"hello 1.0.0: ready in $T/state/tools, not in $T/c1 (flag --tools-dir)"
run "$BIN" prepare --json --manifests "$M" --only hello --tools-dir "$T/c1"
expect "§1 --json names the tools directory of the ready tree" 0 "\"tools_dir\":\"$T/state/tools\""

# ---- §3 backoff per tools directory; a failed install leaves nothing ---------------
mktool bad 1.0.0
mkman bad /f/bad-1.0.0.tgz "$(printf '%064d' 1)"
run "$BIN" prepare --manifests "$M" --only bad
expect "§3 a failing install (checksum mismatch)" 3 "" "install.checksum_mismatch"
check "§3 ... leaves no empty <tools>/bad/" test ! -e "$T/state/tools/bad"
check "§3 ... its backoff is recorded" test -f "$T/state/tools/.locks/bad.backoff"
n=$(gets bad-1.0.0.tgz)
run "$BIN" prepare --manifests "$M" --only bad --tools-dir "$T/b2"
expect "§3 another tools directory is not held back by that backoff" 3 "" "install.checksum_mismatch"
check "§3 ... it downloaded again" test "$(gets bad-1.0.0.tgz)" -eq $((n + 1))
check "§3 ... and left no empty $T/b2/bad/" test ! -e "$T/b2/bad"
run "$BIN" prepare --manifests "$M" --only bad
expect "§3 the first directory is still in backoff" 3 "" "install.backoff"

# ---- §8 a fetch failure is install.failed with details.phase and the client's code --
mkman gone /f/nothing-here.tgz "$(printf %064d 2)"
run "$BIN" prepare --json --manifests "$M" --only gone --tools-dir "$T/f8"
expect "§8 a 404 while fetching: install.failed" 3 '"code":"install.failed"'
check "§8 ... details.phase fetch and the client's code in details.code" \
	grep -q '"details":{"phase":"fetch","code":"http.status","url":"https://localhost:'"$P"'/f/nothing-here.tgz"}' "$T/out"
run "$BIN" prepare --manifests "$M" --only gone --tools-dir "$T/f8" --force
expect "§8 ... the message keeps the client's code" 3 "" "install.failed: gone 1.0.0: fetching https://localhost:$P/f/nothing-here.tgz: http.status:"
