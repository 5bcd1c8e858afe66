#!/bin/sh
# A scripted agent that bumps one dependency ($DEP to $VERSION) in the lockfile
# (go.sum) and adds a source file of its own. With AGENT_WAIT set it finishes only
# once a line is typed into its terminal (a test orders publishes that way).
set -e
sed -i "s|^$DEP .*|$DEP $VERSION|" go.sum
mkdir -p "src/$CORRAL_TASK"
echo "package $CORRAL_TASK" > "src/$CORRAL_TASK/$CORRAL_TASK.go"
sleep "${AGENT_SLEEP:-0}"
if [ -n "$AGENT_WAIT" ]; then
	read -r _
fi
