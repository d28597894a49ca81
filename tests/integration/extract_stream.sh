# Extraction while downloading: a tarball source and a large npm
# package are extracted as their bytes arrive, and the staged tree is used
# only once the digest matched. Real peers on loopback: httpd.py and
# npmreg.py send a tarball's second half only once its first entry exists
# in staging (the overlap, observed without timing), cut it in the middle,
# or serve bytes that do not match; every failure leaves nothing behind.
. "$TOP/tests/lib.sh"

W=$T/www
M=$T/man
mkdir -p "$W" "$M" "$T/home" "$T/state"
export HOME=$T/home ABX_SERVER_STATE_DIR=$T/state ABX_SERVER_AUDIT_FILE=$T/audit.jsonl

make_pki
export SSL_CERT_FILE=$T/pki/ca.pem

# mktool_gated NAME: $W/NAME-1.0.0.tgz, first entry pkg/a-first.txt, then
# the binary and 4 MiB of incompressible data (many of the download's chunks)
mktool_gated() {
	rm -rf "$T/src" && mkdir -p "$T/src/pkg/bin" "$T/src/pkg/share"
	echo first >"$T/src/pkg/a-first.txt"
	printf '#!/bin/sh\necho "%s 1.0.0"\n' "$1" >"$T/src/pkg/bin/$1"
	chmod 755 "$T/src/pkg/bin/$1"
	head -c $((4 << 20)) /dev/urandom >"$T/src/pkg/share/data.bin"
	tar czf "$W/$1-1.0.0.tgz" -C "$T/src" pkg/a-first.txt pkg/bin pkg/share
}
start_httpd "$W" "$T/req.log"
P=$HTTPD_PORT
SIZE_HINT_MB=8

# nothing_left DIR: no staged tree, no download's temporary file, no tool tree
nothing_left() {
	test -z "$(ls -A "$1/.staging" 2>/dev/null)" && test -z "$(ls -A "$1/.cache" 2>/dev/null | grep '^\.tmp-')" &&
		test ! -e "$1/$2/1.0.0-$PLATFORM"
}

mktool_gated gated
G=$(sha "$W/gated-1.0.0.tgz")

# ---- a tarball source ---------------------------------------------------------------
mkman gated /gate/gated-1.0.0.tgz "$G"
echo "$T/t1/.staging/*/tree/a-first.txt" >"$W/gated-1.0.0.tgz.gate"
run "$BIN" prepare --keep-cache --manifests "$M" --only gated --tools-dir "$T/t1" -v
expect "tarball: installed" 0 "gated 1.0.0: installed"
check "tarball: the first entry was in staging before the second half was sent" \
	grep -q "gate gated-1.0.0.tgz seen" "$T/req.log"
check "tarball: the tree is the archive's" sh -c \
	"mkdir -p '$T/x1' && tar xzf '$W/gated-1.0.0.tgz' -C '$T/x1' && diff -r '$T/x1/pkg' '$T/t1/gated/1.0.0-$PLATFORM'"
check "tarball: the artifact is cached under its digest" test -f "$T/t1/.cache/$G"
check "tarball: its extracted tree is kept" grep -q "gated 1.0.0: kept the extracted tree" "$T/err"
check "tarball: nothing left in staging" test -z "$(ls -A "$T/t1/.staging")"
# prepare -v: the CPU behind the overlapping phases, per activity
for a in receive digests "download write" decompress "tree write"; do
	check "tarball: prepare -v says the CPU of '$a'" \
		grep -Eq "^agent-sandbox-server: timing gated 1\.0\.0:.* total [0-9.]+ ms; cpu:.* $a [0-9]+\.[0-9]{3} ms" "$T/err"
done

# the cached artifact (no kept tree): extracted from the cache, no download
rm -rf "$T/t1/.cache/trees"
: >"$T/req.log"
run "$BIN" prepare --keep-cache --manifests "$M" --only gated --tools-dir "$T/t1b" --cache "$T/t1/.cache"
expect "tarball, cached: installed" 0 "gated 1.0.0: installed"
check "tarball, cached: no download" test ! -s "$T/req.log"
check "tarball, cached: the same tree" diff -r "$T/t1/gated/1.0.0-$PLATFORM" "$T/t1b/gated/1.0.0-$PLATFORM"

# the right archive under a wrong pin: extracted as it arrived, then discarded
mkman gated /gate/gated-1.0.0.tgz "$(printf '%064d' 1)"
echo "$T/t2/.staging/*/tree/a-first.txt" >"$W/gated-1.0.0.tgz.gate"
: >"$T/req.log"
run "$BIN" prepare --keep-cache --json --manifests "$M" --only gated --tools-dir "$T/t2"
expect "tarball, wrong digest: install.checksum_mismatch" 1 '"code":"install.checksum_mismatch"'
check "tarball, wrong digest: it was staged as it arrived" grep -q "gate gated-1.0.0.tgz seen" "$T/req.log"
check "tarball, wrong digest: nothing left (staging, temporary file, tree)" nothing_left "$T/t2" gated
check "tarball, wrong digest: nothing cached" test -z "$(ls -A "$T/t2/.cache" 2>/dev/null | grep -v '^trees$')"

# bytes that are no archive at all: still the digest's error, not the extractor's
head -c $((3 << 20)) /dev/urandom >"$W/noise-1.0.0.tgz"
mkman noise /f/noise-1.0.0.tgz "$(printf '%064d' 2)"
run "$BIN" prepare --keep-cache --json --manifests "$M" --only noise --tools-dir "$T/t3"
expect "tarball, wrong bytes: install.checksum_mismatch" 1 '"code":"install.checksum_mismatch"'
check "tarball, wrong bytes: nothing left" nothing_left "$T/t3" noise

# the connection cut in the middle
mkman gated /cut/gated-1.0.0.tgz "$G"
run "$BIN" prepare --keep-cache --json --manifests "$M" --only gated --tools-dir "$T/t4"
expect "tarball, cut: install.failed in the fetch phase" 1 '"phase":"fetch"'
check "tarball, cut: nothing left" nothing_left "$T/t4" gated

# a sound download whose archive is refused: the extractor's error
rm -rf "$T/src" && mkdir -p "$T/src/pkg/bin"
printf '#!/bin/sh\necho "evil 1.0.0"\n' >"$T/src/pkg/bin/evil"
head -c $((2 << 20)) /dev/urandom >"$T/src/pkg/big.bin"
ln -s /etc/passwd "$T/src/pkg/bin/escape"
tar czf "$W/evil-1.0.0.tgz" -C "$T/src" pkg/big.bin pkg/bin
mkman evil /f/evil-1.0.0.tgz "$(sha "$W/evil-1.0.0.tgz")"
run "$BIN" prepare --keep-cache --json --manifests "$M" --only evil --tools-dir "$T/t5"
expect "tarball, refused archive: the extractor's error" 1 "escape"
check "tarball, refused archive: not a fetch error" sh -c "! grep -q '\"phase\":\"fetch\"' '$T/out'"
check "tarball, refused archive: nothing left" nothing_left "$T/t5" evil

# ---- a large npm package ----------------------------------------------------------------
export ABX_INSTALL_LIBC=glibc
npm_fixture
npmpy <<'PY'
import os
import npmpack as P
T, REG = os.environ["T"], os.environ["REG"]
root, m = T + "/reg", T + "/nm"
# over the in-memory size (1 MiB): extracted as it downloads
P.pack(root, "big", "1.0.0", {"a-first.txt": b"first\n", "z.bin": os.urandom(4 << 20)})
app = P.app(root, REG)
big = P.entry(root, REG, "big", "1.0.0")
for name, e in (("napp", big), ("nbad", dict(big, integrity=P.sri(b"other")))):
    P.write_app(m, name, {"node_modules/@t/app": app, "node_modules/big": e})
PY
BIGTGZ=$T/reg/big/-/big-1.0.0.tgz

echo "$T/n1/.staging/*/tree/node_modules/big/a-first.txt" >"$BIGTGZ.gate"
run "$BIN" prepare --keep-cache --manifests "$T/nm" --only napp --tools-dir "$T/n1"
expect "npm: installed" 0 "napp 1.0.0: installed"
check "npm: the large package's first entry was in staging before its second half was sent" \
	grep -q "gate big-1.0.0.tgz seen" "$T/reg.log"
check "npm: its files are the tarball's" sh -c \
	"mkdir -p '$T/x2' && tar xzf '$BIGTGZ' -C '$T/x2' && diff -r '$T/x2/package' '$T/n1/napp/1.0.0-$PLATFORM/node_modules/big'"
check "npm: nothing left in staging" test -z "$(ls -A "$T/n1/.staging")"

echo "$T/n2/.staging/*/tree/node_modules/big/a-first.txt" >"$BIGTGZ.gate"
: >"$T/reg.log"
run "$BIN" prepare --keep-cache --json --manifests "$T/nm" --only nbad --tools-dir "$T/n2"
expect "npm, wrong digest: install.checksum_mismatch" 1 '"code":"install.checksum_mismatch"'
check "npm, wrong digest: it was staged as it arrived" grep -q "gate big-1.0.0.tgz seen" "$T/reg.log"
check "npm, wrong digest: nothing left" nothing_left "$T/n2" nbad
check "npm, wrong digest: nothing cached" test ! -e "$T/n2/.cache/$(sha "$BIGTGZ")"

rm -f "$BIGTGZ.gate"
: >"$BIGTGZ.cut"
run "$BIN" prepare --keep-cache --json --manifests "$T/nm" --only napp --tools-dir "$T/n3"
expect "npm, cut: install.failed" 1 '"code":"install.failed"'
check "npm, cut: nothing left" nothing_left "$T/n3" napp
rm -f "$BIGTGZ.cut"
