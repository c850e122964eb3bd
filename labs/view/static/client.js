// The browser's measuring client: one stream read by the browser itself, timed with
// performance.now() from the moment the request is sent (t = 0), as labs/measurements.py
// defines each number for the lab's own client. Each event is classified by its wire protocol
// (apis.js, loaded first: chat, responses, messages); TTFT is the first text delta, never a
// lifecycle event. The view's panels and the browser-layer scenarios' guards (Chromium under
// Playwright) both run this file.
//
//   const result = await StreamlabClient.runStream(spec, onUpdate);
//
// spec: {url, body, wireApi: "chat" | "responses" | "messages", protocolHeaders,
//        api: "fetch" | "eventsource", decoder: "stream" | "naive",
//        mode: "stream" | "read-body", readTimeoutMs, abortAfterEvents, maxConnections}
//   wireApi is the protocol the body speaks (default chat), protocolHeaders the headers it
//   needs (Messages: anthropic-version); api is the browser API that reads it (EventSource
//   reaches only the chat route: GET /v1/chat/completions?request=, unnamed events).
// result: {status, protocol, ttftMs, ttfbMs, e2eMs, reads, splitReads, connections,
//          events: [{t, read, kind, text}], text, outcome, sawDone, error}
"use strict";

(function () {
  const KINDS_WITH_TEXT = new Set(["content"]);

  function newResult(spec) {
    return {url: spec.url, api: spec.api || "fetch", wireApi: spec.wireApi || "chat", decoder: spec.decoder || "stream",
            status: null, protocol: null, ttfbMs: null, ttftMs: null, e2eMs: null, reads: 0,
            splitReads: 0, connections: 0, events: [], text: "", outcome: "truncated",
            sawDone: false, error: null, startMs: null};
  }

  function record(result, t, read, data, eventName, onUpdate) {
    // A protocol's keep-alive event (Messages' ping) is a heartbeat, as an SSE comment is.
    const {kind, text} = StreamlabApis.isHeartbeat(result.wireApi, eventName)
      ? {kind: "comment", text: eventName} : StreamlabApis.classify(result.wireApi, data, eventName);
    const event = {t, read, kind, text};
    result.events.push(event);
    if (kind === "content") {
      result.text += text;
      if (result.ttftMs === null) result.ttftMs = t;
    } else if (kind === "done") {
      result.sawDone = true;
    } else if (kind === "error") {
      result.error = text;
    }
    if (onUpdate) onUpdate(result, event);
    return event;
  }

  function contentEvents(result) {
    return result.events.filter((e) => KINDS_WITH_TEXT.has(e.kind)).length;
  }

  // A chunk that ends inside a UTF-8 character: its last lead byte still misses continuations.
  function endsMidCharacter(bytes) {
    for (let back = 1; back <= Math.min(4, bytes.length); back++) {
      const b = bytes[bytes.length - back];
      if ((b & 0xc0) === 0x80) continue;  // a continuation byte: look further back
      const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
      return need > back;
    }
    return false;
  }

  // The WHATWG event-stream rules, on decoded text fed piece by piece: onData(data, eventName)
  // per dispatched event (the `event:` name, or null), onData(null) per comment line.
  function lineParser(onData) {
    let tail = "", data = [], name = null, skipLF = false;
    return function feed(text) {
      if (skipLF && text.startsWith("\n")) text = text.slice(1);
      skipLF = text.endsWith("\r");
      const lines = (tail + text).replace(/\r\n?/g, "\n").split("\n");
      tail = lines.pop();
      for (const line of lines) {
        if (line === "") {
          if (data.length) onData(data.join("\n"), name);
          data = [];
          name = null;
        } else if (line.startsWith(":")) {
          onData(null, null);  // a comment (`: ping`)
        } else if (line.startsWith("data:")) {
          data.push(line.slice(5).replace(/^ /, ""));
        } else if (line.startsWith("event:")) {
          name = line.slice(6).replace(/^ /, "");
        }
      }
    };
  }

  function protocolOf(url) {
    const entries = performance.getEntriesByName(url);
    const last = entries[entries.length - 1];
    return last && last.nextHopProtocol ? last.nextHopProtocol : null;
  }

  async function readFetch(spec, result, onUpdate) {
    const controller = new AbortController();
    let timer = null, why = null;
    const armReadTimeout = () => {
      if (!spec.readTimeoutMs) return;
      clearTimeout(timer);
      timer = setTimeout(() => { why = "timeout"; controller.abort(); }, spec.readTimeoutMs);
    };
    // One URL for every request of a variant: a CORS preflight's answer is cached per URL
    // (Access-Control-Max-Age), so only a page's first request to an origin pays for one.
    const url = spec.url;
    const t0 = performance.now();
    result.startMs = t0;
    const at = () => performance.now() - t0;
    armReadTimeout();
    let response;
    try {
      const headers = {"Content-Type": "application/json", ...(spec.protocolHeaders || {})};
      response = await fetch(url, {method: "POST", headers,
                                   body: JSON.stringify(spec.body), signal: controller.signal,
                                   cache: "no-store"});
    } catch (e) {
      clearTimeout(timer);
      result.outcome = why === "timeout" ? "timeout" : "connect-error";
      result.error = String(e);
      return result;
    }
    result.status = response.status;
    result.connections = 1;
    if (response.status >= 400) {
      result.error = (await response.text()).slice(0, 2048);
      result.outcome = "http-error";
      result.e2eMs = at();
      clearTimeout(timer);
      result.protocol = protocolOf(url);
      return result;
    }
    const decoder = new TextDecoder("utf-8");
    const naive = spec.decoder === "naive";
    let read = 0, events = 0, left = false;
    const feed = lineParser((data, eventName) => {
      if (left) return;  // gone: what else came in the same chunk is never read
      if (data === null) { result.events.push({t: at(), read, kind: "comment", text: ""}); return; }
      const event = record(result, at(), read, data, eventName, onUpdate);
      if (event.kind === "content") events += 1;
      if (spec.abortAfterEvents && events >= spec.abortAfterEvents && !left) {
        left = true;  // "close the tab": the client leaves on purpose
        controller.abort();
      }
    });
    try {
      if (spec.mode === "read-body") {  // the whole body first, as response.text() does
        const whole = new Uint8Array(await response.arrayBuffer());
        result.ttfbMs = at();
        read = result.reads = 1;
        feed(decoder.decode(whole));
      } else {
        const reader = response.body.getReader();
        for (;;) {
          const {value, done} = await reader.read();
          if (done) break;
          armReadTimeout();
          read += 1;
          result.reads = read;
          if (result.ttfbMs === null) result.ttfbMs = at();
          if (endsMidCharacter(value)) result.splitReads += 1;
          // The bug under test: decode() without {stream: true} treats each chunk as the whole
          // input, so a character split across two chunks becomes U+FFFD twice.
          feed(naive ? decoder.decode(value) : decoder.decode(value, {stream: true}));
          if (left) break;
        }
        if (!naive) feed(decoder.decode());
      }
      result.e2eMs = at();
      result.outcome = left ? "disconnected" : result.error ? "error-in-band" : result.sawDone ? "complete" : "truncated";
    } catch (e) {
      result.e2eMs = at();
      result.outcome = left ? "disconnected" : why === "timeout" ? "timeout" : "truncated";
      if (!left) result.error = String(e);
    } finally {
      clearTimeout(timer);
    }
    result.protocol = protocolOf(url);
    return result;
  }

  // EventSource: the browser parses the stream itself and reconnects when the connection drops
  // (sending Last-Event-ID when the server gave ids). A `reads` count is not observable here:
  // each message counts as a read of its own.
  function readEventSource(spec, result, onUpdate) {
    const url = spec.url + "?request=" + encodeURIComponent(JSON.stringify(spec.body));
    const maxConnections = spec.maxConnections || 3;
    const t0 = performance.now();
    result.startMs = t0;
    const at = () => performance.now() - t0;
    return new Promise((resolve) => {
      const source = new EventSource(url);
      result.lastEventIds = [];
      let lastId = "";  // what the browser sends as Last-Event-ID on its next connection
      const finish = (outcome) => {
        source.close();
        result.e2eMs = at();
        result.outcome = outcome;
        resolve(result);
      };
      source.onopen = () => {
        result.connections += 1;
        result.status = 200;
        result.lastEventIds.push(lastId || null);
        if (result.ttfbMs === null) result.ttfbMs = at();
      };
      source.onmessage = (message) => {
        result.reads += 1;
        lastId = message.lastEventId;
        const event = record(result, at(), result.reads, message.data, null, onUpdate);
        if (event.kind === "done") finish("complete");
      };
      source.onerror = () => {
        // CONNECTING: the browser will reconnect by itself; CLOSED: it gave up.
        if (source.readyState === EventSource.CLOSED) {
          finish(result.connections ? "truncated" : "connect-error");
        } else if (result.connections >= maxConnections) {
          finish("truncated");
        }
      };
      if (spec.timeoutMs) setTimeout(() => finish(result.sawDone ? "complete" : "timeout"), spec.timeoutMs);
    });
  }

  async function runStream(spec, onUpdate) {
    const result = newResult(spec);
    if (spec.api === "eventsource") return readEventSource(spec, result, onUpdate);
    return readFetch(spec, result, onUpdate);
  }

  // Many streams of one variant: `streams` in all, `concurrency` at once (labs.client.measure_many).
  async function runMany(spec, streams, concurrency, onUpdate) {
    const results = new Array(streams);
    const batchStart = performance.now();
    let next = 0;
    async function worker() {
      while (next < streams) {
        const index = next++;
        const result = await runStream(spec, (r, e) => onUpdate && onUpdate(index, r, e));
        result.startOffsetMs = result.startMs - batchStart;
        results[index] = result;
      }
    }
    await Promise.all(Array.from({length: Math.min(concurrency, streams)}, worker));
    return results;
  }

  window.StreamlabClient = {runStream, runMany, contentEvents, endsMidCharacter};
})();
