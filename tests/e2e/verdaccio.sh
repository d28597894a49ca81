# make e2e: Verdaccio (installed from the npm registry at test time into
# build/e2e/verdaccio) as install.mirrors.npm, its uplink the real
# https://registry.npmjs.org and its storage in the test's directory:
# codex, claude-code and gemini installed through it from the lockfiles
# built into the binary, first over TLS (a certificate from a test CA made
# here; our SSL_CERT_FILE holds that CA and the system's, since the
# uplink's and nodejs.org's certificates may come from a re-signing proxy
# the system bundle trusts), then over plain http with
# install.allow_http_mirrors, then codex from a Verdaccio whose packages
# need a login ($authenticated): with a bearer token (ABX_INSTALL_NPM_TOKEN)
# and with basic auth from an .npmrc (install.mirrors.npm_auth_file), and
# install.npm_auth without one. Verdaccio's log and storage show what it
# served, a dead HTTPS_PROXY for every other host shows codex and
# claude-code read nothing elsewhere; each tool runs (--version).
. "$TOP/tests/lib.sh"

VD=$TOP/build/e2e/verdaccio
VERDACCIO=$VD/node_modules/.bin/verdaccio
SYSCA=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	skip "verdaccio" "node or npm missing: tools/hostdeps.sh e2e installs them"
	exit 0
fi
# Verdaccio 6 wants node >= 18
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 18 ]; then
	skip "verdaccio" "node $(node --version) is older than Verdaccio 6 needs (18)"
	exit 0
fi
if [ ! -x "$VERDACCIO" ]; then
	mkdir -p "$VD"
	if ! timeout 300 npm install --prefix "$VD" --no-audit --no-fund verdaccio@6.8 >"$T/npm-install.log" 2>&1; then
		skip "verdaccio" "npm could not install verdaccio@6.8: $(tail -2 "$T/npm-install.log" | tr '\n' ' ')"
		exit 0
	fi
fi
[ -f "$SYSCA" ] || { not_ok "verdaccio" "no system CA bundle at $SYSCA"; exit 1; }

export HOME=$T/home ABX_SERVER_STATE_DIR=$T/state
mkdir -p "$HOME" "$T/nobin" "$T/store"
make_pki
cat "$SYSCA" "$T/pki/ca.pem" >"$T/bundle.pem"

# verdaccio NAME URL [TLS [AUTH]]: Verdaccio listening on URL, the shared
# storage, its log (json lines, level http: one a request) in $T/NAME.log;
# with AUTH every package needs a login (users in $T/NAME.htpasswd)
verdaccio() {
	_va='$all'
	[ -z "${4:-}" ] || _va='$authenticated'
	{
		printf 'storage: %s\nuplinks:\n  npmjs:\n    url: https://registry.npmjs.org/\n    timeout: 120s\n' "$T/store"
		printf 'packages:\n  "**":\n    access: %s\n    publish: $authenticated\n    proxy: npmjs\n' "$_va"
		printf 'auth:\n  htpasswd:\n    file: %s\n' "$T/$1.htpasswd"
		printf 'log: { type: stdout, format: json, level: http }\nlisten: %s\n' "$2"
		[ -z "${3:-}" ] || printf 'https:\n  key: %s\n  cert: %s\n' "$T/pki/good.key" "$T/pki/good.pem"
	} >"$T/$1.yaml"
	bg env NODE_EXTRA_CA_CERTS="$SYSCA" "$VERDACCIO" --config "$T/$1.yaml" >"$T/$1.log" 2>&1
	VPID=$BGPID
	_i=0
	while [ $_i -lt 300 ]; do
		curl -s -o /dev/null --cacert "$T/pki/ca.pem" "$2/-/ping" && return 0
		sleep 0.1
		_i=$((_i + 1))
	done
	not_ok "start verdaccio $1" "$(tail -c 400 "$T/$1.log")"
	exit 1
}

# through NAME TOOLS-DIR [VAR=VALUE...]: prepare each agent through the
# mirror in the environment, then its --version
through() {
	_vn=$1 _vd=$2
	shift 2
	for _vt in ${VTOOLS:-codex:codex:@openai/codex claude-code:claude:@anthropic-ai/claude-code gemini:gemini:@google/gemini-cli}; do
		_vname=${_vt%%:*} _vrest=${_vt#*:}
		_vbin=${_vrest%%:*} _vpkg=${_vrest#*:}
		# codex and claude-code need nothing but npm packages: with a proxy
		# that refuses every connection for any host but the mirror's, an
		# install that succeeds read nothing from registry.npmjs.org itself
		# (gemini's node-runtime comes from nodejs.org)
		_vx=
		[ "$_vname" = gemini ] || _vx="HTTPS_PROXY=http://127.0.0.1:$DEAD HTTP_PROXY=http://127.0.0.1:$DEAD"
		run env PATH="$T/nobin" SSL_CERT_FILE="$T/bundle.pem" NO_PROXY=localhost,127.0.0.1 $_vx "$@" \
			"$BIN" prepare --only "$_vname" --tools-dir "$_vd"
		_vver=$(sed -n "s/^$_vname \([^ :]*\): installed.*/\1/p" "$T/out" | head -1)
		expect "$_vn: prepare --only $_vname through Verdaccio" 0 "$_vname $_vver: installed"
		run env PATH="$T/nobin" "$_vd/bin/$_vbin" --version
		expect "$_vn: $_vbin --version" 0 "$_vver"
		check "$_vn: Verdaccio's log: it served $_vpkg's tarball" grep -Eq \
			"\"sub\":\"in\",\"request\":\{\"method\":\"GET\",\"url\":\"/${_vpkg%%/*}(/|%2[fF])${_vpkg#*/}/-/[^\"]*\.tgz\"\}[^}]*\"status\":200" \
			"$T/$_vn.log"
		check "$_vn: ... and holds it in its storage" sh -c "ls '$T/store/$_vpkg/'*.tgz >/dev/null 2>&1"
	done
}

DEAD=$(free_port)
VP=$(free_port)
verdaccio tls "https://localhost:$VP" tls
through tls "$T/tools-tls" ABX_INSTALL_NPM_REGISTRY="https://localhost:$VP" ABX_SERVER_INSTALL_ALLOW_HOSTS="localhost:$VP"
check "tls: Verdaccio read them from its uplink, registry.npmjs.org" \
	grep -q 'registry.npmjs.org/@openai/codex/-/codex-[^"]*\.tgz' "$T/tls.log"
kill "$VPID"

HP=$(free_port)
verdaccio plain "http://127.0.0.1:$HP"
run env SSL_CERT_FILE="$T/bundle.pem" ABX_INSTALL_NPM_REGISTRY="http://127.0.0.1:$HP" \
	ABX_SERVER_INSTALL_ALLOW_HOSTS="127.0.0.1:$HP" "$BIN" prepare --only codex --tools-dir "$T/tools-refused"
expect "plain http Verdaccio without install.allow_http_mirrors: refused" 2 "" "install.allow_http_mirrors"
through plain "$T/tools-plain" ABX_INSTALL_NPM_REGISTRY="http://127.0.0.1:$HP" \
	ABX_SERVER_INSTALL_ALLOW_HOSTS="127.0.0.1:$HP" ABX_SERVER_INSTALL_ALLOW_HTTP_MIRRORS=true
kill "$VPID"

# a Verdaccio whose packages need a login: a user registered over its API
# (what `npm adduser` does) gives the token
AP=$(free_port)
verdaccio auth "https://localhost:$AP" tls auth
PW=pw-E2e-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
curl -s --cacert "$T/pki/ca.pem" -X PUT -H 'Content-Type: application/json' \
	-d "{\"name\":\"ci\",\"password\":\"$PW\"}" "https://localhost:$AP/-/user/org.couchdb.user:ci" >"$T/adduser.json"
TOK=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$T/adduser.json" 2>/dev/null)
if [ -z "$TOK" ]; then
	not_ok "auth: register a Verdaccio user" "$(head -c 300 "$T/adduser.json")"
	exit 1
fi
AUTHENV="ABX_INSTALL_NPM_REGISTRY=https://localhost:$AP ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost:$AP"
# (codex is the only tool asked for, so its failure is the run's: exit 1, not 3)
run env SSL_CERT_FILE="$T/bundle.pem" $AUTHENV "$BIN" prepare --only codex --tools-dir "$T/tools-noauth"
cat "$T/out" "$T/err" >"$T/said"
expect "auth: \$authenticated Verdaccio without a credential: install.npm_auth saying none is set" 1 "" \
	"(install.mirrors.npm) answered 401: it asks for a credential and none is set"
VTOOLS=codex:codex:@openai/codex
through auth "$T/tools-bearer" $AUTHENV ABX_INSTALL_NPM_TOKEN="$TOK"
cat "$T/out" "$T/err" >>"$T/said"
# _vcount: how many of codex's tarballs Verdaccio has served (into _vc)
_vcount() {
	_vc=$(grep -Ec '"sub":"in","request":\{"method":"GET","url":"/@openai(/|%2[fF])codex/-/[^"]*\.tgz"\}[^}]*"status":200' \
		"$T/auth.log")
}
_vcount
printf '//localhost:%s/:_auth=%s\n' "$AP" "$(printf 'ci:%s' "$PW" | base64 -w0)" >"$T/npmrc"
through auth "$T/tools-basic" $AUTHENV ABX_INSTALL_NPM_AUTH_FILE="$T/npmrc"
cat "$T/out" "$T/err" >>"$T/said"
# each tools directory has its own cache: the second install read codex
# from Verdaccio again, with basic auth
_vb=$_vc
_vcount
check "auth: Verdaccio served codex's tarballs to basic auth too ($_vb, then $_vc)" test "$_vc" -gt "$_vb"
printf '//localhost:%s/:_auth=%s\n' "$AP" "$(printf 'ci:wrong-%s' "$PW" | base64 -w0)" >"$T/npmrc.bad"
run env SSL_CERT_FILE="$T/bundle.pem" $AUTHENV ABX_INSTALL_NPM_AUTH_FILE="$T/npmrc.bad" "$BIN" prepare --only codex \
	--tools-dir "$T/tools-badauth"
cat "$T/out" "$T/err" >>"$T/said"
expect "auth: a wrong password: install.npm_auth naming the file it came from" 1 "" \
	"it refused the credential from install.mirrors.npm_auth_file $T/npmrc.bad"
unset VTOOLS
check "auth: neither the token nor the password is in any output" \
	sh -c "! grep -qF -e '$TOK' -e '$PW' '$T/said'"
kill "$VPID"
