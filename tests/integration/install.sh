# The install engine end to end: prepare, the
# shim, verify and fetch --only against a local HTTPS server (Python's
# http.server + ssl, a test PKI made at test time) that logs every request.
. "$TOP/tests/lib.sh"

W=$T/www
M=$T/man
mkdir -p "$W" "$M" "$T/home" "$T/state" "$T/outside"
export HOME=$T/home ABX_SERVER_STATE_DIR=$T/state ABX_SERVER_AUDIT_FILE=$T/audit.jsonl

make_pki
export SSL_CERT_FILE=$T/pki/ca.pem

start_httpd "$W" "$T/req.log"
P=$HTTPD_PORT
gets() { grep -c " GET /f/$1" "$T/req.log" || true; }

# prep TOOLS-DIR ARGS...: prepare with our manifests
prep() { _d=$1; shift; run "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$_d" "$@"; }

mktool hello 1.0.0
H=$(sha "$W/hello-1.0.0.tgz")
mkman hello /f/hello-1.0.0.tgz "$H"

# ---- usage ---------------------------------------------------------------------
run "$BIN" prepare --help
expect "prepare --help exits 0" 0 "usage: agent-sandbox-server prepare"
run "$BIN" prepare --bogus
expect "prepare: unknown option exits 2" 2 "" "usage: agent-sandbox-server prepare"
run env ABX_SERVER_CONFIG="$T/nothing.json" "$BIN" prepare --keep-cache --manifests "$M"
expect "prepare without --only and a missing configuration exits 2" 2 "" "nothing.json"
echo '{}' >"$T/nothing.json"
run env ABX_SERVER_CONFIG="$T/nothing.json" "$BIN" prepare --keep-cache --manifests "$M"
expect "prepare with nothing configured installs nothing" 0 "nothing to prepare"
prep "$T/t0" --only nosuchtool
expect "prepare: unknown tool exits 2" 2 "" "nosuchtool"
run "$BIN" verify --help
expect "verify --help exits 0" 0 "usage: agent-sandbox-server verify"
run "$BIN" verify --bogus
expect "verify: unknown option exits 2" 2

# ---- a first install -------------------------------------------------------------
prep "$T/t1" --only hello --dry-run
expect "dry-run prints the plan" 0 "install"
check "dry-run: nothing downloaded" test "$(gets hello-1.0.0.tgz)" -eq 0
check "dry-run: no tools directory created" test ! -e "$T/t1"

prep "$T/t1" --only hello
expect "prepare installs" 0 "hello 1.0.0: installed"
check "one download" test "$(gets hello-1.0.0.tgz)" -eq 1
check "the tree is published" test -x "$T/t1/hello/1.0.0-$PLATFORM/bin/hello"
check "the marker names the manifest digest" grep -q "\"manifest_sha256\":\"$(sha "$M/hello.json")\"" "$T/t1/hello/.installed.json"
check "the marker has the artifact digest and SBOM rows" grep -q "\"sbom\":\[{\"name\":\"hello\".*\"sha256\":\"$H\"" "$T/t1/hello/.installed.json"
check "the cache holds the artifact by sha256" test -f "$T/t1/.cache/$H"
check "bin/hello is a link to the binary" test "$(readlink "$T/t1/bin/hello")" = "$SELF"
check "staging is empty afterwards" test -z "$(ls -A "$T/t1/.staging")"
check "no progress file is left" test ! -e "$T/t1/hello/.progress.json"
check "audit: install.start and install.finish" sh -c "grep -q '\"event\":\"install.start\",\"tool\":\"hello\"' '$T/audit.jsonl' && grep -q '\"event\":\"install.finish\".*\"ok\":true' '$T/audit.jsonl'"
run "$T/t1/bin/hello" a b
expect "the shim runs the tool" 0 "hello 1.0.0"
run env PATH="$T/t1/bin:$PATH" hello
expect "the shim runs from PATH" 0 "hello 1.0.0"

prep "$T/t1" --only hello
expect "a second prepare finds it ready" 0 "hello 1.0.0: ready"
check "no second download" test "$(gets hello-1.0.0.tgz)" -eq 1

# ---- an image build's layer: the tools, no second copy ---------------
# prepare without --keep-cache: the download it made and no extracted tree
# stay behind, so the tools directory is the size of the tree it installed;
# --keep-cache keeps both, a --cache DIR keeps the downloads and no tree.
mktool slim 1.0.0
head -c 2000000 /dev/urandom >"$T/src/pkg/share/big.bin"
tar czf "$W/slim-1.0.0.tgz" -C "$T/src" pkg
S=$(sha "$W/slim-1.0.0.tgz")
mkman slim /f/slim-1.0.0.tgz "$S"
run "$BIN" prepare --manifests "$M" --tools-dir "$T/ts1" --only slim
expect "image: prepare installs" 0 "slim 1.0.0: installed"
check "image: no download left in the tools directory" test ! -e "$T/ts1/.cache/$S"
check "image: no extracted tree kept" test ! -e "$T/ts1/.cache/trees"
check "image: no .cache at all (this run made it)" test ! -e "$T/ts1/.cache"
_tree=$(du -sk "$T/ts1/slim/1.0.0-$PLATFORM" | cut -f1)
_all=$(du -sk "$T/ts1" | cut -f1)
check "image: the tools directory ($_all KiB) is at most 1.05 x its tree ($_tree KiB)" \
	test $((_all * 100)) -le $((_tree * 105))
run "$T/ts1/bin/slim"
expect "image: the tool runs" 0 "slim 1.0.0"
run "$BIN" prepare --manifests "$M" --tools-dir "$T/ts1" --only slim
expect "image: a second prepare finds it ready" 0 "slim 1.0.0: ready"
check "image: ... and downloads nothing" test "$(gets slim-1.0.0.tgz)" -eq 1
run "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/ts2" --only slim
expect "--keep-cache: prepare installs" 0 "slim 1.0.0: installed"
check "--keep-cache: the download is kept" test -f "$T/ts2/.cache/$S"
check "--keep-cache: the extracted tree is kept" test -n "$(ls "$T/ts2/.cache/trees" 2>/dev/null)"
run "$BIN" prepare --manifests "$M" --tools-dir "$T/ts3" --cache "$T/cs" --only slim
expect "--cache DIR: prepare installs" 0 "slim 1.0.0: installed"
check "--cache DIR: the download is kept there" test -f "$T/cs/$S"
check "--cache DIR: no extracted tree added there" test ! -e "$T/cs/trees"
check "--cache DIR: the tools directory has no .cache" test ! -e "$T/ts3/.cache"
run "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/ts4" --cache "$T/cs" --only slim -v
expect "--cache DIR --keep-cache: installed from that cache" 0 "slim 1.0.0: installed"
check "--cache DIR --keep-cache: no download" test "$(gets slim-1.0.0.tgz)" -eq 3
check "--cache DIR --keep-cache: the extracted tree is added" test -n "$(ls "$T/cs/trees" 2>/dev/null)"
# without --keep-cache, the trees already in DIR serve it (docs/installing.md):
# placed from the tree, nothing downloaded or decompressed, the tree kept
_trees=$(ls "$T/cs/trees")
run "$BIN" prepare --manifests "$M" --tools-dir "$T/ts4b" --cache "$T/cs" --only slim
expect "--cache DIR without --keep-cache: a tree in DIR is placed" 0 "slim 1.0.0: installed" "slim 1.0.0: placed"
check "... no download" test "$(gets slim-1.0.0.tgz)" -eq 3
check "... the tree stays in DIR, nothing added" test "$(ls "$T/cs/trees")" = "$_trees"
run "$T/ts4b/bin/slim"
expect "... and the placed tool runs" 0 "slim 1.0.0"
# what was in the tools directory's .cache before (an earlier fetch or
# serve's) stays; it served the install
mkdir -p "$T/ts5/.cache" && cp "$T/cs/$S" "$T/ts5/.cache/$S"
run "$BIN" prepare --manifests "$M" --tools-dir "$T/ts5" --only slim
expect "image: a .cache already there serves prepare" 0 "slim 1.0.0: installed"
check "image: ... no download" test "$(gets slim-1.0.0.tgz)" -eq 3
check "image: ... and its entry stays" test -f "$T/ts5/.cache/$S"
check "image: ... no tree added" test ! -e "$T/ts5/.cache/trees"
# an install that fails leaves nothing behind either
mkman slimbad /f/slim-1.0.0.tgz "$S" "" bin/slim
run "$BIN" prepare --manifests "$M" --tools-dir "$T/ts6" --only slimbad
expect "image: a failing verify.argv fails the install" 1 "" "install.failed"
check "image: ... and leaves no .cache" test ! -e "$T/ts6/.cache"
# a first use through the shim keeps its download (a repair needs no
# network) and no extracted tree (tests/integration/lazy.sh)
mkdir -p "$T/ts7/bin" && ln -s "$BIN" "$T/ts7/bin/slim"
run env ABX_MANIFESTS_DIR="$M" "$T/ts7/bin/slim" x
expect "lazy: the shim installs on first exec" 0 "slim 1.0.0"
check "lazy: the download is kept" test -f "$T/ts7/.cache/$S"
check "lazy: no extracted tree is kept" test -z "$(ls "$T/ts7/.cache/trees" 2>/dev/null)"

# prepare -v: one timing line per install, every phase of a tarball
# source with a number of milliseconds; none without -v
check "no timing line without -v" sh -c "! grep -q 'timing' '$T/err'"
cp -R "$T/t1/.cache" "$T/c1v"
rm -rf "$T/c1v/trees" # the tarball, not its extracted tree
prep "$T/t1v" --only hello -v --cache "$T/c1v"
expect "prepare -v installs from the cache" 0 "hello 1.0.0: installed"
check "prepare -v: no download (warm cache)" test "$(gets hello-1.0.0.tgz)" -eq 1
for ph in probe download+digest extract verify.argv "tree listing" publish/sync total; do
	_re=$(printf '%s' "$ph" | sed 's/[+.]/\\&/g')
	check "prepare -v times phase '$ph'" grep -Eq "^agent-sandbox-server: timing hello 1\.0\.0:.* $_re [0-9]+\.[0-9]{3} ms" "$T/err"
done
check "prepare -v: the CPU of decompressing, none of receiving (no download)" sh -c \
	"grep 'timing hello' '$T/err' | grep -Eq '; cpu:.* decompress [0-9]+\.[0-9]{3} ms' && ! grep 'timing hello' '$T/err' | grep -q ' receive '"
check "prepare -v: exactly one timing line, no npm phase for a tarball" \
	sh -c "test \$(grep -c 'timing hello' '$T/err') -eq 1 && ! grep -q ' npm [0-9]' '$T/err'"
check "the extracted tree is kept in the cache, and says so" \
	grep -q "hello 1.0.0: kept the extracted tree in $T/c1v/trees/sha256-" "$T/err"

# ---- the cache's extracted trees -------------------------------------------
prep "$T/t1w" --only hello -v --cache "$T/c1v"
expect "a new tools directory: placed from the extracted tree" 0 "hello 1.0.0: installed"
check "... and says so" grep -q "hello 1.0.0: placed [0-9]* files from the extracted tree in $T/c1v/trees/" "$T/err"
check "... the kept tree proved unchanged by its stat proof: copied, not hashed again" \
	grep -q "hello 1.0.0: placed [0-9]* files from the extracted tree in $T/c1v/trees/[^ ]* (the kept tree proved unchanged by its stat proof: copied, not hashed again; no download" "$T/err"
check "... no download, no decompression: the place phase instead" sh -c \
	"grep -q 'timing hello 1.0.0:.* place [0-9]' '$T/err' && ! grep -Eq 'timing hello.* (extract|download\+digest) [0-9]' '$T/err'"
check "... no download" test "$(gets hello-1.0.0.tgz)" -eq 1
check "... the same tree as an extraction" diff -r "$T/t1v/hello/1.0.0-$PLATFORM" "$T/t1w/hello/1.0.0-$PLATFORM"
run "$BIN" verify --manifests "$M" --tools-dir "$T/t1w" hello
expect "... and it verifies" 0 "OK hello"
TE=$(ls -d "$T/c1v/trees/sha256-"*)
echo tampered >>"$TE/tree/bin/hello"
prep "$T/t1x" --only hello -v --cache "$T/c1v"
expect "a damaged extracted tree: installed all the same" 0 "hello 1.0.0: installed"
check "... the damage said on stderr, naming the file" grep -q "the extracted tree of hello 1.0.0 ($TE) is damaged: .*bin/hello" "$T/err"
check "... extracted from the verified tarball instead" grep -Eq 'timing hello 1.0.0:.* extract [0-9]' "$T/err"
check "... and the entry made again" grep -q "hello 1.0.0: kept the extracted tree in $T/c1v/trees/" "$T/err"
check "... the installed file is the tarball's" diff "$T/t1v/hello/1.0.0-$PLATFORM/bin/hello" "$T/t1x/hello/1.0.0-$PLATFORM/bin/hello"
run "$BIN" verify --manifests "$M" --tools-dir "$T/t1x" hello
expect "... and it verifies" 0 "OK hello"
# a kept tree touched (its ctime moves, its bytes do not): its stat proof
# fails, every copy is hashed, and the entry gets a new proof
touch "$TE/tree/bin/hello"
sleep 0.1
prep "$T/t1y" --only hello -v --cache "$T/c1v"
expect "a touched extracted tree: placed all the same" 0 "hello 1.0.0: installed"
check "... every copy hashed, and the entry given a new stat proof, said" grep -q \
	"hello 1.0.0: placed [0-9]* files from the extracted tree in $T/c1v/trees/[^ ]* (each copy hashed against its sealed listing, and the entry given a stat proof for the next placement; no download" "$T/err"
check "... the same tree" diff -r "$T/t1v/hello/1.0.0-$PLATFORM" "$T/t1y/hello/1.0.0-$PLATFORM"
prep "$T/t1z" --only hello -v --cache "$T/c1v"
expect "... the next placement" 0 "hello 1.0.0: installed"
check "... proved unchanged by that proof" grep -q "hello 1.0.0: placed [0-9]* files .* (the kept tree proved unchanged by its stat proof" "$T/err"

# ---- the tree cache's key stays on its machine --------------------------------
# A cache copied (cp -a, a CI restore, an image's COPY) to another machine
# (another state directory) carries its trees but not their key: each tree
# is extracted again from the blob, verified against the pin.
cp -a "$T/c1v" "$T/c2m"
run env ABX_SERVER_STATE_DIR="$T/state2" "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/t2m" --only hello -v \
	--cache "$T/c2m"
expect "a cache copied to another machine: installed" 0 "hello 1.0.0: installed"
check "... its tree sealed with another machine's key, said" \
	grep -q "the extracted tree of hello 1.0.0 (.*) is damaged: .*another machine's or user's key" "$T/err"
check "... extracted again from the verified blob" grep -Eq 'timing hello 1.0.0:.* extract [0-9]' "$T/err"
check "... no key inside the cache" test ! -e "$T/c2m/trees/.key"
check "... this machine's key in its state directory, 0600" \
	sh -c "test \"\$(stat -c %a '$T/state2/tree-cache.key')\" = 600"
# forge ENTRY KEYHEX: its bin/hello made to say "forged", the listing line
# and the seal made to match, sealed with KEYHEX
forge() {
	printf '#!/bin/sh\necho forged\n' >"$1/tree/bin/hello"
	_s=$(sha "$1/tree/bin/hello")
	_n=$(wc -c <"$1/tree/bin/hello")
	sed -i '$d' "$1/manifest"
	sed -i "s|^f \([0-7]*\) [0-9]* [0-9a-f]* bin/hello\$|f \1 $_n $_s bin/hello|" "$1/manifest"
	printf 'mac %s\n' "$(openssl dgst -sha256 -mac HMAC -macopt "hexkey:$2" <"$1/manifest" | sed 's/.* //')" \
		>>"$1/manifest"
}
# A key found inside a cache (an earlier version kept it there) seals
# nothing: a tree forged and sealed with it does not install its bytes.
cp -a "$T/c1v" "$T/c3f"
K3=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$K3" >"$T/c3f/trees/.key"
chmod 600 "$T/c3f/trees/.key"
forge "$(ls -d "$T/c3f/trees/sha256-"*)" "$K3"
prep "$T/t3f" --only hello -v --cache "$T/c3f"
expect "a tree forged and sealed with the key found in the cache: installed" 0 "hello 1.0.0: installed"
check "... not its forged bytes: the tarball's" \
	diff "$T/t1v/hello/1.0.0-$PLATFORM/bin/hello" "$T/t3f/hello/1.0.0-$PLATFORM/bin/hello"
check "... the forged tree discarded, said" grep -q "the extracted tree of hello 1.0.0 (.*) is damaged" "$T/err"
check "... the in-cache key removed" test ! -e "$T/c3f/trees/.key"

# ---- a kept tree under a writable shared mapping --------------------------------
# A write through a mapping whose page is dirty already moves no ctime, so
# a stat proof made while it is there holds over the bytes it writes later.
# A file open for writing (a mapping keeps it so) is never trusted on its
# proof: it is hashed, and its kept tree is not given a proof. The cache
# on tmpfs where there is one: its mapped writes never move a ctime (ext4
# moves it once a clean page is written, and its journal cleans pages).
SHM=$(mktemp -d /dev/shm/abx-test.XXXXXX 2>/dev/null || { mkdir -p "$T/shm" && echo "$T/shm"; })
cp -a "$T/c1v" "$SHM/c4m"
TM=$(ls -d "$SHM/c4m/trees/sha256-"*)
bg python3 -c '
import mmap, os, sys, time
f = open(sys.argv[1], "r+b")
m = mmap.mmap(f.fileno(), 0)
m[0:1] = m[0:1]
open(sys.argv[2] + ".ready", "w").write("x\n")
while not os.path.exists(sys.argv[2] + ".go"):
    time.sleep(0.02)
m[0:1] = bytes([m[0] ^ 1])
open(sys.argv[2] + ".done", "w").write("x\n")
time.sleep(60)
' "$TM/tree/share/data.bin" "$T/mm"
MMPID=$BGPID
wait_for_line "$T/mm.ready" x 10 || true
sleep 0.1
prep "$T/t4m1" --only hello -v --cache "$SHM/c4m"
expect "a kept tree with a file mapped for writing: placed" 0 "hello 1.0.0: installed"
check "... hashed, and given no stat proof while the mapping is there" \
	grep -q "hello 1.0.0: placed [0-9]* files from the extracted tree in $SHM/c4m/trees/[^ ]* (each copy hashed against its sealed listing; no download" "$T/err"
: >"$T/mm.go"
wait_for_line "$T/mm.done" x 10 || true
prep "$T/t4m2" --only hello -v --cache "$SHM/c4m"
expect "... then written through the dirty mapping: installed" 0 "hello 1.0.0: installed"
check "... the written bytes not installed: the tarball's" \
	cmp "$T/t1v/hello/1.0.0-$PLATFORM/share/data.bin" "$T/t4m2/hello/1.0.0-$PLATFORM/share/data.bin"
check "... the entry found changed, said" grep -q "the extracted tree of hello 1.0.0 (.*) is damaged: .*share/data.bin" "$T/err"
kill "$MMPID" 2>/dev/null
rm -rf "$SHM"

# ---- another user's entries in our cache are refused --------------------------
if [ "$(id -u)" = 0 ]; then
	cp -a "$T/c1v" "$T/c5o"
	chown 65534 "$(ls -d "$T/c5o/trees/sha256-"*)/tree/bin/hello"
	prep "$T/t5o" --only hello -v --cache "$T/c5o"
	expect "a kept tree with a file of another user's: installed all the same" 0 "hello 1.0.0: installed"
	check "... the entry refused, naming the file and its owner" \
		grep -q "the extracted tree of hello 1.0.0 (.*) is damaged: bin/hello is owned by uid 65534, not by this user" "$T/err"
	check "... extracted from the verified blob instead" grep -Eq 'timing hello 1.0.0:.* extract [0-9]' "$T/err"
	cp -a "$T/c1v" "$T/c5b"
	rm -rf "$T/c5b/trees"
	chown 65534 "$T/c5b/$H"
	prep "$T/t5p" --only hello --cache "$T/c5b"
	expect "a blob of another user's in our cache: refused, naming it and its owner" 1 "" \
		"cache.unsafe_entry: $T/c5b/$H is owned by uid 65534, not by this user (uid 0)"
fi

# ---- what is not a regular file is refused at once, never waited on ----------
# A FIFO named as a blob, a mirror directory's file or the sealing key: a
# coded error naming it (a blob, a mirror file), or the tree cache not used
# (the key), never a prepare that hangs on the open.
mkdir -p "$T/cfifo" "$T/mfifo"
mkfifo "$T/cfifo/$H" "$T/mfifo/$H"
run timeout 20 "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/tfifo1" --only hello --cache "$T/cfifo"
expect "a FIFO as a blob in the cache: refused, not waited on" 1 "" "cache.unsafe_entry: $T/cfifo/$H is not a regular file (a FIFO)"
run timeout 20 env ABX_INSTALL_MIRROR="file://$T/mfifo" ABX_SERVER_INSTALL_MODE=offline "$BIN" prepare --keep-cache \
	--manifests "$M" --tools-dir "$T/tfifo2" --only hello --cache "$T/cfifo2"
expect "a FIFO as a mirror directory's file: refused, not waited on" 1 "" "cache.unsafe_entry: $T/mfifo/$H is not a regular file (a FIFO)"
mkdir -p "$T/state3"
mkfifo "$T/state3/tree-cache.key"
run timeout 20 env ABX_SERVER_STATE_DIR="$T/state3" "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/tfifo3" \
	--only hello --cache "$T/c1v"
expect "a FIFO as the sealing key: installed all the same, the tree cache not used" 0 "hello 1.0.0: installed"
check "... said, naming the key" grep -q "its key file is not a regular file" "$T/err"

# the fast path takes no lock and writes nothing
if command -v strace >/dev/null 2>&1; then
	strace -f -qq -e trace=flock,openat,open,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,symlink,symlinkat,link,linkat,chmod,fchmodat,truncate \
		-o "$T/strace" "$BIN" prepare --keep-cache -q --manifests "$M" --tools-dir "$T/t1" --only hello >/dev/null 2>&1
	check "fast path: no flock" sh -c "! grep -q 'flock(' '$T/strace'"
	check "fast path: no write, create, rename or unlink" sh -c \
		"! grep -E 'O_WRONLY|O_RDWR|O_CREAT|mkdir|rename|unlink|symlink|link\(|chmod|truncate' '$T/strace' | grep -v ENOENT | grep -q ."
	# the shim as a link of the binary starts (under make check-arm64, through
	# the emulator: without binfmt, env would hand the ELF file to sh)
	shim=$T/t1/bin/hello
	[ -z "${ABX_TEST_EMULATOR:-}" ] || shim="$ABX_TEST_EMULATOR -0 $shim $SELF"
	# shellcheck disable=SC2086 # $shim: the words of a command
	strace -f -qq -e trace=flock,openat,mkdir,mkdirat,rename,renameat2,unlink,unlinkat,symlink,symlinkat \
		-o "$T/strace2" env ABX_MANIFESTS_DIR="$M" $shim >"$T/shim.out" 2>&1
	check "shim fast path: the tool ran ($(head -c 200 "$T/shim.out"))" grep -q 'hello 1.0.0' "$T/shim.out"
	grep -E 'flock\(|O_WRONLY|O_RDWR|O_CREAT|mkdir|rename|unlink|symlink' "$T/strace2" | grep -v ENOENT >"$T/wrote"
	w=$(head -3 "$T/wrote" | cut -c1-160 | tr '\n' ' ')
	check "shim fast path: no flock and no write${w:+ ($w)}" test ! -s "$T/wrote"
	check "fast path: proved by the proof list, no file of the tree opened" sh -c \
		"grep -q 'hello/.installed.proof' '$T/strace' && ! grep -q '\"data.bin\"' '$T/strace'"
	# durability: a file of 128 KiB or more (ARC_WRITEBACK_MIN) has its
	# own writeback started as it is written (sync_file_range, no wait),
	# a smaller one (all of hello's) is left to the syncfs, as is a small
	# copy kept in the cache; the download's is started; the one syncfs (the whole
	# filesystem, other processes' data too) is the one before the
	# publishing rename: no syncfs while the tree is staged (from a URL
	# of its own: hello's downloads are counted)
	cp "$W/hello-1.0.0.tgz" "$W/synced-1.0.0.tgz"
	mkdir -p "$T/man3" && (M=$T/man3 && mkman hello /f/synced-1.0.0.tgz "$H")
	strace -f -qq -y -e trace=sync_file_range,syncfs,rename,renameat,renameat2 -o "$T/strace3" \
		"$BIN" prepare --keep-cache -q --manifests "$T/man3" --tools-dir "$T/tsync" --cache "$T/csync" --only hello >/dev/null 2>&1
	check "durability: one syncfs, before the rename that publishes the tree" awk '
		/syncfs\(/ { n++; at = NR }
		/rename.*\/\.staging\/hello-[^\/]*\/tree", / && !pub { pub = NR }
		END { exit !(n == 1 && pub > at) }' "$T/strace3"
	for f in bin/hello share/data.bin; do
		check "durability: the small staged $f is left to the syncfs" sh -c \
			"! grep -Eq 'sync_file_range\\([0-9]+<[^>]*/\\.staging/hello-[^/]*/tree/$f>' '$T/strace3'"
	done
	check "durability: ... as are the small copies kept in the cache; the download's writeback started" sh -c \
		"! grep -Eq 'sync_file_range\\([0-9]+<$T/csync/\\.tmp-tree-copies-[^/]*/[0-9]+>' '$T/strace3' &&
		grep -Eq 'sync_file_range\\([0-9]+<$T/csync/\\.tmp-[0-9a-f]+>' '$T/strace3'"
else
	skip "fast path under strace" "strace not installed"
fi

# a difference the proof list sees sends the fast path to the content digest
D1=$T/t1/hello/1.0.0-$PLATFORM
touch "$D1/share/data.bin"
prep "$T/t1" --only hello
expect "touched, content unchanged: still ready by the content digest" 0 "hello 1.0.0: ready"
cp "$T/t1/hello/.installed.proof" "$T/proof.saved"
printf x >>"$T/t1/hello/.installed.proof"
prep "$T/t1" --only hello
expect "a proof list that is not the marker's: ready by the content digest" 0 "hello 1.0.0: ready"
rm "$T/t1/hello/.installed.proof"
prep "$T/t1" --only hello
expect "no proof list: ready by the content digest" 0 "hello 1.0.0: ready"
cp "$T/proof.saved" "$T/t1/hello/.installed.proof"
sed 's/"proof_sha256":"[0-9a-f]*",//' "$T/t1/hello/.installed.json" >"$T/marker.old"
cat "$T/marker.old" >"$T/t1/hello/.installed.json"
check "a marker from before proof lists" sh -c "! grep -q proof_sha256 '$T/t1/hello/.installed.json'"
prep "$T/t1" --only hello
expect "a marker from before proof lists: still ready" 0 "hello 1.0.0: ready"
t=$(stat -c %y "$D1/share/data.bin")
printf 'XXXX' | dd of="$D1/share/data.bin" conv=notrunc status=none
touch -d "$t" "$D1/share/data.bin"
prep "$T/t1" --only hello
expect "same size, mtime set back: the content digest sees it, reinstalled" 0 "hello 1.0.0: installed"
check "the reinstall has a proof list again" grep -q '"proof_sha256":"[0-9a-f]\{64\}"' "$T/t1/hello/.installed.json"
t=$(stat -c %y "$D1/share")
: >"$D1/share/planted" && rm "$D1/share/planted" && touch -d "$t" "$D1/share"
prep "$T/t1" --only hello
expect "a directory changed and its mtime set back, content equal: ready" 0 "hello 1.0.0: ready"
check "no download for any of these" test "$(gets hello-1.0.0.tgz)" -eq 1

# ---- verify ------------------------------------------------------------------------
run "$BIN" verify --manifests "$M" --tools-dir "$T/t1"
expect "verify: unchanged tree" 0 "OK hello 1.0.0"
run "$BIN" verify --manifests "$M" --tools-dir "$T/t1" --sbom
expect "verify --sbom exits 0" 0 '"bomFormat":"CycloneDX"'
check "verify --sbom is CycloneDX 1.5 JSON with the artifact hash" python3 -c "
import json,sys
d=json.load(open('$T/out'))
assert d['specVersion']=='1.5'
c=d['components'][0]
assert c['name']=='hello' and c['hashes'][0]['content']=='$H', c
"
run "$BIN" verify "$W/hello-1.0.0.tgz" --sha256 "$H"
expect "verify FILE --sha256: match" 0 "OK"
run "$BIN" verify "$W/hello-1.0.0.tgz" --sha256 "$(printf '%064d' 0)"
expect "verify FILE --sha256: mismatch" 1 "" "install.checksum_mismatch"

# ---- drift -------------------------------------------------------------------------
echo tampered >>"$T/t1/hello/1.0.0-$PLATFORM/share/data.bin"
touch "$T/t1/hello/1.0.0-$PLATFORM/planted"
run "$BIN" verify --manifests "$M" --tools-dir "$T/t1"
expect "verify: drift exits 3" 3 "DRIFT hello"
check "verify names the changed file" grep -q "changed share/data.bin" "$T/out"
check "verify names the added file" grep -q "added planted" "$T/out"
run "$BIN" verify --manifests "$M" --tools-dir "$T/t1" --json hello
expect "verify --json: drift" 3 '"state":"drift"'
prep "$T/t1" --only hello
expect "a drifted tree is reinstalled" 0 "hello 1.0.0: installed"
check "the reinstall came from the cache" test "$(gets hello-1.0.0.tgz)" -eq 1
check "the planted file is gone" test ! -e "$T/t1/hello/1.0.0-$PLATFORM/planted"
run "$BIN" verify --manifests "$M" --tools-dir "$T/t1"
expect "verify after the reinstall" 0 "OK hello"
# manifest drift: the manifest changed (a new description), the marker is stale
mkman hello /f/hello-1.0.0.tgz "$H" '"description":"changed"'
run "$BIN" verify --manifests "$M" --tools-dir "$T/t1"
expect "verify: manifest drift exits 3" 3 "manifest changed"
prep "$T/t1" --only hello
expect "manifest drift reinstalls" 0 "hello 1.0.0: installed"
check "the marker has the new manifest digest" grep -q "$(sha "$M/hello.json")" "$T/t1/hello/.installed.json"

# ---- checksum mismatch and backoff ------------------------------------------------
mktool bad 1.0.0
mkman bad /f/bad-1.0.0.tgz "$H"
prep "$T/t2" --only bad
expect "checksum mismatch exits 1" 1 "" "install.checksum_mismatch"
check "the error names expected and actual digests" grep -q "expected sha256 $H, got $(sha "$W/bad-1.0.0.tgz")" "$T/err"
check "nothing published" test ! -e "$T/t2/bad/1.0.0-$PLATFORM" -a ! -e "$T/t2/bad/.installed.json"
check "nothing entered the cache" sh -c "test -z \"\$(ls -A '$T/t2/.cache')\""
check "staging is clean" sh -c "test -z \"\$(ls -A '$T/t2/.staging')\""
check "audit: a failed finish" grep -q '"tool":"bad".*"ok":false,.*"code":"install.checksum_mismatch"' "$T/audit.jsonl"
n=$(gets bad-1.0.0.tgz)
prep "$T/t2" --only bad
expect "a second process sees the backoff" 1 "" "install.backoff"
check "... its fix on the CLI says --force, not Retry-After" sh -c "grep -q 'fix: run .agent-sandbox-server prepare --force.' '$T/err' && ! grep -q 'Retry-After' '$T/err'"
check "backoff: no new download" test "$(gets bad-1.0.0.tgz)" -eq "$n"
check "backoff recorded on disk with its failure count" grep -q '"failures":1' "$T/t2/.locks/bad.backoff"
prep "$T/t2" --only bad --force
expect "--force retries at once" 1 "" "install.checksum_mismatch"
check "--force downloaded again" test "$(gets bad-1.0.0.tgz)" -eq $((n + 1))
check "the backoff doubles" grep -q '"failures":1,.*"seconds":30\|"failures":2,.*"seconds":60' "$T/t2/.locks/bad.backoff"

# ---- verify.argv fails ------------------------------------------------------------
mktool vfail 1.0.0
mkman vfail /f/vfail-1.0.0.tgz "$(sha "$W/vfail-1.0.0.tgz")"
sed -i 's/"expect":"vfail 1.0.0"/"expect":"vfail 9.9"/' "$M/vfail.json"
prep "$T/t2" --only vfail
expect "a failing verify.argv: install.failed" 1 "" "install.failed"
check "... with details.phase verify" grep -q 'verify output lacks "vfail 9.9"' "$T/err"
check "... and nothing published" test ! -e "$T/t2/vfail/1.0.0-$PLATFORM" -a ! -e "$T/t2/bin/vfail"
run "$BIN" prepare --keep-cache --json --manifests "$M" --tools-dir "$T/t2" --only vfail --force
check "--json reports details.phase verify" grep -q '"details":{"phase":"verify"}' "$T/out"

# ---- the one entry cap -------------------------------------------
# Built with Python's tarfile, not our code. 120 000 empty files in one
# directory: above the 65 536 at which the tree listing gave up after
# extraction and the 100 000 of the digest walk, below the 200 000 cap.
mkwide() { # NAME COUNT MODE: MODE files (COUNT files in pkg/many) or dirs (COUNT repeats of pkg/many/)
	python3 - "$W/$1-1.0.0.tgz" "$1" "$2" "$3" <<'PYEOF'
import io, sys, tarfile
out, name, count, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with tarfile.open(out, "w:gz", compresslevel=1, format=tarfile.USTAR_FORMAT) as tf:
    script = ("#!/bin/sh\necho '%s 1.0.0'\n" % name).encode()
    ti = tarfile.TarInfo("pkg/bin/" + name); ti.size = len(script); ti.mode = 0o755
    tf.addfile(ti, io.BytesIO(script))
    for i in range(count):
        ti = tarfile.TarInfo("pkg/many/f%06d" % i if mode == "files" else "pkg/many")
        if mode != "files":
            ti.type = tarfile.DIRTYPE; ti.mode = 0o755
        tf.addfile(ti)
PYEOF
}
mkwide wide 120000 files
mkman wide /f/wide-1.0.0.tgz "$(sha "$W/wide-1.0.0.tgz")"
prep "$T/tw" --only wide
expect "a directory of 120 000 entries installs (was: too many entries)" 0 "wide 1.0.0: installed"
check "... all of them" test "$(ls "$T/tw/wide/1.0.0-$PLATFORM/many" | wc -l)" -eq 120000
run "$BIN" verify --manifests "$M" --tools-dir "$T/tw" wide
expect "... and verifies" 0 "OK wide"
# 200 001 entries in all (the tool, then pkg/many/ repeated, cheap to extract):
# refused while extracting, naming the cap.
mkwide over 200000 dirs
mkman over /f/over-1.0.0.tgz "$(sha "$W/over-1.0.0.tgz")"
run "$BIN" prepare --keep-cache --json --manifests "$M" --tools-dir "$T/tw" --only over
check "over the entry cap: install.failed" grep -q '"code":"install.failed"' "$T/out"
check "... during extraction, with the rule and the limit" \
	grep -q '"details":{"phase":"extract","rule":"max_entries","limit":200000}' "$T/out"
check "... and the message names the cap" grep -q 'more than 200000 entries (the entry cap)' "$T/out"
check "... and nothing published" test ! -e "$T/tw/over/1.0.0-$PLATFORM" -a ! -e "$T/tw/bin/over"
rm -rf "$T/tw"

# ---- 8 concurrent installers -------------------------------------------------------
mktool conc 1.0.0
mkman conc /f/conc-1.0.0.tgz "$(sha "$W/conc-1.0.0.tgz")"
for i in 1 2 3 4 5 6 7 8; do
	"$BIN" prepare --keep-cache -q --manifests "$M" --tools-dir "$T/t3" --only conc >"$T/c$i.out" 2>"$T/c$i.err" &
	eval "pid$i=$!"
done
allok=1
for i in 1 2 3 4 5 6 7 8; do
	eval "wait \$pid$i" || { allok=0; echo "installer $i: $(cat "$T/c$i.err")" >&2; }
done
check "8 concurrent prepare: all exit 0" test $allok -eq 1
check "8 concurrent prepare: exactly one download" test "$(gets conc-1.0.0.tgz)" -eq 1
check "8 concurrent prepare: one tree" test "$(ls "$T/t3/conc" | wc -l)" -eq 1
run "$BIN" verify --manifests "$M" --tools-dir "$T/t3" conc
expect "8 concurrent prepare: the tree verifies" 0 "OK conc"

# ---- the test hook: only in the test build, never in production ---------------------
# ABX_TEST_PAUSE is compiled into $BIN_HOOKS only (static.sh: the release
# binary has no such string): the release binary installs straight through;
# the test build honours "environment": "production" from the configuration
# file as it does the variable.
run env ABX_TEST_PAUSE=download timeout 20 "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/tp1" --only hello
expect "ABX_TEST_PAUSE does not stall the release binary" 0 "hello 1.0.0: installed"
check "... nor says it paused" sh -c "! grep -q 'paused at' '$T/err'"
echo '{"environment": "production"}' >"$T/prod.json"
run env ABX_TEST_PAUSE=download timeout 20 "$BIN_HOOKS" prepare --keep-cache --config "$T/prod.json" --manifests "$M" \
	--tools-dir "$T/tp2" --only hello
expect "the test build: production in the configuration file stops the stall" 0 "hello 1.0.0: installed"
check "... nor says it paused" sh -c "! grep -q 'paused at' '$T/err'"

# ---- kill -9 at each phase, then a retry with no clean-up ---------------------------
for phase in download extract publish; do
	mktool "k$phase" 1.0.0
	# big enough that extraction reports progress (and pauses) part-way
	head -c 9000000 /dev/urandom >"$T/src/pkg/share/big.bin"
	tar czf "$W/k$phase-1.0.0.tgz" -C "$T/src" pkg
	mkman "k$phase" "/f/k$phase-1.0.0.tgz" "$(sha "$W/k$phase-1.0.0.tgz")"
	ABX_TEST_PAUSE=$phase "$BIN_HOOKS" prepare --keep-cache -q --manifests "$M" --tools-dir "$T/t4" --only "k$phase" \
		>"$T/k.out" 2>"$T/k.err" &
	kp=$!
	if wait_for_line "$T/k.err" "paused at $phase" 20; then
		check "kill -9 during $phase: no tree visible" test ! -e "$T/t4/k$phase/1.0.0-$PLATFORM"
		check "kill -9 during $phase: no marker" test ! -e "$T/t4/k$phase/.installed.json"
		check "during $phase: .progress.json reports the phase and the pid" \
			grep -q "\"phase\":\"$phase\".*\"pid\":$kp" "$T/t4/k$phase/.progress.json"
		kill -9 $kp
		wait $kp 2>/dev/null
		prep "$T/t4" -q --only "k$phase"
		expect "kill -9 during $phase: the retry succeeds" 0
		run "$BIN" verify --manifests "$M" --tools-dir "$T/t4" "k$phase"
		expect "kill -9 during $phase: the retried tree verifies" 0 "OK k$phase"
	else
		kill -9 $kp 2>/dev/null
		not_ok "kill -9 during $phase" "never paused: $(cat "$T/k.err")"
	fi
done
# kill -9 in the middle of placing an extracted tree: no half tree, the retry places it
prep "$T/t4" -q --only kextract
ABX_TEST_PAUSE=place "$BIN_HOOKS" prepare --keep-cache -q --manifests "$M" --tools-dir "$T/t4p" --cache "$T/t4/.cache" --only kextract \
	>"$T/k.out" 2>"$T/k.err" &
kp=$!
if wait_for_line "$T/k.err" "paused at place" 20; then
	check "kill -9 during place: no tree visible" test ! -e "$T/t4p/kextract/1.0.0-$PLATFORM"
	check "kill -9 during place: a partial copy, under a work name only" sh -c "ls -d '$T/t4p/.staging/'*/.abx-place-* >/dev/null"
	kill -9 $kp
	wait $kp 2>/dev/null
	prep "$T/t4p" --only kextract --cache "$T/t4/.cache"
	expect "kill -9 during place: the retry succeeds" 0
	check "... placed from the tree again (the entry was not harmed)" grep -q "kextract 1.0.0: placed" "$T/err"
	run "$BIN" verify --manifests "$M" --tools-dir "$T/t4p" kextract
	expect "kill -9 during place: the retried tree verifies" 0 "OK kextract"
else
	kill -9 $kp 2>/dev/null
	not_ok "kill -9 during place" "never paused: $(cat "$T/k.err")"
fi
check "kill -9: the partial download never entered the cache under its name" sh -c \
	"for f in '$T/t4/.cache'/*; do case \$f in */.tmp-*|*/trees) ;; *) [ \"\$(sha256sum \"\$f\" | cut -c1-64)\" = \"\$(basename \"\$f\")\" ] || exit 1 ;; esac; done"

# ---- staging collection --------------------------------------------------------------
mkdir -p "$T/t5/.staging/old-abc/tree" "$T/t5/.staging/fresh-def"
touch -d '2 hours ago' "$T/t5/.staging/old-abc"
chmod 700 "$T/t5"
prep "$T/t5" -q --only hello
expect "install with stale staging present" 0
check "staging older than an hour is collected" test ! -e "$T/t5/.staging/old-abc"
check "fresh staging is left alone" test -d "$T/t5/.staging/fresh-def"

# ---- offline, cache, mirrors ------------------------------------------------------------
run "$BIN" fetch --manifests "$M" --only hello --cache "$T/cache" --platform all
expect "fetch --only fills the cache" 0
check "fetch: the artifact is in the cache" test -f "$T/cache/$H"
n=$(gets hello-1.0.0.tgz)
run env ABX_SERVER_INSTALL_MODE=offline "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/t6" --cache "$T/cache" --only hello
expect "offline with the cache installs" 0 "installed"
check "offline: no network request" test "$(gets hello-1.0.0.tgz)" -eq "$n"
run env ABX_SERVER_INSTALL_MODE=offline "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/t7" --cache "$T/nocache" --only hello
expect "offline without the cache: install.disabled" 1 "" "install.disabled"
check "offline: the error names the missing digest" grep -q "sha256:$H" "$T/err"
check "offline without cache: no network request" test "$(gets hello-1.0.0.tgz)" -eq "$n"
run env ABX_INSTALL_MIRROR="file://$T/cache" "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/t8" --only hello
expect "a cache-shaped mirror directory serves the artifact" 0 "installed"
check "mirror directory: no network request" test "$(gets hello-1.0.0.tgz)" -eq "$n"
run env ABX_INSTALL_MIRROR="https://localhost:$P/f/nomirror/{path}" "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/t9" --only hello
expect "a tarball mirror whose host is not in install.allow_hosts is refused" 2 "" \
	"config.invalid: install.mirrors.tarball: the mirror's host localhost:$P is not in install.allow_hosts"
run env ABX_INSTALL_MIRROR="https://localhost:$P/f/nomirror/{path}" ABX_SERVER_INSTALL_ALLOW_HOSTS="localhost:$P" "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/t9" --only hello
expect "a failing mirror template falls back to the origin" 0 "installed"
check "the mirror URL template was tried" grep -q "GET /f/nomirror/f/hello-1.0.0.tgz" "$T/req.log"
# Error answers that end by close (Connection: close, no Content-Length):
# the client read their reason from the freed connection (SIGSEGV)
run env ABX_INSTALL_MIRROR="https://localhost:$P/closing/503/{path}" ABX_SERVER_INSTALL_ALLOW_HOSTS="localhost:$P" \
	"$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/t9b" --only hello
expect "a mirror answering 503 with Connection: close falls back to the origin, no crash" 0 "installed"
check "... the mirror was asked" grep -q "GET /closing/503/f/hello-1.0.0.tgz" "$T/req.log"
mkman gone /closing/404/gone-1.0.0.tgz "$H"
prep "$T/t9c" --only gone
expect "an origin answering 404 with Connection: close: exit 1, no crash" 1 "" \
	"install.failed: gone 1.0.0: fetching https://localhost:$P/closing/404/gone-1.0.0.tgz: http.status: "
check "... naming the status and its reason" grep -q "HTTP 404 Not Found" "$T/err"

# ---- redirects outside hosts --------------------------------------------------------------
mkman redir "/to?https://127.0.0.1:$P/f/hello-1.0.0.tgz" "$H"
prep "$T/t10" --only redir
expect "a redirect to a host outside hosts is refused" 1 "" "http.redirect"
check "the redirect target got no request" sh -c "! grep -q 'host=127.0.0.1' '$T/req.log'"

# ---- prepare --prune: what no manifest references, never what an install holds
mktool pr 1.0.0
mkman pr /f/pr-1.0.0.tgz "$(sha "$W/pr-1.0.0.tgz")"
PRS=$(sha "$W/pr-1.0.0.tgz")
PD=$T/tp
prep "$PD" --only pr
expect "prune: the tool installs (cache kept)" 0 "pr 1.0.0: installed"
prune_junk() { # what an older version, an interrupted run and other manifests left
	mkdir -p "$PD/pr/0.9.0-$PLATFORM/bin" "$PD/.staging/pr-0123abcd/tree" "$PD/.cache/trees/sha256-$(sha_str old)-tar1-s1/tree"
	head -c 300000 /dev/urandom >"$PD/pr/0.9.0-$PLATFORM/bin/pr"
	head -c 40000 /dev/urandom >"$PD/.staging/pr-0123abcd/tree/x"
	head -c 50000 /dev/urandom >"$PD/.cache/$(sha_str blob)"
	sha_str blob >"$PD/.cache/sha512-$(sha_str alias)$(sha_str alias)"
	head -c 20000 /dev/urandom >"$PD/.cache/trees/sha256-$(sha_str old)-tar1-s1/tree/f"
	echo '{}' >"$PD/.cache/trees/gone-0.1.0-$PLATFORM-glibc.verified"
	head -c 7000 /dev/urandom >"$PD/.cache/.tmp-0123456789abcdef"
}
prune_junk
_keep="$PD/pr/1.0.0-$PLATFORM/bin/pr $PD/.cache/$PRS"
_gone="$PD/pr/0.9.0-$PLATFORM $PD/.staging/pr-0123abcd $PD/.cache/$(sha_str blob) $PD/.cache/sha512-$(sha_str alias)$(sha_str alias) $PD/.cache/trees/sha256-$(sha_str old)-tar1-s1 $PD/.cache/trees/gone-0.1.0-$PLATFORM-glibc.verified $PD/.cache/.tmp-0123456789abcdef"
_tmpdu=$(du -s -B1 "$PD/.cache/.tmp-0123456789abcdef" | cut -f1)
_du=0
for g in $_gone; do _du=$((_du + $(du -s -B1 "$g" | cut -f1))); done
run "$BIN" prepare --prune --dry-run --manifests "$M" --tools-dir "$PD"
expect "prune --dry-run: what it would free, in bytes as du counts them" 0 "in 7 entries ($_du bytes)"
check "... removing nothing" sh -c "for g in $_gone; do test -e \$g || exit 1; done"
# an install that holds pr's lock: its trees, staging and the cache's blobs stay
mkdir -p "$PD/.locks" && : >>"$PD/.locks/pr.lock"
bg flock "$PD/.locks/pr.lock" sh -c "touch '$T/pr.held'; while [ ! -e '$T/pr.release' ]; do sleep 0.05; done"
_holder=$BGPID
wait_until 10 "test -e '$T/pr.held'"
run "$BIN" prepare --prune --manifests "$M" --tools-dir "$PD"
expect "prune beside a held install lock" 0 "in 1 entries ($_tmpdu bytes)" "pr: an install holds its lock"
check "... says the cache is kept" grep -q "an install is running: the cache keeps its downloads and extracted trees" "$T/err"
check "... only the dead temporary file went" sh -c "test ! -e '$PD/.cache/.tmp-0123456789abcdef' && test -e '$PD/pr/0.9.0-$PLATFORM' && test -e '$PD/.staging/pr-0123abcd' && test -e '$PD/.cache/$(sha_str blob)'"
touch "$T/pr.release"
wait_exit "$_holder" 10
prune_junk
run "$BIN" prepare --prune --manifests "$M" --tools-dir "$PD"
expect "prune: frees what no manifest references" 0 "in 7 entries ($_du bytes)"
check "... it is gone" sh -c "for g in $_gone; do test ! -e \$g || exit 1; done"
check "... what the manifest pins stays" sh -c "for k in $_keep; do test -e \$k || exit 1; done && ls '$PD/.cache/trees' | grep -q '^sha256-$PRS-'"
prep "$PD" --only pr
expect "prune: the tool is still ready" 0 "pr 1.0.0: ready"
run "$BIN" verify --manifests "$M" --tools-dir "$PD" pr
expect "... and verifies" 0 "OK pr"
run "$BIN" prepare --prune --json --manifests "$M" --tools-dir "$PD"
check "prune --json: nothing left to free, as JSON" python3 -c "
import json; d = json.load(open('$T/out'))
assert d == {'freed_bytes': 0, 'entries': 0, 'dry_run': False, 'ok': True}, d"
run "$BIN" prepare --prune --only pr --manifests "$M" --tools-dir "$PD"
expect "--prune with --only is a usage error" 2 "" "--prune goes with neither"

# ---- no space, modes, unpinned ----------------------------------------------------------------
mkman huge /f/hello-1.0.0.tgz "$H" '"description":"x"' bin/hello
sed -i 's/"size_hint_mb":1/"size_hint_mb":900000/' "$M/huge.json"
prep "$T/t11" --only huge
expect "free space below 2 x size_hint_mb: install.no_space" 1 "" "install.no_space"
run env ABX_SERVER_INSTALL_MODE=off "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/t12" --only hello
expect "mode off: install.disabled" 1 "" "install.disabled"
check "mode off names its source" grep -q "ABX_SERVER_INSTALL_MODE" "$T/err"
prep "$T/t13" -q --only hello
ln -s "$BIN" "$T/t13/bin/hello2" 2>/dev/null
mktool lazy 1.0.0
mkman lazy /f/lazy-1.0.0.tgz "$(sha "$W/lazy-1.0.0.tgz")"
ln -s "$BIN" "$T/t13/bin/lazy"
run env ABX_SERVER_INSTALL_MODE=build ABX_MANIFESTS_DIR="$M" "$T/t13/bin/lazy"
expect "mode build: the shim answers install.required" 1 "" "install.required"
run env ABX_MANIFESTS_DIR="$M" "$T/t13/bin/lazy" x
expect "mode lazy: the shim installs on first exec" 0 "lazy 1.0.0"
run env ABX_SERVER_INSTALL_MODE=build "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/t14" --only hello
expect "mode build: prepare installs" 0 "installed"

mkman unp /f/hello-1.0.0.tgz "" "" bin/hello
sed -i 's/unp 1.0.0/hello 1.0.0/' "$M/unp.json"
prep "$T/t15" --only unp
expect "a manifest without a digest does not load (exit 2)" 2 "" "install.manifest_invalid"
check "... naming the JSON path" grep -q 'sha256: missing' "$T/err"
run env ABX_INSTALL_UNPINNED=1 ABX_SERVER_ENV=production "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/t15" --only unp
expect "ABX_INSTALL_UNPINNED is refused in production" 2 "" "production"
run env ABX_INSTALL_UNPINNED=1 "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/t15" --only unp
expect "ABX_INSTALL_UNPINNED=1 installs with a loud warning" 0 "installed" "UNPINNED INSTALL"
check "the unpinned install is audited" grep -q '"event":"install.unpinned","tool":"unp"' "$T/audit.jsonl"

# ---- hostile archives end to end: refused, nothing published, nothing outside ----------------
python3 "$FIXTURES/mkarchives.py" "$T/arch" "$T/outside" >/dev/null
for a in dotdot.tar absolute.tar symlink_out.tar hardlink_out.tar through_symlink_abs.tar device.tar \
	fifo.tar setuid.tar overlay_dir_link.tar bomb.tar.gz writable.tar zip_dotdot.zip; do
	[ -f "$T/arch/$a" ] || { not_ok "hostile $a" "fixture missing"; continue; }
	cp "$T/arch/$a" "$W/$a"
	n=$(echo "$a" | tr -c 'a-z0-9\n' '-' | sed 's/-*$//')
	mkman "$n" "/f/$a" "$(sha "$W/$a")"
	sed -i 's/"strip_components":1/"strip_components":0/' "$M/$n.json"
	prep "$T/t16" --only "$n"
	if [ "$RC" = 1 ] && grep -q "install.failed" "$T/err" && [ ! -e "$T/t16/$n/1.0.0-$PLATFORM" ] &&
		[ ! -e "$T/t16/$n/.installed.json" ] && [ -z "$(ls -A "$T/outside")" ] && [ ! -e /tmp/x/evil ]; then
		ok "hostile archive $a: refused, nothing published or created outside"
	else
		not_ok "hostile archive $a" "exit $RC; $(head -c 300 "$T/err"); outside: $(ls -A "$T/outside")"
	fi
done
# A zip entry compressed with PPMd (method 98): the release build decodes
# stored and deflate entries only (tools/deps.sh leaves PPMd out).
cp "$T/arch/zip_ppmd.zip" "$W/zip_ppmd.zip"
mkman zppmd /f/zip_ppmd.zip "$(sha "$W/zip_ppmd.zip")"
sed -i 's/"strip_components":1/"strip_components":0/' "$M/zppmd.json"
prep "$T/t16" --only zppmd
expect "a PPMd zip entry is refused, the method named" 1 "" "Unsupported ZIP compression method (98"
check "... nothing published" test ! -e "$T/t16/zppmd/1.0.0-$PLATFORM"
cp "$T/arch/zip_encrypted.zip" "$W/zip_encrypted.zip"
mkman zenc /f/zip_encrypted.zip "$(sha "$W/zip_encrypted.zip")"
sed -i 's/"strip_components":1/"strip_components":0/' "$M/zenc.json"
prep "$T/t16" --only zenc
expect "an encrypted zip entry is refused as such" 1 "" "Encrypted entries are not supported"
check "... nothing published" test ! -e "$T/t16/zenc/1.0.0-$PLATFORM"
# pax ACLs (SCHILY.acl.*, one unparsable) and a Solaris ACL header (an
# unparsable one, which the reader used to refuse): dropped unread by the
# release build's tar reader (tools/deps.sh), so the tree is the one without
# them and no ACL (system.posix_acl_* attribute) is set on what was written.
for a in acl noacl; do
	cp "$T/arch/$a.tar" "$W/$a.tar"
	mkman "$a" "/f/$a.tar" "$(sha "$W/$a.tar")"
	prep "$T/t16" --only "$a"
	expect "a tar with$([ $a = acl ] || echo out) pax ACLs installs" 0 "$a 1.0.0: installed"
done
check "... the same tree as without them" diff -r "$T/t16/acl/1.0.0-$PLATFORM" "$T/t16/noacl/1.0.0-$PLATFORM"
check "... no ACL applied" python3 -c "import os,sys; d=sys.argv[1]; sys.exit(any(os.listxattr(os.path.join(d,n)) for n in ('f','d')))" \
	"$T/t16/acl/1.0.0-$PLATFORM"
check "hostile archives: staging is clean" sh -c "test -z \"\$(ls -A '$T/t16/.staging')\""

# ---- read-only directories (as another user, since root writes anywhere) --------------------
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	reachable_copy "$BIN"
	RO=${REACHABLE%/*}
	mv "$REACHABLE" "$RO/abx"
	mkdir -p "$RO/man" && cp "$M/hello.json" "$RO/man/" && chmod -R a+rX "$RO/man"
	cp "$T/pki/ca.pem" "$RO/ca.pem" && chmod 644 "$RO/ca.pem"
	mkdir "$RO/ro" && chown 65534:65534 "$RO/ro" && chmod 500 "$RO/ro"
	asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent \
		ABX_SERVER_STATE_DIR="$RO/nostate" ABX_SERVER_AUDIT_FILE= SSL_CERT_FILE="$RO/ca.pem" "$@"; }
	run asnobody "$RO/abx" prepare --manifests "$RO/man" --tools-dir "$RO/ro" --only hello
	expect "read-only tools directory: install.read_only" 1 "" "install.read_only"
	check "... prepare's fix does not tell the user to run prepare" sh -c "! grep -q 'fix: .*run .agent-sandbox-server prepare' '$T/err'"
	check "install.read_only lists the directories tried" sh -c "grep -q '$RO/ro' '$T/err' && grep -q '/opt/agent-sandbox/tools' '$T/err' && grep -q '$RO/nostate/tools' '$T/err'"
	# a tree prepared at build time by root, used read-only with nothing writable
	"$RO/abx" prepare -q --manifests "$RO/man" --tools-dir "$RO/prepared" --only hello >/dev/null 2>&1
	run asnobody "$RO/abx" prepare --manifests "$RO/man" --tools-dir "$RO/prepared" --only hello
	expect "prepared root-owned tree: ready with nothing writable" 0 "ready"
	run asnobody env ABX_MANIFESTS_DIR="$RO/man" ABX_TOOLS_DIR="$RO/prepared" "$RO/prepared/bin/hello"
	expect "prepared root-owned tree: the shim runs it" 0 "hello 1.0.0"
	check "nothing was written as the other user" sh -c "test -z \"\$(find '$RO' -user 65534 ! -path '$RO/ro')\""
	# an explicit directory that exists but cannot be written is refused before
	# any download, even with a writable default after it
	mkdir "$RO/st" && chown 65534:65534 "$RO/st" && chmod 700 "$RO/st"
	mkdir "$RO/rox" && chmod 755 "$RO/rox"
	G0=$(gets hello-1.0.0.tgz)
	run asnobody env ABX_SERVER_STATE_DIR="$RO/st" ABX_TOOLS_DIR="$RO/rox" "$RO/abx" prepare --manifests "$RO/man" --only hello
	expect "a read-only explicit ABX_TOOLS_DIR: install.read_only, not another directory" 1 "" \
		"install.read_only: tools directory $RO/rox (env ABX_TOOLS_DIR) exists but cannot be written"
	check "... with a specific fix" grep -q "make it writable by uid 65534, or name a writable one (env ABX_TOOLS_DIR)" "$T/err"
	check "... before any download" test "$(gets hello-1.0.0.tgz)" = "$G0"
	check "... and nothing installed in the state directory's tools" test ! -e "$RO/st/tools/hello"
	# the default /opt/agent-sandbox/tools read-only: the fallback is said
	rm -rf "$RO/st/tools"
	if unshare -m true 2>/dev/null; then
		run unshare -m sh -c "mount --make-rprivate / && mount -t tmpfs tmpfs /opt && mkdir -p /opt/agent-sandbox/tools &&
			exec setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent ABX_SERVER_STATE_DIR='$RO/st' \
			ABX_SERVER_AUDIT_FILE= SSL_CERT_FILE='$RO/ca.pem' '$RO/abx' prepare --manifests '$RO/man' --only hello"
		expect "a read-only default /opt/agent-sandbox/tools falls back to the state directory" 0 "hello 1.0.0: installed"
		check "... and says so on stderr" grep -q "installing hello 1.0.0 into $RO/st/tools, downloading from https://localhost:$P (missing; /opt/agent-sandbox/tools is passed over: not writable" "$T/err"
	else
		skip "a read-only default tools directory" "needs unshare -m"
	fi
	rm -rf "$RO/st" "$RO/rox"
	rm -rf "$RO"
else
	skip "read-only tools directory" "needs root and setpriv"
fi

# ---- a disk that fills mid-install, a missing CA bundle: their own codes and fixes
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
	mkdir -p "$T/full"
	run unshare -m sh -c "mount -t tmpfs -o size=3m tmpfs '$T/full' && exec '$BIN' prepare --manifests '$M' --tools-dir '$T/full/tools' --only kdownload"
	expect "a disk that fills during the download: install.no_space" 1 "" "install.no_space: "
	check "... with its fix, not 'see details.phase'" sh -c "grep -q 'fix: free space' '$T/err' && ! grep -q 'see details.phase' '$T/err'"
	# The space check counts the requires not installed yet: on 16 MiB (15
	# free), a tool of 3 MiB fits alone (6 MiB) and so does its require of
	# 5 MiB (10 MiB), but not both (16 MiB). The require's download waits
	# 1 s, so it is not installed yet when the dependent checks.
	mktool spacedep 1.0.0
	mkman spacedep /slow/1/spacedep-1.0.0.tgz "$(sha "$W/spacedep-1.0.0.tgz")" '"description":"x"'
	sed -i 's/"size_hint_mb":1/"size_hint_mb":5/' "$M/spacedep.json"
	mkman spaceapp /f/hello-1.0.0.tgz "$H" '"requires":["spacedep"]' bin/hello
	sed -i 's/"size_hint_mb":1/"size_hint_mb":3/' "$M/spaceapp.json"
	mkdir -p "$T/full16"
	run unshare -m sh -c "mount -t tmpfs -o size=16m tmpfs '$T/full16' && exec '$BIN' prepare --manifests '$M' --tools-dir '$T/full16/tools' --only spaceapp"
	expect "the space check counts a require not installed yet: install.no_space" 1 "" \
		"install.no_space: spaceapp 1.0.0 needs 16 MiB free (2 x size_hint_mb, its requires' included)"
	rm -f "$M/spacedep.json" "$M/spaceapp.json"
	# A tree that fills the disk while it is extracted (8 MB of zeros from a
	# download of a few KiB, no unpacked_size): install.no_space, not
	# install.failed, and nothing is left of it.
	mktool kzeros 1.0.0
	head -c 8000000 /dev/zero >"$T/src/pkg/share/zeros.bin"
	tar czf "$W/kzeros-1.0.0.tgz" -C "$T/src" pkg
	mkman kzeros /f/kzeros-1.0.0.tgz "$(sha "$W/kzeros-1.0.0.tgz")"
	mkdir -p "$T/fullx"
	run unshare -m sh -c "mount -t tmpfs -o size=3m tmpfs '$T/fullx' && exec '$BIN' prepare --manifests '$M' --tools-dir '$T/fullx/tools' --only kzeros"
	expect "a disk that fills during the extraction: install.no_space" 1 "" "install.no_space: "
	check "... with its fix" grep -q 'fix: free space' "$T/err"
	# unpacked_size (recorded by lock) replaces twice the hint: a tool of
	# 424 MiB with a hint of 450 fits on 600 MiB (twice the hint would be
	# 900), and the same tree said to be 8 MiB is refused on 3 MiB before
	# any download, naming its unpacked size.
	mktool kreal 1.0.0
	mkman kreal /f/kreal-1.0.0.tgz "$(sha "$W/kreal-1.0.0.tgz")" "\"unpacked_size\":{\"$PLATFORM\":444596224}"
	sed -i 's/"size_hint_mb":1/"size_hint_mb":450/' "$M/kreal.json"
	mkdir -p "$T/full600"
	run unshare -m sh -c "mount -t tmpfs -o size=600m tmpfs '$T/full600' && exec '$BIN' prepare --manifests '$M' --tools-dir '$T/full600/tools' --only kreal"
	expect "unpacked_size 424 MiB with a hint of 450 installs on 600 MiB free" 0 "kreal 1.0.0: installed"
	mkman kreal /f/kzeros-1.0.0.tgz "$(sha "$W/kzeros-1.0.0.tgz")" "\"unpacked_size\":{\"$PLATFORM\":8000123}" bin/kzeros
	G0=$(gets kzeros-1.0.0.tgz)
	run unshare -m sh -c "mount -t tmpfs -o size=3m tmpfs '$T/fullx' && exec '$BIN' prepare --manifests '$M' --tools-dir '$T/fullx/tools' --only kreal"
	expect "unpacked_size 8 MiB on 3 MiB: install.no_space before the download" 1 "" \
		"install.no_space: kreal 1.0.0 needs 26 MiB free (unpacked_size 8 MiB, plus a quarter and 16 MiB for downloads and filesystem blocks)"
	check "... nothing downloaded" test "$(gets kzeros-1.0.0.tgz)" = "$G0"
	rm -f "$M/kreal.json" "$M/kzeros.json"
else
	skip "a disk that fills mid-install" "needs root and mount namespaces"
fi
run env SSL_CERT_FILE="$T/no-such-ca.pem" "$BIN" prepare --manifests "$M" --tools-dir "$T/noca" --only hello
expect "a missing CA bundle: tls.no_trust_anchors" 1 "" "tls.no_trust_anchors: "
check "... with its fix, not 'see details.phase'" sh -c "grep -q 'fix: install ca-certificates or set SSL_CERT_FILE' '$T/err' && ! grep -q 'see details.phase' '$T/err'"
# A CA missing from the bundle: the host is named and the fix is the
# CA bundle's, not install.failed's generic one
run env SSL_CERT_FILE="$T/pki/other.crt" "$BIN" prepare --manifests "$M" --tools-dir "$T/unknownca" --only hello
expect "a server whose CA is not in SSL_CERT_FILE: install.failed naming the host and tls.unknown_ca" 1 "" \
	"install.failed: hello 1.0.0: fetching https://localhost:$P/f/hello-1.0.0.tgz: tls.unknown_ca: "
check "... with the CA bundle's fix, not 'see details.phase'" sh -c "grep -q 'fix: add the CA that issued the server.s certificate to SSL_CERT_FILE or SSL_CERT_DIR' '$T/err' && ! grep -q 'details.phase' '$T/err'"
# an unreachable proxy is named as the proxy, not as the download host
CLOSEDP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
run env HTTPS_PROXY="http://127.0.0.1:$CLOSEDP" "$BIN" prepare --manifests "$M" --tools-dir "$T/noproxy" --only hello
expect "an unreachable proxy is named as the proxy" 1 "" \
	"hello: the proxy 127.0.0.1:$CLOSEDP (HTTPS_PROXY) is unreachable: Connection refused"
check "... with the proxy's fix" grep -q "fix: check HTTPS_PROXY and NO_PROXY, and that the proxy runs" "$T/err"
# a name that does not resolve is named as DNS, not as a connect timeout
sed "s/localhost:$P/nonexistent.invalid:$P/g; s/\"hosts\":\[\"localhost\"\]/\"hosts\":[\"nonexistent.invalid\"]/" "$M/hello.json" >"$T/dnsm.json"
mkdir -p "$T/dnsman" && mv "$T/dnsm.json" "$T/dnsman/hello.json"
run nodns "$BIN" prepare --manifests "$T/dnsman" --tools-dir "$T/nodns" --only hello
if [ "$RC" = 125 ]; then
	skip "a name that does not resolve" "needs root and unshare -m"
else
	expect "a name that does not resolve is named as DNS" 1 "" "hello: DNS does not resolve nonexistent.invalid"
	check "... not as a connect within 2 s, with the resolver's fix" sh -c "! grep -q 'within 2 s' '$T/err' && grep -q 'fix: check the host name and the DNS resolver' '$T/err'"
fi
# some requested tools ready, another failed: partial (3)
run "$BIN" prepare --manifests "$M" --tools-dir "$T/partial" --force --only hello bad
expect "one requested tool ready and one failed: exit 3 (partial)" 3 "hello 1.0.0: installed" "install.checksum_mismatch"

# ---- noexec staging (a tmpfs mounted noexec, as root in a private mount namespace) ------------
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
	mkdir -p "$T/noexec"
	run unshare -m sh -c "mount -t tmpfs -o noexec,size=16m tmpfs '$T/noexec' && exec '$BIN' prepare --keep-cache --manifests '$M' --tools-dir '$T/noexec/tools' --only hello"
	expect "noexec staging filesystem: install.noexec" 1 "" "install.noexec"
	check "install.noexec names the mount" grep -q "$T/noexec" "$T/err"
else
	skip "noexec staging" "needs root and mount namespaces"
fi

# --cache DIR whose parent does not exist: created as a tools
# directory is (mkdir -p), and the download kept there, not dropped in silence
prep "$T/t1n" --only hello --force --cache "$T/newparent/sub/cache"
expect "prepare --cache under a missing parent exits 0" 0 "hello 1.0.0: installed"
check "... created the cache and kept the artifact there" sh -c "ls '$T/newparent/sub/cache' | grep -Eq '^[0-9a-f]{64}$'"
: >"$T/notadir"
prep "$T/t1o" --only hello --cache "$T/notadir/cache"
expect "prepare --cache that cannot be created: a coded error before any download" 1 "" \
	"io.error: --cache $T/notadir/cache cannot be created"
check "... with a fix" grep -q "create it, or give --cache a directory you can write" "$T/err"
check "... and nothing installed" test ! -e "$T/t1o/hello"

# --json stays one JSON document whatever a path holds: details.tried names
# a tools directory with a quote and a backslash, and leaves out whole a
# state directory whose tools path does not fit beside it (it was cut into
# '["…",]' before)
long=$T/$(python3 -c "print('d' * 975)")
odd="$T/notadir/q\"u\\ote"
run "$BIN" prepare --json --manifests "$M" --only hello --tools-dir "$odd" --state-dir "$long"
expect "prepare --json with an odd tools directory: install.read_only" 1 '"install.read_only"'
check "... stdout is valid JSON, details.tried names the odd path exactly" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
e = d["tools"][0]["error"]
sys.exit(not (sys.argv[2] in e["details"]["tried"] and sys.argv[2] in e["message"]))' "$T/out" "$odd"
