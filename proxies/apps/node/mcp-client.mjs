// The official MCP TypeScript SDK (npm `@modelcontextprotocol/sdk`) as a measured MCP client: its
// `Client` over its `StreamableHTTPClientTransport`, nothing of the protocol written here. One
// session, as labs/client/mcp_session.py opens one with the Python SDK: `connect` (the 2025
// revisions' `initialize` handshake, the only one the 1.x SDK speaks), `calls` tool calls with an
// `onprogress` callback, `hold_s` seconds idle in the session, then `terminateSession` (the DELETE
// the spec says a client SHOULD send) and `close`. labs/client/mcp_node.py runs it and builds the
// Python client's record from its lines.
//
//   node mcp-client.mjs URL OPTIONS_JSON
//
// OPTIONS_JSON: {"calls", "tool", "arguments", "timeout_s", "hold_s", "headers", "body_timeout_ms"}.
// body_timeout_ms: an npm `undici` Agent({ bodyTimeout }) as every request's `dispatcher`, through
// the transport's `fetch` option (Node's own default: 300 s, the field's `TypeError: terminated`).
//
// Prints one JSON line per step, `t` in seconds after {"ready": true}: {"response": [method,
// status, session id sent or received], "last_event_id": bool, "t"} for every HTTP response the
// SDK's fetch received; {"opened": session id}; {"call": i, "sent": t}; {"progress": i, "t": after
// the call was sent}; {"result": i, "text"} or {"call_error": i, "message"} with "elapsed";
// {"notification": method, "t"} for each server notification that is not a tool's progress;
// {"logged": message, "t"} for each error the SDK reported to `onerror` (a cut GET stream, its
// reconnects given up; mcp_node.py drops those it also threw); {"error": the SDK's class name and message} when the
// session failed; {"end": true, "t"} last.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Agent } from "undici";

const [url, optionsJson] = process.argv.slice(2);
const options = { calls: 1, tool: "slow_task", arguments: {}, timeout_s: 30, hold_s: 0, headers: {},
                  ...JSON.parse(optionsJson || "{}") };
const print = (record) => process.stdout.write(JSON.stringify(record) + "\n");
const began = performance.now();
const since = (start) => (performance.now() - start) / 1000;
const described = (error) => `${error?.constructor?.name ?? "Error"}: ${error?.message ?? String(error)}`;

const dispatcher = options.body_timeout_ms != null ? new Agent({ bodyTimeout: options.body_timeout_ms }) : undefined;

// The transport's `fetch` option: the global fetch, unchanged, with each response's status shown.
async function observedFetch(input, init = {}) {
  const response = await fetch(input, dispatcher ? { ...init, dispatcher } : init);
  const sent = new Headers(init.headers);
  print({ response: [init.method ?? "GET", response.status,
                     response.headers.get("mcp-session-id") ?? sent.get("mcp-session-id")],
          last_event_id: sent.has("last-event-id"), t: since(began) });
  return response;
}

const transport = new StreamableHTTPClientTransport(new URL(url),
  { fetch: observedFetch, requestInit: { headers: options.headers } });
const client = new Client({ name: "streamlab-mcp-client", version: "0.1.0" });
client.onerror = (error) => print({ logged: described(error), t: since(began) });
client.fallbackNotificationHandler = async (notification) => print({ notification: notification.method, t: since(began) });

async function session() {
  await client.connect(transport);
  print({ opened: transport.sessionId ?? null });
  for (let index = 0; index < options.calls; index++) {
    const sent = performance.now();
    print({ call: index, sent: since(began) });
    try {
      const result = await client.callTool({ name: options.tool, arguments: options.arguments }, undefined, {
        onprogress: () => print({ progress: index, t: since(sent) }),
        timeout: options.timeout_s * 1000,
      });
      const text = result.content.map((part) => part.text ?? "").join(" ");
      print(result.isError ? { call_error: index, message: `the tool failed: ${text}`, elapsed: since(sent) }
                           : { result: index, text, elapsed: since(sent) });
      if (result.isError) return;
    } catch (error) {
      print({ call_error: index, message: described(error), elapsed: since(sent) });
      return;
    }
  }
  await new Promise((resolve) => setTimeout(resolve, options.hold_s * 1000));
}

print({ ready: true });
const limit = setTimeout(() => {
  print({ error: "timed out (the lab's own limit on the session)" });
  print({ end: true, t: since(began) });
  process.exit(0);
}, options.timeout_s * 1000);
let connected = true;
try {
  await session();  // a tool call's failure is a line of its own; what throws here is connect's
} catch (error) {
  connected = false;
  print({ error: described(error) });
}
// A connect that failed has closed the transport itself (Client.connect): no DELETE, as the SDK does.
if (connected) {
  try {
    await transport.terminateSession();  // a failure is reported to onerror too: a `logged` line
  } catch {}
}
await client.close();
clearTimeout(limit);
print({ end: true, t: since(began) });
process.exit(0);  // an undici Agent's idle sockets would keep Node alive a while
