#!/bin/sh
# Bench rows for an OCI registry as the fleet's shared cache (issue 30): the
# agent-shaped fixture (tools/bench/agentfix.py, as tools/bench/agent.sh
# builds it) pushed once with `fetch --push` to the CNCF registry
# (Debian's docker-registry) on loopback over TLS, then
#   - one cold install from the registry (install.mirrors.oci) against the
#     same install from the HTTPS fixture registry (tests/fixtures/npmreg.py),
#     side by side in interleaved rounds, medians: goal <= 0.8x (a fleet
#     cache faster than the origin). The default fixture is agent-sized:
#     202 packages, a native one of 160 MiB, about 170 MB installed (codex
#     and claude-code's order). The registry runs with Debian's stock
#     storage cache (blobdescriptor: inmemory);
#   - a fleet: OCI_FLEET concurrent `prepare` processes (each its own tools
#     directory and cache) against the one registry, the origin still up:
#     bytes the origin served (goal: the push's one copy, the installs 0,
#     from the fixture's request log), wall time, and registry requests per
#     install (from the registry's access log).
# Rows are n/a with the reason when docker-registry or prepare is missing.
# Run by tools/bench.sh (BIN, TOP set).
set -u
: "${TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$TOP/tools/benchlib.sh"
OCI_NATIVE_MB=${OCI_NATIVE_MB:-160}
OCI_JS=${OCI_JS:-200}
OCI_RUNS=${OCI_RUNS:-3}
OCI_FLEET=${OCI_FLEET:-32}
F="agent-shaped install (1 native ${OCI_NATIVE_MB} MiB + $OCI_JS JS packages)"
FF="fleet of $OCI_FLEET concurrent prepare, one registry"

na_all() {
	row "$F, cold, from an OCI registry, ms (ref: HTTPS fixture registry; goal <= 0.8x)" n/a n/a "n/a ($1)"
	row "$FF, origin bytes read (ref: one copy, the push)" n/a n/a "n/a ($1)"
	row "$FF, wall ms" n/a n/a "n/a ($1)"
	row "$FF, registry requests per install" n/a n/a "n/a ($1)"
}
if ! has_applet prepare || ! has_applet fetch; then
	na_all "needs prepare and fetch"
	exit 0
fi
if ! command -v docker-registry >/dev/null; then
	na_all "needs docker-registry: tools/hostdeps.sh check installs it"
	exit 0
fi
say() { printf 'bench oci: %s\n' "$*" >&2; }
bench_dir oci

sh "$TOP/tests/fixtures/mkcerts.sh" "$d/pki" >/dev/null 2>&1 || { na_all "mkcerts failed"; exit 0; }
mkdir -p "$d/reg"
: >"$d/origin.log"
python3 "$TOP/tests/fixtures/npmreg.py" --root "$d/reg" --log "$d/origin.log" --cert "$d/pki/good.pem" \
	--key "$d/pki/good.key" >"$d/port" 2>"$d/reg.err" &
pids="$pids $!"
i=0
while [ ! -s "$d/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
REG="https://localhost:$(head -1 "$d/port")"
export SSL_CERT_FILE="$d/pki/ca.pem"
unset SSL_CERT_DIR ABX_TOOLS_DIR ABX_INSTALL_NPM_REGISTRY ABX_SERVER_INSTALL_MODE ABX_INSTALL_OCI_MIRROR \
	ABX_OCI_AUTH ABX_OCI_AUTH_FILE DOCKER_CONFIG ABX_SERVER_CONFIG HTTPS_PROXY https_proxy

say "generating the fixture ($OCI_NATIVE_MB MiB native package, $OCI_JS JS packages)"
PYTHONPATH="$TOP/tests/fixtures" python3 "$TOP/tools/bench/agentfix.py" "$d" "$REG" "$OCI_NATIVE_MB" "$OCI_JS" ||
	{ na_all "fixture failed"; exit 0; }

if ! oci_registry_start "$d" "$d/pki/good.pem" "$d/pki/good.key" "$SSL_CERT_FILE"; then
	na_all "$OCI_REG_WHY"
	exit 0
fi
pids="$pids $OCI_REG_PID"
RP=$OCI_REG_PORT
OCI="oci://localhost:$RP/bench/tools"

# origin_bytes: the bytes of the tarballs the fixture registry served, by
# its request log (one "<port> GET <path>" line a request)
origin_bytes() {
	python3 - "$d/reg" "$d/origin.log" <<'PYEOF'
import os, sys, urllib.parse
root, n = sys.argv[1], 0
for line in open(sys.argv[2]):
    f = line.split()
    if len(f) < 3 or f[1] != "GET":
        continue
    p = os.path.join(root, urllib.parse.unquote(urllib.parse.urlsplit(f[2]).path).lstrip("/"))
    if p.endswith(".tgz") and os.path.isfile(p):
        n += os.path.getsize(p)
print(n)
PYEOF
}
reg_requests() { grep -c '"\(GET\|HEAD\) /v2/' "$d/oci.log" || true; }

say "pushing to $OCI"
mkdir -p "$d/push"
"$BIN" fetch --only agent --manifests "$d/m" --tools-dir "$d/push" --push "$OCI" >"$d/push.out" 2>"$d/push.err" ||
	{ say "push failed: $(tail -3 "$d/push.err")"; na_all "fetch --push failed"; exit 0; }
push_bytes=$(origin_bytes)
fixture_bytes=$(find "$d/reg" -name '*.tgz' -exec stat -c %s {} + | awk '{ s += $1 } END { print s }')

if [ "$(date +%N)" != "%N" ]; then now() { date +%s%3N; }; else now() { python3 -c 'import time; print("%.3f" % (time.time() * 1000))'; }; fi
: >"$d/rc"
n=0
# inst MIRROR: a cold install (new tools directory, new cache)
inst() {
	n=$((n + 1))
	rm -rf "$d/t" "$d/c"
	mkdir -m 700 "$d/t"
	sync
	env ${1:+ABX_INSTALL_OCI_MIRROR=$1} ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost ABX_SERVER_INSTALL_MODE=lazy \
		"$BIN" prepare --only agent --manifests "$d/m" --tools-dir "$d/t" --cache "$d/c" -q >/dev/null \
		2>>"$d/inst.err" || echo "fail prepare ${1:-origin}" >>"$d/rc"
}
t() { a=$(now); "$@"; b=$(now); awk -v a="$a" -v b="$b" 'BEGIN{print b-a}'; }
oc="" hc=""
r=0
while [ $r -lt "$OCI_RUNS" ]; do
	say "round $((r + 1)) of $OCI_RUNS"
	# each side first in every other round: neither always gets the
	# page cache the other warmed
	if [ $((r % 2)) -eq 0 ]; then
		oc="$oc $(t inst "$OCI")"
		hc="$hc $(t inst "")"
	else
		hc="$hc $(t inst "")"
		oc="$oc $(t inst "$OCI")"
	fi
	r=$((r + 1))
done
rm -rf "$d/t" "$d/c"
if [ -s "$d/rc" ]; then
	say "a run failed: $(sort -u "$d/rc" | tr '\n' ' ') $(tail -3 "$d/inst.err")"
	row "$F, cold, from an OCI registry, ms (ref: HTTPS fixture registry; goal <= 0.8x)" fail fail "n/a (a run failed)"
else
	row "$F, cold, from an OCI registry, ms (ref: HTTPS fixture registry; goal <= 0.8x)" "$(median $oc)" "$(median $hc)"
fi

say "fleet: $OCI_FLEET concurrent installs"
: >"$d/origin.log"
: >"$d/rc"
req0=$(reg_requests)
a=$(now)
k=0
fp=""
while [ $k -lt "$OCI_FLEET" ]; do
	mkdir -m 700 -p "$d/f$k/t"
	ABX_INSTALL_OCI_MIRROR=$OCI ABX_SERVER_INSTALL_ALLOW_HOSTS=localhost ABX_SERVER_INSTALL_MODE=lazy \
		"$BIN" prepare --only agent --manifests "$d/m" --tools-dir "$d/f$k/t" --cache "$d/f$k/c" -q \
		>/dev/null 2>"$d/f$k.err" || echo "fail fleet $k" >>"$d/rc" &
	fp="$fp $!"
	k=$((k + 1))
done
for p in $fp; do wait "$p"; done
b=$(now)
fleet_ms=$(awk -v a="$a" -v b="$b" 'BEGIN{print b-a}')
req1=$(reg_requests)
fleet_bytes=$(origin_bytes)
fleet_origin_req=$(wc -l <"$d/origin.log")
nfail=$(wc -l <"$d/rc")
ok=$(( OCI_FLEET - nfail ))
[ "$nfail" -eq 0 ] || say "$nfail install(s) failed: $(cat "$d"/f*.err | sort | uniq -c | head -5)"
row "$FF, origin bytes read: the push (ref: the fixture's tarballs, one copy)" "$push_bytes" "$fixture_bytes"
row "$FF, origin bytes read by the $OCI_FLEET installs" "$fleet_bytes" 0 \
	"n/a ($fleet_origin_req origin requests; goal 0)"
row "$FF, wall ms ($ok of $OCI_FLEET installed)" "$fleet_ms" none "($(awk -v a="$fleet_ms" -v n="$OCI_FLEET" 'BEGIN{printf "%.0f", a/n}') ms per install)"
row "$FF, registry requests per install" "$(awk -v a="$req0" -v b="$req1" -v n="$OCI_FLEET" 'BEGIN{printf "%.1f", (b-a)/n}')" none \
	"($((req1 - req0)) GET/HEAD /v2/ in all)"
