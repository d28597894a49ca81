# make e2e: cold and warm installs of the real codex, claude-code and gemini
# from registry.npmjs.org, against `npm install -g --prefix` of the same
# version in the same run. Ours includes node-runtime where the tool needs
# it (gemini); npm uses the host's node. Cold: empty caches; warm: the caches
# filled, a new tools directory (ours) or prefix (npm). The figures are
# printed as ratios (ours / npm) in the names of the checks and on stderr
# with the phases of ours (prepare -v), for the record; the checks are only
# that each install succeeded and runs: no timed assertion. Each timed run
# starts after an untimed sync, as the local benches do: npm never syncs
# what it writes (we syncfs before publishing), and without it the disk's
# writeback of one run's gigabyte slows the next run's writes, whichever
# side that is.
. "$TOP/tests/lib.sh"
. "$TOP/tools/benchlib.sh" # median

export HOME=$T/home ABX_SERVER_STATE_DIR=$T/state
mkdir -p "$HOME" "$T/nobin"
: >"$T/empty"
: >"$T/gempty"

if ! command -v npm >/dev/null 2>&1; then
	skip "agents against npm install -g" "npm is not installed"
	exit 0
fi
if [ "$(date +%N)" != "%N" ]; then now() { date +%s%3N; }; else now() { python3 -c 'import time; print("%.0f" % (time.time() * 1000))'; }; fi
ours() { # NAME CACHE N: ms of one prepare into a new tools directory o<N>
	n=$3
	sync # untimed (as in tools/bench): the previous run's writeback is not billed to this one
	_a=$(now)
	env PATH="$T/nobin" "$BIN" prepare --only "$1" --tools-dir "$T/o$n" --cache "$2" -v >"$T/out" 2>"$T/ours-$1-$n.err" ||
		echo "ours $1 failed: $(tail -2 "$T/ours-$1-$n.err")" >>"$T/fail"
	_b=$(now)
	echo $((_b - _a))
}
npmg() { # PKG@VER CACHE N: ms of one npm install -g into a new prefix p<N>
	n=$3
	sync
	_a=$(now)
	npm install -g --prefix "$T/p$n" --cache "$2" --prefer-offline --no-audit --no-fund --ignore-scripts \
		--userconfig "$T/empty" --globalconfig "$T/gempty" --registry https://registry.npmjs.org/ "$1" \
		>"$T/out" 2>"$T/npm-$n.err" || echo "npm $1 failed: $(tail -2 "$T/npm-$n.err")" >>"$T/fail"
	_b=$(now)
	echo $((_b - _a))
}
r() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2fx", a / b}'; }

# E2E_ROUNDS rounds (default 2), each with fresh caches; per round and tool:
# ours cold, npm cold, ours warm, npm warm (alternating, so neither side
# always runs on a warmer machine). The figures are the medians.
E2E_ROUNDS=${E2E_ROUNDS:-2}
TOOLS="codex:@openai/codex:0.171.0:codex claude-code:@anthropic-ai/claude-code:2.1.332:claude
	gemini:@google/gemini-cli:0.61.0:gemini"
k=0
: >"$T/fail"
round=1
while [ $round -le "$E2E_ROUNDS" ]; do
	for t in $TOOLS; do
		name=${t%%:*} rest=${t#*:}
		pkg=${rest%%:*} rest=${rest#*:}
		ver=${rest%%:*}
		k=$((k + 4))
		oc=$(ours "$name" "$T/oc-$name-$round" $k)
		nc=$(npmg "$pkg@$ver" "$T/nc-$name-$round" $((k + 1)))
		ow=$(ours "$name" "$T/oc-$name-$round" $((k + 2)))
		nw=$(npmg "$pkg@$ver" "$T/nc-$name-$round" $((k + 3)))
		printf 'e2e bench: round %s %s: cold ours %s ms npm %s ms (%s), warm ours %s ms npm %s ms (%s)\n' \
			"$round" "$name" "$oc" "$nc" "$(r "$oc" "$nc")" "$ow" "$nw" "$(r "$ow" "$nw")" >&2
		printf 'e2e bench: round %s %s phases cold: %s\ne2e bench: round %s %s phases warm: %s\n' "$round" \
			"$name" "$(sed -n "s/^agent-sandbox-server: timing $name [^:]*: //p" "$T/ours-$name-$k.err")" \
			"$round" "$name" \
			"$(sed -n "s/^agent-sandbox-server: timing $name [^:]*: //p" "$T/ours-$name-$((k + 2)).err")" >&2
		echo "$name $oc $nc $ow $nw $k" >>"$T/figures"
		rm -rf "$T/p$((k + 1))" "$T/p$((k + 3))"
	done
	round=$((round + 1))
done
[ -s "$T/fail" ] && cat "$T/fail" >&2
for t in $TOOLS; do
	name=${t%%:*} rest=${t#*:}
	rest=${rest#*:}
	ver=${rest%%:*} bin=${rest#*:}
	oc=$(median $(awk -v n="$name" '$1 == n {print $2}' "$T/figures"))
	nc=$(median $(awk -v n="$name" '$1 == n {print $3}' "$T/figures"))
	ow=$(median $(awk -v n="$name" '$1 == n {print $4}' "$T/figures"))
	nw=$(median $(awk -v n="$name" '$1 == n {print $5}' "$T/figures"))
	no=$(awk -v n="$name" '$1 == n {print $6}' "$T/figures" | tail -1)
	check "$name $ver: median of $E2E_ROUNDS rounds: cold ours/npm $(r "$oc" "$nc") ($oc vs $nc ms), warm \
$(r "$ow" "$nw") ($ow vs $nw ms); all succeeded" test ! -s "$T/fail"
	run env PATH="$T/nobin" "$T/o$no/bin/$bin" --version
	expect "$name: ours runs" 0 "$ver"
	printf 'e2e bench: %s %s cold (median of %s): ours %s ms, npm install -g %s ms, ratio %s (goal <= 0.5x)\n' \
		"$name" "$ver" "$E2E_ROUNDS" "$oc" "$nc" "$(r "$oc" "$nc")" >&2
	printf 'e2e bench: %s %s warm (median of %s): ours %s ms, npm install -g %s ms, ratio %s (goal <= 0.2x)\n' \
		"$name" "$ver" "$E2E_ROUNDS" "$ow" "$nw" "$(r "$ow" "$nw")" >&2
done
