# Hostile configuration inputs across the applets that load them:
# an oversized, malformed, wrongly typed, too deep, BOM-prefixed, missing or
# non-regular configuration, policy or commands file is refused with its
# coded error and exit 2 (a configuration error), and nothing is written: no
# tools directory, no state directory, nothing in HOME.
. "$TOP/tests/lib.sh"

H=$T/home
mkdir -p "$H" "$T/in"
head -c 1100000 /dev/zero | tr '\0' ' ' >"$T/in/big.json"
echo '{}' >>"$T/in/big.json"
printf '[1,2' >"$T/in/trunc.json"
printf '\357\273\277{}' >"$T/in/bom.json"
printf '{"a": "\377"}' >"$T/in/utf8.json"
python3 -c "print('[' * 64 + ']' * 64)" >"$T/in/deep.json"
mkdir "$T/in/dir.json"

# hrun: the binary in a bare environment; its directories under $T.
hrun() {
	run env -i PATH=/usr/bin:/bin HOME="$H" ABX_SERVER_STATE_DIR="$T/state" \
		"$BIN" "$@" --tools-dir "$T/tools"
}
# untouched NAME: nothing was created by the last run.
untouched() {
	if [ -e "$T/tools" ] || [ -e "$T/state" ] || [ -n "$(ls -A "$H")" ]; then
		not_ok "$1: nothing written" "$(ls -A "$T/tools" "$T/state" "$H" 2>&1 | tr '\n' ' ')"
		rm -rf "$T/tools" "$T/state" "$H"/* "$H"/.[!.]*
	else
		ok "$1: nothing written"
	fi
}

# applet-specific argv that loads --config and changes things when it loads
for a in "prepare --only ripgrep" "prepare --dry-run" "fetch --only ripgrep --cache $T/cache" \
	"verify ripgrep" "check-config"; do
	for c in "big.json:json.too_large" "trunc.json:json.syntax" "bom.json:json.encoding" \
		"utf8.json:json.encoding" "deep.json:json.too_deep" "dir.json:io.error" "none.json:none.json"; do
		f=${c%%:*} code=${c#*:}
		# shellcheck disable=SC2086
		hrun $a --config "$T/in/$f"
		expect "$a --config $f exits 2 with $code" 2 "" "$code"
		untouched "$a --config $f"
	done
	[ -e "$T/cache" ] && { not_ok "$a: no cache created" "$(ls -A "$T/cache")"; rm -rf "$T/cache"; }
done

# wrong types and unknown keys in each file
printf '{"agents": [1]}' >"$T/in/agents-num.json"
printf '{"server": {"port": "9000"}}' >"$T/in/port-str.json"
printf '{"install": []}' >"$T/in/install-arr.json"
printf '{"install": {"max_download_mb": 1e308}}' >"$T/in/mb-huge.json"
for f in agents-num port-str install-arr mb-huge; do
	hrun prepare --only ripgrep --config "$T/in/$f.json"
	expect "prepare: $f is config.invalid, exit 2" 2 "" "config.invalid"
	untouched "prepare: $f"
done

printf '{"principals": {"a": {"allow": "**"}}}' >"$T/in/pol-type.json"
printf '{"principals": []}' >"$T/in/pol-arr.json"
printf '[{"id": "x", "argv": "/bin/true"}]' >"$T/in/cmd-type.json"
printf '{"id": "x"}' >"$T/in/cmd-obj.json"
printf '[{"id": "x", "argv": ["/bin/echo", "{p}"]}]' >"$T/in/cmd-undecl.json"
for a in check-config "prepare --dry-run"; do
	for f in big trunc deep pol-type pol-arr; do
		# shellcheck disable=SC2086
		hrun $a --policy "$T/in/$f.json"
		expect "$a --policy $f exits 2" 2 "" "$T/in/$f.json"
		untouched "$a --policy $f"
	done
	for f in big trunc deep cmd-type cmd-obj cmd-undecl; do
		# shellcheck disable=SC2086
		hrun $a --commands "$T/in/$f.json"
		expect "$a --commands $f exits 2" 2 "" "$T/in/$f.json"
		untouched "$a --commands $f"
	done
done
