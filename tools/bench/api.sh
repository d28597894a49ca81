#!/bin/sh
# serve's API under load (issue 7 §9), rows "figure | ours | reference | ratio":
#   - an authenticated command op running /bin/true: req/s and p99 under wrk
#     (POST with a token, each request spawns a process) vs nginx serving a
#     static file with the same wrk arguments;
#   - resident memory with 256 open connections, serve vs nginx (master +
#     workers);
#   - wrong tokens that differ from the real one at the first byte, at the
#     last byte, and in length: median time to the 401, interleaved, so a
#     timing side channel would show as a ratio away from 1.00x.
# Environment: BIN, TOP (set by tools/bench.sh), OP_WRK_ARGS (default
# "-t2 -c4 -d5s --latency": four at once is the op's concurrency a gateway
# uses; p99 then measures the op, not a queue).
set -u
: "${TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$TOP/tools/benchlib.sh"
OP_WRK_ARGS=${OP_WRK_ARGS:--t2 -c4 -d5s --latency}

d=$(mktemp -d "${TMPDIR:-/tmp}/abx-bench-api.XXXXXX") || exit 1
pids=""
cleanup() {
	for p in $pids; do kill -TERM "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	rm -rf "$d"
}
trap cleanup EXIT
say() { printf 'bench/api: %s\n' "$*" >&2; }

ofig="op 'true' req/s, authenticated POST (wrk $OP_WRK_ARGS; ref: nginx static file)"
pfig="op 'true' p99 latency ms (same runs)"
mfig="RSS KiB with 256 open connections (nginx: master + workers)"
tfig1="401 median us: wrong token differing at the last byte vs at the first"
tfig2="401 median us: wrong token one byte longer vs differing at the first byte"
if ! has_applet serve; then
	for f in "$ofig" "$pfig" "$mfig" "$tfig1" "$tfig2"; do row "$f" n/a n/a "n/a (serve not built)"; done
	exit 0
fi

# ---- serve with a `true` op ----------------------------------------------------
TOK=bench-token-0123456789abcdef0123456789abcdef
printf '[{"id": "true", "argv": ["/bin/true"], "concurrency": 64}]\n' >"$d/cmds.json"
mkdir -p "$d/state" && chmod 700 "$d/state"
ABX_SERVER_TOKEN=$TOK "$BIN" serve -q --host 127.0.0.1 --port 0 --commands "$d/cmds.json" \
	--state-dir "$d/state" --tools-dir "$d/tools" --max-connections 1024 >"$d/serve.out" 2>"$d/serve.err" &
spid=$!
pids="$pids $spid"
i=0
until grep -q '^[0-9][0-9]*$' "$d/serve.out" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 "$spid" 2>/dev/null; then
		say "serve did not start: $(tail -3 "$d/serve.err" | tr '\n' ' ')"
		exit 1
	fi
	sleep 0.05
done
sport=$(head -1 "$d/serve.out")

# ---- nginx with a static file ----------------------------------------------------
if nginx_start "$d" op '{"exit_code":0,"stdout":"","stderr":"","duration_ms":0,"truncated":false}' 2 off; then
	npid=$NGINX_PID nport=$NGINX_PORT
	pids="$pids $npid"
else
	npid="" nport=""
	say "$NGINX_WHY"
fi

# ---- the op under wrk ---------------------------------------------------------------
wrk_run() { # NAME URL [SCRIPT]: sets RPS, P99 (ms), BAD
	# shellcheck disable=SC2086
	wrk $OP_WRK_ARGS ${3:+-s "$3"} "$2" >"$d/wrk-$1.txt" 2>&1
	cat "$d/wrk-$1.txt" >&2
	RPS=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$d/wrk-$1.txt")
	P99=$(awk '$1 == "99%" { v = $2; u = v; sub(/[a-z]+$/, "", v); sub(/^[0-9.]+/, "", u)
		m = (u == "us") ? v / 1000 : (u == "s") ? v * 1000 : v; printf "%.2f", m }' "$d/wrk-$1.txt")
	BAD=$(awk '/Non-2xx or 3xx responses:/ { n += $NF } /Socket errors:/ {
		for (i = 3; i <= NF; i++) { v = $i; gsub(/,/, "", v); if (v ~ /^[0-9]+$/) n += v } } END { print n + 0 }' "$d/wrk-$1.txt")
}
if ! command -v wrk >/dev/null 2>&1; then
	row "$ofig" n/a n/a "n/a (wrk not installed)"
	row "$pfig" n/a n/a "n/a (wrk not installed)"
else
	cat >"$d/op.lua" <<EOF
wrk.method = "POST"
wrk.body = "{}"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Access-Token"] = "$TOK"
EOF
	say "wrk $OP_WRK_ARGS: POST /v1/ops/true"
	wrk_run serve "http://127.0.0.1:$sport/v1/ops/true" "$d/op.lua"
	srps=$RPS sp99=$P99
	[ "$BAD" -gt 0 ] && srps="$srps ($BAD errors)"
	if [ -n "$nport" ]; then
		say "wrk $OP_WRK_ARGS: nginx GET /op"
		wrk_run nginx "http://127.0.0.1:$nport/op"
		row "$ofig" "$srps" "$RPS" "$(ratio "${srps%% *}" "$RPS")"
		row "$pfig" "$sp99" "$P99"
	else
		row "$ofig" "$srps" n/a "n/a (nginx did not run)"
		row "$pfig" "$sp99" n/a "n/a (nginx did not run)"
	fi
fi

# ---- RSS with 256 open connections --------------------------------------------------
# hold PORT N SECONDS: N keep-alive connections, each after one /health.
hold() {
	python3 - "$@" <<'EOF'
import socket, sys, time
port, n, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
path = sys.argv[4]
socks = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(("GET %s HTTP/1.1\r\nHost: b\r\n\r\n" % path).encode())
    s.recv(4096)
    socks.append(s)
print("ready", flush=True)
time.sleep(secs)
EOF
}
rss_with() { # PID PORT PATH
	hold "$2" 256 3 "$3" >"$d/hold" &
	h=$!
	i=0
	until grep -q ready "$d/hold" 2>/dev/null || [ $i -gt 100 ]; do sleep 0.05; i=$((i + 1)); done
	proc_kib "$1" VmRSS
	wait "$h" 2>/dev/null
}
ours=$(rss_with "$spid" "$sport" /health)
if [ -n "$npid" ]; then
	row "$mfig" "$ours" "$(rss_with "$npid" "$nport" /op)"
else
	row "$mfig" "$ours" n/a "n/a (nginx did not run)"
fi

# ---- wrong-token timing ---------------------------------------------------------------
# The same connection set-up for every request (401 closes the connection);
# variants interleave request by request so load falls on all alike.
python3 - "$sport" "$TOK" >"$d/timing" <<'EOF'
import socket, statistics, sys, time
port, tok = int(sys.argv[1]), sys.argv[2]
first = ("x" if tok[0] != "x" else "y") + tok[1:]
last = tok[:-1] + ("x" if tok[-1] != "x" else "y")
longer = tok + "x"
variants = [first, last, longer]
reqs = [("GET /v1/ops HTTP/1.1\r\nHost: b\r\nX-Access-Token: %s\r\n\r\n" % v).encode() for v in variants]
t = [[], [], []]
for i in range(1500):
    for j, r in enumerate(reqs):
        s = socket.create_connection(("127.0.0.1", port))
        a = time.perf_counter()
        s.sendall(r)
        b = s.recv(4096)
        d = time.perf_counter() - a
        s.close()
        if not b.startswith(b"HTTP/1.1 401"):
            print("fail"); sys.exit(0)
        if i >= 100:
            t[j].append(d * 1e6)
print(" ".join("%.1f" % statistics.median(x) for x in t))
EOF
if read -r f l g <"$d/timing" && [ "$f" != fail ]; then
	row "$tfig1" "$l" "$f"
	row "$tfig2" "$g" "$f"
else
	row "$tfig1" n/a n/a "n/a (no 401 answers)"
	row "$tfig2" n/a n/a "n/a (no 401 answers)"
fi
