"""What the measuring client needs of one wire protocol: its request, and how to read its events.

A protocol module (chat.py, responses.py, messages.py) fills one `ClientApi`; the table in
`labs/client/apis/__init__.py` holds them under the server's names (`server.apis.table.APIS`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, Union

from labs.client.sse import Classified
from server.apis.table import Api

# A prompt: one user message's text, or chat-style messages (`{"role": ..., "content": ...}`).
Prompt = Union[str, Sequence[Mapping[str, Any]]]
Classifier = Callable[[str, Union[str, None]], Classified]  # (data payload, `event:` name)
BodyBuilder = Callable[..., dict[str, Any]]  # (model, prompt, max_tokens, lab, **fields)


@dataclass(frozen=True)
class ClientApi:
    """One protocol as a client speaks it.

    `classify(payload, event_name)` sorts one dispatched event into the client's kinds
    (labs.client.sse.EventKind): `content` is a text delta (what TTFT and gaps time), `done`
    the protocol's terminal event (what makes a stream `complete`), `other` a lifecycle event.
    `heartbeat_events` are named events that are the protocol's keep-alive (Anthropic's
    `event: ping`): counted with the SSE comment heartbeats, never as tokens.
    """

    api: Api  # the server's row: name, path, title, docs
    body: BodyBuilder
    classify: Classifier
    auth_headers: Callable[[Union[str, None]], dict[str, str]]  # the API key's header(s)
    fixed_headers: Mapping[str, str] = field(default_factory=dict)  # sent on every request
    heartbeat_events: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return self.api.name

    @property
    def path(self) -> str:
        return self.api.path

    def headers(self, api_key: str | None = None) -> dict[str, str]:
        """The protocol's request headers: its fixed ones and the API key's."""
        return {**self.fixed_headers, **self.auth_headers(api_key)}


def messages_of(prompt: Prompt) -> list[dict[str, Any]]:
    """The prompt as chat-style messages."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [dict(message) for message in prompt]


def with_lab(body: dict[str, Any], fields: Mapping[str, Any], lab: Mapping[str, Any] | None) -> dict[str, Any]:
    """The body with the caller's other fields on top, and the `lab` extension last."""
    body.update(fields)
    if lab is not None:
        body["lab"] = dict(lab)
    return body


def bearer(api_key: str | None) -> dict[str, str]:
    """OpenAI's key header (chat and responses): none without a key."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def json_object(payload: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(payload)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def stamp(obj: Mapping[str, Any]) -> float | None:
    """The server's `sent_at` wall-clock stamp (requests with `lab.stamp`), when present."""
    sent_at = obj.get("sent_at")
    return sent_at if isinstance(sent_at, (int, float)) and not isinstance(sent_at, bool) else None


def lifecycle(kind_name: str, sent_at: float | None) -> Classified:
    """An event that carries no token (created, in_progress, message_start, ping, ...)."""
    return "other", kind_name, None, sent_at, None
