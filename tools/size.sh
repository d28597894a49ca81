#!/bin/sh
# make size: the shipped binary's size and what it is made of (toybox's
# bloatcheck). Reads the unstripped twin of the same link and its link map.
#
#   tools/size.sh BIN BIN.debug [OUR_OBJECTS...]
#
# Prints: the size against the 1 MiB budget; the largest symbols; bytes per
# object of ours; bytes per library (libc, libarchive, BearSSL, zlib, ...).
# Sizes are of sections loaded from the file (text, rodata, data, eh_frame,
# ...; not bss), as the linker placed them after --gc-sections.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 BIN BIN.debug [OBJECTS...]" >&2; exit 2; }
bin=$1 dbg=$2
shift 2
map=$dbg.map
budget=1048576
top=${SIZE_TOP:-25}
# POSIX awk (Debian's default is mawk) has no strtonum.
hex='function hex(s,  i, c, v) { v = 0; sub(/^0x/, "", s); s = tolower(s)
	for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)); v = v * 16 + c - 1 }
	return v }
'

sz=$(stat -c %s "$bin")
printf '%s: %d bytes (%d KiB), %d%% of the 1 MiB budget\n' "$bin" "$sz" $((sz / 1024)) $((sz * 100 / budget))
file -b "$bin" 2>/dev/null | sed 's/^/  file: /' || true
echo
size -A "$dbg" | awk 'NR > 2 && $2 > 0 && $1 != "Total" && $1 !~ /^\.(debug|comment|note|symtab|strtab)/ {
	printf "  %-20s %9d\n", $1, $2 }' | sort -k2 -n -r | head -12 | sed '1i section                  bytes'
echo

echo "largest symbols (unstripped link):"
nm --size-sort -S -C "$dbg" | awk "$hex"'{ printf "  %8d  %s %s\n", hex($2), $3, $4 }' |
	sort -n -r | head -"$top"
echo

[ -f "$map" ] || { echo "no link map $map; per-object figures skipped"; exit 0; }
# Map lines after "Linker script and memory map": " .sect  0xADDR  0xSIZE  FILE",
# or the section name alone on one line and the rest on the next.
awk -v ours="$*" "$hex"'
BEGIN { n = split(ours, o, " "); for (i = 1; i <= n; i++) mine[o[i]] = 1 }
/^Linker script and memory map/ { on = 1; next }
!on { next }
{
	if ($0 ~ /^ \.[^ ]+$/) { sect = $1; next }
	if ($0 ~ /^ \.[^ ]+ +0x/) { sect = $1; addr = $2; size = $3; file = $4 }
	else if ($0 ~ /^ +0x[0-9a-f]+ +0x[0-9a-f]+ +[^ ]/ && sect != "") { addr = $1; size = $2; file = $3 }
	else { sect = ""; next }
	s = sect; sect = ""
	if (s ~ /^\.(bss|tbss)/ || s ~ /^\.(debug|comment|note|rela)/ || file ~ /^\*/) next
	b = hex(size)
	if (b == 0) next
	if (file in mine) { obj[file] += b; ourtotal += b; next }
	# With -flto our objects reach the link as LTO partitions.
	if (file ~ /\.ltrans[0-9]*\.ltrans\.o$/) { obj["(our objects, LTO partitions)"] += b; ourtotal += b; next }
	lib = file
	if (lib ~ /\(/) sub(/\(.*/, "", lib)
	n2 = split(lib, parts, "/"); lib = parts[n2]
	if (lib ~ /^(crt|Scrt|crti|crtn|crtbegin|crtend)/) lib = "startup files"
	if (lib ~ /^libgcc/) lib = "libgcc"
	libs[lib] += b; total += b
}
END {
	print "our objects (bytes placed in the binary):"
	for (f in obj) printf "  %8d  %s\n", obj[f], f | "sort -n -r"
	close("sort -n -r")
	printf "  %8d  total\n\n", ourtotal
	print "libraries:"
	for (l in libs) printf "  %8d  %s\n", libs[l], l | "sort -n -r"
	close("sort -n -r")
	printf "  %8d  total\n", total
}' "$map"
