#!/bin/sh
# Agent sessions (issue 8 §7), rows "figure | ours | reference | ratio":
#   events/s from a child writing lines, delivered as Server-Sent Events to a
#   client (curl -N) through serve (session, journal file, SSE), against the
#   same child's lines read directly through a pipe (child | cat). The goal
#   is at least half the pipe's rate (ratio >= 0.50x).
# Environment: BIN, TOP (set by tools/bench.sh), SESS_LINES (default 200000).
set -u
: "${TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$TOP/tools/benchlib.sh"
N=${SESS_LINES:-200000}
fig="session events/s, $N lines of 64 B to an SSE client (ref: the child's pipe read by cat)"

if ! has_applet serve || ! command -v curl >/dev/null 2>&1; then
	row "$fig" n/a n/a "n/a (serve or curl missing)"
	exit 0
fi
d=$(mktemp -d "${TMPDIR:-/tmp}/abx-bench-sess.XXXXXX") || exit 1
chmod 700 "$d"
pid=""
cleanup() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$d"
}
trap cleanup EXIT
CC=${CC:-cc}
command -v musl-gcc >/dev/null 2>&1 && CC="musl-gcc -static"
$CC -O2 -o "$d/flood" "$TOP/tools/bench/flood_drv.c" || { row "$fig" n/a n/a "n/a (no C compiler)"; exit 0; }
mkdir -p "$d/man" "$d/state"
cat >"$d/man/flood.json" <<EOM
{"schema":1,"name":"flood","binary":"flood","version":"1.0.0",
 "source":{"type":"tarball","bin":"bin/flood",
  "platforms":{"linux-x64":{"url":"https://localhost/flood.tgz","sha256":"$(printf %064d 0)"},
               "linux-arm64":{"url":"https://localhost/flood.tgz","sha256":"$(printf %064d 0)"}}},
 "hosts":["localhost"],"verify":{"argv":["{bin}","0"]},"run":["{bin}","{n}"],"platforms":["linux-x64","linux-arm64"]}
EOM
TOK=bench-sessions-token
printf '{"agents":["flood"]}\n' >"$d/cfg.json"
ABX_TOOL_FLOOD=$d/flood ABX_SERVER_TOKEN=$TOK ABX_SERVER_SESSION_JOURNAL_MAX_BYTES=268435456 \
	"$BIN" serve --host 127.0.0.1 --port 0 -q --config "$d/cfg.json" --manifests "$d/man" --state-dir "$d/state" \
	--tools-dir "$d/tools" --preset admin >"$d/port" 2>"$d/serve.err" &
pid=$!
i=0
while [ ! -s "$d/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
port=$(head -1 "$d/port")
[ -n "$port" ] || { row "$fig" n/a n/a "n/a (serve did not start: $(head -1 "$d/serve.err"))"; exit 0; }
u=http://127.0.0.1:$port

now_ns() { date +%s%N; }
ours() {
	t0=$(now_ns)
	id=$(curl -s -H "X-Access-Token: $TOK" --data "{\"n\": $N}" "$u/v1/agents/flood/sessions" |
		sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
	[ -n "$id" ] || { echo fail; return; }
	curl -sN -H "X-Access-Token: $TOK" -H 'Accept: text/event-stream' \
		"$u/v1/agents/flood/sessions/$id/events" >"$d/sse"
	t1=$(now_ns)
	got=$(grep -c "^event: agent.session.output" "$d/sse")
	[ "$got" = "$N" ] || { echo "fail($got)" >&2; echo fail; return; }
	awk -v n="$N" -v t="$((t1 - t0))" 'BEGIN { printf "%.0f\n", n / (t / 1e9) }'
}
ref() {
	t0=$(now_ns)
	"$d/flood" "$N" | cat >"$d/pipe"
	t1=$(now_ns)
	awk -v n="$N" -v t="$((t1 - t0))" 'BEGIN { printf "%.0f\n", n / (t / 1e9) }'
}
# Best of three each, alternating.
best_o=0 best_r=0
for r in 1 2 3; do
	o=$(ours); p=$(ref)
	[ "$o" != fail ] && [ "$o" -gt "$best_o" ] && best_o=$o
	[ "$p" -gt "$best_r" ] && best_r=$p
done
[ "$best_o" = 0 ] && best_o=fail
row "$fig" "$best_o" "$best_r"
