# Every row of `make bench` measures: tools/bench.sh runs whole at smoke
# sizes (a few MiB, one round, one-second wrk runs) and its table is read
# back. A row fails when a cell says fail, when it says n/a where a figure
# belongs (its drivers did not build, a run failed), or when it has no
# figure at all; the one excuse is a reason "n/a (needs X[, Y][ and Z])"
# naming a command, an applet of the binary or root that this machine has
# not (tools/benchlib.sh). The npm-lock rows use a small lockfile made here
# (tools/bench/agentfix.py), so nothing reaches registry.npmjs.org.
. "$TOP/tests/lib.sh"
# Its rows are read, never judged, so it runs beside the other files.

# has ITEM: the command, the binary's applet, or root (the uid) is here
has() {
	case $1 in
	root) [ "$(id -u)" = 0 ] ;;
	nginx) command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] ;;
	*) command -v "$1" >/dev/null 2>&1 || "$BIN" --list 2>/dev/null | grep -qx "$1" ;;
	esac
}

# unmeasured TABLE: one line "FIGURE: why" per row of tools/bench.sh's
# table that did not measure and is not excused
unmeasured() {
	awk 'NR > 2 && / \| / {
		n = split($0, f, / \| /)
		fig = f[1]; for (i = 2; i <= n - 3; i++) fig = fig " | " f[i]
		for (i = n - 2; i <= n; i++) { gsub(/^ +| +$/, "", f[i]) }
		sub(/ +$/, "", fig)
		print fig "\t" f[n - 2] "\t" f[n - 1] "\t" f[n]
	}' "$1" | while IFS='	' read -r fig ours ref ratio; do
		why=""
		case "$ours $ref" in
		*fail*) why="fail" ;;
		esac
		if [ -z "$why" ] && [ "$ours" = n/a ] && [ "$ref" = n/a ] && [ -z "$ratio" ]; then
			why="no figure"
		fi
		if [ -z "$why" ] && { [ "$ours" = n/a ] || [ "$ref" = n/a ] || [ -z "$ours" ] || [ -z "$ref" ]; } &&
			case $ratio in n/a*) true ;; *) false ;; esac; then
			why=$ratio
			case $ratio in
			"n/a (needs "*)
				items=$(printf '%s\n' "${ratio#n/a (needs }" | sed 's/[):(].*//; s/, / /g; s/ and / /g')
				for it in $items; do
					has "$it" || { why=""; break; }
				done
				;;
			esac
		fi
		[ -z "$why" ] || printf '%s: %s\n' "$fig" "$why"
	done
}

# ---- the rule itself, on a table made here ----------------------------------------
cat >"$T/fake" <<'EOF'
header
------
measured                    |  1.0 |  2.0 | 0.50x
phases                      |  n/a |  n/a | download 3 extract 4
ensure fast path, us/call   |  n/a |  n/a | n/a (driver did not build)
a tool that is here         |  n/a |  n/a | n/a (needs sh)
a tool that is not here     |  n/a |  n/a | n/a (needs sh and abx-no-such-tool)
a figure with a | inside    | fail | fail | n/a (a run failed)
a reference that ran        |  3.0 |  n/a | n/a (needs sh: it is there)
no reference by design      |  3.0 | none | (3 ms per install)
EOF
unmeasured "$T/fake" >"$T/fake.out"
if [ "$(cat "$T/fake.out")" = "ensure fast path, us/call: n/a (driver did not build)
a tool that is here: n/a (needs sh)
a figure with a | inside: fail
a reference that ran: n/a (needs sh: it is there)" ]; then
	ok "a row is unmeasured unless it names a tool missing here"
else
	not_ok "a row is unmeasured unless it names a tool missing here" "$(cat "$T/fake.out")"
fi

# ---- tools/bench.sh at smoke sizes -----------------------------------------------------
# the npm-lock bench's store: one small lockfile resolved on registry.npmjs.org
# (npm.sh points it at its own fixture registry)
if ! PYTHONPATH="$FIXTURES" python3 "$TOP/tools/bench/agentfix.py" "$T/gen" https://registry.npmjs.org 1 3 \
	>"$T/gen.out" 2>&1; then
	not_ok "the npm store for the bench" "$(tail -3 "$T/gen.out")"
	exit 1
fi
mkdir -p "$T/store"
mv "$T/gen/reg" "$T/store/reg"
cp "$T/gen/m/agent/package-lock.json" "$T/gen/m/agent/package.json" "$T/store/"

# nginx's workers (nobody, under root) read their files through TMPDIR
chmod 755 "$T"
mkdir -m 755 "$T/tmp"
export TMPDIR="$T/tmp" BENCH_RUNS=3 WRK_ARGS="-t1 -c4 -d1s --latency" OP_WRK_ARGS="-t1 -c2 -d1s --latency" \
	OP_WRK1_ARGS="-t1 -c1 -d1s --latency" OP_ROUNDS=1 INSTALL_BENCH_MB=2 INSTALL_BENCH_RUNS=1 \
	AGENT_NATIVE_MB=1 AGENT_JS=3 AGENT_RUNS=1 OCI_NATIVE_MB=1 OCI_JS=3 OCI_RUNS=1 OCI_FLEET=2 FETCH_MB=2 \
	FETCH_RUNS=1 SESS_LINES=2000 TOKEN_REQS=5000 TOKEN_ROUNDS=1 EXTRACT_RUNS=1 EXTRACT_MB=2 NPM_BENCH_RUNS=1 NPM_BENCH_STORE="$T/store" \
	NPM_BENCH_PKG=@bench/agent@1.0.0 NPM_BENCH_BIN=agent
unset FETCH_REAL FETCH_BEFORE
sh "$TOP/tools/bench.sh" "$BIN" >"$T/table" 2>"$T/bench.err"
rc=$?
if [ $rc -ne 0 ] || ! grep -q '^figure ' "$T/table"; then
	not_ok "tools/bench.sh runs" "exit $rc: $(tail -5 "$T/bench.err")"
	exit 0
fi
ok "tools/bench.sh runs ($(grep -c ' | ' "$T/table") rows)"
cat "$T/table" >&2
unmeasured "$T/table" >"$T/bad"
if [ -s "$T/bad" ]; then
	not_ok "every bench row measures" "$(cat "$T/bad")"
else
	ok "every bench row measures"
fi
# the rows this file was written for, present and measured
for f in "ensure fast path, user-owned" "ensure fast path, root-owned" "npm-lock install (" \
	"cold install 2 MiB tar.gz"; do
	if grep -q "^$f" "$T/table"; then
		ok "the row '$f' is there"
	else
		not_ok "the row '$f' is there" "$(grep -c ' | ' "$T/table") rows, none such"
	fi
done
