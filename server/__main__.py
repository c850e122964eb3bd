"""`python -m server`: the OpenAI-compatible streaming model server.

    python -m server                                  # 127.0.0.1:8000, .models/tiny, transformers
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

from server.config import (
    DEFAULT_MODEL,
    DETOKENIZER_KINDS,
    DISCONNECT_MODES,
    ERROR_MODES,
    STREAMING_HEADER_NAMES,
    ServerConfig,
    StreamSettings,
)

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def parse_args(argv: Sequence[str] | None = None) -> ServerConfig:
    parser = argparse.ArgumentParser(prog="python -m server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    add("--port", type=int, default=8000)
    add("--model", default=DEFAULT_MODEL, help="a local model folder or a cached hub id")
    add("--served-model-name", default=None, help="the name clients use (default: folder name)")
    add("--device", choices=("auto", "cpu", "cuda"), default="auto")
    add("--engine", choices=("transformers", "synthetic"), default="transformers")
    add("--slots", type=int, default=8, help="sequences decoded together (KV-cache slots)")
    add("--max-queue", type=int, default=64, help="requests waiting for a slot before 429")
    add("--max-body-bytes", type=int, default=8 * 1024 * 1024, help="larger bodies get 413")
    add("--keep-alive-s", type=float, default=75.0,
        help="close idle keep-alive connections after this long (above proxies' 60 s)")
    add("--http", choices=("httptools", "h11"), default="httptools",
        help="uvicorn's HTTP parser: httptools (fast; chunked even to HTTP/1.0 clients) or h11")
    add("--log-level", choices=LOG_LEVELS, default="info")
    add("--access-log", action="store_true", help="log every request (uvicorn's access log)")

    modes = parser.add_argument_group("failure modes (server-wide defaults; most also per request "
                                      "in the body's `lab` object)")
    modes.add_argument("--detokenizer", choices=DETOKENIZER_KINDS, default="incremental",
                       help="naive: decode each token alone (U+FFFD in split characters)")
    modes.add_argument("--no-stop-holdback", dest="stop_holdback", action="store_false",
                       help="check stops after sending: a stop's beginning leaks")
    modes.add_argument("--disconnect", choices=DISCONNECT_MODES, default="abort",
                       help="ignore: keep generating after the client has gone")
    modes.add_argument("--heartbeat-s", type=float, default=10.0,
                       help="`: ping` after this much silence; 0 = none (default 10)")
    modes.add_argument("--error-mode", choices=ERROR_MODES, default="inband",
                       help="how a failure after the first byte ends the stream")
    modes.add_argument("--coalesce-ms", type=float, default=0.0,
                       help="write frames made within this window together; 0 = off")
    modes.add_argument("--omit-header", action="append", default=[], type=str.lower,
                       choices=STREAMING_HEADER_NAMES, metavar="NAME",
                       help=f"leave this streaming header out (repeatable): "
                            f"{', '.join(STREAMING_HEADER_NAMES)}")
    modes.add_argument("--stall-timeout-s", type=float, default=0.0,
                       help="no token for this long: in-band timeout error; 0 = never (default)")
    modes.add_argument("--gzip-middleware", action="store_true",
                       help="gzip every response, SSE included (the stream arrives in lumps)")
    modes.add_argument("--gzip-exclude-sse", action="store_true",
                       help="with --gzip-middleware: exclude text/event-stream (the fix)")
    modes.add_argument("--gzip-sync-flush", action="store_true",
                       help="with --gzip-middleware: Starlette's GZipMiddleware, which flushes "
                            "every chunk (streams; shows that not every gzip buffers)")
    modes.add_argument("--blocking-loop", action="store_true",
                       help="run decode steps on the event loop (every stream stalls)")
    modes.add_argument("--keep-fd-limit", action="store_true",
                       help="do not raise the soft open-file limit at start-up")
    ns = parser.parse_args(argv)
    if ns.slots < 1 or ns.max_queue < 0 or ns.max_body_bytes < 1 or ns.keep_alive_s <= 0:
        parser.error("--slots and --max-body-bytes must be >= 1, --max-queue >= 0, "
                     "--keep-alive-s > 0")
    if ns.heartbeat_s < 0 or ns.coalesce_ms < 0 or ns.stall_timeout_s < 0:
        parser.error("--heartbeat-s, --coalesce-ms and --stall-timeout-s must be >= 0")
    stream = StreamSettings(
        detokenizer=ns.detokenizer, stop_holdback=ns.stop_holdback, disconnect=ns.disconnect,
        heartbeat_s=ns.heartbeat_s or None, error_mode=ns.error_mode, coalesce_ms=ns.coalesce_ms,
        omit_headers=frozenset(ns.omit_header), stall_timeout_s=ns.stall_timeout_s or None)
    return ServerConfig(
        host=ns.host, port=ns.port, model=ns.model, served_model_name=ns.served_model_name,
        device=ns.device, engine=ns.engine, slots=ns.slots, max_queue=ns.max_queue,
        max_body_bytes=ns.max_body_bytes, keep_alive_s=ns.keep_alive_s, http=ns.http,
        log_level=ns.log_level, access_log=ns.access_log,
        gzip_middleware=ns.gzip_middleware, gzip_exclude_sse=ns.gzip_exclude_sse,
        gzip_sync_flush=ns.gzip_sync_flush, blocking_loop=ns.blocking_loop,
        keep_fd_limit=ns.keep_fd_limit, stream=stream)


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    import uvicorn

    from server.app import create_app, wrap_middleware
    from server.engine import EngineConfig, create_engine, eos_token_ids, load_tokenizer
    from server.connections import protocol_class
    from server.limits import raise_fd_limit

    raise_fd_limit(keep=config.keep_fd_limit)
    try:
        tokenizer = load_tokenizer(config.model)
    except (OSError, ValueError) as exc:
        logging.getLogger("server").error(
            "cannot load the tokenizer of %r: %s (run `make setup` to build the default model)",
            config.model, exc)
        return 2
    engine = create_engine(EngineConfig(
        kind=config.engine, model=config.model, device=config.device, slots=config.slots,
        max_queue=config.max_queue, blocking_loop=config.blocking_loop), tokenizer)
    app = create_app(config, engine, tokenizer, eos_token_ids(tokenizer, config.model))
    # Everything loaded so far (torch, the model, the tokenizer, the app) lives as long as the
    # process: freeze it out of the cyclic collector's reach. At 1,000 streams each full collection
    # otherwise scanned it all and paused the event loop 230-270 ms (gap p99 311 ms; 98 ms frozen).
    gc.collect()
    gc.freeze()
    uvicorn.run(wrap_middleware(app, config), host=config.host, port=config.port,
                loop="uvloop", http=protocol_class(config.http), log_level=config.log_level,
                access_log=config.access_log, timeout_keep_alive=config.keep_alive_s,
                # Streams are long; a stuck shutdown should still end.
                timeout_graceful_shutdown=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
