#!/bin/sh
# A scripted agent for the integration lane's tests: sets lib/${LANE_FILE:-$CORRAL_TASK}.txt
# to ${LANE_VALUE:-1}. The suite (testdata/lane/test.sh) wants every value at most 5.
# Opened as a repair (a failure report at $CORRAL_FAILURE), it puts every value over 5
# back to 1 instead, and says what it read.
set -e
mkdir -p lib
if [ -n "$CORRAL_FAILURE" ] && grep -q "integration test failed" "$CORRAL_FAILURE"; then
  grep '^FAIL' "$CORRAL_FAILURE" || true
  for f in lib/*.txt; do
    if [ "$(cat "$f")" -gt 5 ]; then echo 1 > "$f"; fi
  done
  exit 0
fi
echo "${LANE_VALUE:-1}" > "lib/${LANE_FILE:-$CORRAL_TASK}.txt"
