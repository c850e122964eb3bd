"""`python -m server`: the OpenAI-compatible streaming model server.

    python -m server                                  # 127.0.0.1:8000, the tiny model, transformers
    python -m server --engine synthetic --port 8001   # same tokens without a model, for load tests
    python -m server --no-stop-holdback --heartbeat-s 0   # failure modes, see --help

Every failure mode is off by default; the per-stream ones can also be set per request in the
body's `lab` object (docs/contract.md).
"""
from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from typing import Sequence

from server import knobs
from server.config import DEFAULT_MODEL, ServerConfig, StreamSettings

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


GC_GEN0_THRESHOLD = 150_000  # allocations between passes of the cyclic collector (default 700)


def parse_args(argv: Sequence[str] | None = None) -> ServerConfig:
    parser = argparse.ArgumentParser(prog="python -m server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    add("--port", type=int, default=8000)
    add("--model", default=DEFAULT_MODEL,
        help="a local model folder or a cached hub id (default: the tiny model, built on first use)")
    add("--served-model-name", default=None, help="the name clients use (default: folder name)")
    add("--device", choices=("auto", "cpu", "cuda"), default="auto")
    add("--engine", choices=("transformers", "synthetic"), default="transformers")
    add("--context-length", type=int, default=None, metavar="TOKENS",
        help="with --engine synthetic: the context a prompt must fit (default: the model's; a "
             "coding agent's first prompt is ~11,100 tokens, the tiny model's context 2,048)")
    add("--slots", type=int, default=8, help="sequences decoded together (KV-cache slots)")
    add("--max-queue", type=int, default=64, help="requests waiting for a slot before 429")
    add("--max-body-bytes", type=int, default=8 * 1024 * 1024, help="larger bodies get 413")
    add("--keep-alive-s", type=float, default=75.0,
        help="close idle keep-alive connections after this long (above proxies' 60 s)")
    add("--http", choices=("httptools", "h11"), default="httptools",
        help="uvicorn's HTTP parser: httptools (fast; chunked even to HTTP/1.0 clients) or h11")
    add("--log-level", choices=LOG_LEVELS, default="info")
    add("--workers", type=int, default=1,
        help="server processes on one port (SO_REUSEPORT), each with its own engine, --slots "
             "and queue; /metrics aggregated across them (default 1)")
    add("--reuse-port", action="store_true",
        help="bind with SO_REUSEPORT, beside other servers on the same port (what --workers does)")
    limits = parser.add_argument_group("limits on slow or huge clients")
    limits.add_argument("--max-header-bytes", type=int, default=32 * 1024,
                        help="a larger request header block gets 431 (default 32 KiB)")
    limits.add_argument("--max-headers", type=int, default=100,
                        help="more request header fields get 431 (default 100)")
    limits.add_argument("--header-timeout-s", type=float, default=15.0,
                        help="headers not complete this long after the connection opened or the "
                             "request began: 408 and close (default 15)")
    limits.add_argument("--body-timeout-s", type=float, default=60.0,
                        help="a request body not complete this long after its headers: 408 "
                             "(default 60)")
    limits.add_argument("--send-timeout-s", type=float, default=30.0,
                        help="a stream blocked this long on a client that does not read is "
                             "aborted and its slot freed (default 30)")
    access = parser.add_argument_group("browsers and the lab extension")
    access.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                        help="allow a browser page from this origin (repeatable; default none)")
    access.add_argument("--lab-token", default=os.environ.get("STREAMLAB_LAB_TOKEN") or None,
                        metavar="TOKEN",
                        help="`lab` fields and /lab/ endpoints need `X-Lab-Token: TOKEN` "
                             "(default: $STREAMLAB_LAB_TOKEN; none needed on a loopback bind)")
    access.add_argument("--no-lab", dest="lab_enabled", action="store_false",
                        help="turn the lab extension off: `lab` fields get 400, /lab/ 404")
    access.add_argument("--chat-any-path", action="store_true",
                        help="also serve the chat route at any POST path no other route takes "
                             "(a stand-in for whatever a proxy's streaming route leads to: labs verify)")
    access.add_argument("--responses-window-s", type=float, default=600.0, metavar="S",
                        help="how long GET /v1/responses/{id} finds a response and resumes its "
                             "stream (default 600)")
    add("--access-log", action="store_true", help="log every request (uvicorn's access log)")

    modes = parser.add_argument_group("failure modes (server-wide defaults; most also per request "
                                      "in the body's `lab` object)")
    knobs.add_flags(modes)
    modes.add_argument("--gzip-middleware", action="store_true",
                       help="gzip every response, SSE included (the stream arrives in lumps)")
    modes.add_argument("--gzip-exclude-sse", action="store_true",
                       help="with --gzip-middleware: exclude text/event-stream (the fix)")
    modes.add_argument("--gzip-sync-flush", action="store_true",
                       help="with --gzip-middleware: Starlette's GZipMiddleware, which flushes "
                            "every chunk (streams; shows that not every gzip buffers)")
    modes.add_argument("--blocking-loop", action="store_true",
                       help="run decode steps on the event loop (every stream stalls)")
    modes.add_argument("--serial-prefill", action="store_true",
                       help="prefill requests that arrive together one forward pass each "
                            "(the benchmark's before; default: together in one pass)")
    modes.add_argument("--keep-fd-limit", action="store_true",
                       help="do not raise the soft open-file limit at start-up")
    ns = parser.parse_args(argv)
    if ns.slots < 1 or ns.max_queue < 0 or ns.max_body_bytes < 1 or ns.keep_alive_s <= 0:
        parser.error("--slots and --max-body-bytes must be >= 1, --max-queue >= 0, "
                     "--keep-alive-s > 0")
    if not 1 <= ns.workers <= 64:
        parser.error("--workers must be between 1 and 64")
    if ns.max_header_bytes < 1024 or ns.max_headers < 1:
        parser.error("--max-header-bytes must be >= 1024 and --max-headers >= 1")
    for name in ("header_timeout_s", "body_timeout_s", "send_timeout_s", "keep_alive_s",
                 "responses_window_s"):
        if not 0 < getattr(ns, name) <= knobs.MAX_WAIT_S:
            parser.error(f"--{name.replace('_', '-')} must be > 0 and at most {knobs.MAX_WAIT_S:g}")
    if ns.context_length is not None and (ns.engine != "synthetic" or ns.context_length < 1):
        parser.error("--context-length takes a positive number, with --engine synthetic only "
                     "(a real model's context is its own)")
    if ns.lab_token is not None and not ns.lab_token.strip():
        parser.error("--lab-token must not be empty")
    stream = StreamSettings(**knobs.settings_from_flags(ns))
    return ServerConfig(
        host=ns.host, port=ns.port, model=ns.model, served_model_name=ns.served_model_name,
        device=ns.device, engine=ns.engine, slots=ns.slots, max_queue=ns.max_queue,
        max_body_bytes=ns.max_body_bytes, keep_alive_s=ns.keep_alive_s, http=ns.http,
        log_level=ns.log_level, access_log=ns.access_log,
        max_header_bytes=ns.max_header_bytes, max_headers=ns.max_headers,
        header_timeout_s=ns.header_timeout_s, body_timeout_s=ns.body_timeout_s,
        send_timeout_s=ns.send_timeout_s, cors_origins=tuple(ns.cors_origin),
        lab_enabled=ns.lab_enabled, lab_token=ns.lab_token, chat_any_path=ns.chat_any_path,
        gzip_middleware=ns.gzip_middleware, gzip_exclude_sse=ns.gzip_exclude_sse,
        gzip_sync_flush=ns.gzip_sync_flush, blocking_loop=ns.blocking_loop,
        serial_prefill=ns.serial_prefill,
        keep_fd_limit=ns.keep_fd_limit, stream=stream, workers=ns.workers,
        reuse_port=ns.reuse_port, responses_window_s=ns.responses_window_s,
        context_length=ns.context_length)


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    from server.tools.model_builder import prepare

    # Before any worker starts: the transformers engine's extra, and the default model built.
    problem = prepare(config.engine, config.model)
    if problem is not None:
        print(f"server: {problem}, or run --engine synthetic (no model needed)", file=sys.stderr)
        return 2
    if config.workers > 1:
        from server.workers import supervise

        return supervise(sys.argv[1:] if argv is None else list(argv), config.host, config.port,
                         config.workers)
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    import uvicorn

    from server import metrics
    from server.http.app import create_app, wrap_middleware
    from server.engine import EngineConfig, create_engine, eos_token_ids, load_tokenizer
    from server.http.connections import HttpLimits, protocol_class
    from server.http.fast_lane import CompletionLane
    from server.limits import raise_fd_limit

    raise_fd_limit(keep=config.keep_fd_limit)
    from server.extras import MissingExtra

    try:
        tokenizer = load_tokenizer(config.model, config.engine)
    except MissingExtra as exc:
        print(f"server: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        logging.getLogger("server").error(
            "cannot load the tokenizer of %r: %s (`python -m server.tools.model_builder --out %s` "
            "builds the default model)", config.model, exc, DEFAULT_MODEL)
        return 2
    engine = create_engine(EngineConfig(
        kind=config.engine, model=config.model, device=config.device, slots=config.slots,
        max_queue=config.max_queue, blocking_loop=config.blocking_loop,
        serial_prefill=config.serial_prefill), tokenizer)
    app = create_app(config, engine, tokenizer, eos_token_ids(tokenizer, config.model))
    # Everything loaded so far (torch, the model, the tokenizer, the app) lives as long as the
    # process: freeze it out of the cyclic collector's reach. At 1,000 streams each full collection
    # otherwise scanned it all and paused the event loop 230-270 ms (gap p99 311 ms; 98 ms frozen).
    gc.collect()
    gc.freeze()
    # A completion leaves no reference cycle behind (server/http/cycle_extensions.py `release`,
    # tests/server/test_no_cycles.py): what a stream holds goes by reference counting, so the
    # collector finds no garbage on the hot path and only rescans the live streams' objects.
    # Its pass is due when tracked allocations outnumber deallocations by the threshold (and
    # stops the loop for as long as it scans the live young objects). A burst of 1,000 arrivals,
    # measured with streamlab_gc_pause_seconds: at the default 700, 94 us of CPU per request in
    # ~150 passes (41 us once no cycles were left); at 20,000, 3-4 passes of ~6 ms per burst; at
    # 100,000, a pass of 50-75 ms in 2 bursts of 7 (a live stream holds ~100 tracked objects); at
    # 150,000, above the lab's largest concurrency (1,100 slots), none. Beyond ~1,500 live
    # streams passes come back, each as long as the objects it scans; cyclic garbage, which
    # nothing on the hot path makes, waits for that many allocations.
    gc.set_threshold(GC_GEN0_THRESHOLD, 10, 10)
    metrics.time_collector_passes()
    limits = HttpLimits(max_header_bytes=config.max_header_bytes,
                        header_timeout_s=config.header_timeout_s)
    asgi = wrap_middleware(app, config)
    lane = CompletionLane.for_config(app.state.service, config)
    server = uvicorn.Server(uvicorn.Config(
        asgi, host=config.host, port=config.port, loop="uvloop",
        http=protocol_class(config.http, limits, lane), log_level=config.log_level,
        access_log=config.access_log, timeout_keep_alive=config.keep_alive_s,
        h11_max_incomplete_event_size=config.max_header_bytes,
        # Streams are long; a stuck shutdown should still end.
        timeout_graceful_shutdown=5))
    app.state.on_engine_death = lambda: setattr(server, "should_exit", True)
    if config.reuse_port:
        from server.workers import reuse_port_socket

        server.run(sockets=[reuse_port_socket(config.host, config.port)])
    else:
        server.run()
    if app.state.engine_died:
        return 3  # the engine died: a supervisor should restart the server
    return 0


if __name__ == "__main__":
    sys.exit(main())
