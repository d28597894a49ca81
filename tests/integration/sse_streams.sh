# Event streams of the sessions wire (GET /v1/agents/sessions/<id>/events)
# do not hold worker threads: with 2 workers, 6 Server-Sent Events streams
# open at once all get their events and heartbeats while /health, a
# session's state, its items and the list still answer; the stream beyond
# server.max_streams is refused with 429; a cancellation reaches every
# stream (exited, turn cancelled, idle), deleting the session ends them and
# gives their slots back; SIGTERM of serve with streams open ends them and
# serve exits 0; one principal holds at most a quarter of the slots. The
# agent is the fake agent (tests/fixtures/fakeagent.c) given through
# ABX_TOOL_FAKE (no install).
. "$TOP/tests/lib.sh"

command -v musl-gcc >/dev/null || { skip "sse streams" "musl-gcc is needed to build the fake agent"; exit 0; }
musl-gcc -static -O1 -o "$T/fake" "$FIXTURES/fakeagent.c" 2>"$T/cc.err" ||
	{ not_ok "build the fake agent" "$(head -3 "$T/cc.err")"; exit 1; }
mkdir -p "$T/man" "$T/state" "$T/home"
export HOME=$T/home
cat >"$T/man/fake.json" <<EOM
{"schema":1,"name":"fake","binary":"fake","version":"1.0.0",
 "source":{"type":"tarball","bin":"bin/fake",
  "platforms":{"linux-x64":{"url":"https://localhost/fake.tgz","sha256":"$(printf %064d 0)"},
               "linux-arm64":{"url":"https://localhost/fake.tgz","sha256":"$(printf %064d 0)"}}},
 "hosts":["localhost"],"verify":{"argv":["{bin}","--version"]},"run":["{bin}","run","{prompt}"],
 "platforms":["linux-x64","linux-arm64"]}
EOM
cat >"$T/man/mixed.json" <<EOM
{"schema":1,"name":"mixed","binary":"mixed","version":"1.0.0",
 "source":{"type":"tarball","bin":"bin/mixed",
  "platforms":{"linux-x64":{"url":"https://localhost/mixed.tgz","sha256":"$(printf %064d 0)"},
               "linux-arm64":{"url":"https://localhost/mixed.tgz","sha256":"$(printf %064d 0)"}}},
 "hosts":["localhost"],"verify":{"argv":["{bin}","-c","true"]},"run":["{bin}","{prompt}"],
 "platforms":["linux-x64","linux-arm64"]}
EOM
printf '{"agents":["fake","mixed"]}\n' >"$T/config.json"
TOK=sse-streams-$$
export ABX_TOOL_FAKE=$T/fake ABX_TOOL_MIXED=/bin/sh ABX_SERVER_TOKEN=$TOK ABX_SERVER_WORKERS=2 ABX_SERVER_MAX_STREAMS=6 \
	ABX_SERVER_SSE_HEARTBEAT=1
start_serve -q --config "$T/config.json" --manifests "$T/man" --state-dir "$T/state" --tools-dir "$T/tools" \
	--preset admin || { not_ok "serve starts" "$(head -5 "$T/serve.err")"; exit 1; }
U=http://127.0.0.1:$PORT/v1/agents/sessions
H="X-Access-Token: $TOK"
# stream I SID: an SSE client in the background, its output in $T/sI
stream() {
	bg curl -sN --max-time 120 -H "$H" -H 'Accept: text/event-stream' "$U/$2/events" >"$T/s$1"
	eval "SP$1=\$BGPID"
}
# ended PID...: every one of them has exited within 20 s
ended() {
	_i=0
	while [ $_i -lt 400 ]; do
		_any=0
		for _p in "$@"; do kill -0 "$_p" 2>/dev/null && _any=1; done
		[ $_any = 0 ] && return 0
		sleep 0.05
		_i=$((_i + 1))
	done
	return 1
}
# each N PATTERN: files s1..sN all have a line matching PATTERN (20 s)
each() {
	for _k in $(seq 1 "$1"); do wait_for_line "$T/s$_k" "$2" 20 || return 1; done
}
# quick URL: 200 within 10 s (a worker held by a stream would make it wait
# for the stream's end: minutes)
quick() { test "$(curl -s -o /dev/null --max-time 10 -w '%{http_code}' -H "$H" "$1")" = 200; }

wire_new fake "print:1 sleep:600000"
check "a long session is created" test -n "$SID"
for i in 1 2 3 4 5 6; do stream $i "$SID"; done
check "6 streams with 2 workers: every one gets the events so far" each 6 '^data: .*"data":"out 1 of 1"'
check "… and heartbeats while the session is quiet" each 6 '^: keep-alive'
s=$(curl -s -o "$T/body7" -D "$T/hdr7" --max-time 10 -w '%{http_code}' -H "$H" -H 'Accept: text/event-stream' \
	"$U/$SID/events")
check "the 7th stream (server.max_streams 6): 429 with Retry-After" \
	sh -c "test '$s' = 429 && grep -qi '^Retry-After: ' '$T/hdr7'"
check "GET /health answers while 6 streams are open" quick "http://127.0.0.1:$PORT/health"
check "GET the session answers (a worker route)" quick "$U/$SID"
check "its items answer" quick "$U/$SID/items"
check "the list answers, 3 times over (more requests than workers)" \
	sh -c "for k in 1 2 3; do test \"\$(curl -s -o /dev/null --max-time 10 -w '%{http_code}' -H '$H' '$U')\" = 200 || exit 1; done"
check "a cancellation is accepted" test "$(wire_cancel "$SID")" = 202
# (its data line: the event line can arrive before it)
check "every stream gets the turn's end" each 6 '^data: .*"type": *"agent.session.idle"'
check "… exited, the turn cancelled, idle, in that order" \
	sh -c "for k in 1 2 3 4 5 6; do test \"\$(grep '^event: ' '$T/s'\$k | tail -3 | tr '\n' ' ')\" = 'event: agent.session.exited event: agent.session.turn.cancelled event: agent.session.idle ' || exit 1; done"
check "the streams carried the same events" \
	sh -c "grep -v -e '^:' -e '^\$' '$T/s1' >'$T/s1.ev'; for k in 2 3 4 5 6; do grep -v -e '^:' -e '^\$' '$T/s'\$k | cmp -s '$T/s1.ev' - || exit 1; done"
check "deleting the session answers" test "$(wire DELETE "/$SID")" = 200
check "every stream ends when the session is deleted" ended $SP1 $SP2 $SP3 $SP4 $SP5 $SP6
wire_new fake "print:1"
check "stream slots are given back: a new stream is served" \
	sh -c "curl -s --max-time 5 -H '$H' -H 'Accept: text/event-stream' '$U/$SID/events' | grep -q '^event: agent.session.created'"

# The same events two ways: the stream's data: lines are the journal's
# lines byte for byte after the wire's "event_id" and "session_id" (ids are
# seqs, event: the type); output with escapes, control bytes, UTF-8 and
# bytes that are not, long lines split, stderr, empty lines, a last line
# without newline, and 3000 plain lines in bursts.
cat >"$T/mixed.sh" <<'EOS'
i=0
while [ $i -lt 3000 ]; do
	printf '%010d plain line of moderate length from the agent\n' $i
	i=$((i + 1))
	[ $((i % 500)) = 0 ] && printf 'q "x" \\ t\tcr\rff\fbs\b ctl\001\037 del\177 utf8 h\303\251 \342\202\254 bad \377\303 </script>\n'
done
printf '\n\n'
printf 'to stderr\n' >&2
head -c 20000 /dev/zero | tr '\0' 'y'
printf '\n'
printf 'no newline at the end'
EOS
wire_new mixed "$T/mixed.sh"
bg curl -sN --max-time 60 -H "$H" -H 'Accept: text/event-stream' "$U/$SID/events" >"$T/mixed.sse"
wait_for_line "$T/mixed.sse" '^event: agent.session.idle' 60
kill "$BGPID" 2>/dev/null
two_ways() {
	python3 - "$T/mixed.sse" "$T/state/sessions/$SID.jsonl" "$SID" <<'EOP'
import json, sys
sse = open(sys.argv[1], "rb").read()
jl = open(sys.argv[2], "rb").read().split(b"\n")
sid = sys.argv[3].encode()
assert jl[-1] == b"", "journal ends with a newline"
jl = jl[1:-1]                      # the header, then the events
blocks = [b for b in sse.split(b"\n\n") if b and not b.startswith(b"retry:") and not b.startswith(b":")]
assert len(blocks) == len(jl), (len(blocks), len(jl))
for k, (blk, line) in enumerate(zip(blocks, jl), 1):
    f = blk.split(b"\n")
    ev = json.loads(line)
    assert f[0] == b"id: %d" % k and ev["seq"] == k, (k, f[0])
    assert f[1] == b"event: " + ev["type"].encode(), (k, f[1])
    assert f[2] == b'data: {"event_id":"%d","session_id":"%s",' % (k, sid) + line[1:] and len(f) == 3, k
outs = [json.loads(l) for l in jl if b'"agent.session.output"' in l]
data = [o["data"] for o in outs]
assert data.count("") == 2 and "to stderr" in data and data[-1] == "no newline at the end", data[-6:]
assert any(o.get("partial") for o in outs) and sum(1 for d in data if d.startswith("q ")) == 6
assert sum(1 for d in data if d.endswith("plain line of moderate length from the agent")) == 3000
assert [json.loads(l)["type"] for l in jl[-3:]] == ["agent.session.exited", "agent.session.turn.completed",
                                                     "agent.session.idle"]
EOP
}
check "the stream and the journal carry the same events, byte for byte" two_ways

# SIGTERM with streams open: they end and serve exits 0 within its drain.
wire_new fake "print:1 sleep:600000"
for i in 1 2 3; do rm -f "$T/s$i"; stream $i "$SID"; done
each 3 '^data: .*"data":"out 1 of 1"'
kill -TERM "$SERVE_PID"
wait_exit "$SERVE_PID" 60
check "SIGTERM with 3 streams open: serve exits 0 by itself" test "$RC" = 0
check "the streams end with it" ended $SP1 $SP2 $SP3

# One principal cannot take every stream slot: with two principals that
# have tokens and server.max_streams 8, a read-only token opening 8 streams
# gets 2 (a quarter), the others 429 request.rate_limited naming the limit,
# and another principal still gets a stream.
VIEW=viewer-$$
OTHER=other-$$
cat >"$T/policy.json" <<EOP
{"principals": {
  "viewer": {"token_sha256": "$(sha_str "$VIEW")", "preset": "readonly"},
  "other": {"token_sha256": "$(sha_str "$OTHER")", "preset": "readonly"}}}
EOP
printf '{"agents":["fake"],"policy":"%s"}\n' "$T/policy.json" >"$T/config2.json"
rm -rf "$T/state2"
mkdir -p "$T/state2"
if ABX_SERVER_MAX_STREAMS=8 start_serve -q --config "$T/config2.json" --manifests "$T/man" --state-dir "$T/state2" \
	--tools-dir "$T/tools" --preset admin; then
	U=http://127.0.0.1:$PORT/v1/agents/sessions
	wire_new fake "print:1 sleep:600000"
	for i in 1 2 3 4 5 6 7 8; do
		bg curl -sN --max-time 120 -H "X-Access-Token: $VIEW" -H 'Accept: text/event-stream' \
			"$U/$SID/events" >"$T/v$i"
	done
	sleep 2
	served=$(grep -l '^data: ' "$T"/v[1-8] | wc -l)
	refused=$(grep -l '"code":"request.rate_limited".*principal viewer holds 2 event streams.*"remedy":"' "$T"/v[1-8] | wc -l)
	check "one read-only principal opening 8 streams: 2 are served ($served)" test "$served" -eq 2
	check "… the other 6 are 429 request.rate_limited naming the limit per principal ($refused)" test "$refused" -eq 6
	curl -sN --max-time 3 -H "X-Access-Token: $OTHER" -H 'Accept: text/event-stream' \
		"$U/$SID/events" >"$T/o1"
	check "another principal still gets a stream ($(head -c 200 "$T/o1"))" grep -q '^data: ' "$T/o1"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "serve with two principals starts" "$(head -5 "$T/serve.err")"
fi
