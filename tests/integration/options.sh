# Options: each applet's one option table (applets/opts.h) against its
# documentation, both ways, and every option it lists is one it takes.
# docs/applets.md's tables are generated from --help (tools/optdoc.sh);
# the README and docs/*.md show applets with options in examples and prose,
# and each such option must be one the applet takes.
. "$TOP/tests/lib.sh"

DOC=$TOP/docs/applets.md
run "$TOP/tools/optdoc.sh" "$BIN" --check "$DOC"
expect "docs/applets.md's tables match every applet's --help (tools/optdoc.sh BIN --update docs/applets.md)" 0

# The long options docs/applets.md lists under "### APPLET", one a line.
doc_names() {
	awk -v a="### $1" '$0 == a { on = 1; next } /^### / { on = 0 } on && /^\| `/' "$2" |
		sed -n 's/^| `[^`]*--\([a-z0-9][a-z0-9-]*\)[^`]*`.*/\1/p' | sort -u
}

applets=$("$BIN" --list)
for a in $applets; do
	"$TOP/tools/optdoc.sh" "$BIN" --names "$a" | sort -u >"$T/table"
	doc_names "$a" "$DOC" >"$T/doc"
	check "$a: its --help lists options" test -s "$T/table"
	missing=$(comm -23 "$T/table" "$T/doc" | tr '\n' ' ')
	extra=$(comm -13 "$T/table" "$T/doc" | tr '\n' ' ')
	check "$a: every option of its table has a row in docs/applets.md (missing: ${missing:-none})" test -z "$missing"
	check "$a: docs/applets.md has no row its table lacks (extra: ${extra:-none})" test -z "$extra"
done

# A row removed from the document is found (the check above can fail).
grep -v '^| `--max-connections N` |' "$DOC" >"$T/applets.md"
doc_names serve "$T/applets.md" >"$T/doc"
"$TOP/tools/optdoc.sh" "$BIN" --names serve | sort -u >"$T/table"
check "a row missing from docs/applets.md is found" sh -c "comm -23 '$T/table' '$T/doc' | grep -qx max-connections"
run "$TOP/tools/optdoc.sh" "$BIN" --check "$T/applets.md"
expect "tools/optdoc.sh --check fails without the row" 1 "" "stale"

# Every option of every table is taken: APPLET --OPTION [VALUE] --help
# parses the option, then prints the usage and exits 0. A value the row's
# argument name stands for is given, so the value is accepted too.
value() { # applet option argname
	case $2:$3 in
	sha512:*) printf '%0128d' 0 ;;
	sha256:*) printf '%064d' 0 ;;
	integrity:*) echo "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=" ;;
	push:*) echo "oci://127.0.0.1:5000/team/tools" ;;
	platform:*) echo "$PLATFORM" ;;
	mode:*) echo lazy ;;
	preset:*) echo agents ;;
	ports:*) echo 9000 ;;
	*:N) echo 1 ;;
	*:S | *:SECS | *:BYTES) echo 1 ;;
	*:FILE) echo "$T/file" ;;
	*:DIR) echo "$T" ;;
	*) echo x ;;
	esac
}
for a in $applets; do
	"$BIN" "$a" --help | awk '/^usage: / { form++ } /^  -/ { print form "\t" $0 }' >"$T/rows"
	while IFS='	' read -r form row; do
		opt=$(echo "$row" | sed -n 's/^ *\(-[a-zA-Z], \)\{0,1\}--\([a-z0-9-]*\).*/\2/p')
		arg=$(echo "$row" | sed -n "s/^ *\(-[a-zA-Z], \)\{0,1\}--$opt \([^ ]*\( VALUE'\)\{0,1\}\).*/\2/p")
		set -- "--$opt"
		[ -n "$arg" ] && set -- "$@" "$(value "$a" "$opt" "$arg")"
		# fetch's second form is the cache-filling one: --only selects it.
		[ "$a" = fetch ] && [ "$form" = 2 ] && [ "$opt" != only ] && set -- --only x "$@"
		run "$BIN" "$a" "$@" --help </dev/null
		expect "$a $* is taken" 0 "usage: agent-sandbox-server $a"
	done <"$T/rows"
done

# What --help prints is the applet's text in applets/help/, byte for byte
# (embedded compressed by tools/embed.sh); fetch's is both its forms'.
H=$TOP/applets/help
for a in $applets; do
	if [ "$a" = fetch ]; then
		{ cat "$H/fetch.txt"; echo; cat "$H/fetch-cache.txt"; } >"$T/want"
	else
		cat "$H/$a.txt" >"$T/want"
	fi
	"$BIN" "$a" --help >"$T/help"
	check "$a --help is applets/help/$a.txt" cmp -s "$T/want" "$T/help"
done
"$BIN" fetch --only x --help >"$T/help"
check "fetch's cache-filling form alone is applets/help/fetch-cache.txt" cmp -s "$H/fetch-cache.txt" "$T/help"
"$BIN" --help >"$T/help"
{
	cat "$H/main.txt"
	for a in $applets; do grep "^  $a " "$T/help"; done
} >"$T/want"
check "--help is applets/help/main.txt, then a line per applet" cmp -s "$T/want" "$T/help"
check "applets/help holds no text the binary lacks" test "$(ls "$H" | wc -l)" = "$(($(echo $applets | wc -w) + 2))"

# Every row of every table has its row in the text: the test build
# (Makefile: ABX_TEST_HOOKS) checks it whenever it prints a usage.
for a in $applets "fetch --only x"; do
	# shellcheck disable=SC2086 # "fetch --only x" is three words
	run "$BIN_HOOKS" $a --help
	expect "$a --help: every row of its table is in its text (test build)" 0 "usage: agent-sandbox-server"
	check "$a --help: nothing on stderr" test ! -s "$T/err"
done

# One parser for all: a usage error is one line, then the very text of
# --help, on stderr, with the applet's usage exit code.
for a in $applets; do
	"$BIN" "$a" --help >"$T/help"
	run "$BIN" "$a" --bogus
	code=2
	[ "$a" = healthcheck ] && code=1
	expect "$a --bogus exits $code" $code "" "agent-sandbox-server: usage: $a: unknown option --bogus"
	check "$a: the usage after a usage error is its --help" sh -c "tail -n +2 '$T/err' | cmp -s - '$T/help'"
done
run "$BIN" version --json=yes
expect "a flag given a value is refused" 2 "" "usage: version: --json takes no value"
run "$BIN" serve --workers
expect "an option without its value is refused" 2 "" "usage: serve: --workers needs a value"
run "$BIN" healthcheck --port
expect "healthcheck: an option without its value exits 1" 1 "" "usage: healthcheck: --port needs a value"
run "$BIN" serve -qv --port=abc
expect "-qv combine, --port=VALUE is --port VALUE" 2 "" "usage: serve: --port abc: expected 0..65535"
run "$BIN" fetch -o/dev/null -x
expect "-oFILE takes its value at once" 2 "" "usage: fetch: unknown option -x"
run "$BIN" version -- --json
expect "-- ends the options" 2 "" "usage: version: unexpected argument --json"
run "$BIN" lock
expect "an operand missing is a usage error" 2 "" "usage: lock: missing NAME"

# What the README and docs/*.md show: a command line (agent-sandbox-server
# APPLET or agent-sandbox-APPLET, in code), or a code span that starts with
# an applet's name, and the --options that follow it in the same command.
: >"$T/shown"
for f in "$TOP/README.md" "$TOP"/docs/*.md; do
	# code spans, then the lines of code blocks; the exec form's JSON
	# array ["agent-sandbox-server", "prepare", ...] read as words
	{
		grep -o '`[^`]*`' "$f" | tr -d '`' | sed 's/^/span /'
		awk '/^```/ { c = !c; next } c' "$f" | sed 's/^/code /'
	} | sed 's/[][",]/ /g' | awk -v list="$applets" -v file="${f#"$TOP"/}" '
		BEGIN { n = split(list, L, " "); for (i = 1; i <= n; i++) is[L[i]] = 1 }
		{
			kind = $1; applet = ""
			for (i = 2; i <= NF; i++) {
				w = $i
				if (w ~ /^(\||;|&&|#|\))$/ || w ~ /^#/) { applet = ""; continue }
				if (w == "agent-sandbox-server" && is[$(i + 1)]) { applet = $(i + 1); i++; continue }
				if (w ~ /^agent-sandbox-/ && is[substr(w, 15)]) { applet = substr(w, 15); continue }
				if (kind == "span" && i == 2 && is[w]) { applet = w; continue }
				if (applet != "" && w ~ /^--[a-z]/) { sub(/=.*/, "", w); print applet "\t" substr(w, 3) "\t" file }
			}
		}' >>"$T/shown"
done
check "the documents show applets with options" test -s "$T/shown"
sort -u "$T/shown" | while IFS='	' read -r a opt file; do
	if ! "$TOP/tools/optdoc.sh" "$BIN" --names "$a" | grep -qx -- "$opt"; then
		echo "$file: $a --$opt"
	fi
done >"$T/unknown"
check "every option the README and docs/*.md show with an applet is one it takes ($(head -5 "$T/unknown" | tr '\n' ' '))" test ! -s "$T/unknown"

# docs/configuration.md's key table: the flag a key names is serve's (the
# applet that takes every configuration flag).
"$TOP/tools/optdoc.sh" "$BIN" --names serve >"$T/serve"
awk -F '|' '/^\| `/ { print $3 }' "$TOP/docs/configuration.md" | grep -o '`--[a-z0-9-]*`' | tr -d '`' |
	sed 's/^--//' | sort -u | while read -r opt; do
	grep -qx -- "$opt" "$T/serve" || echo "--$opt"
done >"$T/unknown"
check "every flag docs/configuration.md gives a key is one serve takes ($(tr '\n' ' ' <"$T/unknown"))" test ! -s "$T/unknown"
