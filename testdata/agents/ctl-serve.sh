#!/bin/sh
# A scripted agent that serves HTTP on 4173 and leases it as the service "preview",
# then keeps serving until another session says it has fetched the page.
mkdir -p /tmp/www && echo "served by $CORRAL_TASK" > /tmp/www/index.html
(cd /tmp/www && exec python3 -m http.server 4173 --bind 127.0.0.1 >/dev/null 2>&1) &
srv=$!
i=0
until python3 -c "import socket; socket.create_connection(('127.0.0.1', 4173))" 2>/dev/null; do
  i=$((i+1)); [ "$i" -gt 100 ] && exit 1; sleep 0.1
done
corral ctl lease port 4173 --name preview >/dev/null
corral ctl wait lease fetched --timeout 60s >/dev/null
kill "$srv"
