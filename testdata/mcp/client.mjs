// An MCP client no one here wrote — the official TypeScript SDK — driving `corral mcp`:
// it lists the tools and calls every one, printing one JSON line of what it got.
// Usage: node client.mjs COMMAND [ARGS…]   (the command that starts `corral mcp`)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "corral-ts-check", version: "1.0.0" });
await client.connect(transport);

const calls = {
  board: {},
  status: {},
  intent: { action: "add", globs: ["docs/**"] },
  lease: { action: "port", port: 7100, name: "ts-svc" },
  endpoint: { name: "ts-svc" },
  wait: { what: "lease", name: "ts-svc" },
  ask: { question: "may the TypeScript client ask?", nowait: true },
  publish: { message: "from typescript" },
  handoff: { task: "ts-follow", prompt: "follow up from the TypeScript client" },
};
const { tools } = await client.listTools();
const listed = tools.map((t) => t.name);
// In the order above (the lease before its endpoint), then any tool not foreseen.
const order = [...Object.keys(calls).filter((n) => listed.includes(n)), ...listed.filter((n) => !(n in calls))];
const results = {};
for (const name of order) {
  const r = await client.callTool({ name, arguments: calls[name] ?? {} });
  results[name] = { isError: Boolean(r.isError), text: r.content?.[0]?.text ?? "" };
}
console.log(JSON.stringify({ tools: tools.map((t) => t.name), results }));
await client.close();
