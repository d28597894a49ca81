#!/bin/sh
# Install the host packages a target needs (as root), or print the exact
# command (otherwise). Usage: tools/hostdeps.sh MODE, MODE one of build,
# check, bench, build-x64 (= build), build-arm64 (the aarch64 cross
# compiler too), check-arm64 (and qemu-user-static, to run what it built),
# e2e (check's, and what tests/e2e/containers.sh builds and runs images with:
# podman on runc, debootstrap for a Debian base, musl's loader for an
# Alpine-like one, slirp4netns for published ports without a bridge, npm to
# size `npm i -g` against).
# llvm-14 ships llvm-symbolizer for clang 14 (Debian's clang), which turns
# sanitizer reports into file:line traces.
# nodejs runs the official openai SDK against serve in
# tests/integration/wire_sdk.sh; check also fetches that SDK's pinned tarball
# once into build/cache/npm (its sha512 checked against the committed
# lockfile tests/fixtures/sdkman/openai-sdk/package-lock.json), so the test
# serves it from a loopback registry and never reaches the network.
# docker-registry (the CNCF distribution registry) and apache2-utils (htpasswd
# -B, bcrypt) are the real registry tests/integration/oci.sh pushes to.
set -eu
build="musl-tools dpkg-dev cmake make gcc xz-utils bzip2 ca-certificates"
check="$build clang clang-format libclang-rt-14-dev llvm-14 libcmocka-dev libbearssl-dev libarchive-dev zlib1g-dev openssl file curl strace docker-registry apache2-utils"
bench="$check wrk nginx-light hyperfine"
e2e="$check podman runc uidmap slirp4netns debootstrap musl"
cross="gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu"
case ${1:-build} in
build | build-x64) want=$build ;;
build-arm64) want="$build $cross" ;;
check) want=$check ;;
check-arm64) want="$check $cross qemu-user-static" ;;
bench) want=$bench ;;
e2e) want=$e2e ;;
*) echo "usage: $0 build|build-x64|build-arm64|check|check-arm64|bench|e2e" >&2; exit 2 ;;
esac
# sdk_fetch: the pinned SDK tarball into build/cache/npm, checked; a
# machine without the network says so and the SDK test skips.
sdk_fetch() {
	top=$(cd "$(dirname "$0")/.." && pwd)
	lock=$top/tests/fixtures/sdkman/openai-sdk/package-lock.json
	url=$(sed -n 's/^ *"resolved": "\(.*\)",*$/\1/p' "$lock" | head -1)
	sum=$(sed -n 's/^ *"integrity": "sha512-\(.*\)",*$/\1/p' "$lock" | head -1 | base64 -d | od -An -tx1 | tr -d ' \n')
	out=$top/build/cache/npm/${url##*/}
	[ -f "$out" ] && [ "$(sha512sum "$out" | cut -d' ' -f1)" = "$sum" ] && return 0
	mkdir -p "${out%/*}"
	if ! curl -fsSL --retry 2 -o "$out.tmp" "$url" 2>/dev/null; then
		echo "hostdeps: cannot fetch $url (offline?): tests/integration/wire_sdk.sh will skip" >&2
		rm -f "$out.tmp"
		return 0
	fi
	if [ "$(sha512sum "$out.tmp" | cut -d' ' -f1)" != "$sum" ]; then
		echo "hostdeps: $url does not match the sha512 of $lock" >&2
		rm -f "$out.tmp"
		return 1
	fi
	mv "$out.tmp" "$out"
}
case ${1:-build} in check | check-arm64 | bench | e2e) command -v curl >/dev/null && sdk_fetch ;; esac
missing=""
for p in $want; do
	st=$(dpkg-query -W -f '${Status}' "$p" 2>/dev/null || true)
	case $st in *" installed") ;; *) missing="$missing $p" ;; esac
done
command -v python3 >/dev/null || missing="$missing python3"
# npm from any source will do (Debian's, or a node distribution's own)
[ "${1:-}" = e2e ] && ! command -v npm >/dev/null && missing="$missing nodejs npm"
# node from any source as well (check: tests/integration/wire_sdk.sh)
case ${1:-build} in check*) command -v node >/dev/null || missing="$missing nodejs" ;; esac
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
	echo "hostdeps: installing$missing" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null || true
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
else
	echo "hostdeps: missing packages; run:" >&2
	echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends$missing" >&2
	exit 1
fi
