#!/bin/sh
# A scripted agent that asks the human through corral and uses the answer.
set -e
answer=$(corral ctl ask "Which colour should the button be?")
echo "$answer" > colour.txt
