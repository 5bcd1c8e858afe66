#!/bin/sh
# A scripted agent speaking the workspace protocol: it declares its intent ($INTENT),
# meets its peer through named leases used as barriers, and keeps what corral told it
# in out/ so the test reads it from the head. Task a also tries to act as b.
set -e
mkdir -p out
echo "private to $CORRAL_TASK" > "secret-$CORRAL_TASK.txt"
if [ "$CORRAL_TASK" = b ]; then corral ctl wait lease a-declared --timeout 60s >/dev/null; fi
corral ctl intent add "$INTENT" --json > "out/$CORRAL_TASK-intent.json"
corral ctl lease port "$PORT1" --name "$CORRAL_TASK-declared" >/dev/null
if [ "$CORRAL_TASK" = a ]; then
  corral ctl wait lease b-declared --timeout 60s >/dev/null
  corral ctl status --json > out/a-status.json
  corral ctl board --json > out/a-board.json
  ls /run/corral > out/a-run.txt
  corral ctl publish 2> out/a-publish.txt || echo "exit $?" >> out/a-publish.txt
  python3 - > out/a-impersonate.txt <<'PY'
import json, os, socket
for req in ({"verb": "intent", "args": ["add", "x/**"]}, {"verb": "lease", "args": ["port", "7005"]}, {"verb": "publish"}):
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ["CORRAL_CTL"])
    s.sendall(json.dumps(dict(req, session="b-1")).encode() + b"\n")
    print(s.recv(65536).decode().strip())
    s.close()
PY
  corral ctl lease port "$PORT2" --name a-read >/dev/null
else
  corral ctl lease port 7009 --name a-declared 2> out/b-steal.txt || echo "exit $?" >> out/b-steal.txt
  corral ctl wait lease a-read --timeout 60s >/dev/null
fi
