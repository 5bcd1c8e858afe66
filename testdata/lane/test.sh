#!/bin/sh
# The sample repository's suite, run by the integration lane at the repository root:
# every value in lib/ is at most 5, and the values in soft/ add up to at most 8 (so two
# changes there can each pass and fail together). With lib/flaky.txt present it fails
# on a first attempt and passes on a re-run, as a flaky test does.
for f in lib/*.txt; do
  [ -e "$f" ] || continue
  v=$(cat "$f")
  if [ "$v" -gt 5 ]; then echo "FAIL: $f is $v, over 5"; exit 1; fi
done
total=0
for f in soft/*.txt; do total=$((total + $(cat "$f"))); done
if [ "$total" -gt 8 ]; then echo "FAIL: soft/ adds up to $total, over 8"; exit 1; fi
if [ -e lib/flaky.txt ] && [ "${CORRAL_LANE_ATTEMPT:-1}" = 1 ]; then echo "FAIL: flaky (attempt 1)"; exit 1; fi
echo "ok"
