#!/bin/sh
# The sessions wire (/v1/agents/sessions, the OpenAI SDK's), rows "figure |
# ours | reference | ratio", with tools/bench/flood_drv.c as the agent:
#   - events.create to agent.session.turn.created, p99 over WIRE_TURNS turns
#     of an idle session whose agent is ready, tools/bench/wire_drv.py as the
#     client (ref: the goal, 5 ms);
#   - structured events/s against raw output events/s, what serve streams to
#     a client that is not the bottleneck: tools/bench/sse_drv.c (C, 1 MiB
#     reads, the stream to /dev/null) creates a session whose input is
#     WIRE_LINES and reads its events to agent.session.exited, timed from
#     before the create to the end of that event. Both sides run the same
#     agent output, flood --json: thread.started and WIRE_LINES codex
#     agent_message lines of about 120 B. Structured: agent floodj (codex
#     dialect), each line parsed into an item, one agent.session.turn.item.done
#     event each. Raw: agent flood (no dialect), the same lines as
#     agent.session.output events (one more: thread.started), the path every
#     session had before dialects. Each round runs both back to back (which
#     goes first alternates); ours and ref are the medians of the per-side
#     rates, the ratio is the median of the WIRE_ROUNDS per-round ratios
#     (structured over raw, each side's events of its type per second), with
#     the lowest and highest;
#   - serve's RSS with 64 idle conversational sessions (ref: the goal,
#     4 MiB; "ratio" here is ours over the goal, <= 1.00x meets it).
# Environment: BIN, TOP (set by tools/bench.sh), WIRE_TURNS (default 200),
#   WIRE_LINES (default 200000), WIRE_ROUNDS (default 7).
set -u
: "${TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$TOP/tools/benchlib.sh"
TURNS=${WIRE_TURNS:-200}
LINES=${WIRE_LINES:-200000}
ROUNDS=${WIRE_ROUNDS:-7}
f1="wire events.create to turn.created p99 ms, agent ready, $TURNS turns (ref: goal 5 ms)"
f2="wire structured events/s, $LINES codex items to a C SSE client, per-round ratio (ref: the same lines as raw output events)"
f3="serve RSS KiB, 64 idle conversational sessions (ref: goal 4 MiB)"

if ! has_applet serve; then
	for f in "$f1" "$f2" "$f3"; do row "$f" n/a n/a "n/a (needs serve)"; done
	exit 0
fi
bench_dir wire
{ $CC -O2 -o "$d/flood" "$TOP/tools/bench/flood_drv.c" && $CC -O2 -o "$d/sse_drv" "$TOP/tools/bench/sse_drv.c"; } || {
	for f in "$f1" "$f2" "$f3"; do row "$f" n/a n/a "n/a (needs cc)"; done
	exit 0
}
mkdir -p "$d/man" "$d/state"
for a in flood floodj; do
	run='["{bin}","--json","{prompt}"]'
	[ $a = floodj ] && run='{"argv":["{bin}","{prompt}"],"dialect":"codex"}'
	cat >"$d/man/$a.json" <<EOM
{"schema":1,"name":"$a","binary":"$a","version":"1.0.0",
 "source":{"type":"tarball","bin":"bin/$a",
  "platforms":{"linux-x64":{"url":"https://localhost/f.tgz","sha256":"$(printf %064d 0)"},
               "linux-arm64":{"url":"https://localhost/f.tgz","sha256":"$(printf %064d 0)"}}},
 "hosts":["localhost"],"verify":{"argv":["{bin}","0"]},"run":$run,"platforms":["linux-x64","linux-arm64"]}
EOM
done
TOK=bench-wire-token
printf '{"agents":["flood","floodj"]}\n' >"$d/cfg.json"
ABX_TOOL_FLOOD=$d/flood ABX_TOOL_FLOODJ=$d/flood ABX_SERVER_TOKEN=$TOK ABX_SERVER_SESSION_JOURNAL_MAX_BYTES=268435456 \
	"$BIN" serve --host 127.0.0.1 --port 0 -q --config "$d/cfg.json" --manifests "$d/man" --state-dir "$d/state" \
	--tools-dir "$d/tools" --preset admin >"$d/port" 2>"$d/serve.err" &
pid=$!
i=0
while [ ! -s "$d/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
port=$(head -1 "$d/port")
if [ -z "$port" ]; then
	for f in "$f1" "$f2" "$f3"; do row "$f" n/a n/a "n/a (serve did not start: $(head -1 "$d/serve.err"))"; done
	exit 0
fi
drv() { python3 "$TOP/tools/bench/wire_drv.py" "$1" "$port" "$TOK" "$2" "$3" ${4:+"$4"} 2>>"$d/drv.err"; }

# RSS first: the 64 sessions are the only ones serve has held (rss0:
# serve's RSS before any).
rss0=$(drv rss floodj 0 "$pid") || rss0=fail
rss=$(drv rss floodj 64 "$pid") || rss=fail
lat=$(drv latency floodj "$TURNS") || lat="fail fail"
now_ns() { date +%s%N; }
# rate AGENT TYPE WANT: TYPE events/s of one session of AGENT, or 0 unless
# exactly WANT such events came.
rate() {
	t0=$(now_ns)
	got=$("$d/sse_drv" "$port" "$TOK" "$1" "$LINES" /dev/null "$2" 2>>"$d/drv.err")
	t1=$(now_ns)
	[ "$got" = "$3" ] || { echo "sse_drv $1: $got events of $2, not $3" >>"$d/drv.err"; echo 0; return; }
	awk -v n="$got" -v t="$((t1 - t0))" 'BEGIN { printf "%.0f\n", n / (t / 1e9) }'
}
ss="" rs="" qs=""
r=0
while [ $r -lt "$ROUNDS" ]; do
	if [ $((r % 2)) = 0 ]; then
		s=$(rate floodj agent.session.turn.item.done "$LINES")
		o=$(rate flood agent.session.output $((LINES + 1)))
	else
		o=$(rate flood agent.session.output $((LINES + 1)))
		s=$(rate floodj agent.session.turn.item.done "$LINES")
	fi
	if [ "$s" != 0 ] && [ "$o" != 0 ]; then
		ss="$ss $s" rs="$rs $o" qs="$qs $(awk -v a="$s" -v b="$o" 'BEGIN { printf "%.4f", a / b }')"
	fi
	r=$((r + 1))
done
row "$f1" "${lat%% *}" 5 "$(awk -v a="${lat%% *}" 'BEGIN { if (a + 0 > 0) printf "%.2fx of the goal (median %s ms)", a / 5, "'"${lat##* }"'"; else print "fail" }')"
if [ -n "$qs" ]; then
	set -- $qs
	row "$f2" "$(median $ss)" "$(median $rs)" "$(printf '%s\n' "$@" | sort -g | awk -v m="$(median "$@")" '
		{ v[NR] = $1 } END { printf "%.2fx median of %d rounds (min %.2fx, max %.2fx)", m, NR, v[1], v[NR] }')"
else
	row "$f2" fail fail fail
fi
row "$f3" "$rss" 4096 "$(awk -v a="$rss" 'BEGIN { if (a + 0 > 0) printf "%.2fx of the goal (%s KiB before the sessions)", a / 4096, "'"$rss0"'"; else print "fail" }')"
[ -s "$d/drv.err" ] && sed 's/^/# /' "$d/drv.err" >&2
exit 0
