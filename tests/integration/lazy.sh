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
unset ABX_TOOLS_DIR ABX_MANIFESTS_DIR ABX_SERVER_INSTALL_MODE ABX_INSTALL_MODE ABX_INSTALL_MIRROR \
	ABX_INSTALL_NPM_REGISTRY ABX_INSTALL_OCI_MIRROR ABX_INSTALL_UNPINNED ABX_SERVER_ENV ABX_TEST_PAUSE \
	SSL_CERT_DIR HTTPS_PROXY https_proxy HTTP_PROXY http_proxy NO_PROXY no_proxy ABX_SERVER_CONFIG \
	ABX_SERVER_TOKEN ABX_SERVER_AGENTS ABX_SERVER_INSTALL_WAIT
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
