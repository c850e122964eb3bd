// A Node app reading a stream with the built-in `fetch` (undici inside Node), as Node backends
// and the JavaScript SDKs do: `for await (const chunk of response.body)`. The lab's measuring
// client (labs/client/node_fetch.py) starts it and times each line it prints.
//
//   node fetch-client.mjs URL BODY_JSON HEADERS_JSON [BODY_TIMEOUT_MS]
//
// BODY_TIMEOUT_MS: a dispatcher `new Agent({ bodyTimeout })` from the npm `undici` package, passed
// as fetch's `dispatcher` (0: no limit); absent: the built-in default dispatcher (bodyTimeout
// 300 s). Prints one JSON line per event: {"ready": true} before the request, then
// {"response": status, "headers": {...}}, {"chunk": base64} per body chunk, and {"end": true} or
// {"error": name, "message", "code", "cause"}.
import { Agent } from "undici";

const [url, body, headers, bodyTimeoutMs] = process.argv.slice(2);
const options = { method: "POST", body, headers: { "content-type": "application/json", ...JSON.parse(headers || "{}") } };
if (bodyTimeoutMs !== undefined) {
  options.dispatcher = new Agent({ bodyTimeout: Number(bodyTimeoutMs) });
}

const print = (record) => process.stdout.write(JSON.stringify(record) + "\n");

// The measuring side starts its clock here, so Node's own start-up is not counted as TTFB.
print({ ready: true });
try {
  const response = await fetch(url, options);
  print({ response: response.status, headers: Object.fromEntries(response.headers) });
  for await (const chunk of response.body) {
    print({ chunk: Buffer.from(chunk).toString("base64") });
  }
  print({ end: true });
} catch (error) {
  // undici reports a cut body as `TypeError: terminated` with the reason in `cause`.
  const cause = error.cause ?? {};
  print({ error: error.name, message: error.message, code: cause.code ?? error.code ?? null,
          cause: cause.message ?? null });
}
