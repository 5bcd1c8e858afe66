#!/bin/sh
# A scripted persistent agent: serves its task name over HTTP on port 4173.
mkdir -p /tmp/www && echo "$CORRAL_TASK" > /tmp/www/index.html && cd /tmp/www
exec python3 -m http.server 4173 --bind 127.0.0.1
