# make run (tools/run.sh): serve starts with one op a newcomer can call, and
# the curl it prints for it works as printed.
. "$TOP/tests/lib.sh"

RP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PORT=$RP TMPDIR=$T sh "$TOP/tools/run.sh" "$BIN" >"$T/run.out" 2>"$T/run.err" &
RUN_PID=$!
if ! wait_for_line "$T/run.err" "Ctrl-C stops the server" 20; then
	not_ok "make run starts" "$(cat "$T/run.err")"
	kill "$RUN_PID" 2>/dev/null
	exit 0
fi
ok "make run starts"
TOK=$(sed -n 's/^  token: *\([^ ]*\) .*/\1/p' "$T/run.err")
curl -s -H "Authorization: Bearer $TOK" "http://127.0.0.1:$RP/v1/ops" >"$T/ops"
check "make run: /v1/ops lists one op a newcomer can call (not [])" grep -q '"hello.echo"' "$T/ops"
call=$(grep "/v1/ops/hello.echo" "$T/run.err" | sed 's/^ *//')
check "... and prints the curl that calls it" test -n "$call"
sh -c "$call" >"$T/call"
check "... which answers as printed" grep -q '"stdout":"hello, world\\n"' "$T/call"
kill "$RUN_PID"
wait "$RUN_PID" 2>/dev/null
check "make run: stopping removes its directories" sh -c "! ls -d '$T'/agent-sandbox-run.* 2>/dev/null"
