#!/bin/sh
# A scripted persistent agent that publishes half its work through ctl, keeps the
# typed outcome, and exits (its session's final publish carries the rest).
# Its task's accept check refuses work with out/wip.txt in it: the first publish,
# made too early, must come back refused with the check's output.
set -e
mkdir -p out
echo one > out/pub-1.txt
echo unfinished > out/wip.txt
if corral ctl publish --message "too early" > /tmp/early.out 2>&1; then
  echo "the too-early publish was not refused" >&2
  exit 1
fi
cp /tmp/early.out out/early-refused.txt
rm out/wip.txt
corral ctl publish --message "first half" --json > /tmp/pub.json
cp /tmp/pub.json out/pub-outcome.json
