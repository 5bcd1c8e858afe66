#!/bin/sh
# A scripted agent that leaves work behind and fails.
echo "half done" > "failed-$CORRAL_TASK.txt"
echo "agent $CORRAL_TASK giving up" >&2
exit "${AGENT_EXIT:-1}"
