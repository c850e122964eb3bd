"""The exchanges of tests/server/test_fast_lane.py: the requests each row sends (chat, responses,
messages), how one row talks to one side over a raw socket and what it saw (the status, the
headers a client or proxy reads, the body but for each completion's own id and time, whether the
connection was kept, what the server counted), and the bounds they are judged by."""
from __future__ import annotations

import contextlib
import http.client
import json
import re
import threading
import time
from typing import Any, Callable

import httpx

from server import metrics
from server.http.lingering import LINGER_BYTES, LINGER_S
from server.processes import wait_until
from tests.server import raw_http

PATH = "/v1/chat/completions"
MESSAGES = [{"role": "user", "content": "hi"}]
JSON = {"Content-Type": "application/json"}
COMPARED_HEADERS = ("content-type", "content-length", "cache-control", "x-accel-buffering",
                    "transfer-encoding", "connection", "retry-after")
# The servers' own limits, small enough to cross: a body limit above uvicorn's 64 KiB read
# buffer (its flow control pauses reading there, so a larger body arrives in several reads),
# and a body timeout a test can wait out.
MAX_BODY_BYTES = 128 * 1024
LARGE_PAD = 100_000  # a body over 64 KiB and under the limit
OVER_PAD = 150_000  # a body over the limit
BODY_TIMEOUT_S = 0.5
# Pacing: a departure is heard from the connection and frees the slot (or queue place) at the
# engine's next step; both ways must do so within a few token intervals of the departure.
TOKENS_PER_S = 10
FREED_WITHIN_S = 10 / TOKENS_PER_S
# The silences a departure falls into (queue, prefill, pause) last 60x that bound, so a slot
# freed within it was freed by the departure, not by the stream's own end.
SILENCE_S = 60 * FREED_WITHIN_S
READ_TIMEOUT_S = 10.0
# A client still sending after its refusal: a 1 KiB chunk every PACE_S, so the server's close at
# LINGER_S is met within a few of them; it is judged against half and twice LINGER_S.
PACE_S = LINGER_S / 40


def chat_body(**fields: Any) -> bytes:
    return json.dumps({"model": "tiny", "messages": MESSAGES, **fields}).encode()


def chat_stream(**lab: Any) -> bytes:
    return chat_body(stream=True, lab={"script": "one two three", **lab})


# -- what one side shows -----------------------------------------------------------------------

def health_of(port: int) -> dict[str, Any]:
    return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=READ_TIMEOUT_S).json()


def is_idle(port: int) -> bool:
    health = health_of(port)
    return health["slots_in_use"] == 0 and health["queued"] == 0


def counted_metrics() -> dict[str, float]:
    """The chat requests counted by status, and those ended early by reason."""
    return {sample.name + "{" + ",".join(f'{k}="{v}"' for k, v in sample.labels.items()) + "}":
            sample.value
            for family in (metrics.REQUESTS, metrics.REQUESTS_ABORTED)
            for metric in family.collect() for sample in metric.samples
            if sample.name.endswith("_total")}


VARYING = re.compile(rb'"(id|created|created_at|item_id)":("(chatcmpl-|resp_|msg_)[0-9a-f]+"|[0-9]+)')


def answer_seen(reply: Any, body: bytes) -> dict[str, Any]:
    """Status, the headers that matter, and the body byte for byte but for each completion's own
    id and time (of the same length either way, so Content-Length is compared too)."""
    return {"status": reply.status,
            "headers": {name: reply.getheader(name) for name in COMPARED_HEADERS},
            "body": VARYING.sub(rb'"\1":_', body).decode()}


RESPONSES_PATH, MESSAGES_PATH = "/v1/responses", "/v1/messages"
ANTHROPIC = {"anthropic-version": "2023-06-01", "x-api-key": "unused"}


def responses_body(**fields: Any) -> bytes:
    return raw_http.post(RESPONSES_PATH, json.dumps({"model": "tiny", "input": "hi", **fields}).encode())


def messages_body(headers: dict[str, str] | None = ANTHROPIC, **fields: Any) -> bytes:
    return raw_http.post(MESSAGES_PATH, json.dumps(
        {"model": "tiny", "max_tokens": 20, "messages": MESSAGES, **fields}).encode(), headers)


# -- the rows: each sends to one side and returns what it saw ------------------------------------

def sent_whole(request: bytes) -> Callable[[int], dict[str, Any]]:
    """The request in one write; the whole answer read; then whether the connection is kept."""
    def run(port: int) -> dict[str, Any]:
        with raw_http.connection(port, READ_TIMEOUT_S) as conn:
            conn.send(request)
            reply = conn.response()
            try:
                body, complete = reply.read(), True
            except http.client.IncompleteRead as cut:  # the body ended before its end
                body, complete = cut.partial, False
            return {**answer_seen(reply, body), "complete": complete, "kept": conn.kept()}
    return run


def pipelined(first: bytes, second: bytes) -> Callable[[int], dict[str, Any]]:
    def run(port: int) -> dict[str, Any]:
        with raw_http.connection(port, READ_TIMEOUT_S) as conn:
            conn.send(first + second)
            answers = []
            for _ in range(2):
                reply = conn.response()
                answers.append(answer_seen(reply, reply.read()))
            return {"answers": answers, "statuses": [answer["status"] for answer in answers],
                    "kept": conn.kept()}
    return run


def trickled_past_timeout(body: bytes) -> Callable[[int], dict[str, Any]]:
    """Half the body at once, one byte more halfway through the timeout, then nothing."""
    def run(port: int) -> dict[str, Any]:
        with raw_http.connection(port, READ_TIMEOUT_S) as conn:
            head = raw_http.post(PATH, body)[: -len(body)]
            sent_at = time.monotonic()
            conn.send(head + body[: len(body) // 2])
            time.sleep(BODY_TIMEOUT_S / 2)  # pacing: the trickle, inside the timeout
            conn.send(body[len(body) // 2: len(body) // 2 + 1])
            reply = conn.response()
            answered_after = time.monotonic() - sent_at
            seen = {**answer_seen(reply, reply.read()), "kept": conn.kept()}
        # The body timeout, not something sooner or later, answered (slack: 4 timeouts).
        seen["answered within its timeout's bound"] = (
            BODY_TIMEOUT_S <= answered_after < BODY_TIMEOUT_S * 5)
        return seen
    return run


def continued(body: bytes) -> Callable[[int], dict[str, Any]]:
    """`Expect: 100-continue`: the body is sent only once the server has asked for it."""
    def run(port: int) -> dict[str, Any]:
        with raw_http.connection(port, READ_TIMEOUT_S) as conn:
            head = raw_http.post(PATH, body, {"Expect": "100-continue"})[: -len(body)]
            conn.send(head)
            seen = {"asked for the body": conn.interim() == 100}
            conn.send(body)
            reply = conn.response()
            return {**seen, **answer_seen(reply, reply.read()), "kept": conn.kept()}
    return run


def refused_when_full(holder: bytes, waiter: bytes, refused: bytes) -> Callable[[int], dict[str, Any]]:
    """One request in the slot, one in the queue place: the third is refused."""
    def run(port: int) -> dict[str, Any]:
        with contextlib.ExitStack() as stack:
            for request in (holder, waiter):
                conn = stack.enter_context(raw_http.connection(port, READ_TIMEOUT_S))
                conn.send(request)
                assert conn.response().status == 200
            full = health_of(port)
            return {"full": (full["slots_in_use"], full["queued"]),
                    **sent_whole(refused)(port)}
    return run


def left_mid_upload(body: bytes) -> Callable[[int], dict[str, Any]]:
    def run(port: int) -> dict[str, Any]:
        before = counted_metrics()
        with raw_http.connection(port, READ_TIMEOUT_S) as conn:
            conn.send(raw_http.post(PATH, body)[: -len(body) // 2])
        # Counted when the server hears the departure: polled, as the counts are compared.
        wait_until(lambda: counted_metrics() != before, READ_TIMEOUT_S, interval_s=0.01,
                   describe="the departure counted")
        return {}
    return run


def left_during(request: bytes, events_before_leaving: int,
                queued_behind: bytes | None = None) -> Callable[[int], dict[str, Any]]:
    """Read the head and `events_before_leaving` data events, then leave. `queued_behind`: a
    request sent first to take the one slot (and left after ours), so that ours waits in the
    queue; then its queue place is what the departure must free."""
    def run(port: int) -> dict[str, Any]:
        with contextlib.ExitStack() as stack:
            if queued_behind is not None:
                holder = stack.enter_context(raw_http.connection(port, READ_TIMEOUT_S))
                holder.send(queued_behind)
                assert holder.response().status == 200
            conn = raw_http.Connection(port, READ_TIMEOUT_S)
            try:
                conn.send(request)
                reply = conn.response()
                seen: list[Any] = []
                while sum(isinstance(event, dict) for event in seen) < events_before_leaving:
                    seen += raw_http.events(next_event(reply))
                health = health_of(port)
            finally:
                conn.close()
            left_at = time.monotonic()
            freed = (lambda: health_of(port)["queued"] == 0) if queued_behind else (lambda: is_idle(port))
            try:
                wait_until(freed, FREED_WITHIN_S, interval_s=0.01, describe="the slot freed")
            except TimeoutError:
                pass
            freed_after = time.monotonic() - left_at
        # Where it was when it left: in the queue, or in the slot.
        return {"status": reply.status, "seen before leaving": seen,
                "where": {"queued": health["queued"], "slots_in_use": health["slots_in_use"]},
                f"freed within {FREED_WITHIN_S:g} s": freed_after <= FREED_WITHIN_S}
    return run


def sending_on(flood: bool) -> Callable[[int], dict[str, Any]]:
    """A chunked body over the limit, the client still sending while it reads the answer: a
    paced chunk every PACE_S for up to 3 x LINGER_S, or (`flood`) as fast as it can, up to
    2 x LINGER_BYTES. The answer must arrive whole with its FIN, never a reset, and the server
    must end the connection at its time bound (paced) or its byte bound (flood)."""
    def run(port: int) -> dict[str, Any]:
        piece = b"x" * (64 * 1024 if flood else 1024)
        chunk = b"%x\r\n%b\r\n" % (len(piece), piece)
        answered = threading.Event()
        sent = {"in all": 0, "after the answer": 0}
        ended_at: list[float] = []
        with raw_http.connection(port, READ_TIMEOUT_S) as conn:
            conn.send(chunked_post(OVER, 16 * 1024)[: -len(b"0\r\n\r\n")])  # no last chunk

            def send_on() -> None:
                deadline = time.monotonic() + 3 * LINGER_S
                try:
                    while time.monotonic() < deadline and sent["in all"] < 2 * LINGER_BYTES:
                        conn.send(chunk)
                        sent["in all"] += len(piece)
                        if answered.is_set():
                            sent["after the answer"] += len(piece)
                        if not flood:
                            time.sleep(PACE_S)
                except OSError:  # the server's close, as a reset or a broken pipe
                    ended_at.append(time.monotonic())

            sender = threading.Thread(target=send_on, daemon=True)
            sender.start()
            try:
                reply = conn.response()
                seen = answer_seen(reply, reply.read())
                answered_at = time.monotonic()
                answered.set()
                try:
                    seen["after the answer"] = "FIN" if conn.rest() == b"" else "more bytes"
                except ConnectionResetError:
                    seen["after the answer"] = "reset"
            finally:
                sender.join()
        ended_after = ended_at[0] - answered_at if ended_at else None
        if not flood:
            # Flooding, whether the last bytes leave before or after this thread has read the
            # answer is a race between the client's two threads, not the server's doing (it
            # differed between the two sides in a loaded CI run): only the paced client tells.
            seen["the client sent on after the answer"] = sent["after the answer"] > 0
        if ended_after is None:
            seen["ended"] = f"not within {3 * LINGER_S:g} s"
        elif ended_after < LINGER_S / 2:
            seen["ended"] = "before half the time bound"
        else:
            seen["ended"] = "at the time bound" if ended_after <= 2 * LINGER_S else "late"
        seen["past the byte bound"] = sent["in all"] > LINGER_BYTES
        return seen
    return run


def next_event(reply: Any) -> bytes:
    """One SSE event (its lines up to the blank one) from a chunked streaming reply."""
    lines = []
    while True:
        line = reply.readline()
        if not line:
            raise AssertionError("the stream ended before the event")
        if line in (b"\n", b"\r\n"):
            return b"".join(lines)
        lines.append(line)



LARGE = chat_body(stream=True, pad="x" * LARGE_PAD, lab={"script": "one two three"})
OVER = chat_body(stream=True, pad="x" * OVER_PAD)
assert len(LARGE) > 64 * 1024 and len(LARGE) < MAX_BODY_BYTES < len(OVER)


def pieces(body: bytes, size: int) -> list[bytes]:
    return [body[i:i + size] for i in range(0, len(body), size)]


def chunked_post(body: bytes, piece: int) -> bytes:
    head = raw_http.request_head("POST", PATH, {"Content-Type": "application/json",
                                                "Transfer-Encoding": "chunked"})
    return head + raw_http.chunked(pieces(body, piece))
