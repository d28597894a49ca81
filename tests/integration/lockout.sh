# Nobody locks out anybody: floods from many loopback addresses (Linux
# routes all of 127/8 to lo) while an authorized client from 127.0.0.1 is
# answered in under a second and GET /health from 127.0.0.254 is never 503:
# a principal every op denies holding request slots with bodies it never
# finishes, and half heads without a token evicting a client whose head
# arrives in two pieces; admitted bodies that stall holding every slot.
# Then wrong tokens taking turns with two paths and
# many addresses: the audit file and the access log stay under their bound
# and their counts add up.
. "$TOP/tests/lib.sh"

PY=$(python3 -c 'import sys; print(sys.executable)')
probe() { "$PY" -S "$FIXTURES/httpprobe.py" "$@"; }

ADMIN=lockout-admin-$$
NOBODY=lockout-nobody-$$
hex() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
cat >"$T/policy.json" <<EOF
{"principals": {
  "admin": {"token_sha256": "$(hex "$ADMIN")", "preset": "admin"},
  "nobody": {"token_sha256": "$(hex "$NOBODY")", "allow": []}}}
EOF
printf '[{"id":"echo","argv":["/bin/echo","{word}"],"params":{"word":{"type":"string","required":true}}}]\n' \
	>"$T/cmds.json"
cat >"$T/config.json" <<EOF
{"commands": "$T/cmds.json", "policy": "$T/policy.json", "audit_file": "$T/audit.jsonl",
 "server": {"max_connections": 32, "max_connections_per_peer": 32}}
EOF
mkdir -p "$T/state"
chmod 700 "$T/state"
serve_lockout() { start_serve --config "$T/config.json" --state-dir "$T/state" --tools-dir "$T/tools"; }
SRCS="127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5 127.0.0.6 127.0.0.7 127.0.0.8 127.0.0.9"

# answered NAME: the probe's authorized requests all 200 within a second,
# its /health all 200.
answered() {
	a=$(sed -n 's/^authorized //p' "$T/p")
	h=$(sed -n 's/^health //p' "$T/p")
	check "$1: the authorized client is answered 200 in under 1 s throughout ($a)" \
		sh -c "echo '$a' | awk '{ exit !(\$1 == 200 && \$2 == \"worst\" && \$3 < 1000) }'"
	check "$1: /health from another address is 200 throughout ($h)" test "$h" = 200
}

# ---- a principal whose every request is denied holds bodies it never finishes ----------
if serve_lockout; then
	# shellcheck disable=SC2086
	probe lockout "$PORT" denied 8 10 $SRCS "$NOBODY" "$ADMIN" >"$T/p" 2>&1
	answered "64 stalled bodies of a denied principal from 8 addresses, 32 slots"
	check "... its requests past a quarter of the slots are answered 429 request.rate_limited" \
		grep -q ' POST /v1/ops/echo 429 ' "$T/serve.err"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "denied bodies" "serve did not start: $(head -3 "$T/serve.err")"
fi

# ---- half heads without a token from many addresses; the client's head in two pieces ----
if serve_lockout; then
	# shellcheck disable=SC2086
	probe lockout "$PORT" split 8 10 $SRCS "-" "$ADMIN" >"$T/p" 2>&1
	answered "64 half heads without a token from 8 addresses, 32 slots, the client's head in two pieces"
	# shellcheck disable=SC2086
	probe lockout "$PORT" whole 8 10 $SRCS "-" "$ADMIN" >"$T/p" 2>&1
	answered "the same flood, the client's head whole"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "split heads" "serve did not start: $(head -3 "$T/serve.err")"
fi

# ---- admitted bodies that stall fill the table ----------------------------------------------
# Four principals (a quarter of 4 slots each) send heads announcing a body,
# then nothing: the table is full of admitted requests. A new authorized
# request is answered once the oldest stall passes HTTPD_STALL_MS (2 s;
# before that it gets the reserve's 503), long before the 30 s body deadline.
{
	printf '{"principals": {"admin": {"token_sha256": "%s", "preset": "admin"}' "$(hex "$ADMIN")"
	for i in 1 2 3 4; do
		printf ', "s%d": {"token_sha256": "%s", "preset": "admin"}' "$i" "$(hex "stall$i-$$")"
	done
	printf '}}\n'
} >"$T/stall-policy.json"
cat >"$T/stall.json" <<EOF
{"commands": "$T/cmds.json", "policy": "$T/stall-policy.json",
 "server": {"max_connections": 4, "max_connections_per_peer": 4}}
EOF
if start_serve --verbose --config "$T/stall.json" --state-dir "$T/state" --tools-dir "$T/tools"; then
	probe stalled "$PORT" 15 "$ADMIN" 127.0.0.2=stall1-$$ 127.0.0.3=stall2-$$ \
		127.0.0.4=stall3-$$ 127.0.0.5=stall4-$$ >"$T/p" 2>&1
	check "4 stalled admitted bodies fill 4 slots: a new authorized request is answered 200 within 15 s ($(head -1 "$T/p"))" \
		grep -q '^authorized 200 ' "$T/p"
	check "... a stalled one was closed for it ($(sed -n 's/^stalled-closed //p' "$T/p"))" \
		grep -q '^stalled-closed [1-4] ' "$T/p"
	check "... and the log says so" \
		grep -q 'closed the longest-waiting connection 127\.0\.0\.[2-5].*(all 4 slots in use)' "$T/serve.err"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "stalled bodies" "serve did not start: $(head -3 "$T/serve.err")"
fi

# ---- wrong tokens taking turns with two paths, from 12 addresses ---------------------------
# Within each wall-clock second the first of each (address, method, path,
# code or status) is written and the rest counted; past 16 keys every other
# one counts under one key (per code in the audit file): at most 36 audit
# records and 34 folded access-log lines a second, however many requests,
# paths and addresses (24 keys here); 1 + the repeated counts is exactly the
# number of requests.
rm -f "$T/audit.jsonl"
if serve_lockout; then
	N=1200
	"$PY" -S - "$PORT" "$N" >"$T/span" <<'PYEOF'
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
t0 = int(time.time())
for i in range(n):
    s = socket.socket()
    s.bind(("127.0.0.%d" % (2 + i % 12), 0))
    s.connect(("127.0.0.1", port))
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nX-Access-Token: wrong\r\n\r\n"
               % ("/v1/ops" if (i // 12) % 2 else "/v1/jobs")).encode())
    while s.recv(65536):
        pass
    s.close()
print(int(time.time()) - t0 + 1)
PYEOF
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
	secs=$(cat "$T/span")
	recs=$(grep -c '"event":"auth.failure' "$T/audit.jsonl")
	total=$("$PY" -S -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if "auth.failure" in l]
print(sum(1 + r.get("repeated", 0) if r["event"] == "auth.failure" else r["repeated"] for r in recs))' \
		"$T/audit.jsonl")
	check "$N wrong tokens over $secs s, two paths in turn, 12 addresses: at most 36 audit records a second ($recs)" \
		test "$recs" -le $((36 * secs))
	check "... and the audit counts add up to $N ($total)" test "$total" -eq "$N"
	lines=$(grep -c ' 401 ' "$T/serve.err")
	alog=$(awk '/ 401 repeated / {t += $7; next} / 401 / {t++} END {print t + 0}' "$T/serve.err")
	check "... at most 34 access-log lines a second ($lines)" test "$lines" -le $((34 * secs))
	check "... and the access log counts add up to $N ($alog)" test "$alog" -eq "$N"
else
	not_ok "alternating flood" "serve did not start: $(head -3 "$T/serve.err")"
fi
