# fetch URL --sha256 HEX: the pinned single download, against independent
# peers (Python's http.server + ssl, a Python CONNECT proxy) and a test PKI
# made with openssl at test time.
. "$TOP/tests/lib.sh"

W=$T/www
mkdir -p "$W" "$T/dl"
head -c 300000 /dev/urandom >"$W/a.bin"
SHA=$(sha256sum "$W/a.bin" | cut -d' ' -f1)
SHA512=$(sha512sum "$W/a.bin" | cut -d' ' -f1)
SRI=sha512-$(openssl dgst -sha512 -binary "$W/a.bin" | base64 -w0)
BAD=$(printf '%064d' 0)
cp "$FIXTURES/httpd.py" "$T/" # nothing else needed from the tree

# start NAME [httpd args]: a server logging to $T/NAME.log; port in $P
start() {
	_n=$1; shift
	: >"$T/$_n.log"
	bg python3 "$FIXTURES/httpd.py" --root "$W" --log "$T/$_n.log" "$@" >"$T/$_n.port" 2>"$T/$_n.err"
	wait_for_line "$T/$_n.port" '^[0-9]' 10 || { not_ok "start $_n" "$(cat "$T/$_n.err")"; exit 1; }
	P=$(head -1 "$T/$_n.port")
}
nreq() { grep -c ' \(GET\|HEAD\) ' "$1" || true; }
nothing_left() { [ -z "$(ls -A "$T/dl")" ]; }

# ---- usage ------------------------------------------------------------------
run "$BIN" fetch --help
expect "--help exits 0" 0 "usage: agent-sandbox-server fetch URL"
run "$BIN" fetch --bogus
expect "unknown option exits 2" 2 "" "usage: agent-sandbox-server fetch"
run "$BIN" fetch http://127.0.0.1:9/x
expect "no digest is refused" 2 "" "a digest is required"
# seconds are plain decimals: no hex, no infinity, no blanks around them
for _v in 0x10 inf " 5" 1.5s 8e5; do
	run "$BIN" fetch http://127.0.0.1:9/x --sha256 "$SHA" --read-timeout "$_v"
	expect "--read-timeout '$_v' is refused" 2 "" "bad value '$_v' for --read-timeout"
done
run "$BIN" fetch http://127.0.0.1:9/x --sha256 abc
expect "short hex is refused" 2 "" "sha256 digest must be 64 hex digits"
run "$BIN" fetch http://127.0.0.1:9/x --sha256 "$SHA" --sha512 "$SHA512"
expect "two digests are refused" 2 "" "exactly one"
run env ABX_INSTALL_UNPINNED=1 ABX_SERVER_ENV=production "$BIN" fetch https://localhost:9/x
expect "unpinned refused in production" 2 "" "production"
echo '{"environment": "production"}' >"$T/prod.json"
run env ABX_INSTALL_UNPINNED=1 ABX_SERVER_CONFIG="$T/prod.json" "$BIN" fetch https://localhost:9/x
expect "unpinned refused in production set in the configuration file" 2 "" "production"
run env ABX_INSTALL_UNPINNED=1 "$BIN" fetch http://localhost:9/x
expect "unpinned needs https" 2 "" "https"
for u in "ftp://localhost/x" "http://user:pw@localhost/x" "http://localhost/a b" "$(printf 'http://localhost/a\r\nX: y')" \
	"http://localhost:99999/x" "http://[::1/x" "file:///etc/passwd"; do
	run "$BIN" fetch "$u" --sha256 "$SHA"
	expect "URL refused: $(printf '%s' "$u" | tr '\r\n' '  ')" 2 "" "http.url"
done

# ---- plain HTTP ----------------------------------------------------------------
start plain
HP=$P
run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "good download" 0 "" "verified"
check "downloaded bytes are identical" cmp -s "$W/a.bin" "$T/dl/a.bin"
check "only the file is left" test "$(ls -A "$T/dl")" = a.bin
rm -f "$T/dl/a.bin"
# -o naming a FIFO, a device or a symlink to one: written in place through
# open() after verification, never replaced (the verified file replaced it by
# rename: as root, -o /dev/stdout replaced the symlink, -o /dev/null the device)
mkfifo "$T/dl/fifo"
bg sh -c "exec timeout 10 cat '$T/dl/fifo' >'$T/fifo.out'"
run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" -o "$T/dl/fifo" -q
wait "$BGPID" 2>/dev/null
expect "-o naming a FIFO: written in place" 0
check "... its reader got the body" cmp -s "$W/a.bin" "$T/fifo.out"
check "... the FIFO is still a FIFO, nothing beside it" sh -c "test -p '$T/dl/fifo' && test \"\$(ls -A '$T/dl')\" = fifo"
: >"$T/fifo.out"
bg sh -c "exec timeout 2 cat '$T/dl/fifo' >'$T/fifo.out'"
run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha256 "$BAD" -o "$T/dl/fifo"
wait "$BGPID" 2>/dev/null
expect "-o naming a FIFO, digest mismatch: fails" 1 "" "install.checksum_mismatch"
check "... its reader got nothing (the FIFO is opened only after verification)" test ! -s "$T/fifo.out"
rm -f "$T/dl/fifo"
ln -s /dev/null "$T/dl/null"
run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" -o "$T/dl/null" -q
expect "-o naming a symlink to a character device" 0
check "... the symlink stays, to the device, nothing beside it" sh -c "test -L '$T/dl/null' && test -c '$T/dl/null' && test \"\$(ls -A '$T/dl')\" = null"
rm -f "$T/dl/null"
# /dev/stdout is a symlink to /proc/self/fd/1: one of our own stands for it,
# so a binary that replaces the link cannot harm the machine's
ln -s /proc/self/fd/1 "$T/dl/stdout"
run sh -c "'$BIN' fetch 'http://127.0.0.1:$HP/f/a.bin' --sha256 '$SHA' -o '$T/dl/stdout' -q | cat >'$T/piped'"
check "-o a symlink to stdout, a pipe: the reader got the body" cmp -s "$W/a.bin" "$T/piped"
linkok=no
test -L "$T/dl/stdout" && test "$(ls -A "$T/dl")" = stdout && linkok=yes
check "... the symlink stays, nothing beside it" test $linkok = yes
rm -f "$T/dl/stdout"
if [ $linkok = yes ]; then
	run sh -c "'$BIN' fetch 'http://127.0.0.1:$HP/f/a.bin' --sha256 '$SHA' -o /dev/stdout -q | cat >'$T/piped'"
	check "-o /dev/stdout, a pipe: the reader got the body" cmp -s "$W/a.bin" "$T/piped"
	run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" -o /dev/stdout -q
	expect "-o /dev/stdout, a file" 0
	check "... the file has the body" cmp -s "$W/a.bin" "$T/out"
	check "... /dev/stdout is still a symlink" test -L /dev/stdout
else
	skip "-o /dev/stdout" "the binary replaced a symlink to stdout"
fi
# a symlink to a regular file: the file it names is replaced, the link stays
echo old >"$T/real.bin"
ln -s "$T/real.bin" "$T/dl/link"
run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" -o "$T/dl/link" -q
expect "-o naming a symlink to a regular file" 0
check "... the file it names has the body, the link stays" sh -c "test -L '$T/dl/link' && cmp -s '$W/a.bin' '$T/real.bin' && test \"\$(ls -A '$T/dl')\" = link"
rm -f "$T/dl/link" "$T/real.bin"
run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" -o "$T/dl"
expect "-o naming a directory is refused" 2 "" "usage: -o $T/dl is a directory"
ln -s "$T/nowhere" "$T/dl/dangling"
run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" -o "$T/dl/dangling"
expect "-o naming a symlink to nothing is refused" 2 "" "usage: -o $T/dl/dangling is a symlink to nothing that exists"
check "... the symlink stays, nothing created" sh -c "test -L '$T/dl/dangling' && test ! -e '$T/nowhere' && test \"\$(ls -A '$T/dl')\" = dangling"
rm -f "$T/dl/dangling"
# -o - is stdout (as for curl and wget), not a file named -
run sh -c "cd '$T/dl' && exec '$BIN' fetch 'http://127.0.0.1:$HP/f/a.bin' --sha256 '$SHA' -o - -q"
expect "-o - writes to stdout" 0
check "... the body" cmp -s "$W/a.bin" "$T/out"
check "... and no file named -" nothing_left
run sh -c "cd '$T/dl' && exec '$BIN' fetch 'http://127.0.0.1:$HP/f/a.bin' --sha256 '$BAD' -o -"
expect "-o -, digest mismatch: fails" 1 "" "install.checksum_mismatch"
check "... nothing on stdout, no file" sh -c "test ! -s '$T/out' && test -z \"\$(ls -A '$T/dl')\""

run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" -q
expect "stdout after verification" 0
check "stdout is the body" cmp -s "$W/a.bin" "$T/out"
check "-q prints nothing on stderr" test ! -s "$T/err"

run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha512 "$SHA512" -o "$T/dl/a.bin" -q
expect "--sha512" 0
run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --integrity "$SRI" -o "$T/dl/a.bin" -q
expect "--integrity sha512-..." 0
rm -f "$T/dl/a.bin"

run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha256 "$BAD" -o "$T/dl/a.bin"
expect "mismatch fails" 1 "" "install.checksum_mismatch"
check "mismatch names expected and actual" grep -q "expected sha256 $BAD, got $SHA" "$T/err"
check "mismatch names bytes received" grep -q "bytes received: 300000" "$T/err"
# fetch URL has no manifest; its fix names --sha256 too
check "a fetch URL mismatch's fix names --sha256" grep -q "fix: .*the pinned digest (the manifest's, or --sha256)" "$T/err"
check "mismatch leaves no file" nothing_left
run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha256 "$BAD"
expect "mismatch to stdout fails" 1 "" "install.checksum_mismatch"
check "mismatch writes nothing to stdout" test ! -s "$T/out"
run "$BIN" fetch "http://127.0.0.1:$HP/html" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "HTML page instead of the artifact" 1 "" "looks like an error page: <!DOCTYPE html>"
check "HTML mismatch leaves no file" nothing_left

run "$BIN" fetch "http://127.0.0.1:$HP/chunked/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin" -q
expect "chunked body" 0
check "chunked bytes identical" cmp -s "$W/a.bin" "$T/dl/a.bin"
rm -f "$T/dl/a.bin"

: >"$T/plain.log"
run "$BIN" fetch "http://127.0.0.1:$HP/redir/3/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin" -q
expect "3 redirects (relative Locations)" 0
check "4 requests for 3 redirects" test "$(nreq "$T/plain.log")" -eq 4
check "one keep-alive connection for the chain" test "$(cut -d' ' -f1 "$T/plain.log" | sort -u | wc -l)" -eq 1
rm -f "$T/dl/a.bin"
run "$BIN" fetch "http://127.0.0.1:$HP/redir/10/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin" -q
expect "10 redirects are followed" 0
rm -f "$T/dl/a.bin"
run "$BIN" fetch "http://127.0.0.1:$HP/redir/11/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "the 11th redirect is refused" 1 "" "http.redirect"
check "11 redirects: no file" nothing_left

: >"$T/plain.log"
run "$BIN" fetch "http://localhost:$HP/to?http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" --allow-host localhost \
	-o "$T/dl/a.bin"
expect "redirect to a host the rule refuses" 1 "" "http.redirect: host 127.0.0.1 refused: not in --allow-host"
check "refused host got no request" test "$(nreq "$T/plain.log")" -eq 1
check "refused redirect: no file" nothing_left
# Without --allow-host a redirect may lead only to the URL's own host (it led
# anywhere); host means the name, any port (as --allow-host HOST)
: >"$T/plain.log"
run "$BIN" fetch "http://localhost:$HP/to?http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "no --allow-host: a redirect to another host is refused" 1 "" \
	"http.redirect: host 127.0.0.1 refused: not in --allow-host"
check "... with a fix naming --allow-host 127.0.0.1" grep -q "^  fix: if that host is trusted, add --allow-host 127.0.0.1 " "$T/err"
check "... the other host got no request" test "$(nreq "$T/plain.log")" -eq 1
check "... no file" nothing_left
run "$BIN" fetch "http://localhost:$HP/to?http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" --allow-host localhost \
	--allow-host 127.0.0.1 -o "$T/dl/a.bin" -q
expect "redirect to an allowed host" 0
rm -f "$T/dl/a.bin"

: >"$T/plain.log"
run "$BIN" fetch "http://localhost:$HP/to?http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" -q \
	--allow-host 127.0.0.1 -H "Authorization: Bearer sekrit" -o "$T/dl/a.bin"
expect "cross-host redirect with a token" 0
check "token sent to its own host" grep -q "GET /to.* auth=Bearer_sekrit" "$T/plain.log"
check "token not sent to the other host" grep -q "GET /f/a.bin auth=- " "$T/plain.log"
rm -f "$T/dl/a.bin"
: >"$T/plain.log"
run "$BIN" fetch "http://127.0.0.1:$HP/redir/1/a.bin" --sha256 "$SHA" -q -H "Authorization: Bearer sekrit" \
	-o "$T/dl/a.bin"
expect "same-host redirect with a token" 0
check "token kept on a same-host redirect" test "$(grep -c 'auth=Bearer_sekrit' "$T/plain.log")" -eq 2
rm -f "$T/dl/a.bin"
run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" -H "Host: evil" -o "$T/dl/a.bin"
expect "a Host header from the caller is refused" 1 "" "http.url"

run "$BIN" fetch "http://127.0.0.1:$HP/short/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "short Content-Length body" 1 "" "http.truncated"
check "truncated: no file" nothing_left
run "$BIN" fetch "http://127.0.0.1:$HP/nolast/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "chunked body without its last chunk" 1 "" "http.truncated"
check "no last chunk: no file" nothing_left
run "$BIN" fetch "http://127.0.0.1:$HP/endless" --sha256 "$SHA" --max-size 1000000 -o "$T/dl/a.bin"
expect "endless body hits the size cap" 1 "" "http.too_large"
check "endless: no file" nothing_left
run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" --max-size 1000 -o "$T/dl/a.bin"
expect "announced length above the cap" 1 "" "http.too_large"
run "$BIN" fetch "http://127.0.0.1:$HP/trickle" --sha256 "$SHA" --min-rate 1000 --rate-window 0.5 -o "$T/dl/a.bin"
expect "trickling server hits the rate guard" 1 "" "http.too_slow"
check "too slow: no file" nothing_left
run "$BIN" fetch "http://127.0.0.1:$HP/trickle" --sha256 "$SHA" --min-rate 0 --max-time 0.5 -o "$T/dl/a.bin"
expect "whole-transfer deadline" 1 "" "http.timeout"
run "$BIN" fetch "http://127.0.0.1:$HP/status/404" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "404 is an error" 1 "" "http.status"
check "404: no file" nothing_left
# An error answer that ends by close (Connection: close, no Content-Length):
# the reason was read from the freed connection (SIGSEGV, exit 139)
for st in 404 503; do
	run "$BIN" fetch "http://127.0.0.1:$HP/closing/$st/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin"
	expect "$st with Connection: close and no length: http.status, no crash" 1 "" \
		"http.status: http://127.0.0.1:$HP/closing/$st/a.bin: HTTP $st "
	check "$st closing: no file" nothing_left
done

# A listener that never answers: the read timeout.
bg python3 -c 'import socket,sys,time
s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(8); print(s.getsockname()[1], flush=True); time.sleep(60)' \
	>"$T/silent.port"
wait_for_line "$T/silent.port" '^[0-9]' 10
run "$BIN" fetch "http://127.0.0.1:$(cat "$T/silent.port")/x" --sha256 "$SHA" --read-timeout 0.3 -o "$T/dl/a.bin"
expect "silent server hits the read timeout" 1 "" "http.timeout"
# A port nobody listens on (bound, not listening, so no one else takes it).
bg python3 -c 'import socket,time
s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1], flush=True); time.sleep(60)' >"$T/closed.port"
wait_for_line "$T/closed.port" '^[0-9]' 10
run "$BIN" fetch "http://127.0.0.1:$(cat "$T/closed.port")/x" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "connection refused" 1 "" "http.connect"
run "$BIN" fetch "http://no-such-host.invalid/x" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "unresolvable host" 1 "" "http.resolve"

# ---- TLS ---------------------------------------------------------------------
make_pki
export SSL_CERT_FILE="$PKI/ca.pem"
unset SSL_CERT_DIR

start good --cert "$PKI/good.pem" --key "$PKI/good.key"
GP=$P
run "$BIN" fetch "https://localhost:$GP/f/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "https: good chain" 0 "" "verified"
check "https bytes identical" cmp -s "$W/a.bin" "$T/dl/a.bin"
rm -f "$T/dl/a.bin"
: >"$T/good.log"
run "$BIN" fetch "https://localhost:$GP/redir/2/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin" -q
expect "https: redirects" 0
check "https: one keep-alive connection for the chain" \
	test "$(cut -d' ' -f1 "$T/good.log" | sort -u | wc -l)" -eq 1
rm -f "$T/dl/a.bin"
run "$BIN" fetch "https://localhost:$GP/chunked/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin" -q
expect "https: chunked" 0
rm -f "$T/dl/a.bin"
run "$BIN" fetch "https://localhost:$GP/to?http://localhost:$HP/f/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "https -> http redirect refused" 1 "" "from https to http refused"
run "$BIN" fetch "http://localhost:$HP/to?https://localhost:$GP/f/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin" -q
expect "no --allow-host: a redirect to the same host on another port is followed" 0
rm -f "$T/dl/a.bin"
run "$BIN" fetch "https://localhost:$GP/short/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "https: truncated body" 1 "" "http.truncated"
run "$BIN" fetch "https://localhost:$GP/nolast/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "https: chunked body without its last chunk" 1 "" "http.truncated"
check "https: no last chunk: no file" nothing_left
check "https truncated: no file" nothing_left
for st in 404 503; do
	run "$BIN" fetch "https://localhost:$GP/closing/$st/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin"
	expect "https: $st with Connection: close and no length: http.status, no crash" 1 "" \
		"http.status: https://localhost:$GP/closing/$st/a.bin: HTTP $st "
done
# fetch --only: the cache-filling form meets the same answer
mkdir -p "$T/man" "$T/fcache"
for st in 404 503; do
	cat >"$T/man/gone$st.json" <<EOF
{"schema":1,"name":"gone$st","binary":"gone$st","version":"1.0.0",
 "source":{"type":"tarball","bin":"bin/gone$st","strip_components":1,
  "platforms":{"linux-x64":{"url":"https://localhost:$GP/closing/$st/gone.tgz","sha256":"$SHA"},
               "linux-arm64":{"url":"https://localhost:$GP/closing/$st/gone.tgz","sha256":"$SHA"}}},
 "hosts":["localhost"],"verify":{"argv":["{bin}"],"expect":"gone 1.0.0"},
 "platforms":["linux-x64","linux-arm64"],"size_hint_mb":1}
EOF
	run "$BIN" fetch --only "gone$st" --manifests "$T/man" --cache "$T/fcache"
	expect "fetch --only: $st with Connection: close and no length: exit 1, http.status, no crash" 1 "" \
		"HTTP $st "
	check "fetch --only $st: install.failed naming http.status" grep -q "install.failed: gone$st 1.0.0: fetching .*: http.status: " "$T/err"
done
run env ABX_INSTALL_UNPINNED=1 "$BIN" fetch "https://localhost:$GP/f/a.bin" -o "$T/dl/a.bin"
expect "unpinned https with a loud warning" 0 "" "UNPINNED"
check "unpinned prints the sha256 to pin" grep -q "$SHA" "$T/err"
rm -f "$T/dl/a.bin"

run env SSL_CERT_FILE="$T/none.pem" "$BIN" fetch "https://localhost:$GP/f/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "no trust anchors" 1 "" "tls.no_trust_anchors"
check "no trust anchors names the path" grep -q "$T/none.pem" "$T/err"
mkdir "$T/cadir"
cp "$PKI/ca.pem" "$T/cadir/"
ln -s ca.pem "$T/cadir/0a1b2c3d.0"
run env -u SSL_CERT_FILE SSL_CERT_DIR="$T/cadir" "$BIN" fetch "https://localhost:$GP/f/a.bin" --sha256 "$SHA" -q \
	-o "$T/dl/a.bin"
expect "SSL_CERT_DIR" 0
rm -f "$T/dl/a.bin"

bad_cert() { # CASE CODE BR_NAME [httpd args]
	_c=$1 _code=$2 _br=$3
	shift 3
	start "$_c" "$@"
	run "$BIN" fetch "https://localhost:$P/f/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin"
	expect "tls $_c: $_code" 1 "" "$_code: $_br"
	check "tls $_c: no HTTP request sent" test "$(nreq "$T/$_c.log")" -eq 0
	check "tls $_c: no file" nothing_left
}
bad_cert expired tls.expired BR_ERR_X509_EXPIRED --cert "$PKI/expired.pem" --key "$PKI/expired.key"
bad_cert notyet tls.not_yet_valid BR_ERR_X509_EXPIRED --cert "$PKI/notyet.pem" --key "$PKI/notyet.key"
bad_cert wronghost tls.bad_host BR_ERR_X509_BAD_SERVER_NAME --cert "$PKI/wronghost.pem" --key "$PKI/wronghost.key"
bad_cert unknownca tls.unknown_ca BR_ERR_X509_NOT_TRUSTED --cert "$PKI/unknownca.pem" --key "$PKI/unknownca.key"
bad_cert selfsigned tls.unknown_ca BR_ERR_X509_NOT_TRUSTED --cert "$PKI/selfsigned.pem" --key "$PKI/selfsigned.key"
bad_cert noint tls.unknown_ca BR_ERR_X509_NOT_TRUSTED --cert "$PKI/noint.pem" --key "$PKI/noint.key"
bad_cert notca tls.bad_chain BR_ERR_X509_NOT_CA --cert "$PKI/notca.pem" --key "$PKI/notca.key"
bad_cert rsa1024 tls.weak_key BR_ERR_X509_WEAK_PUBLIC_KEY --cert "$PKI/rsa1024.pem" --key "$PKI/rsa1024.key"
bad_cert sha1 tls.weak_key BR_ERR_X509_UNSUPPORTED --cert "$PKI/sha1.pem" --key "$PKI/sha1.key"
bad_cert tls10 tls.protocol BR_ERR_RECV_FATAL_ALERT --cert "$PKI/good.pem" --key "$PKI/good.key" --tls10
bad_cert cbc tls.protocol BR_ERR_RECV_FATAL_ALERT --cert "$PKI/good.pem" --key "$PKI/good.key" --cbc
# Offered: TLS 1.2 ECDHE with AES-GCM or ChaCha20-Poly1305 (docs/installing.md).
# A server with only static RSA key exchange, or only AES-CCM, finds no
# suite in common and says so with an alert.
bad_cert rsakex tls.protocol BR_ERR_RECV_FATAL_ALERT --cert "$PKI/good.pem" --key "$PKI/good.key" \
	--ciphers AES128-GCM-SHA256
bad_cert ccm tls.protocol BR_ERR_RECV_FATAL_ALERT --cert "$PKI/ecdsa.pem" --key "$PKI/ecdsa.key" \
	--ciphers ECDHE-ECDSA-AES128-CCM
check "tls ccm: the message names what the server must offer" \
	grep -q "the server offers no TLS 1.2 ECDHE/AEAD suite" "$T/err"
for _s in ECDHE-RSA-AES128-GCM-SHA256 ECDHE-RSA-AES256-GCM-SHA384 ECDHE-RSA-CHACHA20-POLY1305 \
	ECDHE-ECDSA-AES128-GCM-SHA256 ECDHE-ECDSA-AES256-GCM-SHA384 ECDHE-ECDSA-CHACHA20-POLY1305; do
	case $_s in *ECDSA*) _c=ecdsa ;; *) _c=good ;; esac
	start "suite-$_s" --cert "$PKI/$_c.pem" --key "$PKI/$_c.key" --ciphers "$_s"
	run "$BIN" fetch "https://localhost:$P/f/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin" -q
	expect "tls: a server offering only $_s" 0
	rm -f "$T/dl/a.bin"
done
# The same host name over an IP literal: BearSSL matches DNS names only.
run "$BIN" fetch "https://127.0.0.1:$GP/f/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin"
expect "https to an IP literal the certificate does not name" 1 "" "tls.bad_host"

# ---- proxies -------------------------------------------------------------------
: >"$T/proxy.log"
bg python3 "$FIXTURES/proxy.py" --log "$T/proxy.log" >"$T/proxy.port" 2>"$T/proxy.err"
wait_for_line "$T/proxy.port" '^[0-9]' 10
PP=$(head -1 "$T/proxy.port")
: >"$T/good.log"
run env HTTPS_PROXY="http://u%3Ax:p@127.0.0.1:$PP" NO_PROXY= "$BIN" fetch "https://localhost:$GP/f/a.bin" \
	--sha256 "$SHA" -o "$T/dl/a.bin" -q
expect "https through a CONNECT proxy" 0
check "proxy saw CONNECT with its credentials" grep -q "^CONNECT localhost:$GP proxyauth=Basic_$(printf 'u:x:p' | base64)\$" "$T/proxy.log"
check "origin never saw the proxy credentials" grep -q "proxyauth=- " "$T/good.log"
rm -f "$T/dl/a.bin"
: >"$T/proxy.log"
run env HTTPS_PROXY="http://127.0.0.1:$PP" NO_PROXY="example.com, localhost" "$BIN" fetch \
	"https://localhost:$GP/f/a.bin" --sha256 "$SHA" -o "$T/dl/a.bin" -q
expect "NO_PROXY bypasses the proxy" 0
check "proxy saw nothing under NO_PROXY" test ! -s "$T/proxy.log"
rm -f "$T/dl/a.bin"
: >"$T/plain.log"
run env HTTP_PROXY="http://pu:pp@127.0.0.1:$PP" "$BIN" fetch "http://localhost:$HP/f/a.bin" --sha256 "$SHA" \
	-o "$T/dl/a.bin" -q
expect "plain http through the proxy" 0
check "proxy saw the absolute-form request" grep -q "^GET http://localhost:$HP/f/a.bin proxyauth=Basic_" "$T/proxy.log"
check "origin never saw the proxy credentials (plain)" grep -q "GET /f/a.bin auth=- proxyauth=- " "$T/plain.log"
rm -f "$T/dl/a.bin"
run env HTTPS_PROXY="http://127.0.0.1:$(cat "$T/closed.port")" NO_PROXY= "$BIN" fetch "https://localhost:$GP/f/a.bin" \
	--sha256 "$SHA" -o "$T/dl/a.bin"
expect "unreachable proxy" 1 "" "http.proxy"

# ---- interruption and output errors ------------------------------------------
bg "$BIN" fetch "http://127.0.0.1:$HP/trickle" --sha256 "$SHA" --min-rate 0 -o "$T/dl/t.bin" -q
FP=$BGPID
_i=0
while [ -z "$(ls -A "$T/dl")" ] && [ $_i -lt 100 ]; do sleep 0.05; _i=$((_i + 1)); done
check "a temporary file exists beside FILE while downloading" sh -c "ls -A '$T/dl' | grep -q '^\.t\.bin\.abx-'"
kill -TERM "$FP"
wait "$FP" 2>/dev/null
check "SIGTERM mid-download leaves nothing behind" nothing_left
run "$BIN" fetch "http://127.0.0.1:$HP/f/a.bin" --sha256 "$SHA" -o "$T/no/such/dir/a.bin"
expect "-o into a missing directory" 1 "" "io.error"
