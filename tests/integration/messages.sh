# Messages name their cause and the file: a path too long for a message
# (ERR_MSG_MAX, core/base/err.h) loses its middle, marked by an ellipsis,
# and keeps its head, its last component and the reason after it; nothing
# is cut mid-path without the mark.
. "$TOP/tests/lib.sh"

mkdir -p "$T/home" "$T/state"
chmod 700 "$T/state"
export HOME=$T/home ABX_SERVER_STATE_DIR=$T/state

# A regular file in the way: "Not a directory" even for root, 55 levels and
# about 1000 bytes below it.
: >"$T/file"
P=$T/file
i=1
while [ $i -le 55 ]; do P=$P/segment-number-$i; i=$((i + 1)); done

run env ABX_TOOLS_DIR="$P" "$BIN" prepare --only node-runtime
expect "a ~1000-byte tools directory: its head is named" 1 "" "tools directory $T/file/segment-number-1/segment-number-2/"
expect "... and its last component" 1 "" "/segment-number-55 (env ABX_TOOLS_DIR)"
expect "and the cause after it is not cut" 1 "" "cannot create directory $T/file: Not a directory"
check "the message is one line" test "$(grep -c 'install.read_only' "$T/err")" = 1

# The elided message is the whole one less a middle of the path, between
# two '/', with one mark, and within ERR_MSG_MAX (511 bytes and the NUL).
full="tools directory $P (env ABX_TOOLS_DIR): cannot create directory $T/file: Not a directory"
elided_ok() { # MESSAGE
	_h=${1%%…*} _t=${1#*…}
	[ "$_h" != "$1" ] && [ "${_t#*…}" = "$_t" ] || return 1
	case $_h in */) ;; *) return 1 ;; esac
	case $_t in /*) ;; *) return 1 ;; esac
	case $full in "$_h"*"$_t") ;; *) return 1 ;; esac
	[ "$(printf %s "$1" | wc -c)" -le 511 ] && [ ${#_h} -gt 100 ] && [ ${#_t} -gt 100 ]
}
msg=$(sed -n 's/^agent-sandbox-server: install\.read_only: //p' "$T/err")
check "the path loses its middle at '/' boundaries, marked, within 511 bytes" elided_ok "$msg"
refused() { ! elided_ok "$1"; }
check "... (the check refuses a message cut at 511 bytes without the mark)" refused "$(printf %s "$full" | head -c 511)"
check "... (and one that lost the last component)" refused \
	"tools directory $T/file/segment-number-1/segment-number-2/segment-number-3/…/segment-number-54 (env ABX_TOOLS_DIR): cannot create directory $T/file: Not a directory"

# The same message in prepare's --json output: valid JSON, the same text.
run env ABX_TOOLS_DIR="$P" "$BIN" prepare --json --only node-runtime
check "--json: the document parses and carries the elided message" python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["tools"][0]["error"]["message"]
sys.exit(m != sys.argv[2])' "$T/out" "$msg"
