#!/bin/sh
# make bench: side-by-side figures from one run, printed as one table of
# ratios (ours / the tool a user would otherwise use). Absolute numbers on a
# shared two-core machine are noise; run both sides back to back and compare.
#
#   tools/bench.sh BIN
#
# Environment: BENCH_RUNS (start-up runs per command, default 200),
# WRK_ARGS (default "-t2 -c64 -d5s --latency"). Needs curl, wrk, nginx
# (Debian's nginx-light) and hyperfine (tools/hostdeps.sh bench); a figure whose
# tool or applet is missing prints n/a. After the built-in figures, every
# tools/bench/*.sh runs and adds its rows (see tools/benchlib.sh).
set -u
[ $# -eq 1 ] || { echo "usage: $0 BIN" >&2; exit 2; }
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
TOP=$(cd "$(dirname "$0")/.." && pwd)
export BIN TOP
. "$TOP/tools/benchlib.sh"
WRK_ARGS=${WRK_ARGS:--t2 -c64 -d5s --latency}

bench_dir main
rows=$d/rows
log=$TOP/build/bench; mkdir -p "$log"
say() { printf 'bench: %s\n' "$*" >&2; }
add() { row "$@" >>"$rows"; }
na() { add "$1" "n/a" "${3:-n/a}" "n/a ($2)"; }

# Size of a program plus every shared library it loads (what an image must hold).
closure_bytes() {
	{
		echo "$1"
		ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
	} | sort -u | while read -r f; do stat -L -c %s "$f"; done | awk '{ s += $1 } END { print s + 0 }'
}
closure_count() {
	ldd "$1" 2>/dev/null | awk '($2 == "=>" && $3 ~ /^\//) || $1 ~ /^\// { n++ } END { print n + 0 }'
}

# ---- binary size ----------------------------------------------------------
ours=$(stat -c %s "$BIN")
if curl=$(command -v curl); then
	add "binary size, bytes (ref: curl + its $(closure_count "$curl") shared libs)" "$ours" "$(closure_bytes "$curl")"
else
	na "binary size, bytes (ref: curl + libs)" "needs curl"
fi
if bb=$(command -v busybox); then
	add "binary size, bytes (ref: busybox)" "$ours" "$(closure_bytes "$bb")"
fi

# ---- start-up: version ----------------------------------------------------
say "start-up: version vs curl --version ($BENCH_RUNS runs each)"
if [ -n "${curl:-}" ]; then
	set -- $(pair_ms "$BIN version" "$curl --version")
	add "start-to-exit ms: version vs curl --version (median)" "$1" "$2"
	add "RSS at exit KiB: version vs curl --version" "$(peak_kib "$BIN" version)" "$(peak_kib "$curl" --version)"
fi

# ---- the servers ----------------------------------------------------------
# nginx, as a user would run it, serving /health as a small static file.
if nginx_start "$d" health '{"status":"ok","version":"nginx"}' auto on; then
	nginx_pid=$NGINX_PID nport=$NGINX_PORT
	pids="$pids $nginx_pid"
else
	nginx_pid="" nport=""
	say "$NGINX_WHY"
fi

serve_pid="" sport=""
if has_applet serve; then
	mkdir -m 700 "$d/state" "$d/tools"
	ABX_SERVER_STATE_DIR=$d/state ABX_TOOLS_DIR=$d/tools \
		"$BIN" serve --host 127.0.0.1 --port 0 >"$d/serve.out" 2>"$log/serve.err" &
	serve_pid=$!
	pids="$pids $serve_pid"
	i=0
	until grep -q '^[0-9][0-9]*$' "$d/serve.out" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 "$serve_pid" 2>/dev/null; then
			say "serve did not start: $(tail -3 "$log/serve.err" | tr '\n' ' ')"
			serve_pid=""
			break
		fi
		sleep 0.05
	done
	[ -n "$serve_pid" ] && sport=$(head -1 "$d/serve.out")
fi

# ---- start-up: healthcheck ------------------------------------------------
# Both sides ask the same server; ours when it runs, else nginx's /health.
if [ -n "$sport" ]; then hport=$sport hwho=serve
elif [ -n "$nport" ]; then hport=$nport hwho=nginx
else hport="" hwho=""
fi
fig="start-to-exit ms: healthcheck vs curl -sf /health (median, $hwho)"
if ! has_applet healthcheck; then
	na "start-to-exit ms: healthcheck vs curl -sf /health" "needs healthcheck" \
		"$([ -n "$hport" ] && [ -n "${curl:-}" ] && median_ms "$curl" -sf "http://127.0.0.1:$hport/health")"
elif [ -z "$hport" ] || [ -z "${curl:-}" ]; then
	na "start-to-exit ms: healthcheck vs curl -sf /health" "$([ -n "${curl:-}" ] && echo "no server ran" || echo "needs curl")"
else
	say "start-up: healthcheck vs curl -sf against $hwho ($BENCH_RUNS runs each)"
	set -- $(pair_ms "$BIN healthcheck --host 127.0.0.1 --port $hport" "$curl -sf http://127.0.0.1:$hport/health")
	add "$fig" "$1" "$2"
	add "RSS at exit KiB: healthcheck vs curl -sf /health" \
		"$(peak_kib "$BIN" healthcheck --host 127.0.0.1 --port "$hport")" \
		"$(peak_kib "$curl" -sf "http://127.0.0.1:$hport/health")"
fi

# ---- /health under wrk ----------------------------------------------------
# wrk_run NAME PORT: one wrk run; sets RPS, P99 (ms), BAD (non-2xx + errors).
wrk_run() {
	# shellcheck disable=SC2086
	wrk $WRK_ARGS "http://127.0.0.1:$2/health" >"$log/wrk-$1.txt" 2>&1
	RPS=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$log/wrk-$1.txt")
	P99=$(awk '$1 == "99%" { v = $2; u = v; sub(/[a-z]+$/, "", v); sub(/^[0-9.]+/, "", u)
		m = (u == "us") ? v / 1000 : (u == "s") ? v * 1000 : v; printf "%.2f", m }' "$log/wrk-$1.txt")
	BAD=$(awk '/Non-2xx or 3xx responses:/ { n += $NF } /Socket errors:/ {
		for (i = 3; i <= NF; i++) { v = $i; gsub(/,/, "", v); if (v ~ /^[0-9]+$/) n += v } } END { print n + 0 }' "$log/wrk-$1.txt")
}
wfig="/health req/s, higher is better (wrk $WRK_ARGS; ref: nginx static file)"
pfig="/health p99 latency ms, lower is better"
if ! command -v wrk >/dev/null 2>&1; then
	na "$wfig" "needs wrk"
elif [ -z "$nport" ]; then
	na "$wfig" "${NGINX_WHY%%:*}"
else
	ngx_idle=$(proc_kib "$nginx_pid" VmRSS)
	if [ -n "$sport" ]; then
		sleep 0.2
		ours_idle=$(proc_kib "$serve_pid" VmRSS)
		say "wrk $WRK_ARGS against serve"
		wrk_run serve "$sport"
		srps=$RPS sp99=$P99 sbad=$BAD
		ours_hwm=$(proc_kib "$serve_pid" VmHWM)
	fi
	say "wrk $WRK_ARGS against nginx"
	wrk_run nginx "$nport"
	nrps=$RPS np99=$P99 nbad=$BAD
	ngx_hwm=$(proc_kib "$nginx_pid" VmHWM)
	if [ -n "$sport" ]; then
		[ "$sbad" -gt 0 ] && srps="$srps ($sbad errors)"
		[ "$nbad" -gt 0 ] && nrps="$nrps ($nbad errors)"
		add "$wfig" "$srps" "$nrps" "$(ratio "${srps%% *}" "${nrps%% *}")"
		add "$pfig" "$sp99" "$np99"
		add "server idle RSS KiB (nginx: master + workers)" "$ours_idle" "$ngx_idle"
		add "server peak RSS KiB after wrk (VmHWM, summed)" "$ours_hwm" "$ngx_hwm"
	else
		na "$wfig" "needs serve" "$nrps"
		na "$pfig" "needs serve" "$np99"
		na "server idle RSS KiB (nginx: master + workers)" "needs serve" "$ngx_idle"
		na "server peak RSS KiB after wrk (VmHWM, summed)" "needs serve" "$ngx_hwm"
	fi
fi
for p in $pids; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
pids=""

# ---- figures other modules add --------------------------------------------
for f in "$TOP"/tools/bench/*.sh; do
	[ -f "$f" ] || continue
	n=$(basename "$f" .sh)
	say "tools/bench/$n.sh"
	if sh "$f" "$BIN" >"$d/ext.out" 2>"$log/$n.err"; then
		grep -E '^.+ \| .* \| .* \| .*$' "$d/ext.out" >>"$rows"
	else
		na "tools/bench/$n.sh" "failed (exit $?, see build/bench/$n.err)"
		grep -E '^.+ \| .* \| .* \| .*$' "$d/ext.out" >>"$rows"
	fi
done

# ---- the table ------------------------------------------------------------
echo
echo "agent-sandbox-server $("$BIN" version 2>/dev/null | head -1 | cut -d' ' -f2) bench, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores; ratio = ours / reference"
awk '
# The last three " | " fields are ours, reference, ratio; a figure may itself
# contain " | " (e.g. "find | xargs").
{
	n = split($0, f, / \| /)
	fig = f[1]; for (i = 2; i <= n - 3; i++) fig = fig " | " f[i]
	c[NR, 1] = fig; c[NR, 2] = f[n - 2]; c[NR, 3] = f[n - 1]; c[NR, 4] = f[n]
	for (i = 1; i <= 4; i++) if (length(c[NR, i]) > w[i]) w[i] = length(c[NR, i])
}
END {
	h[1] = "figure"; h[2] = "ours"; h[3] = "reference"; h[4] = "ratio"
	for (i = 1; i <= 4; i++) if (length(h[i]) > w[i]) w[i] = length(h[i])
	fmt = "%-" w[1] "s | %" w[2] "s | %" w[3] "s | %s\n"
	printf fmt, h[1], h[2], h[3], h[4]
	s = ""; for (i = 1; i <= w[1] + w[2] + w[3] + 15; i++) s = s "-"; print s
	for (r = 1; r <= NR; r++) printf fmt, c[r, 1], c[r, 2], c[r, 3], c[r, 4]
}' "$rows"
echo "(logs: build/bench/)"
