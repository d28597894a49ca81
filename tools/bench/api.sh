#!/bin/sh
# serve's API under load (issue 7 §9), rows "figure | ours | reference | ratio":
#   - an authenticated command op running /bin/true: req/s and p99 under wrk
#     (POST with a token, each request spawns a process) vs nginx serving a
#     static file with the same wrk arguments, four at once and one at a
#     time, in interleaved rounds; p99 also against the spawn floor (a C loop
#     spawning /bin/true: what no server running a process can beat);
#   - resident memory with 256 open connections, serve vs nginx (master +
#     workers);
#   - wrong tokens that differ from the real one at the first byte, at the
#     last byte, and in length: median time to the 401, interleaved, so a
#     timing side channel would show as a ratio away from 1.00x.
# Environment: BIN, TOP (set by tools/bench.sh), OP_WRK_ARGS (default
# "-t2 -c4 -d3s --latency": four at once, the op's concurrency a gateway
# uses), OP_WRK1_ARGS (default "-t1 -c1 -d3s --latency": one at a time),
# OP_ROUNDS (default 3).
set -u
: "${TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$TOP/tools/benchlib.sh"
OP_WRK_ARGS=${OP_WRK_ARGS:--t2 -c4 -d3s --latency}
OP_WRK1_ARGS=${OP_WRK1_ARGS:--t1 -c1 -d3s --latency}
OP_ROUNDS=${OP_ROUNDS:-3}

bench_dir api
say() { printf 'bench/api: %s\n' "$*" >&2; }

ofig="op 'true' req/s, authenticated POST (wrk $OP_WRK_ARGS; ref: nginx static file)"
pfig="op 'true' p99 latency ms (same runs)"
mfig="RSS KiB with 256 open connections (nginx: master + workers)"
tfig1="401 median us: wrong token differing at the last byte vs at the first"
tfig2="401 median us: wrong token one byte longer vs differing at the first byte"
if ! has_applet serve; then
	for f in "$ofig" "$pfig" "$mfig" "$tfig1" "$tfig2"; do row "$f" n/a n/a "n/a (needs serve)"; done
	exit 0
fi

# ---- serve with a `true` op ----------------------------------------------------
TOK=bench-token-0123456789abcdef0123456789abcdef
printf '[{"id": "true", "argv": ["/bin/true"], "concurrency": 64}]\n' >"$d/cmds.json"
bench_serve serve ABX_SERVER_TOKEN=$TOK ABX_SERVER_COMMANDS="$d/cmds.json" ABX_SERVER_MAX_CONNECTIONS=1024 || exit 1
spid=$serve_pid sport=$serve_port

# ---- nginx with a static file ----------------------------------------------------
if nginx_start "$d" op '{"exit_code":0,"stdout":"","stderr":"","duration_ms":0,"truncated":false}' 2 off; then
	npid=$NGINX_PID nport=$NGINX_PORT
	pids="$pids $npid"
else
	npid="" nport=""
	say "$NGINX_WHY"
fi

# ---- the op under wrk ---------------------------------------------------------------
# Two loads, the same wrk arguments for serve and nginx, OP_ROUNDS rounds with
# the sides interleaved (a shared machine's load falls on both alike):
#   - OP_WRK_ARGS: four at once, closed loop: throughput; at this load both
#     sides saturate the CPUs, so p99 is mostly queueing;
#   - OP_WRK1_ARGS: one at a time: p99 is the op's own latency (the goal
#     "p99 of the `true` op at most 5 ms" is read here).
# A third reference is the floor under any server that runs a program per
# request: tools/bench/spawn_drv.c, a C loop doing posix_spawn + waitpid of
# /bin/true with as many threads as wrk has connections.
# Each row gives medians over the rounds; its ratio is the median of the
# per-round ratios.
wrk_run() { # NAME URL [SCRIPT]: sets RPS, P99 (ms), BAD
	# shellcheck disable=SC2086
	wrk $WRK ${3:+-s "$3"} "$2" >"$d/wrk-$1.txt" 2>&1
	cat "$d/wrk-$1.txt" >&2
	RPS=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$d/wrk-$1.txt")
	P99=$(awk '$1 == "99%" { v = $2; u = v; sub(/[a-z]+$/, "", v); sub(/^[0-9.]+/, "", u)
		m = (u == "us") ? v / 1000 : (u == "s") ? v * 1000 : v; printf "%.2f", m }' "$d/wrk-$1.txt")
	BAD=$(awk '/Non-2xx or 3xx responses:/ { n += $NF } /Socket errors:/ {
		for (i = 3; i <= NF; i++) { v = $i; gsub(/,/, "", v); if (v ~ /^[0-9]+$/) n += v } } END { print n + 0 }' "$d/wrk-$1.txt")
}
wrk_conns() { printf '%s\n' "$1" | sed -n 's/.*-c *\([0-9][0-9]*\).*/\1/p'; }
wrk_secs() { printf '%s\n' "$1" | sed -n 's/.*-d *\([0-9][0-9]*\)s.*/\1/p'; }
rat() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.4f\n", a / b }'; }
x() { awk -v r="$1" 'BEGIN { if (r == "n/a") print "n/a"; else if (r >= 0.1) printf "%.2fx\n", r; else printf "%.2gx\n", r }'; }
drv=""
if cc=$(command -v "${MUSL_CC:-musl-gcc}" || command -v cc); then
	"$cc" -std=c11 -O2 -D_GNU_SOURCE -static -o "$d/spawn_drv" "$TOP/tools/bench/spawn_drv.c" -lpthread 2>&1 >&2 &&
		drv=$d/spawn_drv
fi
if ! command -v wrk >/dev/null 2>&1; then
	row "$ofig" n/a n/a "n/a (needs wrk)"
	row "$pfig" n/a n/a "n/a (needs wrk)"
else
	cat >"$d/op.lua" <<EOF
wrk.method = "POST"
wrk.body = "{}"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Access-Token"] = "$TOK"
EOF
	for load in c4 c1; do
		if [ $load = c4 ]; then WRK=$OP_WRK_ARGS; else WRK=$OP_WRK1_ARGS; fi
		: >"$d/$load.rows"
		r=0
		while [ $r -lt "$OP_ROUNDS" ]; do
			r=$((r + 1))
			say "round $r: wrk $WRK: POST /v1/ops/true"
			wrk_run serve "http://127.0.0.1:$sport/v1/ops/true" "$d/op.lua"
			srps=$RPS sp99=$P99 sbad=$BAD
			nrps="" np99=""
			if [ -n "$nport" ]; then
				say "round $r: wrk $WRK: nginx GET /op"
				wrk_run nginx "http://127.0.0.1:$nport/op"
				nrps=$RPS np99=$P99
			fi
			frps="" fp99=""
			if [ -n "$drv" ]; then
				set -- $("$drv" "$(wrk_conns "$WRK")" "$(wrk_secs "$WRK")" /bin/true)
				frps=${1:-} fp99=${3:-}
				say "round $r: spawn floor ($(wrk_conns "$WRK") threads): $frps/s p50 ${2:-?} ms p99 $fp99 ms"
			fi
			# serve_rps serve_p99 nginx_rps nginx_p99 floor_rps floor_p99 errors
			echo "$srps $sp99 ${nrps:-x} ${np99:-x} ${frps:-x} ${fp99:-x} $sbad" >>"$d/$load.rows"
		done
		col() { median $(awk -v c="$1" '$c != "x" && $c != "" { print $c }' "$d/$load.rows"); }
		rcol() { median $(awk -v a="$1" -v b="$2" '$a != "x" && $b != "x" && $a > 0 && $b > 0 { printf "%.4f\n", $a / $b }' "$d/$load.rows"); }
		bad=$(awk '{ n += $7 } END { print n + 0 }' "$d/$load.rows")
		tag="wrk $WRK, median of $OP_ROUNDS rounds"
		[ "$bad" -gt 0 ] && tag="$tag, $bad errors"
		row "op 'true' req/s, authenticated POST ($tag; ref: nginx static file)" "$(col 1)" "$(col 3)" "$(x "$(rcol 1 3)")"
		row "op 'true' p99 ms ($tag; ref: nginx static file)" "$(col 2)" "$(col 4)" "$(x "$(rcol 2 4)")"
		row "op 'true' p99 ms ($tag; ref: spawn floor, C posix_spawn+waitpid of /bin/true)" "$(col 2)" "$(col 6)" "$(x "$(rcol 2 6)")"
		row "op 'true' p99 <= 5 ms ($tag): rounds meeting it, serve vs spawn floor" \
			"$(awk '$2 <= 5 { n++ } END { print n + 0 }' "$d/$load.rows")/$OP_ROUNDS" \
			"$(awk '$6 != "x" && $6 <= 5 { n++ } END { print n + 0 }' "$d/$load.rows")/$OP_ROUNDS" "-"
	done
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
	row "$mfig" "$ours" n/a "n/a (${NGINX_WHY%%:*})"
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
