# Base images: the same binary in three roots built here and entered with
# chroot (a private mount namespace gives each /proc and /dev, as a
# container runtime does): an empty "scratch" root (the binary, a CA bundle,
# /etc/hosts), a musl-only root (Alpine's loader, copied from the host's
# musl package) and a glibc root (the host's loader and libc). The tools are
# the built-in codex, claude-code, gemini and node-runtime manifests with
# only their pins swapped for fixture packages served by the fake npm
# registry through the npm mirror setting: codex's platform package holds a
# static binary, claude-code's a glibc and a musl dynamically linked one,
# gemini is JavaScript and node-runtime a glibc build.
. "$TOP/tests/lib.sh"

chroot_ok images || exit 0
[ -e "$MLD" ] || { not_ok "images" "$MLD missing: install Debian's musl package"; exit 1; }
command -v gcc >/dev/null || { not_ok "images" "gcc is needed to build the fixtures"; exit 1; }
LIBC6=$(gcc -print-file-name=libc.so.6)
LIBC6=$(readlink -f "$LIBC6")
[ -f "$LIBC6" ] || { not_ok "images" "the host's libc.so.6 was not found"; exit 1; }

. "$FIXTURES/agent_pkgs.sh"

# root NAME [musl | glibc]: mkroot with the fixtures' CA, manifests and hosts
root() {
	case ${2:-} in
	glibc) mkroot "$1" glibc libc.so.6 ;;
	*) mkroot "$1" ${2:-} ;;
	esac
	mkdir -p "$R/ca"
	cp "$PKI/ca.pem" "$R/ca/ca.pem"
	cp -r "$T/m" "$R/m"
	echo "127.0.0.1 localhost" >"$R/etc/hosts"
}
ROOT_ENV="HOME=/ SSL_CERT_FILE=/ca/ca.pem ABX_INSTALL_NPM_REGISTRY=$REG ABX_SERVER_INSTALL_ALLOW_HOSTS=${REG#https://}
ABX_MANIFESTS_DIR=/m ABX_TOOLS_DIR=/tools ABX_SERVER_STATE_DIR=/state"
fetched() { grep -c "GET /$1" "$T/reg.log" 2>/dev/null || true; }
# requests that could download: every one but the HEAD doctor makes to see
# the registry answer a TLS handshake
asked() { grep -vc ' HEAD ' "$T/reg.log" || true; }

# ---- scratch: nothing but the binary ---------------------------------------
root scratch
S=$T/root-scratch
inroot "$S" /abx prepare --only codex
expect "scratch: prepare --only codex" 0 "codex 1.0.0: installed"
check "scratch: codex needs no node-runtime" test ! -e "$S/tools/node-runtime"
check "scratch: nothing of node fetched" test "$(fetched node/)" = 0
inroot "$S" /tools/bin/codex --version
expect "scratch: codex --version through the shim (a static binary)" 0 "codex 1.0.0"
IN_ENV="CODEX_MANAGED_BY_NPM=0" inroot "$S" /tools/bin/codex --env CODEX_MANAGED_BY_NPM
expect "scratch: the shim sets what codex.js sets" 0 "CODEX_MANAGED_BY_NPM=1"
inroot "$S" /tools/bin/codex --env CODEX_MANAGED_PACKAGE_ROOT
expect "scratch: CODEX_MANAGED_PACKAGE_ROOT is the installed package" 0 \
	"CODEX_MANAGED_PACKAGE_ROOT=/tools/codex/1.0.0-$PLAT/node_modules/@openai/codex"
IN_ENV="CODEX_MANAGED_BY_BUN=1" inroot "$S" /tools/bin/codex --env CODEX_MANAGED_BY_BUN
expect "scratch: and removes what codex.js removes" 0 "CODEX_MANAGED_BY_BUN unset"

# a root without /dev/null (no /dev mounted) or without /tmp: verify says
# what is missing and how to fix it
bare() { # ROOT CMD...: like inroot, without /dev
	_r=$1
	shift
	run env -i PATH=/bin HOME=/ ABX_MANIFESTS_DIR=/m ABX_TOOLS_DIR=/tools ABX_SERVER_STATE_DIR=/state \
		"$UNSHARE" -m sh -c 'r=$1; shift; mount -t proc proc "$r/proc" && exec "$0" "$r" "$@"' "$CHROOT" "$_r" "$@"
}
bare "$S" /abx verify codex
expect "no /dev/null: verify fails, saying /dev/null is missing" 3 "verify.argv did not start: /dev/null does not exist in this image"
check "... before the path, with a fix" grep -q "so /tools/codex/.* cannot run: create it (mknod -m 666 /dev/null c 1 3) or mount /dev" "$T/out"
rmdir "$S/tmp"
inroot "$S" /abx verify codex
cp "$T/out" "$T/verify-notmp.out"
cp "$T/err" "$T/verify-notmp.err"
mkdir "$S/tmp"
check "no /tmp: verify says what is missing, with a fix ($(head -c 300 "$T/verify-notmp.out" "$T/verify-notmp.err" | tr '\n' ' '))" \
	grep -q "codex: verify.argv runs with a scratch HOME made in /tmp, which failed (No such file or directory): create /tmp (mode 1777), or set TMPDIR to a writable directory" "$T/verify-notmp.out"
before=$(asked)
inroot "$S" /abx prepare --only claude-code
expect "scratch: claude-code refused" 1 "" "install.image_unsupported: claude-code cannot run in this image"
check "scratch: the refusal names both loaders and the images that have them" \
	grep -qF "$GLD (Debian, Ubuntu, distroless/base) or the musl loader $MLD (Alpine)" "$T/err"
# claude's glibc binary links only glibc's own libraries (readelf -d: libc,
# libm, libpthread, libdl, librt, ld-linux): its fix line must not send the
# user looking for libstdc++
check "scratch: the fix line asks for nothing claude-code does not need" sh -c "! grep -q 'libstdc' '$T/err'"
check "scratch: the refusal says what the image has" grep -qF "(C library of this image: none)" "$T/err"
check "scratch: the refusal names the fix" grep -qF "ABX_TOOL_CLAUDE_CODE" "$T/err"
inroot "$S" /abx prepare --only gemini
expect "scratch: gemini refused for its node-runtime" 1 "" \
	"install.image_unsupported: gemini requires node-runtime: node-runtime cannot run in this image: it needs the glibc loader $GLD"
check "scratch: node-runtime's refusal names images that have libstdc++ (distroless/cc), not distroless/base" \
	sh -c "grep -qF '$GLD (Debian, Ubuntu, distroless/cc)' '$T/err' && ! grep -q 'distroless/base' '$T/err'"
check "scratch: the refusal is said once, by the tool that needs node-runtime" \
	test "$(grep -c 'install.image_unsupported' "$T/err")" = 1
check "scratch: nothing downloaded for either" test "$(asked)" = "$before"
check "scratch: no tree, no staging left" test ! -e "$S/tools/claude-code" -a ! -e "$S/tools/gemini" -a ! -e "$S/tools/node-runtime"
inroot "$S" /abx prepare --dry-run --only gemini
expect "scratch: prepare --dry-run says it before" 1 "cannot run here" "install.image_unsupported"
echo '{"agents": ["claude-code"]}' >"$S/cfg.json"
inroot "$S" /abx prepare --dry-run --config /cfg.json
expect "scratch: the configuration's plan fails too" 1 "claude-code" "install.image_unsupported: claude-code"
check "scratch: its row says it cannot run here, not that it will be installed" \
	grep -Eq '^claude-code .*\[cannot run here\]$' "$T/out"
inroot "$S" /abx doctor --config /cfg.json
expect "scratch: doctor fails the image check" 1 "FAIL  image"
check "scratch: doctor names the C library" grep -q "C library: none" "$T/out"
echo '{"agents": ["gemini"]}' >"$S/cfg-gemini.json"
inroot "$S" /abx doctor --config /cfg-gemini.json
expect "scratch: doctor names the agent that needs node-runtime" 1 \
	"FAIL  image: install.image_unsupported: gemini requires node-runtime: node-runtime cannot run in this image"
check "scratch: and says no PASS for the image's agents" sh -c "! grep -q 'PASS  image: every enabled agent' '$T/out'"
check "scratch: still nothing downloaded" test "$(asked)" = "$before"

# ---- musl only (Alpine-like) ------------------------------------------------
root musl musl
R=$T/root-musl
inroot "$R" /abx prepare --only claude-code
expect "musl: prepare --only claude-code" 0 "claude-code 1.0.0: installed"
check "musl: the -musl platform package" test -x "$R/tools/claude-code/1.0.0-$PLAT/node_modules/@anthropic-ai/claude-code-$PLAT-musl/claude"
check "musl: not the glibc one" test ! -e "$R/tools/claude-code/1.0.0-$PLAT/node_modules/@anthropic-ai/claude-code-$PLAT"
inroot "$R" /tools/bin/claude --version
expect "musl: claude --version (dynamically linked against musl)" 0 "claude 1.0.0"
inroot "$R" /abx prepare --only gemini
expect "musl: gemini refused (node-runtime is a glibc build)" 1 "" "(C library of this image: musl)"
inroot "$R" /abx doctor
expect "musl: doctor names the loader" 0 "C library: musl (loader $MLD)"

# ---- glibc --------------------------------------------------------------------
root glibc glibc
R=$T/root-glibc
before=$(asked)
inroot "$R" /abx prepare --only gemini
expect "glibc: node-runtime refused without libstdc++ (its manifest's libs)" 1 "" \
	"node-runtime cannot run in this image: it needs the shared library libstdc++.so.6"
check "glibc: nothing downloaded for it" test "$(asked)" = "$before"
# libstdc++ where the loader looks by default, libgcc_s in a directory that
# /etc/ld.so.conf.d names
for l in libstdc++.so.6 libgcc_s.so.1; do
	p=$(readlink -f "$(gcc -print-file-name=$l)")
	[ -f "$p" ] || { not_ok "images" "the host's $l was not found"; exit 1; }
	case $l in
	libgcc*) mkdir -p "$R/opt/gcc/lib" "$R/etc/ld.so.conf.d" && cp -L "$p" "$R/opt/gcc/lib/$l" &&
		printf '# gcc\n/opt/gcc/lib\n' >"$R/etc/ld.so.conf.d/gcc.conf" ;;
	*) cp -L "$p" "$R${LIBC6%/*}/$l" ;;
	esac
done
inroot "$R" /abx prepare --only claude-code gemini
expect "glibc: prepare claude-code and gemini (and node-runtime)" 0 "gemini 1.0.0: installed"; cat $T/err >&2
check "glibc: the glibc platform package" test -x "$R/tools/claude-code/1.0.0-$PLAT/node_modules/@anthropic-ai/claude-code-$PLAT/claude"
inroot "$R" /tools/bin/claude --version
expect "glibc: claude --version" 0 "claude 1.0.0"
inroot "$R" /tools/bin/gemini --version
expect "glibc: gemini --version through node-runtime's node" 0 "v99.0.0"
echo '{"agents": ["claude-code", "gemini", "codex"]}' >"$R/cfg.json"
inroot "$R" /abx doctor --config /cfg.json
check "glibc: doctor passes the image" grep -q "every enabled agent and what it requires can run in this image" "$T/out"

# ---- the API says so before a download (ABX_INSTALL_LIBC stands in) ------------
mkdir -m 700 "$T/tools" "$T/state"
export ABX_INSTALL_NPM_REGISTRY="$REG" ABX_SERVER_INSTALL_ALLOW_HOSTS="${REG#https://}" ABX_MANIFESTS_DIR="$T/m" ABX_TOOLS_DIR="$T/tools" ABX_SERVER_STATE_DIR="$T/state"
export SSL_CERT_FILE="$PKI/ca.pem" ABX_INSTALL_LIBC=none ABX_SERVER_TOKEN=tok ABX_SERVER_AGENTS=claude-code
before=$(asked)
if start_serve; then
	code=$(curl -s -o "$T/body" -w '%{http_code}' -H 'X-Access-Token: tok' -X POST \
		"http://127.0.0.1:$PORT/v1/agents/runtimes/claude-code/install")
	check "api: install answers 424" test "$code" = 424
	check "api: with install.image_unsupported" grep -q '"code":"install.image_unsupported"' "$T/body"
	code=$(curl -s -o "$T/body" -w '%{http_code}' -H 'X-Access-Token: tok' -H 'Content-Type: application/json' \
		-X POST --data '{"agent_id": "claude-code", "environment": {"type": "self_hosted"}, "input": "hi"}' \
		"http://127.0.0.1:$PORT/v1/agents/sessions")
	check "api: a session is refused the same way" test "$code" = 424
	check "api: nothing downloaded" test "$(asked)" = "$before"
else
	not_ok "api: serve starts" "$(cat "$T/serve.err")"
fi
