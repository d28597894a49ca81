# lock: tarball pins written in place (one line per pin), --version, --check,
# hosts enforced; npm-lock lockfiles produced by the real npm against a fake
# registry over HTTPS, validated by the strict loader, refused when broken.
. "$TOP/tests/lib.sh"

make_pki
export SSL_CERT_FILE="$PKI/ca.pem"
export HOME="$T/home"
mkdir -p "$HOME" "$T/reg" "$T/m"

start_npmreg reg "$T/reg" "$PKI"
P=$REG_PORT
R="localhost:$P"

# ---- tarball sources ------------------------------------------------------
mkdir -p "$T/reg/tb/-"
for v in 1.0.0 2.0.0; do
	for a in x64 arm64; do
		head -c 3000 /dev/urandom >"$T/reg/tb/-/t-$v-$a.tgz"
	done
done
cat >"$T/m/t.json" <<EOF
{
  "schema": 1,
  "name": "t",
  "binary": "t",
  "version": "1.0.0",
  "source": {
    "type": "tarball",
    "bin": "t",
    "platforms": {
      "linux-x64": {
        "url": "https://$R/tb/-/t-1.0.0-x64.tgz",
        "sha256": "0000000000000000000000000000000000000000000000000000000000000000"
      },
      "linux-arm64": {
        "url": "https://$R/tb/-/t-1.0.0-arm64.tgz"
      }
    }
  },
  "hosts": ["localhost"],
  "verify": {"argv": ["{bin}", "--version"], "expect": "1.0.0"}
}
EOF
cp "$T/m/t.json" "$T/t.orig"
sha() { sha256sum "$1" | cut -d' ' -f1; }

run "$BIN" lock t --manifests "$T/m" --check
expect "tarball --check: a wrong pin is stale" 1 "stale pin"
check "tarball --check changes nothing" cmp -s "$T/m/t.json" "$T/t.orig"

run "$BIN" lock t --manifests "$T/m"
expect "tarball: pins written" 0 "2 changes written"
check "... an artifact that is no archive: said, no unpacked_size" sh -c "grep -q 'linux-x64: unpacked_size not recorded' '$T/err' && ! grep -q unpacked_size '$T/m/t.json'"
check "x64 pin is the file's sha256" grep -q "\"sha256\": \"$(sha "$T/reg/tb/-/t-1.0.0-x64.tgz")\"" "$T/m/t.json"
check "arm64 pin added after its url" grep -q "\"sha256\": \"$(sha "$T/reg/tb/-/t-1.0.0-arm64.tgz")\"" "$T/m/t.json"
check "the diff is one line per pin (plus the comma of the added key)" \
	test "$(diff "$T/t.orig" "$T/m/t.json" | grep -c '^>')" -eq 3
check "still valid JSON" python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$T/m/t.json"
check "key order kept" test "$(grep -n '"sha256"' "$T/m/t.json" | head -1 | cut -d: -f1)" -eq 12

run "$BIN" lock t --manifests "$T/m" --check
expect "tarball --check: current pins" 0 "pins are current"
run "$BIN" lock t --manifests "$T/m"
expect "tarball: re-lock is a no-op" 0 "already up to date"

cp "$T/m/t.json" "$T/t.v1"
run "$BIN" lock t --manifests "$T/m" --version 2.0.0
expect "tarball --version: new version pinned" 0
check "version bumped" grep -q '"version": "2.0.0"' "$T/m/t.json"
check "urls follow the version" grep -q "t-2.0.0-arm64.tgz" "$T/m/t.json"
check "expect follows the version" grep -q '"expect": "2.0.0"' "$T/m/t.json"
check "new pins" grep -q "$(sha "$T/reg/tb/-/t-2.0.0-x64.tgz")" "$T/m/t.json"

sed -i 's/"hosts": \["localhost"\]/"hosts": ["registry.example"]/' "$T/m/t.json"
cp "$T/m/t.json" "$T/t.hosts"
run "$BIN" lock t --manifests "$T/m"
expect "tarball: a URL outside hosts is refused" 1 "" "not in the manifest's hosts"
check "refused: manifest untouched" cmp -s "$T/m/t.json" "$T/t.hosts"

# unpacked_size: each platform's artifact extracted as an install would
# (strip_components, regular files counted); an artifact the installer
# cannot extract is said and left out, its pin still written
regsum() { python3 -c '
import sys, tarfile
print(sum(m.size for f in sys.argv[2:] for m in tarfile.open(f).getmembers() if m.isreg() and m.name.count("/") >= int(sys.argv[1])))' "$@"; }
mkdir -p "$T/src/pkg/bin" "$T/reg/tz/-"
head -c 70000 /dev/urandom >"$T/src/pkg/bin/z"
head -c 5000 /dev/urandom >"$T/src/pkg/README"
tar czf "$T/reg/tz/-/z-1.0.0-x64.tgz" -C "$T/src" pkg
head -c 90000 /dev/urandom >>"$T/src/pkg/bin/z"
tar czf "$T/reg/tz/-/z-1.0.0-arm64.tgz" -C "$T/src" pkg
sed -e 's|/tb/-/t-|/tz/-/z-|' -e 's/"name": "t"/"name": "z"/' -e 's/"bin": "t"/"bin": "bin\/z", "strip_components": 1/' \
	-e 's/"hosts": \["registry.example"\]/"hosts": ["localhost"]/' "$T/t.v1" >"$T/m/z.json"
run "$BIN" lock z --manifests "$T/m"
expect "tarball: unpacked sizes measured" 0 "linux-x64: unpacked $(regsum 1 "$T/reg/tz/-/z-1.0.0-x64.tgz") bytes"
check "unpacked_size recorded per platform, as the manifest loader reads it" python3 -c "
import json; m = json.load(open('$T/m/z.json'))
assert m['unpacked_size'] == {'linux-x64': $(regsum 1 "$T/reg/tz/-/z-1.0.0-x64.tgz"), 'linux-arm64': $(regsum 1 "$T/reg/tz/-/z-1.0.0-arm64.tgz")}, m"
check "... the last member, the rest of the text kept" sh -c "tail -2 '$T/m/z.json' | grep -q '^  \"unpacked_size\": {\"linux-x64\": [0-9]*, \"linux-arm64\": [0-9]*}\$'"
run "$BIN" prepare --dry-run --manifests "$T/m" --tools-dir "$T/tools" --only z
check "the manifest lock wrote loads" grep -q "^z  " "$T/out"
cp "$T/m/z.json" "$T/z.locked"
run "$BIN" lock z --manifests "$T/m" --sizes
expect "--sizes with current pins and sizes: no change" 0 "already up to date"
check "... the file is the same" cmp -s "$T/m/z.json" "$T/z.locked"
sed -i 's/"linux-x64": [0-9]*}/"linux-x64": 5}/; s/"linux-x64": [0-9]*,/"linux-x64": 5,/' "$T/m/z.json"
run "$BIN" lock z --manifests "$T/m" --sizes
expect "--sizes corrects a wrong size" 0 "1 change written"
check "... to the measured one" cmp -s "$T/m/z.json" "$T/z.locked"
head -c 10 /dev/urandom >>"$T/reg/tz/-/z-1.0.0-x64.tgz"
run "$BIN" lock z --manifests "$T/m" --sizes
expect "--sizes refuses a pin that no longer matches" 1 "" "install.checksum_mismatch"
check "... changing nothing" cmp -s "$T/m/z.json" "$T/z.locked"
run "$BIN" lock z --manifests "$T/m" --sizes --check
expect "--sizes with --check is a usage error" 2 "" "--sizes goes with neither"

run "$BIN" lock nosuch --manifests "$T/m"
expect "unknown tool" 2 "" "no manifest"
run "$BIN" lock
expect "missing NAME" 2 "" "missing NAME"
run "$BIN" lock t --bogus
expect "unknown option" 2 "" "usage"

# ---- npm-lock sources -----------------------------------------------------
if ! command -v npm >/dev/null 2>&1; then
	skip "npm-lock" "npm is not installed"
	exit 0
fi
FIXTURES=$FIXTURES python3 - "$T/reg" <<'EOF'
import os, sys
sys.path.insert(0, os.environ["FIXTURES"])
import npmpack as P
root = sys.argv[1]
P.pack(root, "dep", "1.0.0", {"index.js": b"module.exports = 1\n"})
for os_, cpu in (("linux", "x64"), ("linux", "arm64"), ("darwin", "arm64")):
    P.pack(root, "@s/tool-%s-%s" % (os_, cpu), "1.0.0", {"bin/tool": b"\x7fELF"}, {"os": [os_], "cpu": [cpu]})
opt = {"@s/tool-%s-%s" % (o, c): "1.0.0" for o, c in (("linux", "x64"), ("linux", "arm64"), ("darwin", "arm64"))}
P.pack(root, "@s/tool", "1.0.0", {"bin/tool.js": b"#!/usr/bin/env node\n"},
       {"bin": {"tool": "bin/tool.js"}, "dependencies": {"dep": "^1.0.0"}, "optionalDependencies": opt,
        "scripts": {"postinstall": "touch /tmp/never"}})
P.pack(root, "evil", "1.0.0", {"index.js": b""})
open(os.path.join(root, "evil", "tarball-host"), "w").write("127.0.0.1:1")
EOF
cat >"$T/m/tool.json" <<EOF
{
  "schema": 1,
  "name": "tool",
  "binary": "tool",
  "version": "1.0.0",
  "source": {
    "type": "npm-lock",
    "package": "@s/tool",
    "lock": "tool/package-lock.json",
    "package_json": "tool/package.json",
    "bin": "node_modules/.bin/tool",
    "allow_scripts": false
  },
  "hosts": ["$R"],
  "platforms": ["linux-x64", "linux-arm64"]
}
EOF
run "$BIN" lock tool --manifests "$T/m"
expect "npm-lock: lockfile produced by npm and accepted" 0 "locked: 4 packages for linux, 1 optional ones for other systems"
check "lockfile written beside the manifest" test -s "$T/m/tool/package-lock.json"
check "package.json pins the exact version" python3 -c '
import json, sys
sys.exit(json.load(open(sys.argv[1]))["dependencies"] != {"@s/tool": "1.0.0"})' "$T/m/tool/package.json"
check "every platform's optional package is in the lockfile" \
	python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['packages']; sys.exit(not all('node_modules/@s/tool-%s' % x in p for x in ('linux-x64','linux-arm64','darwin-arm64')))" "$T/m/tool/package-lock.json"
check "resolved URLs are recorded" grep -q "\"resolved\": \"https://$R/dep/-/dep-1.0.0.tgz\"" "$T/m/tool/package-lock.json"
check "no install script ran" test ! -e /tmp/never
# each platform's tree: the tool, dep and that platform's optional package
check "npm-lock: unpacked_size is each platform's packages' files" python3 -c "
import json; m = json.load(open('$T/m/tool.json'))
assert m['unpacked_size'] == {'linux-x64': $(regsum 1 "$T/reg/@s/tool/-/tool-1.0.0.tgz" "$T/reg/dep/-/dep-1.0.0.tgz" "$T/reg/@s/tool-linux-x64/-/tool-linux-x64-1.0.0.tgz"),
  'linux-arm64': $(regsum 1 "$T/reg/@s/tool/-/tool-1.0.0.tgz" "$T/reg/dep/-/dep-1.0.0.tgz" "$T/reg/@s/tool-linux-arm64/-/tool-linux-arm64-1.0.0.tgz")}, m"
cp "$T/m/tool/package-lock.json" "$T/tool-lock.before"
sed -i 's/"linux-arm64": [0-9]*}/"linux-arm64": 7}/' "$T/m/tool.json"
run env ABX_NPM=/nonexistent/npm "$BIN" lock tool --manifests "$T/m" --sizes
expect "npm-lock --sizes: measured from the lockfile there, no npm run" 0 "1 change written"
check "... the lockfile unchanged" cmp -s "$T/m/tool/package-lock.json" "$T/tool-lock.before"
check "... the size corrected" sh -c "! grep -q '\"linux-arm64\": 7}' '$T/m/tool.json'"
run "$BIN" lock tool --manifests "$T/m" --check
expect "npm-lock --check: current" 0 "pins are current"

FIXTURES=$FIXTURES python3 - "$T/reg" <<'EOF'
import os, sys
sys.path.insert(0, os.environ["FIXTURES"])
import npmpack as P
P.pack(sys.argv[1], "@s/tool", "1.1.0", {"bin/tool.js": b"#!/usr/bin/env node\n"}, {"bin": {"tool": "bin/tool.js"}})
EOF
run "$BIN" lock tool --manifests "$T/m" --check
expect "npm-lock --check: a newer version exists" 1 "newer version 1.1.0"
# a version the registry does not have is named as such,
# with what to do, not "see details.phase; run doctor"
cp "$T/m/tool.json" "$T/tool.before"
run "$BIN" lock tool --manifests "$T/m" --version 9.9.9
expect "npm-lock --version that does not exist is not_found" 1 "" "not_found: no version of @s/tool matches 9.9.9"
expect "it says how to list the versions" 1 "" "(latest: 1.1.0); choose one the registry has: npm view @s/tool versions"
check "a version that does not exist leaves the manifest" cmp -s "$T/m/tool.json" "$T/tool.before"
# a package the registry does not have: a coded error naming it, not npm's raw 404
sed -e 's/"name": "tool"/"name": "nope"/' -e 's|"package": "@s/tool"|"package": "@s/nope"|' \
	-e 's|tool/package|nope/package|g' "$T/m/tool.json" >"$T/m/nope.json"
run "$BIN" lock nope --manifests "$T/m" --version 1.0.0
expect "npm-lock of a package the registry lacks is not_found, naming it" 1 "" \
	"not_found: the registry https://$R"
check "... naming the package and version" grep -q "has no package @s/nope (npm E404), so no @s/nope@1.0.0: check the manifest's source.package" "$T/err"
rm -f "$T/m/nope.json"
run "$BIN" lock tool --manifests "$T/m" --version latest
expect "npm-lock --version latest" 0 "@s/tool@1.1.0"
check "manifest version follows" grep -q '"version": "1.1.0"' "$T/m/tool.json"
# ABX_NPM: a bare name is looked up on PATH, a missing one is named with
# the fix; a relative path is relative to where lock runs (not the scratch
# directory npm runs in), and npm's own output reaches our stderr
cp "$T/m/tool.json" "$T/tool.before"
run env ABX_NPM=abx-no-such-npm "$BIN" lock tool --manifests "$T/m" --version 1.0.0
expect "ABX_NPM not on PATH says so" 1 "" "io.error: cannot run abx-no-such-npm: not found on PATH (set ABX_NPM or install npm)"
check "... and leaves the manifest" cmp -s "$T/m/tool.json" "$T/tool.before"
mkdir -p "$T/npmwrap/bin"
printf '#!/bin/sh\necho "wrapper: npm $1" >&2\nexec npm "$@"\n' >"$T/npmwrap/bin/npm"
chmod 755 "$T/npmwrap/bin/npm"
run sh -c "cd '$T/npmwrap' && ABX_NPM=./bin/npm '$BIN' lock tool --manifests '$T/m' --version 1.0.0"
expect "a relative ABX_NPM runs from where lock runs" 0 "@s/tool@1.0.0 locked" "wrapper: npm install"
check "... and its stdout is still captured (npm view)" grep -q "wrapper: npm view" "$T/err"
# The package.json npm is given is JSON whatever the registry answers: a
# version with a quote and a backslash (an npm that keeps what it is given,
# then fails)
cat >"$T/npmwrap/bin/oddnpm" <<EOF
#!/bin/sh
case "\$1" in
view) printf '%s\\n' '1.0.0"x\\y' ;;
install) cp package.json "$T/pj-odd.json"; exit 1 ;;
esac
EOF
chmod 755 "$T/npmwrap/bin/oddnpm"
run env ABX_NPM="$T/npmwrap/bin/oddnpm" "$BIN" lock tool --manifests "$T/m" --version 1.0.0
expect "an npm that fails after an odd version: exit 1" 1
check "... the package.json it was given is JSON, the version as the registry said" python3 -c '
import json, sys
sys.exit(json.load(open(sys.argv[1]))["dependencies"] != {"@s/tool": "1.0.0\"x\\y"})' "$T/pj-odd.json"
echo '{"lockfileVersion": 1}' >"$T/m/tool/package-lock.json"
run "$BIN" lock tool --manifests "$T/m" --check
expect "npm-lock --check: a broken lockfile is stale" 1 "stale lockfile"

sed 's/"package": "@s\/tool"/"package": "evil"/; s/"name": "tool"/"name": "ev"/; s/tool\//ev\//g' \
	"$T/m/tool.json" >"$T/m/ev.json"
cp "$T/m/ev.json" "$T/ev.orig"
run "$BIN" lock ev --manifests "$T/m" --version 1.0.0
expect "npm-lock: a resolved host outside hosts is refused" 1 "" "host 127.0.0.1 is not in hosts"
check "refused: no lockfile written" test ! -e "$T/m/ev/package-lock.json"
check "refused: manifest untouched" cmp -s "$T/m/ev.json" "$T/ev.orig"

# ---- --check from the binary alone ----------------------------
# No source checkout (no ./manifests, no ABX_MANIFESTS_DIR) and no npm: the
# embedded codex manifest and lockfile are checked against the registry
# fixture through the npm mirror setting.
CV=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$TOP/manifests/codex.json")
packv() { FIXTURES=$FIXTURES python3 - "$T/reg" "$1" <<'PYEOF'
import os, sys
sys.path.insert(0, os.environ["FIXTURES"])
import npmpack as P
P.pack(sys.argv[1], "@openai/codex", sys.argv[2], {"bin/codex.js": b""}, {})
PYEOF
}
packv "$CV"
mkdir -p "$T/nocheckout"
nocheckout() { (cd "$T/nocheckout" && env -u ABX_MANIFESTS_DIR ABX_NPM=/nonexistent/npm \
	ABX_INSTALL_NPM_REGISTRY="https://$R/mirror" ABX_SERVER_INSTALL_ALLOW_HOSTS="$R" "$BIN" lock codex --check); }
run nocheckout
expect "--check outside a checkout: the embedded manifest is current" 0 "pins are current"
check "... it says it checked the embedded one" grep -q "embedded:codex.json: checking the manifest built into this binary" "$T/out"
check "... asking the mirror, not npm" grep -q "GET /mirror/@openai%2fcodex" "$T/reg.log"
packv 999.0.0
run nocheckout
expect "--check outside a checkout: a newer version in the registry" 1 "newer version 999.0.0 (manifest has $CV)"
# The npm mirror set only in the configuration file is the one asked. The
# registry's own host goes to a proxy that answers nothing (127.0.0.1:1),
# so asking it cannot succeed and never leaves loopback.
printf '{"install":{"mirrors":{"npm":"https://%s/mirror"},"allow_hosts":["%s"]}}\n' "$R" "$R" >"$T/lockcfg.json"
: >"$T/reg.log"
run sh -c "cd '$T/nocheckout' && env -u ABX_MANIFESTS_DIR -u ABX_INSTALL_NPM_REGISTRY ABX_NPM=/nonexistent/npm \
	ABX_SERVER_CONFIG='$T/lockcfg.json' HTTPS_PROXY=http://127.0.0.1:1 NO_PROXY=localhost '$BIN' lock codex --check"
expect "--check: the npm mirror of the configuration file is asked" 1 "newer version 999.0.0 (manifest has $CV)"
check "... the mirror got the request" grep -q "GET /mirror/@openai%2fcodex" "$T/reg.log"
run sh -c "cd '$T/nocheckout' && env -u ABX_MANIFESTS_DIR '$BIN' lock nosuch --check"
expect "--check outside a checkout: a tool this binary does not have" 2 "" "no manifest nosuch.json in this binary"
run sh -c "cd '$T/nocheckout' && env -u ABX_MANIFESTS_DIR '$BIN' lock codex"
expect "without --check, lock still needs the manifests to edit" 2 "" "no manifest manifests/codex.json to lock"
