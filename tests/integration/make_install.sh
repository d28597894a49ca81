# make install PREFIX=… DESTDIR=…: the binary and one relative
# agent-sandbox-<applet> link per applet, working from the staged tree.
. "$TOP/tests/lib.sh"
# run.sh: alone (make may rebuild the binary the other files run)

run make -C "$TOP" --no-print-directory install PREFIX=/usr DESTDIR="$T/dest"
expect "make install exits 0" 0
d=$T/dest/usr/bin
check "the binary is installed" test -x "$d/agent-sandbox-server"
check "the installed binary is the built one" cmp -s "$d/agent-sandbox-server" "$BIN"
check "mode 0755" test "$(stat -c %a "$d/agent-sandbox-server")" = 755
n=$("$BIN" --list | wc -l)
check "one agent-sandbox-<applet> link per applet ($n)" test "$(find "$d" -name 'agent-sandbox-*' -type l | wc -l)" -eq "$n"
check "links are relative (survive DESTDIR staging)" test "$(readlink "$d/agent-sandbox-healthcheck")" = agent-sandbox-server
run "$d/agent-sandbox-version"
expect "an installed link dispatches by argv[0]" 0 "agent-sandbox-server "
run make -C "$TOP" --no-print-directory install PREFIX=/usr DESTDIR="$T/dest"
expect "make install again (idempotent)" 0

# SOURCE_DATE_EPOCH (reproducible-builds.org) sets the recorded build date, in UTC.
run env TZ=Pacific/Kiritimati make -C "$TOP" --no-print-directory -n -B SOURCE_DATE_EPOCH=86399 build/rel/applets/version.o
check "SOURCE_DATE_EPOCH sets the build date (UTC, not the local zone)" grep -qF "ABX_BUILD_DATE='\"1970-01-01\"'" "$T/out"
