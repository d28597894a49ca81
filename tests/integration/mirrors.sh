# Every mirror and host the configuration accepts reaches the installer
# (config.h: CFG_LIST_MAX tarball mirrors, CFG_HOSTS_MAX allow_hosts), not
# only the first ones: prepare against two local HTTPS servers (Python's
# http.server + ssl), the origin and the mirrors, where only the last
# mirror serves the artifact or only the last allowed host admits the
# redirect the origin answers with.
. "$TOP/tests/lib.sh"

W=$T/www
MW=$T/mirror
M=$T/man
mkdir -p "$W" "$MW" "$M" "$T/home" "$T/state"
export HOME=$T/home ABX_SERVER_STATE_DIR=$T/state

make_pki
export SSL_CERT_FILE=$T/pki/ca.pem

start_httpd "$W" "$T/origin.log"
P=$HTTPD_PORT
start_httpd "$MW" "$T/mirror.log"
MP=$HTTPD_PORT

# The tool is only on the mirror server: the origin answers 404 for it.
rm -rf "$T/src" && mkdir -p "$T/src/pkg/bin"
printf '#!/bin/sh\necho "only 1.0.0"\n' >"$T/src/pkg/bin/only"
chmod 755 "$T/src/pkg/bin/only"
tar czf "$MW/only-1.0.0.tgz" -C "$T/src" pkg
H=$(sha "$MW/only-1.0.0.tgz")

# mkman_only NAME URLPATH: a tarball manifest whose only host is the origin's
# host:port, so the mirror server's port is admitted only by the mirror
# itself or install.allow_hosts
mkman_only() {
	cat >"$M/$1.json" <<EOF
{"schema":1,"name":"$1","binary":"only","version":"1.0.0",
 "source":{"type":"tarball","bin":"bin/only","strip_components":1,
  "platforms":{"linux-x64":{"url":"https://localhost:$P$2","sha256":"$H"},
               "linux-arm64":{"url":"https://localhost:$P$2","sha256":"$H"}}},
 "hosts":["localhost:$P"],"verify":{"argv":["{bin}"],"expect":"only 1.0.0"},
 "platforms":["linux-x64","linux-arm64"],"size_hint_mb":1}
EOF
}

# ---- 16 tarball mirrors, only the 16th has it -----------------------------------------
mkman_only only /f/only-1.0.0.tgz
{
	printf '{"install":{"mirrors":{"tarball":['
	i=1
	while [ $i -le 15 ]; do
		printf '"https://localhost:%s/none%d/{path}",' "$MP" $i
		i=$((i + 1))
	done
	printf '"https://localhost:%s/{path}"]},"allow_hosts":["localhost:%s"]}}\n' "$MP" "$MP"
} >"$T/m16.json"
run "$BIN" check-config --config "$T/m16.json" --manifests "$M"
expect "16 tarball mirrors: the configuration is accepted" 0
run "$BIN" prepare --config "$T/m16.json" --manifests "$M" --tools-dir "$T/t1" --only only
expect "16 tarball mirrors: the 16th serves the artifact" 0 "only 1.0.0: installed"
check "... after the other 15 were asked" test "$(grep -c ' GET /none[0-9]*/f/only-1.0.0.tgz' "$T/mirror.log")" -eq 15
check "... from the 16th" grep -q ' GET /f/only-1.0.0.tgz' "$T/mirror.log"
check "... and the origin, asked last, is not needed" sh -c "! grep -q ' GET /f/only-1.0.0.tgz' '$T/origin.log'"

# ---- 32 allowed hosts, only the 32nd admits the redirect ------------------------------------
# The origin redirects to the mirror server, a host:port neither the
# manifest nor a mirror names: only install.allow_hosts admits it.
mkman_only redir "/to?https://localhost:$MP/f/only-1.0.0.tgz"
{
	printf '{"install":{"allow_hosts":['
	i=1
	while [ $i -le 31 ]; do
		printf '"h%d.example",' $i
		i=$((i + 1))
	done
	printf '"localhost:%s"]}}\n' "$MP"
} >"$T/h32.json"
: >"$T/mirror.log"
run "$BIN" check-config --config "$T/h32.json" --manifests "$M"
expect "32 allowed hosts: the configuration is accepted" 0
run "$BIN" prepare --config "$T/h32.json" --manifests "$M" --tools-dir "$T/t2" --only redir
expect "32 allowed hosts: the 32nd admits the redirect target" 0 "redir 1.0.0: installed"
check "... which served the artifact" grep -q ' GET /f/only-1.0.0.tgz' "$T/mirror.log"
sed 's/"localhost:'"$MP"'"/"h32.example"/' "$T/h32.json" >"$T/h32no.json"
run "$BIN" prepare --config "$T/h32no.json" --manifests "$M" --tools-dir "$T/t3" --only redir
expect "... and without it the redirect is refused" 1 "" "http.redirect"
