// The wire protocols as the browser's client reads them, one entry per protocol of the server's
// table (server/apis/table.py: chat, responses, messages), each mirroring its module in
// labs/client/apis/ (tests/view/test_browser_apis.py feeds both the same events and compares).
//
//   const {kind, text} = StreamlabApis.classify("responses", data, eventName);
//
// kind, in the lab's words (labs/client/sse.py: EventKind): "content" a text delta (what TTFT
// and the gaps time), "done" the protocol's terminal event (what makes a stream complete),
// "error" an in-band error, and "role", "finish", "usage", "other" for what carries no text.
// `StreamlabApis.isHeartbeat(api, eventName)`: the protocol's keep-alive event (Messages'
// `event: ping`), counted with the SSE comments, never as a token.
"use strict";

(function () {
  const other = (text) => ({kind: "other", text: text || ""});

  function parse(data) {
    try {
      const value = JSON.parse(data);
      return value && typeof value === "object" && !Array.isArray(value) ? value : null;
    } catch (e) {
      return null;
    }
  }

  // OpenAI Chat Completions: unnamed `data:` chunks, `[DONE]` last (labs/client/sse.py: classify).
  function chat(data) {
    if (data === "[DONE]") return {kind: "done", text: ""};
    const chunk = parse(data);
    if (!chunk) return other();
    if ("error" in chunk) return {kind: "error", text: (chunk.error && chunk.error.message) || String(chunk.error)};
    const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : null;
    if (choice && typeof choice === "object") {
      const delta = choice.delta && typeof choice.delta === "object" ? choice.delta : {};
      const content = choice.delta ? delta.content : choice.text;
      if (typeof content === "string" && content) return {kind: "content", text: content};
      if (choice.finish_reason) return {kind: "finish", text: ""};
      if (delta.role) return {kind: "role", text: ""};
      return other();
    }
    return chunk.usage ? {kind: "usage", text: ""} : other();
  }

  // OpenAI Responses: typed events (the `data:`'s `type`, else the `event:` name), no `[DONE]`;
  // response.completed or response.incomplete ends it, response.failed and error are errors
  // (labs/client/apis/responses.py).
  const TERMINAL = new Set(["response.completed", "response.incomplete"]);
  function responses(data, eventName) {
    const event = parse(data);
    if (!event) return other(data.slice(0, 200));  // a relay's [DONE] ends nothing here
    const kind = typeof event.type === "string" ? event.type : eventName || "";
    if (kind === "response.output_text.delta") {
      return typeof event.delta === "string" && event.delta ? {kind: "content", text: event.delta} : other(kind);
    }
    if (TERMINAL.has(kind)) return {kind: "done", text: ""};
    if (kind === "response.failed") {
      const error = (event.response || {}).error;
      return {kind: "error", text: (error && error.message) || "response.failed"};
    }
    if (kind === "error") return {kind: "error", text: event.message || event.code || data.slice(0, 200)};
    return other(kind);
  }

  // Anthropic Messages: named events, message_stop last, `event: ping` between. The Anthropic
  // SDK reads the name first and drops a nameless event, so this does too
  // (labs/client/apis/messages.py).
  function messages(data, eventName) {
    if (!eventName) return other("unnamed event (the Anthropic SDK drops it)");
    const event = parse(data);
    if (!event) return other(data.slice(0, 200));
    if (eventName === "error") {
      const error = event.error;
      return {kind: "error", text: (error && error.message) || String(error || data.slice(0, 200))};
    }
    const kind = typeof event.type === "string" ? event.type : eventName;
    if (kind === "content_block_delta") {
      const delta = event.delta && typeof event.delta === "object" ? event.delta : {};
      const text = delta.text;
      return delta.type === "text_delta" && typeof text === "string" && text
        ? {kind: "content", text} : other(`${kind} ${delta.type}`);
    }
    if (kind === "message_delta") return {kind: "finish", text: ""};
    if (kind === "message_stop") return {kind: "done", text: ""};
    return other(kind);
  }

  const CLASSIFIERS = {chat, responses, messages};
  const HEARTBEATS = {messages: new Set(["ping"])};

  function classify(api, data, eventName) {
    const classifier = CLASSIFIERS[api || "chat"];
    if (!classifier) throw new Error(`unknown api ${api}: choose one of ${Object.keys(CLASSIFIERS).join(", ")}`);
    return classifier(data, eventName || null);
  }

  function isHeartbeat(api, eventName) {
    return Boolean(eventName && HEARTBEATS[api] && HEARTBEATS[api].has(eventName));
  }

  window.StreamlabApis = {names: Object.keys(CLASSIFIERS), classify, isHeartbeat};
})();
