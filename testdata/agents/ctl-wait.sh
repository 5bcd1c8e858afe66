#!/bin/sh
# A scripted agent that blocks until the shared head moves away from its base.
set -e
mkdir -p out
corral ctl wait head --from "$CORRAL_BASE" --timeout 120s --json > out/c-wait.json
