#!/bin/sh
# A real coding agent: pi (npm @mariozechner/pi-coding-agent) on the session's
# Anthropic endpoint, which is corral's model gateway. Its own tools do the work.
set -e
mkdir -p "$HOME/.pi/agent"
printf '{"providers":{"anthropic":{"baseUrl":"%s"}}}\n' "$ANTHROPIC_BASE_URL" > "$HOME/.pi/agent/models.json"
exec pi --provider anthropic --model claude-sonnet-4-5 --no-session --offline --no-context-files -p "$CORRAL_PROMPT"
