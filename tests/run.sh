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
#   tests/run.sh -j N ...               N at once (ABX_TEST_JOBS; default twice the
#                                       number of cores, as most of a file's time
#                                       is waiting on its peers; 1 with --e2e)
#
# Unit binaries and test files run at once, each file in its own temporary
# directory ($T, with its own HOME: tests/lib.sh); their lines are printed
# unit by unit, then file by file in name order. The longest start first:
# by their time in the last run ($log/times), else by their size. A file
# with a line "# run.sh: alone" runs when no other does (it writes where
# the others read), after the rest.
top=$(cd "$(dirname "$0")/.." && pwd)
pass=0 failn=0 skip=0
log=${ABX_TEST_LOG:-$top/build/test/log}; mkdir -p "$log"
bin=${ABX_TEST_BIN:-$top/build/agent-sandbox-server}
only="" names="" e2e=0 integration=1 extra="" jobs=${ABX_TEST_JOBS:-}
units=""
while [ $# -gt 0 ]; do
	case $1 in
	--only) only="$only $2"; shift ;;
	--name) names="$names $2"; shift ;;
	--extra) extra="$extra $2"; shift ;;
	--e2e) e2e=1 ;;
	-j | --jobs) jobs=$2; shift ;;
	-j[0-9]*) jobs=${1#-j} ;;
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
sel="" together="" alone=""
for t in $files; do
	name=$(basename "$t" .sh)
	case " $extra " in *" $(dirname "$t") "*) ;; *) selected "$name" || continue ;; esac
	sel="$sel $t"
	rm -f "$log/$name.rc"
	if grep -q '^# run.sh: alone' "$t"; then alone="$alone $t"; else together="$together $t"; fi
done
for u in $units; do rm -f "$log/$(basename "$u").rc"; done
if [ -z "$jobs" ]; then
	if [ $e2e -eq 1 ]; then jobs=1
	else jobs=$((2 * $(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1))); fi
fi
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1

# longest PATH...: the paths, the longest first (milliseconds in the last
# run, or else bytes: a file's size follows its number of cases)
longest() {
	for _p in "$@"; do
		_n=$(basename "$_p" .sh)
		_t=$(awk -v n="$_n" '$1 == n { t = $2 } END { print t + 0 }' "$log/times" 2>/dev/null)
		[ "${_t:-0}" -gt 0 ] || _t=$(wc -c <"$_p")
		echo "$_t $_p"
	done | sort -rn | cut -d' ' -f2-
}

# one PATH: run the unit binary or the test file; its output in
# $log/NAME.out (a file's stderr in NAME.err), then its exit code in
# NAME.rc (the sign that it is over) and its time in $log/times.
one() {
	_name=$(basename "$1" .sh)
	_t0=$(date +%s%3N)
	case $1 in
	*.sh) BIN=$bin TOP=$top timeout 900 sh "$1" >"$log/$_name.out" 2>"$log/$_name.err" </dev/null 3>&- ;;
	*) "$1" >"$log/$_name.out" 2>&1 </dev/null 3>&- ;;
	esac
	echo $? >"$log/$_name.rc.tmp"
	echo "$_name $(($(date +%s%3N) - _t0))" >>"$log/times.new"
	mv "$log/$_name.rc.tmp" "$log/$_name.rc"
}
# wait_rc NAME: until NAME's exit code is there (or the runs are over)
wait_rc() {
	while [ ! -e "$log/$1.rc" ]; do
		kill -0 "$launcher" 2>/dev/null || break
		sleep 0.1
	done
}
# The runs go from a background shell, at most $jobs at once: a FIFO
# holds one token per slot, a run takes one to start and gives it back.
if [ -n "$sel$units" ]; then
	fifo=$(mktemp -u "${TMPDIR:-/tmp}/abx-run.XXXXXX")
	mkfifo -m 600 "$fifo" || exit 1
	: >"$log/times.new"
	(
		exec 3<>"$fifo"
		rm -f "$fifo"
		i=0
		while [ $i -lt "$jobs" ]; do echo >&3; i=$((i + 1)); done
		# shellcheck disable=SC2086
		for t in $(longest $units $together); do
			read -r _ <&3
			{ one "$t"; echo >&3; } &
		done
		wait
		for t in $alone; do one "$t"; done
		# this run's times over the last ones (a run may select a few)
		cat "$log/times" "$log/times.new" 2>/dev/null |
			awk '{ t[$1] = $2 } END { for (n in t) print n, t[n] }' >"$log/times.tmp"
		mv "$log/times.tmp" "$log/times"
	) &
	launcher=$!
fi
for u in $units; do
	name=$(basename "$u")
	out=$log/$name.out
	wait_rc "$name"
	rc=$(cat "$log/$name.rc" 2>/dev/null || echo 125)
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | awk '{s+=$1} END{print s+0}')
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | awk '{s+=$1} END{print s+0}')
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi # crashed or sanitizer report
	if [ "$f" -gt 0 ]; then
		echo "not ok - unit/$name ($f failed; see $out)"
		grep -E '^\[  (FAILED|ERROR) +\]|ERROR: |runtime error' "$out" | head -20 | sed 's/^/    /'
	else
		echo "ok - unit/$name ($p tests)"
	fi
	pass=$((pass + p)) failn=$((failn + f))
done
for t in $sel; do
	name=$(basename "$t" .sh)
	out=$log/$name.out
	wait_rc "$name"
	rc=$(cat "$log/$name.rc" 2>/dev/null || echo 125)
	grep -aE '^(ok|not ok|skip) - ' "$out" | sed -E "s#^(ok|not ok|skip) - #\1 - $name/#"
	count "$out"
	if [ $rc -ne 0 ] && ! grep -q '^not ok - ' "$out"; then
		echo "not ok - $name: exited $rc (see $log/$name.err)"
		tail -5 "$log/$name.err" | sed 's/^/    /'
		failn=$((failn + 1))
	fi
done
[ -n "$sel$units" ] && wait "$launcher"

if [ $skip -gt 0 ]; then echo "$pass passed, $failn failed, $skip skipped"
else echo "$pass passed, $failn failed"; fi
[ $failn -eq 0 ]
