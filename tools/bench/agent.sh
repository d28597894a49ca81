#!/bin/sh
# Bench rows for an install shaped like the real agents (codex, claude-code,
# gemini): one native platform package of AGENT_NATIVE_MB MiB (an
# optionalDependency selected by os/cpu, as @openai/codex-linux-x64 is) and
# AGENT_JS small JavaScript packages, generated here (nothing committed) and
# served by the local HTTPS registry (tests/fixtures/npmreg.py). Our native
# installer (`prepare --only agent`) against `npm ci --ignore-scripts` of the
# same lockfile and `npm install -g --prefix` of the same version, cold (empty
# caches) and warm (caches filled, a new tools directory / prefix), and the
# phases of ours (prepare -v). Run by tools/bench.sh (BIN, TOP set).
set -u
: "${TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$TOP/tools/benchlib.sh"
AGENT_NATIVE_MB=${AGENT_NATIVE_MB:-110}
AGENT_JS=${AGENT_JS:-200}
AGENT_RUNS=${AGENT_RUNS:-2}
F="agent-shaped install (1 native ${AGENT_NATIVE_MB} MiB + $AGENT_JS JS packages)"

if ! has_applet prepare || ! command -v npm >/dev/null 2>&1; then
	row "$F, cold, ms" n/a n/a "n/a (no prepare applet or no npm)"
	exit 0
fi
say() { printf 'bench agent: %s\n' "$*" >&2; }
d=$(mktemp -d "${TMPDIR:-/tmp}/abx-bench-agent.XXXXXX") || exit 1
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	rm -rf "$d"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sh "$TOP/tests/fixtures/mkcerts.sh" "$d/pki" >/dev/null 2>&1 || { say "mkcerts failed"; exit 0; }
mkdir -p "$d/reg"
python3 "$TOP/tests/fixtures/npmreg.py" --root "$d/reg" --log /dev/null --cert "$d/pki/good.pem" \
	--key "$d/pki/good.key" >"$d/port" 2>"$d/reg.err" &
pids="$pids $!"
i=0
while [ ! -s "$d/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
REG="https://localhost:$(head -1 "$d/port")"
export SSL_CERT_FILE="$d/pki/ca.pem"
unset SSL_CERT_DIR ABX_TOOLS_DIR ABX_INSTALL_NPM_REGISTRY ABX_SERVER_INSTALL_MODE

say "generating the fixture ($AGENT_NATIVE_MB MiB native package, $AGENT_JS JS packages)"
PYTHONPATH="$TOP/tests/fixtures" python3 - "$d" "$REG" "$AGENT_NATIVE_MB" "$AGENT_JS" <<'EOF' || { row "$F, cold, ms" n/a n/a "n/a (fixture failed)"; exit 0; }
import json, os, random, sys
import npmpack as P
d, reg, mb, njs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
root, m = d + "/reg", d + "/m"
rnd = random.Random(16)
# a native binary compresses about 2.5:1: half random, half repeated text
half = (mb << 20) // 2
native = os.urandom(half) + b"".join(
    b"section .text %08x mov rax, rbx\n" % i for i in range(half // 32 + 1))[:half]
P.pack(root, "@bench/agent-linux-x64", "1.0.0", {"vendor/agent-native": (native, 0o755)},
       {"os": ["linux"], "cpu": ["x64"]})
P.pack(root, "@bench/agent-linux-arm64", "1.0.0", {"vendor/agent-native": (b"arm64\n", 0o755)},
       {"os": ["linux"], "cpu": ["arm64"]})
deps = {}
for i in range(njs):
    name = "bench-js-%03d" % i
    files = {"index.js": ("module.exports = %d;\n" % i).encode() * rnd.randint(20, 200),
             "lib/util.js": ("// util %d\nexports.f = () => %d;\n" % (i, i)).encode() * rnd.randint(50, 400),
             "README.md": b"# readme\n" * rnd.randint(10, 100)}
    P.pack(root, name, "1.0.0", files)
    deps[name] = "1.0.0"
P.pack(root, "@bench/agent", "1.0.0", {"bin/agent.js": b"#!/usr/bin/env node\nconsole.log('agent')\n"},
       {"bin": {"agent": "bin/agent.js"}, "dependencies": deps,
        "optionalDependencies": {"@bench/agent-linux-x64": "1.0.0", "@bench/agent-linux-arm64": "1.0.0"}})
E = lambda *a, **k: P.entry(root, reg, *a, **k)
ent = {"node_modules/@bench/agent": E("@bench/agent", "1.0.0", bin={"agent": "bin/agent.js"}, dependencies=deps,
                                       optionalDependencies={"@bench/agent-linux-x64": "1.0.0",
                                                             "@bench/agent-linux-arm64": "1.0.0"}),
       "node_modules/@bench/agent-linux-x64": E("@bench/agent-linux-x64", "1.0.0", os=["linux"], cpu=["x64"],
                                                optional=True),
       "node_modules/@bench/agent-linux-arm64": E("@bench/agent-linux-arm64", "1.0.0", os=["linux"],
                                                  cpu=["arm64"], optional=True)}
for n in deps:
    ent["node_modules/" + n] = E(n, "1.0.0")
P.write_manifest(m, "agent", "@bench/agent", ["localhost"], verify={"argv": ["/bin/true"]},
                 bin_="node_modules/.bin/agent")
P.write_lock(m + "/agent/package-lock.json", "@bench/agent", ent)
doc = json.load(open(m + "/agent/package-lock.json"))
doc["packages"][""]["dependencies"] = {"@bench/agent": "1.0.0"}
json.dump(doc, open(m + "/agent/package-lock.json", "w"), indent=2)
json.dump({"name": "abx-test", "version": "0.0.0", "dependencies": {"@bench/agent": "1.0.0"}},
          open(m + "/agent/package.json", "w"))
EOF
mkdir -p "$d/ci"
cp "$d/m/agent/package-lock.json" "$d/m/agent/package.json" "$d/ci/"
: >"$d/empty"; : >"$d/gempty"; : >"$d/rc"
# the registry reads each tarball's package.json once; not inside a timing
curl -sS --cacert "$SSL_CERT_FILE" -o /dev/null "$REG/@bench%2fagent-linux-x64" || true

if [ "$(date +%N)" != "%N" ]; then now() { date +%s%3N; }; else now() { python3 -c 'import time; print("%.3f" % (time.time() * 1000))'; }; fi
nold=0
fresh() { # the previous trees moved aside (see tools/bench/npm.sh), then sync
	nold=$((nold + 1))
	mkdir -p "$d/old"
	for x in tools ci/node_modules gp; do [ -d "$d/$x" ] && mv "$d/$x" "$d/old/$nold-$(echo $x | tr / _)"; done
	mkdir -m 700 "$d/tools"
	sync
}
ours() { # CACHE [-v]
	"$BIN" prepare --only agent --manifests "$d/m" --tools-dir "$d/tools" --cache "$1" ${2:--q} >/dev/null \
		2>>"$d/ours.err" || echo "fail ours" >>"$d/rc"
}
npmci() { # CACHE
	(cd "$d/ci" && npm ci --ignore-scripts --no-audit --no-fund --prefer-offline --cache "$1" \
		--userconfig "$d/empty" --globalconfig "$d/gempty" --registry "$REG/" --cafile "$SSL_CERT_FILE" \
		>/dev/null 2>>"$d/npm.err") || echo "fail npm ci" >>"$d/rc"
}
npmg() { # CACHE
	npm install -g --prefix "$d/gp" --ignore-scripts --no-audit --no-fund --prefer-offline --cache "$1" \
		--userconfig "$d/empty" --globalconfig "$d/gempty" --registry "$REG/" --cafile "$SSL_CERT_FILE" \
		@bench/agent@1.0.0 >/dev/null 2>>"$d/npm.err" || echo "fail npm -g" >>"$d/rc"
}
t() { a=$(now); "$@"; b=$(now); awk -v a="$a" -v b="$b" 'BEGIN{print b-a}'; }

co="" wo="" cc="" wc="" cg="" wg=""
r=0
while [ $r -lt "$AGENT_RUNS" ]; do
	say "round $((r + 1)) of $AGENT_RUNS"
	mkdir -p "$d/old"
	for x in oc nc gc; do [ -d "$d/$x" ] && mv "$d/$x" "$d/old/$x$r"; done
	fresh; co="$co $(t ours "$d/oc")"
	fresh; cc="$cc $(t npmci "$d/nc")"
	fresh; cg="$cg $(t npmg "$d/gc")"
	fresh; wo="$wo $(t ours "$d/oc")"
	fresh; wc="$wc $(t npmci "$d/nc")"
	fresh; wg="$wg $(t npmg "$d/gc")"
	r=$((r + 1))
done
if [ -s "$d/rc" ]; then
	say "a run failed: $(sort -u "$d/rc" | tr '\n' ' ') $(tail -3 "$d/ours.err" "$d/npm.err")"
	row "$F, cold, ms" fail fail "n/a (a run failed)"
	exit 0
fi
row "$F, cold, ms (ref: npm ci)" "$(median $co)" "$(median $cc)"
row "$F, cold, ms (ref: npm install -g --prefix)" "$(median $co)" "$(median $cg)"
row "$F, warm cache, new tools dir, ms (ref: npm ci)" "$(median $wo)" "$(median $wc)"
row "$F, warm cache, new tools dir, ms (ref: npm install -g --prefix)" "$(median $wo)" "$(median $wg)"
# where the time goes (prepare -v), cold then warm
mv "$d/oc" "$d/old/oc-v"
fresh; ours "$d/oc" -v
row "$F, cold, phases (prepare -v), ms" n/a n/a \
	"$(sed -n 's/^agent-sandbox-server: timing agent [^:]*: //p' "$d/ours.err" | tail -1 | tr -d '|')"
fresh; ours "$d/oc" -v
row "$F, warm, phases (prepare -v), ms" n/a n/a \
	"$(sed -n 's/^agent-sandbox-server: timing agent [^:]*: //p' "$d/ours.err" | tail -1 | tr -d '|')"
