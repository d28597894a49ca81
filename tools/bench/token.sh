#!/bin/sh
# What watching server.token_file costs the request path, rows "figure | ours |
# reference | ratio": GET /health and an authorized GET /v1/ops, keep-alive,
# TOKEN_CONNS at once (ab -k), against serve with the token in a watched file
# (ours) and serve with ABX_SERVER_TOKEN (reference), the two sides
# interleaved in TOKEN_ROUNDS rounds; each ratio is the median of the
# per-round ratios. The server's own CPU time per request (utime + stime of
# the serve process across the same runs) is the steadier figure on a shared
# machine, where another load moves the rates. Environment: BIN, TOP, TOKEN_REQS (requests per run,
# default 20000), TOKEN_CONNS (default 4), TOKEN_ROUNDS (default 3).
set -u
: "${TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$TOP/tools/benchlib.sh"
TOKEN_REQS=${TOKEN_REQS:-20000}
TOKEN_CONNS=${TOKEN_CONNS:-4}
TOKEN_ROUNDS=${TOKEN_ROUNDS:-3}

hfig="GET /health req/s: token_file vs ABX_SERVER_TOKEN (ab -k -c$TOKEN_CONNS)"
ofig="authorized GET /v1/ops req/s: token_file vs ABX_SERVER_TOKEN (same runs)"
hcfig="GET /health serve CPU us/request: token_file vs ABX_SERVER_TOKEN (same runs)"
ocfig="authorized GET /v1/ops serve CPU us/request: token_file vs ABX_SERVER_TOKEN (same runs)"
if ! has_applet serve; then
	for f in "$hfig" "$ofig" "$hcfig" "$ocfig"; do row "$f" n/a n/a "n/a (needs serve)"; done
	exit 0
fi
if ! command -v ab >/dev/null 2>&1; then
	for f in "$hfig" "$ofig" "$hcfig" "$ocfig"; do row "$f" n/a n/a "n/a (needs ab)"; done
	exit 0
fi

bench_dir token
say() { printf 'bench/token: %s\n' "$*" >&2; }

TOK=bench-token-0123456789abcdef0123456789abcdef
printf '%s\n' "$TOK" >"$d/token"
bench_serve env ABX_SERVER_TOKEN=$TOK || exit 1
epid=$serve_pid eport=$serve_port
bench_serve file ABX_SERVER_TOKEN_FILE="$d/token" ABX_SERVER_SANDBOX_ID_FILE="$d/id" || exit 1
fpid=$serve_pid fport=$serve_port
# ticks PID: the process's user + system CPU time, in clock ticks
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# rps PORT PATH PID: requests per second of one ab run, "fail" when a request
# failed; the serve's CPU microseconds per request appended to $d/cpu
rps() {
	_c0=$(ticks "$3")
	ab -k -q -c "$TOKEN_CONNS" -n "$TOKEN_REQS" -H "X-Access-Token: $TOK" "http://127.0.0.1:$1$2" \
		>"$d/ab.txt" 2>&1
	_c1=$(ticks "$3")
	awk -v t=$((_c1 - _c0)) -v hz="$hz" -v n="$TOKEN_REQS" 'BEGIN { printf "%.2f ", t * 1e6 / hz / n }' >>"$d/cpu"
	cat "$d/ab.txt" >&2
	awk '/^Failed requests:/ { f = $3 } /^Non-2xx responses:/ { f += $3 }
		/^Requests per second:/ { r = $4 } END { if (f + 0 > 0 || r == "") print "fail"; else printf "%.0f\n", r }' "$d/ab.txt"
}
for p in /health /v1/ops; do
	: >"$d/rows"
	: >"$d/cpurows"
	r=0
	while [ $r -lt "$TOKEN_ROUNDS" ]; do
		: >"$d/cpu"
		e=$(rps "$eport" $p "$epid")
		f=$(rps "$fport" $p "$fpid")
		# file env ratio, as the rows above
		awk '{ r = ($1 > 0 && $2 > 0) ? $2 / $1 : 0; printf "%s %s %.4f\n", $2, $1, r }' "$d/cpu" >>"$d/cpurows"
		printf '%s %s %s\n' "$f" "$e" "$(awk -v a="$f" -v b="$e" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.4f", a / b; else print "fail" }')" >>"$d/rows"
		r=$((r + 1))
	done
	say "$p rounds (file env ratio): $(tr '\n' ';' <"$d/rows")"
	# shellcheck disable=SC2046
	ours=$(median $(awk '{ print $1 }' "$d/rows"))
	# shellcheck disable=SC2046
	ref=$(median $(awk '{ print $2 }' "$d/rows"))
	if grep -q fail "$d/rows"; then
		ours=fail
	fi
	# shellcheck disable=SC2046
	rt=$(median $(awk '{ print $3 }' "$d/rows"))
	[ $p = /health ] && fig=$hfig || fig=$ofig
	row "$fig" "$ours" "$ref" "$(awk -v r="$rt" 'BEGIN { if (r + 0 > 0) printf "%.2fx\n", r; else print "n/a" }')"
	say "$p CPU rounds (file env ratio, us/request): $(tr '\n' ';' <"$d/cpurows")"
	[ $p = /health ] && fig=$hcfig || fig=$ocfig
	# shellcheck disable=SC2046
	rt=$(median $(awk '{ print $3 }' "$d/cpurows"))
	# shellcheck disable=SC2046
	row "$fig" "$(median $(awk '{ print $1 }' "$d/cpurows"))" "$(median $(awk '{ print $2 }' "$d/cpurows"))" \
		"$(awk -v r="$rt" 'BEGIN { if (r + 0 > 0) printf "%.2fx\n", r; else print "n/a" }')"
done
