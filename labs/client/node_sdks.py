"""The official Node SDKs as clients, one per wire protocol of the server's table
(server.apis.table.APIS): npm `openai` streams `/v1/responses` with `client.responses.stream`,
npm `@anthropic-ai/sdk` streams `/v1/messages` with `client.messages.stream`. Each script
(proxies/apps/node/*-client.mjs) prints what the SDK yielded, one JSON line an event; this side
times each line as it arrives.

    reply = node_sdks.stream("messages", server.url, body)
    reply.events   # the SDK's own event types, in order: message_start, content_block_start, ...
    reply.wire     # the `event:` names on the wire, pings included (the SDK drops them)
    reply.text     # the text deltas joined; reply.final: the text the SDK's helper assembled
    reply.error    # what the SDK threw: {"error": its class name, "status", "type", "message"}
"""
from __future__ import annotations

import json
import time
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, Mapping

from labs.client.node_process import json_lines
from proxies.apps.nodejs import NODE_DIR
from server.apis.table import APIS


@dataclass(frozen=True)
class NodeSdk:
    api: str  # its name in server.apis.table.APIS
    package: str  # the npm package, pinned in proxies/apps/node/package.json
    script: str  # beside fetch-client.mjs
    adds: str  # the part of the route the SDK appends to its baseURL

    def base_url(self, server_url: str) -> str:
        return server_url.rstrip("/") + APIS[self.api].path.removesuffix(self.adds)


SDKS: dict[str, NodeSdk] = {sdk.api: sdk for sdk in (
    NodeSdk("responses", "openai", "openai-responses-client.mjs", "/responses"),
    NodeSdk("messages", "@anthropic-ai/sdk", "anthropic-messages-client.mjs", "/v1/messages"),
)}


@dataclass
class SdkReply:
    status: int | None = None
    events: list[dict[str, Any]] = field(default_factory=list)  # what the SDK yielded, with `t`
    wire: list[str] = field(default_factory=list)  # every `event:` name, as it crossed the wire
    final: str | None = None  # the text the SDK's stream helper assembled
    final_status: str | None = None  # its status (responses) or stop reason (messages)
    error: dict[str, Any] | None = None
    ended: bool = False  # the SDK's stream finished without an error

    @property
    def types(self) -> list[str]:
        return [event["event"] for event in self.events]

    @property
    def text(self) -> str:
        return "".join(event.get("text", "") for event in self.events)

    @property
    def ttft_s(self) -> float | None:
        return next((event["t"] for event in self.events if "text" in event), None)


def stream(api: str, server_url: str, body: Mapping[str, Any],
           headers: Mapping[str, str] | None = None) -> SdkReply:
    """One streamed request through the official Node SDK of `api`; its errors are in the reply."""
    sdk = SDKS[api]
    reply, t0 = SdkReply(), time.perf_counter()
    args = [sdk.base_url(server_url), json.dumps(body), json.dumps(dict(headers or {}))]
    with closing(json_lines(NODE_DIR / sdk.script, args)) as lines:
        for item in lines:
            if "ready" in item:
                t0 = time.perf_counter()  # Node has started: the request goes now
            elif "response" in item:
                reply.status = int(item["response"])
            elif "wire" in item:
                reply.wire.append(item["wire"])
            elif "event" in item:
                reply.events.append({**item, "t": time.perf_counter() - t0})
            elif "final" in item:
                reply.final, reply.final_status = item["final"], item.get("status")
            elif "error" in item:
                reply.error = item
            elif "end" in item:
                reply.ended = True
    return reply
