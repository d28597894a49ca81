#!/bin/sh
# Bench rows for `fetch`: a 256 MiB download with verification, over local
# HTTPS and plain HTTP, against `curl -o F && sha256sum F` from the same
# server in the same run; its CPU against curl -o /dev/null's; and the peak
# resident memory of each.
# Run by tools/bench.sh (BIN, TOP set); prints "figure | ours | ref | ratio".
set -u
: "${TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$TOP/tools/benchlib.sh"
FETCH_MB=${FETCH_MB:-256}
FETCH_RUNS=${FETCH_RUNS:-3}

if ! has_applet fetch; then
	row "fetch ${FETCH_MB} MiB https, ms" n/a n/a "n/a (no fetch applet)"
	exit 0
fi
if ! command -v curl >/dev/null 2>&1; then
	row "fetch ${FETCH_MB} MiB https, ms" n/a n/a "n/a (curl not installed)"
	exit 0
fi

d=$(mktemp -d "${TMPDIR:-/tmp}/abx-bench-fetch.XXXXXX") || exit 1
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	rm -rf "$d"
}
trap cleanup EXIT
# Both sides trust exactly the fixture's CA: curl --cacert reads that one
# file, and ours would, with an SSL_CERT_DIR inherited from the host, also
# parse every certificate of that directory first (150 on Debian: about
# 60 ms of CPU and up to 300 ms on a loaded machine, before the first byte),
# a start-up cost, not the transfer this row measures.
unset SSL_CERT_DIR
trap 'exit 130' INT TERM
say() { printf 'bench fetch: %s\n' "$*" >&2; }

mkdir "$d/www"
say "making a ${FETCH_MB} MiB file"
head -c "$((FETCH_MB * 1024 * 1024))" /dev/urandom >"$d/www/big.bin"
sha=$(sha256sum "$d/www/big.bin" | cut -d' ' -f1)
sh "$TOP/tests/fixtures/mkcerts.sh" "$d/pki" >/dev/null 2>&1 || { say "mkcerts failed"; exit 0; }

serve() { # NAME [args]: start the fixture server, port in $port
	_n=$1
	shift
	python3 "$TOP/tests/fixtures/httpd.py" --root "$d/www" --log "$d/$_n.log" "$@" >"$d/$_n.port" 2>"$d/$_n.err" &
	pids="$pids $!"
	_i=0
	while [ ! -s "$d/$_n.port" ] && [ $_i -lt 100 ]; do sleep 0.05; _i=$((_i + 1)); done
	port=$(head -1 "$d/$_n.port")
}

# ms of one run of a shell command line
ms() {
	python3 - "$1" <<'EOF'
import subprocess, sys, time
t = time.perf_counter()
r = subprocess.run(["sh", "-c", sys.argv[1]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("fail" if r.returncode else "%.0f" % ((time.perf_counter() - t) * 1000))
EOF
}

# CPU ms (user + system) of one run of a shell command line
cpu() {
	python3 - "$1" <<'EOF'
import os, subprocess, sys
r = subprocess.run(["sh", "-c", sys.argv[1]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
t = os.times()
print("fail" if r.returncode else "%.0f" % ((t.children_user + t.children_system) * 1000))
EOF
}

# Median of FETCH_RUNS alternating runs of ours and the reference.
compare() { # FIGURE URL [null]: null = the reference is curl -o /dev/null alone (the network floor)
	_ours="" _ref=""
	_i=0
	while [ $_i -lt "$FETCH_RUNS" ]; do
		_ours="$_ours $(ms "SSL_CERT_FILE='$d/pki/ca.pem' '$BIN' fetch '$2' --sha256 $sha -o '$d/ours.bin' -q")"
		rm -f "$d/ours.bin"
		if [ "${3:-}" = null ]; then
			_r=$(ms "curl -sS --cacert '$d/pki/ca.pem' -o /dev/null '$2'")
		else
			_r=$(ms "curl -sS --cacert '$d/pki/ca.pem' -o '$d/ref.bin' '$2' && sha256sum '$d/ref.bin' | grep -q $sha")
		fi
		_ref="$_ref $_r"
		rm -f "$d/ref.bin"
		_i=$((_i + 1))
	done
	row "$1" "$(echo $_ours | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')" \
		"$(echo $_ref | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')"
}

serve https --cert "$d/pki/good.pem" --key "$d/pki/good.key"
hport=$port
serve http
pport=$port

say "https: fetch --sha256 vs curl -o + sha256sum ($FETCH_RUNS runs each)"
compare "fetch ${FETCH_MB} MiB + sha256 over https, ms (ref: curl -o && sha256sum)" "https://localhost:$hport/f/big.bin"
compare "fetch ${FETCH_MB} MiB + sha256 over https, ms (ref: curl -o /dev/null, the network floor; goal <= 1.05x)" \
	"https://localhost:$hport/f/big.bin" null
# On a machine whose cores are busy (the server takes one), the wall time
# is about the client's CPU plus the server's: this row says how much more
# work ours does than the floor (hashing and writing the file).
_o="" _r="" _i=0
while [ $_i -lt "$FETCH_RUNS" ]; do
	_o="$_o $(cpu "SSL_CERT_FILE='$d/pki/ca.pem' '$BIN' fetch 'https://localhost:$hport/f/big.bin' --sha256 $sha \
-o '$d/ours.bin' -q")"
	rm -f "$d/ours.bin"
	_r="$_r $(cpu "curl -sS --cacert '$d/pki/ca.pem' -o /dev/null 'https://localhost:$hport/f/big.bin'")"
	_i=$((_i + 1))
done
row "fetch ${FETCH_MB} MiB + sha256 over https, CPU ms user+system (ref: curl -o /dev/null)" \
	"$(echo $_o | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')" \
	"$(echo $_r | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')"
say "http: same over plain HTTP"
compare "fetch ${FETCH_MB} MiB + sha256 over http, ms (ref: curl -o && sha256sum)" "http://localhost:$pport/f/big.bin"

say "peak RSS"
ours=$(SSL_CERT_FILE="$d/pki/ca.pem" peak_kib "$BIN" fetch "https://localhost:$hport/f/big.bin" --sha256 "$sha" \
	-o "$d/ours.bin" -q)
rm -f "$d/ours.bin"
ref=$(peak_kib curl -sS --cacert "$d/pki/ca.pem" -o "$d/ref.bin" "https://localhost:$hport/f/big.bin")
rm -f "$d/ref.bin"
row "fetch ${FETCH_MB} MiB https peak RSS, KiB (ref: curl; goal <= 4096)" "$ours" "$ref"
