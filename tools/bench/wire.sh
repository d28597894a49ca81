#!/bin/sh
# The sessions wire (/v1/agents/sessions, the OpenAI SDK's), rows "figure |
# ours | reference | ratio", with tools/bench/flood_drv.c as the agent (codex
# JSON lines when started as a codex dialect turn, plain lines otherwise) and
# tools/bench/wire_drv.py as the client:
#   - events.create to agent.session.turn.created, p99 over WIRE_TURNS turns
#     of an idle session whose agent is ready (ref: the goal, 5 ms);
#   - structured events/s: one turn of WIRE_LINES codex agent_message lines,
#     each a turn.item.done event on the stream (ref: the raw output path,
#     the same count of plain lines as agent.session.output events of a
#     session whose agent has no dialect; goal >= 0.50x);
#   - serve's RSS with 64 idle conversational sessions (ref: the goal,
#     4 MiB; "ratio" here is ours over the goal, <= 1.00x meets it).
# Environment: BIN, TOP (set by tools/bench.sh), WIRE_TURNS (default 200),
#   WIRE_LINES (default 200000).
set -u
: "${TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$TOP/tools/benchlib.sh"
TURNS=${WIRE_TURNS:-200}
LINES=${WIRE_LINES:-200000}
f1="wire events.create to turn.created p99 ms, agent ready, $TURNS turns (ref: goal 5 ms)"
f2="wire structured events/s, $LINES codex items to an SSE client (ref: the raw output path, same lines)"
f3="serve RSS KiB, 64 idle conversational sessions (ref: goal 4 MiB)"

if ! has_applet serve; then
	for f in "$f1" "$f2" "$f3"; do row "$f" n/a n/a "n/a (needs serve)"; done
	exit 0
fi
bench_dir wire
$CC -O2 -o "$d/flood" "$TOP/tools/bench/flood_drv.c" || {
	for f in "$f1" "$f2" "$f3"; do row "$f" n/a n/a "n/a (needs cc)"; done
	exit 0
}
mkdir -p "$d/man" "$d/state"
for a in flood floodj; do
	run='["{bin}","{prompt}"]'
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
best_s=0 best_r=0
for r in 1 2 3; do
	s=$(drv rate floodj "$LINES" agent.session.turn.item.done) || s=0
	o=$(drv rate flood "$LINES" agent.session.output) || o=0
	[ "$s" -gt "$best_s" ] && best_s=$s
	[ "$o" -gt "$best_r" ] && best_r=$o
done
[ "$best_s" = 0 ] && best_s=fail
[ "$best_r" = 0 ] && best_r=fail
row "$f1" "${lat%% *}" 5 "$(awk -v a="${lat%% *}" 'BEGIN { if (a + 0 > 0) printf "%.2fx of the goal (median %s ms)", a / 5, "'"${lat##* }"'"; else print "fail" }')"
row "$f2" "$best_s" "$best_r"
row "$f3" "$rss" 4096 "$(awk -v a="$rss" 'BEGIN { if (a + 0 > 0) printf "%.2fx of the goal (%s KiB before the sessions)", a / 4096, "'"$rss0"'"; else print "fail" }')"
[ -s "$d/drv.err" ] && sed 's/^/# /' "$d/drv.err" >&2
exit 0
