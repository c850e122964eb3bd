"""`python -m labs serve`: the browser view on http://HOST:PORT (default 127.0.0.1:8765)."""
from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path

from server import signals

DEFAULT_PORT = 8765


def add_arguments(parser: argparse.ArgumentParser, reports: Path) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument("--runtime", choices=("local", "docker"), default=None,
                        help="how the server and proxies run (default: $LAB_RUNTIME or local)")
    parser.add_argument("--out", type=Path, default=reports, help="reports folder (default: reports/)")
    parser.add_argument("--proxy-version", default=None, metavar="CHOICE",
                        help="which release of each proxy the panels run (as `run --proxy-version`; "
                        "default: $LAB_PROXY_VERSION or current)")


def page_origins(host: str, port: int) -> tuple[str, ...]:
    """The origins a page of this view can have: what the browser's Origin header will say."""
    shown = f"[{host}]" if ":" in host else host
    origins = [f"http://{shown}:{port}"]
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if loopback:
        origins += [f"http://localhost:{port}", f"http://127.0.0.1:{port}"]
    return tuple(dict.fromkeys(origins))


def serve(host: str, port: int, runtime: str | None, reports: Path) -> int:
    if not 0 < port < 65536:
        print(f"error: --port {port} is not a TCP port", file=sys.stderr)
        return 2
    import uvicorn

    from labs.view.app import create_app
    from labs.view.session import ViewSession

    session = ViewSession(page_origins(host, port), runtime, reports,
                          progress=lambda message: print(f"view: {message}", file=sys.stderr, flush=True))
    app = create_app(session)
    print(f"streamlab view: open http://{host}:{port}/ in a browser (Ctrl-C stops it and every "
          "server and proxy it started)", file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    # A stop signal (server.signals) asks uvicorn for its own graceful shutdown and is raised once
    # it is done, then this `finally` stops what the view started. Raised inside uvicorn's loop
    # instead, SIGHUP (which uvicorn does not handle) printed a traceback of its lifespan task.
    try:
        with signals.held(ask=lambda signum: setattr(server, "should_exit", True)):
            server.run()
    finally:
        session.close()
    return 0
