// The official MCP TypeScript SDK's client in a browser page: `Client` and
// `StreamableHTTPClientTransport` from @modelcontextprotocol/sdk, nothing of the protocol written
// here. The page calls `StreamlabMcp.runSession(spec)` and gets back what the SDK saw: the session
// id the transport could read (null when CORS hides `Mcp-Session-Id`), every response's status
// and whether the request carried a session id, each call's progress notifications and result,
// and how the session ended in the SDK's own words. Built for Chromium by ./build.mjs
// (labs/scenario/mcp_browser.py loads it).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const since = (start) => (performance.now() - start) / 1000;

function methodOf(body) {
  try {
    return JSON.parse(body)?.method ?? null;
  } catch {
    return null;
  }
}

// The SDK's `fetch` option: the page's own fetch, observed, never changed.
function observingFetch(record, start) {
  return async (input, init = {}) => {
    const method = init.method ?? "GET";
    const sent = new Headers(init.headers);
    const entry = { method, rpc: typeof init.body === "string" ? methodOf(init.body) : null,
                    sentSession: sent.get("mcp-session-id"), at_s: since(start) };
    record.requests.push(entry);
    try {
      const response = await fetch(input, init);
      entry.status = response.status;
      // What the page's JavaScript can read: null unless the header is exposed by CORS.
      entry.readableSession = response.headers.get("mcp-session-id");
      return response;
    } catch (error) {
      entry.status = null;
      entry.error = String(error?.message ?? error);  // a CORS refusal: "Failed to fetch"
      throw error;
    }
  };
}

export async function runSession({ url, tool = "slow_task", calls = 1, timeoutMs = 30000 }) {
  const start = performance.now();
  const record = { url, pageOrigin: location.origin, sessionId: null, opened: false, requests: [],
                   calls: [], error: null, elapsed_s: 0 };
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: observingFetch(record, start) });
  const client = new Client({ name: "streamlab-browser", version: "1" });
  try {
    await client.connect(transport);
    record.opened = true;
    record.sessionId = transport.sessionId ?? null;
    for (let i = 0; i < calls; i++) {
      const sent = performance.now();
      const call = { sent_at_s: since(start), progress_at_s: [], result: null, error: null, elapsed_s: null };
      record.calls.push(call);
      try {
        const result = await client.callTool({ name: tool, arguments: {} }, undefined, {
          timeout: timeoutMs, onprogress: () => call.progress_at_s.push(since(sent)) });
        call.result = result.content?.map((part) => part.text ?? "").join("") ?? "";
      } catch (error) {
        call.error = String(error?.message ?? error);
        throw error;
      } finally {
        call.elapsed_s = since(sent);
      }
    }
  } catch (error) {
    record.error = String(error?.message ?? error);
  } finally {
    try {
      if (transport.sessionId) await transport.terminateSession();
      await client.close();
    } catch (error) {
      record.error ??= String(error?.message ?? error);
    }
    record.elapsed_s = since(start);
  }
  return record;
}
