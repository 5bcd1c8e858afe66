#!/bin/sh
# A scripted agent that does its work slowly, one step per tick, so it can be paused,
# interrupted and resumed: each step is a file, and a resumed agent skips steps done.
steps=${AGENT_STEPS:-20}
i=1
while [ "$i" -le "$steps" ]; do
  if [ ! -e "steps/$CORRAL_TASK/$i" ]; then
    mkdir -p "steps/$CORRAL_TASK"
    sleep "${AGENT_TICK:-0.1}"
    echo "$i" > "steps/$CORRAL_TASK/$i"
    echo "step $i"
  fi
  i=$((i+1))
done
