# make e2e: `fetch --sha256` of a real npm tarball (codex 0.171.0 linux-x64,
# 164 MiB) from registry.npmjs.org against curl of the same URL in the same
# run: curl -o /dev/null (the network floor; the goal is <= 1.05x) and
# curl -o FILE (both write the file). Rounds alternate ours, curl -o
# /dev/null, curl -o FILE (E2E_ROUNDS, default 3); the medians of wall and
# CPU (user + system) are in the names of the checks and on stderr, for the
# record. The checks are only that ours verified the file and that it is
# curl's byte for byte: no timed assertion. Ours runs with the host's CA
# settings (SSL_CERT_FILE / SSL_CERT_DIR as they are), as a user's would.
. "$TOP/tests/lib.sh"
. "$TOP/tools/benchlib.sh" # median, wall_cpu_ms

URL=${E2E_FETCH_URL:-https://registry.npmjs.org/@openai/codex/-/codex-0.171.0-linux-x64.tgz}
SHA=${E2E_FETCH_SHA256:-e13d67afb0533cc6160b5f4140e4ad07e2acd87adbaa081bbf69b82e90cf4e55}
E2E_ROUNDS=${E2E_ROUNDS:-3}

if ! command -v curl >/dev/null 2>&1; then
	skip "fetch against curl" "curl is not installed"
	exit 0
fi
r() { awk -v a="$1" -v b="$2" 'BEGIN{if (b + 0 > 0) printf "%.2fx", a / b; else print "n/a"}'; }

: >"$T/fail" >"$T/figures"
i=1
while [ $i -le "$E2E_ROUNDS" ]; do
	o=$(wall_cpu_ms "'$BIN' fetch '$URL' --sha256 $SHA -o '$T/ours.tgz' -q")
	[ "$o" = fail ] && echo "ours failed in round $i" >>"$T/fail" && o="0 0"
	[ $i -lt "$E2E_ROUNDS" ] && rm -f "$T/ours.tgz"
	n=$(wall_cpu_ms "curl -sS -o /dev/null '$URL'")
	[ "$n" = fail ] && echo "curl -o /dev/null failed in round $i" >>"$T/fail" && n="0 0"
	f=$(wall_cpu_ms "curl -sS -o '$T/curl.tgz' '$URL'")
	[ "$f" = fail ] && echo "curl -o FILE failed in round $i" >>"$T/fail" && f="0 0"
	[ $i -lt "$E2E_ROUNDS" ] && rm -f "$T/curl.tgz"
	printf 'e2e fetch: round %s: ours %s, curl -o /dev/null %s, curl -o FILE %s (wall ms, CPU ms)\n' \
		"$i" "$o" "$n" "$f" >&2
	echo "$o $n $f" >>"$T/figures"
	i=$((i + 1))
done
[ -s "$T/fail" ] && cat "$T/fail" >&2
col() { median $(awk -v c="$1" '{print $c}' "$T/figures"); }
ow=$(col 1) oc=$(col 2) nw=$(col 3) nc=$(col 4) fw=$(col 5) fc=$(col 6)
check "fetch $(basename "$URL"): median of $E2E_ROUNDS: wall ours/curl -o /dev/null $(r "$ow" "$nw") ($ow vs $nw ms), \
ours/curl -o FILE $(r "$ow" "$fw") (vs $fw ms); CPU $(r "$oc" "$nc") ($oc vs $nc ms) and $(r "$oc" "$fc") \
(vs $fc ms); all succeeded" test ! -s "$T/fail"
check "ours is curl's file byte for byte" cmp -s "$T/ours.tgz" "$T/curl.tgz"
printf 'e2e fetch: %s (median of %s): wall ours %s ms, curl -o /dev/null %s ms (%s, goal <= 1.05x), curl -o FILE %s ms (%s); CPU ours %s ms, curl -o /dev/null %s ms (%s), curl -o FILE %s ms (%s)\n' \
	"$(basename "$URL")" "$E2E_ROUNDS" "$ow" "$nw" "$(r "$ow" "$nw")" "$fw" "$(r "$ow" "$fw")" "$oc" "$nc" \
	"$(r "$oc" "$nc")" "$fc" "$(r "$oc" "$fc")" >&2
