# healthcheck: exit 0 iff GET /health answers 200 within 2 s; silent unless
# -v. Peers: our serve, Python's http.server (a server without /health),
# a Python listener that accepts and never answers, a closed port.
. "$TOP/tests/lib.sh"

PY=$(python3 -c 'import sys; print(sys.executable)')

run "$BIN" healthcheck --help
expect "healthcheck --help exits 0" 0 "usage: agent-sandbox-server healthcheck"
run "$BIN" healthcheck --bogus
expect "healthcheck unknown option exits 1 (2 is reserved by container runtimes)" 1 "" "unknown option --bogus"
run "$BIN" healthcheck --port 0
expect "healthcheck --port 0 is a usage error" 1 "" "--port 0"

if ! start_serve; then
	not_ok "serve for healthcheck" "did not start: $(head -3 "$T/serve.err")"
	exit 1
fi
run "$BIN" healthcheck --port "$PORT"
expect "serve --port 0 + healthcheck --port N: exit 0" 0
check "healthcheck is silent without -v" sh -c "[ ! -s '$T/out' ] && [ ! -s '$T/err' ]"
run "$BIN" healthcheck -v --host 127.0.0.1 --port "$PORT"
expect "healthcheck -v prints the status line" 0 "HTTP/1.1 200 OK"
run "$BIN" healthcheck "--port=$PORT" "--host=127.0.0.1"
expect "healthcheck --port=N --host=H" 0
ln -s "$BIN" "$T/agent-sandbox-healthcheck"
run "$T/agent-sandbox-healthcheck" --port "$PORT"
expect "healthcheck by argv[0] agent-sandbox-healthcheck" 0
check "the check is in serve's access log" grep -q ' GET /health 200 ' "$T/serve.err"
kill "$SERVE_PID"
wait "$SERVE_PID"
check "serve exits 0 after SIGTERM" test $? -eq 0

# IPv6 loopback: the Host field brackets the address; a name that does
# not resolve is unhealthy, and -v says so.
if ip -6 addr show lo 2>/dev/null | grep -q '::1'; then
	bg "$BIN" serve --host ::1 --port 0 >"$T/serve6.out" 2>"$T/serve6.err"
	if wait_for_line "$T/serve6.out" '^[0-9][0-9]*$' 10; then
		run "$BIN" healthcheck -v --host ::1 --port "$(head -1 "$T/serve6.out")"
		expect "healthcheck --host ::1 against serve on ::1" 0 "HTTP/1.1 200 OK"
		check "serve on ::1 logged the check" grep -q ' GET /health 200 ' "$T/serve6.err"
	else
		not_ok "serve on ::1" "did not start: $(head -3 "$T/serve6.err")"
	fi
	kill "$BGPID"
else
	skip "healthcheck on ::1" "no IPv6 loopback"
fi
run "$BIN" healthcheck -v --host nosuch.invalid --port 9
expect "healthcheck on a name that does not resolve: exit 1" 1 "" "nosuch.invalid"

# Closed port: refused, not waited out.
bg "$PY" -S "$FIXTURES/httpprobe.py" freeport >"$T/free.port"
wait_for_line "$T/free.port" '^[0-9]' 10
port=$(head -1 "$T/free.port")
run "$BIN" healthcheck --port "$port"
expect "healthcheck on a closed port: exit 1" 1
check "healthcheck on a closed port: silent" sh -c "[ ! -s '$T/out' ] && [ ! -s '$T/err' ]"
run "$BIN" healthcheck -v --port "$port"
expect "healthcheck -v says why: refused, not the deadline" 1 "" "Connection refused"

# A listener that accepts and never answers: the 2 s bound.
"$PY" -S "$FIXTURES/httpprobe.py" blackhole >"$T/bh.out" 2>/dev/null &
_pids="$_pids $!"
if wait_for_line "$T/bh.out" '^[0-9]' 5; then
	run timeout 60 "$BIN" healthcheck --port "$(head -1 "$T/bh.out")"
	expect "healthcheck on a silent listener: gives up by itself, exit 1" 1
	run timeout 60 "$BIN" healthcheck -v --port "$(head -1 "$T/bh.out")"
	expect "... at its 2 s deadline" 1 "" "no answer within 2 seconds"
else
	not_ok "silent listener" "fixture did not start"
fi

# An independent server without /health: 404 is unhealthy.
mkdir "$T/www"
(cd "$T/www" && exec "$PY" -u -m http.server --bind 127.0.0.1 0) >"$T/www.out" 2>&1 &
_pids="$_pids $!"
if wait_for_line "$T/www.out" 'port [0-9]' 10; then
	wport=$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$T/www.out" | head -1)
	run "$BIN" healthcheck -v --port "$wport"
	expect "healthcheck against a server answering 404: exit 1" 1 "" "404"
	echo ok >"$T/www/health"
	run "$BIN" healthcheck --port "$wport"
	expect "healthcheck against Python's http.server serving /health: exit 0" 0
else
	skip "healthcheck against http.server" "http.server did not start"
fi
