#!/bin/sh
# A scripted agent that burns CPU and counts, to show pause and resume.
i=0
echo spinning
while :; do i=$((i+1)); if [ $((i % 20000)) -eq 0 ]; then echo "$i" > /tmp/count; fi; done
