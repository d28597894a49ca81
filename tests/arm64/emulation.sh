# make check-arm64: what the arm64 binary decides about the machine it runs
# on, under qemu-aarch64-static on an x86-64 host. The platform is the
# binary's own (linux-arm64: the artifact and the npm packages it picks), the
# C library is looked for with aarch64's loader names (QEMU_LD_PREFIX stands
# for an arm64 image's root), never the host's x86-64 loaders.
. "$TOP/tests/lib.sh"

if [ -z "${ABX_TEST_EMULATOR:-}" ]; then
	not_ok "emulator" "ABX_TEST_EMULATOR is not set: run make check-arm64"
	exit 1
fi
# emu [ENV=V...] -- ARGS...: the binary under the emulator, as run does
emu() { run env "$@"; }

check "the binary is a static aarch64 executable" \
	sh -c "readelf -h '$SELF' | grep -q AArch64 && ! readelf -l '$SELF' | grep -q INTERP"

run "$BIN" version
expect "version names linux-arm64" 0 "linux-arm64)"
want=$(awk '$1=="musl"{print $2; exit}' "$TOP/tools/deps.pins")
check "version names the pinned musl ($want), built from its source" grep -qx "musl $want" "$T/out"
run "$BIN" version --json
expect "version --json names the platform" 0 '"linux-arm64"'

# ---- the C library of an arm64 root ---------------------------------------
mkdir -p "$T/glibc/lib" "$T/musl/lib" "$T/empty" "$T/x86/lib64"
: >"$T/glibc/lib/ld-linux-aarch64.so.1"
: >"$T/musl/lib/ld-musl-aarch64.so.1"
: >"$T/x86/lib64/ld-linux-x86-64.so.2"
emu QEMU_LD_PREFIX="$T/glibc" "$BIN" doctor
check "an arm64 glibc root: glibc, by aarch64's loader" \
	grep -q "C library: glibc (loader /lib/ld-linux-aarch64.so.1)" "$T/out"
emu QEMU_LD_PREFIX="$T/musl" "$BIN" doctor
check "an arm64 musl root: musl, by aarch64's loader" \
	grep -q "C library: musl (loader /lib/ld-musl-aarch64.so.1)" "$T/out"
emu QEMU_LD_PREFIX="$T/x86" "$BIN" doctor
check "only an x86-64 loader: none (it cannot load arm64 code)" \
	grep -q "C library: none (neither /lib/ld-linux-aarch64.so.1 nor /lib/ld-musl-aarch64.so.1)" "$T/out"

# ---- the artifact for linux-arm64 -----------------------------------------
sh "$FIXTURES/mkcerts.sh" "$T/pki" >/dev/null 2>&1 || { not_ok "test PKI" "mkcerts.sh failed"; exit 1; }
export SSL_CERT_FILE=$T/pki/ca.pem
unset SSL_CERT_DIR HTTPS_PROXY https_proxy HTTP_PROXY http_proxy ABX_TOOLS_DIR ABX_MANIFESTS_DIR \
	ABX_INSTALL_MIRROR ABX_INSTALL_UNPINNED ABX_INSTALL_NPM_REGISTRY
export HOME=$T/home
W=$T/www M=$T/man
mkdir -p "$W" "$M" "$HOME" "$T/reg"
for a in x64 arm64; do
	rm -rf "$T/src" && mkdir -p "$T/src/pkg/bin"
	printf '#!/bin/sh\necho "hello %s"\n' "$a" >"$T/src/pkg/bin/hello"
	chmod 755 "$T/src/pkg/bin/hello"
	tar czf "$W/hello-$a.tgz" -C "$T/src" pkg
done
: >"$T/req.log"
bg python3 "$FIXTURES/httpd.py" --root "$W" --log "$T/req.log" --cert "$T/pki/good.pem" \
	--key "$T/pki/good.key" >"$T/port" 2>"$T/httpd.err"
wait_for_line "$T/port" '^[0-9]' 10 || { not_ok "start https fixture" "$(cat "$T/httpd.err")"; exit 1; }
P=$(head -1 "$T/port")
cat >"$M/hello.json" <<EOF
{"schema":1,"name":"hello","binary":"hello","version":"1.0.0",
 "source":{"type":"tarball","bin":"bin/hello","strip_components":1,"platforms":{
  "linux-x64":{"url":"https://localhost:$P/f/hello-x64.tgz","sha256":"$(sha256sum <"$W/hello-x64.tgz" | cut -d' ' -f1)"},
  "linux-arm64":{"url":"https://localhost:$P/f/hello-arm64.tgz","sha256":"$(sha256sum <"$W/hello-arm64.tgz" | cut -d' ' -f1)"}}},
 "hosts":["localhost"],"verify":{"argv":["{bin}"],"expect":"hello arm64"},
 "platforms":["linux-x64","linux-arm64"],"size_hint_mb":1}
EOF
mkdir -m 700 "$T/tools"
run "$BIN" prepare --manifests "$M" --tools-dir "$T/tools" --only hello
expect "tarball: prepare installs the linux-arm64 artifact (its verify expects it)" 0
check "tarball: the tree is 1.0.0-linux-arm64" test -x "$T/tools/hello/1.0.0-linux-arm64/bin/hello"
check "tarball: the arm64 URL was fetched, the x64 one never" \
	sh -c "grep -q 'GET /f/hello-arm64.tgz' '$T/req.log' && ! grep -q 'hello-x64' '$T/req.log'"

# ---- npm-lock: the package for cpu arm64 -----------------------------------
bg python3 "$FIXTURES/npmreg.py" --root "$T/reg" --log "$T/reg.log" --cert "$T/pki/good.pem" \
	--key "$T/pki/good.key" >"$T/reg.port"
wait_for_line "$T/reg.port" '^[0-9]' 10 || { not_ok "registry starts" "no port"; exit 1; }
FIXTURES=$FIXTURES M=$M REG="https://localhost:$(head -1 "$T/reg.port")" ROOT=$T/reg python3 - <<'EOF' ||
import os, sys
sys.path.insert(0, os.environ["FIXTURES"])
import npmpack as P
root, reg, m = os.environ["ROOT"], os.environ["REG"], os.environ["M"]
P.pack(root, "@t/app", "1.0.0", {"index.js": b""})
P.pack(root, "@t/app", "1.0.0-linux-x64", {"bin/app": (b"#!/bin/sh\necho app x64\n", 0o755)}, {"os": ["linux"], "cpu": ["x64"]})
P.pack(root, "@t/app", "1.0.0-linux-arm64", {"bin/app": (b"#!/bin/sh\necho app arm64\n", 0o755)}, {"os": ["linux"], "cpu": ["arm64"]})
E = lambda *a, **k: P.entry(root, reg, *a, **k)
P.write_manifest(m, "app", "@t/app", ["localhost"], bin_="node_modules/@t/app-linux-arm64/bin/app",
                 verify={"argv": ["{bin}"], "expect": "app arm64"})
P.write_lock(m + "/app/package-lock.json", "@t/app", {
    "node_modules/@t/app": E("@t/app", "1.0.0"),
    "node_modules/@t/app-linux-x64": E("@t/app", "1.0.0-linux-x64", name="@t/app", os=["linux"], cpu=["x64"], optional=True),
    "node_modules/@t/app-linux-arm64": E("@t/app", "1.0.0-linux-arm64", name="@t/app", os=["linux"], cpu=["arm64"], optional=True),
})
EOF
	{ not_ok "npm fixtures" "the generator failed"; exit 1; }
run "$BIN" prepare --manifests "$M" --tools-dir "$T/tools" --only app
expect "npm-lock: prepare installs from the lockfile (its verify runs the arm64 package)" 0
NM=$T/tools/app/1.0.0-linux-arm64/node_modules
check "npm-lock: the package for cpu arm64 is installed" test -x "$NM/@t/app-linux-arm64/bin/app"
check "npm-lock: the one for cpu x64 is skipped" test ! -e "$NM/@t/app-linux-x64"
run env ABX_MANIFESTS_DIR="$M" "$BIN" fetch --only app --cache "$T/cache"
expect "fetch: the packages this machine (linux-arm64) needs" 0 "npm packages: 2 downloaded, 0 cached, 1 skipped (for another os, cpu or C library than linux-arm64)"
