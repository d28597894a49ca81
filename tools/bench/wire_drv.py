"""Bench driver for tools/bench/wire.sh: the sessions wire (/v1/agents/sessions)
over plain sockets.
  wire_drv.py latency PORT TOKEN AGENT N   p99 and median ms, events.create
      (POST sent) to agent.session.turn.created (read on a stream opened
      before), over N turns of an idle session
  wire_drv.py rss PORT TOKEN AGENT N PID    serve's VmRSS (KiB) once N
      sessions are created and idle
"""
import http.client, json, socket, sys, time

mode, port, tok, agent, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
H = {"Authorization": "Bearer " + tok, "Content-Type": "application/json"}
api = http.client.HTTPConnection("127.0.0.1", port)


def call(method, path, body=None):
    api.request(method, path, json.dumps(body) if body is not None else None, H)
    r = api.getresponse()
    data = r.read()
    if r.status >= 300:
        sys.exit("%s %s: %d %s" % (method, path, r.status, data[:300]))
    return json.loads(data)


def create():
    return call("POST", "/v1/agents/sessions", {"agent_id": agent, "environment": {"type": "self_hosted"}})["id"]


def message(sid, text):
    call("POST", "/v1/agents/sessions/%s/events" % sid, {"events": [{"type": "agent.session.input.message",
         "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}]})


class Stream:
    def __init__(self, sid):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.sendall(("GET /v1/agents/sessions/%s/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                        "Accept: text/event-stream\r\n\r\n" % (sid, tok)).encode())
        self.buf = b""

    def until(self, typ):
        """Read until an event of type typ."""
        mark = b"event: " + typ.encode() + b"\n"
        while True:
            i = self.buf.find(mark)
            if i >= 0:
                self.buf = self.buf[i + len(mark):]
                return
            # whole events only: the rest may be the start of one
            j = self.buf.rfind(b"\n\n") + 2
            if j >= 2:
                self.buf = self.buf[j:]
            d = self.s.recv(1 << 20)
            if not d:
                sys.exit("the stream ended before " + typ)
            self.buf += d


if mode == "rss":
    pid = int(sys.argv[6])
    ids = [create() for _ in range(n)]
    for sid in ids:
        for _ in range(2000):
            if call("GET", "/v1/agents/sessions/" + sid)["status"] == "idle":
                break
            time.sleep(0.01)
        else:
            sys.exit("session %s never idle" % sid)
    for l in open("/proc/%d/status" % pid):
        if l.startswith("VmRSS:"):
            print(l.split()[1])
    sys.exit(0)

sid = create()
st = Stream(sid)
st.until("agent.session.idle")
ms = []
for i in range(n):
    t0 = time.perf_counter()
    message(sid, "hi")
    st.until("agent.session.turn.created")
    ms.append((time.perf_counter() - t0) * 1000)
    st.until("agent.session.idle")
ms.sort()
print("%.2f %.2f" % (ms[min(len(ms) - 1, int(len(ms) * 0.99))], ms[len(ms) // 2]))
