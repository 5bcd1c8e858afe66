#!/bin/sh
# A scripted agent that writes a spec and hands the rest to a follow-up task whose
# acceptance command checks the spec is there.
set -e
mkdir -p out
echo "the spec" > spec.md
corral ctl handoff x2 --artifact nope.md 2> out/h-bad.txt || echo "exit $?" >> out/h-bad.txt
corral ctl handoff follow --artifact spec.md --accept 'grep -q spec spec.md' \
  --agent 'echo followed > followed.txt' --json > out/h-handoff.json
