#!/bin/sh
# A scripted agent: writes a file named after its task, appends to one shared by no
# one else, and exits 0 so its changeset is published.
set -e
mkdir -p "work/$CORRAL_TASK"
echo "done by $CORRAL_TASK (session $CORRAL_SESSION)" > "work/$CORRAL_TASK/result.txt"
sleep "${AGENT_SLEEP:-0}"
