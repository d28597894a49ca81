# make e2e: the real codex, claude-code and gemini from registry.npmjs.org in
# two roots built here and entered with chroot (a private mount namespace
# gives each /proc and /dev, as a container runtime does; the network is the
# host's):
#   scratch: the binary, the host's CA bundle, resolv.conf and hosts, nothing
#            else (FROM scratch);
#   musl:    the same plus the musl loader only, /lib/ld-musl-*.so.1 from the
#            host's musl package (Alpine's loader; claude's -musl binary
#            needs nothing else: its one DT_NEEDED, libc.musl-*.so.1, is the
#            loader itself);
#   base:    the glibc loader and glibc's own libraries only, no libstdc++
#            (distroless/base): claude-code installs and runs, gemini is
#            refused for node-runtime's libstdc++ before any download;
#   glibc:   the same plus the host's glibc loader and the libraries a
#            debian:*-slim image has (libc, libm, libpthread, libdl, librt,
#            libstdc++, libgcc_s): node-runtime links libstdc++ and libgcc_s.
# In each: prepare, `<tools>/bin/<binary> --version` through the shim, the
# same as a command op of serve (in the root; the ops declare HOME, which
# node's os.homedir() needs without an /etc/passwd), and a session and an
# agents.<a>.run with the built-in run template and a prompt, whose outcome
# must be the agent's own (an answer, or its own credential error), never a
# start failure or a trusted-directory refusal. In scratch, claude-code and
# gemini must be refused before any download; in musl, gemini.
#   IMAGES_ROOTS="musl" sh tests/run.sh --e2e --only images: only those roots
#   (default: scratch musl base glibc).
. "$TOP/tests/lib.sh"

chroot_ok images || exit 0
CA=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
[ -f "$CA" ] || { not_ok "images" "no CA bundle at $CA"; exit 1; }
ROOTS=" ${IMAGES_ROOTS:-scratch musl base glibc} "
case $ROOTS in *" musl "*) [ -e "$MLD" ] || { not_ok "musl root" "$MLD missing: install Debian's musl package"; exit 1; } ;; esac
PY=$(python3 -c 'import sys; print(sys.executable)')

# root NAME [glibc|base|musl]: mkroot with the host's CA bundle,
# resolv.conf and hosts, and the command ops
GLIBC="libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1"
root() {
	case ${2:-} in
	glibc) mkroot "$1" glibc $GLIBC libstdc++.so.6 libgcc_s.so.1 ;;
	base) mkroot "$1" glibc $GLIBC ;;
	*) mkroot "$1" ${2:-} ;;
	esac
	mkdir -p "$R/work"
	cp "$CA" "$R/ca.pem"
	cp /etc/resolv.conf /etc/hosts "$R/etc/"
	cat >"$R/commands.json" <<'EOM'
[{"id": "codex.version", "argv": ["codex", "--version"], "install": ["codex"], "env": ["HOME"]},
 {"id": "claude.version", "argv": ["claude", "--version"], "install": ["claude-code"], "env": ["HOME"]},
 {"id": "gemini.version", "argv": ["gemini", "--version"], "install": ["gemini"], "env": ["HOME"]}]
EOM
}
ROOT_ENV="HOME=/home SSL_CERT_FILE=/ca.pem ABX_TOOLS_DIR=/tools ABX_SERVER_STATE_DIR=/state ABX_SERVER_TOKEN=tok"
serve_in() { # ROOT AGENTS-JSON -> $U, $SERVE_PID
	printf '{"agents": %s, "commands": "/commands.json", "install": {"use_path": false}}\n' "$2" >"$1/server.json"
	bg env -i PATH=/bin HOME=/home SSL_CERT_FILE=/ca.pem ABX_TOOLS_DIR=/tools ABX_SERVER_STATE_DIR=/state \
		ABX_SERVER_TOKEN=tok "$UNSHARE" -m sh -c \
		'r=$1; shift; mount -t proc proc "$r/proc" && mount --bind /dev "$r/dev" && exec "$0" "$r" "$@"' \
		"$CHROOT" "$1" /abx serve --host 127.0.0.1 --port 0 -q --config /server.json >"$T/serve.out" 2>"$T/serve.err"
	SERVE_PID=$BGPID
	wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 20 || { not_ok "serve starts" "$(head -3 "$T/serve.err")"; return 1; }
	U=http://127.0.0.1:$(head -1 "$T/serve.out")
}
post() { curl -s -o "$T/body" -w '%{http_code}' -H 'X-Access-Token: tok' -H 'Content-Type: application/json' \
	-X POST --data "$2" "$U$1"; }
say() { echo "# $*"; }

# op NAME BIN VERSION: the command op answers the version
op_version() {
	code=$(post "/v1/ops/$1.version" '{}')
	check "$2: $1.version as a command op (200, exit 0, $3)" \
		sh -c "[ '$code' = 200 ] && grep -q '\"exit_code\":0' '$T/body' && grep -q '$3' '$T/body'"
	say "$1.version: $(head -c 300 "$T/body")"
}
# session ROOTNAME AGENT: agents.<a>.run with the built-in template reaches
# the agent: it starts, and what comes out is the agent's own (an answer, or
# its own error without credentials or without its API). An agent that keeps
# retrying its API (this machine reaches only package registries) is ended
# by the run's timeout (120 s). The run's session is then read on the wire.
session() {
	code=$(curl -s -m 300 -o "$T/body" -w '%{http_code}' -H 'X-Access-Token: tok' -H 'Content-Type: application/json' \
		-X POST --data '{"prompt": "Reply with the single word: pong", "timeout": 120}' "$U/v1/ops/agents.$2.run")
	say "$1 $2 run: $code $(head -c 400 "$T/body")"
	check "$1: agents.$2.run answers once the agent has ended (200)" test "$code" = 200
	SID=$(json_eval "$T/body" 'd.get("session","")' 2>/dev/null)
	[ "$(json_eval "$T/body" 'd.get("timed_out")' 2>/dev/null)" = True ] &&
		check "$1: agents.$2.run: the timeout ended it (cancelled)" \
			test "$(json_eval "$T/body" 'd["status"]')" = cancelled
	"$PY" "$FIXTURES/sessclient.py" events "${U##*:}" tok "$SID" - 1 30 >"$T/ev"
	"$PY" "$FIXTURES/evsum.py" "$T/ev" >"$T/evsum"
	say "$1 $2 session: $(tr '\n' '|' <"$T/evsum")"
	check "$1: $2 session: the agent started and spoke" grep -Eq 'started output' "$T/evsum"
	check "$1: $2 session: not our failure" sh -c "! grep -q '^FAILED' '$T/evsum'"
	check "$1: $2 session: no trusted-directory refusal" sh -c "! grep -qi 'trusted directory' '$T/evsum'"
}

# ---- scratch -----------------------------------------------------------------
case $ROOTS in *" scratch "*)
root scratch
S=$T/root-scratch
inroot "$S" /abx prepare --only codex
expect "scratch: prepare --only codex from registry.npmjs.org" 0 "codex 0.171.0: installed"
check "scratch: no node-runtime" test ! -e "$S/tools/node-runtime"
inroot "$S" /tools/bin/codex --version
expect "scratch: codex --version through the shim" 0 "codex-cli 0.171.0"
cache=$(du -sk "$S/tools/.cache" | cut -f1)
inroot "$S" /abx prepare --only claude-code
expect "scratch: claude-code refused before any download" 3 "" "install.image_unsupported: claude-code"
say "$(head -2 "$T/err" | tr '\n' '|')"
inroot "$S" /abx prepare --only gemini
expect "scratch: gemini refused before any download" 3 "" "install.image_unsupported: gemini requires node-runtime"
check "scratch: the cache did not grow" test "$(du -sk "$S/tools/.cache" | cut -f1)" = "$cache"
if serve_in "$S" '["codex"]'; then
	op_version codex scratch "codex-cli 0.171.0"
	session scratch codex
	kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
fi
;; esac

# ---- musl only (Alpine-like) ---------------------------------------------------
case $ROOTS in *" musl "*)
root musl musl
M=$T/root-musl
inroot "$M" /abx prepare --only claude-code
expect "musl: prepare --only claude-code from registry.npmjs.org" 0 "claude-code 2.1.332: installed"
check "musl: the -musl platform package" test -x "$M/tools/claude-code/2.1.332-$PLAT/node_modules/@anthropic-ai/claude-code-$PLAT-musl/claude"
check "musl: not the glibc one" test ! -e "$M/tools/claude-code/2.1.332-$PLAT/node_modules/@anthropic-ai/claude-code-$PLAT"
check "musl: no node-runtime" test ! -e "$M/tools/node-runtime"
inroot "$M" /tools/bin/claude --version
expect "musl: claude --version through the shim" 0 "2.1.332 (Claude Code)"
cache=$(du -sk "$M/tools/.cache" | cut -f1)
inroot "$M" /abx prepare --only gemini
expect "musl: gemini refused before any download" 3 "" "install.image_unsupported: gemini requires node-runtime"
say "$(head -2 "$T/err" | tr '\n' '|')"
check "musl: the cache did not grow" test "$(du -sk "$M/tools/.cache" | cut -f1)" = "$cache"
inroot "$M" /abx doctor
say "musl doctor: $(tr '\n' '|' <"$T/out")"
if serve_in "$M" '["claude-code"]'; then
	op_version claude musl "2.1.332 (Claude Code)"
	session musl claude-code
	kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
fi
;; esac

# ---- base: glibc without libstdc++ (distroless/base) ---------------------------
case $ROOTS in *" base "*)
root base base
B=$T/root-base
inroot "$B" /abx prepare --only gemini
expect "base: gemini refused before any download (node-runtime needs libstdc++)" 3 "" \
	"install.image_unsupported: gemini requires node-runtime: node-runtime cannot run in this image: it needs the shared library libstdc++.so.6"
say "$(head -2 "$T/err" | tr '\n' '|')"
check "base: nothing downloaded" test ! -e "$B/tools/.cache" -o -z "$(ls -A "$B/tools/.cache" 2>/dev/null)"
inroot "$B" /abx prepare --only claude-code
expect "base: prepare --only claude-code from registry.npmjs.org" 0 "claude-code 2.1.332: installed"
check "base: the glibc platform package" test -x "$B/tools/claude-code/2.1.332-$PLAT/node_modules/@anthropic-ai/claude-code-$PLAT/claude"
inroot "$B" /tools/bin/claude --version
expect "base: claude --version through the shim (no libstdc++ here)" 0 "2.1.332 (Claude Code)"
;; esac

# ---- glibc -------------------------------------------------------------------
case $ROOTS in *" glibc "*)
root glibc glibc
G=$T/root-glibc
inroot "$G" /abx prepare --only codex claude-code gemini
expect "glibc: prepare codex, claude-code, gemini (and node-runtime)" 0 "gemini 0.61.0: installed"
for t in codex:"codex-cli 0.171.0" claude:"2.1.332 (Claude Code)" gemini:0.61.0; do
	inroot "$G" "/tools/bin/${t%%:*}" --version
	expect "glibc: ${t%%:*} --version through the shim" 0 "${t#*:}"
done
if serve_in "$G" '["codex", "claude-code", "gemini"]'; then
	op_version codex glibc "codex-cli 0.171.0"
	op_version claude glibc "2.1.332 (Claude Code)"
	op_version gemini glibc "0.61.0"
	for a in codex claude-code gemini; do
		session glibc $a
	done
	kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
fi
;; esac
