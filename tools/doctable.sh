# A generated table between two marker lines of a documentation file, kept
# by tools/optdoc.sh and tools/errdoc.sh (sourced: it defines doc_table).
#
#   doc_table MODE FILE PROG KIND STALE FIX BEGIN END
#
# MODE --update replaces the lines between BEGIN and END in FILE with what
# the caller's table function prints; --check changes nothing and exits 1
# when FILE differs from that. PROG prefixes messages, KIND names the
# markers, STALE says the table is out of date and FIX is the command that
# brings it up to date.
doc_table() {
	mode=$1 f=$2 prog=$3 kind=$4 stale=$5 fix=$6 begin=$7 end=$8
	grep -qF "$begin" "$f" && grep -qF "$end" "$f" || { echo "$prog: $f lacks the $kind markers" >&2; exit 1; }
	tmp=$(mktemp)
	trap 'rm -f "$tmp" "$tmp.t"' EXIT
	table >"$tmp.t"
	awk -v b="$begin" -v e="$end" -v t="$tmp.t" '
		$0 == b { print; while ((getline l < t) > 0) print l; skip = 1; next }
		$0 == e { skip = 0 }
		!skip { print }' "$f" >"$tmp"
	if [ "$mode" = --check ]; then
		if ! cmp -s "$tmp" "$f"; then
			echo "$prog: $stale; run $fix $f" >&2
			diff -u "$f" "$tmp" | head -20 >&2 || true
			exit 1
		fi
	else
		cat "$tmp" >"$f"
	fi
}
