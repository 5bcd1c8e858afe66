#!/bin/sh
# The demo's scripted agents: one script, one behaviour per task, no model or network.
# Each says what it does, slowly enough to watch, then edits the shop.
set -e
say() { echo "[$CORRAL_TASK] $*"; sleep "${DEMO_TICK:-0.3}"; }
case "$CORRAL_TASK" in
pricing)
  say "reading pricing/shipping.go"
  say "raising the free-shipping threshold to 60"
  sed -i 's/FreeShippingThreshold = 50/FreeShippingThreshold = 60/' pricing/shipping.go
  say "done" ;;
checkout)
  # Changes the same threshold line as pricing, from the same base, to another value:
  # the later publish is rejected whole and retried at the new head, where the line no
  # longer says 50 and the agent leaves it alone.
  say "checkout wants free shipping from 55"
  say "reading checkout/summary.go"; say "thinking about tax"; say "thinking about shipping"; say "still thinking"
  sed -i 's/FreeShippingThreshold = 50/FreeShippingThreshold = 55/' pricing/shipping.go
  grep -q tax checkout/summary.go || sed -i 's|return fmt.Sprintf("subtotal|// tax is included in the subtotal (VAT 20%)\n\treturn fmt.Sprintf("subtotal|' checkout/summary.go
  say "tax line added to the summary (attempt ${CORRAL_SESSION##*-})" ;;
lockfile)
  say "bumping example.com/money to v2.2.0"
  sed -i 's/v2.1.4 h1:9d02aa/v2.2.0 h1:77e1c3/' go.sum
  say "go.sum changed: lockfiles wait for a human's approval" ;;
changelog)
  say "writing the changelog"
  echo "- Free shipping from 60 euros" >> CHANGELOG.md ;;
burner)
  # Spins against a small CPU budget: the cgroup throttles it, the budgets pane shows it.
  say "running the whole test suite with every core"
  end=$(( $(date +%s) + ${DEMO_BURN:-6} ))
  while [ "$(date +%s)" -lt "$end" ]; do i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; done
  mkdir -p reports && echo "suite passed" > reports/burner.txt ;;
slow)
  # Works in steps so a human can pause and resume it; a resumed agent skips steps done.
  i=1
  while [ $i -le "${DEMO_STEPS:-12}" ]; do
    mkdir -p steps && [ -e steps/$i ] || { sleep 0.5; echo $i > steps/$i; echo "step $i"; }
    i=$((i+1))
  done ;;
docs)
  say "documenting the threshold"
  mkdir -p docs && echo "Shipping is free from the threshold in pricing/shipping.go." > docs/shipping.md ;;
tests)
  # Adds a test dependency to go.sum while lockfile bumps another: both change the
  # lockfile, so the later publish is escalated and waits for a human.
  say "adding a test for the summary"
  echo "example.com/check v1.0.0 h1:c3a91fQ2mVt8Lx0pYb7nE4kR6uJ1sW9dHz5oTg2iA=" >> go.sum
  printf 'package checkout\n\nimport "testing"\n\nfunc TestSummary(t *testing.T) {\n\tif Summary(10, 0) == "" {\n\t\tt.Fatal("empty")\n\t}\n}\n' > checkout/summary_test.go ;;
*)
  say "nothing scripted for $CORRAL_TASK" ;;
esac
