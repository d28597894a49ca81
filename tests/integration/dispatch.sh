# Dispatch: argv[0], agent-sandbox-<applet>, first argument, --list,
# --install, --help, unknown applets and options.
. "$TOP/tests/lib.sh"

run "$BIN" --list
expect "--list exits 0" 0 "version"
check "--list names all nine applets" test "$(wc -l <"$T/out")" -eq 9
for a in check-config doctor fetch healthcheck lock prepare serve verify version; do
	check "--list names $a" grep -q "^$a" "$T/out"
done

run "$BIN" --help
expect "--help exits 0 and lists applets" 0 "Applets:"

run "$BIN" version
expect "version by first argument" 0 "agent-sandbox-server "
check "version names libarchive" grep -q '^libarchive ' "$T/out"
check "version names BearSSL" grep -q '^BearSSL ' "$T/out"
check "version names zlib" grep -q '^zlib ' "$T/out"
check "version names musl with its version" grep -Eq '^musl [0-9]' "$T/out"

ln -s "$BIN" "$T/version"
run "$T/version"
expect "version by argv[0]" 0 "agent-sandbox-server "
ln -s "$BIN" "$T/agent-sandbox-version"
run "$T/agent-sandbox-version" --json
expect "version by agent-sandbox-<applet> argv[0], --json" 0 '"libarchive":"'

run "$BIN" version --help
expect "applet --help exits 0" 0 "usage: agent-sandbox-server version"
run "$BIN" version --bogus
expect "unknown option exits 2 with usage" 2 "" "usage: agent-sandbox-server version"
check "unknown option error is one line first" sh -c "head -1 '$T/err' | grep -q -- '--bogus'"

run "$BIN" frobnicate
expect "unknown applet exits 2" 2 "" "unknown applet 'frobnicate'"

mkdir "$T/links" "$T/bare"
run "$BIN" --install "$T/links"
expect "--install exits 0" 0
check "--install made agent-sandbox-healthcheck" test -L "$T/links/agent-sandbox-healthcheck"
check "--install links point to an absolute path" sh -c "readlink '$T/links/agent-sandbox-version' | grep -q '^/'"
run "$T/links/agent-sandbox-version"
expect "installed link runs its applet" 0 "agent-sandbox-server "
run "$BIN" --install --bare "$T/bare"
expect "--install --bare exits 0" 0
check "--install --bare made healthcheck" test -L "$T/bare/healthcheck"
run "$BIN" --install --bare "$T/bare"
expect "--install is idempotent" 0
run "$BIN" --install
expect "--install without DIR exits 2" 2
run "$BIN" --install "$T/nonexistent"
expect "--install into a missing directory exits 1" 1

run "$BIN" version extra
expect "unexpected argument exits 2" 2

# A link under an unknown name is a broken shim, never a server.
ln -s "$BIN" "$T/no-such-tool"
run timeout 5 "$T/no-such-tool" --version
expect "a link under an unknown name exits 2" 2 "" "no loadable tool manifest names this binary"
run env PATH="$T:$PATH" timeout 5 no-such-tool
expect "the same link found through PATH exits 2" 2 "" "config.invalid"
cp "$BIN" "$T/abx"
run timeout 5 "$T/abx" version
expect "a renamed copy dispatches by first argument" 0 "agent-sandbox-server "
