#!/bin/sh
# A scripted agent that blocks until the shared head moves away from its base, then
# starts the MCP server its HOME configures for Claude Code (~/.claude.json) the way
# an MCP client would and calls the status tool over stdio.
set -e
mkdir -p out
corral ctl wait head --from "$CORRAL_BASE" --timeout 120s --json > out/c-wait.json
cp "$HOME/.codex/config.toml" out/c-codex.toml
cmp -s "$HOME/.claude.json" "$CORRAL_MCP_CONFIG"
python3 - > out/c-mcp.json <<'PY'
import json, os, subprocess
cfg = json.load(open(os.path.expanduser("~/.claude.json")))["mcpServers"]["corral"]
p = subprocess.Popen([cfg["command"]] + cfg["args"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def send(msg):
    p.stdin.write(json.dumps(msg) + "\n")
    p.stdin.flush()
def reply(id):
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == id:
            return m
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}})
reply(1)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "status", "arguments": {}}})
print(reply(2)["result"]["content"][0]["text"])
p.stdin.close()
p.wait()
PY
