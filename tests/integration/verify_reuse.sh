# A verify.argv pass recorded in the cache: a tree placed in a
# new tools directory from the cache's extracted tree, whose sealed record
# says verify.argv passed for exactly that tree, the same verify argv,
# expect and env, platform, libc and requirement trees, is not run again;
# anything different runs it, a failed verify records nothing, and the
# verify applet and prepare --force always run it. The verify command
# leaves a mark (a line in the file verify.env names) so a run is seen.
. "$TOP/tests/lib.sh"

W=$T/www
M=$T/man
mkdir -p "$W" "$M" "$T/home" "$T/state"
export HOME=$T/home ABX_SERVER_STATE_DIR=$T/state

make_pki
export SSL_CERT_FILE=$T/pki/ca.pem
# the tools need no loader: the libc is only a part of the verify run's identity
export ABX_INSTALL_LIBC=glibc

# mktool_marked NAME VERSION [WORD]: pkg/bin/NAME prints "NAME VERSION" (WORD:
# instead of the version, to fail expect) and adds a line to $MARK.
mktool_marked() {
	rm -rf "$T/src" && mkdir -p "$T/src/pkg/bin"
	printf '#!/bin/sh\necho "%s %s"\nif [ -n "${MARK:-}" ]; then echo ran >>"$MARK"; fi\n' "$1" "${3:-$2}" >"$T/src/pkg/bin/$1"
	chmod 755 "$T/src/pkg/bin/$1"
	tar czf "$W/$1-$2${3:+-$3}.tgz" -C "$T/src" pkg
}
start_httpd "$W" "$T/req.log"
P=$HTTPD_PORT

# mkman_marked DIR NAME FILE REQUIRES MARK: a tarball manifest whose verify
# leaves its mark in MARK
mkman_marked() {
	_req=""
	[ -n "$4" ] && _req="\"requires\":[\"$4\"],"
	cat >"$1/$2.json" <<EOF
{"schema":1,"name":"$2","binary":"$2","version":"1.0.0",$_req
 "source":{"type":"tarball","bin":"bin/$2","strip_components":1,
  "platforms":{"$PLATFORM":{"url":"https://localhost:$P/f/$3","sha256":"$(sha "$W/$3")"}}},
 "hosts":["localhost"],"verify":{"argv":["{bin}"],"expect":"$2 1.0.0","env":{"MARK":"$5"}},
 "platforms":["$PLATFORM"],"size_hint_mb":1}
EOF
}
marks() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
prep() { _m=$1 _d=$2; shift 2; run "$BIN" prepare --keep-cache --manifests "$_m" --tools-dir "$_d" --cache "$T/c" -v "$@"; }

mktool_marked dep 1.0.0
mktool_marked app 1.0.0
mkman_marked "$M" dep dep-1.0.0.tgz "" "$T/dep.mark"
mkman_marked "$M" app app-1.0.0.tgz "dep" "$T/app.mark"

# ---- the first install runs verify.argv and records the pass --------------------
prep "$M" "$T/t1" --only app
expect "a first install" 0 "app 1.0.0: installed"
check "... verify.argv ran (its mark, with the manifest's verify.env)" test "$(marks "$T/app.mark")" -eq 1
check "... the pass is recorded in the cache, sealed" sh -c \
	"grep -q '^require dep 1.0.0 [0-9a-f]\{64\}$' '$T/c/trees/app-1.0.0-$PLATFORM-glibc.verified' && grep -q '^mac [0-9a-f]\{64\}$' '$T/c/trees/app-1.0.0-$PLATFORM-glibc.verified'"

# ---- a new tools directory: placed, verify.argv not run again --------------------
prep "$M" "$T/t2" --only app
expect "a warm install into a new tools directory" 0 "app 1.0.0: installed"
check "... placed from the extracted tree" grep -q "app 1.0.0: placed [0-9]* files from the extracted tree" "$T/err"
check "... verify.argv not run (no new mark)" test "$(marks "$T/app.mark")" -eq 1
check "... and said, naming the requirement and the date" grep -Eq \
	"^agent-sandbox-server: app 1.0.0: verify.argv: passed for this tree on [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z with dep 1.0.0 \(sealed\); not run again$" "$T/err"
check "... and in the timing line" grep -q "timing app 1.0.0:.* verify.argv not run (a sealed pass for this tree)," "$T/err"
check "... the requirement too (no requirement named)" grep -q "dep 1.0.0: verify.argv: passed for this tree on .* (sealed); not run again" "$T/err"
run "$T/t2/bin/app"
expect "... the tool runs" 0 "app 1.0.0"

# ---- the verify applet always runs it -------------------------------------------------
n=$(marks "$T/app.mark")
run "$BIN" verify --manifests "$M" --tools-dir "$T/t2" app
expect "verify: the tree is unchanged and verify.argv passed" 0 "OK app 1.0.0 ($T/t2/app/1.0.0-$PLATFORM), verify.argv passed"
check "... verify.argv ran, a pass recorded or not" test "$(marks "$T/app.mark")" -eq $((n + 1))

# ---- prepare --force runs it ----------------------------------------------------------
prep "$M" "$T/t3" --only app --force
expect "prepare --force" 0 "app 1.0.0: installed"
check "... verify.argv ran" test "$(marks "$T/app.mark")" -eq $((n + 2))
check "... nothing said of a recorded pass" sh -c "! grep -q 'app 1.0.0: verify.argv: passed' '$T/err'"

# ---- a different libc variant runs it -------------------------------------------------
n=$(marks "$T/app.mark")
prep "$M" "$T/t4" --only app
check "(the record holds again)" test "$(marks "$T/app.mark")" -eq "$n"
run env ABX_INSTALL_LIBC=musl "$BIN" prepare --keep-cache --manifests "$M" --tools-dir "$T/t5" --cache "$T/c" -v --only app
expect "another libc" 0 "app 1.0.0: installed"
check "... verify.argv ran" test "$(marks "$T/app.mark")" -eq $((n + 1))
check "... its pass recorded beside the other libc's" \
	test -f "$T/c/trees/app-1.0.0-$PLATFORM-musl.verified" -a -f "$T/c/trees/app-1.0.0-$PLATFORM-glibc.verified"

# ---- a changed requirement tree runs it -----------------------------------------------
M2=$T/man2
mkdir -p "$M2"
mktool_marked dep 1.0.0 1.0.0-b # the same version, another tree
mkman_marked "$M2" dep dep-1.0.0-1.0.0-b.tgz "" "$T/dep.mark"
sed -i 's/"expect":"dep 1.0.0"/"expect":"dep 1.0.0-b"/' "$M2/dep.json"
cp "$M/app.json" "$M2/app.json"
n=$(marks "$T/app.mark")
prep "$M" "$T/t6" --only app
check "(the record holds)" test "$(marks "$T/app.mark")" -eq "$n"
prep "$M2" "$T/t7" --only app
expect "another requirement tree" 0 "app 1.0.0: installed"
check "... the tool's tree placed all the same" grep -q "app 1.0.0: placed [0-9]* files from the extracted tree" "$T/err"
check "... verify.argv ran" test "$(marks "$T/app.mark")" -eq $((n + 1))

# ---- another verify.env runs it -------------------------------------------------------
M3=$T/man3
mkdir -p "$M3"
cp "$M/dep.json" "$M3/"
sed "s|$T/app.mark|$T/app3.mark|" "$M/app.json" >"$M3/app.json"
prep "$M3" "$T/t8" --only app
expect "another verify.env" 0 "app 1.0.0: installed"
check "... verify.argv ran (with the new variable)" test "$(marks "$T/app3.mark")" -eq 1

# ---- a tampered seal runs it ----------------------------------------------------------
n=$(marks "$T/app3.mark")
prep "$M3" "$T/t9" --only app
check "(the record holds)" test "$(marks "$T/app3.mark")" -eq "$n"
R=$T/c/trees/app-1.0.0-$PLATFORM-glibc.verified
sed -i 's/^at 2/at 1/' "$R"
prep "$M3" "$T/t10" --only app
expect "a record edited after its seal" 0 "app 1.0.0: installed"
check "... verify.argv ran" test "$(marks "$T/app3.mark")" -eq $((n + 1))
check "... and the record's failure said" grep -q "cache: the verify.argv record of app 1.0.0 ($R) is not used: its seal does not match" "$T/err"
cp "$R" "$T/c/trees/dep-1.0.0-$PLATFORM-glibc.verified"
prep "$M3" "$T/t11" --only dep
expect "a record renamed to another tool" 0 "dep 1.0.0: installed"
check "... not taken for its own" grep -q "cache: the verify.argv record of dep 1.0.0 .* is not used: it is not a note of this name" "$T/err"
check "... verify.argv ran" test "$(marks "$T/dep.mark")" -ge 1

# ---- a failed verify never records ----------------------------------------------------
mktool_marked bad 1.0.0 0.9
mkman_marked "$M" bad bad-1.0.0-0.9.tgz "" "$T/bad.mark"
prep "$M" "$T/t12" --only bad
expect "a verify that fails" 1 "" "verify output lacks \"bad 1.0.0\""
check "... it ran" test "$(marks "$T/bad.mark")" -eq 1
check "... and recorded nothing" sh -c "! ls '$T/c/trees/' | grep -q '^bad-'"
prep "$M" "$T/t13" --only bad
expect "... placed into a new tools directory, it fails again" 1 "" "verify output lacks \"bad 1.0.0\""
check "... it ran again" test "$(marks "$T/bad.mark")" -eq 2
check "... still nothing recorded" sh -c "! ls '$T/c/trees/' | grep -q '^bad-'"
run "$BIN" verify --manifests "$M" --tools-dir "$T/t2" --json app
expect "verify --json names the verify.argv result" 0 '"verify_argv_ok":true'
