"""The agent-shaped npm fixture of the bench (tools/bench/agent.sh,
tools/bench/oci.sh): one native platform package of MB MiB (an
optionalDependency selected by os/cpu, as @openai/codex-linux-x64 is) and
NJS small JavaScript packages, written under DIR/reg for the fixture
registry at REG, and the manifest "agent" with its lockfile under DIR/m.

  PYTHONPATH=tests/fixtures python3 tools/bench/agentfix.py DIR REG MB NJS
"""
import json, os, random, sys
import npmpack as P

d, reg, mb, njs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
root, m = d + "/reg", d + "/m"
rnd = random.Random(16)
# a native binary compresses about 2.5:1: half random, half repeated text
half = (mb << 20) // 2
native = os.urandom(half) + b"".join(
    b"section .text %08x mov rax, rbx\n" % i for i in range(half // 32 + 1))[:half]
P.pack(root, "@bench/agent-linux-x64", "1.0.0", {"vendor/agent-native": (native, 0o755)},
       {"os": ["linux"], "cpu": ["x64"]})
P.pack(root, "@bench/agent-linux-arm64", "1.0.0", {"vendor/agent-native": (b"arm64\n", 0o755)},
       {"os": ["linux"], "cpu": ["arm64"]})
deps = {}
for i in range(njs):
    name = "bench-js-%03d" % i
    files = {"index.js": ("module.exports = %d;\n" % i).encode() * rnd.randint(20, 200),
             "lib/util.js": ("// util %d\nexports.f = () => %d;\n" % (i, i)).encode() * rnd.randint(50, 400),
             "README.md": b"# readme\n" * rnd.randint(10, 100)}
    P.pack(root, name, "1.0.0", files)
    deps[name] = "1.0.0"
P.pack(root, "@bench/agent", "1.0.0", {"bin/agent.js": b"#!/usr/bin/env node\nconsole.log('agent')\n"},
       {"bin": {"agent": "bin/agent.js"}, "dependencies": deps,
        "optionalDependencies": {"@bench/agent-linux-x64": "1.0.0", "@bench/agent-linux-arm64": "1.0.0"}})
E = lambda *a, **k: P.entry(root, reg, *a, **k)
ent = {"node_modules/@bench/agent": E("@bench/agent", "1.0.0", bin={"agent": "bin/agent.js"}, dependencies=deps,
                                       optionalDependencies={"@bench/agent-linux-x64": "1.0.0",
                                                             "@bench/agent-linux-arm64": "1.0.0"}),
       "node_modules/@bench/agent-linux-x64": E("@bench/agent-linux-x64", "1.0.0", os=["linux"], cpu=["x64"],
                                                optional=True),
       "node_modules/@bench/agent-linux-arm64": E("@bench/agent-linux-arm64", "1.0.0", os=["linux"],
                                                  cpu=["arm64"], optional=True)}
for n in deps:
    ent["node_modules/" + n] = E(n, "1.0.0")
P.write_manifest(m, "agent", "@bench/agent", ["localhost"], verify={"argv": ["/bin/true"]},
                 bin_="node_modules/.bin/agent")
P.write_lock(m + "/agent/package-lock.json", "@bench/agent", ent)
doc = json.load(open(m + "/agent/package-lock.json"))
doc["packages"][""]["dependencies"] = {"@bench/agent": "1.0.0"}
json.dump(doc, open(m + "/agent/package-lock.json", "w"), indent=2)
json.dump({"name": "abx-test", "version": "0.0.0", "dependencies": {"@bench/agent": "1.0.0"}},
          open(m + "/agent/package.json", "w"))
