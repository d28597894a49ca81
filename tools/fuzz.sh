#!/bin/sh
# make fuzz: run each libFuzzer target for SECONDS and fail on any crash.
#
#   tools/fuzz.sh SECONDS BIN...
#
# Each target build/fuzz/fuzz_NAME keeps a growing corpus in
# build/fuzz-corpus/fuzz_NAME/, seeded from tests/fuzz/corpus/fuzz_NAME/ (or
# tests/fuzz/corpus/NAME/) when present. A crash, leak, timeout or sanitizer
# report leaves its reproducer under build/fuzz-crashes/fuzz_NAME/ and the log
# under build/fuzz-logs/. The summary ends with one line "N passed, N failed".
set -u
[ $# -ge 1 ] || { echo "usage: $0 SECONDS BIN..." >&2; exit 2; }
secs=$1
shift
case $secs in '' | *[!0-9]*) echo "fuzz: SECONDS must be a whole number, got '$secs'" >&2; exit 2 ;; esac
top=$(cd "$(dirname "$0")/.." && pwd)
b=$top/build
if [ $# -eq 0 ]; then
	echo "fuzz: no fuzz targets (tests/fuzz/fuzz_*.c) in this tree"
	echo "0 passed, 0 failed"
	exit 0
fi

# Each target alone uses one core; the machine is shared, so run them one
# after another. -rss_limit_mb keeps a runaway allocation from taking the box.
pass=0 failn=0
summary=""
for t in "$@"; do
	name=$(basename "$t")
	corpus=$b/fuzz-corpus/$name
	crashes=$b/fuzz-crashes/$name
	log=$b/fuzz-logs/$name.log
	mkdir -p "$corpus" "$crashes" "$(dirname "$log")"
	for seed in "$top/tests/fuzz/corpus/$name" "$top/tests/fuzz/corpus/${name#fuzz_}"; do
		[ -d "$seed" ] && cp -R "$seed"/. "$corpus"/
	done
	dict=""
	for d in "$top/tests/fuzz/$name.dict" "$top/tests/fuzz/${name#fuzz_}.dict"; do
		[ -f "$d" ] && dict="-dict=$d"
	done
	before=$(find "$corpus" -type f | wc -l)
	touch "$crashes/.start"
	echo "fuzz: $name for ${secs}s (corpus $before files)"
	# shellcheck disable=SC2086
	ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
	UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
	"$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$crashes/" $dict "$corpus" >"$log" 2>&1
	rc=$?
	after=$(find "$corpus" -type f | wc -l)
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	found=$(find "$crashes" -type f -newer "$crashes/.start" 2>/dev/null | head -1)
	if [ $rc -eq 0 ] && ! grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$log"; then
		pass=$((pass + 1))
		line="ok - $name: ${runs:-?} runs, corpus $before -> $after"
	else
		failn=$((failn + 1))
		why=$(grep -m1 -E 'ERROR: |runtime error:|SUMMARY:' "$log" | cut -c1-160)
		line="not ok - $name: exit $rc: ${why:-see $log}; reproducer: ${found:-none}; log: $log"
		grep -m1 -A12 -E 'ERROR: |runtime error:' "$log" | sed 's/^/    /'
	fi
	echo "$line"
	summary="$summary$line
"
done
echo
echo "fuzz summary (${secs}s per target):"
printf '%s' "$summary"
echo "$pass passed, $failn failed"
[ $failn -eq 0 ]
