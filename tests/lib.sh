# Sourced by tests/integration/*.sh. Each file runs the static binary ($BIN)
# against real peers on loopback and prints one line per case:
#   ok - NAME | not ok - NAME: why | skip - NAME: why
# The runner counts them; a file that exits non-zero without a "not ok" line
# counts as one failure.
#
# What it gives (each is described where it is defined):
#   T FIXTURES PLATFORM OTHER_PLATFORM SELF BIN_HOOKS   set on sourcing
#   ok not_ok skip            one result line
#   run expect check          run a command, judge its exit code and output
#   bg                        a background process ended with the file
#   wait_for_line             a bounded wait for a line in a file
#   wait_until                a bounded wait for any condition
#   wait_exit                 a bounded wait for a background child's exit
#   ms_now                    the wall clock in milliseconds (to report, never to judge)
#   start_serve               serve on a free loopback port
#   make_pki                  the test PKI (tests/fixtures/mkcerts.sh)
#   start_httpd               the HTTPS file server (tests/fixtures/httpd.py)
#   start_npmreg              the npm registry (tests/fixtures/npmreg.py)
#   free_port                 a loopback port nothing listens on right now
#   http_raw                  raw bytes to a port, the answer back
#   sha sha_str               SHA-256 of a file, of a string
#   json_eval                 a Python expression over a JSON file
#   wire wire_new wire_msg wire_cancel wire_upto wire_events
#                             the sessions wire of the serve at $PORT
#   mktool mkman              a tool tarball and its manifest
#   reachable_copy            a copy of a file that another user can run
set -u
: "${BIN:?BIN is the static binary}"
: "${TOP:?TOP is the repository}"
T=$(mktemp -d "${TMPDIR:-/tmp}/abx-test.XXXXXX")
chmod 700 "$T"
# A HOME of the file's own (a file that needs another sets its): what the
# binary keeps under HOME by default is not shared by files run at once.
mkdir "$T/HOME" && export HOME="$T/HOME"
# None of the binary's settings comes from the caller's environment: every
# ABX_* variable but the runner's (ABX_TEST_*, ABX_E2E_*) is unset, with
# the certificate directory, DOCKER_CONFIG and NODE_OPTIONS; a file sets
# what it tests. The files of make check reach loopback only, so the
# proxies go too; an e2e file reaches the registry through the caller's.
for _v in $(env | sed -n 's/^\(ABX_[A-Za-z0-9_]*\)=.*/\1/p'); do
	case $_v in ABX_TEST_PAUSE) unset "$_v" ;; ABX_TEST_* | ABX_E2E_*) ;; *) unset "$_v" ;; esac
done
unset SSL_CERT_DIR DOCKER_CONFIG NODE_OPTIONS
case $0 in */e2e/*) ;; *) unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy NO_PROXY no_proxy ;; esac
FIXTURES=$TOP/tests/fixtures
# The platform the binary under test installs for (make check-arm64 sets
# it: the host's is not the emulated binary's), and the file its own links
# (applet links, shims) point at: the binary itself, not a wrapper.
case ${ABX_TEST_PLATFORM:-$(uname -m)} in
linux-arm64 | aarch64) PLATFORM=linux-arm64 OTHER_PLATFORM=linux-x64 ;;
*) PLATFORM=linux-x64 OTHER_PLATFORM=linux-arm64 ;;
esac
SELF=${ABX_TEST_SELF:-$(readlink -f "$BIN")}
# The test build, with the test hooks (ABX_TEST_PAUSE) the release binary
# lacks: test/agent-sandbox-server beside $BIN (make builds it), else $BIN
# itself (an older binary given by ABX_TEST_BIN); ABX_TEST_BIN_HOOKS names
# another. Only the cases that need a hook run it.
BIN_HOOKS=${ABX_TEST_BIN_HOOKS:-$(dirname "$BIN")/test/agent-sandbox-server}
[ -x "$BIN_HOOKS" ] || BIN_HOOKS=$BIN
_pids="" _pub=""
cleanup() {
	# A backgrounded shell function is a subshell whose child does the
	# work: end the children too, or fixtures outlive the test.
	for p in $_pids; do
		command -v pkill >/dev/null && pkill -P "$p" 2>/dev/null
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$T" ${_pub:+"$_pub"}
}
trap cleanup EXIT INT TERM

ok() { echo "ok - $1"; }
not_ok() { echo "not ok - $1: $2"; }
skip() { echo "skip - $1: $2"; }

# run CMD...: stdout to $T/out, stderr to $T/err, exit code to $RC. Under
# make check-arm64 (ABX_TEST_EMULATOR set; no binfmt) the command, when it is
# one of the binary's own links (applet links, shims; by path or found on
# PATH, after env, timeout N, asnobody and VAR=value words), starts through
# the emulator with its argv[0] kept.
run() {
	[ -n "${ABX_TEST_EMULATOR:-}" ] && { _emu_wrap "$@"; return; }
	"$@" >"$T/out" 2>"$T/err"
	RC=$?
}
# nodns CMD...: CMD in a private mount namespace whose resolver is a closed
# port on 127.0.0.1 (one try, one second): a name that is not in /etc/hosts
# does not resolve, and no query leaves the machine. Returns 125 without
# root or unshare (the caller skips).
nodns() {
	{ [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; } || return 125
	printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$T/resolv.nodns"
	unshare -m sh -c 'mount --make-rprivate / && mount --bind "$0" /etc/resolv.conf && exec "$@"' "$T/resolv.nodns" "$@"
}
_emu_wrap() {
	_n=$# _i=0 _done=0 _path=$PATH _skip=0
	while [ $_i -lt $_n ]; do
		_a=$1
		shift
		_i=$((_i + 1))
		if [ $_done = 0 ]; then
			if [ $_skip -gt 0 ]; then
				_skip=$((_skip - 1))
				set -- "$@" "$_a"
				continue
			fi
			case $_a in
			env | asnobody) set -- "$@" "$_a"; continue ;;
			timeout) _skip=1; set -- "$@" "$_a"; continue ;;
			PATH=*) _path=${_a#PATH=}; set -- "$@" "$_a"; continue ;;
			[A-Za-z_]*=*) set -- "$@" "$_a"; continue ;;
			esac
			_done=1
			case $_a in */*) _p=$_a ;; *) _p=$(PATH=$_path; command -v -- "$_a" 2>/dev/null) ;; esac
			if [ -n "$_p" ] && [ "$(readlink -f -- "$_p" 2>/dev/null)" = "$SELF" ]; then
				set -- "$@" "$ABX_TEST_EMULATOR" -0 "$_a" "$SELF"
				continue
			fi
		fi
		set -- "$@" "$_a"
	done
	"$@" >"$T/out" 2>"$T/err"
	RC=$?
}

# expect NAME RC [STDOUT-SUBSTRING [STDERR-SUBSTRING]] -- after run.
expect() {
	_n=$1 _rc=$2 _o=${3:-} _e=${4:-}
	if [ "$RC" != "$_rc" ]; then
		not_ok "$_n" "exit $RC, expected $_rc; stderr: $(head -c 300 "$T/err" | tr '\n' ' ')"
	elif [ -n "$_o" ] && ! grep -qF -- "$_o" "$T/out"; then
		not_ok "$_n" "stdout lacks '$_o': $(head -c 300 "$T/out" | tr '\n' ' ')"
	elif [ -n "$_e" ] && ! grep -qF -- "$_e" "$T/err"; then
		not_ok "$_n" "stderr lacks '$_e': $(head -c 300 "$T/err" | tr '\n' ' ')"
	else
		ok "$_n"
	fi
}

# check NAME CONDITION-COMMAND...: ok when the command succeeds.
check() {
	_n=$1; shift
	if "$@"; then ok "$_n"; else not_ok "$_n" "failed: $*"; fi
}

# bg CMD...: start in the background, remember for cleanup; pid in $BGPID.
bg() {
	"$@" &
	BGPID=$!
	_pids="$_pids $BGPID"
}

# fifo_writer FIFO DONE OUT: in the background (BGPID), open FIFO for
# writing, write "open" to OUT once a reader has opened it, and hold it open
# until the file DONE exists (at most 300 s), so that a reader left behind
# sees end of file then.
fifo_writer() {
	bg python3 -c 'import os, sys, time
f = open(sys.argv[1], "w")
print("open", flush=True)
for _ in range(6000):
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.05)' "$1" "$2" >"$3"
}

# wait_for_line FILE PATTERN [SECONDS]: until FILE has a line matching PATTERN.
wait_for_line() {
	_i=0
	while [ $_i -lt $((${3:-10} * 20)) ]; do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
		_i=$((_i + 1))
	done
	return 1
}

# start_serve [ARGS...]: serve --port 0 on 127.0.0.1; sets PORT, SERVE_PID.
start_serve() {
	bg "$BIN" serve --host 127.0.0.1 --port 0 "$@" >"$T/serve.out" 2>"$T/serve.err"
	SERVE_PID=$BGPID
	if ! wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10; then
		PORT=""
		return 1
	fi
	PORT=$(head -1 "$T/serve.out")
}

# start_npmreg NAME ROOT PKI [ARGS...]: the npm registry fixture
# (tests/fixtures/npmreg.py, more ARGS: --slow-ms N, ...) serving ROOT over
# HTTPS with PKI's good.pem and good.key (tests/fixtures/mkcerts.sh), its
# requests logged in $T/NAME.log. Sets REG_PORT and REG_PID; a registry that
# does not start ends the test file with "not ok - start NAME".
start_npmreg() {
	_name=$1 _root=$2 _pki=$3
	shift 3
	bg python3 "$FIXTURES/npmreg.py" --root "$_root" --log "$T/$_name.log" --cert "$_pki/good.pem" \
		--key "$_pki/good.key" "$@" >"$T/$_name.port" 2>"$T/$_name.err"
	REG_PID=$BGPID
	if ! wait_for_line "$T/$_name.port" '^[0-9]' 10; then
		not_ok "start $_name" "$(head -c 300 "$T/$_name.err" | tr '\n' ' ')"
		exit 1
	fi
	REG_PORT=$(head -1 "$T/$_name.port")
}

# npm_fixture: the npm registry fixture serving $T/reg (REG its URL), and
# $T/nm for the manifests of its tools; npmpy runs the Python script on its
# stdin with tests/fixtures on the module path (npmpack) and T and REG in
# its environment.
npm_fixture() {
	mkdir -p "$T/reg" "$T/nm"
	start_npmreg reg "$T/reg" "$T/pki"
	REG="https://localhost:$REG_PORT"
}
npmpy() { PYTHONPATH=$FIXTURES T=$T REG=$REG python3 - "$@"; }

# http_raw PORT: send stdin raw to 127.0.0.1:PORT, print the whole answer.
http_raw() {
	python3 "$FIXTURES/rawhttp.py" "$1"
}

# wait_until SECONDS CONDITION: until the shell command line CONDITION
# (evaluated anew each time: quote it) succeeds, polled every 50 ms for at
# most SECONDS; fails when it never does. The bound is for a run that went
# wrong, never a measure: make it generous.
wait_until() {
	_w=$(($1 * 20))
	while [ "$_w" -gt 0 ]; do
		eval "$2" && return 0
		sleep 0.05
		_w=$((_w - 1))
	done
	eval "$2"
}

# wait_exit PID SECONDS: wait for the background child PID to end; one still
# running after SECONDS (a bound for a run gone wrong) is killed, its status
# then 137. The status is in $RC.
wait_exit() {
	sh -c 'sleep "$1"; kill -KILL "$2" 2>/dev/null' _ "$2" "$1" >/dev/null 2>&1 &
	_wd=$!
	wait "$1"
	RC=$?
	command -v pkill >/dev/null && pkill -P "$_wd" 2>/dev/null
	kill "$_wd" 2>/dev/null
	wait "$_wd" 2>/dev/null
	return 0
}

# reachable_copy FILE: a copy of FILE (mode 755) that another user (a test
# running as nobody) can run: in a directory of /tmp every user may enter,
# made on first use and removed with $T, since $T is mode 0700 and the
# checkout may sit under a private directory. Sets REACHABLE to its path.
reachable_copy() {
	if [ -z "$_pub" ]; then
		_pub=$(mktemp -d /tmp/abx-pub.XXXXXX) && chmod 755 "$_pub" || return 1
	fi
	REACHABLE=$_pub/${1##*/}
	cp "$1" "$REACHABLE" && chmod 755 "$REACHABLE"
}

# ms_now: milliseconds since the epoch (to report how long something took,
# never to judge it).
ms_now() { date +%s%3N; }

# make_pki [DIR]: the test PKI (tests/fixtures/mkcerts.sh: ca.pem, good.pem,
# good.key, ...) in DIR (default $T/pki); sets PKI. A PKI that cannot be made
# ends the test file with "not ok - test PKI".
make_pki() {
	PKI=${1:-$T/pki}
	sh "$FIXTURES/mkcerts.sh" "$PKI" >"$T/mkcerts.log" 2>&1 && return 0
	not_ok "test PKI" "$(tail -3 "$T/mkcerts.log" | tr '\n' ' ')"
	exit 1
}

# start_httpd ROOT LOG [ARGS...]: tests/fixtures/httpd.py serving ROOT over
# HTTPS with $PKI's good.pem and good.key (make_pki first), every connection
# a line of LOG (emptied first); more ARGS go to httpd.py. Its port is in
# LOG.port, its stderr in LOG.err. Sets HTTPD_PORT and HTTPD_PID; a server
# that does not start ends the test file with "not ok - start https fixture".
start_httpd() {
	_root=$1 _log=$2
	shift 2
	: >"$_log"
	bg "${PY:-python3}" "$FIXTURES/httpd.py" --root "$_root" --log "$_log" --cert "$PKI/good.pem" \
		--key "$PKI/good.key" "$@" >"$_log.port" 2>"$_log.err"
	HTTPD_PID=$BGPID
	if ! wait_for_line "$_log.port" '^[0-9]' 10; then
		not_ok "start https fixture" "$(head -c 300 "$_log.err" | tr '\n' ' ')"
		exit 1
	fi
	HTTPD_PORT=$(head -1 "$_log.port")
}

# free_port: a loopback TCP port free when asked (for peers that cannot be
# told to take port 0 and say which they got).
free_port() {
	python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'
}

# sha FILE: FILE's SHA-256 in hex. sha_str STRING: STRING's (no newline).
sha() { sha256sum "$1" | cut -d' ' -f1; }
sha_str() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }

# json_eval FILE EXPR: print the Python expression EXPR over d, the JSON
# document in FILE.
json_eval() {
	"${PY:-python3}" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# The sessions wire (/v1/agents/sessions…) of the serve at $PORT, token
# $TOK. wire METHOD PATH [JSON]: the status on stdout, the body in $T/body,
# the head in $T/hdr (PATH follows /v1/agents/sessions).
wire() {
	curl -s -o "$T/body" -D "$T/hdr" -w '%{http_code}' -H "X-Access-Token: $TOK" -X "$1" \
		${3:+-H 'Content-Type: application/json' --data "$3"} "http://127.0.0.1:$PORT/v1/agents/sessions$2"
}
# wire_new AGENT [INPUT [MEMBERS]]: create a session of AGENT in the
# environment WIRE_ENV (default self_hosted, HOME), with INPUT as its first
# message; $S the status, $SID its id ("" when refused).
wire_new() {
	_env=${WIRE_ENV:-'{"type": "self_hosted"}'}
	S=$(wire POST "" "{\"agent_id\": \"$1\", \"environment\": $_env${2:+, \"input\": \"$2\"}${3:+, $3}}")
	SID=$(json_eval "$T/body" 'd.get("id", "")' 2>/dev/null)
}
# wire_msg ID INPUT, wire_cancel ID: the status of the message or the
# cancellation sent to session ID.
wire_msg() { wire POST "/$1/events" "{\"events\": [{\"type\": \"agent.session.input.message\", \"input\": \"$2\"}]}"; }
wire_cancel() { wire POST "/$1/events" '{"events": [{"type": "agent.session.input.cancel"}]}'; }
# wire_upto ID TYPE [N [LAST]]: session ID's events (after LAST) up to the
# N-th of TYPE as "ID TYPE" lines in $T/ev, "seen" last (30 s at most).
wire_upto() {
	"${PY:-python3}" "$FIXTURES/sessclient.py" sse "$PORT" "$TOK" "/v1/agents/sessions/$1/events" "${4:--}" 30 0 \
		"$2" "${3:-1}" >"$T/ev"
}
# wire_events ID TYPE [N]: the same events as a JSON document {"data":
# [...]} in $T/ev, for json_eval.
wire_events() {
	"${PY:-python3}" "$FIXTURES/sessclient.py" events "$PORT" "$TOK" "$1" "$2" "${3:-1}" 30 >"$T/ev"
}

# mktool NAME VERSION [BYTES]: $W/NAME-VERSION.tgz, a tarball whose
# pkg/bin/NAME prints "NAME VERSION" and its arguments, beside
# pkg/share/data.bin of BYTES random bytes (default 20000).
mktool() {
	rm -rf "$T/src" && mkdir -p "$T/src/pkg/bin" "$T/src/pkg/share"
	printf '#!/bin/sh\necho "%s %s${*:+ $*}"\n' "$1" "$2" >"$T/src/pkg/bin/$1"
	chmod 755 "$T/src/pkg/bin/$1"
	head -c "${3:-20000}" /dev/urandom >"$T/src/pkg/share/data.bin"
	tar czf "$W/$1-$2.tgz" -C "$T/src" pkg
}

# fakeman NAME RUN: $T/man/NAME.json, the manifest of an agent whose program
# is given through ABX_TOOL_<NAME> (its source, on a port where nothing
# listens, is never reached), RUN its run template (an argv array or
# {"argv", "dialect"}).
fakeman() {
	mkdir -p "$T/man"
	cat >"$T/man/$1.json" <<EOM
{"schema":1,"name":"$1","binary":"$1","version":"1.0.0",
 "source":{"type":"tarball","bin":"bin/$1","strip_components":1,
  "platforms":{"linux-x64":{"url":"https://localhost:1/$1.tgz","sha256":"$(printf '%064d' 0)"},
               "linux-arm64":{"url":"https://localhost:1/$1.tgz","sha256":"$(printf '%064d' 0)"}}},
 "hosts":["localhost"],"verify":{"argv":["{bin}","--version"],"expect":"$1 1.0.0"},
 "run":$2,"platforms":["linux-x64","linux-arm64"],"size_hint_mb":1}
EOM
}

# mkman NAME URLPATH [SHA [EXTRA-JSON-MEMBERS [BIN]]]: $M/NAME.json, the
# manifest of the tarball tool NAME 1.0.0 at https://localhost:$P URLPATH
# for both platforms (pinned to SHA when given), its binary BIN (default
# bin/NAME), verified by running it and reading "NAME 1.0.0"; its size hint
# SIZE_HINT_MB (default 1).
mkman() {
	_sha=""
	[ -n "${3:-}" ] && _sha=",\"sha256\":\"$3\""
	cat >"$M/$1.json" <<EOF
{"schema":1,"name":"$1","binary":"$1","version":"1.0.0",
 "source":{"type":"tarball","bin":"${5:-bin/$1}","strip_components":1,
  "platforms":{"linux-x64":{"url":"https://localhost:$P$2"$_sha},"linux-arm64":{"url":"https://localhost:$P$2"$_sha}}},
 "hosts":["localhost"],"verify":{"argv":["{bin}"],"expect":"$1 1.0.0"},
 "platforms":["linux-x64","linux-arm64"],"size_hint_mb":${SIZE_HINT_MB:-1}${4:+,$4}}
EOF
}

# Roots entered with chroot, as a container runtime enters an image (a
# private mount namespace gives each its /proc and /dev; the network is the
# host's).
# chroot_ok NAME: root with mount namespaces and this machine's loader
# names, or NAME skipped and 1; sets GLD and MLD (the glibc and musl
# loaders), PLAT, UNSHARE and CHROOT.
chroot_ok() {
	if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
		skip "$1" "needs root and mount namespaces (chroot, mount)"
		return 1
	fi
	case $(uname -m) in
	x86_64) GLD=/lib64/ld-linux-x86-64.so.2 MLD=/lib/ld-musl-x86_64.so.1 PLAT=linux-x64 ;;
	aarch64) GLD=/lib/ld-linux-aarch64.so.1 MLD=/lib/ld-musl-aarch64.so.1 PLAT=linux-arm64 ;;
	*) skip "$1" "no loader names for $(uname -m)"; return 1 ;;
	esac
	UNSHARE=$(command -v unshare) CHROOT=$(command -v chroot)
}
# mkroot NAME [musl | glibc LIB...]: R=$T/root-NAME holding the binary as
# /abx and /etc, /proc, /dev, /tmp, /home; musl: the musl loader; glibc:
# the glibc loader and each library LIB (a file name: the host's, found
# through gcc or ldconfig, at its own path).
mkroot() {
	R=$T/root-$1
	shift
	mkdir -p "$R/etc" "$R/proc" "$R/dev" "$R/tmp" "$R/home"
	cp "$BIN" "$R/abx"
	case ${1:-} in
	musl) mkdir -p "$R${MLD%/*}" && cp -L "$MLD" "$R$MLD" ;;
	glibc)
		shift
		mkdir -p "$R${GLD%/*}" && cp -L "$GLD" "$R$GLD"
		for _l in "$@"; do
			_p=$(gcc -print-file-name="$_l" 2>/dev/null)
			[ -e "$_p" ] || _p=$(ldconfig -p | sed -n "s|.*[[:space:]]$_l (libc6,x86-64[^)]*) => ||p;s|.*[[:space:]]$_l (libc6,AArch64) => ||p" | head -1)
			[ -e "$_p" ] || { not_ok "glibc root" "$_l not found on the host"; exit 1; }
			_p=$(readlink -f "$_p")
			mkdir -p "$R${_p%/*}" && cp -L "$_p" "$R${_p%/*}/$_l"
		done
		;;
	esac
	return 0
}
# inroot ROOT CMD...: run CMD in ROOT with a clean environment: PATH=/bin
# and the words of ROOT_ENV (the file's) and IN_ENV (the call's), "A=1 B=2".
inroot() {
	_r=$1
	shift
	# shellcheck disable=SC2086
	run env -i PATH=/bin ${ROOT_ENV:-} ${IN_ENV:-} "$UNSHARE" -m sh -c \
		'r=$1; shift; mount -t proc proc "$r/proc" && mount --bind /dev "$r/dev" && exec "$0" "$r" "$@"' \
		"$CHROOT" "$_r" "$@"
}
