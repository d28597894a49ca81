# Sourced by tests/integration/*.sh. Each file runs the static binary ($BIN)
# against real peers on loopback and prints one line per case:
#   ok - NAME | not ok - NAME: why | skip - NAME: why
# The runner counts them; a file that exits non-zero without a "not ok" line
# counts as one failure.
set -u
: "${BIN:?BIN is the static binary}"
: "${TOP:?TOP is the repository}"
T=$(mktemp -d "${TMPDIR:-/tmp}/abx-test.XXXXXX")
chmod 700 "$T"
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
_pids=""
cleanup() {
	# A backgrounded shell function is a subshell whose child does the
	# work: end the children too, or fixtures outlive the test.
	for p in $_pids; do
		command -v pkill >/dev/null && pkill -P "$p" 2>/dev/null
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$T"
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

# http_raw PORT: send stdin raw to 127.0.0.1:PORT, print the whole answer.
http_raw() {
	python3 "$FIXTURES/rawhttp.py" "$1"
}
