package supervisor

import "path"

// MCP configuration written into every session's private HOME, so the MCP-speaking
// agents find `corral mcp` without being told: Claude Code reads user-scoped servers
// from ~/.claude.json, Codex from ~/.codex/config.toml; any other agent can be pointed
// at CORRAL_MCP_CONFIG (the common {"mcpServers": …} shape). The files are the
// agent's own, in its tmpfs HOME: it may rewrite them, and nothing leaves the sandbox.

// CtlMCPConfigInside is the generic MCP configuration, relative to the agent's HOME.
const CtlMCPConfigInside = ".config/corral/mcp.json"

func ctlHomeFiles() map[string]string {
	bin := path.Join(CtlBinInside, "corral")
	servers := `{"mcpServers":{"corral":{"type":"stdio","command":"` + bin + `","args":["mcp"]}}}` + "\n"
	return map[string]string{
		".claude.json":       servers,
		CtlMCPConfigInside:   servers,
		".codex/config.toml": "[mcp_servers.corral]\ncommand = \"" + bin + "\"\nargs = [\"mcp\"]\n",
	}
}
