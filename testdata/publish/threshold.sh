#!/bin/sh
# A scripted agent for the seeds' scenario: sets the free-shipping threshold to
# $THRESHOLD, with EXTRA set also edits an unrelated file, and on a retry leaves what
# it was told about the conflict ($CORRAL_CONFLICT) in retry-<task>.txt. With
# AGENT_WAIT set, a first attempt finishes only once a line is typed into its terminal
# (a test orders two publishes that way, not by timing).
set -e
sed -i "s/FreeShippingThreshold = [0-9]*/FreeShippingThreshold = $THRESHOLD/" pricing/shipping.go
if [ -n "$EXTRA" ]; then
	echo "unrelated edit by $CORRAL_TASK" >> docs/notes.md
fi
if [ -n "$CORRAL_CONFLICT" ]; then
	echo "conflict file: $CORRAL_CONFLICT" > "retry-$CORRAL_TASK.txt"
	cat "$CORRAL_CONFLICT" >> "retry-$CORRAL_TASK.txt" 2>/dev/null || true
fi
sleep "${AGENT_SLEEP:-0}"
if [ -n "$AGENT_WAIT" ] && [ -z "$CORRAL_CONFLICT" ]; then
	read -r _
fi
