# The source tree keeps its shape: core/ is layered, each folder including
# only itself and the folders below it (base < net < config < pkg < install
# < server; applets/ above all); only the config layer reads the
# environment; no file is over 900 lines and no function over 150; comments
# state rules instead of pointing at documents outside the repository; the
# code is as .clang-format says.
. "$TOP/tests/lib.sh"
cd "$TOP" || exit 1

order="base net config pkg install server"
rank() { # folder -> its place in $order (0 when not a layer)
	i=1
	for l in $order; do
		[ "$l" = "$1" ] && { echo $i; return; }
		i=$((i + 1))
	done
	echo 0
}

bad=$T/layers
: >"$bad"
for f in core/*/*.c core/*/*.h; do
	layer=${f#core/}; layer=${layer%%/*}
	me=$(rank "$layer")
	if [ "$me" = 0 ]; then
		echo "$f: core/$layer is not a layer ($order)" >>"$bad"
		continue
	fi
	grep -n '^#include "' "$f" | while IFS= read -r line; do
		inc=${line#*\"}; inc=${inc%\"*}
		case $inc in
		*/*) ;;
		*) [ -e "$(dirname "$f")/$inc" ] || [ -e "build/gen/$inc" ] ||
			echo "$f: includes \"$inc\" without its folder" >>"$bad"
		   continue ;;
		esac
		them=$(rank "${inc%%/*}")
		if [ "$them" = 0 ] || [ "$them" -gt "$me" ]; then
			echo "$f:${line%%:*}: core/$layer includes $inc, a layer above it" >>"$bad"
		fi
	done
done
check "each core folder includes only itself and the layers below ($(cat "$bad" | head -3 | tr '\n' ' '))" test ! -s "$bad"

grep -nE '(^|[^a-z_])(secure_)?getenv *\(' core/*/*.c | grep -v '^core/config/' |
	grep -vE '^[^:]*:[0-9]+: *(/\*|\*)' >"$bad"
check "no getenv below or beside the config layer ($(head -3 "$bad" | tr '\n' ' '))" test ! -s "$bad"

: >"$bad"
for f in core/*/*.[ch] applets/*.[ch]; do
	n=$(wc -l <"$f")
	[ "$n" -le 900 ] || echo "$f: $n lines" >>"$bad"
done
check "no source file over 900 lines ($(head -3 "$bad" | tr '\n' ' '))" test ! -s "$bad"

# A definition starts at a line "name(" in column 0 (the return type is on
# the line before) and ends at the next "}" in column 0.
awk 'FNR == 1 { fn = "" }
	/^[a-z_][a-z0-9_]*\(/ { fn = $0; sub(/\(.*/, "", fn); start = FNR }
	/^}/ && fn != "" { if (FNR - start > 150) print FILENAME ": " fn "() " FNR - start " lines"; fn = "" }' \
	core/*/*.c applets/*.c >"$bad"
check "no function over 150 lines ($(head -3 "$bad" | tr '\n' ' '))" test ! -s "$bad"

# JSON is written by the writer (core/base/json.h): no literal opens an
# object or puts a format directive where a JSON value goes. The session
# output fast path (what the writer would write, byte for byte) and the
# journal reader that finds an event's type are the two known lines.
grep -nE '"\{\\"|\\":%|\\":\\"%' core/*/*.c applets/*.c |
	grep -vF -e 'memcpy(o, "{\"seq\":", 7);' -e 'has_prefix(line, "{\"seq\":", 7)' >"$bad"
check "JSON only through the writer ($(head -3 "$bad" | cut -c1-120 | tr '\n' ' '))" test ! -s "$bad"

# What a caller does never depends on an error's message text (it may be
# cut or reworded): on its code, sys or cause instead.
grep -nE '(strn?(case)?cmp|strstr|memmem|strn?casestr) *\([^;]*(\.|->)msg\b' core/*/*.c applets/*.c >"$bad"
check "no decision on an error's message text ($(head -3 "$bad" | cut -c1-120 | tr '\n' ' '))" test ! -s "$bad"

grep -nE 'SPEC §|SPEC\.md|[Ss]eed [0-9]|\bissue [0-9]+' core/*/*.[ch] applets/*.[ch] >"$bad"
check "comments state rules, not pointers to outside documents ($(head -3 "$bad" | cut -c1-120 | tr '\n' ' '))" test ! -s "$bad"

if command -v clang-format >/dev/null 2>&1; then
	: >"$bad"
	for f in core/*/*.[ch] applets/*.[ch]; do
		clang-format --style=file "$f" | cmp -s - "$f" || echo "$f" >>"$bad"
	done
	check "the code is as .clang-format says (clang-format -i $(head -5 "$bad" | tr '\n' ' '))" test ! -s "$bad"
else
	skip "the code is as .clang-format says" "clang-format is not installed"
fi
