# Sourced by tools/bench.sh and by each tools/bench/*.sh. A bench file prints
# rows "figure | ours | reference | ratio" on stdout (anything else it says goes
# to stderr, which bench.sh keeps in a log), using the helpers below. Figures
# come from one run, side by side; absolute numbers on a shared machine are
# noise, the ratio is the figure. Environment: BIN (the static binary), TOP.
#
#   row FIGURE OURS REFERENCE [RATIO]   print one row; RATIO defaults to OURS/REF
#   ratio A B                           A/B as "0.42x", or n/a
#   median NUM...                       the median (the mean of the middle two for
#                                       an even count; n/a for none)
#   has_applet NAME                     true when BIN has that applet built
#   free_port                           an unused loopback TCP port
#   median_ms CMD...                    median wall time of CMD, in ms (BENCH_RUNS)
#   pair_ms "CMD A" "CMD B"             both medians, "a b", runs alternating in rounds
#   peak_kib CMD...                     RSS of CMD as it exits (its peak, in practice), KiB
#   proc_kib PID FIELD                  FIELD (VmRSS, VmHWM) of PID and its children, KiB
#   bench_dir NAME                      $d, a scratch directory; $pids stopped at exit
#   bench_serve NAME [VAR=VALUE...]     serve on a free port: serve_pid, serve_port
#   up PID CMD...                       until CMD succeeds; 1 when PID exits first
#   nginx_start DIR NAME BODY WORKERS LOG
#                                       nginx serving BODY as the static file /NAME
#                                       from DIR/nginx, with WORKERS workers and an
#                                       access log (LOG "on") or none ("off"); sets
#                                       NGINX_PID, NGINX_PORT; 1 with the reason in
#                                       NGINX_WHY when not installed or not started
#   oci_registry_start DIR CERT KEY CA  docker-registry on a free loopback port over
#                                       TLS; sets OCI_REG_PID, OCI_REG_PORT; 1 with
#                                       the reason in OCI_REG_WHY
#   wall_cpu_ms CMDLINE                 "wall_ms cpu_ms" of one run of a shell
#                                       command line, or "fail"

: "${BIN:?BIN is the static binary}"
BENCH_RUNS=${BENCH_RUNS:-200}

ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/ || b + 0 == 0) print "n/a"
		else if (a / b >= 0.1) printf "%.2fx\n", a / b
		else printf "%.2gx\n", a / b }'
}

median() {
	[ $# -gt 0 ] || { echo n/a; return; }
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR % 2) { print v[(NR + 1) / 2]; exit }
		m = (v[NR / 2] + v[NR / 2 + 1]) / 2
		if (m >= 100) printf "%.0f\n", m; else printf "%.4g\n", m }'
}

row() {
	printf '%s | %s | %s | %s\n' "$1" "$2" "$3" "${4:-$(ratio "$2" "$3")}"
}

# The release objects of core/, one per source that exists (not every .o
# under build/rel: an object whose source was removed would be linked too).
core_objs() {
	for c in "$TOP"/core/*/*.c; do
		c=${c#"$TOP"/}
		printf '%s\n' "$TOP/build/rel/${c%.c}.o"
	done
	printf '%s\n' "$TOP/build/rel/gen/manifests_embed.o"
}

has_applet() {
	"$BIN" --list 2>/dev/null | grep -qx "$1"
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Median of BENCH_RUNS runs (after a few warm-up runs), output discarded.
# hyperfine -N (no shell in between) when present, else a Python loop; a
# command that fails any run answers "fail".
median_ms() {
	if command -v hyperfine >/dev/null 2>&1; then
		_j=$(mktemp)
		_cmd=""
		for _a in "$@"; do _cmd="$_cmd '$_a'"; done
		if hyperfine -N --warmup 10 --runs "$BENCH_RUNS" --export-json "$_j" "$_cmd" >/dev/null 2>&1; then
			python3 -c 'import json, sys; print("%.3f" % (json.load(open(sys.argv[1]))["results"][0]["median"] * 1000))' "$_j"
		else
			echo fail
		fi
		rm -f "$_j"
		return
	fi
	python3 - "$BENCH_RUNS" "$@" <<'EOF'
import subprocess, sys, time, statistics
n = int(sys.argv[1]); cmd = sys.argv[2:]
ts = []
for i in range(n + 10):
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    d = time.perf_counter() - t
    if r.returncode != 0:
        print("fail"); sys.exit(0)
    if i >= 10:
        ts.append(d)
print("%.3f" % (statistics.median(ts) * 1000))
EOF
}


# pair_ms "CMD A" "CMD B": the median wall times of A and B in ms, as "a b".
# The runs alternate in rounds (A then B, five times), so a neighbour's load
# on the shared machine falls on both sides alike rather than on one. Words
# are split on spaces: no quoting inside the command strings.
pair_ms() {
	_r=5
	_k=$((BENCH_RUNS / _r)); [ $_k -ge 3 ] || _k=3
	_j=$(mktemp -d)
	if command -v hyperfine >/dev/null 2>&1; then
		_i=0
		while [ $_i -lt $_r ]; do
			hyperfine -N --warmup 3 --runs $_k --export-json "$_j/$_i.json" "$1" "$2" >/dev/null 2>&1 ||
				{ echo "fail fail"; rm -rf "$_j"; return; }
			_i=$((_i + 1))
		done
		python3 - "$_j" <<'EOF'
import glob, json, statistics, sys
t = [[], []]
for f in glob.glob(sys.argv[1] + "/*.json"):
    for i, r in enumerate(json.load(open(f))["results"]):
        t[i] += r["times"]
print(" ".join("%.3f" % (statistics.median(x) * 1000) for x in t))
EOF
	else
		python3 - $((_k * _r)) "$1" "$2" <<'EOF'
import subprocess, sys, time, statistics
n, cmds = int(sys.argv[1]), [c.split() for c in sys.argv[2:]]
t = [[], []]
for i in range(n + 5):
    for j, c in enumerate(cmds):
        s = time.perf_counter()
        r = subprocess.run(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        d = time.perf_counter() - s
        if r.returncode != 0:
            print("fail fail"); sys.exit(0)
        if i >= 5:
            t[j].append(d)
print(" ".join("%.3f" % (statistics.median(x) * 1000) for x in t))
EOF
	fi
	rm -rf "$_j"
}
peak_kib() {
	_p=$TOP/build/bench/peakrss
	if [ ! -x "$_p" ] || [ "$TOP/tools/peakrss.c" -nt "$_p" ]; then
		mkdir -p "$TOP/build/bench"
		${MUSL_CC:-musl-gcc} -static -Os -s -o "$_p" "$TOP/tools/peakrss.c" 2>/dev/null || { echo n/a; return; }
	fi
	_k=$("$_p" "$@" 2>/dev/null </dev/null) && echo "$_k" || echo fail
}

# VmRSS is read from smaps_rollup (exact; since Linux 6.2 the counters behind
# /proc/PID/status are per-CPU approximations that under-read small
# processes); VmHWM is the larger of the status figure and that.
proc_kib() {
	python3 - "$1" "$2" <<'EOF'
import os, sys
root, field = int(sys.argv[1]), sys.argv[2]
def num(path, name):
    try:
        for line in open(path):
            if line.startswith(name):
                return int(line.split()[1])
    except OSError:
        pass
    return 0
kids = {}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            st = open("/proc/%s/stat" % p).read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
            kids.setdefault(ppid, []).append(int(p))
        except (OSError, ValueError):
            pass
total, todo = 0, [root]
while todo:
    p = todo.pop()
    rss = num("/proc/%d/smaps_rollup" % p, "Rss:")
    total += rss if field == "VmRSS" else max(rss, num("/proc/%d/status" % p, field + ":"))
    todo.extend(kids.get(p, []))
print(total if total else "n/a")
EOF
}

# up PID CMD...: wait until CMD succeeds (200 tries, 0.05 s apart); 1 when
# PID exits first or the tries run out, PID then stopped
up() {
	_up=$1
	shift
	_i=0
	until "$@" >/dev/null 2>&1; do
		_i=$((_i + 1))
		if [ $_i -gt 200 ] || ! kill -0 "$_up" 2>/dev/null; then
			kill "$_up" 2>/dev/null
			wait "$_up" 2>/dev/null
			return 1
		fi
		sleep 0.05
	done
}

# nginx as a user would run it: a static file, its own prefix and temp paths.
nginx_start() {
	NGINX_PID="" NGINX_PORT="" NGINX_WHY=""
	_ngx=$(command -v nginx || ls /usr/sbin/nginx 2>/dev/null) ||
		{ NGINX_WHY="needs nginx (apt-get install nginx-light)"; return 1; }
	_nd=$1/nginx
	NGINX_PORT=$(free_port)
	mkdir -p "$_nd/www" "$_nd/tmp"
	printf '%s\n' "$3" >"$_nd/www/$2"
	# nginx's workers run as nobody when started by root
	chmod a+rX "$1" "$_nd" "$_nd/www" "$_nd/www/$2"
	_log=off
	[ "$5" = on ] && _log=$_nd/access.log
	cat >"$_nd/nginx.conf" <<EOF
worker_processes $4;
pid $_nd/nginx.pid;
error_log $_nd/error.log;
events { worker_connections 1024; }
http {
	access_log $_log;
	client_body_temp_path $_nd/tmp/body;
	proxy_temp_path $_nd/tmp/proxy;
	fastcgi_temp_path $_nd/tmp/fastcgi;
	uwsgi_temp_path $_nd/tmp/uwsgi;
	scgi_temp_path $_nd/tmp/scgi;
	server {
		listen 127.0.0.1:$NGINX_PORT;
		root $_nd/www;
		location = /$2 { default_type application/json; }
	}
}
EOF
	"$_ngx" -p "$_nd" -c "$_nd/nginx.conf" -g 'daemon off;' 2>"$_nd/stderr" &
	NGINX_PID=$!
	if ! up "$NGINX_PID" curl -sf -m 1 "http://127.0.0.1:$NGINX_PORT/$2"; then
		NGINX_WHY="nginx did not start: $(head -3 "$_nd/stderr" "$_nd/error.log" 2>/dev/null | tr '\n' ' ')"
		NGINX_PID="" NGINX_PORT=""
		return 1
	fi
}

# oci_registry_start DIR CERT KEY CA: the CNCF distribution registry
# (Debian's docker-registry) as a fleet would run it, on a free loopback
# port over TLS (CERT, KEY; CA verifies them), with Debian's stock storage
# cache (blobdescriptor: inmemory), its storage in DIR/oci, its
# configuration DIR/oci.yml and its log DIR/oci.log (the access log: one
# line a request). Sets OCI_REG_PID and OCI_REG_PORT; 1 with the reason in
# OCI_REG_WHY when it is not installed or does not answer.
oci_registry_start() {
	OCI_REG_PID="" OCI_REG_PORT="" OCI_REG_WHY=""
	_reg=$(command -v docker-registry) ||
		{ OCI_REG_WHY="needs docker-registry: tools/hostdeps.sh check installs it"; return 1; }
	OCI_REG_PORT=$(free_port)
	{
		printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  cache:\n    blobdescriptor: inmemory\n'
		printf '  filesystem:\n    rootdirectory: %s\n' "$1/oci"
		printf 'http:\n  addr: 127.0.0.1:%s\n  tls:\n    certificate: %s\n    key: %s\n' "$OCI_REG_PORT" "$2" "$3"
	} >"$1/oci.yml"
	"$_reg" serve "$1/oci.yml" >"$1/oci.log" 2>&1 &
	OCI_REG_PID=$!
	if ! up "$OCI_REG_PID" curl -s -o /dev/null --cacert "$4" "https://localhost:$OCI_REG_PORT/v2/"; then
		OCI_REG_WHY="docker-registry did not start: $(head -c 300 "$1/oci.log" | tr '\n' ' ')"
		OCI_REG_PID="" OCI_REG_PORT=""
		return 1
	fi
}

# wall_cpu_ms CMDLINE: "wall_ms cpu_ms" of one run of the shell command line
# CMDLINE (what it does not redirect discarded): CPU is user + system of it
# and its children; "fail" when it fails.
wall_cpu_ms() {
	python3 - "$1" <<'EOF'
import resource, subprocess, sys, time
t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
r = subprocess.run(["sh", "-c", sys.argv[1]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
t1, c1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime
print("fail" if r.returncode else "%.0f %.0f" % ((t1 - t0) * 1000, cpu * 1000))
EOF
}

# bench_dir NAME: $d, a private scratch directory removed at exit, with the
# processes whose pids the caller adds to $pids (or puts in $pid) stopped
# first (TERM, then waited for); a signal (a reader that stopped reading:
# SIGPIPE) ends through exit, so they are stopped then too. $CC the
# compiler for the drivers (static musl when there is one).
bench_dir() {
	d=$(mktemp -d "${TMPDIR:-/tmp}/abx-bench-$1.XXXXXX") || exit 1
	chmod 700 "$d"
	pid="" pids=""
	trap bench_cleanup EXIT
	trap 'exit 130' INT TERM HUP PIPE
	CC=${CC:-cc}
	command -v musl-gcc >/dev/null 2>&1 && CC="musl-gcc -static"
}
bench_cleanup() {
	for _bp in $pid $pids; do kill -TERM "$_bp" 2>/dev/null; done
	for _bp in $pid $pids; do wait "$_bp" 2>/dev/null; done
	rm -rf "$d"
}

# bench_serve NAME [VAR=VALUE...]: serve -q on a free loopback port, its
# configuration what VAR=VALUE give (the token variables of the caller's
# environment left out), its state in $d/NAME.state, its tools in $d/tools,
# its output in $d/NAME.out and $d/NAME.err. Sets serve_pid (added to $pids)
# and serve_port; 1, with the reason on stderr, when it did not start.
bench_serve() {
	_n=$1
	shift
	mkdir -p "$d/$_n.state" && chmod 700 "$d/$_n.state"
	env -u ABX_SERVER_TOKEN -u ABX_SERVER_TOKEN_FILE ABX_SERVER_STATE_DIR="$d/$_n.state" ABX_TOOLS_DIR="$d/tools" \
		"$@" "$BIN" serve -q --host 127.0.0.1 --port 0 >"$d/$_n.out" 2>"$d/$_n.err" &
	serve_pid=$!
	pids="$pids $serve_pid"
	if ! up "$serve_pid" grep -q '^[0-9][0-9]*$' "$d/$_n.out"; then
		printf 'bench: serve (%s) did not start: %s\n' "$_n" "$(tail -3 "$d/$_n.err" | tr '\n' ' ')" >&2
		return 1
	fi
	serve_port=$(head -1 "$d/$_n.out")
}
