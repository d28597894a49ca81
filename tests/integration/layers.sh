# The source tree keeps its shape: core/ is layered, each folder including
# and calling only itself and the folders below it (base < net < config <
# pkg < install < server; applets/ above all); the files of one folder
# include and call each other without a loop (bottom-up inside a folder as
# between folders); only the config layer reads the environment; no
# function is over 150 lines; comments state rules instead of pointing at
# documents outside the repository, name only files that exist, number no
# steps and tell no history; the C code, tests' and tools' too, is as
# .clang-format says.
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
check "each core folder includes only itself and the layers below ($(head -3 "$bad" | tr '\n' ' '))" test ! -s "$bad"

# A folder's private header (<module>_int.h: what its files share) is
# included by that folder's files alone; the rest of the tree sees only the
# public headers (core/install/install.h is the installer's whole front,
# and struct install_env is defined in install_int.h, so no file outside
# core/install can write a field of the installer's environment). Unit
# tests and bench drivers, which test a module from inside, may.
grep -nE '^#include "[a-z]+/[a-z0-9_]+_int\.h"' core/*/*.[ch] applets/*.[ch] | while IFS= read -r hit; do
	inc=${hit#*\"}
	case ${hit%%:*} in
	core/"${inc%%/*}"/*) ;;
	*) printf '%s\n' "$hit" ;;
	esac
done >"$bad"
check "a folder's _int.h is included only inside it ($(head -3 "$bad" | tr '\n' ' '))" test ! -s "$bad"

L="python3 $FIXTURES/layers.py"
# the C files of tests and tools, under the same formatting and comment rules
tc=$(ls tests/unit/*.[ch] tests/fuzz/*.[ch] tests/fixtures/*.c; find tools -name '*.c' | sort)

# A folder's files include each other bottom-up: no a.c including b.h while
# b.c includes a.h, directly or around a longer loop.
$L includes core/*/*.[ch] applets/*.[ch] >"$bad" || echo "layers.py includes failed (layers.err)" >>"$bad"
check "no #include loop between the files of a folder ($(head -3 "$bad" | tr '\n' ';'))" test ! -s "$bad"

# Calls, from the built objects: a symbol an object needs, defined by
# another object of the same folder, is a call between two files; a loop
# among them is a floor whose files cannot be read bottom-up. Every loop is
# printed, with one symbol per arrow (on stderr too: the log's layers.err).
$L calls build/rel core/*/*.c applets/*.c >"$T/calls" || echo "stale: layers.py calls failed (layers.err)" >>"$T/calls"
grep -v '^upward: ' "$T/calls" | sed 's/^cycle: //; s/^stale: //' >"$bad"
sed 's/^/layers: /' "$bad" >&2
check "no call loop between the files of a folder ($(wc -l <"$bad") loops: $(head -5 "$bad" | tr '\n' ';'))" test ! -s "$bad"
grep -E '^(upward|stale): ' "$T/calls" | sed -E 's/^(upward|stale): //' >"$bad"
check "no call from a layer into one above it ($(head -3 "$bad" | tr '\n' ';'))" test ! -s "$bad"

# The environment is read in core/config alone (config_env, config_load), so
# a variable means one thing everywhere and one list names them all. Handing
# the whole environment to a child unchanged is not reading it: serve starts
# sessions with its own, the shim runs the tool with its caller's, lock
# passes npm the caller's network variables.
env_forward="applets/serve.c applets/shim.c applets/lock_npm.c"
grep -nE '(^|[^a-z_])((secure_)?getenv *\(|environ\b)' core/*/*.[ch] applets/*.[ch] | grep -v '^core/config/' |
	grep -vE '^[^:]*:[0-9]+:[[:space:]]*(/\*|\*)' | while IFS= read -r hit; do
	case " $env_forward " in
	*" ${hit%%:*} "*) printf '%s\n' "$hit" | grep -qE 'getenv *\(' || continue ;;
	esac
	printf '%s\n' "$hit"
done >"$bad"
check "no getenv or environ outside the config layer ($(head -3 "$bad" | tr '\n' ' '))" test ! -s "$bad"

# A definition starts at a line "name(" in column 0 (the return type is on
# the line before) and ends at the next "}" in column 0.
awk 'FNR == 1 { fn = "" }
	/^[a-z_][a-z0-9_]*\(/ { fn = $0; sub(/\(.*/, "", fn); start = FNR }
	/^}/ && fn != "" { if (FNR - start > 150) print FILENAME ": " fn "() " FNR - start " lines"; fn = "" }' \
	core/*/*.c applets/*.c >"$bad"
check "no function over 150 lines ($(head -3 "$bad" | tr '\n' ' '))" test ! -s "$bad"

# JSON is written by the writer (core/base/json.h): no literal opens an
# object or puts a format directive where a JSON value goes. The session
# output and message item fast paths (what the writer would write, byte for
# byte), the journal reader that finds an event's type and the codex
# message line recogniser (a line read, not written) are the known lines.
grep -nE '"\{\\"|\\":%|\\":\\"%' core/*/*.c applets/*.c |
	grep -vF -e 'memcpy(o, "{\"seq\":", 7);' -e 'has_prefix(line, "{\"seq\":", 7)' \
		-e 'static const char a[] = "{\"type\":\"item.completed\",\"item\":{\"id\":\"",' >"$bad"
check "JSON only through the writer ($(head -3 "$bad" | cut -c1-120 | tr '\n' ' '))" test ! -s "$bad"

# What a caller does never depends on an error's message text (it may be
# cut or reworded): on its code, sys or cause instead.
grep -nE '(strn?(case)?cmp|strstr|memmem|strn?casestr) *\([^;]*(\.|->)msg\b' core/*/*.c applets/*.c >"$bad"
check "no decision on an error's message text ($(head -3 "$bad" | cut -c1-120 | tr '\n' ' '))" test ! -s "$bad"

# No floating-point conversion in what links core/base/fmt.c (the release
# binary and the bench drivers built on core/'s objects): that printf has
# none and refuses one at run time; found here, it is found before.
grep -nP '(?<!%)%[-+ #0]*(\d+|\*)?(\.(\d+|\*))?L?[fFeEgGaA]' core/*/*.c applets/*.c tools/bench/ensure_drv.c \
	tools/bench/extract_drv.c | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*)' >"$bad"
check "no %f, %e, %g or %a where core/base/fmt.c formats ($(head -3 "$bad" | cut -c1-120 | tr '\n' ' '))" test ! -s "$bad"

# One of each: bytes become hex through hex_encode (core/base/digest.h): no
# other digit table or printf of bytes in a row; fail is the applets' one
# (applets/common.h), no file's own helper.
grep -nE '"%02[xX]"|%02[xX]%02[xX]|= *"0123456789(abcdef|ABCDEF)"' core/*/*.c applets/*.c |
	grep -v '^core/base/digest\.c:' >"$bad"
grep -nE '^fail\(' core/*/*.c applets/*.c | grep -v '^applets/common\.c:' >>"$bad"
check "one hex encoder, one fail ($(head -3 "$bad" | cut -c1-120 | tr '\n' ' '))" test ! -s "$bad"

# A directory's entries are read by fs_dir_names or fs_walk (core/base/fs.h)
# only.
grep -nE '\b(fd)?opendir *\(' core/*/*.c applets/*.c | grep -v '^core/base/fs_walk\.c:' >"$bad"
check "directories are read through fs_dir_names ($(head -3 "$bad" | cut -c1-120 | tr '\n' ' '))" test ! -s "$bad"

# A message is formatted by err_fmtv (core/base/err.h), which elides the
# middle of a long path with a mark where vsnprintf would cut the end
# silently: vsnprintf only in the formatters (core/base/err.c, fmt.c) and
# where a line that does not fit is refused, not shown (a tree listing's
# line, a metrics line).
grep -nE '\bvsnprintf *\(' core/*/*.c applets/*.c |
	grep -vE '^core/base/(err|fmt)\.c:|^core/pkg/cache_tree\.c:|^core/server/api_metrics\.c:' >"$bad"
check "messages are formatted by err_fmtv, never cut by vsnprintf ($(head -3 "$bad" | cut -c1-120 | tr '\n' ' '))" test ! -s "$bad"

# A struct err starts zeroed (core/base/err.h): its details pointer is NULL
# or the caller's buffer, never what the stack held before. A local
# declared without an initializer (outside a struct's definition; static
# ones are zeroed) is refused.
awk '/^(static )?(typedef )?struct [a-z_0-9]* ?\{/ { ins = 1 }
	/^\}/ { ins = 0 }
	!ins && /^[ \t]+struct err [a-z_0-9]+(\[[^]]*\])?(, *[a-z_0-9]+)*;/ { print FILENAME ":" FNR ": " $0 }' \
	core/*/*.c applets/*.c >"$bad"
check "every struct err starts zeroed ($(head -3 "$bad" | cut -c1-120 | tr '\n' ' '))" test ! -s "$bad"

# One assembly of the configuration stack (core/server/cfgstack.c): the
# policy and the op registry are built from a configuration nowhere else.
grep -nE '\b(policy_setup|ops_init|ops_build) *\(' core/*/*.c applets/*.c |
	grep -vE '^core/server/cfgstack\.c:|^core/server/(policy|ops)\.c:[0-9]+:(policy_setup|ops_init|ops_build)\(' >"$bad"
check "the configuration stack is assembled in cfgstack.c only ($(head -3 "$bad" | cut -c1-120 | tr '\n' ' '))" \
	test ! -s "$bad"

# shellcheck disable=SC2086 # $tc: one word per file
grep -nE 'SPEC §|SPEC\.md|[Ss]eed [0-9]|\bissue [0-9]+' core/*/*.[ch] applets/*.[ch] $tc >"$bad"
check "comments state rules, not pointers to outside documents ($(head -3 "$bad" | cut -c1-120 | tr '\n' ' '))" test ! -s "$bad"
# The shell and Python test files too: a comment says what is checked, not
# which document or ticket asked for it.
find tests -name '*.sh' -o -name '*.py' | sort | xargs grep -nE \
	'(^|[[:space:]])#.*(SPEC §|SPEC\.md|§ ?[0-9]|[Ss]eed [0-9]|\bissues? #?[0-9])' >"$bad"
check "test scripts' comments hold no pointers either ($(wc -l <"$bad"): $(head -3 "$bad" | cut -c1-120 | tr '\n' ' '))" \
	test ! -s "$bad"

# What reaches a test from outside is the runner's: tests/lib.sh clears every
# other ABX_ variable, so a file that reads one from its caller (a default or
# a required value), or a make target that hands one to tests/run.sh, would
# get nothing.
{
	find tests -name '*.sh' | sort | xargs grep -HnoE '\$\{ABX_[A-Za-z0-9_]+:?[-?=]'
	awk '/\\$/ { l = l substr($0, 1, length($0) - 1); next }
	{
		l = l $0
		while (l ~ /tests\/run\.sh/ && match(l, /ABX_[A-Za-z0-9_]+=/)) {
			print FILENAME ":" NR ":" substr(l, RSTART, RLENGTH)
			l = substr(l, RSTART + RLENGTH)
		}
		l = ""
	}' Makefile
} | grep -vE ':(\$\{)?ABX_(TEST|E2E)_' >"$bad"
check "tests take from their caller only ABX_TEST_* and ABX_E2E_* ($(head -3 "$bad" | tr '\n' ' '))" test ! -s "$bad"

# shellcheck disable=SC2086
$L comments core/*/*.[ch] applets/*.[ch] $tc >"$T/comments" ||
	printf '%s\n' "names: layers.py comments failed (layers.err)" "step: idem" "history: idem" >>"$T/comments"
grep '^names: ' "$T/comments" | sed 's/^names: //' >"$bad"
check "comments name only files that exist ($(wc -l <"$bad"): $(head -3 "$bad" | tr '\n' ';'))" test ! -s "$bad"
grep '^step: ' "$T/comments" | sed 's/^step: //' >"$bad"
check "comments number no steps ($(wc -l <"$bad"): $(head -3 "$bad" | cut -c1-120 | tr '\n' ';'))" test ! -s "$bad"
grep '^history: ' "$T/comments" | sed 's/^history: //' >"$bad"
check "comments tell what is, not what was ($(wc -l <"$bad"): $(head -3 "$bad" | cut -c1-120 | tr '\n' ';'))" test ! -s "$bad"

if command -v clang-format >/dev/null 2>&1; then
	# one run over every file (a run per file costs half a minute)
	# shellcheck disable=SC2086
	clang-format --style=file --dry-run --Werror core/*/*.[ch] applets/*.[ch] $tc >/dev/null 2>"$T/cf"
	cf=$?
	sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' "$T/cf" | uniq >"$bad"
	# it failed otherwise (a file it could not read, an option it lacks)
	[ $cf -eq 0 ] || [ -s "$bad" ] || head -3 "$T/cf" >"$bad"
	check "the code is as .clang-format says (clang-format -i $(head -5 "$bad" | tr '\n' ' '))" test ! -s "$bad"
else
	skip "the code is as .clang-format says" "clang-format is not installed"
fi
