# Credentials for the npm mirror (install.mirrors.npm): a bearer token from
# ABX_INSTALL_NPM_TOKEN and basic auth from an .npmrc-style file
# (install.mirrors.npm_auth_file), sent only to the mirror over https, against
# tests/fixtures/npmreg.py requiring them; a missing or refused credential is
# install.npm_auth naming the mirror and the keys; a redirect to another
# origin carries no credential; the secret is in no output, log or audit.
. "$TOP/tests/lib.sh"

PKI=$T/pki
if ! sh "$FIXTURES/mkcerts.sh" "$PKI" >"$T/mkcerts.log" 2>&1; then
	not_ok "mkcerts" "$(tail -3 "$T/mkcerts.log")"
	exit 1
fi
export SSL_CERT_FILE="$PKI/ca.pem"
export ABX_INSTALL_LIBC=glibc
TOKEN=tok-Zq81secret
USERPASS=ci-user:pw-Kx42secret
BASIC=$(printf %s "$USERPASS" | base64)
mkdir -p "$T/reg" "$T/m"

FIXTURES=$FIXTURES T=$T python3 - <<'PYEOF'
import os, sys
sys.path.insert(0, os.environ["FIXTURES"])
import npmpack as P
T = os.environ["T"]
root, m = T + "/reg", T + "/m"
P.pack(root, "@t/app", "1.0.0", {"app.sh": (b"#!/bin/sh\nexit 0\n", 0o755)}, {"bin": {"app": "app.sh"}})
e = P.entry(root, "https://registry.example", "@t/app", "1.0.0", bin={"app": "app.sh"})
P.write_manifest(m, "app", "@t/app", ["registry.example"])
P.write_lock(m + "/app/package-lock.json", "@t/app", {"node_modules/@t/app": e})
PYEOF
[ -f "$T/m/app.json" ] || { not_ok "fixtures" "the generator failed"; exit 1; }
export ABX_MANIFESTS_DIR="$T/m"

start_npmreg bearer "$T/reg" "$PKI" --auth "Bearer $TOKEN"
PB=$REG_PORT
start_npmreg basic "$T/reg" "$PKI" --auth "Basic $BASIC"
PS=$REG_PORT
start_npmreg open "$T/reg" "$PKI"
PO=$REG_PORT
export ABX_SERVER_INSTALL_ALLOW_HOSTS="localhost:$PB,localhost:$PS,localhost:$PO"

# inst NAME [VAR=VALUE...]: prepare app into a fresh tools directory (no
# cache shared with another case), its outputs kept for the secret scan.
inst() {
	_c=$1
	shift
	mkdir -m 700 "$T/t.$_c"
	run env ABX_TOOLS_DIR="$T/t.$_c" ABX_SERVER_STATE_DIR="$T/s.$_c" HOME="$T/h.$_c" "$@" "$BIN" prepare --only app
	cat "$T/out" "$T/err" >>"$T/said"
}

inst none ABX_INSTALL_NPM_REGISTRY="https://localhost:$PB"
expect "no credential: install.npm_auth" 1 "" "install.npm_auth"
expect "... naming the mirror, its key and what to set" 1 "" \
	"the npm mirror https://localhost:$PB (install.mirrors.npm) answered 401: it asks for a credential and none is set (install.mirrors.npm_auth_file or ABX_INSTALL_NPM_TOKEN)"

inst bearer ABX_INSTALL_NPM_REGISTRY="https://localhost:$PB" ABX_INSTALL_NPM_TOKEN="$TOKEN"
expect "a bearer token from ABX_INSTALL_NPM_TOKEN: installed" 0
check "... the mirror received it" grep -q "GET /@t/app/-/app-1.0.0.tgz +authorization" "$T/bearer.log"

inst wrong ABX_INSTALL_NPM_REGISTRY="https://localhost:$PB" ABX_INSTALL_NPM_TOKEN=not-the-token
expect "a refused token: install.npm_auth saying where it came from" 1 "" \
	"answered 401: it refused the credential from ABX_INSTALL_NPM_TOKEN"

# basic auth from an .npmrc: lines for other registries are never sent
cat >"$T/npmrc" <<RC
; the CI's npmrc
//registry.npmjs.org/:_authToken=decoy-npmjs
//localhost:$PO/:_authToken=decoy-other-port
//localhost:$PS/:_auth=$BASIC
RC
cat >"$T/cfg.json" <<CFG
{"install": {"mirrors": {"npm": "https://localhost:$PS", "npm_auth_file": "$T/npmrc"}},
 "audit_file": "$T/audit.jsonl"}
CFG
inst basic ABX_SERVER_CONFIG="$T/cfg.json"
expect "basic auth from install.mirrors.npm_auth_file (an .npmrc scoped to the mirror): installed" 0
check "... the mirror received it" grep -q "GET /@t/app/-/app-1.0.0.tgz +authorization" "$T/basic.log"

printf '//localhost:%s/:_auth=%s\n' "$PO" "$BASIC" >"$T/npmrc.other"
inst otherscope ABX_SERVER_CONFIG="$T/cfg.json" ABX_INSTALL_NPM_AUTH_FILE="$T/npmrc.other"
expect "an .npmrc with a line only for another registry: install.npm_auth, nothing sent" 1 "" \
	"install.npm_auth: install.mirrors.npm_auth_file $T/npmrc.other: no _authToken= or _auth= line for https://localhost:$PS"
check "... the mirror saw no credential" sh -c "! grep -q '+authorization' '$T/open.log'"

printf '//localhost:%s/:_authToken=${NPM_TOKEN}\n' "$PS" >"$T/npmrc.var"
inst var ABX_SERVER_CONFIG="$T/cfg.json" ABX_INSTALL_NPM_AUTH_FILE="$T/npmrc.var"
expect "a \${VAR} line is refused, not sent as is" 1 "" "is not expanded here; put the token in ABX_INSTALL_NPM_TOKEN"

# a redirect from the mirror to another origin does not carry the credential
: >"$T/open.log"
inst redirect ABX_INSTALL_NPM_REGISTRY="https://localhost:$PB/redirect/localhost:$PO" ABX_INSTALL_NPM_TOKEN="$TOKEN"
expect "the mirror redirects to another origin: installed" 0
check "... the mirror got the credential" grep -q "GET /redirect/localhost:$PO/@t/app/-/app-1.0.0.tgz +authorization" \
	"$T/bearer.log"
check "... the redirect target served the tarball" grep -q "GET /@t/app/-/app-1.0.0.tgz" "$T/open.log"
check "... without the credential" sh -c "! grep -q '+authorization' '$T/open.log'"

# lock --check asks the mirror for the latest version, with the credential
run env ABX_INSTALL_NPM_REGISTRY="https://localhost:$PB" "$BIN" lock app --check --manifests "$T/m"
cat "$T/out" "$T/err" >>"$T/said"
expect "lock --check without the credential: install.npm_auth" 1 "" \
	"install.npm_auth: the npm mirror https://localhost:$PB (install.mirrors.npm) answered 401: it asks for a credential"
run env ABX_INSTALL_NPM_REGISTRY="https://localhost:$PB" ABX_INSTALL_NPM_TOKEN="$TOKEN" "$BIN" lock app --check \
	--manifests "$T/m"
cat "$T/out" "$T/err" >>"$T/said"
expect "lock --check with ABX_INSTALL_NPM_TOKEN: the mirror answers, nothing stale" 0
check "... the mirror received it" grep -q "GET /@t%2fapp +authorization" "$T/bearer.log"

# https only: a credential is never sent over plain http
printf '{"install": {"mirrors": {"npm": "http://localhost:%s", "npm_auth_file": "%s"}, "allow_http_mirrors": true}}' \
	"$PO" "$T/npmrc" >"$T/http.json"
run "$BIN" check-config --config "$T/http.json"
expect "check-config: install.mirrors.npm_auth_file with a plain http mirror is config.invalid" 2 "" \
	"install.mirrors.npm_auth_file: the credential is sent only to an https:// install.mirrors.npm"
printf '{"install": {"mirrors": {"npm_auth_file": "%s"}}}' "$T/npmrc" >"$T/nomirror.json"
run "$BIN" check-config --config "$T/nomirror.json"
expect "check-config: install.mirrors.npm_auth_file without a mirror is config.invalid" 2 "" "and that is not set"
inst http ABX_INSTALL_NPM_REGISTRY="http://localhost:$PO" ABX_SERVER_INSTALL_ALLOW_HTTP_MIRRORS=true \
	ABX_INSTALL_NPM_TOKEN="$TOKEN"
expect "ABX_INSTALL_NPM_TOKEN with a plain http mirror: config.invalid, nothing sent" 1 "" \
	"a credential (ABX_INSTALL_NPM_TOKEN) is sent only over https"
check "... the mirror saw no credential" sh -c "! grep -q '+authorization' '$T/open.log'"

# the secret is in no output, log or audit record
run env ABX_INSTALL_NPM_TOKEN="$TOKEN" "$BIN" check-config --config "$T/cfg.json"
cat "$T/out" "$T/err" >>"$T/said"
expect "check-config with the credential set" 0
run env ABX_INSTALL_NPM_TOKEN="$TOKEN" "$BIN" doctor --config "$T/cfg.json"
cat "$T/out" "$T/err" >>"$T/said"
check "audit records were written" test -s "$T/audit.jsonl"
for s in "$TOKEN" "$BASIC" "${USERPASS#*:}"; do
	check "the secret ${s%%-*}... is in no output, error or audit record" \
		sh -c "! grep -rqF -- '$s' '$T/said' '$T/audit.jsonl' '$T'/s.* '$T'/t.*"
done
