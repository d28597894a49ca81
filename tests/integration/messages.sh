# Messages name their cause whole: a long, deeply nested path
# comes out complete, with the reason after it, instead of being cut at 256
# or 300 bytes mid-path.
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
expect "a ~1000-byte tools directory is named whole" 1 "" "$P (env ABX_TOOLS_DIR)"
expect "and the cause after it is not cut" 1 "" "cannot create directory $T/file: Not a directory"
check "the message is one line" test "$(grep -c 'install.read_only' "$T/err")" = 1
