#!/bin/sh
# Agent sessions (issue 8 §7), rows "figure | ours | reference | ratio":
#   events/s from a child writing lines, delivered as Server-Sent Events to a
#   client through serve (a session turn on the wire, journal file, SSE), against the same
#   child's lines read directly through a pipe (child | cat > file). The goal
#   is at least half the pipe's rate (ratio >= 0.50x). Two clients, each its
#   own row against the same reference runs: curl (create with curl, then
#   curl -sN into a file: two process start-ups and curl's own receive work
#   inside the timed interval), and tools/bench/sse_drv.c (one process doing
#   the create POST and the GET over plain sockets, 1 MiB reads, chunked
#   decoding, the stream into a file). Every run checks that the client saw
#   exactly N agent.session.output events; a row says fail otherwise.
# Environment: BIN, TOP (set by tools/bench.sh), SESS_LINES (default
#   "200000 1000000": one set of rows per count; the journal limit set below,
#   256 MiB, holds about 1.5M such events).
set -u
: "${TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$TOP/tools/benchlib.sh"
COUNTS=${SESS_LINES:-200000 1000000}
set -- $COUNTS
fig="session events/s, $1 lines of 64 B to an SSE client (ref: the child's pipe read by cat)"

if ! has_applet serve || ! command -v curl >/dev/null 2>&1; then
	row "$fig" n/a n/a "n/a (needs serve and curl)"
	exit 0
fi
bench_dir sess
$CC -O2 -o "$d/flood" "$TOP/tools/bench/flood_drv.c" || { row "$fig" n/a n/a "n/a (needs cc)"; exit 0; }
$CC -O2 -o "$d/sse_drv" "$TOP/tools/bench/sse_drv.c" || { row "$fig" n/a n/a "n/a (needs cc)"; exit 0; }
mkdir -p "$d/man" "$d/state"
cat >"$d/man/flood.json" <<EOM
{"schema":1,"name":"flood","binary":"flood","version":"1.0.0",
 "source":{"type":"tarball","bin":"bin/flood",
  "platforms":{"linux-x64":{"url":"https://localhost/flood.tgz","sha256":"$(printf %064d 0)"},
               "linux-arm64":{"url":"https://localhost/flood.tgz","sha256":"$(printf %064d 0)"}}},
 "hosts":["localhost"],"verify":{"argv":["{bin}","0"]},"run":["{bin}","{prompt}"],"platforms":["linux-x64","linux-arm64"]}
EOM
TOK=bench-sessions-token
printf '{"agents":["flood"]}\n' >"$d/cfg.json"
ABX_TOOL_FLOOD=$d/flood ABX_SERVER_TOKEN=$TOK ABX_SERVER_SESSION_JOURNAL_MAX_BYTES=268435456 ABX_SERVER_SSE_HEARTBEAT=1 \
	"$BIN" serve --host 127.0.0.1 --port 0 -q --config "$d/cfg.json" --manifests "$d/man" --state-dir "$d/state" \
	--tools-dir "$d/tools" --preset admin >"$d/port" 2>"$d/serve.err" &
pid=$!
i=0
while [ ! -s "$d/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
port=$(head -1 "$d/port")
[ -n "$port" ] || { row "$fig" n/a n/a "n/a (serve did not start: $(head -1 "$d/serve.err"))"; exit 0; }
u=http://127.0.0.1:$port

now_ns() { date +%s%N; }
rate() { awk -v n="$1" -v t="$2" 'BEGIN { printf "%.0f\n", n / (t / 1e9) }'; }
ours_curl() {
	t0=$(now_ns)
	id=$(curl -s -H "X-Access-Token: $TOK" \
		--data "{\"agent_id\": \"flood\", \"environment\": {\"type\": \"self_hosted\"}, \"input\": \"$N\"}" \
		"$u/v1/agents/sessions" | sed -n 's/^{"id":"\([^"]*\)".*/\1/p')
	[ -n "$id" ] || { echo fail; return; }
	# The stream goes on after the turn (the session is idle, not over):
	# the time is taken when the exited event has come; curl ends at its
	# next write (a heartbeat at the latest), outside the timed interval.
	curl -sN -H "X-Access-Token: $TOK" -H 'Accept: text/event-stream' "$u/v1/agents/sessions/$id/events" |
		{
			sed '/^event: agent.session.exited/q' >"$d/sse"
			now_ns >"$d/t1"
		}
	t1=$(cat "$d/t1")
	got=$(grep -c "^event: agent.session.output" "$d/sse")
	[ "$got" = "$N" ] || { echo "curl: fail($got)" >&2; echo fail; return; }
	rate "$N" "$((t1 - t0))"
}
ours_c() {
	t0=$(now_ns)
	got=$("$d/sse_drv" "$port" "$TOK" flood "$N" "$d/sse")
	t1=$(now_ns)
	[ "$got" = "$N" ] || { echo "sse_drv: fail($got)" >&2; echo fail; return; }
	rate "$N" "$((t1 - t0))"
}
ref() {
	t0=$(now_ns)
	"$d/flood" "$N" | cat >"$d/pipe"
	t1=$(now_ns)
	rate "$N" "$((t1 - t0))"
}
for N in $COUNTS; do
	# Best of three each, alternating, both clients against the same
	# reference runs.
	best_o=0 best_c=0 best_r=0
	for r in 1 2 3; do
		o=$(ours_curl); c=$(ours_c); p=$(ref)
		[ "$o" != fail ] && [ "$o" -gt "$best_o" ] && best_o=$o
		[ "$c" != fail ] && [ "$c" -gt "$best_c" ] && best_c=$c
		[ "$p" -gt "$best_r" ] && best_r=$p
	done
	[ "$best_o" = 0 ] && best_o=fail
	[ "$best_c" = 0 ] && best_c=fail
	rm -f "$d/sse" "$d/pipe"
	row "session events/s, $N lines of 64 B to an SSE client, curl -N (ref: the child's pipe read by cat)" "$best_o" "$best_r"
	row "session events/s, $N lines of 64 B to an SSE client, C client tools/bench/sse_drv.c (ref: the same pipe runs)" "$best_c" "$best_r"
done
