// What the two official-SDK clients (openai-responses-client.mjs, anthropic-messages-client.mjs)
// share: their arguments, the JSON lines they print, and a `fetch` that reports each SSE event
// name as it crosses the wire, so a line shows what the SDK's own parser hides (the Anthropic SDK
// drops `event: ping` before its iterator, and every event that has no `event:` line:
// @anthropic-ai/sdk core/streaming.mjs, `fromSSEResponse`).
//
//   node SCRIPT BASE_URL BODY_JSON [HEADERS_JSON]
//
// Prints one JSON line per step: {"ready": true} before the request, {"response": status} when
// the headers are in, {"wire": name} per `event:` line, {"event": type, "sequence_number"?,
// "text"?, "failure"?} per event the SDK yields, {"final": text, "status": its status or stop
// reason} (what the SDK's stream helper assembled) and {"end": true}; or {"error": the SDK's
// class name, "status", "type", "message"} for what it threw.

export const print = (record) => process.stdout.write(JSON.stringify(record) + "\n");

// The SSE event names in a body, line by line; a name cut across two chunks is kept for the next.
function eventNameTap() {
  const decoder = new TextDecoder();
  let pending = "";
  const scan = (text) => {
    pending += text;
    const lines = pending.split(/\r\n|\r|\n/);
    pending = lines.pop();
    for (const line of lines) {
      if (line.startsWith("event:")) print({ wire: line.slice(6).trim() });
    }
  };
  return new TransformStream({
    transform(chunk, controller) {
      scan(decoder.decode(chunk, { stream: true }));
      controller.enqueue(chunk);
    },
    flush() {
      scan(decoder.decode() + "\n");
    },
  });
}

// The `fetch` option both SDKs take: the global fetch, with the status printed and the body tapped.
async function tappedFetch(url, init) {
  const response = await fetch(url, init);
  print({ response: response.status });
  if (!response.body) return response;
  return new Response(response.body.pipeThrough(eventNameTap()),
    { status: response.status, statusText: response.statusText, headers: response.headers });
}

// Makes the SDK's client from the arguments and runs `stream(client, body)`; whatever it throws
// is printed as the SDK named it. Retries are off: a mid-stream error is never retried by the
// SDKs, and a retried request would hide the first attempt's error from the line that reports it.
export async function streamWith(Sdk, apiKey, stream) {
  const [baseURL, body, headers] = process.argv.slice(2);
  const client = new Sdk({ apiKey, baseURL, maxRetries: 0, defaultHeaders: JSON.parse(headers || "{}"),
                           fetch: tappedFetch });
  print({ ready: true });  // the measuring side's clock starts here, after Node's own start-up
  try {
    await stream(client, JSON.parse(body));
    print({ end: true });
  } catch (error) {
    print({ error: error.constructor?.name ?? "Error", status: error.status ?? null,
            type: error.type ?? error.error?.type ?? null, message: String(error.message ?? error) });
  }
}
