#!/bin/sh
# A scripted agent that times the workspace protocol from inside its sandbox: 200 raw
# socket calls per verb, then `corral ctl status` as a process, into out/ctl-times.txt.
mkdir -p out
python3 - > out/ctl-times.txt <<'PY'
import json, os, socket, subprocess, time
def call(verb):
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ["CORRAL_CTL"])
    s.sendall(json.dumps({"verb": verb}).encode() + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
for verb in ("status", "board"):
    ts = []
    for _ in range(200):
        t0 = time.perf_counter(); call(verb); ts.append(time.perf_counter() - t0)
    ts.sort()
    print(f"socket {verb}: p50 {ts[100]*1000:.2f} ms, p95 {ts[190]*1000:.2f} ms")
ts = []
for _ in range(30):
    t0 = time.perf_counter()
    subprocess.run(["corral", "ctl", "status"], stdout=subprocess.DEVNULL, check=True)
    ts.append(time.perf_counter() - t0)
ts.sort()
print(f"corral ctl status (a process): p50 {ts[15]*1000:.1f} ms")
PY
