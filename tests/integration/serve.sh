# serve: /health, the error envelope, strict parsing (every malformed
# request gets its status and a closed connection, and the server keeps
# serving), keep-alive, pipelining, connection slots, deadlines, SIGTERM
# drain, the access log. Peers: Python sockets (tests/fixtures).
. "$TOP/tests/lib.sh"

# The interpreter itself, not a version-manager shim (those cost ~0.4 s
# per start, and this file starts Python ~40 times); -S skips site
# packages, which these stdlib-only fixtures do not need.
PY=$(python3 -c 'import sys; print(sys.executable)')
http_raw() { "$PY" -S "$FIXTURES/rawhttp.py" "$1"; }
probe() { "$PY" -S "$FIXTURES/httpprobe.py" "$@"; }

run "$BIN" serve --help
expect "serve --help exits 0" 0 "usage: agent-sandbox-server serve"
run "$BIN" serve --bogus
expect "serve unknown option exits 2" 2 "" "usage: agent-sandbox-server serve"
run "$BIN" serve --port 70000
expect "serve --port out of range exits 2" 2 "" "--port 70000"
run "$BIN" serve --max-connections 0
expect "serve --max-connections 0 exits 2" 2 "" "--max-connections"

# --base-dir / ABX_SERVER_BASE_DIR: the directory HOME-relative
# defaults resolve from; the state directory (token) is under it.
echo '{}' >"$T/none.json"
for how in flag env; do
	rm -rf "$T/base"
	mkdir -p "$T/base"
	if [ $how = flag ]; then
		bg env -u ABX_SERVER_TOKEN -u ABX_SERVER_STATE_DIR ABX_SERVER_CONFIG="$T/none.json" \
			"$BIN" serve --host 127.0.0.1 --port 0 --base-dir "$T/base" >"$T/base.out" 2>"$T/base.err"
	else
		bg env -u ABX_SERVER_TOKEN -u ABX_SERVER_STATE_DIR ABX_SERVER_CONFIG="$T/none.json" \
			ABX_SERVER_BASE_DIR="$T/base" "$BIN" serve --host 127.0.0.1 --port 0 >"$T/base.out" 2>"$T/base.err"
	fi
	if wait_for_line "$T/base.out" '^[0-9][0-9]*$' 10 &&
		grep -q "access token for principal default is in $T/base/.local/state/agent-sandbox/token" "$T/base.err" &&
		test -s "$T/base/.local/state/agent-sandbox/token"; then
		ok "serve base dir ($how): the state directory resolves under it"
	else
		not_ok "serve base dir ($how): the state directory resolves under it" "$(head -c 400 "$T/base.err")"
	fi
	kill "$BGPID" 2>/dev/null
	wait "$BGPID" 2>/dev/null
done

# A root serve with --base-dir /home/user: the home's owner (uid 65534 here)
# points .local/state/agent-sandbox at a directory of root's. serve refuses
# the link (config.state_dir_unsafe, with its fix) and writes no token there.
# With no link, serve makes the state directory itself and keeps it: when
# the owner then moves .local/state away and puts the link in its place,
# audit records still go to the directory serve checked.
if [ "$(id -u)" = 0 ]; then
	rm -rf "$T/home" "$T/rootdir"
	mkdir -p "$T/home/.local/state" "$T/rootdir"
	chmod 700 "$T/rootdir"
	chown -R 65534 "$T/home"
	ln -s "$T/rootdir" "$T/home/.local/state/agent-sandbox"
	chown -h 65534 "$T/home/.local/state/agent-sandbox"
	run timeout 5 env -u ABX_SERVER_TOKEN -u ABX_SERVER_STATE_DIR ABX_SERVER_CONFIG="$T/none.json" \
		"$BIN" serve --host 127.0.0.1 --port 0 --base-dir "$T/home"
	expect "root serve, base dir: a state directory that is a link the home's owner made is refused" \
		2 "" "config.state_dir_unsafe: $T/home/.local/state/agent-sandbox is a symbolic link"
	check "... with a fix line" grep -q "^  fix: " "$T/err"
	check "... and no token is written where it points" test ! -e "$T/rootdir/token"
	rm "$T/home/.local/state/agent-sandbox"
	bg env -u ABX_SERVER_TOKEN -u ABX_SERVER_STATE_DIR ABX_SERVER_CONFIG="$T/none.json" \
		"$BIN" serve --host 127.0.0.1 --port 0 --base-dir "$T/home" >"$T/base.out" 2>"$T/base.err"
	if wait_for_line "$T/base.out" '^[0-9][0-9]*$' 10; then
		p=$(head -1 "$T/base.out")
		check "root serve, base dir: without the link, the token is in the state directory serve made" \
			test -s "$T/home/.local/state/agent-sandbox/token"
		mv "$T/home/.local/state" "$T/home/.local/moved"
		mkdir "$T/home/.local/state"
		ln -s "$T/rootdir" "$T/home/.local/state/agent-sandbox"
		chown -R -h 65534 "$T/home/.local/state"
		printf 'GET /v1/ops HTTP/1.1\r\nHost: t\r\nX-Access-Token: wrong\r\nConnection: close\r\n\r\n' |
			http_raw "$p" >/dev/null 2>&1
		kill "$BGPID" 2>/dev/null
		wait "$BGPID" 2>/dev/null
		check "... an ancestor moved and the link put in its place later: audit records still go to the checked directory" \
			sh -c "grep -q auth.failure '$T/home/.local/moved/agent-sandbox/audit.jsonl' && test ! -e '$T/rootdir/audit.jsonl'"
	else
		not_ok "root serve, base dir without the link" "$(head -c 400 "$T/base.err")"
		kill "$BGPID" 2>/dev/null
	fi
else
	skip "root serve with a base dir another user owns" "needs root"
fi

# Everything but /health is authenticated before it is routed (the API's
# tests are tests/integration/api.sh); routing errors need the token.
export ABX_SERVER_TOKEN=serve-test-token
if ! start_serve; then
	not_ok "serve --port 0 prints the port" "no port line: $(cat "$T/serve.out" "$T/serve.err" | head -5)"
	exit 1
fi
ok "serve --port 0 prints the port alone on the first line"
check "the port is a number above 0" test "$PORT" -gt 0

version=$("$BIN" version --json | sed 's/.*"version":"\([^"]*\)".*/\1/')
printf 'GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | http_raw "$PORT" >"$T/r" 2>"$T/rerr"
check "GET /health is 200" grep -q '^HTTP/1.1 200 OK' "$T/r"
check "GET /health body is status ok and the version" \
	grep -qF "{\"status\":\"ok\",\"version\":\"$version\",\"initialised\":true}" "$T/r"
check "GET /health is application/json with Content-Length" \
	sh -c "grep -q '^Content-Type: application/json' '$T/r' && grep -q '^Content-Length: 52' '$T/r'"

printf 'GET /nope HTTP/1.1\r\nHost: t\r\nX-Access-Token: serve-test-token\r\n\r\n' | http_raw "$PORT" >"$T/r" 2>"$T/rerr"
check "unknown path is 404" grep -q '^HTTP/1.1 404 ' "$T/r"
check "404 body is the envelope with not_found" \
	grep -qF '{"error":{"code":"not_found","message":"no such resource: /nope","details":{},"remedy":null}}' "$T/r"
check "an error answer closes the connection" sh -c "grep -q '^Connection: close' '$T/r' && grep -q CLOSED '$T/rerr'"

printf 'DELETE /health HTTP/1.1\r\nHost: t\r\nX-Access-Token: serve-test-token\r\n\r\n' | http_raw "$PORT" >"$T/r" 2>"$T/rerr"
check "wrong method is 405" grep -q '^HTTP/1.1 405 ' "$T/r"
check "405 names the allowed methods" grep -q '^Allow: GET, HEAD' "$T/r"
check "405 envelope code is request.method" grep -q '"code":"request.method"' "$T/r"

printf 'HEAD /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | http_raw "$PORT" >"$T/r" 2>"$T/rerr"
check "HEAD /health is 200 without a body" \
	sh -c "grep -q '^HTTP/1.1 200' '$T/r' && grep -q '^Content-Length: 52' '$T/r' && ! grep -q status '$T/r'"

printf 'GET /health HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\n' |
	http_raw "$PORT" >"$T/r" 2>"$T/rerr"
check "a well-formed chunked body is accepted" grep -q '^HTTP/1.1 200' "$T/r"
printf 'GET /health HTTP/1.0\r\n\r\n' | http_raw "$PORT" >"$T/r" 2>"$T/rerr"
check "HTTP/1.0 without Host is served and closed" sh -c "grep -q '^HTTP/1.1 200' '$T/r' && grep -q CLOSED '$T/rerr'"

# Malformed and oversized requests: NAME STATUS, request bytes on stdin.
malformed() {
	_name=$1 _want=$2
	http_raw "$PORT" >"$T/r" 2>"$T/rerr"
	_got=$(head -1 "$T/r" | cut -d' ' -f2)
	if [ "$_got" != "$_want" ]; then
		not_ok "$_name -> $_want" "got '$(head -1 "$T/r" | tr -d '\r')'"
	elif ! grep -q CLOSED "$T/rerr"; then
		not_ok "$_name -> $_want" "connection not closed"
	elif ! grep -q '"error":{"code":"request\.' "$T/r"; then
		not_ok "$_name -> $_want" "no error envelope: $(tail -c 200 "$T/r")"
	else
		ok "$_name -> $_want and closed"
	fi
}
H='Host: t\r\n'
printf "POST /health HTTP/1.1\r\n${H}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" | malformed "Content-Length with Transfer-Encoding" 400
printf "POST /health HTTP/1.1\r\n${H}Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello" | malformed "double Content-Length" 400
printf "POST /health HTTP/1.1\r\n${H}Content-Length: 5x\r\n\r\nhello" | malformed "bad Content-Length" 400
printf "POST /health HTTP/1.1\r\n${H}Content-Length: -1\r\n\r\n" | malformed "negative Content-Length" 400
printf "GET /health HTTP/1.1\r\n${H}X-A: 1\r\n folded\r\n\r\n" | malformed "obs-fold" 400
printf "GET /health HTTP/1.1\r\n${H}Bad Name: 1\r\n\r\n" | malformed "bad header name" 400
printf "GET /health HTTP/1.1\r\n${H}X-A: a\001b\r\n\r\n" | malformed "control byte in a header value" 400
printf "GET /health HTTP/1.1\r\n${H}X-A: a\rb\r\n\r\n" | malformed "bare CR" 400
printf "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n" | malformed "HTTP/1.1 without Host" 400
printf "GET /health HTTP/1.1\r\n${H}${H}\r\n" | malformed "two Host fields" 400
printf "GET  /health HTTP/1.1\r\n${H}\r\n" | malformed "malformed request line" 400
printf "GET /health HTTP/1.1\n${H}\r\n" | malformed "bare LF" 400
printf "GET /health HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n" | malformed "bad chunk size" 400
printf "GET /health HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n" | malformed "chunk without CRLF" 400
printf "GET /health HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n10000000000000000\r\n" | malformed "chunk size overflow" 400
printf "GET /health HTTP/1.1\r\n${H}Transfer-Encoding: gzip\r\n\r\n" | malformed "unsupported Transfer-Encoding" 501
printf "GET /health HTTP/2.0\r\n${H}\r\n" | malformed "HTTP/2.0 request line" 505
{ printf "GET /health HTTP/1.1\r\n${H}X-Big: "; head -c 17000 /dev/zero | tr '\0' a; printf "\r\n\r\n"; } | malformed "header too big" 431
{ printf "GET /health HTTP/1.1\r\n${H}"; i=0; while [ $i -lt 101 ]; do printf "X-$i: v\r\n"; i=$((i + 1)); done; printf "\r\n"; } | malformed "101 header fields" 431
{ printf "GET /"; head -c 9000 /dev/zero | tr '\0' a; printf " HTTP/1.1\r\n${H}\r\n"; } | malformed "target too long" 414
# The token is checked before the body is read: without one, a body over
# the limit is 401 like any other (api.sh); with it, 413.
TH="${H}X-Access-Token: serve-test-token\r\n"
printf "POST /health HTTP/1.1\r\n${TH}Content-Length: 2000000\r\n\r\nxx" | malformed "body too big (Content-Length)" 413
{ printf "POST /health HTTP/1.1\r\n${TH}Transfer-Encoding: chunked\r\n\r\n"; i=0; while [ $i -lt 18 ]; do printf "10000\r\n"; head -c 65536 /dev/zero; printf "\r\n"; i=$((i + 1)); done; } | malformed "body too big (chunked)" 413

printf 'GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | http_raw "$PORT" >"$T/r" 2>"$T/rerr"
check "the server keeps serving after malformed requests" grep -q '^HTTP/1.1 200' "$T/r"
check "serve is still running" kill -0 "$SERVE_PID"

probe keepalive "$PORT" >"$T/p" 2>&1
check "keep-alive: two requests on one connection (the second without a token: 401)" \
	sh -c "grep -q '^first 200 keep-alive' '$T/p' && grep -q '^second 401' '$T/p'"
check "keep-alive: the connection closes after the error answer" grep -q '^closed-after-404 True' "$T/p"

probe pipeline "$PORT" >"$T/p" 2>&1
check "pipelined requests are answered in order" \
	sh -c "[ \$(grep -c '^response [123] 200 {\"status\":\"ok\"' '$T/p') -eq 3 ] && grep -q '^closed True' '$T/p'"

check "access log: one line per request (time peer method path status bytes ms)" \
	grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z 127\.0\.0\.1:[0-9]+ GET /health 200 52 [0-9]+\.[0-9]{3}ms$' "$T/serve.err"
check "access log: malformed requests are logged with their status" \
	grep -Eq ' 127\.0\.0\.1:[0-9]+ - - 400 [0-9]+ ' "$T/serve.err"

rss=$(awk '/^VmRSS/ {print $2}' "/proc/$SERVE_PID/status")
echo "# serve resident memory after these requests: ${rss} KiB" >&2

kill -TERM "$SERVE_PID"
wait_exit "$SERVE_PID" 60
check "SIGTERM on an idle server: exits by itself, 0" test "$RC" -eq 0

if start_serve -q; then
	kill -INT "$SERVE_PID"
	wait "$SERVE_PID"
	check "SIGINT: exit 0" test $? -eq 0
	check "-q: no access log, no start-up line" test ! -s "$T/serve.err"
fi

# Idle resident memory (goal: <= 2 MiB).
if start_serve -q; then
	sleep 0.2
	rss=$(awk '/^VmRSS/ {print $2}' "/proc/$SERVE_PID/status")
	check "idle resident memory <= 2 MiB (${rss} KiB)" test "$rss" -le 2048
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
fi

# SIGTERM while a request is in flight: it completes, new connections are
# refused, exit 0.
if start_serve; then
	probe inflight "$PORT" "$SERVE_PID" >"$T/p" 2>&1
	wait "$SERVE_PID"
	rc=$?
	check "SIGTERM mid-request: the request completes with 200 and Connection: close" \
		grep -q '^status 200 close' "$T/p"
	check "SIGTERM mid-request: new connections are refused while draining" \
		grep -q '^new-connections-refused True' "$T/p"
	check "SIGTERM mid-request: exit 0" test "$rc" -eq 0
else
	not_ok "SIGTERM mid-request" "serve did not start"
fi

# Connection slots: 4 held in a handler (nothing to reclaim). Loopback still
# gets /health from one of the 4 reserve slots (and nothing else there); with
# the reserve held by half heads too, a new /health closes the oldest of them.
# (Refusals at accept, for other addresses, are in tests/unit/test_httpd.c.)
printf '[{"id":"nap","concurrency":64,"argv":["/bin/sleep","3"]}]\n' >"$T/nap.json"
if start_serve --max-connections 4 -v --commands "$T/nap.json"; then
	probe slots "$PORT" 4 4 >"$T/p" 2>&1
	check "slot limit: /health from loopback is answered from the reserve, which then closes" \
		sh -c "grep -q '^reserve-health 200' '$T/p' && grep -q '^reserve-closed True' '$T/p'"
	check "slot limit: a reserve slot answers only public routes (503 request.busy)" \
		grep -q '^reserve-other 503 .*request.busy.*all 4 connection slots are in use' "$T/p"
	check "slot limit: with the reserve held by half heads, /health still answers" \
		sh -c "grep -q '^extra 200' '$T/p' && grep -q '^oldest-reserve-closed True' '$T/p'"
	check "slot limit: the held connections still work" grep -q '^held 200' "$T/p"
	check "slot limit: released slots are reused" grep -q '^after-release 200' "$T/p"
	check "slot limit: reserve use is logged" grep -q 'in a reserve slot (public routes only): all slots in use' "$T/serve.err"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "slot limit" "serve did not start"
fi

# Connections that hold a slot without a request in progress are reclaimed,
# the one waiting longest first, instead of refusing the new client.
if start_serve --max-connections 4 -v; then
	probe idleslots "$PORT" 4 >"$T/p" 2>&1
	check "silent connections: a new one is served, not refused" grep -q '^extra 200' "$T/p"
	check "silent connections: the longest-waiting one was closed for it" grep -q '^oldest-closed True' "$T/p"
	check "silent connections: the others stay" grep -q '^newest-open True' "$T/p"
	check "silent connections: the reclaim is logged" grep -q 'closed the longest-waiting connection' "$T/serve.err"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "silent connections" "serve did not start"
fi

# 256 keep-alive connections each send one GET /health and stay open (the
# default 256 slots): a fresh /health and healthcheck still get their answer.
if start_serve; then
	probe idleflood "$PORT" 256 "$BIN" >"$T/p" 2>&1
	check "keep-alive flood: a fresh /health is 200 ($(grep '^flood' "$T/p"))" grep -q '^fresh 200' "$T/p"
	check "keep-alive flood: healthcheck exits 0" grep -q '^healthcheck 0' "$T/p"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "keep-alive flood" "serve did not start"
fi

# server.max_connections_per_peer: one address over it cannot take more
# slots (loopback lands in the reserve, /health only); other addresses are
# served; an idle connection of the address is reclaimed for its new one.
if ABX_SERVER_MAX_CONNECTIONS_PER_PEER=3 start_serve --max-connections 16 --commands "$T/nap.json"; then
	probe peerlimit "$PORT" 3 >"$T/p" 2>&1
	check "per-address limit: the 4th connection of 127.0.0.2 gets 503 request.busy" \
		grep -q '^over 503 .*127.0.0.2 already holds 3 connections, the limit per client address' "$T/p"
	check "per-address limit: 127.0.0.3 is served as usual" grep -q '^other-address 401' "$T/p"
	check "per-address limit: an idle connection of the address is reclaimed for a new one" \
		sh -c "grep -q '^held 200' '$T/p' && grep -q '^after-idle 401' '$T/p' && grep -q '^idle-closed True' '$T/p'"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "per-address limit" "serve did not start"
fi

# A client that sends half a head is cut at the header deadline with 408.
if start_serve --header-timeout 0.5; then
	probe slowhead "$PORT" >"$T/p" 2>&1
	el=$(sed -n 's/^elapsed //p' "$T/p")
	check "slow head: 408 request.timeout" sh -c "grep -q '^status 408' '$T/p' && grep -q '^code True' '$T/p'"
	check "slow head: closed" grep -q '^closed True' "$T/p"
	check "slow head: cut at its 0.5 s deadline, not the 10 s default (took ${el:-?} s)" \
		"$PY" -c "import sys; sys.exit(0 if 0.4 <= float('${el:-99}') < 8 else 1)"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "slow head" "serve did not start"
fi

# Many slow clients try to hold slots with half a head: a fresh request is
# still answered at once; 8 (the limit per address) hold theirs to the
# header deadline and are cut with 408, each older one was closed as a newer
# one came. The deadline is far above the probe's time to open 8 more (its
# span8, a few ms), so a busy machine does not let an older one reach it.
if ABX_SERVER_MAX_CONNECTIONS_PER_PEER=256 start_serve --header-timeout 3; then
	probe slowloris "$PORT" 200 "$BIN" >"$T/p" 2>&1
	check "200 slow clients: a fresh request is answered meanwhile (healthcheck exits 0)" \
		grep -q '^fresh 0 ' "$T/p"
	check "200 slow clients: 8 kept to the header deadline and cut with 408 ($(grep '^cut' "$T/p"); 8 newer ones came within $(sed -n 's/^span8 //p' "$T/p") ms)" \
		grep -q '^cut 8 of 200' "$T/p"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "slow clients" "serve did not start"
fi

# Half-sent heads need no token; a body does (the token is checked as soon
# as the head is in). 64 half heads from one address (everyone behind one
# proxy: the default server.max_connections_per_peer), then 64 from each of
# 8 others (512, twice the default 256 slots), then the same 8 against 32
# slots: each address keeps at most 8 of them (the oldest closes), a full
# table closes the oldest partly sent request for a new client, so /health
# and an authorized request are answered at once, not 503.
halfheads_case() { # name, probe args…
	_name=$1 _how=halfheads
	shift
	[ "$1" = --bodies ] && { _how=halfbodies; shift; }
	probe $_how "$PORT" "$@" serve-test-token >"$T/p" 2>&1
	h=$(sed -n 's/^health //p' "$T/p")
	a=$(sed -n 's/^authorized //p' "$T/p")
	check "half heads, $_name: /health is 200 at once ($h)" \
		sh -c "echo '$h' | awk '{ exit !(\$1 == 200 && \$2 < 1000) }'"
	check "half heads, $_name: an authorized GET /v1/ops is 200 at once ($a)" \
		sh -c "echo '$a' | awk '{ exit !(\$1 == 200 && \$2 < 1000) }'"
}
printf '[{"id":"echo","argv":["/bin/echo","{word}"],"params":{"word":{"type":"string","required":true}}}]\n' \
	>"$T/echo.json"
if ABX_SERVER_AUDIT_FILE=$T/half-audit.jsonl start_serve -v --commands "$T/echo.json"; then
	halfheads_case "64 from one address" 64 127.0.0.1
	check "half heads, 64 from one address: 8 of them are kept ($(grep '^held' "$T/p"))" \
		grep -q '^held 8 of 64' "$T/p"
	check "half heads: the closing is logged" grep -q 'the oldest of its 9 partly sent requests (limit 8 per address)' "$T/serve.err"
	halfheads_case "64 from each of 8 addresses" 64 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5 \
		127.0.0.6 127.0.0.7 127.0.0.8 127.0.0.9
	halfheads_case "64 half bodies from one address" --bodies 64 127.0.0.1
	check "half bodies without a token: each answered 401 before its body, none held ($(grep '^held' "$T/p"))" \
		grep -q '^held 0 of 64' "$T/p"
	# A head announcing 1 MB without a valid token is answered 401 at
	# once, closed, and audited like any refusal; the body is never read.
	probe authfirst "$PORT" >"$T/p" 2>&1
	for how in missing wrong; do
		l=$(grep "^$how " "$T/p")
		code=auth.invalid
		[ $how = missing ] && code=auth.missing
		check "a 1 MB body, token $how: 401 $code before the body is sent (${l%% \{*})" \
			sh -c "echo '$l' | awk '{ exit !(\$2 == 401 && \$3 < 1000 && \$4 == \"close\") }' &&
				echo '$l' | grep -q '\"code\":\"$code\"'"
		check "a 1 MB body, token $how: the connection is closed" grep -q "^$how-closed True" "$T/p"
		check "a 1 MB body, token $how: an audit record" \
			grep -q "\"event\":\"auth.failure\",\"code\":\"$code\",\"peer\":\"127.0.0.1:[0-9]*\",\"method\":\"POST\",\"path\":\"/v1/ops/echo\"" \
			"$T/half-audit.jsonl"
	done
	# An authorized upload stalled mid-body is not a connection a new one
	# may take: it outlives 64 half heads and bodies without a token from
	# its own address and from each of 8 others (576, over the 256 slots),
	# and completes when the rest of its body arrives.
	probe authupload "$PORT" 64 127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5 \
		127.0.0.6 127.0.0.7 127.0.0.8 127.0.0.9 serve-test-token >"$T/p" 2>&1
	check "an authorized upload stalled mid-body outlives 576 half requests without a token, then completes ($(head -c 160 "$T/p" | tr '\n' ' '))" \
		grep -q '^upload 200 [0-9]* whole' "$T/p"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "half heads" "serve did not start"
fi
if start_serve --max-connections 32; then
	halfheads_case "8 addresses, 32 slots" 8 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5 \
		127.0.0.6 127.0.0.7 127.0.0.8 127.0.0.9
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "half heads, 32 slots" "serve did not start"
fi

# server.max_header_bytes sets the head limit: with 2048, a 3000-byte head
# is 431 and closed while a 1500-byte one is served; with 65536, a 40000-byte
# head (over the 16 KiB default) is served.
big_head() { # N: a GET /health whose head is N bytes
	_pre="GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\nX-Pad: "
	printf "$_pre"
	head -c $(($1 - 61)) /dev/zero | tr '\0' a
	printf '\r\n\r\n'
}
check "big_head makes heads of the asked size" test "$(big_head 1500 | wc -c)" -eq 1500
if ABX_SERVER_MAX_HEADER_BYTES=2048 start_serve; then
	big_head 3000 | malformed "a 3000-byte head over server.max_header_bytes 2048" 431
	big_head 2100 | malformed "a 2100-byte head just over server.max_header_bytes 2048" 431
	big_head 1500 | http_raw "$PORT" >"$T/r" 2>"$T/rerr"
	check "a 1500-byte head under server.max_header_bytes 2048 is 200" grep -q '^HTTP/1.1 200' "$T/r"
	printf 'GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | http_raw "$PORT" >"$T/r" 2>"$T/rerr"
	check "the server still answers after 431s" grep -q '^HTTP/1.1 200' "$T/r"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "server.max_header_bytes 2048" "serve did not start: $(head -3 "$T/serve.err")"
fi
if ABX_SERVER_MAX_HEADER_BYTES=65536 start_serve; then
	big_head 40000 | http_raw "$PORT" >"$T/r" 2>"$T/rerr"
	check "a 40000-byte head under server.max_header_bytes 65536 is 200" grep -q '^HTTP/1.1 200' "$T/r"
	big_head 70000 | malformed "a 70000-byte head over server.max_header_bytes 65536" 431
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "server.max_header_bytes 65536" "serve did not start: $(head -3 "$T/serve.err")"
fi

# The port is taken: a clear error, exit 1.
"$PY" -S "$FIXTURES/httpprobe.py" blackhole >"$T/bh.out" 2>/dev/null &
_pids="$_pids $!"
wait_for_line "$T/bh.out" '^[0-9]' 5
# Bound first: with no token configured nothing is written
# to the state directory before the bind fails.
mkdir -m 700 "$T/inuse-state"
run env -u ABX_SERVER_TOKEN ABX_SERVER_STATE_DIR="$T/inuse-state" "$BIN" serve --host 127.0.0.1 \
	--port "$(head -1 "$T/bh.out")"
expect "serve on a port in use exits 1 with server.address_in_use" 1 "" \
	"server.address_in_use: cannot listen on 127.0.0.1 port"
expect "a port in use has a fix line" 1 "" "fix: stop what listens there, or choose another --port"
check "a port in use writes no token and no sessions/" test -z "$(ls -A "$T/inuse-state")"

# ABX_SERVER_INTROSPECT=1: serve loads and checks
# everything, then exits 0 without opening a socket (the port in use does
# not matter), reading the token or writing the state directory.
mkdir -m 700 "$T/intro-state"
run env ABX_SERVER_INTROSPECT=1 ABX_SERVER_TOKEN=secret-token ABX_SERVER_STATE_DIR="$T/intro-state" \
	"$BIN" serve --host 127.0.0.1 --port "$(head -1 "$T/bh.out")"
expect "serve with ABX_SERVER_INTROSPECT=1 exits 0 without listening" 0 \
	"serve: ABX_SERVER_INTROSPECT is set: configuration, policy and commands load; would listen on 127.0.0.1:$(head -1 "$T/bh.out"); no socket opened"
check "introspection writes nothing into the state directory" test -z "$(ls -A "$T/intro-state")"
echo '{"install": {"mdoe": "lazy"}}' >"$T/intro-bad.json"
run env ABX_SERVER_INTROSPECT=1 "$BIN" serve --config "$T/intro-bad.json"
expect "introspection still refuses a bad configuration" 2 "" "config.invalid: install.mdoe: unknown key"
# An agent whose manifest exists but does not load: what broke, as
# check-config says it, and a configuration error.
mkdir -p "$T/brokenman"
echo '{"name":"codex","version":"1"}' >"$T/brokenman/codex.json"
echo '{"agents":["codex"]}' >"$T/codex-only.json"
run env ABX_SERVER_INTROSPECT=1 "$BIN" serve --config "$T/codex-only.json" --manifests "$T/brokenman"
expect "an enabled agent's broken manifest is named, exit 2" 2 "" "agent-sandbox-server: install.manifest_invalid: $T/brokenman/codex.json"

# An unsafe state directory is refused at start-up, exit 2, before anything
# is written into it.
mkdir -p "$T/unsafe-state"
chmod 777 "$T/unsafe-state"
run env -u ABX_SERVER_TOKEN ABX_SERVER_STATE_DIR="$T/unsafe-state" "$BIN" serve --host 127.0.0.1 --port 0
expect "serve with a 0777 state directory exits 2" 2 "" \
	"config.state_dir_unsafe: $T/unsafe-state has mode 0777: group- or world-writable"
check "nothing is written into the unsafe state directory" test -z "$(ls -A "$T/unsafe-state")"
mkdir -p "$T/unsafe-tools"
chmod 777 "$T/unsafe-tools"
run env ABX_TOOLS_DIR="$T/unsafe-tools" "$BIN" serve --host 127.0.0.1 --port 0
expect "serve with a 0777 tools directory exits 2" 2 "" "config.state_dir_unsafe: $T/unsafe-tools"

# An audit file whose directory is missing: refused at start-up, naming the
# file and what to do, instead of a warning and every record dropped.
run env ABX_SERVER_AUDIT_FILE="$T/no-such-dir/audit.jsonl" "$BIN" serve --host 127.0.0.1 --port 0
expect "serve with an audit file in a missing directory exits 2" 2 "" \
	"config.invalid: audit_file $T/no-such-dir/audit.jsonl: cannot be written (No such file or directory): create its directory"

# ---- unread answers are bounded ---------------------------------
# 40 clients run an op printing 1 MiB of NUL on each stream and never read.
# Escaped, one such answer was 12 MiB, held whole until read: serve peaked
# at ~500 MiB. Now one answer is at most 4 x max_output_bytes + 4 KiB and
# unread answers share HTTPD_HELD_MAX (64 MiB); the runs' own captures (2 MiB
# each while they run) come on top: the README's bound for these 40 is
# 40 x 2 MiB + 64 MiB, checked here with 16 MiB for the rest of the server.
printf '[{"id":"nul","concurrency":64,"argv":["/bin/sh","-c","head -c 1048576 /dev/zero; head -c 1048576 /dev/zero >&2"]}]\n' >"$T/nul.json"
if start_serve --commands "$T/nul.json" --state-dir "$T/nulstate" --tools-dir "$T/nultools"; then
	"$PY" -S "$FIXTURES/unread.py" "$PORT" "$ABX_SERVER_TOKEN" nul 40 "$SERVE_PID" >"$T/unread.out" 2>&1
	hwm=$(sed -n 's/^hwm_kb //p' "$T/unread.out")
	check "40 unread 2 MiB-NUL answers: serve's peak (${hwm:-?} KiB) under 40 x 2 + 64 + 16 MiB" \
		test "${hwm:-999999999}" -lt $(((40 * 2 + 64 + 16) * 1024))
	curl -s -H "X-Access-Token: $ABX_SERVER_TOKEN" -d '{}' "http://127.0.0.1:$PORT/v1/ops/nul" >"$T/nul.ans"
	check "one answer: each stream cut at 2 x max_output_bytes escaped, truncated: true" "$PY" -c '
import json, sys
a = json.load(open(sys.argv[1]))
assert a["truncated"] is True and a["exit_code"] == 0, a
assert len(a["stdout"]) == len(a["stderr"]) == (2 << 20) // 6, (len(a["stdout"]), len(a["stderr"]))
assert set(a["stdout"]) == {"\0"}' "$T/nul.ans"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "unread answers" "serve did not start: $(head -3 "$T/serve.err")"
fi

# ---- the access log under a 401 flood -------------------------------------
# 300 wrong-token requests (each 401 closes its connection): identical refused
# lines within a second are one line and a "repeated N more times" line, and
# the counts add up to the requests.
if start_serve; then
	"$PY" -S -c '
import socket, sys
for _ in range(300):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(b"GET /v1/ops HTTP/1.1\r\nHost: x\r\nX-Access-Token: wrong\r\n\r\n")
    while s.recv(65536):
        pass
    s.close()
' "$PORT"
	# the count of the folded lines is written when their second is over
	total401() { awk '/ GET \/v1\/ops 401 repeated / {t += $7; next} / GET \/v1\/ops 401 / {t++} END {print t + 0}' "$T/serve.err"; }
	wait_until 20 'test "$(total401)" -eq 300'
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
	lines=$(grep -c ' GET /v1/ops 401' "$T/serve.err")
	total=$(total401)
	check "a 401 flood of 300 requests writes far fewer lines ($lines)" test "$lines" -le 30
	check "... and the counts add up to 300 ($total)" test "$total" -eq 300
else
	not_ok "401 flood" "serve did not start: $(head -3 "$T/serve.err")"
fi

# flood N REQUEST: N connections, each sends REQUEST (printf escapes) and
# reads the answer to its end.
flood() {
	"$PY" -S -c '
import socket, sys
for _ in range(int(sys.argv[2])):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(sys.argv[3].encode().decode("unicode_escape").encode("latin-1"))
    while s.recv(65536):
        pass
    s.close()
' "$PORT" "$1" "$2"
}
# A 400 flood (malformed heads) is folded like the 401 one, and the count
# is written at SIGTERM, sent at once after the burst.
if start_serve; then
	flood 200 'GET /health HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n'
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
	lines=$(grep -c ' 400 ' "$T/serve.err")
	total=$(awk '/ 400 repeated / {t += $7; next} / 400 / {t++} END {print t + 0}' "$T/serve.err")
	check "a 400 flood of 200 requests writes far fewer lines ($lines)" test "$lines" -le 30
	check "... and the counts add up to 200, the last at SIGTERM ($total)" test "$total" -eq 200
else
	not_ok "400 flood" "serve did not start: $(head -3 "$T/serve.err")"
fi

# Wrong tokens in a burst: one audit record, then the count of the rest in an
# auth.failure.repeated record, written when the second is over (serve still
# running) and at SIGTERM sent at once after a burst.
audit_total() { # FILE: failures the records account for
	"$PY" -S -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if "auth.failure" in l]
print(sum(1 + r.get("repeated", 0) if r["event"] == "auth.failure" else r["repeated"] for r in recs))' "$1"
}
rm -f "$T/audit.jsonl"
if ABX_SERVER_AUDIT_FILE=$T/audit.jsonl start_serve; then
	flood 50 'GET /v1/ops HTTP/1.1\r\nHost: x\r\nX-Access-Token: wrong\r\n\r\n'
	wait_until 20 'test "$(audit_total "$T/audit.jsonl")" -eq 50'
	check "a burst of 50 wrong tokens: the count is written when its second is over ($(audit_total "$T/audit.jsonl"))" \
		test "$(audit_total "$T/audit.jsonl")" -eq 50
	flood 50 'GET /v1/jobs HTTP/1.1\r\nHost: x\r\nX-Access-Token: wrong\r\n\r\n'
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
	check "a second burst of 50, then SIGTERM: the count is written at exit ($(audit_total "$T/audit.jsonl"))" \
		test "$(audit_total "$T/audit.jsonl")" -eq 100
	check "... in a few records ($(wc -l <"$T/audit.jsonl"))" test "$(wc -l <"$T/audit.jsonl")" -le 10
else
	not_ok "audit burst" "serve did not start: $(head -3 "$T/serve.err")"
fi
