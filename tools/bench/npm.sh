#!/bin/sh
# Bench rows for npm-lock installs: our native installer (`prepare --only`)
# against `npm ci --ignore-scripts` of the same real-world lockfile (jest,
# ~280 packages) from the same local HTTPS registry (tests/fixtures/npmreg.py),
# cold (empty caches) and warm (caches filled, no tree), and the peak
# resident memory of each. Run by tools/bench.sh (BIN, TOP set).
#
# The tarballs are mirrored once from registry.npmjs.org into
# build/bench/npm-reg (checked against their integrity) and reused.
# NPM_BENCH_STORE names another such store (reg/, package-lock.json whose
# resolved URLs are registry.npmjs.org's, package.json: tests/integration/
# bench.sh makes a small one, so it never reaches the network), and
# NPM_BENCH_BIN the root package's bin the manifest names.
set -u
: "${TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$TOP/tools/benchlib.sh"
NPM_BENCH_PKG=${NPM_BENCH_PKG:-jest@29.7.0}
NPM_BENCH_BIN=${NPM_BENCH_BIN:-jest}
NPM_BENCH_RUNS=${NPM_BENCH_RUNS:-3}

if ! has_applet prepare || ! command -v npm >/dev/null 2>&1; then
	row "npm-lock install, cold" n/a n/a "n/a (needs prepare and npm)"
	exit 0
fi
say() { printf 'bench npm: %s\n' "$*" >&2; }
bench_dir npm

# ---- the lockfile and the mirrored tarballs (once) ----------------------
store=${NPM_BENCH_STORE:-$TOP/build/bench/npm-reg}
mkdir -p "$store"
if [ ! -s "$store/package-lock.json" ]; then
	say "locking $NPM_BENCH_PKG and mirroring its tarballs (once)"
	mkdir -p "$d/lk"
	: >"$d/lk/npmrc"; : >"$d/lk/gnpmrc"
	printf '{"name":"abx-bench","version":"0.0.0","private":true,"dependencies":{"%s":"%s"}}\n' \
		"${NPM_BENCH_PKG%@*}" "${NPM_BENCH_PKG##*@}" >"$d/lk/package.json"
	(cd "$d/lk" && npm install --package-lock-only --ignore-scripts --no-audit --no-fund \
		--userconfig ./npmrc --globalconfig ./gnpmrc --omit-lockfile-registry-resolved=false \
		--registry https://registry.npmjs.org/ >/dev/null 2>&1) || { row "npm-lock install, cold" n/a n/a "n/a (npm lock failed)"; exit 0; }
	python3 - "$d/lk/package-lock.json" "$store" <<'EOF' || { row "npm-lock install, cold" n/a n/a "n/a (mirroring failed)"; exit 0; }
import base64, hashlib, json, os, sys, urllib.request, concurrent.futures as cf
lock, store = sys.argv[1], sys.argv[2]
doc = json.load(open(lock))
def get(item):
    k, v = item
    url = v["resolved"]
    path = os.path.join(store, "reg", url.split("registry.npmjs.org/", 1)[1])
    if os.path.exists(path):
        return
    data = urllib.request.urlopen(url, timeout=60).read()
    alg, b64 = v["integrity"].split()[0].split("-", 1)
    if base64.b64encode(hashlib.new(alg, data).digest()).decode() != b64:
        raise SystemExit("integrity mismatch: " + url)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path + ".tmp", "wb").write(data)
    os.rename(path + ".tmp", path)
items = [(k, v) for k, v in doc["packages"].items() if k and "resolved" in v]
with cf.ThreadPoolExecutor(8) as ex:
    list(ex.map(get, items))
open(os.path.join(store, "package-lock.json"), "w").write(json.dumps(doc, indent=2))
open(os.path.join(store, "package.json"), "w").write(open(os.path.join(os.path.dirname(lock), "package.json")).read())
EOF
fi
N=$(python3 -c 'import json,sys; print(sum(1 for k, v in json.load(open(sys.argv[1]))["packages"].items() if k and "resolved" in v))' "$store/package-lock.json")

# ---- the registry and the two sides ---------------------------------------
sh "$TOP/tests/fixtures/mkcerts.sh" "$d/pki" >/dev/null 2>&1 || { say "mkcerts failed"; exit 0; }
python3 "$TOP/tests/fixtures/npmreg.py" --root "$store/reg" --log /dev/null --cert "$d/pki/good.pem" \
	--key "$d/pki/good.key" >"$d/port" 2>"$d/reg.err" &
pids="$pids $!"
i=0
while [ ! -s "$d/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
P=$(head -1 "$d/port")
REG="https://localhost:$P"
export SSL_CERT_FILE="$d/pki/ca.pem"
unset ABX_TOOLS_DIR ABX_INSTALL_NPM_REGISTRY ABX_SERVER_INSTALL_MODE

mkdir -p "$d/m/bench" "$d/ci"
sed "s#https://registry.npmjs.org/#$REG/#" "$store/package-lock.json" >"$d/m/bench/package-lock.json"
cp "$store/package.json" "$d/m/bench/package.json"
cp "$d/m/bench/package-lock.json" "$store/package.json" "$d/ci/"
cat >"$d/m/bench.json" <<EOF
{
  "schema": 1, "name": "bench", "binary": "$NPM_BENCH_BIN", "version": "${NPM_BENCH_PKG##*@}",
  "source": {"type": "npm-lock", "package": "${NPM_BENCH_PKG%@*}", "lock": "bench/package-lock.json",
             "package_json": "bench/package.json", "bin": "node_modules/.bin/$NPM_BENCH_BIN", "allow_scripts": false},
  "hosts": ["localhost"],
  "verify": {"argv": ["/bin/true"]},
  "platforms": ["linux-x64", "linux-arm64"]
}
EOF
: >"$d/rc"
# The previous trees are moved aside, not deleted, until the end: on ext4
# without a journal (this kind of VM) every new inode skips the group's
# recently deleted ones (fs/ext4/ialloc.c recently_deleted(), 5 min), so
# deleting ~4,300 files right before a run makes each file created by that
# run cost up to a millisecond more, whichever side runs next.
nold=0
fresh() {
	mkdir -p "$d/old"
	nold=$((nold + 1))
	[ -d "$d/tools" ] && mv "$d/tools" "$d/old/t$nold"
	[ -d "$d/ci/node_modules" ] && mv "$d/ci/node_modules" "$d/old/n$nold"
	mkdir -m 700 "$d/tools"
	sync
}
ours() { # CACHE: one install into a fresh tools directory
	"$BIN" prepare --only bench --manifests "$d/m" --tools-dir "$d/tools" --cache "$1" -q >/dev/null 2>>"$d/ours.err" ||
		echo fail >>"$d/rc"
}
npmci() { # CACHE
	(cd "$d/ci" && npm ci --ignore-scripts --no-audit --no-fund --prefer-offline --cache "$1" \
		--userconfig "$d/empty" --globalconfig "$d/gempty" --registry "$REG/" --cafile "$SSL_CERT_FILE" \
		>/dev/null 2>>"$d/npm.err") || echo fail >>"$d/rc"
}
: >"$d/empty"; : >"$d/gempty"
# ms since the epoch; date(1) when it has %N: a Python start-up (20-40 ms on
# a loaded machine) inside every measured interval would be added to both
# sides and understate the ratio.
if [ "$(date +%N)" != "%N" ]; then
	now() { date +%s%3N; }
else
	now() { python3 -c 'import time; print("%.3f" % (time.time() * 1000))'; }
fi

cold_o="" cold_n="" warm_o="" warm_n=""
r=0
while [ $r -lt "$NPM_BENCH_RUNS" ]; do
	say "round $((r + 1)) of $NPM_BENCH_RUNS"
	mkdir -p "$d/old"
	[ -d "$d/oc" ] && mv "$d/oc" "$d/old/oc$r"
	[ -d "$d/nc" ] && mv "$d/nc" "$d/old/nc$r"
	fresh; a=$(now); ours "$d/oc"; b=$(now); cold_o="$cold_o $(awk -v a="$a" -v b="$b" "BEGIN{print b-a}")"
	fresh; a=$(now); npmci "$d/nc"; b=$(now); cold_n="$cold_n $(awk -v a="$a" -v b="$b" "BEGIN{print b-a}")"
	fresh; a=$(now); ours "$d/oc"; b=$(now); warm_o="$warm_o $(awk -v a="$a" -v b="$b" "BEGIN{print b-a}")"
	fresh; a=$(now); npmci "$d/nc"; b=$(now); warm_n="$warm_n $(awk -v a="$a" -v b="$b" "BEGIN{print b-a}")"
	r=$((r + 1))
done
if [ -s "$d/rc" ]; then
	say "a run failed: $(tail -3 "$d/ours.err" "$d/npm.err")"
	row "npm-lock install ($N packages), cold, ms" fail fail "n/a (a run failed)"
	exit 0
fi
row "npm-lock install ($N packages), cold, ms" "$(median $cold_o)" "$(median $cold_n)"
row "npm-lock install ($N packages), warm cache, ms" "$(median $warm_o)" "$(median $warm_n)"
# where a warm install's time goes (prepare -v)
fresh
"$BIN" prepare -v --only bench --manifests "$d/m" --tools-dir "$d/tools" --cache "$d/oc" >/dev/null 2>"$d/v.err"
row "npm-lock install, warm, phases (prepare -v), ms" n/a n/a \
	"$(sed -n 's/^agent-sandbox-server: timing bench [^:]*: //p' "$d/v.err" | tr -d '|')"

# Peak RSS, warm, each side as its whole process tree's exit figure.
fresh
ko=$(peak_kib "$BIN" prepare --only bench --manifests "$d/m" --tools-dir "$d/tools" --cache "$d/oc" -q)
fresh
kn=$(cd "$d/ci" && peak_kib npm ci --ignore-scripts --no-audit --no-fund --prefer-offline --cache "$d/nc" \
	--userconfig "$d/empty" --globalconfig "$d/gempty" --registry "$REG/" --cafile "$SSL_CERT_FILE")
row "npm-lock install peak RSS, KiB" "$ko" "$kn"
