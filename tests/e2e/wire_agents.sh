# make e2e: the official openai SDK (tests/fixtures/sdkwire.cjs converse,
# the script tests/integration/wire_sdk.sh runs with the fake agents) holds
# a conversation through serve's sessions wire with the real codex,
# claude-code and gemini, installed by prepare from the real npm registry and
# configured against the scripted model server on loopback as
# tests/e2e/agent_turns.sh configures them (tests/fixtures/modelsrv_agents.sh).
# Only baseURL and apiKey are set in the SDK. Per agent: turn 1 has the agent
# run `cat secret.txt` (a random value this test wrote) through the
# permission option its manifest's run.extra passes; turn 2's answer can only
# name that value from the agent's own resumed conversation; items.list has
# the command execution with its output (and exit code where the agent
# reports one: codex); a turn whose command hangs is cancelled (the agent's
# process group goes, the session is idle) and the next turn still continues
# the conversation.
. "$TOP/tests/lib.sh"

export HOME=$T/home
command -v node >/dev/null || { skip "wire_agents" "node is needed for the SDK"; exit 0; }
mkdir -p "$HOME" "$T/ws"
mkdir -m 700 "$T/sdk" "$T/state"
VALUE=abx-secret-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
echo "$VALUE" >"$T/ws/secret.txt"

run "$BIN" prepare --only codex --only claude-code --only gemini --tools-dir "$T/tools"
expect "prepare installs codex, claude-code and gemini from registry.npmjs.org" 0 "gemini 0.61.0: "
[ "$RC" = 0 ] || exit 1
run "$BIN" prepare --manifests "$FIXTURES/sdkman" --only openai-sdk --tools-dir "$T/sdk"
expect "prepare installs the pinned SDK from its lockfile" 0 "openai-sdk 7.55.0: installed"
NM=$(echo "$T"/sdk/openai-sdk/7.55.0-*/node_modules)

. "$FIXTURES/modelsrv_agents.sh"
# serve's environment is the agents' (core/server/api_sessions.c passes it on).
export $ENV_CODEX $ENV_CLAUDE $ENV_GEMINI ABX_SERVER_TOKEN=sdk-token
echo '{"agents": ["codex", "claude-code", "gemini"], "preset": "admin"}' >"$T/config.json"
start_serve --config "$T/config.json" --tools-dir "$T/tools" --state-dir "$T/state" -q ||
	{ not_ok "serve starts" "$(head -5 "$T/serve.err")"; exit 1; }

SDK_WS=$T/ws SDK_VALUE=$VALUE
. "$FIXTURES/sdk_converse.sh"
for a in codex claude-code gemini; do
	converse "$a" "Run the command you are asked to run." "What did the command print?" "Now abx-hang, please."
done
conv_checks codex 0 assistant
conv_checks claude-code null assistant
conv_checks gemini null assistant
out=$(python3 -c 'import json, sys
print(" ".join(sorted(set(o["path"] for o in map(json.loads, open(sys.argv[1])) if o.get("method") == "CONNECT"))))' \
	"$T/model.log")
check "no agent tried to leave loopback through the proxy (${out:-none})" test -z "$out"
