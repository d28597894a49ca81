# The README's three worked templates, run as written:
# its server.json, commands.json, Dockerfile blocks and CI fetch line are read
# from README.md (the <!-- template: NAME --> markers) and run outside Docker:
# each RUN in order with this binary, COPY as cp, ENV as export, into a
# scratch root ($ROOT: the image's absolute paths live under it); a named
# build stage (FROM ... AS NAME) into a root of its own, $ROOT.NAME, which
# COPY --from=NAME copies from. The registry is the local fixture
# (tests/fixtures/agent_pkgs.sh), through the mirror the README shows as an
# option (server.mirror.json: the template itself names none), its
# install.mirrors.npm and allow_hosts entry naming the fixture instead of
# registry.npmmirror.com.
. "$TOP/tests/lib.sh"
. "$FIXTURES/agent_pkgs.sh"
REG_PID=$BGPID
if [ -e /opt/agent-sandbox/tools ]; then
	skip "README templates" "/opt/agent-sandbox/tools exists on this machine"
	exit 0
fi
export SSL_CERT_FILE=$PKI/ca.pem ABX_MANIFESTS_DIR=$T/m
REGHOST=${REG#https://}

# ---- the template files and steps, from the README text ----------------------
python3 - "$TOP/README.md" "$T/tpl" "$REG" "$REGHOST" "$PLAT" <<'PYEOF' || { not_ok "README templates" "not found"; exit 1; }
import json, os, re, shlex, sys
text, out, reg, reghost, plat = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
os.makedirs(out)
blocks = dict(re.findall(r"<!-- template: (\S+) -->\n```[a-z]*\n(.*?)```", text, re.S))
need = ["server.json", "commands.json", "build.Dockerfile", "lazy.Dockerfile", "ci-fetch.sh", "offline.Dockerfile"]
missing = [n for n in need if n not in blocks]
assert not missing, "README lacks templates %s" % missing
server = blocks["server.json"]
# no region's mirror by default: the option replaces the install member
assert "mirror" not in server and "npmmirror" not in server, server
json.loads(server)
opt = blocks["server.mirror.json"]
assert "https://registry.npmmirror.com" in opt and '"registry.npmmirror.com"' in opt
plain = '  "install": {"mode": "build", "wait": 20},\n'
assert plain in server
server = server.replace(plain, opt)
json.loads(server)
# the documented mirror setting, pointed at the local registry fixture; the
# audit file stays where the template puts it, in the user's own state
# directory (image() puts that user's home under the flow's directory)
assert '"/home/user/.local/state/agent-sandbox/audit.jsonl"' in server
# the sandbox's credential: a file the orchestrator writes after create
assert '"token_file": "/home/user/.config/agent-sandbox/token"' in server
server = server.replace("https://registry.npmmirror.com", reg).replace('"registry.npmmirror.com"', '"%s"' % reghost)
open(out + "/server.json", "w").write(server)
# template 2: 'Set "mode": "lazy" in server.json'
assert '"mode": "build"' in server
open(out + "/server.lazy.json", "w").write(server.replace('"mode": "build"', '"mode": "lazy"'))
json.loads(blocks["commands.json"])
open(out + "/commands.json", "w").write(blocks["commands.json"])
# the CI line fetches the image's platform only; here the image is this machine
assert "--platform linux-x64 " in blocks["ci-fetch.sh"], blocks["ci-fetch.sh"]
open(out + "/ci-fetch.sh", "w").write(blocks["ci-fetch.sh"].replace("linux-x64", plat))
# the image's start and readiness commands, as the build template names them
cmds = dict(re.findall(r"^# (start_cmd|ready_cmd): (.*)$", blocks["build.Dockerfile"], re.M))
assert cmds.get("start_cmd") == "agent-sandbox-server serve --port 9000", cmds
assert cmds.get("ready_cmd") == "agent-sandbox-healthcheck --port 9000", cmds
for k, v in cmds.items():
    open("%s/%s" % (out, k), "w").write(v + "\n")

def path(p, root='"$R"'):  # a stage's absolute paths live under its root $R
    return root + shlex.quote(p) if p.startswith("/") else shlex.quote(p)

for name in ("build", "lazy", "offline"):
    lines, sh = blocks[name + ".Dockerfile"].replace("\\\n", " ").splitlines(), []
    stages = [ln.split()[3] if len(ln.split()) == 4 else "" for ln in lines if ln.startswith("FROM ")]
    assert stages and stages[-1] == "" and all(stages[:-1]), "%s: FROM lines %s" % (name, stages)
    for ln in lines:
        word, _, rest = ln.strip().partition(" ")
        if word == "FROM":  # the last stage is the image ($ROOT), a named one $ROOT.NAME
            st = stages.pop(0)
            sh.append('R="$ROOT%s" && mkdir -p "$R" && PATH="$R/usr/local/bin:$PATH" '
                      '&& ABX_SERVER_CONFIG="$R/etc/agent-sandbox/server.json"' % ("." + st if st else ""))
        elif word == "RUN":
            argv = json.loads(rest)
            sh.append("step %s %s" % (shlex.quote(ln.strip()), " ".join(path(a) for a in argv)))
        elif word == "COPY":
            *src, dst = rest.split()
            d = dst if dst.endswith("/") else os.path.dirname(dst)
            if src[0].startswith("--from="):
                src = [path(s, '"$ROOT.%s"' % src[0][7:]) for s in src[1:]]
            else:
                src = [shlex.quote(s) for s in src]
            cp = "cp -a" if rest.startswith("--from=") else "cp -R"
            sh.append("mkdir -p %s && %s %s %s" % (path(d), cp, " ".join(src), path(dst)))
        elif word == "ENV":
            for kv in shlex.split(rest):
                k, v = kv.split("=", 1)
                sh.append("export %s=%s" % (k, path(v)))
        elif word in ("USER", "") or word.startswith("#"):
            continue        # one user here; the base image is this machine
        else:
            raise SystemExit("unknown Dockerfile instruction: " + ln)
    open("%s/%s.sh" % (out, name), "w").write("\n".join(sh) + "\n")
PYEOF

# step LINE ARGV...: one RUN of a template; it must succeed
step() {
	_l=$1
	shift
	run "$@"
	expect "$FLOW: $_l" 0
}
# image NAME [SERVER-JSON]: a build context (the binary, the template files),
# a scratch root, and the image's USER user: HOME, and the state directory a
# non-root user gets (~/.local/state/agent-sandbox; tests may run as root,
# whose /var/lib/agent-sandbox belongs to the machine). /etc/agent-sandbox is
# $ROOT's, named by ABX_SERVER_CONFIG. /home/user is not here: the template's
# audit_file names the flow's home instead, the same state directory.
image() {
	FLOW=$1 ROOT=$T/$1/root CTX=$T/$1/ctx
	mkdir -p "$ROOT" "$CTX" "$T/$1/home"
	cp "$BIN" "$CTX/agent-sandbox-server"
	cp "$T/tpl/commands.json" "$CTX/"
	sed "s|\"/home/user/|\"$T/$1/home/|" "$T/tpl/${2:-server.json}" >"$CTX/server.json"
	export ROOT HOME=$T/$1/home PATH=$T/$1/root/usr/local/bin:$PATH \
		ABX_SERVER_CONFIG=$T/$1/root/etc/agent-sandbox/server.json \
		ABX_SERVER_STATE_DIR=$T/$1/home/.local/state/agent-sandbox
	cd "$CTX" || exit 1
}
# template_serve: the template's start_cmd (the image's agent-sandbox-server
# from PATH; port 0 and loopback for the test), then its ready_cmd and
# GET /health. Sets PORT and SERVE_PID; 1 when serve did not start.
template_serve() {
	# shellcheck disable=SC2046 # the command's words, as the platform splits them
	bg $(sed 's/--port 9000/--port 0/' "$T/tpl/start_cmd") --host 127.0.0.1 >"$T/serve.out" 2>"$T/serve.err"
	SERVE_PID=$BGPID
	wait_for_line "$T/serve.out" '^[0-9][0-9]*$' 10 || return 1
	PORT=$(head -1 "$T/serve.out")
	# shellcheck disable=SC2046
	run $(sed "s/--port 9000/--port $PORT/" "$T/tpl/ready_cmd")
	expect "$FLOW: the template's ready_cmd passes" 0
	check "$FLOW: GET /health answers 200" \
		test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")" = 200
	# the orchestrator, after create: an API call before the token is 503,
	# then it writes the token file and polls GET /ready until 200
	check "$FLOW: before the token file is written the API answers 503 server.not_initialised" \
		test "$(op codex.version)" = 503 -a -n "$(grep server.not_initialised "$T/body")"
	mkdir -p "$HOME/.config/agent-sandbox"
	printf 'tok\n' >"$HOME/.config/agent-sandbox/token"
	_i=0
	while [ "$(curl -s -o /dev/null -w '%{http_code}' "$(U)/ready")" != 200 ] && [ $_i -lt 100 ]; do
		sleep 0.05
		_i=$((_i + 1))
	done
	check "$FLOW: the token file written, GET /ready answers 200" \
		test "$(curl -s -o /dev/null -w '%{http_code}' "$(U)/ready")" = 200
	check "$FLOW: audit_file is the template's, in the state directory serve created" \
		test -f "$HOME/.local/state/agent-sandbox/audit.jsonl"
}
U() { echo "http://127.0.0.1:$PORT"; }
op() { curl -s -o "$T/body" -w '%{http_code}' -H 'X-Access-Token: tok' -H 'Content-Type: application/json' \
	-X POST --data '{}' "$(U)/v1/ops/$1"; }
codex_op() { # FLOW-NAME: codex.version answers 200 with the fixture's version
	code=$(op codex.version)
	check "$1: codex.version answers 200 ($(head -c 200 "$T/body"))" test "$code" = 200
	check "$1: ... with the installed codex's version" test "$(json_eval "$T/body" 'd["stdout"].strip()')" = "codex 1.0.0"
}

# ---- 1. build-time prepare, mode build ------------------------------------------
(
	image build
	. "$T/tpl/build.sh"
	T0=$(wc -l <"$T/reg.log")
	check "build: prepare installed codex into ABX_TOOLS_DIR" test -d "$ROOT/opt/agent-sandbox/tools/codex"
	check "build: the layer holds the tools and no .cache (no download, no extracted tree)" \
		test ! -e "$ROOT/opt/agent-sandbox/tools/.cache"
	du -sk "$ROOT" | cut -f1 >"$T/build.du"
	run "$ROOT/opt/agent-sandbox/tools/bin/codex" --version
	expect "build: the codex shim runs the installed tool" 0 "codex 1.0.0"
	template_serve || { not_ok "build: serve starts from the template" "$(cat "$T/serve.err")"; exit 1; }
	codex_op build
	kill "$SERVE_PID"
	# the same image without its prepare step: mode build never installs at runtime
	mkdir -m 700 "$T/build/empty"
	ABX_TOOLS_DIR=$T/build/empty start_serve || { not_ok "build: serve starts (no prepare)" "$(cat "$T/serve.err")"; exit 1; }
	code=$(op codex.version)
	check "build: without prepare a call needing codex is refused, not installed ($code)" test "$code" != 200 -a "$code" != 202
	check "build: ... install.required ($(head -c 200 "$T/body"))" grep -q '"code":"install.required"' "$T/body"
	kill "$SERVE_PID"
	mv "$ROOT/opt/agent-sandbox/tools/codex" "$T/build/codex.moved"
	run "$ROOT/opt/agent-sandbox/tools/bin/codex" --version
	expect "build: a shim in mode build refuses to install a missing tool" 1 "" "install.required"
	check "build: nothing was downloaded at runtime" test "$(wc -l <"$T/reg.log")" = "$T0"
	check "build: no tree was installed at runtime" test ! -e "$ROOT/opt/agent-sandbox/tools/codex" -a ! -e "$T/build/empty/codex"
)

# ---- 2. a small image, mode lazy ----------------------------------------------------
(
	image lazy server.lazy.json
	. "$T/tpl/lazy.sh"
	check "lazy: nothing installed at build" test ! -e "$HOME/.local/state/agent-sandbox/tools/codex"
	template_serve || { not_ok "lazy: serve starts from the template" "$(cat "$T/serve.err")"; exit 1; }
	code=$(op codex.version)
	i=0
	while [ "$code" = 202 ] && [ $i -lt 60 ]; do
		sleep 1
		code=$(op codex.version)
		i=$((i + 1))
	done
	check "lazy: the first call installs codex into ~/.local/state/agent-sandbox/tools" \
		test -d "$HOME/.local/state/agent-sandbox/tools/codex"
	T0=$(wc -l <"$T/reg.log")
	codex_op lazy
	check "lazy: later calls download nothing" test "$(wc -l <"$T/reg.log")" = "$T0"
	kill "$SERVE_PID"
)

# ---- 3. offline: a cache layer filled on CI ------------------------------------------
(
	image offline
	mkdir -p "$T/offline/ci/bin"
	cp "$BIN" "$T/offline/ci/bin/agent-sandbox-server"
	(
		unset ABX_SERVER_CONFIG
		PATH=$T/offline/ci/bin:$PATH
		run sh -e "$T/tpl/ci-fetch.sh"
		expect "offline: the CI fetch line fills ./abx-cache" 0
	)
	check "offline: ... with the cache" test -d "$CTX/abx-cache"
	kill "$REG_PID" # no network from here on
	wait "$REG_PID" 2>/dev/null
	T0=$(wc -l <"$T/reg.log")
	. "$T/tpl/offline.sh"
	check "offline: the build stage's prepare installed codex from the cache" test -d "$ROOT.prepare/opt/agent-sandbox/tools/codex"
	check "offline: ... which the stage had" test -d "$ROOT.prepare/tmp/abx-cache"
	check "offline: the image has codex's tree, copied from the stage" test -d "$ROOT/opt/agent-sandbox/tools/codex"
	# cached: ROOT: what in ROOT looks like a cache of ours
	cached() { find "$1" -regextype posix-basic -name abx-cache -o -name .cache -o -regex '.*/[0-9a-f]\{64\}[^/]*'; }
	check "offline: the build stage's root has the cache, by that test ($(cached "$ROOT.prepare" | wc -l) paths)" \
		test -n "$(cached "$ROOT.prepare")"
	check "offline: the image holds no cache: no abx-cache, no .cache, no file named by a sha256 ($(cached "$ROOT" |
		head -3 | tr '\n' ' '))" test -z "$(cached "$ROOT")"
	bk=$(cat "$T/build.du") ok=$(du -sk "$ROOT" | cut -f1)
	check "offline: the image's files ($ok KiB) are at most 1.05 times the build template's ($bk KiB)" \
		test "$(awk "BEGIN {print ($ok <= 1.05 * $bk)}")" = 1
	check "offline: with no request to the registry" test "$(wc -l <"$T/reg.log")" = "$T0"
	run "$ROOT/opt/agent-sandbox/tools/bin/codex" --version
	expect "offline: the codex shim runs the installed tool" 0 "codex 1.0.0"
	template_serve || { not_ok "offline: serve starts from the template" "$(cat "$T/serve.err")"; exit 1; }
	codex_op offline
	kill "$SERVE_PID"
)
