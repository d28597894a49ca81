#!/bin/sh
# make run: serve on 127.0.0.1:$PORT (default 9000) with the embedded defaults
# and a temporary state and tools directory, print the access token and a first
# curl to try. Ctrl-C (or SIGTERM) stops the server and removes the directories.
#
#   tools/run.sh BIN [extra serve flags...]     PORT=9000 HOST=127.0.0.1
set -u
[ $# -ge 1 ] || { echo "usage: $0 BIN [SERVE-FLAGS...]" >&2; exit 2; }
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
port=${PORT:-9000}
host=${HOST:-127.0.0.1}
[ -x "$bin" ] || { echo "run: $bin is not built; run make" >&2; exit 1; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/agent-sandbox-run.XXXXXX") || exit 1
chmod 700 "$dir"
mkdir -m 700 "$dir/state" "$dir/tools"
pid=""
cleanup() {
	trap - EXIT INT TERM HUP
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	rm -rf "$dir"
	echo "run: stopped; removed $dir" >&2
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

if "$bin" --list | grep -q '^serve (not available'; then
	echo "run: serve is not available in this build of $bin (its issue has not landed)" >&2
	exit 2
fi

# One op to call first: hello.echo echoes its "text" parameter (argv words,
# never a shell).
echo_bin=/bin/echo
[ -x "$echo_bin" ] || echo_bin=/usr/bin/echo
cat >"$dir/commands.json" <<EOF
[{"id": "hello.echo", "argv": ["$echo_bin", "hello,", "{text}"],
  "params": {"text": {"type": "string", "required": true}},
  "timeout": 10, "description": "echo a greeting (the op make run starts with)"}]
EOF

# Only these variables, so a developer's own ABX_* settings do not leak in.
export ABX_SERVER_STATE_DIR="$dir/state" ABX_TOOLS_DIR="$dir/tools" ABX_SERVER_COMMANDS="$dir/commands.json"
unset ABX_SERVER_TOKEN ABX_SERVER_INSTALL_MODE ABX_INSTALL_MODE ABX_MANIFESTS_DIR ABX_SERVER_CONFIG \
	ABX_SERVER_POLICY ABX_SERVER_PRESET ABX_SERVER_AGENTS
"$bin" serve --host "$host" --port "$port" "$@" &
pid=$!

# Ready when /health answers; give up when the server died (port taken, ...).
i=0 up=0
while [ $i -lt 100 ]; do
	kill -0 "$pid" 2>/dev/null || break
	if "$bin" healthcheck --host "$host" --port "$port" >/dev/null 2>&1 ||
		curl -sf -m 1 "http://$host:$port/health" >/dev/null 2>&1; then
		up=1
		break
	fi
	sleep 0.1
	i=$((i + 1))
done
if [ $up -eq 0 ]; then
	if kill -0 "$pid" 2>/dev/null; then
		echo "run: serve did not answer /health on $host:$port within 10 s" >&2
	else
		wait "$pid"
		echo "run: serve exited ($?) before answering on $host:$port" >&2
	fi
	exit 1
fi

# serve creates a random token in the state directory when none is configured;
# show it so the first authenticated call can be pasted.
tokfile=$(find "$dir/state" -maxdepth 2 -type f -name '*token*' 2>/dev/null | head -1)
token=""
[ -n "$tokfile" ] && token=$(head -c 200 "$tokfile" | tr -d '\n')
base="http://$host:$port"
{
	echo
	echo "agent-sandbox-server serve is listening on $base"
	echo "  state dir:  $dir/state"
	echo "  tools dir:  $dir/tools"
	if [ -n "$token" ]; then
		echo "  token:      $token   (from $tokfile)"
	else
		echo "  token:      none in the state directory (this build's serve does not create one yet)"
	fi
	echo
	echo "try, in another terminal:"
	echo "  curl -s $base/health"
	if [ -n "$token" ]; then
		echo "  curl -s -H 'Authorization: Bearer $token' $base/v1/ops"
		echo "  curl -s -H 'Authorization: Bearer $token' -d '{\"text\":\"world\"}' $base/v1/ops/hello.echo"
	fi
	echo "  $bin healthcheck --port $port && echo healthy"
	echo
	echo "Ctrl-C stops the server and removes the temporary directories."
	echo
} >&2
wait "$pid"
rc=$?
pid=""
exit $rc
