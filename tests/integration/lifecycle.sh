# The platform's lifecycle: serve started before the sandbox has a credential
# (server.token_file), the token written, replaced and voided by a sandbox id
# change; GET /ready and healthcheck --ready following initialisation and the
# tools' state; nothing secret written by the applets an image build runs.
# Peers: curl.
. "$TOP/tests/lib.sh"

mkdir -p "$T/home" "$T/run" "$T/state" "$T/pbin" "$T/man"
export HOME=$T/home ABX_SERVER_STATE_DIR=$T/state
TF=$T/run/token
ID=$T/run/id

# code PATH [TOKEN]: the status of GET PATH, the body in $T/body
code() {
	curl -s -o "$T/body" -w '%{http_code}' ${2:+-H "X-Access-Token: $2"} "http://127.0.0.1:$PORT$1"
}
# until_code WANT PATH [TOKEN]: poll (at most 1 s) until GET PATH answers WANT
until_code() {
	_i=0
	while [ "$(code "$2" "${3:-}")" != "$1" ]; do
		[ $_i -ge 20 ] && return 1
		sleep 0.05
		_i=$((_i + 1))
	done
}
# until_said TEXT PATH [TOKEN]: poll (at most 1 s) until GET PATH's body holds TEXT
until_said() {
	_i=0
	while code "$2" "${3:-}" >/dev/null && ! grep -qF -- "$1" "$T/body"; do
		[ $_i -ge 20 ] && return 1
		sleep 0.05
		_i=$((_i + 1))
	done
}
# put FILE TEXT: written whole and renamed into place, as a platform's file API does
put() { printf '%s\n' "$2" >"$1.tmp" && mv "$1.tmp" "$1"; }

# ---- not initialised: 503 everywhere but /health and /ready ---------------
printf 'sbx-a\n' >"$ID"
export ABX_SERVER_SANDBOX_ID_FILE="$ID"
if ! start_serve --token-file "$TF" --preset admin; then
	not_ok "serve with a missing token file" "did not start: $(head -3 "$T/serve.err")"
	exit 1
fi
check "serve logs that it waits for the token file" grep -q "$TF (not there yet: not initialised)" "$T/serve.err"
check "/health is 200 and says initialised false" sh -c \
	"[ \"\$(curl -s -o '$T/h' -w '%{http_code}' http://127.0.0.1:$PORT/health)\" = 200 ] && grep -q '\"initialised\":false' '$T/h'"
check "/ready is 503 server.not_initialised" sh -c "[ $(code /ready) = 503 ] && grep -q server.not_initialised '$T/body'"
check "... with details.token_file" grep -qF "\"details\":{\"token_file\":\"$TF\"}" "$T/body"
for p in /v1/ops /metrics /v1/agents/runtimes /nowhere; do
	check "GET $p without a token is 503 server.not_initialised naming the file" sh -c \
		"[ $(code $p) = 503 ] && grep -q '\"code\":\"server.not_initialised\"' '$T/body' && grep -qF '$TF is missing' '$T/body'"
done
check "GET /v1/ops with a token is 503 too" sh -c "[ $(code /v1/ops some-token) = 503 ]"
post=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'X-Access-Token: t' -d '{}' "http://127.0.0.1:$PORT/v1/ops/x.y")
check "POST /v1/ops/x.y is 503" test "$post" = 503
run "$BIN" healthcheck --port "$PORT"
expect "healthcheck (liveness) passes before initialisation" 0
run "$BIN" healthcheck --ready -v --port "$PORT"
expect "healthcheck --ready fails before initialisation (exit 1)" 1 "" "503"
: >"$TF"
check "an empty token file is not initialised, and the 503 says so" until_said "$TF is empty" /v1/ops x
check "no token was made in the state directory" test -z "$(find "$T/state" -name 'token*')"

# ---- the token written: the API opens within a second ----------------------
put "$TF" "first-token-$$"
check "writing the token file opens the API within a second" until_code 200 /v1/ops "first-token-$$"
check "/health says initialised true" sh -c "[ $(code /health) = 200 ] && grep -q '\"initialised\":true' '$T/body'"
check "/ready is 200 once initialised (mode lazy: no tool to wait for)" test "$(code /ready)" = 200
check "a wrong token is 401" test "$(code /v1/ops wrong)" = 401
run "$BIN" healthcheck --ready --port "$PORT"
expect "healthcheck --ready passes once initialised" 0

# ---- rotation: the new one at once, the old one 401 -----------------------
printf 'second-token-%s\n' $$ >"$TF"
check "a token written in place replaces the old one" until_code 200 /v1/ops "second-token-$$"
check "the old token answers 401" test "$(code /v1/ops "first-token-$$")" = 401
put "$TF" "third-token-$$"
check "a token renamed into place replaces it" until_code 200 /v1/ops "third-token-$$"
check "the replaced token answers 401" test "$(code /v1/ops "second-token-$$")" = 401

# ---- another sandbox: void until the token file is written again -----------
put "$ID" sbx-b
check "a sandbox id change makes the server not initialised" until_code 503 /v1/ops "third-token-$$"
check "the 503 says the token was written in another sandbox" grep -q 'another sandbox' "$T/body"
check "/health says initialised false after the id change" sh -c "[ $(code /health) = 200 ] && grep -q '\"initialised\":false' '$T/body'"
check "/ready is 503 after the id change" test "$(code /ready)" = 503
put "$TF" "third-token-$$"
check "the token file written again (same token) opens it again" until_code 200 /v1/ops "third-token-$$"
rm -f "$ID"
check "a missing id file is no platform: the token stays valid" test "$(code /v1/ops "third-token-$$")" = 200
rm -f "$TF"
check "the token file removed: not initialised again" until_code 503 /v1/ops "third-token-$$"
check "serve made no token anywhere under HOME or the state directory" \
	test -z "$(find "$T/home" "$T/state" -name 'token*')"
kill "$SERVE_PID"
wait "$SERVE_PID"

# ---- ABX_SERVER_TOKEN and a token file: one credential, not two -------------
run env ABX_SERVER_TOKEN=x "$BIN" serve --host 127.0.0.1 --port 0 --token-file "$TF"
expect "ABX_SERVER_TOKEN with server.token_file is config.invalid (exit 2)" 2 "" "config.invalid"

# ---- /ready and the tools: mode build needs them installed -----------------
cat >"$T/man/hello.json" <<EOF
{"schema":1,"name":"hello","binary":"hello","version":"1.0.0",
 "source":{"type":"tarball","bin":"bin/hello","strip_components":1,
  "platforms":{"linux-x64":{"url":"https://localhost:9/h.tgz","sha256":"$(printf %064d 0)"},
               "linux-arm64":{"url":"https://localhost:9/h.tgz","sha256":"$(printf %064d 0)"}}},
 "hosts":["localhost"],"verify":{"argv":["{bin}"],"expect":"hello 1.0.0"},
 "path":{"argv":["{bin}","--version"],"min":"1.0.0"},
 "platforms":["linux-x64","linux-arm64"]}
EOF
printf '[{"id": "hello.run", "argv": ["hello"], "install": ["hello"]}]\n' >"$T/cmds.json"
cat >"$T/server.json" <<EOF
{"install": {"mode": "build"}, "commands": "$T/cmds.json", "manifests_dir": "$T/man",
 "tools_dir": "$T/tools", "server": {"token_file": "$TF", "sandbox_id_file": "$ID"}}
EOF
put "$TF" "tools-token-$$"
export PATH="$T/pbin:$PATH"

# what an image build runs writes no token anywhere
run "$BIN" check-config --config "$T/server.json"
expect "check-config with a token file" 0
run "$BIN" doctor --config "$T/server.json"
check "doctor does not ask for a token when server.token_file is set" sh -c "! grep -q 'no token is configured' '$T/out'"
rm -f "$TF"
mkdir -p "$T/pbin2"
printf '#!/bin/sh\necho "hello 1.0.0"\n' >"$T/pbin2/hello"
chmod 755 "$T/pbin2/hello"
run env PATH="$T/pbin2:$PATH" "$BIN" prepare --config "$T/server.json"
expect "prepare with a token file (hello on PATH: nothing to install)" 0
check "prepare, check-config, doctor and serve wrote no token file" \
	test -z "$(find "$T/home" "$T/state" "$T/tools" -name 'token*' 2>/dev/null)"
put "$TF" "tools-token-$$"

if ! start_serve --config "$T/server.json"; then
	not_ok "serve in mode build" "did not start: $(head -3 "$T/serve.err")"
	exit 1
fi
check "mode build, hello missing: /ready is 503 server.not_ready naming the tool" sh -c \
	"[ $(code /ready) = 503 ] && grep -q '\"code\":\"server.not_ready\"' '$T/body' && grep -q '\"tool\":\"hello\"' '$T/body'"
check "... and again (the answer kept a second), details.tool still there" sh -c \
	"[ $(code /ready) = 503 ] && grep -q '\"details\":{\"tool\":\"hello\"}' '$T/body'"
run "$BIN" healthcheck --ready --port "$PORT"
expect "healthcheck --ready fails while a needed tool is missing" 1
run "$BIN" healthcheck --port "$PORT"
expect "healthcheck (liveness) passes meanwhile" 0
printf '#!/bin/sh\necho "hello 1.0.0"\n' >"$T/pbin/hello"
chmod 755 "$T/pbin/hello"
_i=0
while [ "$(code /ready)" != 200 ] && [ $_i -lt 100 ]; do
	sleep 0.05
	_i=$((_i + 1))
done
check "hello installed (on PATH): /ready turns 200" test "$(code /ready)" = 200
run "$BIN" healthcheck --ready --port "$PORT"
expect "healthcheck --ready passes with every tool there" 0
check "/ready is counted in the metrics" sh -c \
	"[ $(code /metrics "tools-token-$$") = 200 ] && grep -q 'route=\"ready\"' '$T/body'"
kill "$SERVE_PID"
wait "$SERVE_PID"
