# Lazy mode in a sandbox: what an install on first use (the shim's, serve's)
# leaves on the disk, and how a drifted tree is repaired. After a lazy
# install the cache holds the verified downloads and no extracted tree or
# temporary file; a drifted tree is repaired from those downloads with no
# request to the origin, and a shim says which of the two it does before it
# starts. Peers: tests/fixtures/httpd.py and npmreg.py on loopback.
. "$TOP/tests/lib.sh"

W=$T/www
M=$T/man
mkdir -p "$W" "$M" "$T/state" "$T/shims"
chmod 700 "$T/state"
export ABX_SERVER_STATE_DIR=$T/state ABX_SERVER_AUDIT_FILE=$T/audit.jsonl ABX_INSTALL_LIBC=glibc
if [ -e /opt/agent-sandbox/tools ]; then
	skip "lazy mode" "/opt/agent-sandbox/tools exists on this machine"
	exit 0
fi

make_pki
export SSL_CERT_FILE=$T/pki/ca.pem
start_httpd "$W" "$T/req.log"
P=$HTTPD_PORT
gets() { grep -c " GET /f/$1" "$T/req.log" || true; }
# bytes DIR: the bytes of the regular files under DIR (0 when absent)
bytes() { find "$1" -type f -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
# cache_extra DIR: the entries of the cache DIR other than downloads (64 hex
# digits) and npm integrity aliases (sha512-…): trees, notes, temporary files
cache_extra() { ls -A "$1" | grep -Ev '^([0-9a-f]{64}|sha512-.*)$'; }

# A tool of 1.5 MiB: 1 MiB of random bytes and 512 KiB that compress well, so
# the tree is larger than its download
mktool lz 1.0.0 $((1024 * 1024))
head -c $((512 * 1024)) /dev/zero >"$T/src/pkg/share/zeros.bin"
tar czf "$W/lz-1.0.0.tgz" -C "$T/src" pkg
LZ=$(sha "$W/lz-1.0.0.tgz")
mkman lz /f/lz-1.0.0.tgz "$LZ"
TD=$T/tools
ln -s "$BIN" "$T/shims/lz"
LZT=$TD/lz/1.0.0-$PLATFORM

# ---- the shim installs on first use and keeps the download alone --------------
run env ABX_TOOLS_DIR="$TD" ABX_MANIFESTS_DIR="$M" "$T/shims/lz" hi
expect "a missing tool: the shim installs it and runs it" 0 "lz 1.0.0 hi" \
	"agent-sandbox-server: installing lz 1.0.0 into $TD, downloading from https://localhost:$P (missing)"
check "... one line on stderr, said before the work" sh -c "test \$(wc -l <'$T/err') -eq 1"
check "... one download" test "$(gets lz-1.0.0.tgz)" -eq 1
check "... the cache holds the verified download" test "$(sha "$TD/.cache/$LZ")" = "$LZ"
check "... and nothing else: no extracted tree, note or temporary file" sh -c "test -z \"\$(ls -A '$TD/.cache' | grep -v '^$LZ\$')\""
TREE=$(bytes "$LZT") CACHE=$(bytes "$TD/.cache") DL=$(wc -c <"$W/lz-1.0.0.tgz")
check "... the cache is the compressed download: $CACHE bytes for a tree of $TREE" test "$CACHE" -eq "$DL"
echo "# lazy tarball: tree $TREE bytes, cache $CACHE bytes, download $DL bytes"

# ---- a drifted tree is repaired from the kept download, nothing fetched ------------
n=$(wc -l <"$T/req.log")
echo tampered >>"$LZT/share/data.bin"
run "$BIN" verify --tools-dir "$TD" --manifests "$M" lz
expect "verify sees the drift" 3
run env ABX_TOOLS_DIR="$TD" ABX_MANIFESTS_DIR="$M" "$T/shims/lz" again
expect "a changed file: the shim repairs the tree and runs it" 0 "lz 1.0.0 again" \
	"agent-sandbox-server: repairing lz 1.0.0 in $TD from local copies of its pinned downloads (drift: $LZT differs from what was installed)"
check "... said on stderr before the work, on its first line" \
	sh -c "head -1 '$T/err' | grep -q '^agent-sandbox-server: repairing lz 1.0.0 in '"
check "... no request to the origin" test "$(wc -l <"$T/req.log")" -eq "$n"
run "$BIN" verify --tools-dir "$TD" --manifests "$M" lz
expect "... verify passes again" 0
check "... the cache still holds the download alone" sh -c "test -z \"\$(ls -A '$TD/.cache' | grep -v '^$LZ\$')\""
# without a kept download (pruned) a repair downloads, and says so
rm "$TD/.cache/$LZ"
echo tampered >>"$LZT/share/data.bin"
run env ABX_TOOLS_DIR="$TD" ABX_MANIFESTS_DIR="$M" "$T/shims/lz" dl
expect "a drifted tree, no kept download: the shim downloads to repair it, and says so" 0 "lz 1.0.0 dl" \
	"agent-sandbox-server: repairing lz 1.0.0 in $TD, downloading from https://localhost:$P (drift: $LZT differs from what was installed)"
check "... one more download, kept again" sh -c "test $(gets lz-1.0.0.tgz) -eq 2 && test -f '$TD/.cache/$LZ'"
# a deleted file, the origin stopped
kill "$HTTPD_PID"
wait "$HTTPD_PID" 2>/dev/null
rm "$LZT/share/zeros.bin"
run env ABX_TOOLS_DIR="$TD" ABX_MANIFESTS_DIR="$M" "$T/shims/lz" third
expect "a deleted file, the origin stopped: repaired from the kept download" 0 "lz 1.0.0 third" \
	"agent-sandbox-server: repairing lz 1.0.0 in $TD from local copies of its pinned downloads (drift: "
check "... the file is back" test "$(bytes "$LZT/share/zeros.bin")" -eq $((512 * 1024))
# the kept download is hashed again before a repair uses it: a changed one
# is refused, and with the origin stopped nothing is installed from it
echo tampered >>"$LZT/share/data.bin"
printf 'x' >>"$TD/.cache/$LZ"
run env ABX_TOOLS_DIR="$TD" ABX_MANIFESTS_DIR="$M" "$T/shims/lz" fourth
expect "a changed kept download is not used for a repair" 1 "" "lz"
check "... it is said on stderr and removed" sh -c "grep -q 'damaged' '$T/err' && test ! -e '$TD/.cache/$LZ'"
check "... and the drifted tree is not run" sh -c "! grep -q 'lz 1.0.0 fourth' '$T/out'"
start_httpd "$W" "$T/req.log"
P=$HTTPD_PORT
mkman lz /f/lz-1.0.0.tgz "$LZ"

# ---- serve's install on first use: an npm tool keeps its downloads alone ----------
npm_fixture
npmpy <<'PY'
import os
import npmpack as P
T, REG = os.environ["T"], os.environ["REG"]
root, m = T + "/reg", T + "/nm"
# a shell entry (no node needed) and three packages of 256 KiB random and
# 256 KiB of text each: npm tarballs compress, the tree is larger
entries = {"node_modules/@t/app": P.app(root, REG, b"#!/bin/sh\necho app 1.0.0 \"$@\"\n")}
for i in range(3):
    P.pack(root, "part%d" % i, "1.0.0", {"blob.bin": os.urandom(256 << 10), "doc.txt": b"lazy mode\n" * ((256 << 10) // 10)})
    entries["node_modules/part%d" % i] = P.entry(root, REG, "part%d" % i, "1.0.0")
P.write_app(m, "napp", entries)
# an agent (serve's agents list): a run block
import json
d = json.load(open(m + "/napp.json"))
d["run"] = ["{bin}", "{prompt}"]
json.dump(d, open(m + "/napp.json", "w"))
PY
NDL=$(cat "$T"/reg/@t/app/-/app-1.0.0.tgz "$T"/reg/part*/-/*.tgz | wc -c)
ST=$T/tools-serve
NT=$ST/napp/1.0.0-$PLATFORM
# runtime NAME: GET /v1/agents/runtimes/NAME into $T/rt
runtime() { curl -s -o "$T/rt" -H "X-Access-Token: tok" "http://127.0.0.1:$PORT/v1/agents/runtimes/$1"; }
install_ready() {
	curl -s -o "$T/inst" -H "X-Access-Token: tok" -H 'Content-Type: application/json' -X POST --data '{}' \
		"http://127.0.0.1:$PORT/v1/agents/runtimes/$1/install"
	wait_until 60 "runtime $1 && grep -q '\"state\":\"ready\"' '$T/rt'"
}
export ABX_MANIFESTS_DIR=$T/nm ABX_SERVER_TOKEN=tok ABX_SERVER_AGENTS=napp ABX_SERVER_INSTALL_MODE=lazy ABX_SERVER_INSTALL_WAIT=20
if start_serve --tools-dir "$ST" --state-dir "$T/state/serve"; then
	check "serve: an npm tool installs on first use" install_ready napp
	check "... its packages downloaded once each" test "$(grep -c ' GET /.*\.tgz' "$T/reg.log")" -eq 4
	check "... the cache holds the downloads and their integrity names alone: no tree, note or temporary file" \
		sh -c "test -z \"\$(ls -A '$ST/.cache' | grep -Ev '^([0-9a-f]{64}|sha512-.*)\$')\""
	check "... each download verified (4 of them)" test "$(ls "$ST/.cache" | grep -Ec '^[0-9a-f]{64}$')" -eq 4
	TREE=$(bytes "$NT") CACHE=$(bytes "$ST/.cache")
	check "... the cache is at most the compressed downloads plus 4 KiB of names: $CACHE bytes, downloads $NDL, tree $TREE" \
		test "$CACHE" -le $((NDL + 4096))
	echo "# lazy npm (serve): tree $TREE bytes, cache $CACHE bytes, downloads $NDL bytes"
	# drift, the registry stopped: repaired from the kept downloads
	n=$(wc -l <"$T/reg.log")
	kill "$REG_PID"
	wait "$REG_PID" 2>/dev/null
	echo tampered >>"$NT/node_modules/part1/doc.txt"
	rm "$NT/node_modules/part2/blob.bin"
	run "$BIN" verify --tools-dir "$ST" napp
	expect "serve: verify sees the drift" 3
	check "serve: a drifted tree is repaired with the registry stopped" install_ready napp
	check "... no request reached the registry" test "$(wc -l <"$T/reg.log")" -eq "$n"
	run "$BIN" verify --tools-dir "$ST" napp
	expect "... verify passes again" 0
	check "... and the cache holds no tree still" test ! -e "$ST/.cache/trees"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "serve starts" "$(head -c 300 "$T/serve.err")"
fi
unset ABX_SERVER_AGENTS ABX_SERVER_TOKEN

# ---- prepare keeps its documented behaviour -----------------------------------------
# an image build keeps no cache; --keep-cache keeps the downloads and the trees
start_httpd "$W" "$T/req2.log"
P=$HTTPD_PORT
mkman lz /f/lz-1.0.0.tgz "$LZ"
run "$BIN" prepare --manifests "$M" --only lz --tools-dir "$T/p1"
expect "prepare installs" 0 "lz 1.0.0: installed"
check "... and leaves no cache" test -z "$(ls -A "$T/p1/.cache" 2>/dev/null)"
run "$BIN" prepare --keep-cache --manifests "$M" --only lz --tools-dir "$T/p2"
expect "prepare --keep-cache installs" 0 "lz 1.0.0: installed"
check "... and keeps the download and the extracted tree" sh -c "test -f '$T/p2/.cache/$LZ' && test -n \"\$(ls '$T/p2/.cache/trees')\""
