#!/bin/sh
# A scripted agent that finds the "preview" service another session leased and
# fetches its page through the address corral gives it inside this sandbox.
set -e
mkdir -p out
corral ctl wait lease preview --timeout 60s >/dev/null
addr=$(corral ctl endpoint preview)
echo "$addr" > out/addr.txt
python3 -c "import sys, urllib.request; print(urllib.request.urlopen('http://' + sys.argv[1] + '/', timeout=10).read().decode().strip())" "$addr" > out/fetched.txt
corral ctl lease port 1 --name fetched >/dev/null
