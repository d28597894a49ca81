# Session requests refused before they can install: over
# server.max_sessions_per_agent or server.max_sessions a create answers 429
# request.rate_limited with Retry-After and starts nothing: no download reaches
# the HTTPS fixture, no install job (the runtime stays "missing", no
# install.start audit line, no staging or tool directory), no journal. Once
# the running sessions are cancelled the same request is admitted and
# installs. A create the policy denies (the sessions.create op, or the
# install it would need) opens no connection either.
. "$TOP/tests/lib.sh"

AGENT_ENV_NAME=sessions_limits
. "$FIXTURES/agent_env.sh"
for t in fake aux other den1 den2; do mktool $t && mkman $t /f/$t-1.0.0.tgz; done
conns() { wc -l <"$T/req.log" | tr -d ' '; }
gets() { grep -c " GET /f/$1-1.0.0.tgz" "$T/req.log" || true; }

TOK=limits-token-$$
cat >"$T/policy.json" <<EOM
{"principals": {"op": {"token_sha256": "$(sha_str "$TOK")", "preset": "admin",
  "deny": ["agents.den1.install", "agents.den2.sessions.create"]}}}
EOM
cat >"$T/config.json" <<EOM
{"agents": ["fake", "aux", "other", "den1", "den2"], "policy": "$T/policy.json", "manifests_dir": "$M",
 "audit_file": "$T/audit.jsonl", "server": {"max_sessions_per_agent": 2, "max_sessions": 3}}
EOM
ST=$T/state
mkdir -p "$ST" && chmod 700 "$ST"
TD=$T/tools
bg "$BIN" serve --host 127.0.0.1 --port 0 --config "$T/config.json" --tools-dir "$TD" \
	--state-dir "$ST" -q >"$T/serve.out" 2>"$T/serve.err"
SERVE_PID=$BGPID
wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10 || { not_ok "serve starts" "$(head -5 "$T/serve.err")"; exit 1; }
PORT=$(head -1 "$T/serve.out")
U=http://127.0.0.1:$PORT

# state AGENT: the runtime's state (missing, installing, ready, ...)
state() {
	curl -s -o "$T/rt" -H "X-Access-Token: $TOK" "$U/v1/agents/runtimes/$1"
	js "$T/rt" 'd.get("state")'
}
journals() { find "$ST/sessions" -name '*.jsonl' 2>/dev/null | wc -l | tr -d ' '; }
starts() { grep -c "\"event\":\"install.start\".*\"$1\"" "$T/audit.jsonl" 2>/dev/null || true; }
staged() { find "$TD" -path "*/.staging/$1-*" 2>/dev/null | wc -l | tr -d ' '; }
# snap: what a refused request must leave unchanged
snap() { echo "conns=$(conns) journals=$(journals) starts=$(starts fake)/$(starts other)/$(starts den1)/$(starts den2)"; }
# refused AGENT CODE LIMIT: create answered CODE, the error names LIMIT (and a
# Retry-After for 429)
refused() {
	wire_new "$1" "print:1"
	s=$S
	[ "$s" = "$2" ] || { echo "status $s: $(cat "$T/body")" >&2; return 1; }
	grep -q "$3" "$T/body" || { echo "body: $(cat "$T/body")" >&2; return 1; }
	[ "$2" != 429 ] || grep -qi '^Retry-After: [1-9]' "$T/hdr" || { echo "no Retry-After" >&2; return 1; }
}
# upto N CMD...: CMD succeeds within N tenths of a second
upto() {
	_n=$1; shift
	while ! "$@"; do
		_n=$((_n - 1))
		[ $_n -gt 0 ] || return 1
		sleep 0.1
	done
}
running() { # ID: the agent printed its first line (it is past any install)
	wire_upto "$1" agent.session.output && grep -qx seen "$T/ev"
}

# ---- fill the per-agent limit with running sessions of an installed tool ---------------
wire_new fake "print:1 sleep:60000"; F1=$SID
s1=$S
wire_new fake "print:1 sleep:60000"; F2=$SID
check "two sessions of fake created ($s1 $S)" test "$s1 $S" = "200 200"
upto 200 running "$F1" && upto 200 running "$F2"
check "both are running and fake was downloaded once" test "$(gets fake)/$(state fake)" = "1/ready"
# The tool goes away under its running sessions (an operator's prune, with
# the download cache): the next admitted session would have to download and
# install it again.
rm -rf "$TD/fake" "$TD/.cache"
check "with its tree removed, fake reads missing" test "$(state fake)" = missing
before=$(snap)
check "over max_sessions_per_agent: 429 request.rate_limited with Retry-After" \
	refused fake 429 'request.rate_limited.*max_sessions_per_agent'
check "the refused session started no install job (runtime still missing)" test "$(state fake)" = missing
check "no download, no install.start, no journal ($before)" test "$(snap)" = "$before"
check "no staging or tool directory for it" test "$(staged fake)" = 0 -a ! -e "$TD/fake"

# ---- fill the total limit; a second, not installed agent -----------------------------
wire_new aux "print:1 sleep:60000"; X1=$SID
upto 200 running "$X1"
check "a third running session (aux, installed)" test "$(state aux)" = ready
check "other is not installed" test "$(state other)" = missing
before=$(snap)
check "over max_sessions: 429 request.rate_limited with Retry-After" \
	refused other 429 'request.rate_limited.*server.max_sessions)'
check "the refused session of other started no install job (runtime still missing)" test "$(state other)" = missing
check "no download, no install.start, no journal ($before)" test "$(snap)" = "$before"
check "no staging or tool directory for other" test "$(staged other)" = 0 -a ! -e "$TD/other"
check "fake over both limits: still 429 request.rate_limited" refused fake 429 'request.rate_limited'
check "fake over both limits: runtime still missing, nothing changed" \
	test "$(state fake) $(snap)" = "missing $before"

# ---- cancel the running sessions ----------------------------------------------------------
for i in "$F1" "$F2" "$X1"; do wire_cancel "$i" >/dev/null; done
cancelled() { for i in "$F1" "$F2" "$X1"; do wire_upto "$i" agent.session.turn.cancelled && grep -qx seen "$T/ev" || return 1; done; }
check "the running turns are cancelled" cancelled

# ---- policy denials open no connection (with room under every limit) ---------------------
before=$(snap)
check "install of den1 denied: 403 policy.denied" refused den1 403 'policy.denied'
check "sessions.create of den2 denied: 403 policy.denied" refused den2 403 'policy.denied'
check "denied sessions: den1 and den2 still missing (no install job)" test "$(state den1)/$(state den2)" = missing/missing
check "denied sessions: no download, no install.start, no journal" test "$(snap)" = "$before"
check "the denied and refused requests left no download behind" \
	test "$(gets other)/$(gets fake)/$(gets den1)/$(gets den2)" = 0/1/0/0

# ---- with room again, the same requests are admitted and install ----------------------------
wire_new other "print:1"; O1=$SID
check "after cancel, the session of other is admitted: 200" test "$S" = 200
upto 200 running "$O1"
check "and installed other: one download, one install.start, ready" \
	test "$(gets other)/$(starts other)/$(state other)" = 1/1/ready
wire_new fake "print:1"; F3=$SID
check "after cancel, fake is admitted again: 200" test "$S" = 200
upto 200 running "$F3"
check "and installed fake again: a second download and install.start, ready" \
	test "$(gets fake)/$(starts fake)/$(state fake)" = 2/2/ready
check "the admitted sessions have journals" test -s "$ST/sessions/$O1.jsonl" -a -s "$ST/sessions/$F3.jsonl"
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
