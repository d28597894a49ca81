#!/bin/sh
# Extraction and tree-digest figures for core/arc and core/fs, side by side
# with tar(1) and sha256sum(1) in the same run. Rows "figure | ours |
# reference | ratio" (tools/benchlib.sh). Run by tools/bench.sh, or alone:
#   BIN=build/agent-sandbox-server TOP=$PWD tools/bench/extract.sh
# EXTRACT_RUNS (default 5) timed runs each, alternating ours and reference;
# EXTRACT_MB (default 80) the fixture's binary, in MiB, its text files
# scaled with it (4000 at 80).
set -u
: "${TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${BIN:=$TOP/build/agent-sandbox-server}"
export TOP BIN
. "$TOP/tools/benchlib.sh"
RUNS=${EXTRACT_RUNS:-5}
MB=${EXTRACT_MB:-80}
out=$TOP/build/bench
mkdir -p "$out"
drv=$out/extract_drv
fix=$out/extract-fixture.tar.gz
[ "$MB" = 80 ] || fix=$out/extract-fixture-$MB.tar.gz

# The driver: core/ as the release build compiles it (musl, -Os, static),
# every release object of core/ so whatever arc and fs call is there.
(cd "$TOP" && make --no-print-directory build/agent-sandbox-server >&2) || exit 1
${MUSL_CC:-musl-gcc} -std=c11 -Os -D_GNU_SOURCE -static -s -Wl,--gc-sections -I"$TOP/core" \
	-I"$TOP/build/deps/musl/include" -o "$drv" "$TOP/tools/bench/extract_drv.c" \
	$(core_objs) -L"$TOP/build/deps/musl/lib" \
	-larchive -lz -lbearssl -lpthread || exit 1

# A Node.js-shaped fixture (one large binary, thousands of small text files,
# a few symlinks), ~100 MiB compressed, generated once and kept in build/.
if [ ! -s "$fix" ]; then
	echo "extract.sh: generating $fix" >&2
	python3 - "$fix" "$MB" <<'PY' || exit 1
import io, random, sys, tarfile
r = random.Random(42)
words = [bytes(r.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(2, 10))) for _ in range(5000)]
text = b" ".join(r.choice(words) for _ in range(900000))  # ~6 MiB of text
def add(tf, name, data, mode=0o644):
    t = tarfile.TarInfo(name); t.size = len(data); t.mode = mode; t.mtime = 1700000000
    tf.addfile(t, io.BytesIO(data))
with tarfile.open(sys.argv[1], "w:gz", compresslevel=6) as tf:
    # the binary: incompressible and compressible halves, like an ELF
    blob = bytearray()
    for i in range(int(sys.argv[2])):
        blob += r.randbytes(1 << 20) if i % 5 else text[: 1 << 20]
    add(tf, "pkg/bin/node", bytes(blob), 0o755)
    for i in range(max(20, 50 * int(sys.argv[2]))):
        n = r.randint(200, 20000); o = r.randint(0, len(text) - n)
        add(tf, "pkg/lib/node_modules/m%02d/f%04d.js" % (i % 60, i), text[o:o + n])
    for i in range(20):
        t = tarfile.TarInfo("pkg/bin/tool%d" % i); t.type = tarfile.SYMTYPE
        t.linkname = "../lib/node_modules/m%02d/f%04d.js" % (i, i); tf.addfile(t)
PY
fi
echo "extract.sh: fixture $(du -k "$fix" | cut -f1) KiB" >&2

work=$(mktemp -d "${TMPDIR:-/tmp}/abx-bench-extract.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

# Median ms of each command over RUNS alternating runs; the target directory
# is emptied (untimed) before every run. Prints "ours ref".
timed() { # mode dir ours-cmd ref-cmd (commands as single shell strings)
	python3 - "$RUNS" "$@" <<'PY'
import shutil, os, subprocess, sys, time, statistics
runs, mode, d, ours, ref = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
t = {ours: [], ref: []}
for i in range(runs + 1):
    for c in (ours, ref):
        if mode == "fresh":
            shutil.rmtree(d, ignore_errors=True); os.mkdir(d)
        s = time.perf_counter()
        p = subprocess.run(c, shell=True, stdout=subprocess.DEVNULL)
        e = time.perf_counter() - s
        if p.returncode != 0:
            print("fail fail"); sys.exit(0)
        if i > 0:  # the first round warms the page cache
            t[c].append(e)
print("%.1f %.1f" % (statistics.median(t[ours]) * 1000, statistics.median(t[ref]) * 1000))
PY
}

x=$work/x
set -- $(timed fresh "$x" "'$drv' x .tar.gz '$fix' '$x'" "tar xzf '$fix' -C '$x'")
sz="~100 MiB"
[ "$MB" = 80 ] || sz="$(du -k "$fix" | cut -f1) KiB"
row "extract $sz tar.gz, ms (vs tar xzf)" "$1" "$2"

rm -rf "$x"; mkdir "$x"
o=$(peak_kib "$drv" x .tar.gz "$fix" "$x")
rm -rf "$x"; mkdir "$x"
r=$(peak_kib tar xzf "$fix" -C "$x")
row "extract peak RSS, KiB (vs tar xzf, tar process only)" "$o" "$r"

rm -rf "$x"; mkdir "$x"
"$drv" x .tar.gz "$fix" "$x" 2>/dev/null || exit 1
set -- $(timed keep "$x" "'$drv' d '$x'" "find '$x' -type f -print0 | xargs -0 sha256sum")
row "tree digest, ms (vs find | xargs sha256sum)" "$1" "$2"
set -- $(timed keep "$x" "'$drv' p '$x'" "find '$x' -printf '%p %m %s %i %C@\n'")
row "proof list, ms (vs find -printf of the same fields)" "$1" "$2"
