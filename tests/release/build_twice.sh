# make check-release: the release in $ABX_TEST_RELEASE_DIST (make release just
# wrote it) is complete and checkable, and a second `make release` from a
# copy of the same tree, in another directory with another build directory
# (B=obj), later and in another time zone, writes the same bytes.
. "$TOP/tests/lib.sh"

: "${ABX_TEST_RELEASE_DIST:?the dist directory make release wrote}"
: "${ABX_TEST_RELEASE_B:?the build directory of that release}"
D=$ABX_TEST_RELEASE_DIST
V=$(sed -n 's/^VERSION := //p' "$TOP/Makefile")
pins=$TOP/tools/deps.pins
files="agent-sandbox-server-$V-linux-x64 agent-sandbox-server-$V-linux-x64.cdx.json
agent-sandbox-server-$V-linux-arm64 agent-sandbox-server-$V-linux-arm64.cdx.json SHA256SUMS"

for f in $files; do
	check "dist has $f" test -s "$D/$f"
done
check "sha256sum -c SHA256SUMS passes" sh -c "cd '$D' && sha256sum --quiet -c SHA256SUMS"
check "SHA256SUMS names the binaries and the SBOMs" test "$(wc -l <"$D/SHA256SUMS")" -eq 4
mkdir "$T/tampered" && cp "$D"/* "$T/tampered/" && printf x >>"$T/tampered/agent-sandbox-server-$V-linux-arm64"
check "a changed binary fails the check" sh -c "cd '$T/tampered' && ! sha256sum --quiet -c SHA256SUMS 2>/dev/null"

for a in x64:X86-64 arm64:AArch64; do
	arch=${a%%:*} machine=${a#*:}
	b=$D/agent-sandbox-server-$V-linux-$arch
	check "linux-$arch: an $machine executable, static" \
		sh -c "readelf -h '$b' | grep -q 'Machine:.*$machine' && ! readelf -l '$b' | grep -q INTERP"
	check "linux-$arch: no build id" sh -c "! readelf -n '$b' | grep -q 'Build ID'"
	check "linux-$arch: no directory of the build in the bytes" sh -c "! grep -aqF '$TOP' '$b'"
	run python3 - "$b.cdx.json" "$b" "$pins" "linux-$arch" <<'EOF'
import hashlib, json, sys
doc, binary, pins, plat = sys.argv[1:]
s = json.load(open(doc))
assert s["bomFormat"] == "CycloneDX" and s["specVersion"] == "1.5", "not CycloneDX 1.5"
mc = s["metadata"]["component"]
want = hashlib.sha256(open(binary, "rb").read()).hexdigest()
assert mc["hashes"] == [{"alg": "SHA-256", "content": want}], "metadata.component hash is not the binary's"
assert {"name": "platform", "value": plat} in mc["properties"], "platform"
pin = {}
for line in open(pins):
    f = line.split()
    if len(f) == 4 and not line.startswith("#"):
        pin.setdefault(f[0], {"version": f[1], "files": {}})["files"][f[2]] = f[3]
comps = {c["name"]: c for c in s["components"]}
assert set(comps) == {"musl", "zlib", "bearssl", "libarchive"}, "components: %s" % sorted(comps)
for name, p in pin.items():
    c = comps[name]
    assert c["version"] == p["version"], "%s: version %s, pinned %s" % (name, c["version"], p["version"])
    got = {r["url"].rsplit("/", 1)[1].replace("%2B", "+").replace("%3A", ":"): r["hashes"][0]["content"]
           for r in c["externalReferences"]}
    assert got == p["files"], "%s: source digests %s, pinned %s" % (name, got, p["files"])
deps = s["dependencies"][0]
assert deps["ref"] == mc["bom-ref"] and len(deps["dependsOn"]) == 4, "dependencies"
print("sbom ok")
EOF
	expect "linux-$arch: the SBOM names the binary's digest and each pinned source package and file digest" 0 "sbom ok"
done
run "$D/agent-sandbox-server-$V-linux-x64" version
expect "the released x64 binary runs and names its platform" 0 "agent-sandbox-server $V (built "

# ---- tools/release.sh refuses what it cannot describe truly ------------------
for a in x64 arm64; do
	mkdir -p "$T/b/$a/gen"
	cp "$D/agent-sandbox-server-$V-linux-$a" "$T/b/$a/agent-sandbox-server"
	printf '#define DEP_MUSL "%s"\n' "$(awk '$1=="musl"{print $2; exit}' "$pins")" >"$T/b/$a/gen/deps_version.h"
done
run "$TOP/tools/release.sh" "$T/d1" "$V" "$T/b/x64/agent-sandbox-server" "$T/b/arm64/agent-sandbox-server"
expect "release.sh from the two binaries" 0
check "... writes the same SHA256SUMS" cmp "$T/d1/SHA256SUMS" "$D/SHA256SUMS"
run "$TOP/tools/release.sh" "$T/d2" "$V" "$T/b/arm64/agent-sandbox-server" "$T/b/x64/agent-sandbox-server"
expect "the binaries swapped are refused" 1 "" "not an X86-64 executable"
check "... and nothing is written" test ! -e "$T/d2/SHA256SUMS" -a ! -e "$T/d2/agent-sandbox-server-$V-linux-x64"
printf '#define DEP_MUSL "1.2.4-1"\n' >"$T/b/x64/gen/deps_version.h"
run "$TOP/tools/release.sh" "$T/d3" "$V" "$T/b/x64/agent-sandbox-server" "$T/b/arm64/agent-sandbox-server"
expect "an x64 build against another musl-dev is refused" 1 "" "links musl 1.2.4-1, not the pinned"
check "... and nothing is written" test ! -e "$T/d3/SHA256SUMS" -a ! -e "$T/d3/agent-sandbox-server-$V-linux-x64"

# ---- the second build --------------------------------------------------------
C=$T/another/checkout
mkdir -p "$C"
# the working tree's files that git knows or would (not build/ or dist/)
(cd "$TOP" && git ls-files -z -co --exclude-standard | xargs -0 sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done' sh |
	tar --null -T - -cf -) | tar -C "$C" -xf - ||
	{ not_ok "copy the tree" "git ls-files | tar failed"; exit 1; }
# The pinned source files, so the copy builds without the network; it
# verifies them against the pins like any fresh build.
for d in deps arm64/deps; do
	mkdir -p "$C/obj/$d/src"
	for f in $(awk '!/^#/ && NF==4 {print $3}' "$pins"); do
		[ -f "$ABX_TEST_RELEASE_B/$d/src/$f" ] && cp "$ABX_TEST_RELEASE_B/$d/src/$f" "$C/obj/$d/src/"
	done
done
sde=${SOURCE_DATE_EPOCH:-$(git -C "$TOP" log -1 --format=%ct)}
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL SOURCE_DATE_EPOCH="$sde" TZ=Pacific/Kiritimati \
	nice make -C "$C" release B=obj >"$T/second.log" 2>&1
RC=$?
n="the second make release (another directory, B=obj, TZ=Pacific/Kiritimati) succeeds"
if [ $RC -eq 0 ]; then ok "$n"; else not_ok "$n" "exit $RC: $(tail -3 "$T/second.log" | tr '\n' ' ')"; fi
check "it built from the pinned sources again (musl for arm64 included)" \
	sh -c "grep -q 'deps: building musl' '$T/second.log' && grep -q 'deps: building libarchive' '$T/second.log'"
for f in $files; do
	check "same bytes: $f" cmp "$D/$f" "$C/dist/$f"
done
