#!/bin/sh
# Bench rows for `fetch`: a FETCH_MB MiB download with verification (our
# --sha256 against the pinned digest, the verified file fsynced and renamed
# into place) against curl from the same server in the same run, three ways:
#   curl -o /dev/null           the network floor (writes nothing; the goal
#                               is <= 1.05x of it);
#   curl -o FILE                the honest floor when both write the file;
#   curl -o FILE && sha256sum   both write and verify.
# Each run measures wall and CPU (user + system) at once; the runs alternate
# (ours, then each reference) for FETCH_RUNS rounds and the medians are
# shown. Two local servers: the Python fixture (tests/fixtures/httpd.py; on
# a 2-core machine it needs a core of its own and is often what sets the
# pace) and `openssl s_server -WWW` (C, a faster peer, when openssl is
# installed), so the rows say how much of the gap is the client's.
# FETCH_REAL=1 adds the same rows against the real registry (one npm
# tarball, FETCH_REAL_URL / FETCH_REAL_SHA256, default codex 0.171.0
# linux-x64, 164 MiB), with the host's CA settings as a user has them.
# FETCH_BEFORE=BINARY adds an older build to every round and a row of ours
# against it (before/after a change, in the same run).
# Run by tools/bench.sh (BIN, TOP set); prints "figure | ours | ref | ratio".
set -u
: "${TOP:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$TOP/tools/benchlib.sh"
FETCH_MB=${FETCH_MB:-256}
FETCH_RUNS=${FETCH_RUNS:-5}
FETCH_REAL=${FETCH_REAL:-0}
FETCH_BEFORE=${FETCH_BEFORE:-}
FETCH_REAL_URL=${FETCH_REAL_URL:-https://registry.npmjs.org/@openai/codex/-/codex-0.171.0-linux-x64.tgz}
FETCH_REAL_SHA256=${FETCH_REAL_SHA256:-e13d67afb0533cc6160b5f4140e4ad07e2acd87adbaa081bbf69b82e90cf4e55}

if ! has_applet fetch; then
	row "fetch ${FETCH_MB} MiB https, ms" n/a n/a "n/a (needs fetch)"
	exit 0
fi
if ! command -v curl >/dev/null 2>&1; then
	row "fetch ${FETCH_MB} MiB https, ms" n/a n/a "n/a (needs curl)"
	exit 0
fi

bench_dir fetch
# Both sides trust exactly the fixture's CA: curl --cacert reads that one
# file, and ours would, with an SSL_CERT_DIR inherited from the host, also
# read every certificate of that directory first (a start-up cost, not the
# transfer these rows measure; the real-registry rows keep the host's).
host_cert_dir=${SSL_CERT_DIR-}
host_cert_dir_set=${SSL_CERT_DIR+y}
unset SSL_CERT_DIR
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

# openssl s_server -WWW serving $d/www (HTTP/1.0, the body ends at close);
# the leaf and the intermediate as the chain. Port in $port, "" when it
# did not start.
serve_openssl() {
	port=""
	command -v openssl >/dev/null 2>&1 || return 0
	_p=$(free_port)
	(cd "$d/www" && exec openssl s_server -quiet -accept "127.0.0.1:$_p" -cert "$d/pki/good.pem" \
		-cert_chain "$d/pki/int.crt" -key "$d/pki/good.key" -WWW) </dev/null >"$d/ossl.log" 2>&1 &
	pids="$pids $!"
	_i=0
	while [ $_i -lt 100 ]; do
		if curl -sS --cacert "$d/pki/ca.pem" -o /dev/null "https://localhost:$_p/nonexistent" 2>/dev/null; then
			port=$_p
			return 0
		fi
		sleep 0.05
		_i=$((_i + 1))
	done
}

# Alternating rounds of NAME=COMMAND pairs (sh command lines; each run's
# output files are removed after it): prints "NAME wall_ms cpu_ms" with
# the medians, or "NAME fail fail" when a run failed.
rounds() {
	python3 - "$FETCH_RUNS" "$d" "$@" <<'EOF'
import os, resource, statistics, subprocess, sys, time
n, d, pairs = int(sys.argv[1]), sys.argv[2], [a.split("=", 1) for a in sys.argv[3:]]
wall = {k: [] for k, _ in pairs}
cpu = {k: [] for k, _ in pairs}
bad = set()
for i in range(n):
    for k, c in pairs:
        t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run(["sh", "-c", c], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t1, c1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        for f in ("ours.bin", "ref.bin"):
            try:
                os.unlink(os.path.join(d, f))
            except OSError:
                pass
        if r.returncode != 0:
            bad.add(k)
        wall[k].append((t1 - t0) * 1000)
        cpu[k].append((c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime) * 1000)
for k, _ in pairs:
    if k in bad:
        print(k, "fail", "fail")
    else:
        print(k, "%.0f" % statistics.median(wall[k]), "%.0f" % statistics.median(cpu[k]))
EOF
}

# field NAME COLUMN: from the last rounds output in $res (2 wall, 3 CPU)
field() { echo "$res" | awk -v k="$1" -v c="$2" '$1 == k {print $c}'; }

# compare LABEL URL OURS_ENV CURL_OPTS: the five rows for one server
compare() {
	_l=$1 _u=$2 _env=$3 _co=$4
	say "$_l: ours vs curl -o /dev/null, curl -o FILE, curl -o FILE && sha256sum ($FETCH_RUNS rounds)"
	_b=true
	[ -z "$FETCH_BEFORE" ] || _b="$_env '$FETCH_BEFORE' fetch '$_u' --sha256 $5 -o '$d/ours.bin' -q"
	res=$(rounds \
		"ours=$_env '$BIN' fetch '$_u' --sha256 $5 -o '$d/ours.bin' -q" \
		"before=$_b" \
		"null=curl -sS $_co -o /dev/null '$_u'" \
		"file=curl -sS $_co -o '$d/ref.bin' '$_u'" \
		"sum=curl -sS $_co -o '$d/ref.bin' '$_u' && sha256sum '$d/ref.bin' | grep -q $5")
	row "$_l, wall ms (ref: curl -o /dev/null, the network floor; goal <= 1.05x)" \
		"$(field ours 2)" "$(field null 2)"
	row "$_l, wall ms (ref: curl -o FILE, both write)" "$(field ours 2)" "$(field file 2)"
	row "$_l, wall ms (ref: curl -o FILE && sha256sum, both verify)" "$(field ours 2)" "$(field sum 2)"
	row "$_l, CPU ms user+system (ref: curl -o /dev/null)" "$(field ours 3)" "$(field null 3)"
	row "$_l, CPU ms user+system (ref: curl -o FILE && sha256sum)" "$(field ours 3)" "$(field sum 3)"
	if [ -n "$FETCH_BEFORE" ]; then
		row "$_l, wall ms (ref: FETCH_BEFORE, the older build)" "$(field ours 2)" "$(field before 2)"
		row "$_l, CPU ms user+system (ref: FETCH_BEFORE)" "$(field ours 3)" "$(field before 3)"
	fi
}

ca="--cacert '$d/pki/ca.pem'"
serve https --cert "$d/pki/good.pem" --key "$d/pki/good.key"
hport=$port
serve http
pport=$port

compare "fetch ${FETCH_MB} MiB + sha256, https from the Python fixture" "https://localhost:$hport/f/big.bin" \
	"SSL_CERT_FILE='$d/pki/ca.pem'" "$ca" "$sha"
serve_openssl
if [ -n "$port" ]; then
	compare "fetch ${FETCH_MB} MiB + sha256, https from openssl s_server" "https://localhost:$port/big.bin" \
		"SSL_CERT_FILE='$d/pki/ca.pem'" "$ca" "$sha"
else
	row "fetch ${FETCH_MB} MiB + sha256, https from openssl s_server, wall ms" n/a n/a \
		"n/a ($(command -v openssl >/dev/null && echo "openssl s_server did not start" || echo "needs openssl"))"
fi

say "http: plain HTTP from the Python fixture"
res=$(rounds "ours='$BIN' fetch 'http://localhost:$pport/f/big.bin' --sha256 $sha -o '$d/ours.bin' -q" \
	"sum=curl -sS -o '$d/ref.bin' 'http://localhost:$pport/f/big.bin' && sha256sum '$d/ref.bin' | grep -q $sha")
row "fetch ${FETCH_MB} MiB + sha256 over http, wall ms (ref: curl -o FILE && sha256sum)" \
	"$(field ours 2)" "$(field sum 2)"

if [ "$FETCH_REAL" = 1 ]; then
	# the host's CA settings, as a user's fetch has them
	if [ -n "$host_cert_dir_set" ]; then
		export SSL_CERT_DIR="$host_cert_dir"
	fi
	compare "fetch $(basename "$FETCH_REAL_URL") from the real registry" "$FETCH_REAL_URL" "" "" \
		"$FETCH_REAL_SHA256"
	unset SSL_CERT_DIR
fi

say "peak RSS"
ours=$(SSL_CERT_FILE="$d/pki/ca.pem" peak_kib "$BIN" fetch "https://localhost:$hport/f/big.bin" --sha256 "$sha" \
	-o "$d/ours.bin" -q)
rm -f "$d/ours.bin"
ref=$(peak_kib curl -sS --cacert "$d/pki/ca.pem" -o "$d/ref.bin" "https://localhost:$hport/f/big.bin")
rm -f "$d/ref.bin"
row "fetch ${FETCH_MB} MiB https peak RSS, KiB (ref: curl; goal <= 4096)" "$ours" "$ref"
