#!/bin/sh
# The test runner: unit test binaries (cmocka, under ASan/UBSan), then each
# integration test file tests/integration/*.sh against the static binary.
# Integration files print "ok - NAME" / "not ok - NAME: why" lines (and
# "skip - NAME: why"). The last line is "N passed, N failed[, N skipped]".
#
#   tests/run.sh [UNIT_BIN...]          everything
#   tests/run.sh --only PATTERN ...     integration files matching PATTERN
#                                       (given again: matching any of them)
#   tests/run.sh --name NAME ...        the integration file NAME.sh (repeatable)
#   tests/run.sh --extra DIR            DIR/*.sh too, after the integration files
#   ABX_TEST_BIN=PATH                   the binary (default build/agent-sandbox-server;
#                                       make check-arm64: a qemu wrapper)
#   ABX_TEST_LOG=DIR                    the logs (default build/test/log)
#   tests/run.sh --e2e                  tests/e2e/*.sh (reach the npm registry)
#   tests/run.sh --no-integration UNIT_BIN...   the unit tests alone
top=$(cd "$(dirname "$0")/.." && pwd)
pass=0 failn=0 skip=0
log=${ABX_TEST_LOG:-$top/build/test/log}; mkdir -p "$log"
bin=${ABX_TEST_BIN:-$top/build/agent-sandbox-server}
only="" names="" e2e=0 integration=1 extra=""
units=""
while [ $# -gt 0 ]; do
	case $1 in
	--only) only="$only $2"; shift ;;
	--name) names="$names $2"; shift ;;
	--extra) extra="$extra $2"; shift ;;
	--e2e) e2e=1 ;;
	--no-integration) integration=0 ;;
	*) units="$units $1" ;;
	esac
	shift
done

# Sanitizer reports with file:line: the symbolizer of the compiler's own
# version (Debian: llvm-N, which tools/hostdeps.sh installs).
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
	v=$(${SAN_CC:-clang} -dumpversion 2>/dev/null | cut -d. -f1)
	for s in "/usr/lib/llvm-$v/bin/llvm-symbolizer" "$(command -v "llvm-symbolizer-$v")" \
		"$(command -v llvm-symbolizer)"; do
		if [ -n "$v" ] && [ -x "$s" ]; then
			export ASAN_SYMBOLIZER_PATH="$s" UBSAN_SYMBOLIZER_PATH="$s"
			break
		fi
	done
fi

# Races inside the host's glibc that TSan cannot see synchronise (tests/tsan.supp).
export TSAN_OPTIONS="suppressions=$top/tests/tsan.supp${TSAN_OPTIONS:+ $TSAN_OPTIONS}"

count() { # file with ok/not ok/skip lines
	p=$(grep -c '^ok - ' "$1" || true)
	f=$(grep -c '^not ok - ' "$1" || true)
	s=$(grep -c '^skip - ' "$1" || true)
	pass=$((pass + p)) failn=$((failn + f)) skip=$((skip + s))
}

for u in $units; do
	name=$(basename "$u")
	out=$log/$name.out
	"$u" >"$out" 2>&1
	rc=$?
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | awk '{s+=$1} END{print s+0}')
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | awk '{s+=$1} END{print s+0}')
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi # crashed or sanitizer report
	if [ "$f" -gt 0 ]; then
		echo "not ok - unit/$name ($f failed; see $out)"
		grep -E '^\[  (FAILED|ERROR) +\]|ERROR: |runtime error' "$out" | head -20 | sed 's/^/    /'
	else
		echo "ok - unit/$name ($p tests)"
	fi
	pass=$((pass + p)) failn=$((failn + f))
done

if [ $e2e -eq 1 ]; then files=$(ls "$top"/tests/e2e/*.sh 2>/dev/null)
elif [ $integration -eq 1 ]; then files=$(ls "$top"/tests/integration/*.sh 2>/dev/null)
else files=""; fi
# selected NAME: no --only nor --name, or one of them matches
selected() {
	[ -z "$only$names" ] && return 0
	case " $names " in *" $1 "*) return 0 ;; esac
	for o in $only; do
		case $1 in *$o*) return 0 ;; esac
	done
	return 1
}
for d in $extra; do files="$files $(ls "$d"/*.sh)"; done
for t in $files; do
	name=$(basename "$t" .sh)
	case " $extra " in *" $(dirname "$t") "*) ;; *) selected "$name" || continue ;; esac
	out=$log/$name.out
	BIN=$bin TOP=$top timeout 900 sh "$t" >"$out" 2>"$log/$name.err" </dev/null
	rc=$?
	grep -aE '^(ok|not ok|skip) - ' "$out" | sed -E "s#^(ok|not ok|skip) - #\1 - $name/#"
	count "$out"
	if [ $rc -ne 0 ] && ! grep -q '^not ok - ' "$out"; then
		echo "not ok - $name: exited $rc (see $log/$name.err)"
		tail -5 "$log/$name.err" | sed 's/^/    /'
		failn=$((failn + 1))
	fi
done

if [ $skip -gt 0 ]; then echo "$pass passed, $failn failed, $skip skipped"
else echo "$pass passed, $failn failed"; fi
[ $failn -eq 0 ]
