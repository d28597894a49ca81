# The CPU level of vendors that ship -baseline builds for CPUs without AVX2
# (opencode, Droid, Kilo): the built-in opencode manifest with its pins
# swapped for fixture packages (every x64 build: fast and baseline, glibc
# and musl, as opencode-ai lists them) served by the fake registry through
# the npm mirror setting. install.cpu_level auto follows the CPU
# (ABX_INSTALL_AVX2 stands in for it), baseline and v3 choose; only the
# chosen platform package is downloaded and its binary made executable
# (the baseline one is packed 0644); v3 on a CPU without AVX2, and a build
# the lockfile lacks, are refused before any download; a level that is not
# one is a configuration error.
. "$TOP/tests/lib.sh"

if [ "$(uname -m)" != x86_64 ]; then
	skip "cpu_level" "baseline builds are x86-64 only"
	exit 0
fi
PKI=$T/pki
sh "$FIXTURES/mkcerts.sh" "$PKI" >"$T/mkcerts.log" 2>&1 || { not_ok "mkcerts" "$(tail -3 "$T/mkcerts.log")"; exit 1; }
command -v musl-gcc >/dev/null || { not_ok "musl-gcc" "needed to build the fake agent"; exit 1; }
mkdir -p "$T/reg" "$T/m" "$T/b"
musl-gcc -static -O1 -o "$T/b/static" "$FIXTURES/fakeagent.c" || { not_ok "fake agent" "musl-gcc failed"; exit 1; }
start_npmreg reg "$T/reg" "$PKI"
REG="https://localhost:$REG_PORT"

FIXTURES=$FIXTURES T=$T TOP=$TOP python3 - <<'PY' || { not_ok "fixtures" "the generator failed"; exit 1; }
import json, os, sys
sys.path.insert(0, os.environ["FIXTURES"])
import npmpack as P
T, TOP = os.environ["T"], os.environ["TOP"]
root, m = T + "/reg", T + "/m"
NPM = "https://registry.npmjs.org"
agent = open(T + "/b/static", "rb").read()
d = json.load(open(TOP + "/manifests/extra/opencode.json"))
d["version"] = d["verify"]["expect"] = d["path"]["min"] = "1.0.0"
# the CPU level alone: the shared libraries this host may lack are not asked
d.pop("libs", None)
json.dump(d, open(m + "/opencode.json", "w"), indent=2)
P.pack(root, "opencode-ai", "1.0.0", {"bin/opencode.exe": (b"echo postinstall never ran\n", 0o755)},
       {"bin": {"opencode": "bin/opencode.exe"}})
ents = {"node_modules/opencode-ai": P.entry(root, NPM, "opencode-ai", "1.0.0", bin={"opencode": "bin/opencode.exe"})}
for v in ("", "-baseline", "-musl", "-baseline-musl"):
    if v == "-baseline-musl":
        continue   # not published: refused before download
    pkg = "opencode-linux-x64" + v
    P.pack(root, pkg, "1.0.0", {"bin/opencode": (agent, 0o644 if v == "-baseline" else 0o755)},
           {"os": ["linux"], "cpu": ["x64"]})
    ents["node_modules/" + pkg] = P.entry(root, NPM, pkg, "1.0.0", os=["linux"], cpu=["x64"], optional=True)
P.write_lock(m + "/opencode/package-lock.json", "opencode-ai", ents)
json.dump({"name": "abx-test", "version": "0.0.0", "dependencies": {"opencode-ai": "1.0.0"}},
          open(m + "/opencode/package.json", "w"))
PY

export SSL_CERT_FILE="$PKI/ca.pem" ABX_INSTALL_NPM_REGISTRY="$REG" ABX_SERVER_INSTALL_ALLOW_HOSTS="localhost" \
	ABX_MANIFESTS_DIR="$T/m" ABX_INSTALL_LIBC=glibc
V=1.0.0-linux-x64
fetched() { grep -c "GET /$1/" "$T/reg.log" 2>/dev/null || true; }
# prep NAME: prepare opencode into a fresh tools directory $T/NAME
prep() { run "$BIN" prepare --only opencode --tools-dir "$T/$1"; }

ABX_INSTALL_AVX2=1 prep fast
expect "auto, AVX2: installed" 0 "opencode 1.0.0: installed"
check "auto, AVX2: the fast build" test -x "$T/fast/opencode/$V/node_modules/opencode-linux-x64/bin/opencode"
check "auto, AVX2: no other build downloaded" test "$(fetched opencode-linux-x64-baseline)$(fetched opencode-linux-x64-musl)" = 00
ABX_INSTALL_AVX2=1 run "$T/fast/bin/opencode" --version
expect "auto, AVX2: the link runs the platform binary" 0 "opencode 1.0.0"

ABX_INSTALL_AVX2=0 prep auto0
expect "auto, no AVX2: installed" 0 "opencode 1.0.0: installed"
check "auto, no AVX2: the baseline build, made executable" \
	test -x "$T/auto0/opencode/$V/node_modules/opencode-linux-x64-baseline/bin/opencode"
check "auto, no AVX2: the fast build not installed" test ! -e "$T/auto0/opencode/$V/node_modules/opencode-linux-x64"

echo '{"install": {"cpu_level": "baseline"}}' >"$T/base.json"
ABX_INSTALL_AVX2=1 ABX_SERVER_CONFIG=$T/base.json prep conf
expect "install.cpu_level baseline (file), AVX2: installed" 0 "opencode 1.0.0: installed"
check "install.cpu_level baseline: the baseline build" \
	test -x "$T/conf/opencode/$V/node_modules/opencode-linux-x64-baseline/bin/opencode"

before=$(wc -l <"$T/reg.log")
ABX_INSTALL_AVX2=0 ABX_INSTALL_CPU_LEVEL=v3 prep v3
expect "v3 without AVX2: refused, naming the fix" 1 "" \
	"install.image_unsupported: opencode cannot run on this CPU: install.cpu_level v3 chooses its build for CPUs with AVX2"
check "v3 without AVX2: nothing downloaded" test "$(wc -l <"$T/reg.log")" = "$before"
check "v3 without AVX2: nothing installed" test ! -e "$T/v3/opencode/$V"

ABX_INSTALL_AVX2=0 ABX_INSTALL_LIBC=musl prep bm
expect "a build the lockfile lacks: refused, naming it" 1 "" "has no opencode-linux-x64-baseline-musl for linux-x64"
check "a build the lockfile lacks: nothing downloaded" test "$(wc -l <"$T/reg.log")" = "$before"

ABX_INSTALL_AVX2=1 ABX_INSTALL_LIBC=musl prep musl
expect "musl, AVX2: installed" 0 "opencode 1.0.0: installed"
check "musl, AVX2: the musl build" test -x "$T/musl/opencode/$V/node_modules/opencode-linux-x64-musl/bin/opencode"

ABX_INSTALL_CPU_LEVEL=v4 prep bad
expect "a level that is none: config.invalid" 2 "" "is not a CPU level (auto, baseline, v3)"
run "$BIN" check-config -v
check "check-config names the key and its default" grep -Eq "install.cpu_level +auto +default" "$T/out"
