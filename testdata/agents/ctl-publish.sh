#!/bin/sh
# A scripted persistent agent that publishes half its work through ctl, keeps the
# typed outcome, and exits (its session's final publish carries the rest).
set -e
mkdir -p out
echo one > out/pub-1.txt
corral ctl publish --message "first half" --json > /tmp/pub.json
cp /tmp/pub.json out/pub-outcome.json
