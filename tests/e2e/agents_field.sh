# make e2e: every agent of README's "which agent runs where" table beyond
# codex, claude-code and gemini (tests/e2e/images.sh has those), installed
# from registry.npmjs.org by prepare in three roots built here and entered
# with chroot, as far as the table says it runs there:
#   scratch: the binary, the host's CA bundle, resolv.conf and hosts;
#   musl:    the same plus the musl loader only (Alpine without libstdc++);
#   glibc:   the same plus the host's glibc loader and the libraries a
#            debian:*-slim image has (libc, libm, libpthread, libdl, librt,
#            libstdc++, libgcc_s, libz, libssl3, libcrypto3).
# Where it runs: `<tools>/bin/<binary> --version` (codex-acp and
# claude-code-acp have none: their verify.argv passed, and codex-acp
# --help); where it does not: refused before any download (nothing in the
# tools directory, exit 3 naming what is missing). Per agent, on the host:
# prepare into a fresh tools directory and `npm i -g --prefix DIR` (a fresh
# npm cache) of the same version, time and tree size side by side (printed,
# never asserted: the goal is <= 0.5x the time and <= 1.05x the size).
#   FIELD_AGENTS="opencode amp" FIELD_ROOTS="glibc" FIELD_COMPARE="amp" tests/run.sh --e2e --only agents_field
# (FIELD_COMPARE="" skips the side-by-side).
. "$TOP/tests/lib.sh"

chroot_ok agents_field || exit 0
[ "$PLAT" = linux-x64 ] || { skip "agents_field" "the pinned lockfiles hold x86-64 builds only for most agents"; exit 0; }
CA=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
[ -f "$CA" ] || { not_ok "agents_field" "no CA bundle at $CA"; exit 1; }
[ -e "$MLD" ] || { not_ok "musl root" "$MLD missing: install Debian's musl package"; exit 1; }
command -v npm >/dev/null || { not_ok "agents_field" "npm is needed for the comparison"; exit 1; }
AGENTS=${FIELD_AGENTS:-opencode copilot droid kilo amp cline codex-acp qwen-code auggie pi claude-code-acp}
ROOTS=${FIELD_ROOTS:-scratch musl glibc}
COMPARE=${FIELD_COMPARE-$AGENTS}

# name binary package version verify-args expected-output, per agent
info() {
	f=$TOP/manifests/$1.json
	[ -f "$f" ] || f=$TOP/manifests/extra/$1.json
	python3 - "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
v = d["verify"]
args = " ".join(a for a in v["argv"][1:]) or "-"
print(d["binary"], d["source"]["package"], d["version"], args, v.get("expect", "-"))
PY
}
# where NAME ROOT: yes, or the text the refusal names
where() {
	case $2:$1 in
	scratch:*) echo "cannot run in this image" ;;
	musl:opencode | musl:copilot | musl:kilo) echo "it needs the shared library libstdc++.so.6" ;;
	musl:*) echo "cannot run in this image" ;;
	glibc:droid) echo "has no @factory/cli-linux-x64 for linux-x64" ;;
	*) echo yes ;;
	esac
}
# root NAME: mkroot with the host's CA bundle, resolv.conf and hosts, and
# manifests/extra as /extra
root() {
	case $1 in
	glibc) mkroot glibc glibc libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libstdc++.so.6 \
		libgcc_s.so.1 libz.so.1 libssl.so.3 libcrypto.so.3 ;;
	*) mkroot "$1" "$1" ;;
	esac
	cp "$CA" "$R/ca.pem"
	cp /etc/resolv.conf /etc/hosts "$R/etc/"
	cp -r "$TOP/manifests/extra" "$R/extra"
}
ROOT_ENV="HOME=/home SSL_CERT_FILE=/ca.pem ABX_TOOLS_DIR=/tools ABX_SERVER_STATE_DIR=/state ABX_SERVER_INSTALL_USE_PATH=false"
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc; }
kib() { du -sk "$1" 2>/dev/null | cut -f1; }

for root in $ROOTS; do
	root "$root"
	for a in $AGENTS; do
		R=$T/root-$root
		set -- $(info "$a")
		bin=$1 ver=$3 args=$4 expect=$5
		want=$(where "$a" "$root")
		inroot "$R" /abx prepare --only "$a" --manifests /extra
		if [ "$want" = yes ]; then
			expect "$root: $a $ver installed" 0 "$a $ver: installed"
			[ "$args" = - ] && continue
			[ "$args" = --help ] && expect=Usage
			inroot "$R" /tools/bin/"$bin" $args
			check "$root: $a $args says $expect" grep -qF -- "$expect" "$T/out" "$T/err"
			echo "# $root $a: $(cat "$T/out" "$T/err" | head -c 120 | tr "\n" " ")"
		else
			expect "$root: $a refused before any download" 1 "" "$want"
			check "$root: $a: nothing in the tools directory" test ! -e "$R/tools/$a"
			echo "# $root $a: $(grep -m1 'install\.' "$T/err" | head -c 240)"
		fi
	done
	rm -rf "$T/root-$root"
done

# the side-by-side on the host (glibc): prepare vs npm i -g of the same version
echo "# agent              ours_s   npm_s  time   ours_KiB    npm_KiB  size"
for a in $COMPARE; do
	[ "$(where "$a" glibc)" = yes ] || continue
	set -- $(info "$a")
	pkg=$2 ver=$3
	t0=$(now)
	env -u ABX_TOOLS_DIR ABX_SERVER_INSTALL_USE_PATH=false "$BIN" prepare --only "$a" --manifests "$TOP/manifests/extra" \
		--tools-dir "$T/ours-$a" >"$T/out" 2>"$T/err"
	rc=$?
	t1=$(now)
	check "host: $a prepared" test $rc = 0
	npm i -g --prefix "$T/npm-$a" --cache "$T/npmcache-$a" --no-audit --no-fund --loglevel=error "$pkg@$ver" \
		>"$T/npm.out" 2>&1
	t2=$(now)
	ours=$(kib "$T/ours-$a/$a/$ver-$PLAT") theirs=$(kib "$T/npm-$a/lib/node_modules/$pkg")
	printf '# %-18s %7.1f %7.1f %5.2fx %10s %10s %5.2fx\n' "$a" "$(secs "$t0" "$t1")" "$(secs "$t1" "$t2")" \
		"$(echo "($t1 - $t0) / ($t2 - $t1)" | bc -l)" "$ours" "$theirs" "$(echo "${ours:-0} / ${theirs:-1}" | bc -l)"
	rm -rf "$T/ours-$a" "$T/npm-$a" "$T/npmcache-$a"
done
