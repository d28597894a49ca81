# make e2e: codex, claude-code and gemini from the real npm registry:
# prepare installs each from its committed lockfile with the
# native installer, and <tools>/bin/<binary> --version runs it through the
# shim. PATH has no node: gemini gets node-runtime's; codex and claude-code
# run their native binaries.
. "$TOP/tests/lib.sh"

export HOME=$T/home ABX_SERVER_STATE_DIR=$T/state
mkdir -p "$HOME" "$T/nobin"

for t in codex:codex:0.171.0 claude-code:claude:2.1.332 gemini:gemini:0.61.0; do
	name=${t%%:*} rest=${t#*:}
	bin=${rest%%:*} ver=${rest#*:}
	run env PATH="$T/nobin" "$BIN" prepare --only "$name" --tools-dir "$T/tools"
	expect "prepare --only $name from registry.npmjs.org" 0 "$name $ver: installed"
	run env PATH="$T/nobin" "$T/tools/bin/$bin" --version
	expect "$bin --version through the shim" 0 "$ver"
done
check "node-runtime came with gemini" test -x "$T/tools/bin/node"
check "claude-code did not need node: a native binary" \
	sh -c "file -L '$T/tools/claude-code/2.1.332-'*'/node_modules/@anthropic-ai/claude-code-linux-'*'/claude' | grep -q ELF"
run "$BIN" verify --tools-dir "$T/tools" codex claude-code gemini
expect "verify: the three trees are unchanged" 0
