#!/bin/sh
# make release: put the two built binaries into DIST under their release
# names, each with a CycloneDX SBOM of the binary itself (musl, zlib, BearSSL,
# libarchive: their Debian versions and the digests of the source files in
# tools/deps.pins), and SHA256SUMS (sha256sum -c reads it).
#
#   tools/release.sh DIST VERSION X64_BINARY ARM64_BINARY
#
# Everything written is a function of the binaries, the pins and
# SOURCE_DATE_EPOCH (the SBOM's timestamp), so two builds of one commit
# write the same files.
set -eu
[ $# -eq 4 ] || { echo "usage: $0 DIST VERSION X64_BINARY ARM64_BINARY" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
dist=$1 version=$2 x64_bin=$3 arm64_bin=$4
pins=$top/tools/deps.pins
: "${SOURCE_DATE_EPOCH:?SOURCE_DATE_EPOCH is the release time (make sets it from the commit)}"

say() { printf 'release: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
pin_ver() { awk -v p="$1" '$1==p {print $2; exit}' "$pins"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
# percent-encode the characters of Debian versions a URL or purl must not carry raw
enc() { printf '%s' "$1" | sed 's/%/%25/g; s/+/%2B/g; s/:/%3A/g; s/~/%7E/g'; }

# sbom PLATFORM BINARY MUSL_VERSION: the CycloneDX 1.5 document on stdout
sbom() {
	bsum=$(sha "$2")
	uuid=$(printf '%s' "$bsum" | sed -E 's/^(.{8})(.{4}).(.{3}).(.{3})(.{12}).*/\1-\2-5\3-8\4-\5/')
	ts=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
	printf '{\n  "bomFormat": "CycloneDX",\n  "specVersion": "1.5",\n'
	printf '  "serialNumber": "urn:uuid:%s",\n  "version": 1,\n' "$uuid"
	printf '  "metadata": {\n    "timestamp": "%s",\n' "$ts"
	printf '    "component": {\n      "type": "application",\n      "bom-ref": "agent-sandbox-server",\n'
	printf '      "name": "agent-sandbox-server",\n      "version": "%s",\n' "$version"
	printf '      "purl": "pkg:generic/agent-sandbox-server@%s?platform=%s",\n' "$version" "$1"
	printf '      "hashes": [{"alg": "SHA-256", "content": "%s"}],\n' "$bsum"
	printf '      "properties": [{"name": "platform", "value": "%s"}, {"name": "linkage", "value": "static"}]\n' "$1"
	printf '    }\n  },\n  "components": [\n'
	first=1
	for p in musl zlib bearssl libarchive; do
		v=$(pin_ver "$p")
		case $p in musl) how="built from source with aarch64-linux-gnu-gcc" ;; *) how="built from source" ;; esac
		[ "$p" = musl ] && [ "$1" = linux-x64 ] && how="Debian's musl-dev $3 (built from this source package)"
		case $p in lib*) pool=$(printf '%s' "$p" | cut -c1-4)/$p ;; *) pool=$(printf '%s' "$p" | cut -c1)/$p ;; esac
		case $v in *+deb[0-9]*u[0-9]*) base="https://deb.debian.org/debian-security/pool/updates/main" ;;
		*) base="https://deb.debian.org/debian/pool/main" ;; esac
		[ $first -eq 1 ] || printf ',\n'
		first=0
		printf '    {\n      "type": "library",\n      "bom-ref": "deb-src:%s",\n      "name": "%s",\n' "$p" "$p"
		printf '      "version": "%s",\n' "$v"
		printf '      "purl": "pkg:deb/debian/%s@%s?arch=source&distro=debian-12",\n' "$p" "$(enc "$v")"
		printf '      "description": "Debian bookworm source package %s %s, %s, statically linked",\n' "$p" "$v" "$how"
		printf '      "externalReferences": [\n'
		awk -v p="$p" '$1==p {print $3, $4}' "$pins" | {
			n=0
			while read -r f s; do
				[ $n -eq 0 ] || printf ',\n'
				n=1
				printf '        {"type": "source-distribution", "url": "%s/%s/%s", "hashes": [{"alg": "SHA-256", "content": "%s"}]}' \
					"$base" "$pool" "$(enc "$f")" "$s"
			done
			printf '\n'
		}
		printf '      ]\n    }'
	done
	printf '\n  ],\n  "dependencies": [\n    {"ref": "agent-sandbox-server", "dependsOn": '
	printf '["deb-src:musl", "deb-src:zlib", "deb-src:bearssl", "deb-src:libarchive"]}\n  ]\n}\n'
}

# Both checked before anything is written: a refusal changes nothing.
for pair in "x64 $x64_bin X86-64" "arm64 $arm64_bin AArch64"; do
	set -- $pair
	[ -f "$2" ] || die "$2: not built"
	readelf -h "$2" | grep -q "Machine:.*$3" || die "$2: not an $3 executable (expected linux-$1)"
	hdr=$(dirname "$2")/gen/deps_version.h
	musl=$(sed -n 's/^#define DEP_MUSL "\(.*\)"$/\1/p' "$hdr" 2>/dev/null)
	[ -n "$musl" ] || die "$hdr: no musl version (make ARCH=$1 writes it)"
	# The x64 build links the host's musl-dev: the SBOM can name the pinned
	# source only when it is that version.
	[ "$musl" = "$(pin_ver musl)" ] ||
		die "$2 links musl $musl, not the pinned $(pin_ver musl) (tools/deps.pins): install musl-dev=$(pin_ver musl) or bump the pin"
done
mkdir -p "$dist"
rm -f "$dist"/agent-sandbox-server-* "$dist/SHA256SUMS"
for pair in "x64 $x64_bin" "arm64 $arm64_bin"; do
	set -- $pair
	out=$dist/agent-sandbox-server-$version-linux-$1
	cp "$2" "$out"
	chmod 0755 "$out"
	sbom "linux-$1" "$out" "$(pin_ver musl)" >"$out.cdx.json"
	say "$out: $(stat -c %s "$out") bytes, SBOM $out.cdx.json"
done
(cd "$dist" && sha256sum agent-sandbox-server-"$version"-* >SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)
say "$dist/SHA256SUMS: check with (cd $dist && sha256sum -c SHA256SUMS)"
