# README.md: the error-code table is the one generated from core/base/errcodes.h,
# and every applet the binary lists is documented.
. "$TOP/tests/lib.sh"

run "$TOP/tools/errdoc.sh" --check "$TOP/README.md"
expect "README error table matches core/base/errcodes.h (tools/errdoc.sh --update README.md)" 0

# The generator itself: a table with a row missing is reported stale.
grep -v '^| `not_found` |' "$TOP/README.md" >"$T/README.md"
run "$TOP/tools/errdoc.sh" --check "$T/README.md"
expect "a stale table is detected" 1 "" "stale"
run "$TOP/tools/errdoc.sh" --update "$T/README.md"
expect "--update rewrites the table" 0
check "--update restores the README exactly" cmp -s "$T/README.md" "$TOP/README.md"

n=$(grep -c '^ERRCODE(' "$TOP/core/base/errcodes.h")
check "every one of the $n codes has a row" test "$("$TOP/tools/errdoc.sh" | grep -c '^| `')" -eq "$n"

"$BIN" --list | cut -d' ' -f1 >"$T/applets"
for a in $(cat "$T/applets"); do
	check "README documents applet $a" grep -q "^| \`$a" "$TOP/README.md"
done

# The README and docs point only at files a user of the repository has
# every relative link names a file of the checkout, and no
# document sends the reader to a specification outside it.
for f in "$TOP"/README.md "$TOP"/docs/*.md; do
	d=$(dirname "$f")
	grep -o '](\([^)#:]*\)' "$f" | sed 's/^](//' | while read -r p; do
		[ -z "$p" ] || [ -e "$d/$p" ] || echo "$f: $p"
	done
done >"$T/deadlinks"
check "every relative link in README.md and docs/ names a file of the repository" test ! -s "$T/deadlinks"
check "no document names a specification outside the repository" sh -c "! grep -nwE 'SPEC(\.md)?' '$TOP/README.md' '$TOP'/docs/*.md"
# Container engines: podman/buildah keep HEALTHCHECK only with
# --format docker, and a scratch image's token is read from the host.
check "README: podman/buildah need --format docker to keep HEALTHCHECK" grep -q 'podman build --format docker' "$TOP/README.md"
check "README: how to read the token out of a scratch or distroless container" \
	grep -q 'docker cp CONTAINER:/var/lib/agent-sandbox/token - | tar -xO' "$TOP/README.md"
