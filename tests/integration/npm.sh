# npm-lock installs against a fake npm registry over HTTPS (tarballs built
# here): scoped packages, nested node_modules, npm: aliases, os/cpu/libc
# filtering, optional skip, no install scripts, a top directory that is not
# package/, hostile lockfiles refused, integrity mismatch, offline and
# mirrors, fetch --platform all, and the shim: node-runtime's node for a
# JavaScript entry with no node on PATH, arguments, exit codes and signals.
. "$TOP/tests/lib.sh"

make_pki
if ! command -v musl-gcc >/dev/null 2>&1; then
	not_ok "musl-gcc" "needed to build the fake node"
	exit 1
fi
export SSL_CERT_FILE="$PKI/ca.pem"
export ABX_INSTALL_LIBC=glibc
mkdir -p "$T/reg" "$T/m" "$T/nobin"
musl-gcc -static -Os -o "$T/fakenode" "$FIXTURES/fakenode.c" || { not_ok "fake node" "musl-gcc failed"; exit 1; }

start_npmreg reg "$T/reg" "$PKI"
P=$REG_PORT
REG="https://localhost:$P"
SENTINEL=$T/sentinel

# sources OUT PREFIX [NAME@VERSION=EXACT ...]: every npm package component of
# the CycloneDX document OUT has the property agent-sandbox:source, starting
# with PREFIX unless named (then exactly EXACT), with no query string.
sources() {
	python3 - "$@" <<'PYEOF'
import json, sys
out, prefix, exact = sys.argv[1], sys.argv[2], dict(a.split("=", 1) for a in sys.argv[3:])
comps = [c for c in json.load(open(out))["components"] if c.get("purl", "").startswith("pkg:npm/")]
bad = []
for c in comps:
    src = [p["value"] for p in c.get("properties", []) if p["name"] == "agent-sandbox:source"]
    key = "%s@%s" % (c["name"], c["version"])
    want = exact.get(key)
    if len(src) != 1 or "?" in src[0] or (src[0] != want if want else not src[0].startswith(prefix)):
        bad.append((key, src))
if not comps or bad:
    sys.exit("%d npm components; wrong sources: %s" % (len(comps), bad))
PYEOF
}

FIXTURES=$FIXTURES T=$T REG=$REG SENTINEL=$SENTINEL python3 - <<'EOF'
import hashlib, io, json, os, sys, tarfile
sys.path.insert(0, os.environ["FIXTURES"])
import npmpack as P
T, REG, root, m = os.environ["T"], os.environ["REG"], os.environ["T"] + "/reg", os.environ["T"] + "/m"
script = {"preinstall": "touch %s" % os.environ["SENTINEL"], "install": "touch %s" % os.environ["SENTINEL"],
          "postinstall": "touch %s" % os.environ["SENTINEL"]}

# node-runtime: a tarball manifest whose node is the fake one
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    data = open(T + "/fakenode", "rb").read()
    ti = tarfile.TarInfo("node-v99/bin/node"); ti.size = len(data); ti.mode = 0o755
    t.addfile(ti, io.BytesIO(data))
os.makedirs(root + "/node/-", exist_ok=True)
open(root + "/node/-/node-99.0.0.tgz", "wb").write(buf.getvalue())
sha = hashlib.sha256(buf.getvalue()).hexdigest()
arts = {p: {"url": REG + "/node/-/node-99.0.0.tgz", "sha256": sha} for p in ("linux-x64", "linux-arm64")}
json.dump({"schema": 1, "name": "node-runtime", "binary": "node", "version": "99.0.0",
           "source": {"type": "tarball", "bin": "bin/node", "strip_components": 1, "platforms": arts},
           "hosts": ["localhost"], "verify": {"argv": ["{bin}", "--version"], "expect": "v99"},
           "path": {"argv": ["{bin}", "--version"], "min": "99.0.0"},
           "platforms": ["linux-x64", "linux-arm64"]}, open(m + "/node-runtime.json", "w"), indent=2)

# the tool: scoped, an install script, a JS bin, nested and aliased packages
P.pack(root, "@t/app", "1.0.0", {"cli.js": b"#!/usr/bin/env node\nconsole.log('app')\n"},
       {"bin": {"app": "cli.js"}, "scripts": script})
P.pack(root, "dep", "1.0.0", {"index.js": b"v1\n"}, top="notpackage")          # top dir not package/
P.pack(root, "dep", "2.0.0", {"index.js": b"v2\n"}, {"scripts": script})
P.pack(root, "@t/app", "1.0.0-linux-x64", {"bin/app": (b"x64\n", 0o755)}, {"os": ["linux"], "cpu": ["x64"]})
P.pack(root, "@t/app", "1.0.0-linux-arm64", {"bin/app": (b"arm64\n", 0o755)}, {"os": ["linux"], "cpu": ["arm64"]})
P.pack(root, "glibc-only", "1.0.0", {"i.js": b""}, {"libc": ["glibc"]})
P.pack(root, "musl-only", "1.0.0", {"i.js": b""}, {"libc": ["musl"]})
P.pack(root, "darwin-only", "1.0.0", {"i.js": b""}, {"os": ["darwin"]})
P.pack(root, "x", "1.0.0", {"i.js": b""})
E = lambda *a, **k: P.entry(root, REG, *a, **k)
good = {
    "node_modules/@t/app": E("@t/app", "1.0.0", bin={"app": "cli.js"}, hasInstallScript=True),
    "node_modules/@t/app/node_modules/dep": E("dep", "2.0.0", hasInstallScript=True),
    "node_modules/dep": E("dep", "1.0.0"),
    "node_modules/@t/app-linux-x64": E("@t/app", "1.0.0-linux-x64", name="@t/app", os=["linux"], cpu=["x64"], optional=True),
    "node_modules/@t/app-linux-arm64": E("@t/app", "1.0.0-linux-arm64", name="@t/app", os=["linux"], cpu=["arm64"], optional=True),
    "node_modules/glibc-only": E("glibc-only", "1.0.0", libc=["glibc"], optional=True),
    "node_modules/musl-only": E("musl-only", "1.0.0", libc=["musl"], optional=True),
    "node_modules/darwin-only": E("darwin-only", "1.0.0", os=["darwin"], optional=True),
    "node_modules/darwin-only/node_modules/x": E("x", "1.0.0", optional=True),
    "node_modules/devdep": {"version": "1.0.0", "dev": True},
}
def tool(name, entries, hosts=("localhost",), requires=("node-runtime",), bin_="node_modules/.bin/app"):
    P.write_manifest(m, name, "@t/app", list(hosts), requires=list(requires), bin_=bin_, binary=name)
    P.write_lock(m + "/%s/package-lock.json" % name, "@t/app", entries)
tool("app", good)

# mirror: the lockfile names a host that does not exist; the mirror serves it
mir = {k: dict(v) for k, v in good.items()}
for v in mir.values():
    if "resolved" in v:
        v["resolved"] = v["resolved"].replace(REG, "https://registry.example")
tool("mir", mir, hosts=("registry.example",))

# hostile lockfiles
def variant(name, key, **change):
    d = {k: dict(v) for k, v in good.items()}
    for f, val in change.items():
        if val is None:
            d[key].pop(f, None)
        else:
            d[key][f] = val
    tool(name, d)
variant("badhost", "node_modules/dep", resolved="https://evil.example/dep/-/dep-1.0.0.tgz")
variant("noint", "node_modules/dep", integrity=None)
variant("sha1only", "node_modules/dep", integrity="sha1-" + __import__("base64").b64encode(b"0" * 20).decode())
variant("badbin", "node_modules/@t/app", bin={"app": "../../../../etc/passwd"})
variant("badint", "node_modules/dep", integrity=P.sri(b"not the tarball"))
d = {k: dict(v) for k, v in good.items()}
d["node_modules/@t/app/node_modules/../../../escape"] = d.pop("node_modules/@t/app/node_modules/dep")
tool("badkey", d)
d = {k: dict(v) for k, v in good.items()}
d["node_modules/linked"] = {"resolved": "../linked", "link": True}
tool("linked", d)

# a tarball larger than a worker keeps in memory (1 MiB): incompressible
blob = os.urandom(1536 << 10)
P.pack(root, "big", "1.0.0", {"blob.bin": blob})
open(T + "/big.sha256", "w").write(hashlib.sha256(blob).hexdigest())
tool("big", {"node_modules/@t/app": good["node_modules/@t/app"], "node_modules/big": E("big", "1.0.0")})
EOF
[ -f "$T/m/app.json" ] || { not_ok "fixtures" "the generator failed"; exit 1; }

export ABX_MANIFESTS_DIR="$T/m"
mkdir -m 700 "$T/tools"
export ABX_TOOLS_DIR="$T/tools"

run "$BIN" prepare --keep-cache --only app
expect "install app (and node-runtime) from the fake registry" 0
TREE=$T/tools/app/1.0.0-linux-x64
NM=$TREE/node_modules
check "scoped package extracted" test -f "$NM/@t/app/cli.js"
check "bin link made" test "$(readlink "$NM/.bin/app")" = "../@t/app/cli.js"
check "bin target made executable" test -x "$NM/@t/app/cli.js"
check "nested node_modules" grep -q v2 "$NM/@t/app/node_modules/dep/index.js"
check "top directory not package/ stripped" grep -q v1 "$NM/dep/index.js"
check "npm: alias for this cpu installed" test -x "$NM/@t/app-linux-x64/bin/app"
check "alias for another cpu skipped" test ! -e "$NM/@t/app-linux-arm64"
check "libc: glibc package installed" test -d "$NM/glibc-only"
check "libc: musl package skipped" test ! -e "$NM/musl-only"
check "os: optional darwin package and its subtree skipped" test ! -e "$NM/darwin-only"
check "dev package not installed" test ! -e "$NM/devdep"
check "no install script ran" test ! -e "$SENTINEL"
check "tarballs in the sha256 cache" test "$(ls "$T/tools/.cache" | grep -c '^[0-9a-f]\{64\}$')" -eq 6
check "integrity aliases beside them, one layout (5 packages apply)" test "$(ls "$T/tools/.cache" | grep -c '^sha512-[0-9a-f]\{128\}$')" -eq 5
TGZ=$(grep -c 'GET /[^ ]*\.tgz' "$T/reg.log")
CONNS=$(grep '\.tgz' "$T/reg.log" | cut -d' ' -f1 | sort -u | wc -l)
check "one download per package (5 + node)" test "$TGZ" -eq 6
check "parallel downloads on at most 8 keep-alive connections (saw $CONNS)" test "$CONNS" -le 9

if FL=$(lsattr -d "$T/tools/.staging" 2>/dev/null); then
	check "the staging root is a top directory (chattr +T: staged trees spread over the disk)" \
		sh -c "echo '${FL%% *}' | grep -q T"
else
	skip "the staging root is a top directory" "no ext2/3/4 attributes here"
fi
run "$BIN" verify app
expect "verify: the tree digest recorded from extraction-time hashes matches a re-hash of every file" 0 "OK app"
check "marker: one SBOM row per npm package" test "$(grep -o '"purl":"pkg:npm/' "$T/tools/app/.installed.json" | wc -l)" -eq 5
check "marker: the alias row names the real package" grep -q 'pkg:npm/%40t/app@1.0.0-linux-x64' "$T/tools/app/.installed.json"
run "$BIN" verify --sbom app
check "verify --sbom: unique bom-refs for npm packages" \
	python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['components']; r=[x['bom-ref'] for x in c]; sys.exit(not (len(c) >= 5 and len(r) == len(set(r))))" "$T/out"
check "verify --sbom: every npm package names the registry URL it was downloaded from" sources "$T/out" "$REG/"

# ---- the shim: node-runtime's node, no node on PATH ------------------------
check "shim link published" test "$(readlink "$T/tools/bin/app")" = "$(readlink -f "$BIN")"
run timeout 30 env PATH="$T/nobin" "$T/tools/bin/app" --exit=7 a "b c"
expect "exit status passes through the shim" 7 "argv[0]=$T/tools/node-runtime/99.0.0-linux-x64/bin/node"
check "the script is argv[1], by absolute path" grep -qx "argv\[1\]=$NM/.bin/app" "$T/out"
check "arguments pass unchanged" grep -qx 'argv\[4\]=b c' "$T/out"
timeout 30 env PATH="$T/nobin" "$T/tools/bin/app" --wait >"$T/wait.out" 2>&1 &
WP=$!
if wait_for_line "$T/wait.out" '^waiting' 10; then
	kill -TERM $WP
	wait $WP
	WRC=$?
	check "a signal reaches the tool through the shim (exit 143)" test "$WRC" -eq 143
else
	kill $WP 2>/dev/null
	not_ok "a signal reaches the tool through the shim" "never started: $(cat "$T/wait.out")"
fi

# ---- refusals --------------------------------------------------------------
for t in badhost:"host evil.example is not in hosts" noint:"integrity: missing" sha1only:"sha1 only" \
	badbin:"leaves the package" badkey:"not a node_modules/<name> path" linked:"link entries"; do
	name=${t%%:*} want=${t#*:}
	run "$BIN" prepare --keep-cache --only "$name"
	if [ "$RC" -eq 0 ] || ! grep -q "install.manifest_invalid" "$T/err" || ! grep -qF -- "$want" "$T/err"; then
		not_ok "$name refused" "exit $RC: $(head -c 300 "$T/err")"
	else
		ok "$name refused ($want)"
	fi
	check "$name: nothing published" test ! -e "$T/tools/$name/1.0.0-linux-x64"
done
run "$BIN" prepare --keep-cache --only badint
expect "integrity mismatch refused" 1 "" "install.checksum_mismatch"
check "mismatch: nothing published" test ! -e "$T/tools/badint/1.0.0-linux-x64"
check "mismatch: nothing left in staging" test -z "$(ls "$T/tools/.staging")"

# ---- offline, mirror, fetch --------------------------------------------------
mkdir -m 700 "$T/t2"
: >"$T/reg.log"
# (--force: verify.argv runs and is timed, the pass the cache recorded
# for this tree notwithstanding)
run env ABX_TOOLS_DIR="$T/t2" ABX_SERVER_INSTALL_MODE=offline "$BIN" prepare --keep-cache -v --force --only app --cache "$T/tools/.cache"
expect "offline with the cache" 0
# prepare -v: an npm-lock source's packages are one phase, npm
for ph in probe npm verify.argv "tree listing" publish/sync total; do
	check "prepare -v times phase '$ph'" grep -Eq "^agent-sandbox-server: timing app [^:]*:.* $ph [0-9]+\.[0-9]{3} ms" "$T/err"
done
check "prepare -v: nothing extracted or downloaded, so no CPU to say" sh -c "! grep 'timing app ' '$T/err' | grep -q '; cpu:'"
check "prepare -v: no tarball phases for npm-lock" sh -c "! grep 'timing app ' '$T/err' | grep -Eq ' (extract|download\+digest) [0-9]'"
check "offline: no request reached the registry" test ! -s "$T/reg.log"
check "a new tools directory: every package placed from the cache's extracted trees, and said" \
	grep -q "app 1.0.0: 5 of 5 packages placed from the extracted trees in $T/tools/.cache/trees" "$T/err"
check "... each kept tree proved unchanged by its stat proof, none hashed" \
	grep -q "app 1.0.0: 5 of 5 packages placed from the extracted trees in $T/tools/.cache/trees (5 proved unchanged by their stat proofs and copied, 0 hashed against their sealed listings)" "$T/err"
check "... the same files as the extraction" diff -r "$T/tools/app/1.0.0-linux-x64" "$T/t2/app/1.0.0-linux-x64"
run "$BIN" verify app --tools-dir "$T/t2"
expect "... and the placed tree verifies" 0 "OK app"
run "$BIN" verify --sbom app --tools-dir "$T/t2"
check "verify --sbom: a package placed from a kept tree names the tree (not the blob it was made from)" \
	sources "$T/out" "tree:$T/tools/.cache/trees/sha512-"
# a damaged package tree: said, discarded, that package extracted from its tarball
cp -R "$T/tools/.cache" "$T/cd"
DEPT=$(for d in "$T/cd/trees/"sha512-*; do grep -q '^f [0-7]* [0-9]* [0-9a-f]* index.js$' "$d/manifest" && grep -qx v1 "$d/tree/index.js" 2>/dev/null && echo "$d"; done | head -1)
echo v666 >"$DEPT/tree/index.js"
sleep 0.1 # past the clock's tick: the copied trees' stat proofs can be made
mkdir -m 700 "$T/t2d"
run env ABX_TOOLS_DIR="$T/t2d" ABX_SERVER_INSTALL_MODE=offline "$BIN" prepare --keep-cache --only app --cache "$T/cd"
expect "a damaged package tree: installed all the same (offline, from the tarball)" 0
check "... the damage said on stderr" grep -q "the extracted tree of dep@1.0.0 ($DEPT) is damaged: .*index.js" "$T/err"
check "... 4 of 5 placed, the damaged one extracted and kept again" sh -c \
	"grep -q 'app 1.0.0: 4 of 5 packages placed' '$T/err' && grep -q 'app 1.0.0: kept the extracted trees of 1 packages' '$T/err'"
check "... a copied cache's trees (other inodes) hashed, and given stat proofs for next time" \
	grep -q "app 1.0.0: 4 of 5 packages placed from the extracted trees in $T/cd/trees (0 proved unchanged by their stat proofs and copied, 4 hashed against their sealed listings and given a stat proof for the next placement)" "$T/err"
check "... its file is the tarball's" grep -qx v1 "$T/t2d/app/1.0.0-linux-x64/node_modules/dep/index.js"
check "... the extraction's copies became the kept tree: none left beside it" \
	sh -c "! ls -a '$T/cd' '$T/tools/.cache' | grep -q tmp-tree-copies"
mkdir -m 700 "$T/t3"
run env ABX_TOOLS_DIR="$T/t3" ABX_SERVER_INSTALL_MODE=offline "$BIN" prepare --keep-cache --only app
expect "offline without the cache" 1 "" "install.disabled"
# a cache that cannot be written (an image's read-only layer) serves what it
# holds; a directory mirror laid out like the cache serves npm
# packages as it serves tarballs
cp -R "$T/tools/.cache" "$T/cro"
rm -rf "$T/cro/trees"
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
	mkdir -m 700 "$T/t2r"
	run unshare -m sh -c "mount --make-rprivate / && mount --bind '$T/cro' '$T/cro' && mount -o bind,remount,ro '$T/cro' &&
		ABX_TOOLS_DIR='$T/t2r' ABX_SERVER_INSTALL_MODE=offline exec '$BIN' prepare --only app --cache '$T/cro'"
	expect "offline from a read-only cache: its packages are served" 0 "app 1.0.0: installed"
	check "... no request reached the registry" test ! -s "$T/reg.log"
else
	skip "offline from a read-only cache" "needs root and unshare -m"
fi
mkdir -m 700 "$T/t2m"
run env ABX_TOOLS_DIR="$T/t2m" ABX_SERVER_INSTALL_MODE=offline ABX_INSTALL_MIRROR="$T/cro" "$BIN" prepare --only app
expect "offline from a directory mirror: npm packages are served from it" 0 "app 1.0.0: installed"
check "... no request reached the registry" test ! -s "$T/reg.log"
run "$BIN" verify app --tools-dir "$T/t2m"
expect "... and the tree verifies" 0 "OK app"

mkdir -m 700 "$T/t4"
run env ABX_TOOLS_DIR="$T/t4" ABX_INSTALL_NPM_REGISTRY="$REG/mirror" ABX_SERVER_INSTALL_ALLOW_HOSTS="${REG#https://}" \
	"$BIN" prepare --keep-cache --only mir
expect "the npm mirror rewrites the registry origin" 0
check "downloads went to the mirror" grep -q 'GET /mirror/@t/app/-/app-1.0.0.tgz' "$T/reg.log"
run "$BIN" verify --sbom mir --tools-dir "$T/t4"
check "verify --sbom: through the npm mirror, the mirror's URL (not the lockfile's resolved)" \
	sources "$T/out" "$REG/mirror/"
# an npm mirror that cannot be reached is named as the mirror, with a fix other
# than setting the key that fails; --dry-run names the mirror it downloads from
run env ABX_TOOLS_DIR="$T/t4u" ABX_INSTALL_NPM_REGISTRY="https://127.0.0.1:1/npm" ABX_SERVER_INSTALL_ALLOW_HOSTS=127.0.0.1:1 \
	"$BIN" prepare --only app
expect "an unreachable npm mirror: install.network_unreachable naming the mirror" 1 "" \
	"app: the npm mirror (install.mirrors.npm, ABX_INSTALL_NPM_REGISTRY): cannot connect to 127.0.0.1:1: Connection refused"
check "... and its fix is not to set the failing key" sh -c "! grep -q 'set install.mirrors.npm' '$T/err'"
run env ABX_TOOLS_DIR="$T/t4u" ABX_INSTALL_NPM_REGISTRY="https://127.0.0.1:1/npm" ABX_SERVER_INSTALL_ALLOW_HOSTS=127.0.0.1:1 \
	"$BIN" prepare --dry-run --only app
expect "prepare --dry-run names the npm mirror, not the registry" 0 "127.0.0.1:1 (mirror)"
# a mirror's host must be listed in install.allow_hosts
mkdir -m 700 "$T/t4b"
run env ABX_TOOLS_DIR="$T/t4b" ABX_INSTALL_NPM_REGISTRY="$REG/mirror" "$BIN" prepare --keep-cache --only mir
expect "an npm mirror whose host is not in install.allow_hosts is refused" 2 "" \
	"config.invalid: install.mirrors.npm: the mirror's host ${REG#https://} is not in install.allow_hosts; add it there"
check "... naming the variable too" grep -q "ABX_SERVER_INSTALL_ALLOW_HOSTS=${REG#https://}" "$T/err"
check "... and nothing is installed" test -z "$(ls -A "$T/t4b")"

run "$BIN" fetch --only app --cache "$T/fc1"
expect "fetch for this platform counts what it skipped, not 'the rest cached'" 0 \
	"npm packages: 5 downloaded, 0 cached, 4 skipped (for another os, cpu or C library than $(uname -m | sed 's/x86_64/linux-x64/;s/aarch64/linux-arm64/'))"
run "$BIN" fetch --only app --platform all --cache "$T/fc"
expect "fetch --platform all for an npm tool" 0
check "... says what it skipped in a sentence, not 'not for all'" \
	grep -q "npm packages: [0-9]* downloaded, [0-9]* cached, [0-9]* skipped (for another os, cpu or C library than linux-x64 and linux-arm64)" "$T/out"
check "every cpu's and libc's linux package is cached" test "$(ls "$T/fc" | grep -c '^sha512-')" -eq 7
check "fetch keeps no extracted trees (nothing was extracted)" test ! -e "$T/fc/trees"
mkdir -m 700 "$T/t4c"
cp -R "$T/tools/.cache" "$T/ce"
rm -rf "$T/ce/trees"
run env ABX_TOOLS_DIR="$T/t4c" ABX_SERVER_INSTALL_MODE=offline "$BIN" prepare --only app --cache "$T/ce"
expect "offline from a cache without extracted trees" 0
run "$BIN" verify --sbom app --tools-dir "$T/t4c"
check "verify --sbom: offline from the cache, every npm package names its cache file" sources "$T/out" "cache:$T/ce/"

# ---- large tarballs and damaged cache entries ------------------------------
run "$BIN" prepare --keep-cache --only big
expect "a tarball over the in-memory limit installs (streamed through its cache file)" 0
BIGW=$(cat "$T/big.sha256")
check "the large package's file is intact" \
	test "$(sha256sum <"$T/tools/big/1.0.0-linux-x64/node_modules/big/blob.bin" | cut -d' ' -f1)" = "$BIGW"
mkdir -m 700 "$T/t7"
run env ABX_TOOLS_DIR="$T/t7" ABX_SERVER_INSTALL_MODE=offline "$BIN" prepare --keep-cache --only big --cache "$T/tools/.cache"
expect "the large tarball installs again from the cache, offline" 0
check "and its file is intact" \
	test "$(sha256sum <"$T/t7/big/1.0.0-linux-x64/node_modules/big/blob.bin" | cut -d' ' -f1)" = "$BIGW"
cp -R "$T/tools/.cache" "$T/cc"
rm -rf "$T/cc/trees" # the tarball itself is what is damaged here
DEPSHA=$(sha256sum <"$T/reg/dep/-/dep-1.0.0.tgz" | cut -d' ' -f1)
printf 'x' | dd of="$T/cc/$DEPSHA" bs=1 seek=20 conv=notrunc 2>/dev/null
: >"$T/reg.log"
mkdir -m 700 "$T/t8"
run env ABX_TOOLS_DIR="$T/t8" "$BIN" prepare --keep-cache --only app --cache "$T/cc"
expect "a damaged cache entry (same size) is a miss, not an install" 0
check "the damaged package was downloaded again, and only it" \
	test "$(grep -c 'GET .*\.tgz' "$T/reg.log")" -eq 1 -a "$(grep -c 'GET /dep/-/dep-1.0.0.tgz' "$T/reg.log")" -eq 1
check "and installed from the right bytes" grep -qx v1 "$T/t8/app/1.0.0-linux-x64/node_modules/dep/index.js"
run "$BIN" verify --sbom app --tools-dir "$T/t8"
check "verify --sbom: cached packages name their cache file, the one downloaded again its URL" \
	sources "$T/out" "cache:$T/cc/" "dep@1.0.0=$REG/dep/-/dep-1.0.0.tgz"

# ---- lazy install on first exec through the shim ---------------------------
mkdir -m 700 "$T/t5" "$T/t5/bin"
ln -s "$BIN" "$T/t5/bin/app"
run timeout 60 env ABX_TOOLS_DIR="$T/t5" PATH="$T/nobin" "$T/t5/bin/app" --exit=0
expect "lazy: the first exec installs and runs" 0 "argv[1]=$T/t5/app/1.0.0-linux-x64/node_modules/.bin/app"
mkdir -m 700 "$T/t6" "$T/t6/bin"
ln -s "$BIN" "$T/t6/bin/app"
run timeout 30 env ABX_TOOLS_DIR="$T/t6" ABX_SERVER_INSTALL_MODE=build PATH="$T/nobin" "$T/t6/bin/app" --exit=0
expect "build mode: the shim answers install.required" 1 "" "install.required"

# ---- progress: one model for npm installs -----------------
# A registry that sends big's 1.5 MiB tarball 64 KiB per 60 ms, as the npm
# mirror: the download lasts ~1.5 s, long enough to watch.
start_npmreg slow "$T/reg" "$PKI" --slow-ms 60
SLOW=localhost:$REG_PORT
cp -R "$T/m" "$T/m9"
python3 -c 'import json, sys
m = json.load(open(sys.argv[1])); m["run"] = ["{bin}", "{prompt}"]; json.dump(m, open(sys.argv[1], "w"))' "$T/m9/big.json"
export ABX_INSTALL_NPM_REGISTRY="https://$SLOW" ABX_SERVER_INSTALL_ALLOW_HOSTS="$SLOW"

mkdir -m 700 "$T/t10"
run env ABX_TOOLS_DIR="$T/t10" "$BIN" prepare --keep-cache --only big
expect "progress: prepare installs big through the slow mirror" 0
check "progress: the non-terminal line names the total and percent (not 'big: fetch 1.5 MiB')" \
	grep -Eq '^big: [a-z]+: [0-9.]+ (KiB|MiB) of [0-9.]+ (KiB|MiB) \(100%\), [0-9.]+ [KMG]?i?B/s' "$T/err"

# on a terminal: a bar redrawn in place with total, percent and rate
mkdir -m 700 "$T/t11"
script -qec "env ABX_TOOLS_DIR='$T/t11' '$BIN' prepare --keep-cache --only big" /dev/null >"$T/tty.out" 2>&1
check "progress: on a terminal a bar with total, percent and rate" \
	grep -Eq 'big: fetch \[#+\.*\] [0-9.]+ (KiB|MiB) / [0-9.]+ (KiB|MiB) +[0-9]+% +[0-9.]+ [KMG]?i?B/s' "$T/tty.out"
check "progress: the bar reaches 100%" grep -Eq '\[#{24}\] [0-9.]+ MiB / [0-9.]+ MiB +100%' "$T/tty.out"

mkdir -m 700 "$T/t9" "$T/st9"
run env ABX_TOOLS_DIR="$T/t9" ABX_MANIFESTS_DIR="$T/m9" "$BIN" prepare --keep-cache --only node-runtime
expect "progress: node-runtime prepared for serve" 0
bg env ABX_MANIFESTS_DIR="$T/m9" ABX_SERVER_TOKEN=tok ABX_SERVER_AGENTS=big ABX_SERVER_INSTALL_MODE=lazy \
	ABX_SERVER_INSTALL_WAIT=0 "$BIN" serve --host 127.0.0.1 --port 0 --tools-dir "$T/t9" --state-dir "$T/st9" \
	>"$T/serve.out" 2>"$T/serve.err"
if wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10; then
	run timeout 60 python3 - "http://127.0.0.1:$(head -1 "$T/serve.out")" <<'EOF'
import json, sys, time, urllib.error, urllib.request
U = sys.argv[1]
def call(path, method="GET"):
    rq = urllib.request.Request(U + path, method=method, data=b"{}" if method == "POST" else None,
                                headers={"X-Access-Token": "tok", "Content-Type": "application/json"})
    try:
        return json.load(urllib.request.urlopen(rq, timeout=10))
    except urllib.error.HTTPError as e:
        return json.load(e)
first = call("/v1/agents/runtimes/big/install", "POST")
job = first.get("id") if first.get("object") == "install.job" else first.get("job")
if not job:
    sys.exit("no job in the answer: %s" % first)
bad, moving, final = [], 0, None
for _ in range(600):
    rt, j = call("/v1/agents/runtimes/big"), call("/v1/install/jobs/" + job)
    for what, p in (("runtime", rt.get("progress")), ("job", j)):
        if not p or "bytes" not in p:
            continue
        if p["bytes"] > p["total"] or p["packages_done"] > p["packages_total"]:
            bad.append("%s %s" % (what, p))
        if 0 < p["bytes"] < p["total"]:
            moving += 1
    if j["status"] != "pending":
        final = j
        break
    time.sleep(0.05)
print("moving=%d" % moving)
print("final=%s" % json.dumps(final))
if bad:
    sys.exit("bytes > total or done > total: %s" % bad[:3])
if final is None or final["status"] != "succeeded":
    sys.exit("the job did not succeed: %s" % final)
if not (final["bytes"] == final["total"] > (1 << 20) and final["packages_done"] == final["packages_total"] == 2):
    sys.exit("after success: %s" % final)
if moving == 0:
    sys.exit("never saw 0 < bytes < total during the download")
rt = call("/v1/agents/runtimes/big")
if rt.get("state") != "ready":
    sys.exit("not ready after the job: %s" % rt)
print("ok")
EOF
	expect "progress: during the install bytes <= total and done <= count; after success bytes == total, 2/2 packages, kept in the job" 0 "ok"
else
	not_ok "progress: serve starts" "$(head -3 "$T/serve.err")"
fi
unset ABX_INSTALL_NPM_REGISTRY ABX_SERVER_INSTALL_ALLOW_HOSTS

# An image build's layer: prepare without --keep-cache leaves the
# trees and no second copy: no package tarball, no extracted package tree.
run env ABX_TOOLS_DIR="$T/tslim" "$BIN" prepare --only app
expect "image: prepare installs app (and node-runtime)" 0 "app 1.0.0: installed"
check "image: no .cache left in the tools directory" test ! -e "$T/tslim/.cache"
_tree=$(du -skc "$T/tslim/app/1.0.0-linux-x64" "$T/tslim/node-runtime"/*-linux-x64 | tail -1 | cut -f1)
_all=$(du -sk "$T/tslim" | cut -f1)
# beside the trees: markers, bin links, lock files (a few KiB each here,
# nothing next to the hundreds of MiB of a real agent's tree)
check "image: the tools directory ($_all KiB) is at most 1.05 x its trees ($_tree KiB) + 64 KiB" \
	test $((_all * 100)) -le $((_tree * 105 + 6400))
run env ABX_TOOLS_DIR="$T/tslim" "$BIN" prepare --only app
expect "image: a second prepare finds it ready" 0 "app 1.0.0: ready"
check "image: ... and makes no .cache" test ! -e "$T/tslim/.cache"
