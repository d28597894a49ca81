# make e2e: node-runtime (a built-in manifest) from the real npm registry:
# prepare installs the pinned Node.js build
# and <tools>/bin/node runs it through the shim.
. "$TOP/tests/lib.sh"

export HOME=$T/home ABX_SERVER_STATE_DIR=$T/state
mkdir -p "$HOME"

run "$BIN" prepare --only node-runtime --tools-dir "$T/tools"
expect "prepare --only node-runtime from registry.npmjs.org" 0 "node-runtime 22.23.5: installed"
run "$T/tools/bin/node" --version
expect "<tools>/bin/node --version runs the installed Node.js" 0 "v22.23.5"
run "$T/tools/bin/node" -e 'process.stdout.write(String(6 * 7))'
expect "node runs a script through the shim" 0 "42"
run sh -c "'$T/tools/bin/node' -e 'process.exit(7)'"
check "the exit status passes through the shim" test "$RC" -eq 7
run "$BIN" verify --tools-dir "$T/tools" node-runtime
expect "verify: the Node.js tree is unchanged" 0 "OK node-runtime"
run "$BIN" prepare --only node-runtime --tools-dir "$T/tools"
expect "a second prepare is the fast path" 0 "node-runtime 22.23.5: ready"
