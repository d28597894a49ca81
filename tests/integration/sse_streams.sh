# Event streams do not hold worker threads: with 2 workers, 6
# Server-Sent Events streams open at once all get their events and
# heartbeats while /health, a session's state and a JSON page of its events
# still answer; the stream beyond server.max_streams is refused with 429; a
# cancel ends every stream with the exited event; SIGTERM of serve with
# streams open ends them and serve exits 0. The agent is the fake agent
# (tests/fixtures/fakeagent.c) given through ABX_TOOL_FAKE (no install).
. "$TOP/tests/lib.sh"

command -v musl-gcc >/dev/null || { skip "sse streams" "musl-gcc is needed to build the fake agent"; exit 0; }
musl-gcc -static -O1 -o "$T/fake" "$FIXTURES/fakeagent.c" 2>"$T/cc.err" ||
	{ not_ok "build the fake agent" "$(head -3 "$T/cc.err")"; exit 1; }
unset ABX_TOOLS_DIR ABX_MANIFESTS_DIR ABX_SERVER_CONFIG ABX_SERVER_STATE_DIR ABX_SERVER_PRESET ABX_SERVER_AGENTS \
	ABX_SERVER_MAX_SESSIONS ABX_SERVER_MAX_SESSIONS_PER_AGENT ABX_SERVER_SESSION_JOURNAL_MAX_BYTES
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
U=http://127.0.0.1:$PORT
H="X-Access-Token: $TOK"
create() { # PROMPT -> $SID
	SID=$(curl -s --max-time 20 -H "$H" --data "{\"prompt\": \"$1\"}" "$U/v1/agents/fake/sessions" |
		sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
}
# stream I SID: an SSE client in the background, its output in $T/sI
stream() {
	bg curl -sN --max-time 120 -H "$H" -H 'Accept: text/event-stream' \
		"$U/v1/agents/fake/sessions/$2/events" >"$T/s$1"
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

create "print:1 sleep:600000"
check "a long session is created" test -n "$SID"
for i in 1 2 3 4 5 6; do stream $i "$SID"; done
check "6 streams with 2 workers: every one gets the events so far" each 6 '^data: .*"data":"out 1 of 1"'
check "… and heartbeats while the session is quiet" each 6 '^: keep-alive'
s=$(curl -s -o "$T/body7" -D "$T/hdr7" --max-time 10 -w '%{http_code}' -H "$H" -H 'Accept: text/event-stream' \
	"$U/v1/agents/fake/sessions/$SID/events")
check "the 7th stream (server.max_streams 6): 429 with Retry-After" \
	sh -c "test '$s' = 429 && grep -qi '^Retry-After: ' '$T/hdr7'"
check "GET /health answers while 6 streams are open" quick "$U/health"
check "GET the session answers (a worker route)" quick "$U/v1/agents/fake/sessions/$SID"
check "a JSON page of its events answers" quick "$U/v1/agents/fake/sessions/$SID/events"
check "the list answers, 3 times over (more requests than workers)" \
	sh -c "for k in 1 2 3; do test \"\$(curl -s -o /dev/null --max-time 10 -w '%{http_code}' -H '$H' '$U/v1/agents/fake/sessions')\" = 200 || exit 1; done"
s=$(curl -s -o "$T/cbody" --max-time 20 -w '%{http_code}' -H "$H" -X POST "$U/v1/agents/fake/sessions/$SID/cancel")
check "cancel answers" test "$s" = 200
check "every stream ends after the cancel" ended $SP1 $SP2 $SP3 $SP4 $SP5 $SP6
check "… with the exited event, status cancelled, last" \
	sh -c "for k in 1 2 3 4 5 6; do grep '^data: ' '$T/s'\$k | tail -1 | grep -q '\"type\":\"agent.session.exited\".*\"status\":\"cancelled\"' || exit 1; done"
check "the streams carried the same events" \
	sh -c "for k in 2 3 4 5 6; do cmp -s '$T/s1' '$T/s'\$k || exit 1; done"
check "stream slots are given back: a new stream of the ended session is served" \
	sh -c "curl -s --max-time 10 -H '$H' -H 'Accept: text/event-stream' '$U/v1/agents/fake/sessions/$SID/events' | grep -q '^event: agent.session.exited'"

# The same events three ways: the stream's data: lines are the journal's
# lines byte for byte (ids are seqs, event: the type), and the JSON page
# holds the same objects; output with escapes, control bytes, UTF-8 and
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
SID=$(curl -s --max-time 20 -H "$H" --data "{\"prompt\": \"$T/mixed.sh\"}" "$U/v1/agents/mixed/sessions" |
	sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
curl -sN --max-time 60 -H "$H" -H 'Accept: text/event-stream' "$U/v1/agents/mixed/sessions/$SID/events" >"$T/mixed.sse"
: >"$T/mixed.pages"
after=0
while :; do
	curl -s --max-time 20 -H "$H" "$U/v1/agents/mixed/sessions/$SID/events?after=$after&limit=1000" >"$T/page"
	cat "$T/page" >>"$T/mixed.pages"
	echo >>"$T/mixed.pages"
	set -- $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["last_id"], d["has_more"])' "$T/page")
	[ "${2:-}" = True ] || break
	after=$1
done
three_ways() {
	python3 - "$T/mixed.sse" "$T/state/sessions/$SID.jsonl" "$T/mixed.pages" <<'EOP'
import json, sys
sse = open(sys.argv[1], "rb").read()
jl = open(sys.argv[2], "rb").read().split(b"\n")
assert jl[-1] == b"", "journal ends with a newline"
jl = jl[1:-1]                      # the header, then the events
blocks = [b for b in sse.split(b"\n\n") if b and not b.startswith(b"retry:") and not b.startswith(b":")]
assert len(blocks) == len(jl), (len(blocks), len(jl))
for k, (blk, line) in enumerate(zip(blocks, jl), 1):
    f = blk.split(b"\n")
    ev = json.loads(line)
    assert f[0] == b"id: %d" % k and ev["seq"] == k, (k, f[0])
    assert f[1] == b"event: " + ev["type"].encode(), (k, f[1])
    assert f[2] == b"data: " + line and len(f) == 3, k
page = []
for text in open(sys.argv[3]).read().split("\n"):
    if text:
        page += json.loads(text)["data"]
assert [json.loads(l) for l in jl] == page
outs = [json.loads(l) for l in jl if b'"agent.session.output"' in l]
data = [o["data"] for o in outs]
assert data.count("") == 2 and "to stderr" in data and data[-1] == "no newline at the end", data[-6:]
assert any(o.get("partial") for o in outs) and sum(1 for d in data if d.startswith("q ")) == 6
assert sum(1 for d in data if d.endswith("plain line of moderate length from the agent")) == 3000
assert json.loads(jl[-1])["type"] == "agent.session.exited"
EOP
}
check "the stream, the journal and the JSON pages carry the same events, byte for byte" three_ways

# SIGTERM with streams open: they end and serve exits 0 within its drain.
create "print:1 sleep:600000"
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
	U=http://127.0.0.1:$PORT
	create "print:1 sleep:600000"
	for i in 1 2 3 4 5 6 7 8; do
		bg curl -sN --max-time 120 -H "X-Access-Token: $VIEW" -H 'Accept: text/event-stream' \
			"$U/v1/agents/fake/sessions/$SID/events" >"$T/v$i"
	done
	sleep 2
	served=$(grep -l '^data: ' "$T"/v[1-8] | wc -l)
	refused=$(grep -l '"code":"request.rate_limited".*principal viewer holds 2 event streams.*"remedy":"' "$T"/v[1-8] | wc -l)
	check "one read-only principal opening 8 streams: 2 are served ($served)" test "$served" -eq 2
	check "… the other 6 are 429 request.rate_limited naming the limit per principal ($refused)" test "$refused" -eq 6
	curl -sN --max-time 3 -H "X-Access-Token: $OTHER" -H 'Accept: text/event-stream' \
		"$U/v1/agents/fake/sessions/$SID/events" >"$T/o1"
	check "another principal still gets a stream ($(head -c 200 "$T/o1"))" grep -q '^data: ' "$T/o1"
	kill "$SERVE_PID"
	wait "$SERVE_PID" 2>/dev/null
else
	not_ok "serve with two principals starts" "$(head -5 "$T/serve.err")"
fi
