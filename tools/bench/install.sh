#!/bin/sh
# Bench rows for the install engine (issue 4 §9), side by side in one run:
#   - cold install of a ~100 MiB tar.gz from local HTTPS (prepare, cache and
#     tools directory empty) vs `curl | tee file | sha256sum` then `tar xzf`;
#   - peak resident memory of that install vs curl's;
#   - verify of the 100 MiB tree vs sha256sum over every file;
#   - the ensure() fast path per call (tools/bench/ensure_drv.c, in-process)
#     for a user-owned tree of Node.js's shape (~2700 files in ~600
#     directories) vs `find -printf` statting every entry, and for a
#     root-owned tree (run as nobody) vs one stat() of the entry.
# Run by tools/bench.sh (BIN, TOP set); prints "figure | ours | ref | ratio".
set -u
: "${TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$TOP/tools/benchlib.sh"
MB=${INSTALL_BENCH_MB:-100}
RUNS=${INSTALL_BENCH_RUNS:-3}

if ! has_applet prepare || ! command -v curl >/dev/null 2>&1; then
	row "cold install ${MB} MiB tar.gz (https), ms" n/a n/a "n/a (needs prepare and curl)"
	exit 0
fi
bench_dir install
chmod 755 "$d"
say() { printf 'bench install: %s\n' "$*" >&2; }
ms() { # wall ms of one shell command line
	python3 -c 'import subprocess, sys, time
t = time.perf_counter()
r = subprocess.run(sys.argv[1], shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("%.1f" % ((time.perf_counter() - t) * 1000) if r.returncode == 0 else "fail")' "$1"
}
median() {
	python3 -c 'import statistics, sys
v = [float(x) for x in sys.argv[1:] if x != "fail"]
print("%.1f" % statistics.median(v) if v and len(v) == len(sys.argv[1:]) else "fail")' "$@"
}

# ---- fixtures: a 100 MiB tool and a Node.js-shaped tool ------------------------
mkdir -p "$d/www" "$d/man" "$d/src/big/pkg/bin" "$d/src/nodeish/pkg/bin"
say "making a ${MB} MiB tar.gz and a Node.js-shaped tree"
printf '#!/bin/sh\necho "big 1.0.0"\n' >"$d/src/big/pkg/bin/big"
chmod 755 "$d/src/big/pkg/bin/big"
i=0
while [ $i -lt "$MB" ]; do
	head -c 1048576 /dev/urandom >"$d/src/big/pkg/data$i.bin"
	i=$((i + 1))
done
tar czf "$d/www/big.tgz" -C "$d/src/big" pkg
printf '#!/bin/sh\necho "nodeish 1.0.0"\n' >"$d/src/nodeish/pkg/bin/nodeish"
chmod 755 "$d/src/nodeish/pkg/bin/nodeish"
python3 -c 'import os, sys
root = sys.argv[1]
for i in range(600):
    dd = os.path.join(root, "include", "d%02d" % (i // 30), "s%03d" % i)
    os.makedirs(dd, exist_ok=True)
    for j in range(4 if i < 533 else 5):
        with open(os.path.join(dd, "f%d.h" % j), "w") as f:
            f.write("x" * (100 + 37 * j))' "$d/src/nodeish/pkg"
tar czf "$d/www/nodeish.tgz" -C "$d/src/nodeish" pkg
sh "$TOP/tests/fixtures/mkcerts.sh" "$d/pki" >/dev/null 2>&1 || { say "mkcerts failed"; exit 0; }
python3 "$TOP/tests/fixtures/httpd.py" --root "$d/www" --log "$d/req.log" --cert "$d/pki/good.pem" \
	--key "$d/pki/good.key" >"$d/port" 2>"$d/httpd.err" &
pids="$pids $!"
i=0
while [ ! -s "$d/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
port=$(head -1 "$d/port")
plat=$(uname -m | sed 's/x86_64/linux-x64/; s/aarch64/linux-arm64/')
for t in big nodeish; do
	printf '{"schema":1,"name":"%s","binary":"%s","version":"1.0.0",
 "source":{"type":"tarball","bin":"bin/%s","strip_components":1,
  "platforms":{"%s":{"url":"https://localhost:%s/f/%s.tgz","sha256":"%s"}}},
 "hosts":["localhost"],"verify":{"argv":["{bin}"],"expect":"%s 1.0.0"},"size_hint_mb":%d}\n' \
		"$t" "$t" "$t" "$plat" "$port" "$t" "$(sha256sum "$d/www/$t.tgz" | cut -d' ' -f1)" "$t" $((MB + 10)) \
		>"$d/man/$t.json"
done
chmod -R a+rX "$d/man"
export SSL_CERT_FILE=$d/pki/ca.pem HOME=$d/home ABX_SERVER_STATE_DIR=$d/state
unset SSL_CERT_DIR ABX_TOOLS_DIR ABX_MANIFESTS_DIR ABX_SERVER_INSTALL_MODE ABX_INSTALL_MIRROR

# ---- cold install vs curl | tee | sha256sum && tar xzf --------------------------
ours="" ref=""
r=0
while [ $r -lt "$RUNS" ]; do
	rm -rf "$d/t" "$d/ref" && mkdir -p "$d/ref/x"
	ours="$ours $(ms "'$BIN' prepare -q --manifests '$d/man' --tools-dir '$d/t' --only big")"
	ref="$ref $(ms "curl -sS --cacert '$d/pki/ca.pem' https://localhost:$port/f/big.tgz | tee '$d/ref/big.tgz' | sha256sum && tar xzf '$d/ref/big.tgz' -C '$d/ref/x'")"
	r=$((r + 1))
done
row "cold install ${MB} MiB tar.gz from local https, ms" "$(median $ours)" "$(median $ref)"

rm -rf "$d/t"
o=$(peak_kib "$BIN" prepare -q --manifests "$d/man" --tools-dir "$d/t" --only big)
f=$(peak_kib curl -sS -o "$d/ref/again.tgz" --cacert "$d/pki/ca.pem" "https://localhost:$port/f/big.tgz")
row "cold install peak RSS, KiB (ref: curl alone)" "$o" "$f"

# ---- where the time goes (prepare -v), cold and warm -----------------------------------
# warm: the cache filled, a new tools directory (ref: sha256sum and tar xzf
# of the cached file)
phases() { sed -n 's/^agent-sandbox-server: timing big [^:]*: //p' "$1" | tr -d '|'; }
rm -rf "$d/t" "$d/wc" "$d/ref/x" && mkdir -p "$d/ref/x"
"$BIN" prepare -v --manifests "$d/man" --tools-dir "$d/t" --cache "$d/wc" --only big >/dev/null 2>"$d/v.err"
row "cold install phases (prepare -v), ms" n/a n/a "$(phases "$d/v.err")"
ours="" ref=""
r=0
while [ $r -lt "$RUNS" ]; do
	rm -rf "$d/t" "$d/ref/x" && mkdir -p "$d/ref/x"
	ours="$ours $(ms "'$BIN' prepare -q --manifests '$d/man' --tools-dir '$d/t' --cache '$d/wc' --only big")"
	ref="$ref $(ms "sha256sum '$d/ref/big.tgz' && tar xzf '$d/ref/big.tgz' -C '$d/ref/x'")"
	r=$((r + 1))
done
row "warm install ${MB} MiB tar.gz (cache filled, new tools dir), ms (ref: sha256sum && tar xzf)" "$(median $ours)" "$(median $ref)"
rm -rf "$d/t"
"$BIN" prepare -v --manifests "$d/man" --tools-dir "$d/t" --cache "$d/wc" --only big >/dev/null 2>"$d/v.err"
row "warm install phases (prepare -v), ms" n/a n/a "$(phases "$d/v.err")"
rm -rf "$d/t" "$d/wc"
"$BIN" prepare -q --manifests "$d/man" --tools-dir "$d/t" --only big >/dev/null 2>&1

# ---- verify ----------------------------------------------------------------------------
o=$(ms "'$BIN' verify -q --manifests '$d/man' --tools-dir '$d/t' big")
f=$(ms "find '$d/t/big/' -mindepth 1 -maxdepth 1 -type d -exec find {} -type f -print0 \\; | xargs -0 sha256sum")
row "verify ${MB} MiB tree, ms (ref: sha256sum of every file)" "$o" "$f"

# ---- the ensure() fast path ---------------------------------------------------------------
drv=$d/ensure_drv
if ${MUSL_CC:-musl-gcc} -std=c11 -Os -D_GNU_SOURCE -static -s -I"$TOP/core" -I"$TOP/build/deps/musl/include" \
	-o "$drv" "$TOP/tools/bench/ensure_drv.c" $(core_objs) \
	-L"$TOP/build/deps/musl/lib" -larchive -lz -lbearssl -lpthread 2>"$d/drv.err"; then
	"$BIN" prepare -q --manifests "$d/man" --tools-dir "$d/t" --only nodeish >/dev/null 2>&1
	set -- $("$drv" "$d/t" "$d/man" nodeish 20 2>/dev/null || echo fail fail)
	o=$(awk -v u="$1" 'BEGIN { if (u ~ /^[0-9.]+$/) printf "%.2f", u / 1000; else print "fail" }')
	f=$(ms "find '$d/t/nodeish/' -printf '%p %m %s %i %C@\n'")
	row "ensure fast path, user-owned Node.js-sized tree, ms/call (ref: find -printf)" "$o" "$f"
	set -- $("$drv" "$d/t" "$d/man" nodeish 20 fresh 2>/dev/null || echo fail fail)
	o=$(awk -v u="$1" 'BEGIN { if (u ~ /^[0-9.]+$/) printf "%.2f", u / 1000; else print "fail" }')
	row "ensure fast path, user-owned Node.js-sized tree, a new context per call (serve), ms/call (ref: find -printf)" "$o" "$f"
	if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
		chmod -R a+rX "$d/t" && chmod 755 "$drv" "$d/t"
		set -- $(setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent \
			ABX_SERVER_STATE_DIR=/nonexistent "$drv" "$d/t" "$d/man" big 20000 2>/dev/null || echo fail fail)
		row "ensure fast path, root-owned tree, us/call (ref: one stat of the entry)" "$1" "$2"
	else
		row "ensure fast path, root-owned tree, us/call" n/a n/a "n/a (needs root and setpriv)"
	fi
else
	say "tools/bench/ensure_drv.c did not build: $(head -5 "$d/drv.err")"
	row "ensure fast path, us/call" n/a n/a "n/a (driver did not build)"
fi
