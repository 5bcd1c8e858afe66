#!/bin/sh
# The shop's preview server: always port 4173, as every dev server's default.
# Two of them run at once in the demo; each sandbox has its own 4173.
mkdir -p /tmp/www && cp web/index.html /tmp/www/ && echo "preview of $CORRAL_TASK" > /tmp/www/whoami
echo "serving $CORRAL_TASK on 127.0.0.1:4173"
cd /tmp/www && exec python3 -m http.server 4173 --bind 127.0.0.1
