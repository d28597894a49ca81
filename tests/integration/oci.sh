# An OCI registry as the fleet's shared cache: fetch --push against the
# real CNCF distribution registry (Debian's docker-registry) on loopback,
# over TLS from the test PKI, without auth and with htpasswd (bcrypt, made
# by apache2-utils' htpasswd -B), and the https fixture server as the
# origin the fetch reads from.
. "$TOP/tests/lib.sh"

REG=$(command -v docker-registry || true)
HTPASSWD=$(command -v htpasswd || true)
if [ -z "$REG" ] || [ -z "$HTPASSWD" ] || ! command -v curl >/dev/null; then
	skip "oci registry" "docker-registry, htpasswd (apache2-utils) or curl missing: tools/hostdeps.sh check installs them"
	exit 0
fi

W=$T/www
M=$T/man
mkdir -p "$W" "$M" "$T/home" "$T/state"
export HOME=$T/home ABX_SERVER_STATE_DIR=$T/state

make_pki
export SSL_CERT_FILE=$T/pki/ca.pem

start_httpd "$W" "$T/req.log"
P=$HTTPD_PORT
for t in hello other; do
	mktool $t 1.0.0 50000
	mkman $t /f/$t-1.0.0.tgz "$(sha "$W/$t-1.0.0.tgz")"
done
H=$(sha "$W/hello-1.0.0.tgz")
O=$(sha "$W/other-1.0.0.tgz")


# start_registry NAME [htpasswd]: the registry on a free port, its storage
# in $T/NAME; sets RP.
start_registry() {
	RP=$(free_port)
	{
		printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\n' "$T/$1"
		printf 'http:\n  addr: 127.0.0.1:%s\n  tls:\n    certificate: %s\n    key: %s\n' "$RP" \
			"$T/pki/good.pem" "$T/pki/good.key"
		if [ -n "${2:-}" ]; then
			printf 'auth:\n  htpasswd:\n    realm: test-registry\n    path: %s\n' "$2"
		fi
	} >"$T/$1.yml"
	bg "$REG" serve "$T/$1.yml" >"$T/$1.log" 2>&1
	_i=0
	while [ $_i -lt 100 ]; do
		curl -s -o /dev/null --cacert "$T/pki/ca.pem" "https://localhost:$RP/v2/" && return 0
		sleep 0.1
		_i=$((_i + 1))
	done
	not_ok "start registry $1" "$(head -c 300 "$T/$1.log")"
	exit 1
}
# reg_get PATH [curl args]: a GET on the registry (stdout)
reg_get() {
	_p=$1
	shift
	curl -sf --cacert "$T/pki/ca.pem" -H 'Accept: application/vnd.oci.image.manifest.v1+json' "$@" \
		"https://localhost:$RP$_p"
}
push() { # TOOLS-DIR REF [ARGS...]
	_d=$1 _r=$2
	shift 2
	mkdir -p "$_d"
	run "$BIN" fetch --only hello --manifests "$M" --tools-dir "$_d" --push "$_r" "$@"
}

# ---- the reference is checked before anything is fetched -------------------------------
for bad in "https://localhost/x" "oci://localhost" "oci://localhost/Team" "oci://u:pw@localhost/x" \
	"oci://localhost/a//b" "oci://localhost/a?b"; do
	push "$T/t0" "$bad"
	expect "--push $bad refused: oci.url, exit 2" 2 "" "oci.url"
done
check "a refused reference fetched nothing" test ! -s "$T/req.log"
check "... and never echoes a credential" sh -c "! grep -q 'pw@' '$T/err'"

# ---- push to a registry without auth -------------------------------------------------------
start_registry open
push "$T/t1" "oci://localhost:$RP/team/tools"
expect "fetch --push uploads the verified artifact and a manifest" 0 "hello 1.0.0: pushed to team/tools:hello-1.0.0"
check "... says what it uploaded" grep -q "1 blob(s) uploaded, 0 already there, 1 manifest(s)" "$T/err"
reg_get "/v2/team/tools/manifests/hello-1.0.0" >"$T/manifest.json"
check "the tag names an OCI image manifest" grep -q '"mediaType":"application/vnd.oci.image.manifest.v1+json"' "$T/manifest.json"
check "... with this product's artifactType" grep -q '"artifactType":"application/vnd.agent-sandbox.tool.v1+json"' "$T/manifest.json"
check "... the empty config descriptor" grep -q '"config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2}' "$T/manifest.json"
check "... the artifact as a tar+gzip layer with its digest and size" grep -q "\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"sha256:$H\",\"size\":$(stat -c %s "$W/hello-1.0.0.tgz")" "$T/manifest.json"
check "... and the tool, version, platform and manifest digest" grep -q "\"dev.agent-sandbox.tool\":\"hello\",\"dev.agent-sandbox.version\":\"1.0.0\",\"dev.agent-sandbox.platform\":\"$PLATFORM\",\"dev.agent-sandbox.manifest.sha256\":\"[0-9a-f]\{64\}\"" "$T/manifest.json"
reg_get "/v2/team/tools/blobs/sha256:$H" >"$T/blob"
check "the registry serves the artifact's bytes by its sha256" cmp -s "$T/blob" "$W/hello-1.0.0.tgz"

push "$T/t1" "oci://localhost:$RP/team/tools" --json
expect "a second push: --json" 0 '"push":[{"name":"hello","version":"1.0.0","ok":true,"tag":"hello-1.0.0","blobs":1}]'
before=$(grep -c '"PUT /v2/team/tools/blobs/uploads' "$T/open.log")
push "$T/t1" "oci://localhost:$RP/team/tools"
expect "a second push uploads nothing the registry has" 0 "pushed"
check "... HEAD first: 0 uploaded, 1 already there" grep -q "0 blob(s) uploaded, 1 already there" "$T/err"
check "... and the registry saw no blob upload" test "$(grep -c '"PUT /v2/team/tools/blobs/uploads' "$T/open.log")" -eq "$before"
check "... the first push did upload (the count above can move)" test "$before" -ge 1

OPEN_RP=$RP

# ---- htpasswd: anonymous refused, credentials from the environment or a docker config -------
"$HTPASSWD" -Bbn alice s3cret >"$T/htpasswd" 2>/dev/null
start_registry locked "$T/htpasswd"
REF="oci://localhost:$RP/team/tools"
LOCKED_RP=$RP
push "$T/t2" "$REF"
expect "anonymous push to a locked registry: oci.auth" 1 "" "oci.auth"
check "... the fix names ABX_OCI_AUTH" grep -q "ABX_OCI_AUTH" "$T/err"
export ABX_OCI_AUTH=alice:wr0ngpass
push "$T/t2" "$REF"
expect "wrong credentials: oci.auth" 1 "" "oci.auth"
check "... the password is never printed" sh -c "! grep -q 'wr0ngpass' '$T/err' '$T/out'"
export ABX_OCI_AUTH=nocolon
push "$T/t2" "$REF"
expect "ABX_OCI_AUTH without a colon: oci.auth" 1 "" "ABX_OCI_AUTH is not user:password"
check "... not echoed" sh -c "! grep -q 'nocolon' '$T/err'"
export ABX_OCI_AUTH=alice:s3cret
push "$T/t2" "$REF"
expect "ABX_OCI_AUTH=user:pass pushes" 0 "hello 1.0.0: pushed"
check "... the password is never printed" sh -c "! grep -q 's3cret' '$T/err' '$T/out'"
unset ABX_OCI_AUTH
reg_get "/v2/team/tools/manifests/hello-1.0.0" -u alice:s3cret >"$T/manifest2.json"
check "... the manifest is there" grep -q "sha256:$H" "$T/manifest2.json"

mkdir -p "$T/dc"
printf '{"auths":{"localhost:%s":{"auth":"%s"}}}\n' "$RP" "$(printf alice:s3cret | base64)" >"$T/dc/config.json"
run env DOCKER_CONFIG="$T/dc" "$BIN" fetch --only hello --manifests "$M" --tools-dir "$T/t2" --push "$REF"
expect "credentials from \$DOCKER_CONFIG/config.json" 0 "hello 1.0.0: pushed"
run env ABX_OCI_AUTH_FILE="$T/dc/config.json" "$BIN" fetch --only hello --manifests "$M" --tools-dir "$T/t2" --push "$REF"
expect "credentials from ABX_OCI_AUTH_FILE" 0 "hello 1.0.0: pushed"
mkdir -p "$T/home/.docker" && cp "$T/dc/config.json" "$T/home/.docker/config.json"
push "$T/t2" "$REF"
expect "credentials from ~/.docker/config.json" 0 "hello 1.0.0: pushed"
rm -f "$T/home/.docker/config.json"
run env ABX_OCI_AUTH_FILE="$T/nonexistent.json" "$BIN" fetch --only hello --manifests "$M" --tools-dir "$T/t2" --push "$REF"
expect "ABX_OCI_AUTH_FILE names a missing file: oci.auth" 1 "" "oci.auth"
printf '{"auths":{"localhost:%s":{"auth":"%s"}}}\n' "$RP" "$(printf alice:wr0ngpass | base64)" >"$T/dc/config.json"
run env DOCKER_CONFIG="$T/dc" "$BIN" fetch --only hello --manifests "$M" --tools-dir "$T/t2" --push "$REF"
expect "wrong credentials in the docker config: oci.auth" 1 "" "oci.auth"
check "... neither the base64 nor the password printed" sh -c "! grep -q -e 'wr0ngpass' -e '$(printf alice:wr0ngpass | base64)' '$T/err' '$T/out'"

# ---- a registry that is not there --------------------------------------------------------------
DEAD=$(free_port)
push "$T/t3" "oci://localhost:$DEAD/team/tools"
expect "an unreachable registry: http.connect before anything is fetched" 1 "" "http.connect"

# ---- install.mirrors.oci: installs read blobs by the pinned sha256 -------------------------------
OPEN="oci://localhost:$OPEN_RP/team/tools"
inst() { # TOOLS-DIR MODE MIRROR ALLOW-HOSTS [TOOL]
	run env ABX_INSTALL_OCI_MIRROR="$3" ABX_SERVER_INSTALL_ALLOW_HOSTS="$4" ABX_SERVER_INSTALL_MODE="$2" \
		"$BIN" prepare --manifests "$M" --tools-dir "$1" --only "${5:-hello}"
}
run env ABX_INSTALL_OCI_MIRROR="$OPEN" "$BIN" check-config --manifests "$M"
expect "check-config: the registry's host must be in install.allow_hosts" 2 "" "install.mirrors.oci: the mirror's host localhost:$OPEN_RP is not in install.allow_hosts"
run env ABX_INSTALL_OCI_MIRROR="oci://localhost:$OPEN_RP/Team" ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost "$BIN" check-config --manifests "$M"
expect "check-config: a reference outside the grammar" 2 "" "ABX_INSTALL_OCI_MIRROR: oci://localhost:$OPEN_RP/Team: repository component"

inst "$T/i1" lazy "$OPEN" localhost other
expect "lazy: a blob the registry lacks comes from the origin" 0 "other 1.0.0: installed"
check "... the registry was asked first (404)" grep -q "GET /v2/team/tools/blobs/sha256:$O HTTP/[0-9.]*\" 404" "$T/open.log"
check "... then the origin" grep -q "GET /f/other-1.0.0.tgz" "$T/req.log"
inst "$T/i2" offline "$OPEN" localhost other
expect "offline: a blob the registry lacks is refused" 1 "" "install.disabled"
check "... naming the OCI mirror" grep -q "nor the OCI mirror $OPEN (no such blob)" "$T/err"

# ---- a network namespace that reaches only the registry --------------------------------------
# A second registry process on the same storage, inside a new network
# namespace whose only interface is its loopback: the origin (still running
# outside) cannot be reached from there, so an install that succeeds read
# the registry and nothing else.
if ! command -v nsenter >/dev/null || ! unshare -n true 2>/dev/null; then
	skip "install in a network namespace that reaches only the registry" \
		"unshare -n or nsenter unavailable (needs CAP_SYS_ADMIN)"
else
	bg unshare -n sleep 600
	NS_PID=$BGPID
	_i=0
	while [ $_i -lt 50 ] && [ "$(readlink /proc/$NS_PID/ns/net)" = "$(readlink /proc/self/ns/net)" ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	inns() { nsenter -t "$NS_PID" -n "$@"; }
	inns ip link set lo up
	NSP=$(free_port)
	printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\n' \
		"$T/open" >"$T/nsreg.yml"
	printf 'http:\n  addr: 127.0.0.1:%s\n  tls:\n    certificate: %s\n    key: %s\n' "$NSP" \
		"$T/pki/good.pem" "$T/pki/good.key" >>"$T/nsreg.yml"
	bg nsenter -t "$NS_PID" -n "$REG" serve "$T/nsreg.yml" >"$T/nsreg.log" 2>&1
	_i=0
	while [ $_i -lt 100 ] && ! inns curl -s -o /dev/null --cacert "$T/pki/ca.pem" "https://localhost:$NSP/v2/"; do
		sleep 0.1
		_i=$((_i + 1))
	done
	NSREF="oci://localhost:$NSP/team/tools"
	check "the namespace reaches the registry" inns curl -s -o /dev/null --cacert "$T/pki/ca.pem" \
		"https://localhost:$NSP/v2/"
	check "... the origin answers outside it" curl -s -o /dev/null --cacert "$T/pki/ca.pem" "https://localhost:$P/f/"
	check "... and not inside it" sh -c "! nsenter -t $NS_PID -n curl -s -o /dev/null --max-time 5 --cacert '$T/pki/ca.pem' 'https://localhost:$P/f/'"
	check "... which has no route off its loopback" test -z "$(inns ip -4 route show)"
	gets_before=$(grep -c "GET /f/" "$T/req.log" || true)
	run nsenter -t "$NS_PID" -n env ABX_INSTALL_OCI_MIRROR="$NSREF" ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost \
		ABX_SERVER_INSTALL_MODE=lazy "$BIN" prepare --manifests "$M" --tools-dir "$T/ns1" --only hello
	expect "netns, lazy: installed from the only reachable host, the registry" 0 "hello 1.0.0: installed"
	run "$T/ns1/bin/hello"
	expect "... the installed tool runs" 0 "hello 1.0.0"
	check "... the blob came from the registry in the namespace" \
		grep -q "GET /v2/team/tools/blobs/sha256:$H HTTP/[0-9.]*\" 200" "$T/nsreg.log"
	run nsenter -t "$NS_PID" -n env ABX_INSTALL_OCI_MIRROR="$NSREF" ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost \
		ABX_SERVER_INSTALL_MODE=lazy "$BIN" prepare --manifests "$M" --tools-dir "$T/ns2" --only other
	check "netns, lazy: a blob the registry lacks fails, the origin unreachable" \
		sh -c "test $RC -ne 0 && grep -q -e install.network_unreachable -e http.connect '$T/err'"
	check "... the registry was asked for it (404)" \
		grep -q "GET /v2/team/tools/blobs/sha256:$O HTTP/[0-9.]*\" 404" "$T/nsreg.log"
	check "... nothing installed" test ! -e "$T/ns2/bin/other"
	run nsenter -t "$NS_PID" -n env ABX_INSTALL_OCI_MIRROR="$NSREF" ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost \
		ABX_SERVER_INSTALL_MODE=offline "$BIN" prepare --manifests "$M" --tools-dir "$T/ns3" --only other
	expect "netns, offline: a blob the registry lacks is install.disabled" 1 "" "install.disabled"
	check "... naming the registry" grep -q "nor the OCI mirror $NSREF (no such blob)" "$T/err"
	check "the origin saw none of these installs" test "$(grep -c "GET /f/" "$T/req.log" || true)" -eq "$gets_before"
	kill "$NS_PID"
fi

# the origin stops: the registry is the only place left to read from
kill "$HTTPD_PID"
wait "$HTTPD_PID" 2>/dev/null
gets_before=$(grep -c "GET /f/hello-1.0.0.tgz" "$T/req.log" || true)
inst "$T/i3" offline "$OPEN" localhost
expect "offline: installed from the registry, the origin stopped" 0 "hello 1.0.0: installed"
run "$T/i3/bin/hello"
expect "... the installed tool runs" 0 "hello 1.0.0"
check "... the blob came from the registry by its sha256" grep -q "GET /v2/team/tools/blobs/sha256:$H HTTP/[0-9.]*\" 200" "$T/open.log"
check "... and nothing from the origin" test "$(grep -c "GET /f/hello-1.0.0.tgz" "$T/req.log" || true)" -eq "$gets_before"
inst "$T/i4" lazy "$OPEN" localhost
expect "lazy: the network probe asks the registry, not the stopped origin" 0 "hello 1.0.0: installed"

export ABX_OCI_AUTH=alice:s3cret
inst "$T/i5" offline "oci://localhost:$LOCKED_RP/team/tools" localhost
expect "a registry with htpasswd: installed with ABX_OCI_AUTH" 0 "hello 1.0.0: installed"
unset ABX_OCI_AUTH
inst "$T/i6" offline "oci://localhost:$LOCKED_RP/team/tools" localhost
expect "... and refused without credentials" 1 "" "oci.auth"
check "... nothing installed" test ! -e "$T/i6/hello"

# a registry (or what stands in front of it) that changes a byte
front() { # MODE -> FP
	: >"$T/front.log"
	bg python3 "$FIXTURES/ocifront.py" --upstream "$OPEN_RP" --cert "$T/pki/good.pem" --key "$T/pki/good.key" \
		--cafile "$T/pki/ca.pem" --log "$T/front.log" --mode "$1" >"$T/front.port" 2>"$T/front.err"
	FRONT_PID=$BGPID
	wait_for_line "$T/front.port" '^[0-9]' 10 || { not_ok "start ocifront" "$(cat "$T/front.err")"; exit 1; }
	FP=$(head -1 "$T/front.port")
}
front flip
inst "$T/i7" offline "oci://localhost:$FP/team/tools" localhost
expect "a tampered blob: install.checksum_mismatch" 1 "" "install.checksum_mismatch"
check "... expected the pinned sha256" grep -q "expected sha256 $H" "$T/err"
check "... nothing installed" test ! -e "$T/i7/hello"
check "... nothing kept in the cache under the pinned name" test ! -e "$T/i7/.cache/$H"
kill "$FRONT_PID"

front "redirect:localhost:$OPEN_RP"
inst "$T/i8" offline "oci://localhost:$FP/team/tools" "localhost:$FP"
expect "a blob redirect to a host not in install.allow_hosts is refused" 1 "" "http.redirect"
check "... naming the host and the key to add it to" grep -q "add localhost to install.allow_hosts" "$T/err"
check "... nothing installed" test ! -e "$T/i8/hello"
inst "$T/i9" offline "oci://localhost:$FP/team/tools" localhost
expect "... and followed to an allowed host" 0 "hello 1.0.0: installed"
check "... which the front did redirect" grep -q "GET /v2/team/tools/blobs/sha256:$H 307" "$T/front.log"
kill "$FRONT_PID"

# ---- npm packages: pushed with their integrity, installed by it ------------------------------------
mkdir -p "$T/npmreg" "$T/npmm"
start_npmreg npmreg "$T/npmreg" "$T/pki"
NPMREG_PID=$REG_PID NP=$REG_PORT
FIXTURES=$FIXTURES T=$T REG="https://localhost:$NP" python3 - <<'PYEOF'
import os, sys
sys.path.insert(0, os.environ["FIXTURES"])
import npmpack as P
T, REG = os.environ["T"], os.environ["REG"]
root, m = T + "/npmreg", T + "/npmm"
P.pack(root, "@t/napp", "1.0.0", {"bin/napp": (b"#!/bin/sh\necho napp 1.0.0\n", 0o755)}, {"bin": {"napp": "bin/napp"}})
P.pack(root, "dep", "1.0.0", {"index.js": b"dep\n"})
E = lambda *a, **k: P.entry(root, REG, *a, **k)
for name in ("napp", "nother"):
    P.write_manifest(m, name, "@t/napp", ["localhost"], bin_="node_modules/.bin/napp", binary=name)
    P.write_lock(m + "/%s/package-lock.json" % name, "@t/napp", {
        "node_modules/@t/napp": E("@t/napp", "1.0.0", bin={"napp": "bin/napp"}),
        "node_modules/dep": E("dep", "1.0.0"),
    })
# the same package at two paths of the tree: one blob
P.write_manifest(m, "ndup", "@t/napp", ["localhost"], bin_="node_modules/.bin/napp", binary="ndup")
P.write_lock(m + "/ndup/package-lock.json", "@t/napp", {
    "node_modules/@t/napp": E("@t/napp", "1.0.0", bin={"napp": "bin/napp"}),
    "node_modules/@t/napp/node_modules/dep": E("dep", "1.0.0"),
    "node_modules/dep": E("dep", "1.0.0"),
})
PYEOF
[ -f "$T/npmm/napp.json" ] || { not_ok "npm fixtures" "the generator failed"; exit 1; }
mkdir -p "$T/n1"
run "$BIN" fetch --only napp --manifests "$T/npmm" --tools-dir "$T/n1" --push "$OPEN"
expect "fetch --push of an npm tool" 0 "napp 1.0.0: pushed to team/tools:napp-1.0.0 (2 blob(s))"
check "... the summary counts the packages the lines count" sh -c "grep -q '2 blob(s) uploaded, 0 already there, 1 manifest(s)' '$T/err' && grep -q 'fetch: 2 artifact(s) in ' '$T/err'"
mkdir -p "$T/n1d"
run "$BIN" fetch --only ndup --manifests "$T/npmm" --tools-dir "$T/n1d" --push "$OPEN"
expect "fetch --push: a package at two paths of the tree is one blob" 0 "ndup 1.0.0: pushed to team/tools:ndup-1.0.0 (2 blob(s))"
check "... and the summary agrees (0 uploaded, 2 already there)" grep -q "0 blob(s) uploaded, 2 already there, 1 manifest(s)" "$T/err"
reg_get() { curl -sf --cacert "$T/pki/ca.pem" -H 'Accept: application/vnd.oci.image.manifest.v1+json' "https://localhost:$OPEN_RP$1"; }
reg_get "/v2/team/tools/manifests/napp-1.0.0" >"$T/nmanifest.json"
check "... each package a layer with its integrity" sh -c "test \$(grep -o '\"dev.agent-sandbox.npm.integrity\":\"sha512-' '$T/nmanifest.json' | wc -l) -eq 2"
check "... and the npm media type" grep -q '"mediaType":"application/vnd.agent-sandbox.npm.package.v1.tar+gzip"' "$T/nmanifest.json"
check "... and one pack layer lists both packages with their sizes" grep -q '"dev.agent-sandbox.npm.pack":"sha512-[^" ]* [0-9][0-9]* sha512-[^" ]* [0-9][0-9]* "' "$T/nmanifest.json"
PACK=$(python3 -c 'import json, sys
print([l["digest"][7:] for l in json.load(open(sys.argv[1]))["layers"] if "dev.agent-sandbox.npm.pack" in l.get("annotations", {})][0])' "$T/nmanifest.json")

# A writer of the cache replaces one package after the fetch verified it,
# while the other is being pushed: what is pushed is hashed from the one
# descriptor it is read from, so the swap is found and nothing of it goes up.
printf 'not the package that was verified\n' >"$T/evil"
mkdir -p "$T/n9"
front "swap:$T/n9:$T/evil"
run "$BIN" fetch --only napp --manifests "$T/npmm" --tools-dir "$T/n9" --push "oci://localhost:$FP/team/swap"
expect "fetch --push: a package replaced in the cache after its check is not pushed" 3 "" "install.checksum_mismatch"
check "... the front did swap a package ($(grep swapped "$T/front.log"))" grep -q '^swapped ' "$T/front.log"
SW=$(sed -n 's/^swapped //p' "$T/front.log")
check "... which the error names as changed after it was verified" grep -q "changed after it was verified: sha256 [0-9a-f]*, not $SW" "$T/err"
check "... and the registry was never asked for it" sh -c "! grep -q 'blobs/sha256:$SW' '$T/front.log'"
kill "$FRONT_PID"

kill "$NPMREG_PID"
wait "$NPMREG_PID" 2>/dev/null
ninst() { # TOOLS-DIR MODE MIRROR [TOOL]
	run env ABX_INSTALL_OCI_MIRROR="$3" ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost ABX_SERVER_INSTALL_MODE="$2" \
		ABX_INSTALL_LIBC=glibc "$BIN" prepare --manifests "$T/npmm" --tools-dir "$1" --only "${4:-napp}"
}
blob_gets() { grep -c '"GET /v2/team/tools/blobs/sha256:' "$T/open.log"; }
g0=$(blob_gets)
ninst "$T/n2" offline "$OPEN"
expect "offline: an npm tool installed from the registry, the npm registry stopped" 0 "napp 1.0.0: installed"
check "... its 2 packages read in one blob request, the pack's" sh -c "test $(($(blob_gets) - g0)) -eq 1 && grep -q 'GET /v2/team/tools/blobs/sha256:$PACK ' '$T/open.log'"
run "$T/n2/bin/napp"
expect "... the installed tool runs" 0 "napp 1.0.0"
run "$BIN" verify --sbom --manifests "$T/npmm" --tools-dir "$T/n2"
check "verify --sbom: each npm package read from the registry names its blob there" python3 -c '
import json, re, sys
c = [x for x in json.load(open(sys.argv[1]))["components"] if x.get("purl", "").startswith("pkg:npm/")]
s = [[p["value"] for p in x.get("properties", []) if p["name"] == "agent-sandbox:source"] for x in c]
sys.exit(not (len(c) == 2 and all(len(v) == 1 and re.fullmatch(re.escape(sys.argv[2]) + "@sha256:[0-9a-f]{64}", v[0]) for v in s)))' \
	"$T/out" "$OPEN"
ninst "$T/n3" lazy "$OPEN"
expect "lazy: the same, the network probe asks the registry" 0 "napp 1.0.0: installed"
ninst "$T/n4" offline "$OPEN" nother
expect "offline: a tool the registry has no tag for is refused" 1 "" "install.disabled"
front "flip:$PACK"
ninst "$T/n6" offline "oci://localhost:$FP/team/tools"
expect "a tampered pack: its packages read one by one instead" 0 "napp 1.0.0: installed"
check "... the pack was read (and refused), then each package's blob" sh -c "test \$(grep -c 'GET /v2/team/tools/blobs/sha256:' '$T/front.log') -eq 3 && grep -q 'GET /v2/team/tools/blobs/sha256:$PACK 200' '$T/front.log'"
kill "$FRONT_PID"
front flip
ninst "$T/n5" offline "oci://localhost:$FP/team/tools"
expect "a tampered npm blob: install.checksum_mismatch against the lockfile's integrity" 1 "" "install.checksum_mismatch"
check "... nothing installed" test ! -e "$T/n5/napp/1.0.0-$PLATFORM"
kill "$FRONT_PID"

# ---- install.allow_http_mirrors: plain http mirrors for pinned installs only --------------------------
# python's http.server, plain, over the tarballs (f/...) and the npm packages
mkdir -p "$T/plain/f" "$T/plainbad/f"
cp "$W/hello-1.0.0.tgz" "$T/plain/f/"
cp -R "$T/npmreg/." "$T/plain/"
cp "$W/other-1.0.0.tgz" "$T/plainbad/f/hello-1.0.0.tgz"
plain() { # DIR -> HP
	HP=$(free_port)
	bg python3 -m http.server --bind 127.0.0.1 --directory "$1" "$HP" >"$T/plain.log" 2>&1
	PLAIN_PID=$BGPID
	_i=0
	while [ $_i -lt 100 ] && ! curl -s -o /dev/null "http://127.0.0.1:$HP/"; do sleep 0.1; _i=$((_i + 1)); done
}
plain "$T/plain"
hinst() { # TOOLS-DIR ALLOW MANIFESTS TOOL [VAR=VALUE...]
	_d=$1 _a=$2 _m=$3 _t=$4
	shift 4
	run env ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost ABX_SERVER_INSTALL_ALLOW_HTTP_MIRRORS="$_a" \
		ABX_INSTALL_LIBC=glibc "$@" "$BIN" prepare --manifests "$_m" --tools-dir "$_d" --only "$_t"
}
hinst "$T/h1" false "$M" hello ABX_INSTALL_MIRROR="http://localhost:$HP/{path}"
expect "a plain http tarball mirror is refused by default" 2 "" "plain http mirror; set install.allow_http_mirrors to true"
check "... saying what it would give up" grep -q "confidentiality is given up" "$T/err"
hinst "$T/h1" false "$T/npmm" napp ABX_INSTALL_NPM_REGISTRY="http://localhost:$HP"
expect "a plain http npm mirror is refused by default" 2 "" "install.mirrors.npm"
run env ABX_INSTALL_OCI_MIRROR="oci+http://localhost:$HP/team/tools" ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost "$BIN" check-config --manifests "$M"
expect "an oci+http:// registry is refused by default" 2 "" "plain http mirror"
run env ABX_INSTALL_MIRROR="http://localhost:$HP/{path}" ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost \
	ABX_SERVER_INSTALL_ALLOW_HTTP_MIRRORS=true "$BIN" check-config --manifests "$M"
expect "check-config with install.allow_http_mirrors: what it gives up" 0 "" "integrity is kept (every byte is checked against a pin), confidentiality is given up"
run env ABX_SERVER_INSTALL_ALLOW_HTTP_MIRRORS=true "$BIN" doctor --manifests "$M"
check "doctor says it too" grep -q "WARN.*install.allow_http_mirrors is on.*confidentiality is given up" "$T/out"

hinst "$T/h2" true "$M" hello ABX_INSTALL_MIRROR="http://localhost:$HP/{path}"
expect "allowed: a pinned tarball from a plain http mirror (origin stopped)" 0 "hello 1.0.0: installed"
check "... read from the mirror" grep -q "GET /f/hello-1.0.0.tgz" "$T/plain.log"
hinst "$T/h3" true "$T/npmm" napp ABX_INSTALL_NPM_REGISTRY="http://localhost:$HP"
expect "allowed: npm packages from a plain http npm mirror (npm registry stopped)" 0 "napp 1.0.0: installed"
kill "$PLAIN_PID"
plain "$T/plainbad"
hinst "$T/h4" true "$M" hello ABX_INSTALL_MIRROR="http://localhost:$HP/{path}"
expect "a plain http mirror that changes the bytes: install.checksum_mismatch" 1 "" "install.checksum_mismatch"
check "... nothing installed" test ! -e "$T/h4/hello"
kill "$PLAIN_PID"
plain "$T/plain"
sed 's/,"sha256":"[0-9a-f]*"//g' "$M/hello.json" >"$T/unpinned.json"
mkdir -p "$T/um" && cp "$T/unpinned.json" "$T/um/hello.json"
: >"$T/plain.log"
hinst "$T/h5" true "$T/um" hello ABX_INSTALL_MIRROR="http://localhost:$HP/{path}" ABX_INSTALL_UNPINNED=1
check "an unpinned install never reads a plain http mirror" sh -c "test $RC -ne 0 && ! grep -q 'GET /f/' '$T/plain.log'"
run env ABX_SERVER_INSTALL_ALLOW_HTTP_MIRRORS=true ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost \
	ABX_INSTALL_NPM_REGISTRY="http://localhost:$HP" "$BIN" lock napp --check --manifests "$T/npmm"
expect "lock never reads a plain http mirror" 2 "" "not an https URL"
kill "$PLAIN_PID"

# the registry itself over plain http (the same storage as the TLS one)
PR=$(free_port)
printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
	"$T/open" "$PR" >"$T/plainreg.yml"
bg "$REG" serve "$T/plainreg.yml" >"$T/plainreg.log" 2>&1
_i=0
while [ $_i -lt 100 ] && ! curl -s -o /dev/null "http://localhost:$PR/v2/"; do sleep 0.1; _i=$((_i + 1)); done
hinst "$T/h6" true "$M" hello ABX_INSTALL_OCI_MIRROR="oci+http://localhost:$PR/team/tools" ABX_SERVER_INSTALL_MODE=offline
expect "allowed: an oci+http:// registry, offline" 0 "hello 1.0.0: installed"
check "... the blob came from it" grep -q "GET /v2/team/tools/blobs/sha256:$H HTTP/[0-9.]*\" 200" "$T/plainreg.log"
hinst "$T/h7" true "$T/npmm" napp ABX_INSTALL_OCI_MIRROR="oci+http://localhost:$PR/team/tools" ABX_SERVER_INSTALL_MODE=offline
expect "... and an npm tool" 0 "napp 1.0.0: installed"
push "$T/t9" "oci+http://localhost:$PR/team/tools"
expect "fetch --push never writes to a plain http registry" 2 "" "oci.url"

# ---- doctor checks the registry ---------------------------------------------------------------------
mkdir -p "$T/am"
for t in hello other; do
	sed 's/"platforms":\["linux-x64","linux-arm64"\],"size_hint_mb":1/"run":["{bin}","{prompt}"],&/' "$M/$t.json" >"$T/am/$t.json"
done
doc() { # AGENT MIRROR [VAR=VALUE...]
	_a=$1 _r=$2
	shift 2
	run env ABX_SERVER_AGENTS="$_a" ABX_INSTALL_OCI_MIRROR="$_r" ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost "$@" \
		"$BIN" doctor --manifests "$T/am"
}
doc hello "$OPEN"
check "doctor: the registry answers and has a blob of the plan" grep -q "PASS.*registry.*$OPEN answers and has the blob of hello 1.0.0 (sha256:$(echo "$H" | cut -c1-12)" "$T/out"
doc other "$OPEN"
check "doctor: a registry that lacks the plan's blob is a WARN with the fix" grep -q "WARN.*registry.*lacks the blob of other 1.0.0" "$T/out"
doc hello "oci://localhost:$LOCKED_RP/team/tools"
check "doctor: a registry that wants credentials there are none of is a FAIL (oci.auth)" grep -q "FAIL.*registry.*oci.auth" "$T/out"
doc hello "oci://localhost:$LOCKED_RP/team/tools" ABX_OCI_AUTH=alice:s3cret
check "doctor: with the credential, named by its source, never its value" sh -c "grep -q 'PASS.*registry.*credential from ABX_OCI_AUTH and has the blob of hello' '$T/out' && ! grep -q s3cret '$T/out' '$T/err'"
doc hello "oci://localhost:$DEAD/team/tools"
check "doctor: an unreachable registry is a FAIL (http.connect)" grep -q "FAIL.*registry.*http.connect" "$T/out"

# ---- verify --sbom names where each blob came from ---------------------------------------------------
run "$BIN" verify --sbom --manifests "$M" --tools-dir "$T/i3"
check "verify --sbom: a blob read from the registry names it" grep -q "\"name\":\"agent-sandbox:source\",\"value\":\"$OPEN@sha256:$H\"" "$T/out"
run "$BIN" verify --sbom --manifests "$M" --tools-dir "$T/i1"
check "verify --sbom: a registry miss read from the origin names the origin" grep -q "\"name\":\"agent-sandbox:source\",\"value\":\"https://localhost:$P/f/other-1.0.0.tgz\"" "$T/out"
run "$BIN" verify --sbom --manifests "$M" --tools-dir "$T/h2"
check "verify --sbom: a plain http mirror is named" grep -q "\"value\":\"http://localhost:[0-9]*/f/hello-1.0.0.tgz\"" "$T/out"

# ---- token auth: the registry's Bearer challenge answered by a token from its realm --------------------
# distribution's auth.token with a token server of our own (tests/fixtures/ocitoken.py, RS256 JWTs signed
# by openssl with a key whose certificate is the registry's rootcertbundle); the server wants alice's
# Basic credentials
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/sign.key" -out "$T/sign.crt" -subj /CN=token -days 2 \
	>/dev/null 2>&1
: >"$T/tok.log"
bg python3 "$FIXTURES/ocitoken.py" --cert "$T/pki/good.pem" --tlskey "$T/pki/good.key" --signkey "$T/sign.key" \
	--signcert "$T/sign.crt" --issuer test-issuer --log "$T/tok.log" --user alice:s3cret >"$T/tok.port" 2>"$T/tok.err"
wait_for_line "$T/tok.port" '^[0-9]' 10 || { not_ok "start token server" "$(cat "$T/tok.err")"; exit 1; }
TP=$(head -1 "$T/tok.port")
TR=$(free_port)
{
	printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\n' "$T/tokreg"
	printf 'http:\n  addr: 127.0.0.1:%s\n  tls:\n    certificate: %s\n    key: %s\n' "$TR" "$T/pki/good.pem" "$T/pki/good.key"
	printf 'auth:\n  token:\n    realm: https://localhost:%s/token\n    service: test-registry\n' "$TP"
	printf '    issuer: test-issuer\n    rootcertbundle: %s\n' "$T/sign.crt"
} >"$T/tokreg.yml"
bg "$REG" serve "$T/tokreg.yml" >"$T/tokreg.log" 2>&1
_i=0
while [ $_i -lt 100 ] && ! curl -s -o /dev/null --cacert "$T/pki/ca.pem" "https://localhost:$TR/v2/"; do sleep 0.1; _i=$((_i + 1)); done
TREF="oci://localhost:$TR/team/tools"
push "$T/t1" "$TREF"
expect "token auth: a realm not in install.allow_hosts is refused" 1 "" "http.redirect"
check "... nothing was sent to it" test ! -s "$T/tok.log"
export ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost
push "$T/t1" "$TREF"
expect "token auth: anonymous, the token server refuses: oci.auth" 1 "" "oci.auth"
check "... the token server refused an anonymous request" grep -q "refused an anonymous request" "$T/err"
ABX_OCI_AUTH=alice:wr0ngpass push "$T/t1" "$TREF"
expect "token auth: wrong credentials: oci.auth" 1 "" "oci.auth"
check "... never printed" sh -c "! grep -q wr0ngpass '$T/err' '$T/out'"
ABX_OCI_AUTH=alice:s3cret push "$T/t1" "$TREF"
expect "token auth: pushed with a token got with the credentials" 0 "hello 1.0.0: pushed"
check "... the token server got Basic credentials" grep -q "^/token auth=basic" "$T/tok.log"
check "... and the registry took the Bearer token for the upload" grep -q "\"PUT /v2/team/tools/manifests/hello-1.0.0 HTTP/1.1\" 201" "$T/tokreg.log"
run env ABX_OCI_AUTH=alice:s3cret ABX_INSTALL_OCI_MIRROR="$TREF" ABX_SERVER_INSTALL_MODE=offline \
	"$BIN" prepare --manifests "$M" --tools-dir "$T/tk1" --only hello
expect "token auth: installed from the registry, offline" 0 "hello 1.0.0: installed"
run env ABX_OCI_AUTH=alice:s3cret "$BIN" fetch --only napp --manifests "$T/npmm" --tools-dir "$T/n1" --push "$TREF"
expect "token auth: an npm tool pushed from the cache" 0 "napp 1.0.0: pushed"
k0=$(wc -l <"$T/tok.log")
r0=$(grep -c '"GET /v2/team/tools/[^"]*" 200' "$T/tokreg.log")
run env ABX_OCI_AUTH=alice:s3cret ABX_INSTALL_OCI_MIRROR="$TREF" ABX_SERVER_INSTALL_MODE=offline ABX_INSTALL_LIBC=glibc \
	"$BIN" prepare --manifests "$T/npmm" --tools-dir "$T/tk2" --only napp
expect "token auth: an npm tool installed from the registry, offline" 0 "napp 1.0.0: installed"
check "... with one token for the tag and its blobs" test "$(($(wc -l <"$T/tok.log") - k0))" -eq 1
check "... and two answered GETs: the tag, the pack" test "$(($(grep -c '"GET /v2/team/tools/[^"]*" 200' "$T/tokreg.log") - r0))" -eq 2
unset ABX_SERVER_INSTALL_ALLOW_HOSTS
unset ABX_OCI_AUTH
