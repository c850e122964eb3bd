"""`gather()` (server/http/connections.py): a reply's writes made in one instant leave in one socket
write, on uvicorn's own request cycle; and a stream's departure callback fires on connection loss.

Each write on loopback is a send() and a wake-up of the reader, so the headers with the role frame,
and the finish frame with [DONE] and the body's end, are one write each (docs/performance.md).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from server.http.cycle_extensions import Gather, departure_of


class RecordingTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...


def _cycle(transport: RecordingTransport, keep_alive: bool = True) -> RequestResponseCycle:
    scope: Any = {"type": "http", "method": "POST", "path": "/", "headers": []}
    logger = logging.getLogger("test")
    return RequestResponseCycle(scope=scope, transport=transport,  # type: ignore[arg-type]
                                flow=FlowControl(transport),  # type: ignore[arg-type]
                                logger=logger, access_logger=logger, access_log=False,
                                default_headers=[], message_event=asyncio.Event(),
                                expect_100_continue=False, keep_alive=keep_alive,
                                on_response=lambda: None)


def test_writes_inside_gather_leave_in_one_write_and_after_it_as_made() -> None:
    async def main() -> None:
        transport = RecordingTransport()
        cycle = _cycle(transport)
        gather = Gather(cycle)
        with gather():
            await cycle.send({"type": "http.response.start", "status": 200,
                              "headers": [(b"content-type", b"text/event-stream")]})
            await cycle.send({"type": "http.response.body", "body": b"data: role\n\n", "more_body": True})
            assert transport.writes == []  # held until the block ends
        assert len(transport.writes) == 1
        assert transport.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
        assert transport.writes[0].endswith(b"c\r\ndata: role\n\n\r\n")
        await cycle.send({"type": "http.response.body", "body": b"data: t\n\n", "more_body": True})
        assert len(transport.writes) == 2  # outside the block: as made
        with gather():
            with gather():  # nested: the outer block decides
                await cycle.send({"type": "http.response.body", "body": b"data: [DONE]\n\n",
                                  "more_body": True})
            assert len(transport.writes) == 2
            await cycle.send({"type": "http.response.body", "body": b"", "more_body": False})
        assert len(transport.writes) == 3 and transport.writes[2].endswith(b"\r\n0\r\n\r\n")
        assert cycle.transport is transport and not transport.closed
    asyncio.run(main())


def test_a_close_inside_gather_comes_after_the_gathered_bytes() -> None:
    async def main() -> None:
        transport = RecordingTransport()
        cycle = _cycle(transport, keep_alive=False)
        with Gather(cycle)():
            await cycle.send({"type": "http.response.start", "status": 200, "headers": []})
            await cycle.send({"type": "http.response.body", "body": b"x", "more_body": False})
            assert not transport.closed
        assert len(transport.writes) == 1 and transport.closed
    asyncio.run(main())


def test_the_departure_callback_fires_at_once_when_the_client_already_left() -> None:
    async def main() -> None:
        cycle = _cycle(RecordingTransport())
        seen: list[str] = []
        departure_of(cycle)(lambda: seen.append("registered"))
        assert seen == [] and cycle.streamlab_departure is not None  # type: ignore[attr-defined]
        cycle.disconnected = True
        departure_of(cycle)(lambda: seen.append("late"))
        assert seen == ["late"]
    asyncio.run(main())
