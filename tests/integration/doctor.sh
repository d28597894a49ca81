# doctor: PASS/WARN/FAIL lines with fixes for directories (group-writable,
# noexec, read-only root), the CA bundle, credentials (names only), ports,
# installed tools, --network and --json.
. "$TOP/tests/lib.sh"
unset OPENAI_API_KEY ANTHROPIC_API_KEY GEMINI_API_KEY GOOGLE_API_KEY CURSOR_API_KEY

mkdir -m 700 "$T/home" "$T/state" "$T/tools" "$T/m"
echo '{}' >"$T/empty.json"
export HOME="$T/home" ABX_SERVER_STATE_DIR="$T/state" ABX_SERVER_CONFIG="$T/empty.json"
# one free ephemeral port, and one with a listener
port_of() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
FREE=$(port_of)
bg python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); c.close()
' >"$T/listener"
wait_for_line "$T/listener" '^[0-9]' 5 || not_ok "listener" "did not start"
BUSY=$(head -1 "$T/listener")
# an https server with a certificate for localhost from the test PKI: its CA
# in $T/pki/ca.pem, and a bundle that lacks it ($T/pki/other.crt)
sh "$FIXTURES/mkcerts.sh" "$T/pki" >/dev/null 2>&1 || { not_ok "test PKI" "mkcerts.sh failed"; exit 1; }
mkdir "$T/www"
bg python3 "$FIXTURES/httpd.py" --root "$T/www" --log "$T/req.log" --cert "$T/pki/good.pem" \
	--key "$T/pki/good.key" >"$T/tlsport" 2>"$T/httpd.err"
wait_for_line "$T/tlsport" '^[0-9]' 10 || not_ok "https fixture" "$(cat "$T/httpd.err")"
TP=$(head -1 "$T/tlsport")
D="$BIN doctor --ports $FREE"
status() { grep -E "^$1 +$2: " "$T/out" >/dev/null; }

run env ABX_TOOLS_DIR="$T/tools" $D
expect "a healthy environment exits 0" 0 "PASS  tools: $T/tools is writable and safe: new installs go here"
check "no FAIL line when healthy" sh -c "! grep -q '^FAIL' '$T/out'"
check "mode and its source" grep -q "^PASS  mode: install mode lazy (default)" "$T/out"
check "state directory checked" grep -q "^PASS  state: $T/state is writable and safe" "$T/out"
check "the free port passes" grep -q "^PASS  ports: port $FREE is free" "$T/out"
check "the summary line" grep -qE '^[0-9]+ passed, [0-9]+ warnings, 0 failed$' "$T/out"
check "the clock is checked against the build date" \
	grep -qE '^PASS  clock: [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z is plausible' "$T/out"
# HOME unset: the state directory is under the home /etc/passwd gives the user
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1 &&
	grep -q '^nobody:[^:]*:65534:[^:]*:[^:]*:/nonexistent:' /etc/passwd; then
	reachable_copy "$BIN"
	run setpriv --reuid=65534 --regid=65534 --clear-groups env -u HOME -u ABX_SERVER_STATE_DIR \
		"$REACHABLE" doctor --ports "$FREE"
	check "HOME unset: the state directory is under the user's passwd home" \
		grep -q "state: /nonexistent/.local/state/agent-sandbox " "$T/out"
else
	skip "HOME unset: the state directory is under the user's passwd home" "needs root, setpriv and nobody"
fi

run env ABX_SERVER_INSTALL_MODE=build ABX_TOOLS_DIR="$T/tools" $D
expect "effective mode from env" 0 "install mode build (env ABX_SERVER_INSTALL_MODE)"

# group-writable tools directory
mkdir "$T/gw" && chmod 0770 "$T/gw"
run env ABX_TOOLS_DIR="$T/gw" $D
expect "a group-writable tools dir fails" 1 "FAIL  tools: $T/gw has mode 0770: group- or world-writable"
check "with a chmod fix" grep -q "fix: chmod go-w $T/gw" "$T/out"
chmod 0700 "$T/gw"

# installed tools and their versions
mkdir -p "$T/tools/bin"
printf '#!/bin/sh\necho "fake 1.2.3"\n' >"$T/tools/bin/fake"
printf '#!/bin/sh\necho broken >&2; exit 3\n' >"$T/tools/bin/broken"
chmod 755 "$T/tools/bin/fake" "$T/tools/bin/broken"
run env ABX_TOOLS_DIR="$T/tools" $D
expect "installed tools keep exit 0" 0 "PASS  installed: fake: fake 1.2.3 ($T/tools/bin/fake)"
check "a broken tool warns with a fix" sh -c "grep -q '^WARN  installed: broken: --version failed (broken; exit 3)' '$T/out' && grep -q 'prepare --force --only broken' '$T/out'"
# a tool that cannot start (its interpreter is missing) and one killed by a
# signal: each says why instead of an exit code it never had
printf '#!/nonexistent/sh\n' >"$T/tools/bin/noint"
printf '#!/bin/sh\necho dying; kill -9 $$\n' >"$T/tools/bin/killed"
chmod 755 "$T/tools/bin/noint" "$T/tools/bin/killed"
run env ABX_TOOLS_DIR="$T/tools" $D
expect "a tool that cannot start warns" 0 "WARN  installed: noint: --version failed (cannot run $T/tools/bin/noint: No such file or directory) ($T/tools/bin/noint)"
check "a tool killed by a signal says so" grep -q "^WARN  installed: killed: --version failed (dying; killed by signal 9) ($T/tools/bin/killed)" "$T/out"
rm -rf "$T/tools/bin"

# an agent enabled (codex, requiring node-runtime)
cp "$FIXTURES"/manifests/codex.json "$FIXTURES"/manifests/node-runtime.json "$T/m/"
sed -i "s/127.0.0.1:1/localhost:$TP/g" "$T/m/codex.json" "$T/m/node-runtime.json"
echo '{"agents": ["codex"], "manifests_dir": "m"}' >"$T/codex.json"

# the CA bundle: an explicit SSL_CERT_FILE that is missing is not replaced by
# the system bundle (which exists here), so the defaults are out of reach
run env -u SSL_CERT_DIR SSL_CERT_FILE="$T/missing.pem" ABX_TOOLS_DIR="$T/tools" $D --config "$T/codex.json"
expect "a missing CA bundle fails" 1 "FAIL  ca: no CA certificate found: SSL_CERT_FILE=$T/missing.pem (No such file or directory)"
check "... naming what will be downloaded" grep -q "(mode lazy: node-runtime is not installed, its first use downloads it)" "$T/out"
check "with a fix naming SSL_CERT_FILE" grep -q "fix: point SSL_CERT_FILE at a PEM bundle" "$T/out"
: >"$T/empty.pem"
run env -u SSL_CERT_DIR SSL_CERT_FILE="$T/empty.pem" ABX_TOOLS_DIR="$T/tools" $D --config "$T/codex.json"
expect "an empty CA bundle fails" 1 "FAIL  ca: no CA certificate found"
# nothing enabled installs a tool: nothing to download, a note
run env -u SSL_CERT_DIR SSL_CERT_FILE="$T/missing.pem" ABX_TOOLS_DIR="$T/tools" $D
expect "no CA bundle with nothing to download is not a failure" 0 \
	"PASS  ca: no CA certificate found: SSL_CERT_FILE=$T/missing.pem (No such file or directory); HTTPS downloads will fail (tls.no_trust_anchors) (a note: no enabled agent or op installs a tool, so nothing needs a download)"
run env -u SSL_CERT_DIR SSL_CERT_FILE="$T/missing.pem" ABX_SERVER_INSTALL_MODE=offline ABX_TOOLS_DIR="$T/tools" $D --config "$T/codex.json"
expect "without downloads (mode offline) a missing bundle only warns" 0 "WARN  ca: no CA certificate found"
if openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=a -days 2 \
	-keyout "$T/k1" -out "$T/c1" 2>/dev/null &&
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=b -days 2 \
	-keyout "$T/k2" -out "$T/c2" 2>/dev/null; then
	cat "$T/c1" "$T/c2" >"$T/two.pem"
	run env -u SSL_CERT_DIR SSL_CERT_FILE="$T/two.pem" ABX_TOOLS_DIR="$T/tools" $D
	expect "the anchors are counted" 0 "PASS  ca: 2 trust anchors from SSL_CERT_FILE=$T/two.pem (2)"
	# the same certificates in SSL_CERT_FILE and SSL_CERT_DIR count once
	mkdir "$T/cadir" && cp "$T/c1" "$T/cadir/a.pem" && cp "$T/c2" "$T/cadir/b.pem"
	run env SSL_CERT_DIR="$T/cadir" SSL_CERT_FILE="$T/two.pem" ABX_TOOLS_DIR="$T/tools" $D
	expect "the same anchors in SSL_CERT_FILE and SSL_CERT_DIR count once" 0 "PASS  ca: 2 trust anchors from SSL_CERT_FILE=$T/two.pem (2), SSL_CERT_DIR=$T/cadir (2)"
else
	skip "the anchors are counted" "openssl cannot make certificates"
fi

# credentials: names only
run env OPENAI_API_KEY=sk-very-secret-value ABX_TOOLS_DIR="$T/tools" $D --config "$T/codex.json"
expect "a set credential passes, by name" 0 "PASS  credentials: OPENAI_API_KEY is set (agent codex)"
check "the credential's value is never printed" sh -c "! grep -q very-secret '$T/out' '$T/err'"
run env ABX_TOOLS_DIR="$T/tools" $D --config "$T/codex.json"
expect "a missing credential warns" 0 "WARN  credentials: OPENAI_API_KEY is not set; agent codex"

# /bin/bash, install.allow_tmp
run env ABX_TOOLS_DIR="$T/tools" $BIN doctor
if [ -x /bin/bash ]; then
	expect "/bin/bash is checked" 0 "PASS  bash: /bin/bash is present"
else
	expect "/bin/bash is checked" 0 "WARN  bash: /bin/bash"
fi
check "allow_tmp off: no allow_tmp line" sh -c "! grep -q 'allow_tmp' '$T/out'"
run env ABX_TOOLS_DIR="$T/tools" ABX_SERVER_INSTALL_ALLOW_TMP=true $BIN doctor
expect "install.allow_tmp on warns, naming its source" 0 \
	"WARN  allow_tmp: install.allow_tmp is on (env ABX_SERVER_INSTALL_ALLOW_TMP)"

# a missing CA bundle fails in mode build while an enabled
# tool is not installed (prepare will download it), and only warns once it is
run env -u SSL_CERT_DIR SSL_CERT_FILE="$T/missing.pem" ABX_SERVER_INSTALL_MODE=build ABX_TOOLS_DIR="$T/tools" $D --config "$T/codex.json"
expect "mode build with an uninstalled agent: a missing bundle fails" 1 \
	"FAIL  ca: no CA certificate found: SSL_CERT_FILE=$T/missing.pem (No such file or directory); HTTPS downloads will fail (tls.no_trust_anchors) (mode build: node-runtime is not installed, prepare downloads it)"
mkdir -p "$T/tools/codex" "$T/tools/node-runtime"
: >"$T/tools/codex/.installed.json"
: >"$T/tools/node-runtime/.installed.json"
run env -u SSL_CERT_DIR SSL_CERT_FILE="$T/missing.pem" ABX_SERVER_INSTALL_MODE=build ABX_TOOLS_DIR="$T/tools" $D --config "$T/codex.json"
expect "mode build with everything installed: a missing bundle warns" 0 "WARN  ca: no CA certificate found"
rm -rf "$T/tools/codex" "$T/tools/node-runtime"

# a configured npm mirror that does not answer is a FAIL
MCLOSED=$(port_of)
run env ABX_TOOLS_DIR="$T/tools" ABX_SERVER_INSTALL_ALLOW_HOSTS="127.0.0.1:$MCLOSED" ABX_INSTALL_NPM_REGISTRY="https://127.0.0.1:$MCLOSED/npm/" $D
expect "an unreachable https mirror fails" 1 \
	"FAIL  mirror: npm mirror https://127.0.0.1:$MCLOSED/npm/: Connection refused [env ABX_INSTALL_NPM_REGISTRY]"
check "with a fix naming the host and the key" grep -q "fix: allow egress to 127.0.0.1:$MCLOSED, or fix install.mirrors.npm (set by env ABX_INSTALL_NPM_REGISTRY)" "$T/out"
mir() { # SSL_CERT_FILE HOST:PORT: doctor with that npm mirror
	run env -u SSL_CERT_DIR SSL_CERT_FILE="$1" ABX_TOOLS_DIR="$T/tools" ABX_SERVER_INSTALL_ALLOW_HOSTS="$2" ABX_INSTALL_NPM_REGISTRY="https://$2/npm/" $D
}
mir "$T/pki/ca.pem" "localhost:$TP"
expect "an https mirror whose CA is trusted passes, by a TLS handshake" 0 "PASS  mirror: npm mirror localhost:$TP is reachable (TLS handshake)"
# A TCP connect is not enough; the handshake uses the anchors installs use
mir "$T/pki/other.crt" "localhost:$TP"
expect "a mirror whose CA is missing from SSL_CERT_FILE fails (tls.unknown_ca)" 1 \
	"FAIL  mirror: npm mirror https://localhost:$TP/npm/: tls.unknown_ca: "
check "... with a fix naming SSL_CERT_FILE and SSL_CERT_DIR" grep -q "fix: add the CA that issued localhost:$TP's certificate to SSL_CERT_FILE or SSL_CERT_DIR" "$T/out"
mir "$T/pki/ca.pem" "127.0.0.1:$BUSY"
expect "a listener that speaks no TLS fails" 1 "FAIL  mirror: npm mirror https://127.0.0.1:$BUSY/npm/: "
# an IPv6 mirror: the address in brackets, the port after them
if python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
	bg python3 -c '
import socket
s = socket.socket(socket.AF_INET6); s.bind(("::1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); c.close()
' >"$T/listener6"
	wait_for_line "$T/listener6" '^[0-9]' 5 || not_ok "listener6" "did not start"
	BUSY6=$(head -1 "$T/listener6")
	mir "$T/pki/ca.pem" "[::1]:$BUSY6"
	expect "an IPv6 mirror: the address in brackets, the port after them" 1 "FAIL  mirror: npm mirror https://[::1]:$BUSY6/npm/: "
	check "... and the handshake reached it (not a connect error)" sh -c "! grep -q 'Connection refused' '$T/out'"
else
	skip "an IPv6 mirror" "no IPv6 loopback here"
fi

# the mode line names the layer that set it
echo '{"install": {"mode": "offline"}}' >"$T/offline.json"
run env ABX_TOOLS_DIR="$T/tools" $D --config "$T/offline.json"
expect "mode from a configuration file names it" 0 "PASS  mode: install mode offline (file $T/offline.json)"
run env ABX_TOOLS_DIR="$T/tools" $D --mode off
expect "mode from a flag names it" 0 "PASS  mode: install mode off (flag --mode)"

# ports
run env ABX_TOOLS_DIR="$T/tools" $BIN doctor --ports "$BUSY"
expect "a port in use warns" 0 "WARN  ports: port $BUSY: Address in use"

# the port held by our own serve (doctor run inside the running container)
(
	ABX_SERVER_TOKEN=t start_serve || { not_ok "serve starts for the port check" "$(cat "$T/serve.err")"; exit 0; }
	run env ABX_TOOLS_DIR="$T/tools" $BIN doctor --ports "$PORT"
	expect "a port our serve holds is the running server, not a failure" 0 \
		"PASS  ports: port $PORT: agent-sandbox-server "
	kill "$SERVE_PID"
)
# ABX_TOOLS_DIR naming the default <state>/tools: one tools line for it
mkdir -p -m 700 "$T/state/tools"
run env ABX_TOOLS_DIR="$T/state/tools" $D
check "ABX_TOOLS_DIR that is the default path is listed once" \
	test "$(grep -c "^[A-Z]*  tools: $T/state/tools " "$T/out")" = 1
rmdir "$T/state/tools"
# a line longer than doctor's 1 KiB loses the middle of its path, marked,
# never its end: the directory's own name and the sentence stay whole
LONG=$T/$(python3 -c 'print("/".join("segment-%02d" % i for i in range(88)))')/last-tools
run env ABX_TOOLS_DIR="$LONG" $D
check "a long tools path is elided in its middle, its name and the sentence whole" \
	sh -c "grep -E '^[A-Z]+  tools: $T/segment-00/.*…/.*/last-tools does not exist yet; .* \\[env ABX_TOOLS_DIR\\]\$' '$T/out'"

# --network against loopback: a listening host passes, a closed one fails
# (the npm registry too is the fixture's: make check reaches loopback only)
NPMLO="ABX_INSTALL_NPM_REGISTRY=https://localhost:$TP ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost:$TP"
run env $NPMLO SSL_CERT_FILE="$T/pki/ca.pem" ABX_TOOLS_DIR="$T/tools" $D --config "$T/codex.json" --network
expect "a reachable manifest host passes, by a TLS handshake" 0 "PASS  network: localhost:$TP is reachable (TLS handshake)"
check "the hosts of a tool nothing enables are not asked (the built-in claude-code's)" \
	sh -c "! grep -q 'registry.npmjs.org' '$T/out'"
run env $NPMLO SSL_CERT_FILE="$T/pki/other.crt" ABX_TOOLS_DIR="$T/tools" $D --config "$T/codex.json" --network
expect "a manifest host whose CA is not trusted fails (tls.unknown_ca)" 1 "FAIL  network: localhost:$TP: tls.unknown_ca: "
check "... with the CA bundle's fix, not egress" sh -c "grep -q 'fix: add the CA that issued localhost:$TP.s certificate to SSL_CERT_FILE or SSL_CERT_DIR' '$T/out' && ! grep -q 'allow egress' '$T/out'"
# the OCI registry's TLS failure: the same fix (its blob of the plan is codex's)
run env SSL_CERT_FILE="$T/pki/other.crt" ABX_INSTALL_OCI_MIRROR="oci://localhost:$TP/team/tools" ABX_SERVER_INSTALL_ALLOW_HOSTS="localhost:$TP" ABX_TOOLS_DIR="$T/tools" $D --config "$T/codex.json"
expect "an OCI registry whose CA is not trusted fails (tls.unknown_ca)" 1 "FAIL  registry: oci://localhost:$TP/team/tools: tls.unknown_ca: "
check "... with the CA bundle's fix, not egress" sh -c "grep -q 'fix: add the CA that issued localhost.s certificate to SSL_CERT_FILE or SSL_CERT_DIR' '$T/out' && ! grep -q 'allow egress' '$T/out'"
# a name DNS does not resolve: named as DNS
sed "s/localhost:$TP/nonexistent.invalid:$TP/g" "$T/m/codex.json" >"$T/m/codex.json.x" && mv "$T/m/codex.json.x" "$T/m/codex.json"
run nodns env $NPMLO SSL_CERT_FILE="$T/pki/ca.pem" ABX_TOOLS_DIR="$T/tools" $D --config "$T/codex.json" --network
if [ "$RC" = 125 ]; then
	skip "a host that does not resolve" "needs root and unshare -m"
else
	expect "a host that does not resolve fails" 1 "FAIL  network: nonexistent.invalid:$TP: http.resolve: "
	check "... with a DNS fix" grep -q "fix: DNS does not resolve nonexistent.invalid:$TP" "$T/out"
fi
CLOSED=$(port_of)
sed -i "s/nonexistent.invalid:$TP/127.0.0.1:$CLOSED/g; s/localhost:$TP/127.0.0.1:$CLOSED/g" "$T/m/codex.json" "$T/m/node-runtime.json"
run env $NPMLO ABX_TOOLS_DIR="$T/tools" $D --config "$T/codex.json" --network
expect "an unreachable manifest host fails" 1 "FAIL  network: 127.0.0.1:$CLOSED: Connection refused"
check "with a mirror/offline fix" grep -q "fix: allow egress to 127.0.0.1:$CLOSED, or configure install.mirrors" "$T/out"

mkdir "$T/badm"
printf '{"schema": 1, "name": "broken"}' >"$T/badm/broken.json"
run env ABX_TOOLS_DIR="$T/tools" $D --manifests "$T/badm"
expect "a broken manifest fails" 1 "FAIL  manifests: install.manifest_invalid: $T/badm/broken.json"

# configuration errors are a FAIL line, not a crash
echo '{"install": {"mdoe": "lazy"}}' >"$T/typo.json"
run env ABX_TOOLS_DIR="$T/tools" $D --config "$T/typo.json"
expect "an invalid configuration fails" 1 "FAIL  config: config.invalid: install.mdoe: unknown key (did you mean install.mode?)"

run env ABX_TOOLS_DIR="$T/tools" $D --json
expect "--json exits 0" 0
check "--json is one document of checks" python3 -c "
import json
d = json.load(open('$T/out'))
assert d['fail'] == 0 and d['pass'] > 5, d
assert all(c['status'] in ('PASS', 'WARN', 'FAIL') for c in d['checks'])
assert any(c['check'] == 'mode' for c in d['checks'])
"

# audit_file: doctor answers as serve does, in both directions.
# In a state directory that does not exist yet (the README's template), serve
# creates the directory and starts; doctor passes it.
printf '{"audit_file": "%s"}' "$T/fresh/audit.jsonl" >"$T/audit_state.json"
run env ABX_TOOLS_DIR="$T/tools" ABX_SERVER_STATE_DIR="$T/fresh" ABX_SERVER_CONFIG="$T/audit_state.json" $D
expect "doctor: an audit_file in the state directory serve creates passes" 0 \
	"PASS  audit: install records are appended to $T/fresh/audit.jsonl"
(
	export ABX_SERVER_STATE_DIR="$T/fresh" ABX_SERVER_CONFIG="$T/audit_state.json" ABX_SERVER_TOKEN=tok
	start_serve || { not_ok "serve starts with audit_file in a state directory it creates" "$(cat "$T/serve.err")"; exit 0; }
	ok "serve starts with audit_file in a state directory it creates"
	check "... and created the file there" test -f "$T/fresh/audit.jsonl"
	check "... in a directory of mode 0700" test "$(stat -c %a "$T/fresh")" = 700
	kill "$SERVE_PID"
)
# Anywhere else a missing directory is not created: serve refuses, doctor FAILs.
printf '{"audit_file": "%s"}' "$T/nodir/sub/audit.jsonl" >"$T/audit_bad.json"
run env ABX_TOOLS_DIR="$T/tools" ABX_SERVER_CONFIG="$T/audit_bad.json" $D
expect "doctor: an audit_file serve cannot write is a FAIL" 1 "FAIL  audit: audit_file $T/nodir/sub/audit.jsonl: cannot be written"
run env ABX_SERVER_CONFIG="$T/audit_bad.json" ABX_SERVER_TOKEN=tok $BIN serve --host 127.0.0.1 --port 0
expect "... and serve refuses it the same way" 2 "" "audit_file $T/nodir/sub/audit.jsonl: cannot be written"
check "... creating nothing" test ! -e "$T/nodir"

# noexec and read-only need root and a private mount namespace
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
	mkdir "$T/nx"
	run unshare -m sh -c "mount -t tmpfs -o noexec,mode=0700 tmpfs '$T/nx' && ABX_TOOLS_DIR='$T/nx' exec $D"
	expect "a noexec tools dir fails" 1 "FAIL  tools: $T/nx is on a noexec mount ($T/nx)"
	check "with a remount fix" grep -q "fix: remount $T/nx without noexec, or set ABX_TOOLS_DIR" "$T/out"
	check "the noexec mount was private" sh -c "! grep -q ' $T/nx ' /proc/mounts"

	ro="mount --make-rprivate / && mount -o bind,remount,ro / && mount --bind '$T' '$T' && mount -o bind,remount,ro '$T'"
	run unshare -m sh -c "$ro && ABX_TOOLS_DIR='$T/tools' exec $D"
	expect "a read-only root fails for mode lazy" 1 "WARN  root: the root filesystem is read-only"
	check "the fix names the variables" grep -q "fix: mount writable volumes (tmpfs) and set ABX_TOOLS_DIR=" "$T/out"
	check "a read-only explicit tools dir is a FAIL: installs refuse it, none goes elsewhere" \
		grep -q "^FAIL  tools: $T/tools cannot be written \[env ABX_TOOLS_DIR\]: installs at runtime fail with install.read_only (an explicit directory is never replaced; mode lazy)" "$T/out"
	check "... and no later directory is said to receive installs" sh -c "! grep -q 'new installs go here' '$T/out'"
	check "a read-only state dir with no token: what serve will do (401 to all but /health)" grep -q \
		"^FAIL  state: $T/state is not writable and no token is configured: serve cannot keep the token it would generate, so it answers 401 to every request but /health" "$T/out"
	run unshare -m sh -c "$ro && ABX_SERVER_TOKEN=t ABX_TOOLS_DIR='$T/tools' exec $D"
	check "... with a token configured, only the journals live in memory" \
		grep -q "^WARN  state: $T/state is not writable: session journals live in memory" "$T/out"
	run unshare -m sh -c "$ro && ABX_SERVER_TOKEN=t ABX_TOOLS_DIR='$T/tools' exec $D --mode build"
	expect "a read-only root is fine for mode build" 0 "PASS  tools: $T/tools is read-only here [env ABX_TOOLS_DIR]: prepared tools are used; mode build installs nothing at runtime"
else
	skip "noexec and read-only root" "needs root and unshare"
fi

# the tools directory's and its cache's sizes, as du counts them
mkdir -p "$T/sz/t/.cache/trees/k" "$T/sz/t/x/1.0.0-linux-x64"
chmod 700 "$T/sz/t"
head -c 300000 /dev/urandom >"$T/sz/t/x/1.0.0-linux-x64/bin"
head -c 90000 /dev/urandom >"$T/sz/t/.cache/trees/k/f"
_c=$(du -s -B1 "$T/sz/t/.cache" | cut -f1)
_a=$(du -s -B1 "$T/sz/t" | cut -f1)
run env ABX_TOOLS_DIR="$T/sz/t" $D
check "doctor: the tools directory's size, its cache apart" grep -q "^PASS  size: $T/sz/t holds .* in 4 entries ($((_a - _c)) bytes; its .cache apart)" "$T/out"
check "doctor: the cache's size" grep -q "^PASS  size: $T/sz/t/.cache holds .* in 4 entries ($_c bytes; \`prepare --prune\` removes" "$T/out"

run $BIN doctor --bogus
expect "unknown option exits 2" 2 "" "usage: agent-sandbox-server doctor"
run $BIN doctor --help
expect "--help exits 0" 0 "usage: agent-sandbox-server doctor"
