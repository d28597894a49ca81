# serve's operations API: authentication before
# routing, policy with install admission, command ops (argv only, process
# groups, timeouts, output caps, env allow-list, concurrency), install on
# first use with jobs (one download for 8 callers, 202 then polling), modes,
# read-only tools, audit, metrics, SIGHUP reload, slow clients, malformed
# requests. Peers: curl, Python's http.server + ssl (a test PKI made here).
. "$TOP/tests/lib.sh"

PY=$(python3 -c 'import sys; print(sys.executable)')
W=$T/www
M=$T/man
mkdir -p "$W" "$M" "$T/home"
export HOME=$T/home

make_pki
export SSL_CERT_FILE=$T/pki/ca.pem

start_httpd "$W" "$T/req.log"
HP=$HTTPD_PORT P=$HTTPD_PORT
# Every connection the fixture sees leaves a line: a request, or a failed
# handshake (a bare TCP probe included).
conns() { wc -l <"$T/req.log" | tr -d ' '; }
gets() { grep -c " GET $1" "$T/req.log" || true; }
# no_proc PATTERN: no process's command line matches within 10 s (a killed
# process may take a moment to go on a loaded machine)
no_proc() {
	_i=0
	while pgrep -f "$1" >/dev/null; do
		[ $_i -ge 100 ] && return 1
		sleep 0.1
		_i=$((_i + 1))
	done
}

# Tools with a run block (agents); pkg/bin/NAME prints "NAME 1.0.0 <args>".
RUN='"run":["{bin}","{prompt}"]'
for t in hello slowtool badsum lazy2; do mktool $t 1.0.0 0; done
mkman hello /f/hello-1.0.0.tgz "$(sha "$W/hello-1.0.0.tgz")" "$RUN"
mkman slowtool /slow/6/slowtool-1.0.0.tgz "$(sha "$W/slowtool-1.0.0.tgz")" "$RUN"
mkman badsum /f/badsum-1.0.0.tgz 0000000000000000000000000000000000000000000000000000000000000000 "$RUN"
mkman lazy2 /f/lazy2-1.0.0.tgz "$(sha "$W/lazy2-1.0.0.tgz")" "$RUN"
# a download answered 503 with Connection: close and no Content-Length
mktool gone 1.0.0 0
mkman gone /closing/503/gone-1.0.0.tgz "$(sha "$W/gone-1.0.0.tgz")" "$RUN"

TOK=0123456789abcdef-admin-token-$$
ALICE=alice-token-$$
BOB=bob-token-$$
cat >"$T/policy.json" <<EOF
{"principals": {
  "alice": {"token_sha256": "$(sha_str "$ALICE")", "preset": "admin", "deny": ["agents.hello.install"]},
  "bob": {"token_sha256": "$(sha_str "$BOB")", "allow": ["echo.*"]}}}
EOF
cat >"$T/cmds.json" <<EOF
[{"id": "echo.args", "argv": ["/bin/echo", "{a}", "{b}"],
  "params": {"a": {"type": "string", "required": true}, "b": {"type": "string"}}},
 {"id": "echo.num", "argv": ["/bin/echo", "{n}"], "params": {"n": {"type": "integer", "required": true}}},
 {"id": "true", "argv": ["true"]},
 {"id": "gone.make", "argv": ["/nonexistent/abx/make", "test"]},
 {"id": "long", "argv": ["/bin/sleep", "97$$"], "timeout": 120},
 {"id": "env.show", "argv": ["/usr/bin/env"], "env": ["API_ALLOWED"]},
 {"id": "stubborn", "argv": ["/bin/sh", "-c", "trap '' TERM; sleep 77$$ & sleep 78$$; echo never"], "timeout": 1},
 {"id": "flood", "argv": ["/bin/sh", "-c", "head -c 5000 /dev/zero | tr -c x x; echo; echo err >&2"]},
 {"id": "one.at.a.time", "argv": ["/bin/sleep", "1.$$"], "concurrency": 1},
 {"id": "hello.run", "argv": ["hello", "{word}"], "install": ["hello"],
  "params": {"word": {"type": "string", "required": true}}},
 {"id": "slow.run", "argv": ["slowtool"], "install": ["slowtool"]},
 {"id": "bad.run", "argv": ["badsum"], "install": ["badsum"]},
 {"id": "lazy2.run", "argv": ["lazy2"], "install": ["lazy2"]},
 {"id": "gone.run", "argv": ["gone"], "install": ["gone"]}]
EOF
cat >"$T/config.json" <<EOF
{"agents": ["hello", "badsum"], "commands": "$T/cmds.json", "policy": "$T/policy.json",
 "preset": "admin", "manifests_dir": "$M", "audit_file": "$T/audit.jsonl",
 "install": {"wait": 20}, "server": {"max_output_bytes": 1024, "max_connections": 512,
            "max_connections_per_peer": 512}}
EOF
sed 's/"wait": 20/"wait": 1/' "$T/config.json" >"$T/config-wait1.json"

A() { curl -s -o "$T/body" -D "$T/hdr" -w '%{http_code}' "$@"; }
ST=$T/state
mkdir -p "$ST"
chmod 700 "$ST"

# ---- start: no token configured for default → a generated one --------------------
export API_ALLOWED=visible API_SECRET=hidden
bg "$BIN" serve --host 127.0.0.1 --port 0 --config "$T/config.json" --tools-dir "$T/tools" \
	--state-dir "$ST/gen" >"$T/serve.out" 2>"$T/serve.err"
SERVE_PID=$BGPID
wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10 || { not_ok "serve starts" "$(head -5 "$T/serve.err")"; exit 1; }
PORT=$(head -1 "$T/serve.out")
U=http://127.0.0.1:$PORT
check "no token configured: alice's policy has one, so no file is generated" test ! -e "$ST/gen/token"
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null

# With no policy file, default gets a generated token.
bg "$BIN" serve --host 127.0.0.1 --port 0 --state-dir "$ST/gen" --tools-dir "$T/tools" >"$T/serve.out" 2>"$T/serve.err"
SERVE_PID=$BGPID
wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10 || { not_ok "serve starts (generated token)" "$(head -5 "$T/serve.err")"; exit 1; }
PORT=$(head -1 "$T/serve.out")
check "generated token file exists with mode 0600" test "$(stat -c %a "$ST/gen/token" 2>/dev/null)" = 600
check "state directory is 0700" test "$(stat -c %a "$ST/gen")" = 700
GT=$(cat "$ST/gen/token")
check "the log names the token's path" grep -qF "$ST/gen/token" "$T/serve.err"
check "the log never contains the token" sh -c "! grep -qF '$GT' '$T/serve.err'"
check "the generated token authenticates" test "$(A -H "X-Access-Token: $GT" "http://127.0.0.1:$PORT/v1/ops")" = 200
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null

# ---- the main server ----------------------------------------------------------
export ABX_SERVER_TOKEN=$TOK
bg "$BIN" serve --host 127.0.0.1 --port 0 --config "$T/config.json" --tools-dir "$T/tools" \
	--state-dir "$ST/main" --header-timeout 2 >"$T/serve.out" 2>"$T/serve.err"
SERVE_PID=$BGPID
wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10 || { not_ok "serve starts" "$(head -5 "$T/serve.err")"; exit 1; }
PORT=$(head -1 "$T/serve.out")
U=http://127.0.0.1:$PORT

check "/health needs no token" test "$(A "$U/health")" = 200

# ---- authentication ----------------------------------------------------------------
s=$(A "$U/v1/ops"); cp "$T/body" "$T/b401a"
check "no token: 401 auth.missing" sh -c "test $s = 401 && grep -q '\"code\":\"auth.missing\"' '$T/body'"
check "401 carries WWW-Authenticate: Bearer" grep -qi '^WWW-Authenticate: Bearer' "$T/hdr"
s=$(A "$U/v1/no/such/route"); cp "$T/body" "$T/b401b"
check "unknown route without a token: the same 401" sh -c "test $s = 401 && cmp -s '$T/b401a' '$T/b401b'"
s=$(A -X DELETE "$U/v1/ops/hello.run")
check "any method without a token: the same 401" sh -c "test $s = 401 && cmp -s '$T/b401a' '$T/body'"
# Methods the API does not route and the asterisk target: the same 401 and an
# audit record (before: 405 with Allow, or 404 for OPTIONS *, and no record).
n0=$(grep -c '"event":"auth.failure"' "$T/audit.jsonl" 2>/dev/null)
for req in "TRACE /v1/ops" "CONNECT /v1/ops" "PROPFIND /v1/ops" "get /v1/ops" "FOO-BAR /health" \
	"OPTIONS *" "DELETE /health"; do
	printf '%s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' "$req" |
		"$PY" -S "$FIXTURES/rawhttp.py" "$PORT" >"$T/r" 2>"$T/rerr"
	sed '1,/^\r$/d' "$T/r" >"$T/rbody"
	check "$req without a token: the same 401" \
		sh -c "grep -q '^HTTP/1.1 401 ' '$T/r' && grep -qi '^WWW-Authenticate: Bearer' '$T/r' && cmp -s '$T/b401a' '$T/rbody'"
	m=${req%% *}
	check "$req without a token: an audit record" \
		grep -q "\"event\":\"auth.failure\",\"code\":\"auth.missing\",\"peer\":\"127.0.0.1:[0-9]*\",\"method\":\"$m\"" "$T/audit.jsonl"
done
check "one audit record per refused request" test "$(grep -c '"event":"auth.failure"' "$T/audit.jsonl")" -eq $((n0 + 7))
# A 4 KB path is cut in the record, never the record dropped (records over
# 4096 bytes were dropped); 60 identical refusals are counted, not written 60 times.
"$PY" -S - "$PORT" <<'PYEOF' >"$T/flood" 2>&1
import socket, sys
port = int(sys.argv[1])
path = "/v1/" + "x" * 4096
codes = []
for i in range(60):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(("GET %s HTTP/1.1\r\nHost: t\r\nX-Access-Token: wrong\r\nConnection: close\r\n\r\n" % path).encode())
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    codes.append(data.split(b" ")[1].decode())
    s.close()
print("codes", " ".join(sorted(set(codes))))
PYEOF
# the records of the long path ($T/long), and whether they are fewer than
# the 60 refusals and their counts add up to 60 (a window's count is written
# once its second is over, and the flood may span a few)
folded60() {
	grep '"path":"/v1/xxxx' "$T/audit.jsonl" >"$T/long"
	"$PY" -c "
import json, sys
recs = [json.loads(l) for l in open('$T/long')]
total = sum(1 + r.get('repeated', 0) if r['event'] == 'auth.failure' else r['repeated'] for r in recs)
sys.exit(0 if len(recs) < 60 and total == 60 else 1)"
}
wait_until 10 folded60 || true
check "60 wrong tokens with a 4 KB path: all 401" grep -q '^codes 401$' "$T/flood"
check "a 4 KB path: the record is written, the path cut to 256 bytes and marked" \
	sh -c "grep -q '\"path\":\"/v1/x\{252\}\",\"truncated\":true' '$T/long'"
check "60 identical refusals: fewer records ($(wc -l <"$T/long")), and the counts add up to 60" folded60
s=$(A -H "X-Access-Token: wrong" "$U/v1/ops"); cp "$T/body" "$T/b401c"
s2=$(A -H "X-Access-Token: wrong" "$U/v1/nothing-here")
check "wrong token: 401 auth.invalid, same for unknown routes" \
	sh -c "test $s = 401 && test $s2 = 401 && grep -q auth.invalid '$T/b401c' && cmp -s '$T/b401c' '$T/body'"
check "token in the query string is ignored" test "$(A "$U/v1/ops?access_token=$TOK&token=$TOK")" = 401
check "X-Access-Token works" test "$(A -H "X-Access-Token: $TOK" "$U/v1/ops")" = 200
check "Authorization: Bearer works" test "$(A -H "Authorization: Bearer $TOK" "$U/v1/ops")" = 200
check "the scheme is case-insensitive (bEaReR)" test "$(A -H "Authorization: bEaReR $TOK" "$U/v1/ops")" = 200
s=$(A -H "Authorization: Token $TOK" "$U/v1/ops")
check "Authorization: Token <valid>: 401 saying the scheme is wrong, not the token" \
	sh -c "test $s = 401 && grep -q 'auth.invalid' '$T/body' && grep -q 'the Authorization scheme is not Bearer' '$T/body' && ! grep -q '$TOK' '$T/body'"
check "both headers, same token: 200" test "$(A -H "Authorization: Bearer $TOK" -H "X-Access-Token: $TOK" "$U/v1/ops")" = 200
check "both headers, different tokens: 401" \
	test "$(A -H "Authorization: Bearer $TOK" -H "X-Access-Token: $ALICE" "$U/v1/ops")" = 401
check "Basic scheme: 401" test "$(A -H "Authorization: Basic $TOK" "$U/v1/ops")" = 401
check "two X-Access-Token fields: 401" test "$(A -H "X-Access-Token: $TOK" -H "X-Access-Token: $TOK" "$U/v1/ops")" = 401
check "unauthenticated calls opened no connection to the registry" test "$(conns)" = 0
s=$(A -X POST "$U/v1/ops/hello.run" -d '{"word":"x"}')
check "unauthenticated op that installs: 401 and zero connections" sh -c "test $s = 401 && test $(conns) = 0"

# ---- policy --------------------------------------------------------------------------
s=$(A -H "X-Access-Token: $ALICE" -X POST "$U/v1/ops/hello.run" -d '{"word":"x"}')
check "deny of install holds for an otherwise-admin principal: 403 policy.denied" \
	sh -c "test $s = 403 && grep -q '\"code\":\"policy.denied\"' '$T/body'"
check "the denial names the op and the rule" \
	sh -c "grep -q '\"op\":\"hello.run\"' '$T/body' && grep -q 'deny agents.hello.install' '$T/body'"
s=$(A -H "X-Access-Token: $ALICE" -X POST "$U/v1/agents/runtimes/hello/install")
check "alice cannot call the install endpoint either" test "$s" = 403
s=$(A -H "X-Access-Token: $BOB" -X POST "$U/v1/ops/hello.run" -d '{"word":"x"}')
check "bob (allow echo.* only) is denied hello.run" test "$s" = 403
check "denied calls opened no connection to the registry" test "$(conns)" = 0
s=$(A -H "X-Access-Token: $BOB" "$U/v1/ops")
check "GET /v1/ops lists only what bob may call" \
	sh -c "test $s = 200 && grep -q '\"echo.args\"' '$T/body' && ! grep -q '\"hello.run\"' '$T/body'"
s=$(A -H "X-Access-Token: $BOB" -X POST "$U/v1/ops/echo.args" -d '{"a":"hi"}')
check "bob may call echo.args" test "$s" = 200

# ---- command ops ------------------------------------------------------------------------
H="X-Access-Token: $TOK"
s=$(A -H "$H" -X POST "$U/v1/ops/echo.args" --data-binary @- <<'EOF'
{"a": "; rm -rf /tmp/x; touch PWNED", "b": "$(touch PWNED2)\n`id` | cat"}
EOF
)
check "hostile arguments: 200" test "$s" = 200
check "hostile arguments are plain argv (no shell)" \
	grep -qF '"stdout":"; rm -rf /tmp/x; touch PWNED $(touch PWNED2)\n`id` | cat\n"' "$T/body"
check "nothing the arguments named was run" sh -c "! ls PWNED PWNED2 '$T'/PWNED* >/dev/null 2>&1"
check "the answer has exit_code, stderr, duration_ms, truncated" \
	sh -c "grep -q '\"exit_code\":0' '$T/body' && grep -q '\"stderr\":\"\"' '$T/body' && grep -q '\"duration_ms\":' '$T/body' && grep -q '\"truncated\":false' '$T/body'"
s=$(A -H "$H" -X POST "$U/v1/ops/echo.args" -d '{}')
check "missing required parameter: 400 request.invalid" sh -c "test $s = 400 && grep -q request.invalid '$T/body'"
s=$(A -H "$H" -X POST "$U/v1/ops/echo.args" -d '{"a":"x","zzz":"y"}')
check "undeclared parameter: 400" test "$s" = 400
s=$(A -H "$H" -X POST "$U/v1/ops/echo.num" -d '{"n":"12; id"}')
check "wrong type (string for integer): 400" test "$s" = 400
s=$(A -H "$H" -X POST "$U/v1/ops/echo.num" -d '{"n":42}')
check "integer parameter substituted" sh -c "test $s = 200 && grep -q '\"stdout\":\"42\\\\n\"' '$T/body'"
s=$(A -H "$H" -X POST "$U/v1/ops/echo.args" -d '{"a":')
check "malformed JSON body: 400 json.syntax" sh -c "test $s = 400 && grep -q json.syntax '$T/body'"
s=$(A -H "$H" -X POST "$U/v1/ops/echo.args" -d '["a"]')
check "non-object body: 400" test "$s" = 400
s=$(A -H "$H" -X POST "$U/v1/ops/true")
check "true op: 200, exit 0" sh -c "test $s = 200 && grep -q '\"exit_code\":0' '$T/body'"
# a program missing from the image is a coded error with a fix
s=$(A -H "$H" -X POST "$U/v1/ops/gone.make")
check "a missing program: 500 command.unavailable" sh -c "test $s = 500 && grep -q '\"code\":\"command.unavailable\"' '$T/body'"
check "... naming the program, with a remedy" sh -c "grep -q 'gone.make: program /nonexistent/abx/make: No such file or directory' '$T/body' && grep -q '\"remedy\":\"install the program in the image' '$T/body'"
s=$(A -H "$H" -X POST "$U/v1/ops/no.such.op")
check "unknown op (authenticated): 404" test "$s" = 404
s=$(A -H "$H" -X POST "$U/v1/ops/echo.arg")
check "a typo in an op: 404 with a did-you-mean ($(head -c 200 "$T/body"))" \
	sh -c "test $s = 404 && grep -q 'no op echo.arg (did you mean echo.args?)' '$T/body'"
s=$(A -H "X-Access-Token: $BOB" -X POST "$U/v1/ops/hello.rum")
check "... never naming an op the caller may not call" sh -c "test $s = 404 && ! grep -q 'did you mean' '$T/body'"
s=$(A -H "$H" "$U/v1/agents/runtimes/helo")
check "a typo in an agent: 404 with a did-you-mean ($(head -c 200 "$T/body"))" \
	sh -c "test $s = 404 && grep -q 'no agent helo is enabled (did you mean hello?)' '$T/body'"
s=$(A -H "$H" "$U/v1/ops/true")
check "GET on an op: 405 with Allow: POST" sh -c "test $s = 405 && grep -qi '^Allow: POST' '$T/hdr'"
s=$(A -H "$H" -X POST "$U/v1/ops/env.show")
check "env reduced to the allow-list" \
	sh -c "test $s = 200 && grep -q 'API_ALLOWED=visible' '$T/body' && ! grep -q 'API_SECRET' '$T/body' && ! grep -q PATH= '$T/body' && ! grep -q '$TOK' '$T/body'"
s=$(A -H "$H" -X POST "$U/v1/ops/flood")
check "output over the cap: truncated true, stdout cut at 1024" \
	sh -c "test $s = 200 && grep -q '\"truncated\":true' '$T/body' && grep -qE '\"stdout\":\"x{1024}\"' '$T/body'"
check "stderr captured beside a truncated stdout" grep -q '"stderr":"err\\n"' "$T/body"

s=$(A -H "$H" -X POST "$U/v1/ops/stubborn")
check "a child ignoring SIGTERM: answered after timeout + grace, killed (137), not waited for" \
	sh -c "test $s = 200 && grep -q '\"timed_out\":true' '$T/body' && grep -q '\"exit_code\":137' '$T/body'"
check "... and its whole group is gone (no orphan)" no_proc "sleep 7[78]$$"

"$PY" "$FIXTURES/apiclient.py" concurrent "$PORT" "$TOK" 2 /v1/ops/one.at.a.time >"$T/conc" 2>&1
check "concurrency limit 1: two at once → one 200, one 429" \
	sh -c "grep -c '^200 200' '$T/conc' | grep -qx 1 && grep -c '^429 429' '$T/conc' | grep -qx 1"
s=$(A -H "$H" -X POST "$U/v1/ops/one.at.a.time" -o /dev/null) # drain
# the second call once the first one's process runs (10 s at most)
bash -c "curl -s -o /dev/null -H '$H' -X POST $U/v1/ops/one.at.a.time &
	i=0; while ! pgrep -f 'slee[p] 1[.]$$' >/dev/null && [ \$i -lt 200 ]; do sleep 0.05; i=\$((i + 1)); done
	curl -s -D '$T/hdr429' -o /dev/null -H '$H' -X POST $U/v1/ops/one.at.a.time; wait"
check "429 carries Retry-After" grep -qi '^Retry-After: 1' "$T/hdr429"

# ---- install on first use: 8 concurrent callers, one job, one download -----------------------
# (ops run off the workers, so 8 callers can reach the op's limit of 4 at
# once: they retry a 429 as a client honouring Retry-After does)
RETRY429=1 "$PY" "$FIXTURES/apiclient.py" concurrent "$PORT" "$TOK" 8 /v1/ops/hello.run '{"word":"first"}' >"$T/c8" 2>&1
check "8 concurrent first-use calls all end 200" test "$(grep -c ' 200 ' "$T/c8")" = 8
check "exactly one download of the tarball" test "$(gets /f/hello-1.0.0.tgz)" = 1
s=$(A -H "$H" -X POST "$U/v1/ops/hello.run" -d '{"word":"again"}')
check "the installed tool runs by absolute path with its argument" \
	sh -c "test $s = 200 && grep -q '\"stdout\":\"hello 1.0.0 again\\\\n\"' '$T/body'"
check "still one download after the tool is ready" test "$(gets /f/hello-1.0.0.tgz)" = 1
s=$(A -H "$H" "$U/v1/agents/runtimes/hello")
check "runtime hello: ready" sh -c "test $s = 200 && grep -q '\"state\":\"ready\"' '$T/body'"
s=$(A -H "$H" "$U/v1/agents/runtimes")
check "runtimes list has hello and badsum" \
	sh -c "test $s = 200 && grep -q '\"name\":\"hello\"' '$T/body' && grep -q '\"name\":\"badsum\"' '$T/body'"
s=$(A -H "$H" "$U/v1/agents/runtimes/nosuch")
check "runtime of an agent not enabled: 404" test "$s" = 404
s=$(A -H "$H" -X POST "$U/v1/agents/runtimes/hello/install")
check "install endpoint on a ready tool: 200 ready" sh -c "test $s = 200 && grep -q '\"state\":\"ready\"' '$T/body'"

# ---- failures: checksum mismatch, backoff, reset ---------------------------------------------
s=$(A -H "$H" -X POST "$U/v1/ops/bad.run")
check "checksum mismatch: 502 install.checksum_mismatch" \
	sh -c "test $s = 502 && grep -q install.checksum_mismatch '$T/body'"
s=$(A -H "$H" -X POST "$U/v1/ops/bad.run")
check "right after: 503 install.backoff with Retry-After" \
	sh -c "test $s = 503 && grep -q install.backoff '$T/body' && grep -qi '^Retry-After: [0-9]' '$T/hdr'"
n=$(gets /f/badsum-1.0.0.tgz)
s=$(A -H "$H" -X POST "$U/v1/agents/runtimes/badsum/install" -d '{"reset":true}')
check "reset clears the backoff: the install runs again (502, a new download)" \
	sh -c "test $s = 502 && test $(gets /f/badsum-1.0.0.tgz) -gt $n"
s=$(A -H "$H" -X POST "$U/v1/agents/runtimes/badsum/install" -d '{"reset":"yes"}')
check "reset must be a boolean: 400" test "$s" = 400
# An install job whose download is answered 503 with Connection: close: the
# client read the reason from the freed connection and serve died (SIGSEGV)
s=$(A -H "$H" -X POST "$U/v1/ops/gone.run")
check "a download answered 503 with Connection: close: 502 install.failed naming http.status" \
	sh -c "test $s = 502 && grep -q '\"code\":\"install.failed\"' '$T/body' && grep -q 'http.status: .*HTTP 503 Service Unavailable' '$T/body'"
check "... its details from the install job: phase fetch, the client's code" \
	grep -q '"details":{"phase":"fetch","code":"http.status","url":"' "$T/body"
check "... serve is still running" kill -0 "$SERVE_PID"
check "... /health answers" test "$(A "$U/health")" = 200
s=$(A -H "$H" -X POST "$U/v1/ops/hello.run" -d '{"word":"after"}')
check "... and another op runs" sh -c "test $s = 200 && grep -q 'hello 1.0.0 after' '$T/body'"

# ---- audit and metrics ----------------------------------------------------------------------
check "audit: auth failures recorded" grep -q '"event":"auth.failure"' "$T/audit.jsonl"
check "audit: policy denials name principal and rule" \
	grep -q '"event":"policy.denied","principal":"alice","op":"hello.run"' "$T/audit.jsonl"
check "audit: install records name the principal and op" \
	sh -c "grep '\"tool\":\"hello\"' '$T/audit.jsonl' | grep -q '\"principal\":\"default\"'"
check "audit: install.finish has duration, bytes and the artifact digest" \
	sh -c "grep '\"event\":\"install.finish\"' '$T/audit.jsonl' | grep '\"tool\":\"hello\"' | grep '\"duration_ms\":' | grep '\"bytes\":' | grep -q '\"artifact_sha256\":'"
check "audit never contains a token" \
	sh -c "! grep -qF -e '$TOK' -e '$ALICE' -e '$BOB' -e wrong '$T/audit.jsonl'"
s=$(A -H "$H" "$U/metrics")
check "metrics: Prometheus text with requests by route and status" \
	sh -c "test $s = 200 && grep -q '^abx_http_requests_total{route=\"ops_run\",status=\"200\"} [1-9]' '$T/body'"
check "metrics: latency histogram" grep -q '^abx_http_request_duration_seconds_bucket{route="ops_run",le="+Inf"} [1-9]' "$T/body"
check "metrics: installs and bytes" \
	sh -c "grep -q '^abx_installs_succeeded_total 1' '$T/body' && grep -q '^abx_install_downloaded_bytes_total [1-9]' '$T/body'"
check "metrics: jobs" grep -q '^abx_install_jobs_running 0' "$T/body"
check "metrics need a token" test "$(A "$U/metrics")" = 401

# ---- malformed and smuggling-shaped requests -----------------------------------------------
raw() { printf "$1" | "$PY" -S "$FIXTURES/rawhttp.py" "$PORT" >"$T/r" 2>"$T/rerr"; }
raw "POST /v1/ops/true HTTP/1.1\r\nHost: t\r\nX-Access-Token: $TOK\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
check "Content-Length with Transfer-Encoding: 400 and closed" sh -c "grep -q '^HTTP/1.1 400' '$T/r' && grep -q CLOSED '$T/rerr'"
raw "POST /v1/ops/true HTTP/1.1\r\nHost: t\r\nX-Access-Token: $TOK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"
check "two Content-Lengths: 400 and closed" sh -c "grep -q '^HTTP/1.1 400' '$T/r' && grep -q CLOSED '$T/rerr'"
raw "GET /v1/ops HTTP/1.1\r\nHost: t\r\nX-Access-Token: $TOK\r\n folded\r\n\r\n"
check "obs-fold: 400 and closed" sh -c "grep -q '^HTTP/1.1 400' '$T/r' && grep -q CLOSED '$T/rerr'"
raw "GET /v1/ops HTTP/1.1\nHost: t\nX-Access-Token: $TOK\n\n"
check "bare LF line ends: 400" grep -q '^HTTP/1.1 400' "$T/r"
raw "GET /v1/ops HTTP/1.1\r\nHost: t\r\nX-Access-Token : $TOK\r\n\r\n"
check "space before the colon: 400" grep -q '^HTTP/1.1 400' "$T/r"
s=$(A -H "$H" "$U/metrics")
check "metrics count what the server core refused (route server, status 400)" \
	grep -q '^abx_http_requests_total{route="server",status="400"} [1-9]' "$T/body"
check "the server still answers after all that" test "$(A -H "$H" "$U/v1/ops")" = 200

# ---- slow connections cut at their deadline while a fresh request is served ------------------
# (all from 127.0.0.1: server.max_connections_per_peer is raised to 512 above for them)
"$PY" "$FIXTURES/apiclient.py" slow "$PORT" "$TOK" 300 3 10 >"$T/slow" 2>&1
held=$(sed -n 's/.*held=\([0-9]*\).*/\1/p' "$T/slow")
check "300 slow connections opened" grep -q 'opened=300' "$T/slow"
check "a fresh authenticated request answered 200 while they are held ($held)" \
	sh -c "grep -q 'fresh_status=200' '$T/slow' && test '${held:-0}' -gt 0"
check "every slow connection cut at the header deadline, before the client's own 10 s" \
	grep -q 'closed=300' "$T/slow"

# ---- SIGHUP reload ------------------------------------------------------------------------
cp "$T/cmds.json" "$T/cmds.bak"
sed 's/^\[/[{"id": "added.op", "argv": ["true"]},/' "$T/cmds.bak" >"$T/cmds.json"
kill -HUP "$SERVE_PID"
wait_for_line "$T/serve.err" 'configuration reloaded' 10
check "SIGHUP reloads: a new op appears" test "$(A -H "$H" -X POST "$U/v1/ops/added.op")" = 200
echo '[{"id": "broken", "argv": ["true"], "bogus": 1}]' >"$T/cmds.json"
kill -HUP "$SERVE_PID"
wait_for_line "$T/serve.err" 'reload failed' 10
check "a bad file on reload is logged with why" grep -q 'reload failed, keeping the previous configuration: config.invalid' "$T/serve.err"
check "... and the previous configuration stays" test "$(A -H "$H" -X POST "$U/v1/ops/added.op")" = 200
# The commands file replaced by a FIFO: the reload refuses it at once (an
# open(2) of a FIFO used to wait for a writer forever, and no reload came after).
rm -f "$T/cmds.json"
mkfifo "$T/cmds.json"
kill -HUP "$SERVE_PID"
wait_for_line "$T/serve.err" 'cmds.json is not a regular file (a FIFO)' 10
check "a FIFO on reload is refused with why" \
	grep -q "reload failed, keeping the previous configuration: io.error: $T/cmds.json is not a regular file (a FIFO)" "$T/serve.err"
check "... and the previous configuration stays" test "$(A -H "$H" -X POST "$U/v1/ops/added.op")" = 200
rm -f "$T/cmds.json"
cp "$T/cmds.bak" "$T/cmds.json"
kill -HUP "$SERVE_PID"
# an earlier reload already wrote the line: wait for the second one
i=0
while [ "$(grep -c 'configuration reloaded' "$T/serve.err")" -lt 2 ] && [ $i -lt 200 ]; do
	sleep 0.05
	i=$((i + 1))
done
check "after the FIFO, a regular file reloads again" \
	sh -c "test \$(grep -c 'configuration reloaded' '$T/serve.err') -ge 2"

curl -s -o "$T/long" -H "$H" -X POST "$U/v1/ops/long" &
cpid=$!
i=0
while ! pgrep -f "sleep 97$$" >/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kill -TERM "$SERVE_PID"
wait_exit "$SERVE_PID" 60
wait "$cpid"
check "SIGTERM with an op running: serve ends it and exits 0" test $RC = 0
check "... and the op's group is ended" no_proc "sleep 97$$"
check "... and the op's caller still got its answer" grep -q '"stopped":true' "$T/long"

# ---- 202, then polling, then 200 (install.wait 1, a 6 s download: the job is still pending when a loaded machine gets to ask) ------------------------------
bg "$BIN" serve --host 127.0.0.1 --port 0 --config "$T/config-wait1.json" --tools-dir "$T/tools" \
	--state-dir "$ST/main" >"$T/serve.out" 2>"$T/serve.err"
SERVE_PID=$BGPID
wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10 || { not_ok "serve (wait 1) starts" "$(head -5 "$T/serve.err")"; exit 1; }
PORT=$(head -1 "$T/serve.out")
U=http://127.0.0.1:$PORT
s=$(A -H "$H" -X POST "$U/v1/ops/slow.run")
cp "$T/body" "$T/b202"
JOB=$(sed -n 's/.*"id":"\(ij_[0-9a-f]*\)".*/\1/p' "$T/b202")
check "slow install: 202 after install.wait (1 s), while the 6 s download runs" test "$s" = 202
check "202 body is an install.job, pending, retry_after 5" \
	sh -c "grep -q '\"object\":\"install.job\"' '$T/b202' && grep -q '\"status\":\"pending\"' '$T/b202' && grep -q '\"retry_after\":5' '$T/b202' && grep -q '\"phase\":' '$T/b202'"
check "202 has Retry-After: 5" grep -qi '^Retry-After: 5' "$T/hdr"
s=$(A -H "$H" -X POST "$U/v1/ops/slow.run")
check "repeating the call joins the same job" sh -c "test $s = 202 && grep -q '\"id\":\"$JOB\"' '$T/body'"
s=$(A -H "$H" "$U/v1/install/jobs/$JOB")
check "GET /v1/install/jobs/<id>: pending" sh -c "test $s = 200 && grep -q '\"status\":\"pending\"' '$T/body'"
i=0
while [ $i -lt 40 ]; do
	A -H "$H" "$U/v1/install/jobs/$JOB" >/dev/null
	grep -q '"status":"pending"' "$T/body" || break
	sleep 0.25
	i=$((i + 1))
done
check "polling the job ends in succeeded" grep -q '"status":"succeeded"' "$T/body"
s=$(A -H "$H" -X POST "$U/v1/ops/slow.run")
check "then the op answers 200" sh -c "test $s = 200 && grep -q 'slowtool 1.0.0' '$T/body'"
check "one download for the slow tool" test "$(gets /slow/6/slowtool-1.0.0.tgz)" = 1
check "unknown job: 404" test "$(A -H "$H" "$U/v1/install/jobs/ij_0000000000000000")" = 404
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null

# ---- mode build: 424 install.required, nothing downloaded --------------------------------------
n=$(conns)
bg "$BIN" serve --host 127.0.0.1 --port 0 --config "$T/config.json" --tools-dir "$T/tools" --mode build \
	--state-dir "$ST/main" >"$T/serve.out" 2>"$T/serve.err"
SERVE_PID=$BGPID
wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10 || { not_ok "serve (build) starts" "$(head -5 "$T/serve.err")"; exit 1; }
U=http://127.0.0.1:$(head -1 "$T/serve.out")
s=$(A -H "$H" -X POST "$U/v1/ops/lazy2.run")
check "mode build, tool missing: 424 install.required" sh -c "test $s = 424 && grep -q install.required '$T/body'"
s=$(A -H "$H" -X POST "$U/v1/ops/hello.run" -d '{"word":"built"}')
check "mode build, tool installed: 200" test "$s" = 200
check "mode build opened no connection" test "$(conns)" = "$n"
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null

# ---- command ops do not hold a worker while they run --------------------------------------------
# Two workers, four ops that wait for a gate file: all four run at once, and
# a request that needs a worker (GET /v1/ops) is answered while they wait.
GATE=$T/gate-open
cat >"$T/gate.json" <<EOF
[{"id": "wait.gate", "argv": ["/bin/sh", "-c", "while [ ! -e '$GATE' ]; do sleep 0.05; done; echo through"],
  "concurrency": 8, "timeout": 120}]
EOF
bg "$BIN" serve --host 127.0.0.1 --port 0 --commands "$T/gate.json" --tools-dir "$T/tools" --workers 2 \
	--state-dir "$ST/main" >"$T/serve.out" 2>"$T/serve.err"
SERVE_PID=$BGPID
if wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10; then
	U=http://127.0.0.1:$(head -1 "$T/serve.out")
	gpids=""
	for k in 1 2 3 4; do
		curl -s -m 120 -o "$T/gate$k" -w '%{http_code}\n' -H "$H" -X POST "$U/v1/ops/wait.gate" >"$T/gate$k.st" &
		gpids="$gpids $!"
	done
	i=0
	while [ "$(pgrep -f "$GATE" | wc -l)" -lt 4 ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done
	check "2 workers: 4 long ops run at once" test "$(pgrep -f "$GATE" | wc -l)" -ge 4
	s=$(A -m 20 -H "$H" "$U/v1/ops")
	check "... and a request needing a worker is answered meanwhile" test "$s" = 200
	check "... and /health too" test "$(A -m 20 "$U/health")" = 200
	check "... while all 4 ops are still waiting" sh -c "test ! -s '$T/gate1.st' && test ! -s '$T/gate4.st'"
	touch "$GATE"
	for p in $gpids; do wait "$p"; done
	check "the 4 ops then end 200 with their output" \
		sh -c "test \$(cat '$T'/gate[1-4].st | grep -c '^200\$') = 4 && test \$(grep -l '\"stdout\":\"through\\\\n\"' '$T'/gate[1-4] | wc -l) = 4"
	s=$(A -H "$H" "$U/metrics")
	check "the deferred answers are counted in the metrics" \
		grep -q '^abx_http_requests_total{route="ops_run",status="200"} 4$' "$T/body"
else
	not_ok "serve (2 workers) starts" "$(head -5 "$T/serve.err")"
fi
kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null

# ---- nothing writable: serve starts, installs answer install.read_only -------------------------
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
	mkdir -p "$T/ro/tools" "$T/ro/state"
	chmod 700 "$T/ro/tools" "$T/ro/state"
	bg unshare -m sh -c "mount --bind -o ro '$T/ro' '$T/ro' && exec '$BIN' serve --host 127.0.0.1 --port 0 \
		--config '$T/config.json' --tools-dir '$T/ro/tools' --state-dir '$T/ro/state'" >"$T/serve.out" 2>"$T/serve.err"
	SERVE_PID=$BGPID
	if wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10; then
		ok "read-only tools and state directories: serve starts"
		U=http://127.0.0.1:$(head -1 "$T/serve.out")
		n=$(conns)
		s=$(A -H "$H" -X POST "$U/v1/ops/lazy2.run")
		check "read-only tools directory: 503 install.read_only" \
			sh -c "test $s = 503 && grep -q install.read_only '$T/body'"
		check "read-only: no connection opened" test "$(conns)" = "$n"
		check "read-only: command ops without installs still run" \
			test "$(A -H "$H" -X POST "$U/v1/ops/true")" = 200
	else
		not_ok "read-only tools and state directories: serve starts" "$(head -5 "$T/serve.err")"
	fi
	kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null
else
	skip "read-only tools directory" "needs root and unshare"
fi

# ---- an installer interrupted (Ctrl-C) is dead, not installing ------------
# interrupt NAME: prepare NAME into $T/tint, SIGINT once it is downloading (a
# background job starts with SIGINT ignored: python gives it back its default)
interrupt() {
	ABX_TEST_PAUSE=download python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$BIN_HOOKS" prepare -q --config "$T/config.json" --tools-dir "$T/tint" --only "$1" \
		>"$T/int.out" 2>"$T/int.err" &
	_ip=$!
	wait_for_line "$T/int.err" "paused at download" 20 || not_ok "prepare $1 pauses at download" "$(cat "$T/int.err")"
	kill -INT $_ip
	wait $_ip 2>/dev/null
}
interrupt hello
check "after Ctrl-C: its staging directory and progress record are left" \
	sh -c "ls -d '$T/tint/.staging/'hello-* >/dev/null && test -e '$T/tint/hello/.progress.json'"
bg "$BIN" serve --host 127.0.0.1 --port 0 --config "$T/config.json" --tools-dir "$T/tint" \
	--state-dir "$ST/int" >"$T/serve.out" 2>"$T/serve.err"
SERVE_PID=$BGPID
if wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10; then
	U=http://127.0.0.1:$(head -1 "$T/serve.out")
	s=$(A -H "X-Access-Token: $TOK" "$U/v1/agents/runtimes/hello")
	check "after Ctrl-C: the runtime is missing, not installing ($(head -c 300 "$T/body"))" \
		sh -c "test $s = 200 && grep -q '\"state\":\"missing\"' '$T/body' && grep -q '\"progress\":null' '$T/body'"
else
	not_ok "serve starts (interrupted installer)" "$(head -5 "$T/serve.err")"
fi
kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null
interrupt badsum
run "$BIN" prepare -q --config "$T/config.json" --tools-dir "$T/tint" --only hello
expect "after Ctrl-C: the rerun installs" 0
check "... and removed the dead installers' staging, its own and another tool's" \
	sh -c "test -z \"\$(ls -A '$T/tint/.staging')\""
exit 0
