# make e2e: the README's Dockerfiles built and run by a real container engine.
# Debian's podman on runc builds each with chroot isolation and
# --format docker (HEALTHCHECK is Docker's), on vfs storage of this test's
# own: CONTAINERS_CONF, CONTAINERS_STORAGE_CONF and CONTAINERS_REGISTRIES_CONF
# name files in $T, so no image, container or setting of the host's is
# touched, and cleanup is rm -rf. Nothing is pulled: the base images are made
# here and tagged localhost/abx-base-NAME:
#   musl    Alpine-like: the host's musl loader (Debian's musl), this
#           machine's CA bundle, /etc/passwd with root and user, /tmp;
#   debian  debootstrap --variant=minbase bookworm from the mirror apt uses,
#           imported with podman import (no CA bundle, as debian:*-slim);
#   e2b     that root standing in for E2B's base: USER user (uid 1000,
#           /home/user), ca-certificates with this machine's CA bundle (a
#           site's base image carries the site's: here, the egress proxy's),
#           and /usr/bin/make, which the template's commands.json names
#           (check-config checks every program); the roots' tars are kept in
#           build/e2e, so a second run neither runs debootstrap nor apt;
# and FROM scratch. The Dockerfiles are read from README.md at test time and
# only their FROM line is replaced: debian:bookworm-slim by debian (the plain
# one is built on scratch and musl too: "Any base works"), E2B's base by e2b.
# Each image runs as the README says (its CMD, or the template's start_cmd)
# with its port published on 127.0.0.1 through slirp4netns (no bridge, no
# iptables rule on the host): the health check (HEALTHCHECK, or the
# template's ready_cmd), /health, /v1/ops with the token serve wrote (the
# templates: the token the test writes to server.token_file, then /ready),
# codex.version and an agents.codex.run (templates), doctor inside the
# container, then podman stop (serve drains on SIGTERM and exits 0).
# The build template's tools directory is sized against `npm i -g` of the
# same codex on the host: at most 1.05 times its size; the offline image
# (the last stage of the README's multi-stage build) against the build
# template's image: at most 1.05 times its size, with no cache in it. The
# lazy template's install on first use keeps codex's downloads alone: they
# are hashed against the lockfile, sized against the tree, and a drifted
# tree is repaired from them through codex's shim.
#   CONTAINERS_ONLY="plain build" tests/run.sh --e2e --only containers: some
#   journeys only (default: plain build lazy offline).
. "$TOP/tests/lib.sh"

if [ "$(id -u)" != 0 ]; then
	skip "containers" "needs root (podman on runc, debootstrap)"
	exit 0
fi
for c in podman runc slirp4netns debootstrap curl; do
	command -v $c >/dev/null || { skip "containers" "$c is not installed (make e2e installs it: tools/hostdeps.sh e2e)"; exit 0; }
done
case $(uname -m) in
x86_64) MLD=/lib/ld-musl-x86_64.so.1 ;;
aarch64) MLD=/lib/ld-musl-aarch64.so.1 ;;
*) skip "containers" "no musl loader name for $(uname -m)"; exit 0 ;;
esac
[ -e "$MLD" ] || { skip "containers" "$MLD missing: install Debian's musl package"; exit 0; }
CA=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
[ -f "$CA" ] || { not_ok "containers" "no CA bundle at $CA"; exit 1; }
JOURNEYS=" ${CONTAINERS_ONLY:-plain build lazy offline} "
E2E=$TOP/build/e2e
VER=$(sed -n 's/^  "version": "\([^"]*\)".*/\1/p' "$TOP/manifests/codex.json")
say() { echo "# $*"; }
now() { date +%s; }
T_ALL=$(now)

# ---- podman of this test's own ------------------------------------------------
P=$T/podman
mkdir -p "$P/tmp" "$P/net"
# default_ulimits: none (the packaged default asks for limits a VM may not
# grant); netns none unless a run asks for slirp4netns, so no CNI bridge.
cat >"$P/containers.conf" <<EOF
[containers]
default_ulimits = []
netns = "none"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$P/events.log"
tmp_dir = "$P/libpod"
volume_path = "$P/volumes"
static_dir = "$P/storage/libpod"
[network]
network_config_dir = "$P/net"
EOF
printf '[storage]\ndriver = "vfs"\ngraphroot = "%s/storage"\nrunroot = "%s/run"\n' "$P" "$P" >"$P/storage.conf"
: >"$P/registries.conf"
export CONTAINERS_CONF="$P/containers.conf" CONTAINERS_STORAGE_CONF="$P/storage.conf" \
	CONTAINERS_REGISTRIES_CONF="$P/registries.conf" TMPDIR="$P/tmp"
pm() { timeout 120 podman "$@"; }
# The one path outside $T podman writes as root whatever it is told: the
# blob-info cache of containers/image, /var/lib/containers/cache.
VARLIB=""
[ -e /var/lib/containers ] || VARLIB=/var/lib/containers
# Containers first (their /dev/shm is a mount under runroot), then $T.
pm_cleanup() {
	timeout 60 podman rm -a -f -t 2 >/dev/null 2>&1
	grep -o " $P/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
	[ -n "$VARLIB" ] && rm -rf "$VARLIB"
	cleanup
}
trap pm_cleanup EXIT INT TERM
if ! pm info >"$T/info" 2>&1; then
	skip "containers" "podman cannot run here: $(tail -3 "$T/info" | tr '\n' ' ')"
	exit 0
fi

# ---- the README's Dockerfiles and template files --------------------------------
python3 - "$TOP/README.md" "$T/tpl" <<'PYEOF' || { not_ok "README: the Dockerfiles and templates" "not found"; exit 1; }
import json, os, re, sys
text, out = open(sys.argv[1]).read(), sys.argv[2]
os.makedirs(out)
blocks = dict(re.findall(r"<!-- template: (\S+) -->\n```[a-z]*\n(.*?)```", text, re.S))
sec = re.search(r"^## In a Dockerfile\n(.*?)^## ", text, re.S | re.M)
assert sec, "README lacks '## In a Dockerfile'"
blocks["plain.Dockerfile"] = re.search(r"```dockerfile\n(.*?)```", sec.group(1), re.S).group(1)
need = ["plain.Dockerfile", "server.json", "commands.json", "build.Dockerfile", "lazy.Dockerfile", "ci-fetch.sh", "offline.Dockerfile"]
missing = [n for n in need if n not in blocks]
assert not missing, "README lacks %s" % missing
json.loads(blocks["server.json"])
json.loads(blocks["commands.json"])
for k, v in blocks.items():
    open(os.path.join(out, k), "w").write(v)
# template 2: 'Set "mode": "lazy" in server.json'
assert '"mode": "build"' in blocks["server.json"]
open(out + "/server.lazy.json", "w").write(blocks["server.json"].replace('"mode": "build"', '"mode": "lazy"'))
PYEOF
START=$(sed -n 's/^# start_cmd: //p' "$T/tpl/build.Dockerfile")
READY=$(sed -n 's/^# ready_cmd: //p' "$T/tpl/build.Dockerfile")
check "README: the worked template names its start_cmd and ready_cmd ($START; $READY)" test -n "$START" -a -n "$READY"
# from NAME FROM-LINE BASE: $T/NAME.Dockerfile, the README's with its FROM
# lines (each FROM-LINE, a build stage's with " AS STAGE" after it) made
# FROM BASE (and the stage's " AS STAGE").
from() {
	_src=$T/tpl/${1%%-*}.Dockerfile
	_got=$(grep '^FROM ' "$_src" | sed 's/ AS [a-z0-9_-]*$//' | sort -u)
	if [ "$_got" != "$2" ]; then
		not_ok "README: ${1%%-*}.Dockerfile starts $2" "its FROM lines: $(echo "$_got" | tr '\n' '|')"
		return 1
	fi
	sed "s|^FROM [^ ]*|FROM $3|" "$_src" >"$T/$1.Dockerfile"
}
E2B_FROM='FROM fc-e2b-registry.<region>.cr.aliyuncs.com/runtime/base:<tag>'

# The template names no npm mirror (the README shows one as an option):
# installs go to the manifests' registry.npmjs.org.
MIRROR_ENV=""

# ---- base images ------------------------------------------------------------------
# The bookworm mirror of the machine's apt sources (one-line or deb822).
APT_MIRROR=$(python3 - <<'PYEOF'
import glob, re
for f in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(f).read().splitlines()
    except OSError:
        continue
    for ln in lines:
        w = re.sub(r"\[[^]]*\]", "", ln.split("#")[0]).split()
        if len(w) >= 4 and w[0] == "deb" and w[2] == "bookworm" and "main" in w[3:]:
            print(w[1]); raise SystemExit
for f in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for block in open(f).read().split("\n\n"):
        d = {}
        for ln in block.splitlines():
            if ":" in ln and not ln.startswith(("#", " ")):
                k, v = ln.split(":", 1)
                d[k.strip()] = v.split()
        if "deb" in d.get("Types", []) and "bookworm" in d.get("Suites", []) and "main" in d.get("Components", []) and d.get("URIs"):
            print(d["URIs"][0]); raise SystemExit
PYEOF
)
DEB_TAR=$E2E/debian-bookworm-minbase.tar DEB_RECIPE="debootstrap --variant=minbase bookworm $APT_MIRROR"
E2B_TAR=$E2E/e2b-like-bookworm.tar
E2B_RECIPE="$DEB_RECIPE; apt-get install make ca-certificates; useradd -m -u 1000 -s /bin/bash user;
 this machine's CA bundle, sha256 $(sha256sum <"$CA" | cut -c1-64)"
fresh() { [ -f "$1" ] && [ "$(cat "$1.recipe" 2>/dev/null)" = "$2" ]; }
# tar_root ROOT TAR RECIPE: the root without apt's downloads, as TAR
tar_root() {
	rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*
	mkdir -p "$E2E"
	tar -C "$1" --numeric-owner -cf "$2.part" . && mv "$2.part" "$2" && echo "$3" >"$2.recipe"
}
# The roots in a mount namespace of their own: debootstrap's /proc and /sys
# (and the /proc apt's scripts get) end with it, so nothing stays mounted.
mk_debian() {
	fresh "$DEB_TAR" "$DEB_RECIPE" && fresh "$E2B_TAR" "$E2B_RECIPE" && return 0
	[ -n "$APT_MIRROR" ] || { echo "no bookworm mirror in the apt sources" >"$T/debootstrap.log"; return 1; }
	_r=$T/debian-root
	if fresh "$DEB_TAR" "$DEB_RECIPE"; then
		mkdir -p "$_r" && tar -C "$_r" --numeric-owner -xf "$DEB_TAR" || return 1
	else
		timeout 480 unshare -m debootstrap --variant=minbase bookworm "$_r" "$APT_MIRROR" \
			>"$T/debootstrap.log" 2>&1 && tar_root "$_r" "$DEB_TAR" "$DEB_RECIPE" || return 1
	fi
	timeout 300 env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive \
		unshare -m sh -c 'mount -t proc proc "$0/proc" && exec chroot "$0" sh -c "$1"' "$_r" \
		'apt-get update -qq &&
		apt-get install -y -qq --no-install-recommends make ca-certificates && useradd -m -u 1000 -s /bin/bash user' \
		>>"$T/debootstrap.log" 2>&1 && cp "$CA" "$_r/etc/ssl/certs/ca-certificates.crt" &&
		tar_root "$_r" "$E2B_TAR" "$E2B_RECIPE"
	_rc=$?
	grep -q " $_r" /proc/mounts || rm -rf "$_r"
	return $_rc
}
mk_musl() {
	_r=$T/musl-root
	mkdir -p "$_r${MLD%/*}" "$_r/etc/ssl/certs" "$_r/tmp" "$_r/root" "$_r/home/user"
	cp -L "$MLD" "$_r$MLD"
	cp "$CA" "$_r/etc/ssl/certs/ca-certificates.crt"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nuser:x:1000:1000:user:/home/user:/sbin/nologin\n' >"$_r/etc/passwd"
	printf 'root:x:0:\nuser:x:1000:\n' >"$_r/etc/group"
	chmod 1777 "$_r/tmp"
	chown 1000:1000 "$_r/home/user"
	tar -C "$_r" --numeric-owner -cf "$T/musl.tar" .
}
PATH_ENV="ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
t0=$(now)
if mk_musl && pm import --change "$PATH_ENV" "$T/musl.tar" localhost/abx-base-musl >"$T/import" 2>&1; then
	ok "base musl: the musl loader, a CA bundle, /etc/passwd with user, /tmp"
else
	not_ok "base musl" "$(tail -3 "$T/import" | tr '\n' ' ')"
fi
cached=made
fresh "$DEB_TAR" "$DEB_RECIPE" && fresh "$E2B_TAR" "$E2B_RECIPE" && cached=cached
if ! mk_debian; then
	not_ok "base debian and e2b: $E2B_RECIPE" "$(tail -5 "$T/debootstrap.log" | tr '\n' ' ')"
	exit 1
fi
ch=""
for kv in $MIRROR_ENV; do ch="$ch --change ENV=$kv"; done
# shellcheck disable=SC2086
if pm import --change "$PATH_ENV" "$DEB_TAR" localhost/abx-base-debian >"$T/import" 2>&1 &&
	pm import --change "$PATH_ENV" --change "USER user" $ch "$E2B_TAR" localhost/abx-base-e2b >>"$T/import" 2>&1; then
	ok "base debian and e2b: debootstrap minbase bookworm, and make, ca-certificates, user ($cached, $(du -sk \
		"$DEB_TAR" | cut -f1) and $(du -sk "$E2B_TAR" | cut -f1) KiB), imported"
else
	not_ok "base debian and e2b" "$(tail -3 "$T/import" | tr '\n' ' ')"
	exit 1
fi
say "time: base images: $(($(now) - t0)) s"

# ---- building and running ----------------------------------------------------------
# build NAME CONTEXT [WRAPPER...]: $T/NAME.Dockerfile into localhost/abx-e2e-NAME
build() {
	_n=$1 _ctx=$2
	shift 2
	_t=$(now)
	"$@" timeout 600 podman build --isolation chroot --format docker --layers=false \
		-f "$T/$_n.Dockerfile" -t "localhost/abx-e2e-$_n" "$_ctx" >"$T/$_n.build" 2>&1
	_rc=$?
	say "time: $_n: built in $(($(now) - _t)) s"
	if [ $_rc = 0 ]; then
		ok "$_n: podman build"
	else
		not_ok "$_n: podman build" "exit $_rc: $(grep -v '^time=' "$T/$_n.build" | tail -6 | tr '\n' '|')"
	fi
	return $_rc
}
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# start NAME [CMD...]: run localhost/abx-e2e-NAME detached as container
# abx-e2e-NAME-$$, port 9000 on 127.0.0.1:$HP; wait (30 s) for /health.
start() {
	_n=$1
	shift
	C=abx-e2e-$_n-$$ HP=$(free_port) U=""
	# the health check's timer is systemd's; podman healthcheck run runs it here
	if ! pm run -d --name "$C" --network slirp4netns:port_handler=slirp4netns --health-interval disable \
		-p "127.0.0.1:$HP:9000" "localhost/abx-e2e-$_n" "$@" >"$T/$_n.run" 2>&1; then
		not_ok "$_n: podman run -d" "$(grep -v '^time=' "$T/$_n.run" | tail -3 | tr '\n' ' ')"
		return 1
	fi
	_i=0
	while [ $_i -lt 150 ]; do
		if curl -s -m 2 -o "$T/body" "http://127.0.0.1:$HP/health" 2>/dev/null; then
			U=http://127.0.0.1:$HP
			ok "$_n: serve runs (${*:-its CMD}): GET /health answers $(head -c 80 "$T/body")"
			return 0
		fi
		[ "$(pm inspect -f '{{.State.Running}}' "$C" 2>/dev/null)" = true ] || break
		sleep 0.2
		_i=$((_i + 1))
	done
	pm logs "$C" 2>&1 | grep -v '^time=' >"$T/$_n.log"
	not_ok "$_n: serve runs (${*:-its CMD})" "the container $(pm inspect -f 'exited {{.State.ExitCode}}' "$C" 2>/dev/null \
		|| echo 'is gone'); its log: $(tail -4 "$T/$_n.log" | tr '\n' '|')"
	pm rm -f -t 0 "$C" >/dev/null 2>&1
	return 1
}
post() { curl -s -m 60 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOK" \
	-H 'Content-Type: application/json' -X POST --data "$2" "$U$1"; }
# api NAME STATE-DIR [OP]: the token serve wrote, then /v1/ops with it (and OP listed)
api() {
	TOK=""
	if pm cp "$C:$2/token" "$T/$1.token" >"$T/cp" 2>&1; then
		TOK=$(cat "$T/$1.token")
		ok "$1: serve wrote its token to $2/token"
	else
		not_ok "$1: serve wrote its token to $2/token" "$(tail -2 "$T/cp" | tr '\n' ' ')"
	fi
	_code=$(curl -s -m 10 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOK" "$U/v1/ops")
	check "$1: GET /v1/ops with the token answers 200 ($_code $(head -c 120 "$T/body"))" \
		sh -c "[ '$_code' = 200 ] && grep -q '\"${3:-data}\"' '$T/body'"
}
# orchestrate NAME [OP]: what the platform's orchestrator does after create
# (the README's worked template): a token of its own written to the
# template's server.token_file inside the container, GET /ready (no token)
# polled until 200 (30 s), then /v1/ops with that token
orchestrate() {
	TOK=e2e-$1-$$-token
	printf '%s\n' "$TOK" | pm exec -i "$C" sh -c \
		'mkdir -p "$HOME/.config/agent-sandbox" && cat >"$HOME/.config/agent-sandbox/token"' >"$T/cp" 2>&1
	_rc=$?
	check "$1: the token written to server.token_file in the container ($(tail -1 "$T/cp"))" test $_rc = 0
	_i=0
	while [ "$(curl -s -m 2 -o "$T/body" -w '%{http_code}' "$U/ready")" != 200 ] && [ $_i -lt 60 ]; do
		sleep 0.5
		_i=$((_i + 1))
	done
	check "$1: GET /ready answers 200 once the token is written ($(head -c 120 "$T/body"))" \
		test "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "$U/ready")" = 200
	_code=$(curl -s -m 10 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOK" "$U/v1/ops")
	check "$1: GET /v1/ops with the token answers 200 ($_code $(head -c 120 "$T/body"))" \
		sh -c "[ '$_code' = 200 ] && grep -q '\"${2:-data}\"' '$T/body'"
}
# codex_version NAME [SECONDS]: the commands.json op, 202s (a lazy install)
# repeated until SECONDS
codex_version() {
	_t=$(now)
	_code=$(post /v1/ops/codex.version '{}')
	while [ "$_code" = 202 ] && [ $(($(now) - _t)) -lt "${2:-0}" ]; do
		sleep 3
		_code=$(post /v1/ops/codex.version '{}')
	done
	say "$1: codex.version: $_code after $(($(now) - _t)) s: $(head -c 300 "$T/body")"
	check "$1: POST /v1/ops/codex.version answers 200, stdout codex-cli $VER" \
		sh -c "[ '$_code' = 200 ] && grep -q '\"stdout\":\"codex-cli $VER' '$T/body'"
}
# session NAME: agents.codex.run with a prompt reaches codex: it starts and
# what comes out is codex's own (its banner, then an answer or its own error
# without credentials or its API), never a start failure. Codex retries an
# API it cannot reach for minutes: the run's timeout (90 s) ends it. The
# run's session is then read on the wire.
session() {
	_code=$(curl -s -m 300 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOK" \
		-H 'Content-Type: application/json' -X POST \
		--data '{"prompt": "Reply with the single word: pong", "timeout": 90}' "$U/v1/ops/agents.codex.run")
	_sid=$(json_eval "$T/body" 'd.get("session","")' 2>/dev/null)
	check "$1: POST /v1/ops/agents.codex.run answers 200 ($_code $(head -c 200 "$T/body"))" test "$_code" = 200
	[ "$_code" = 200 ] || return
	python3 "$FIXTURES/sessclient.py" events "${U##*:}" "$TOK" "$_sid" - 1 30 >"$T/ev"
	python3 "$FIXTURES/evsum.py" "$T/ev" >"$T/evsum"
	say "$1: codex session: $(tr '\n' '|' <"$T/evsum")"
	check "$1: the codex session started and codex spoke" grep -Eq 'started output' "$T/evsum"
	check "$1: ... codex's own banner (OpenAI Codex v$VER)" grep -q "OpenAI Codex v$VER" "$T/evsum"
	check "$1: ... not a start failure" sh -c "! grep -q '^FAILED' '$T/evsum'"
}
# dead NAME WHAT: serve did not run: the rest of the journey is skipped, and
# doctor, in a new container of the image on the same network, must FAIL
# what stopped serve (the first word of the key serve's error names, e.g.
# "audit" of audit_file).
dead() {
	skip "$1: $2" "serve did not run"
	_key=$(sed -n 's/^agent-sandbox-server: [a-z_.]*: \([a-z]*\).*/\1/p' "$T/$1.log" | head -1)
	pm run --rm --network slirp4netns "localhost/abx-e2e-$1" agent-sandbox-server doctor >"$T/doctor" 2>&1
	_rc=$?
	check "$1: doctor in the image FAILs what stops serve (${_key:-?}): exit $_rc: $(grep -E '^FAIL|failed' "$T/doctor" |
		tr '\n' '|')" sh -c "[ $_rc != 0 ] && grep -q '^FAIL.*${_key:-?}' '$T/doctor'"
}
# doctor NAME: inside the running container, as its user
doctor() {
	pm exec "$C" agent-sandbox-server doctor >"$T/doctor" 2>&1
	_rc=$?
	if [ $_rc = 0 ] && ! grep -q '^FAIL' "$T/doctor"; then
		ok "$1: podman exec doctor: exit 0, no FAIL"
	else
		not_ok "$1: podman exec doctor: exit 0, no FAIL" \
			"exit $_rc: $(grep -E '^(FAIL|WARN)|failed' "$T/doctor" | head -6 | tr '\n' '|')"
	fi
}
# stop_ctr NAME: podman stop (SIGTERM, 20 s), serve drains and exits 0
stop_ctr() {
	_t=$(now)
	pm stop -t 20 "$C" >/dev/null 2>&1
	_rc=$(pm inspect -f '{{.State.ExitCode}}' "$C" 2>/dev/null)
	check "$1: podman stop: serve drains and exits 0 (exit $_rc after $(($(now) - _t)) s; $(pm logs "$C" 2>&1 |
		grep -v '^time=' | tail -1 | head -c 100))" test "$_rc" = 0
	pm rm -f -t 0 "$C" >/dev/null 2>&1
}
# context NAME [SERVER-JSON]: the build context: the binary, server.json, commands.json
context() {
	CTX=$T/ctx-$1
	mkdir -p "$CTX"
	cp "$BIN" "$CTX/agent-sandbox-server"
	cp "$T/tpl/${2:-server.json}" "$CTX/server.json"
	cp "$T/tpl/commands.json" "$CTX/"
}
user_of() { pm image inspect -f '{{.Config.User}}' "localhost/abx-e2e-$1" 2>/dev/null; }
state_of() { case $(user_of "$1") in "" | root | 0) echo /var/lib/agent-sandbox ;; *) echo /home/user/.local/state/agent-sandbox ;; esac; }

# ---- the plain Dockerfile, on debian, scratch and musl ------------------------------
case $JOURNEYS in *" plain "*)
for b in debian scratch musl; do
	n=plain-$b
	t0=$(now)
	base=localhost/abx-base-$b
	[ $b = scratch ] && base=scratch
	from "$n" "FROM debian:bookworm-slim" "$base" || continue
	context "$n"
	build "$n" "$CTX" || continue
	h=$(pm image inspect -f '{{json .Config.Healthcheck}}' "localhost/abx-e2e-$n" 2>/dev/null)
	check "$n: the image keeps its HEALTHCHECK ($h)" sh -c "echo '$h' | grep -q agent-sandbox-healthcheck"
	start "$n" || { dead "$n" "the health check, API, doctor and stop"; continue; }
	pm healthcheck run "$C" >"$T/hc" 2>&1
	rc=$?
	check "$n: podman healthcheck run: healthy (exit $rc: $(grep -v '^time=' "$T/hc" | head -c 100))" test $rc = 0
	api "$n" "$(state_of "$n")"
	doctor "$n"
	stop_ctr "$n"
	say "time: $n: $(($(now) - t0)) s"
done
;; esac

# ---- 1. the worked template, mode build --------------------------------------------
case $JOURNEYS in *" build "*)
t0=$(now)
# shellcheck disable=SC2086
if from build "$E2B_FROM" localhost/abx-base-e2b && context build && build build "$CTX"; then
	# one du each: du counts a directory (and a hard-linked file) once per run
	pm run --rm --user root localhost/abx-e2e-build sh -c 'cd /opt/agent-sandbox/tools &&
		du -sk . && { du -sk .cache 2>/dev/null || echo 0; } && du -sk --exclude=./.cache .' >"$T/du" 2>&1
	tools=$(sed -n 1p "$T/du" | cut -f1) cache=$(sed -n 2p "$T/du" | cut -f1) trees=$(sed -n 3p "$T/du" | cut -f1)
	bsz=$(pm image inspect -f '{{.Size}}' localhost/abx-base-e2b)
	isz=$(pm image inspect -f '{{.Size}}' localhost/abx-e2e-build)
	say "size: build: tools dir ${tools:-?} KiB: .cache ${cache:-?} KiB, the rest ${trees:-?} KiB; image $((isz / 1024)) KiB," \
		"base $((bsz / 1024)) KiB, the template's layers $(((isz - bsz) / 1024)) KiB"
	if start build $START; then
		pm exec "$C" $READY >"$T/ready" 2>&1
		rc=$?
		check "build: the ready_cmd ($READY) in the container: exit 0 (exit $rc $(head -c 100 "$T/ready"))" test $rc = 0
		orchestrate build codex.version
		codex_version build
		session build
		doctor build
		stop_ctr build
	else
		dead build "the ready_cmd, API, codex, doctor and stop"
	fi
	# npm i -g of the same codex on the host, npm's cache in $T
	if command -v npm >/dev/null && timeout 300 npm i -g --prefix "$T/npm" --cache "$T/npm-cache" --no-audit \
		--no-fund --loglevel=error "@openai/codex@$VER" >"$T/npm.log" 2>&1; then
		npmk=$(du -sk "$T/npm" | cut -f1)
		say "size: npm i -g --prefix @openai/codex@$VER: $npmk KiB; tools dir / npm = $(awk "BEGIN {printf \"%.2f\", ${tools:-0} / $npmk}")," \
			".cache / npm = $(awk "BEGIN {printf \"%.2f\", ${cache:-0} / $npmk}"), the rest / npm =" \
			"$(awk "BEGIN {printf \"%.2f\", ${trees:-0} / $npmk}")"
		check "build: the tools dir, .cache included (${tools:-?} KiB), is at most 1.05 times npm i -g's ($npmk KiB)" \
			test "$(awk "BEGIN {print (${tools:-999999999} <= 1.05 * $npmk)}")" = 1
	else
		not_ok "build: npm i -g @openai/codex@$VER to size against" "$(tail -3 "$T/npm.log" 2>/dev/null | tr '\n' ' ')"
	fi
fi
say "time: build: $(($(now) - t0)) s"
;; esac

# ---- 2. the worked template, mode lazy ---------------------------------------------
# After serve's install on first use the sandbox holds codex's tree and, in
# the tools directory's .cache, its verified downloads alone: each entry a
# download (named by its sha256) or an npm integrity alias (sha512-...), no
# extracted tree (trees/, which also holds verify notes) and no temporary
# file (.tmp-*), as core/pkg/cache.h lays the cache out. The downloads are
# read out of the container and hashed here: exactly the lockfile's packages
# of this platform (manifests/codex/package-lock.json, by integrity).
LTD=/home/user/.local/state/agent-sandbox/tools
LTREE=$LTD/codex/$VER-$PLATFORM
lazy_kept() {
	# one du each: du counts a directory (and a hard-linked file) once per run
	pm exec "$C" sh -c 'cd "$0" && du -sk .cache && du -sk --exclude=./.cache . && stat -f -c %S .cache &&
		ls -A .cache' "$LTD" >"$T/lazy.du" 2>&1
	cache=$(sed -n 1p "$T/lazy.du" | cut -f1) tree=$(sed -n 2p "$T/lazy.du" | cut -f1)
	blk=$(sed -n 3p "$T/lazy.du") n=$(($(wc -l <"$T/lazy.du") - 3))
	sed 1,3d "$T/lazy.du" >"$T/lazy.ls"
	case $cache$tree$blk in "" | *[!0-9]*) cache=999999999 tree=1 blk=0 ;; esac
	other=$(grep -Ev '^([0-9a-f]{64}|sha512-[0-9A-Za-z+/=]+)$' "$T/lazy.ls" | tr '\n' ' ' | head -c 200)
	check "lazy: the cache holds downloads and integrity aliases alone, no trees/ or .tmp-* ($n entries, others: ${other:-none})" \
		test "$n" -gt 0 -a -z "$other"
	: >"$T/lazy.dl"
	for h in $(grep -E '^[0-9a-f]{64}$' "$T/lazy.ls"); do
		pm exec "$C" cat "$LTD/.cache/$h" | python3 -c 'import base64, hashlib, sys
a, b, n = hashlib.sha256(), hashlib.sha512(), 0
for c in iter(lambda: sys.stdin.buffer.read(1 << 20), b""):
    a.update(c), b.update(c)
    n += len(c)
print(sys.argv[1], a.hexdigest(), n, "sha512-" + base64.b64encode(b.digest()).decode())' "$h" >>"$T/lazy.dl"
	done
	dl=$(python3 - "$TOP/manifests/codex/package-lock.json" "$PLATFORM" "$T/lazy.dl" <<'PYEOF'
import json, sys
pk, plat, got = json.load(open(sys.argv[1]))["packages"], sys.argv[2], [l.split() for l in open(sys.argv[3])]
os_, cpu = plat.split("-")
want = {v["integrity"] for v in pk.values() if "integrity" in v
        and os_ in v.get("os", [os_]) and cpu in v.get("cpu", [cpu])}
ok = all(name == h for name, h, _, _ in got) and {i for _, _, _, i in got} == want
print(sum(int(n) for _, _, n, _ in got) if ok else "mismatch: %s, the lock's %s" % (got, sorted(want)))
PYEOF
)
	check "lazy: its downloads are the lock's $PLATFORM packages, each named by its sha256 ($dl bytes)" \
		sh -c 'case $0 in "" | *[!0-9]*) exit 1 ;; esac' "$dl"
	case $dl in "" | *[!0-9]*) dl=0 ;; esac
	say "size: lazy: codex $VER: tree $tree KiB, .cache $cache KiB, the downloads $dl bytes;" \
		"(tree + cache) / tree = $(awk "BEGIN {printf \"%.2f\", ($tree + $cache) / $tree}")"
	# The cache's blocks are the downloads' bytes plus what a filesystem of
	# block size $blk adds: per entry, the last block of a download rounded
	# up and one of its extent index (or an alias's one block), and the
	# directory's. Nothing measured for codex is in this bound.
	check "lazy: the cache ($cache KiB) is the downloads ($dl bytes), within a block per entry" \
		test "$(awk "BEGIN {print ($cache * 1024 <= $dl + (2 * $n + 1) * $blk)}")" = 1
	# What the sandbox holds is the tree and at most its compressed
	# downloads: the cache at most the tree. The downloads are the tree's
	# files tarred and gzipped: smaller than the tree unless its bytes do
	# not compress at all (then tar's 512-byte headers and gzip's 5 bytes a
	# 64 KiB stored block, against the tree's last block of each file). An
	# extracted tree kept besides them would alone be as large as the tree.
	check "lazy: the cache ($cache KiB) is at most the tree ($tree KiB)" \
		test "$(awk "BEGIN {print ($cache <= $tree)}")" = 1
}
# lazy_repair: a file of the installed tree changed; codex run through its
# shim says it repairs the tree from the kept downloads before it starts,
# runs, and the downloads are the same files (inodes: none fetched again).
lazy_repair() {
	pm exec "$C" sh -c 'ls -i "$0/.cache"' "$LTD" >"$T/lazy.ino" 2>&1
	pm exec "$C" sh -c 'echo >>"$0/node_modules/@openai/codex/package.json"' "$LTREE" >/dev/null 2>&1
	run pm exec "$C" "$LTD/bin/codex" --version
	expect "lazy: codex's tree drifted (a file changed): its shim repairs it and runs codex" 0 "codex-cli $VER" \
		"agent-sandbox-server: repairing codex $VER in $LTD from local copies of its pinned downloads (drift: "
	check "... said on stderr before codex ran: $(head -1 "$T/err" | head -c 200)" \
		sh -c "head -1 '$T/err' | grep -q '^agent-sandbox-server: repairing codex '"
	pm exec "$C" sh -c 'ls -i "$0/.cache"' "$LTD" >"$T/lazy.ino2" 2>&1
	check "... from the kept downloads, none fetched again, nothing added ($(tr '\n' ' ' <"$T/lazy.ino2" |
		head -c 300))" cmp -s "$T/lazy.ino" "$T/lazy.ino2"
	run pm exec "$C" agent-sandbox-server verify codex
	expect "... verify codex passes in the container" 0
}
case $JOURNEYS in *" lazy "*)
t0=$(now)
if from lazy "$E2B_FROM" localhost/abx-base-e2b && context lazy server.lazy.json && build lazy "$CTX"; then
	# shellcheck disable=SC2086
	if start lazy $START; then
		pm exec "$C" $READY >"$T/ready" 2>&1
		rc=$?
		check "lazy: the ready_cmd ($READY) in the container: exit 0 (exit $rc $(head -c 100 "$T/ready"))" test $rc = 0
		orchestrate lazy codex.version
		codex_version lazy 300
		pm exec "$C" sh -c 'test -d "$HOME/.local/state/agent-sandbox/tools/codex"' >/dev/null 2>&1
		rc=$?
		check "lazy: codex was installed into ~/.local/state/agent-sandbox/tools" test $rc = 0
		lazy_kept
		lazy_repair
		doctor lazy
		say "lazy: doctor: $(grep 'size' "$T/doctor" | tr '\n' '|')"
		stop_ctr lazy
	else
		dead lazy "the ready_cmd, API, codex, doctor and stop"
	fi
fi
say "time: lazy: $(($(now) - t0)) s"
;; esac

# ---- 3. offline: the CI fetch line, then a build with no network ---------------------
# The CI line names the image's platform, linux-x64: on an arm64 machine the
# image is arm64, and the line gets linux-arm64. The image is the last stage
# of a multi-stage build: no cache in it (no abx-cache, no .cache under
# /opt/agent-sandbox, no file named by a sha256) and, with the build
# journey, at most 1.05 times the build template's image.
case $JOURNEYS in *" offline "*)
t0=$(now)
PLAT=linux-x64
[ "$(uname -m)" = aarch64 ] && PLAT=linux-arm64
if from offline "$E2B_FROM" localhost/abx-base-e2b && context offline; then
	mkdir -p "$T/ci/bin"
	cp "$BIN" "$T/ci/bin/agent-sandbox-server"
	sed "s/--platform linux-x64 /--platform $PLAT /" "$T/tpl/ci-fetch.sh" >"$T/ci-fetch.sh"
	# shellcheck disable=SC2086
	(cd "$CTX" && env $MIRROR_ENV PATH="$T/ci/bin:$PATH" HOME="$T/ci" timeout 300 sh -e "$T/ci-fetch.sh") \
		>"$T/ci.log" 2>&1
	rc=$?
	check "offline: the CI fetch line ($(cat "$T/ci-fetch.sh")) fills ./abx-cache (exit $rc $(tail -2 "$T/ci.log" |
		tr '\n' ' ' | head -c 200))" test $rc = 0 -a -d "$CTX/abx-cache"
	ck=$(du -sk "$CTX/abx-cache" | cut -f1)
	say "size: offline: abx-cache ($PLAT) $ck KiB; fetched in $(($(now) - t0)) s"
	# the other platform is not in it: fetch --platform all, into a copy,
	# downloads more
	cp -al "$CTX/abx-cache" "$T/ci-all"
	# shellcheck disable=SC2086
	(cd "$CTX" && env $MIRROR_ENV PATH="$T/ci/bin:$PATH" HOME="$T/ci" timeout 300 \
		agent-sandbox-server fetch --platform all --config server.json --cache "$T/ci-all") >"$T/ci-all.log" 2>&1
	ak=$(du -sk "$T/ci-all" | cut -f1)
	say "size: offline: a cache of both platforms $ak KiB: the CI line's / both = $(awk "BEGIN {printf \"%.2f\", $ck / $ak}")"
	check "offline: the CI line fetched $PLAT only: --platform all adds to its cache ($ck KiB, then $ak KiB)" \
		test "$ak" -gt "$ck"
	rm -rf "$T/ci-all"
	# podman build in a network namespace of its own with no interface up:
	# chroot isolation cannot take --network none, this is stricter still
	if build offline "$CTX" unshare -n; then
		pm run --rm --user root localhost/abx-e2e-offline find / -xdev -regextype posix-basic \( -name abx-cache -o \
			-path '/opt/agent-sandbox/*' -name .cache -o -regex '.*/[0-9a-f]\{64\}[^/]*' \) -print >"$T/find" 2>&1
		rc=$?
		check "offline: the image holds no cache (find: exit $rc, $(head -3 "$T/find" | tr '\n' ' '))" \
			test $rc = 0 -a ! -s "$T/find"
		osz=$(pm image inspect -f '{{.Size}}' localhost/abx-e2e-offline)
		bsz=$(pm image inspect -f '{{.Size}}' localhost/abx-base-e2b)
		if isz=$(pm image inspect -f '{{.Size}}' localhost/abx-e2e-build 2>/dev/null); then
			say "size: offline: image $((osz / 1024)) KiB, the build template's $((isz / 1024)) KiB," \
				"base $((bsz / 1024)) KiB: offline / build = $(awk "BEGIN {printf \"%.3f\", $osz / $isz}")"
			check "offline: the image ($((osz / 1024)) KiB) is at most 1.05 times the build template's ($((isz / 1024)) KiB)" \
				test "$(awk "BEGIN {print ($osz <= 1.05 * $isz)}")" = 1
		else
			say "size: offline: image $((osz / 1024)) KiB, base $((bsz / 1024)) KiB (no build journey to compare with)"
		fi
		# shellcheck disable=SC2086
		if start offline $START; then
			orchestrate offline codex.version
			codex_version offline
			doctor offline
			stop_ctr offline
		else
			dead offline "the API, codex, doctor and stop"
		fi
	fi
fi
say "time: offline: $(($(now) - t0)) s"
;; esac
say "time: all: $(($(now) - T_ALL)) s"
