# The official openai SDK (npm openai, pinned by the committed lockfile
# tests/fixtures/sdkman/openai-sdk/package-lock.json) against serve's sessions
# wire with a fake agent: the SDK is installed by this project's npm-lock
# installer (prepare) from a loopback registry (tests/fixtures/npmreg.py)
# serving the tarball tools/hostdeps.sh fetched into build/cache/npm, then
# tests/fixtures/sdkwire.cjs creates a session, streams it, sends a message
# and a follow-up, lists items and turns, cancels a turn, creates a streamed
# session and deletes one, with only baseURL and apiKey set.
. "$TOP/tests/lib.sh"
PY=$(python3 -c 'import sys; print(sys.executable)')

TGZ=$TOP/build/cache/npm/openai-7.55.0.tgz
command -v node >/dev/null || { skip "wire_sdk" "node is needed (tools/hostdeps.sh check installs it)"; exit 0; }
[ -f "$TGZ" ] || { skip "wire_sdk" "no $TGZ (tools/hostdeps.sh check fetches it)"; exit 0; }
command -v musl-gcc >/dev/null || { skip "wire_sdk" "musl-gcc is needed to build the fake agent"; exit 0; }
sh "$FIXTURES/mkcerts.sh" "$T/pki" >/dev/null 2>&1 || { not_ok "test PKI" "mkcerts.sh failed"; exit 1; }
export SSL_CERT_FILE=$T/pki/ca.pem HOME=$T/home
mkdir -p "$T/reg/openai/-" "$T/home" "$T/work" "$T/man"
mkdir -m 700 "$T/sdk" "$T/tools" "$T/state"
cp "$TGZ" "$T/reg/openai/-/"
start_npmreg reg "$T/reg" "$T/pki"

# The SDK, installed as a tool from its lockfile by prepare.
run env ABX_INSTALL_NPM_REGISTRY="https://localhost:$REG_PORT" \
	ABX_SERVER_INSTALL_ALLOW_HOSTS="localhost:$REG_PORT" \
	"$BIN" prepare --manifests "$FIXTURES/sdkman" --only openai-sdk --tools-dir "$T/sdk"
expect "the pinned SDK installs from the lockfile through the loopback registry" 0 "openai-sdk 7.55.0: installed"
check "... fetched from the loopback registry once" test "$(grep -c 'GET /openai/-/openai-7.55.0.tgz' "$T/reg.log")" = 1
NM=$(echo "$T"/sdk/openai-sdk/7.55.0-*/node_modules)
check "... its package is the pinned version" grep -q '"version": "7.55.0"' "$NM/openai/package.json"

# serve with the fake agent (tests/fixtures/fakeagent.c) as agent "fake".
# fcodex: the same, started as codex exec --json is (run.dialect codex).
musl-gcc -static -O1 -o "$T/fake" "$FIXTURES/fakeagent.c" || { not_ok "fake agent" "musl-gcc failed"; exit 1; }
cp "$T/fake" "$T/fcodex"
for a in fake fcodex; do
	RUN='["{bin}","run","{prompt}"]'
	[ $a = fcodex ] && RUN='{"argv":["{bin}","exec","{prompt}"],"dialect":"codex"}'
	fakeman $a "$RUN"
done
echo "{\"agents\": [\"fake\", \"fcodex\"], \"preset\": \"admin\", \"manifests_dir\": \"$T/man\"}" >"$T/config.json"
export ABX_TOOL_FAKE=$T/fake ABX_TOOL_FCODEX=$T/fcodex ABX_SERVER_TOKEN=sdk-token
start_serve --config "$T/config.json" --tools-dir "$T/tools" --state-dir "$T/state" -q ||
	{ not_ok "serve starts" "$(head -5 "$T/serve.err")"; exit 1; }

NODE_PATH=$NM timeout 120 node "$FIXTURES/sdkwire.cjs" "http://127.0.0.1:$PORT/v1" sdk-token fake "$T/work" \
	>"$T/sdk.out" 2>"$T/sdk.err"
has() { grep -qxF -- "$1" "$T/sdk.out" || { echo "# sdk: $(head -c 1500 "$T/sdk.out" "$T/sdk.err" | tr '\n' '|')" >&2; return 1; }; }
check "SDK: sessions.create is in_progress at once, the agent and workspace as asked" \
	has "created: agent.session in_progress fake $T/work"
check "SDK: a stream opened before any message sees the environment get ready, then idle" \
	has "ready: created environment.pending environment.ready idle"
check "SDK: events.create starts a turn the open stream sees from its first event" \
	has "turn1: turn.created turn.item.added started turn.in_progress output output output exited turn.completed idle"
check "SDK: the agent's lines are raw output events" has "turn1 output: prompt: print:2|out 1 of 2|out 2 of 2"
check "SDK: a follow-up is a second turn in the same session and workspace" \
	has "turn2: turn_2 completed prompt: cwd|cwd: $T/work"
check "SDK: items.list pages (limit 1, asc) through the user's messages" has "items: user:print:2 user:cwd"
check "SDK: turns.list, newest first" has "turns: turn_2=completed turn_1=completed"
check "SDK: turns.retrieve" has "turn retrieve: agent.session.turn turn_1 completed"
check "SDK: a message during a running turn is 409 session.busy" has "busy: 409 session.busy"
check "SDK: a cancellation ends the turn, not the session" has "cancel: output exited turn.cancelled idle"
check "SDK: ... which is idle again" has "after cancel: idle"
check "SDK: create with stream: true answers with the session's events" \
	has "create stream: created environment.pending turn.created turn.item.added environment.ready started turn.in_progress output output exited turn.completed idle"
check "SDK: sessions.list pages through every session" has "list: 2 true"
check "SDK: delete, then retrieve is 404" sh -c "grep -qxF 'delete: agent.session.deleted true' '$T/sdk.out' &&
	grep -qxF 'retrieve deleted: 404' '$T/sdk.out'"
check "SDK: nothing failed" sh -c "! grep -q FAIL '$T/sdk.out'"

# An agent with a JSON dialect through the SDK: two turns, the second resumed,
# the items as the SDK's types.
cat >"$T/dia.cjs" <<'JSEOF'
const OpenAI = require('openai');
const [baseURL, apiKey, workdir] = process.argv.slice(2);
const S = new OpenAI({ baseURL, apiKey }).beta.agents.sessions;
const idle = async (id, n) => {
  const it = (await S.events.stream(id))[Symbol.asyncIterator]();
  for (let k = 0; k < n; ) if ((await it.next()).value.type === 'agent.session.idle') k++;
};
(async () => {
  const s = await S.create({ agent_id: 'fcodex', agent: { model: 'm1' },
    environment: { type: 'self_hosted', workspace_directory: workdir }, input: '`echo hi` write:g.txt' });
  await idle(s.id, 1);
  await S.events.create(s.id, { events: [{ type: 'agent.session.input.message', input: 'and?' }] });
  await idle(s.id, 2);
  for await (const i of S.items.list(s.id, { order: 'asc' })) {
    if (i.type === 'command_execution') console.log(`command: ${i.command} ${JSON.stringify(i.output)} ${i.exit_code} ${i.status}`);
    else if (i.type === 'function_call') console.log(`call: ${i.name} ${i.arguments.kind}`);
    else if (i.type === 'message' && i.role === 'assistant') console.log(`answer: ${i.content[0].text}`);
  }
})().catch((e) => { console.log('FAIL: ' + e); process.exit(1); });
JSEOF
NODE_PATH=$NM timeout 60 node "$T/dia.cjs" "http://127.0.0.1:$PORT/v1" sdk-token "$T/work" >"$T/sdk.out" 2>"$T/sdk.err"
check "SDK, codex dialect: the command item with its output and exit code" has 'command: echo hi "hi\n" 0 completed'
check "SDK, codex dialect: the file change" has "call: file_change add"
check "SDK, codex dialect: the model reached the agent; turn 2 resumed turn 1" sh -c \
	"grep -qxF 'answer: turn 1 (model m1): The command printed hi.' '$T/sdk.out' &&
	grep -qxF 'answer: turn 2 (model m1): Earlier the command printed hi.' '$T/sdk.out'"

# The same SDK script's conversation (sdkwire.cjs converse) with the fake
# agent speaking each agent's JSON dialect (tests/fixtures/fakeagent.c), as
# tests/e2e/wire_agents.sh runs it with the real agents.
kill "$SERVE_PID"
wait "$SERVE_PID" 2>/dev/null
for d in codex claude-code gemini; do
	n=f$(echo "$d" | tr -d -)
	case $d in
	codex) x='"--dangerously-bypass-approvals-and-sandbox"' ;;
	claude-code) x='"--allowedTools", "Bash"' ;;
	gemini) x='"--approval-mode", "yolo", "--skip-trust"' ;;
	esac
	sed -e "s/\"fake\"/\"$n\"/" -e "s|\"run\":\[[^]]*\]|\"run\":{\"argv\":[\"{bin}\",\"run\",\"{prompt}\"],\"dialect\":\"$d\",\"extra\":[$x]}|" \
		"$T/man/fake.json" >"$T/man/$n.json"
	export "ABX_TOOL_$(echo "$n" | tr a-z A-Z)=$T/fake"
done
echo "{\"agents\": [\"fake\", \"fcodex\", \"fclaudecode\", \"fgemini\"], \"preset\": \"admin\", \"manifests_dir\": \"$T/man\"}" \
	>"$T/config.json"
start_serve --config "$T/config.json" --tools-dir "$T/tools" --state-dir "$T/state" -q ||
	{ not_ok "serve starts" "$(head -5 "$T/serve.err")"; exit 1; }
echo abx-secret-0f0f >"$T/work/secret.txt"
SDK_WS=$T/work SDK_VALUE=abx-secret-0f0f
. "$FIXTURES/sdk_converse.sh"
for a in fcodex fclaudecode fgemini; do
	converse "$a" '`cat secret.txt`' 'what did it print?' '`cat hang.fifo`'
done
conv_checks fcodex 0 assistant
conv_checks fclaudecode null assistant
conv_checks fgemini null assistant

# The README's SDK lines, run as written but for the port, the agent, the
# workspace and the message (tests/integration/readme_templates.sh reads the
# README's other templates the same way).
mkdir -p "$T/app"
ln -s "$NM" "$T/app/node_modules"
"$PY" - "$TOP/README.md" "$T/app/sdk.mjs" "$PORT" "$T/work" <<'PYEOF' || not_ok "README SDK lines" "not found"
import re, sys
text, out, port, work = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3], sys.argv[4]
code = re.search(r"<!-- template: sdk.mjs -->\n```js\n(.*?)```", text, re.S).group(1)
for a, b in (("127.0.0.1:8080", "127.0.0.1:" + port), ("'codex'", "'fake'"), ("'/work'", "'%s'" % work),
             ("'list the files here'", "'print:1'")):
    assert a in code, a
    code = code.replace(a, b)
open(out, "w").write(code)
PYEOF
ABX_SERVER_TOKEN=sdk-token timeout 60 node "$T/app/sdk.mjs" >"$T/readme.out" 2>&1
check "the README's SDK lines run a turn and print its output" sh -c "grep -qx 'agent.session.output out 1 of 1' '$T/readme.out' &&
	tail -1 '$T/readme.out' | grep -qx 'agent.session.turn.completed '" 
