#!/bin/sh
# Fetch zlib, BearSSL and libarchive as Debian source packages (pinned in
# tools/deps.pins), unpack them with Debian's patch series applied, and build
# them as static musl libraries under $DEPS (default build/deps).
#
# ARCH=x64 (default) builds with the host's musl-gcc (Debian's musl-tools);
# ARCH=arm64 first builds musl itself from its pinned source package with
# Debian's aarch64-linux-gnu-gcc (its musl-gcc wrapper lands in
# $DEPS/musl/bin), then the three libraries with that wrapper.
#
# apt is used through a private configuration (sources list, lists and cache
# under $DEPS/apt) so the host's apt configuration is never changed. Once the
# source files are present and match their pins, no network access happens.
#
#   tools/deps.sh                 fetch (if needed), verify, build
#   tools/deps.sh --print-pins P=V   print pin lines for a new version (bumping)
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
DEPS=${DEPS:-$top/build/deps}
pins=$top/tools/deps.pins
apt=$DEPS/apt
srcdir=$DEPS/src
prefix=$DEPS/musl
ARCH=${ARCH:-x64}
case $ARCH in
x64) MUSL_CC=${MUSL_CC:-musl-gcc} CROSS="" ;;
arm64) MUSL_CC=$prefix/bin/musl-gcc CROSS=aarch64-linux-gnu- ;;
*) echo "deps: ARCH=$ARCH: unknown (known: x64, arm64)" >&2; exit 2 ;;
esac
AR=${CROSS}ar RANLIB=${CROSS}ranlib
jobs=$(nproc 2>/dev/null || echo 2)
# Every function and object in its own section so the final link's
# --gc-sections drops what we do not call; no unwind tables (C, no exceptions,
# no backtraces in the shipped binary).
# No build directory in the objects (__FILE__ in assertions): two builds in
# two directories give the same bytes.
common="-ffunction-sections -fdata-sections -fno-asynchronous-unwind-tables -fno-unwind-tables -ffile-prefix-map=$DEPS=deps"
DEP_CFLAGS="-Os $common"
# The install's hot paths at -O2, the rest -Os: inflate (all of zlib; -O2
# decodes a 164 MiB npm tarball in ~0.94x the CPU time of -Os) and BearSSL's
# SHA-2 (sha512 of every tarball, sha256 where SHA-NI is absent: ~0.95x).
# Measured and left at -Os: BearSSL's AES-NI/PCLMUL GCM and ChaCha20/Poly1305
# (intrinsics; no faster at -O2), zlib's inffast.c at -O3 (no steady gain).
HOT_CFLAGS="-O2 $common"
BEARSSL_HOT="sha2big sha2small"
# Bump when the way the libraries are built changes (flags, options), so
# trees built the old way are rebuilt; the stamp holds the .dsc and this.
RECIPE=8
# Called from make: the sub-builds below run their own make -jN, which must
# not inherit (and fight over) the caller's jobserver.
unset MAKEFLAGS MFLAGS MAKELEVEL

say() { printf 'deps: %s\n' "$*" >&2; }

apt_private() {
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
	cat >"$apt/sources.list" <<EOF
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian-security bookworm-security main
EOF
	set -- -o "Dir::Etc::SourceList=$apt/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null \
		-o "Dir::State::Lists=$apt/lists" \
		-o "Dir::Cache=$apt/cache" \
		-o APT::Sandbox::User=root -q
	printf '%s\n' "$@" >"$apt/opts"
}

apt_run() {
	# shellcheck disable=SC2046
	set -- $(cat "$apt/opts" | tr '\n' ' ') "$@"
	apt-get "$@"
}

if [ "${1:-}" = "--print-pins" ]; then
	shift
	apt_private
	apt_run update >&2
	tmp=$(mktemp -d)
	(cd "$tmp" && apt_run source -d "$@" >&2)
	for f in "$tmp"/*; do
		b=$(basename "$f")
		p=${b%%_*}
		v=$(sed -n 's/^Version: //p' "$tmp/${p}_"*.dsc | head -1)
		printf '%s %s %s %s\n' "$p" "$v" "$b" "$(sha256sum "$f" | cut -d' ' -f1)"
	done
	rm -rf "$tmp"
	exit 0
fi

verify_pins() {
	ok=0
	while read -r pkg ver file sum; do
		case $pkg in ''|'#'*) continue ;; esac
		[ "$pkg" = musl ] && [ "$ARCH" != arm64 ] && continue
		[ -f "$srcdir/$file" ] || { ok=1; continue; }
		got=$(sha256sum "$srcdir/$file" | cut -d' ' -f1)
		if [ "$got" != "$sum" ]; then
			say "sha256 mismatch for $file: expected $sum, got $got"
			rm -f "$srcdir/$file"
			ok=2
		fi
	done <"$pins"
	return $ok
}

fetch_sources() {
	mkdir -p "$srcdir"
	st=0
	verify_pins || st=$?
	[ $st -eq 0 ] && return 0
	command -v apt-get >/dev/null || { say "apt-get not found: cannot fetch Debian sources"; exit 1; }
	command -v dpkg-source >/dev/null || { say "dpkg-source not found: install dpkg-dev"; exit 1; }
	apt_private
	say "fetching Debian source packages (private apt sources list)"
	apt_run update >/dev/null ||
		{ say "apt-get update failed (private list $apt/sources.list); without network, copy the files named in tools/deps.pins into $srcdir"; exit 1; }
	specs=$(awk '!/^#/ && NF==4 {print $1 "=" $2}' "$pins" | sort -u)
	[ "$ARCH" = arm64 ] || specs=$(echo "$specs" | grep -v '^musl=')
	# shellcheck disable=SC2086
	(cd "$srcdir" && apt_run source -d $specs >/dev/null) ||
		{ say "apt-get source failed for: $specs (a pinned version no longer in the archive? see README, bumping the pins)"; exit 1; }
	verify_pins || { say "source archives do not match tools/deps.pins"; exit 1; }
}

# unpack PKG: dpkg-source -x (applies Debian's patch series) into a directory
# named after the pinned .dsc, so a bumped pin unpacks afresh. Prints the dir.
unpack() {
	d=$(dsc "$1")
	dir=$srcdir/${d%.dsc}
	if [ ! -d "$dir" ]; then
		rm -rf "$dir.tmp"
		(cd "$srcdir" && dpkg-source -x "$d" "$dir.tmp" >"$srcdir/$1.unpack.log" 2>&1) ||
			{ say "dpkg-source -x $d failed; see $srcdir/$1.unpack.log"; exit 1; }
		mv "$dir.tmp" "$dir"
	fi
	echo "$dir"
}

# built PKG LIB: true when LIB exists and was built from the pinned .dsc by
# this RECIPE. A bumped pin, a changed recipe, or a build interrupted before
# its stamp rebuilds.
built() {
	[ -f "$prefix/lib/$2" ] && [ "$(cat "$prefix/stamp.$1" 2>/dev/null)" = "$(dsc "$1") recipe $RECIPE" ]
}
stamp() { echo "$(dsc "$1") recipe $RECIPE" >"$prefix/stamp.$1"; }

dsc() { awk -v p="$1" '$1==p && $3 ~ /\.dsc$/ {print $3}' "$pins"; }
ver() { awk -v p="$1" '$1==p {print $2; exit}' "$pins"; }

# musl for the cross build: static only, with the musl-gcc wrapper (a specs
# file around the cross gcc) that the libraries and the binary compile with.
build_musl() {
	built musl libc.a && [ -x "$MUSL_CC" ] && return 0
	command -v "${CROSS}gcc" >/dev/null || { say "${CROSS}gcc not found: install gcc-aarch64-linux-gnu"; exit 1; }
	s=$(unpack musl)
	say "building musl $(ver musl) for $ARCH"
	b=$DEPS/obj/musl; rm -rf "$b"; mkdir -p "$DEPS/obj"; cp -a "$s" "$b"
	(cd "$b" && ./configure --prefix="$prefix" --target="${CROSS%-}" CROSS_COMPILE="$CROSS" CC="${CROSS}gcc" \
		--disable-shared --enable-wrapper=gcc CFLAGS="-ffile-prefix-map=$DEPS=deps" >"$b/build.log" 2>&1 &&
		make -j"$jobs" >>"$b/build.log" 2>&1 && make install >>"$b/build.log" 2>&1) ||
		{ say "musl build failed; see $b/build.log"; exit 1; }
	stamp musl
}

build_zlib() {
	built zlib libz.a && return 0
	s=$(unpack zlib)
	say "building zlib $(ver zlib)"
	b=$DEPS/obj/zlib; rm -rf "$b"; mkdir -p "$DEPS/obj"; cp -a "$s" "$b"
	# CRC-32 tables built at first use instead of stored: 9 KB less rodata,
	# the same CRC over the same bytes (every gzip trailer is still checked).
	# crc32.c builds them under a once() that is thread-safe only on its C11
	# atomics branch (a spin on atomic_flag); its fallback is a plain test
	# and set, so the build stops unless the compiler takes the atomic one.
	# Costs 25 KB of bss, filled at the first CRC; a gzip stream decodes in
	# the same CPU time (1.01x over 87 MB, within noise).
	zcrc="-DDYNAMIC_CRC_TABLE"
	# shellcheck disable=SC2086
	$MUSL_CC $HOT_CFLAGS $zcrc -E "$b/crc32.c" 2>/dev/null | grep -q 'atomic_flag begun;' ||
		{ say "zlib: crc32.c's once() would not use C11 atomics (new version or compiler? see the note above)"; exit 1; }
	(cd "$b" && CC=$MUSL_CC AR=$AR RANLIB=$RANLIB CFLAGS="$HOT_CFLAGS $zcrc -fno-semantic-interposition" ./configure --static --prefix="$prefix" >"$b/build.log" 2>&1 &&
		make -j"$jobs" libz.a >>"$b/build.log" 2>&1 && make install >>"$b/build.log" 2>&1) ||
		{ say "zlib build failed; see $b/build.log"; exit 1; }
	stamp zlib
}

build_bearssl() {
	built bearssl libbearssl.a && return 0
	s=$(unpack bearssl)
	say "building BearSSL $(ver bearssl)"
	b=$DEPS/obj/bearssl; rm -rf "$b"; mkdir -p "$DEPS/obj"; cp -a "$s" "$b"
	# The hot objects first, with their flags; `make lib` then finds them
	# up to date and compiles only the rest.
	hot=""
	for o in $BEARSSL_HOT; do hot="$hot build/obj/$o.o"; done
	# shellcheck disable=SC2086
	(cd "$b" && mkdir -p build/obj &&
		make -j"$jobs" CC="$MUSL_CC" CFLAGS="-W -Wall $HOT_CFLAGS" $hot >"$b/build.log" 2>&1 &&
		make -j"$jobs" CC="$MUSL_CC" AR="$AR" CFLAGS="-W -Wall $DEP_CFLAGS" LD="$MUSL_CC" lib >>"$b/build.log" 2>&1) ||
		{ say "BearSSL build failed; see $b/build.log"; exit 1; }
	mkdir -p "$prefix/lib" "$prefix/include"
	cp "$b/build/libbearssl.a" "$prefix/lib/"
	cp "$b"/inc/*.h "$prefix/include/"
	stamp bearssl
}

build_libarchive() {
	built libarchive libarchive.a && return 0
	s=$(unpack libarchive)
	say "building libarchive $(ver libarchive)"
	b=$DEPS/obj/libarchive; rm -rf "$b"; mkdir -p "$b"
	# No Unicode normalisation: NFD names (from pax "path" or a zip's UTF-8
	# flag) reach us as written instead of recomposed to NFC. Its tables and
	# two normalisers are 28 KB of the binary. archive_string.c sets the two
	# flags only to pick those converters; as 0, no branch can pick them and
	# the compiler drops them. UTF-8 is still checked (an invalid name is
	# still a warning, fatal in core/pkg/arc.c), and the path rules
	# (core/pkg/arc_path.c) read the very bytes each entry is created with,
	# so no name is trusted that is not checked.
	cp -a "$s" "$b/src"
	sed -i -e 's/^#define SCONV_NORMALIZATION_C\t(1<<6)/#define SCONV_NORMALIZATION_C\t0/' \
		-e 's/^#define SCONV_NORMALIZATION_D\t(1<<7)/#define SCONV_NORMALIZATION_D\t0/' "$b/src/libarchive/archive_string.c"
	[ "$(grep -c '^#define SCONV_NORMALIZATION_[CD]	0' "$b/src/libarchive/archive_string.c")" = 2 ] ||
		{ say "libarchive: the normalisation flags in archive_string.c were not found (new version? see the note above)"; exit 1; }
	# No PPMd in the zip reader: its decoder (7 KB, and a past source of
	# libarchive CVEs) would decode hostile bytes no artifact of ours needs.
	# The method-98 case goes, so such an entry takes the reader's own
	# "Unsupported ZIP compression method (98: ppmd-1)"; the frees of a
	# context only that case creates become no-ops, and nothing else refers
	# to the decoder, so the linker leaves it out. Stored and deflate stay.
	z=$b/src/libarchive/archive_read_support_format_zip.c
	sed -i -e '/^\tcase 98: \/\* ZIPx PPMd compression. \*\/$/,/^\t\tbreak;$/d' \
		-e 's/__archive_ppmd8_functions\.Ppmd8_Free(&zip->ppmd8);/(void)0;/' "$z"
	[ "$(grep -c 'case 98:\|Ppmd8_Free' "$z")" = 0 ] && [ "$(grep -c '^	*(void)0;$' "$z")" = 3 ] ||
		{ say "libarchive: the zip reader's PPMd case was not found as expected (new version? see the note above)"; exit 1; }
	# No decryption in the zip reader: an entry flagged encrypted (PKWARE,
	# WinZip AES, strong encryption) is refused at its first read, "Encrypted
	# entries are not supported", instead of asking for a passphrase nobody
	# gives. No artifact of ours is encrypted, and the decryptors (2 KB) go.
	sed -i -e '/^\t\tif (zip->entry->zip_flags & ZIP_STRONG_ENCRYPTED)$/,/^\t\t\tr = init_traditional_PKWARE_decryption(a);$/c\
\t\tarchive_set_error(\&a->archive, ARCHIVE_ERRNO_FILE_FORMAT, "Encrypted entries are not supported");\
\t\tr = ARCHIVE_FATAL;' "$z"
	[ "$(grep -c 'init_traditional_PKWARE_decryption(a);\|read_decryption_header(a);' "$z")" = 0 ] &&
		[ "$(grep -c '"Encrypted entries are not supported"' "$z")" = 2 ] ||
		{ say "libarchive: the zip reader's decryption set-up was not found as expected (new version? see the note above)"; exit 1; }
	# No ACLs from the tar reader: pax SCHILY.acl.access/default/ace values
	# and Solaris 'A' headers are read and dropped, as unknown pax keys are,
	# instead of parsed into the entry (core/pkg/arc_write.c never reads an
	# entry's ACL: no archive_write_disk, every mode is ours). The parser of
	# that text (3 KB) goes with it. A Solaris header is still consumed and
	# its type and size still checked; a malformed ACL in either is no longer
	# an error.
	t=$b/src/libarchive/archive_read_support_format_tar.c
	sed -i -e '/^#include "archive_acl_private.h"/a #define archive_acl_from_text_l(acl, text, type, sc) ARCHIVE_OK' "$t"
	[ "$(grep -c '^#define archive_acl_from_text_l(acl, text, type, sc) ARCHIVE_OK$' "$t")" = 1 ] &&
		[ "$(grep -c 'archive_acl_from_text_l(' "$t")" = 3 ] ||
		{ say "libarchive: the tar reader's ACL parsing was not found as expected (new version? see the note above)"; exit 1; }
	s=$b/src
	# Only zlib: no xml2, crypto, iconv, acl, xattr, lzma, bzip2, zstd, lz4, and
	# no front-end programs. Formats we do not call are dropped by the linker.
	# Debian's patches touch configure.ac and Makefile.am, which would need
	# autoreconf; its CMakeLists.txt is patched alike and cmake is at hand.
	off=""
	for o in OPENSSL LIBB2 LZ4 LZO LZMA ZSTD BZip2 LIBXML2 EXPAT PCREPOSIX PCRE2POSIX \
		LibGCC CNG MBEDTLS NETTLE TAR CPIO CAT XATTR ACL ICONV TEST COVERAGE INSTALL WERROR; do
		off="$off -DENABLE_$o=OFF"
	done
	cross=""
	[ -z "$CROSS" ] || cross="-DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64"
	# shellcheck disable=SC2086
	(cd "$b" && cmake "$s" $cross -DCMAKE_AR="$(command -v "$AR")" -DCMAKE_RANLIB="$(command -v "$RANLIB")" -DCMAKE_C_COMPILER="$MUSL_CC" -DCMAKE_BUILD_TYPE=MinSizeRel \
		-DCMAKE_C_FLAGS="$DEP_CFLAGS -I$prefix/include" -DBUILD_SHARED_LIBS=OFF -DENABLE_ZLIB=ON \
		-DZLIB_INCLUDE_DIR="$prefix/include" -DZLIB_LIBRARY="$prefix/lib/libz.a" \
		-DCMAKE_FIND_ROOT_PATH="$prefix" -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY \
		-DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY $off >"$b/configure.log" 2>&1 &&
		make -j"$jobs" archive_static >"$b/make.log" 2>&1 &&
		mkdir -p "$prefix/lib" "$prefix/include" &&
		cp libarchive/libarchive.a "$prefix/lib/libarchive.a" &&
		cp "$s/libarchive/archive.h" "$s/libarchive/archive_entry.h" "$prefix/include/") ||
		{ say "libarchive build failed; see $b/*.log"; exit 1; }
	stamp libarchive
}

fetch_sources
if [ "$ARCH" = arm64 ]; then build_musl; fi
command -v "$MUSL_CC" >/dev/null || { say "$MUSL_CC not found: install musl-tools"; exit 1; }
build_zlib
build_bearssl
build_libarchive
