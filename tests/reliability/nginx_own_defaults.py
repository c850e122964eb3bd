"""By hand: each nginx release with its OWN defaults (a config of nothing but `proxy_pass` and the
snippet named), in front of the lab's server, for the scenarios whose lesson changed in nginx
1.29.7 (HTTP/1.1 and a keepalive pool towards the upstream by default). The lab's settings write
every directive, so a scenario runs 1.22's defaults on 1.30 too; this shows what the defaults do.

    .venv/bin/python -m tests.reliability.nginx_own_defaults

Rows: one stream (21 events at 10/s, no X-Accel-Buffering, the server `--http h11`): TTFT and
reads; ten requests one after another: the upstream connections the server accepted; a client
that leaves after 3 of ~43 events (20/s): the tokens the server generated; two nginx in a chain
(the server's default framing, X-Accel-Buffering: no sent): TTFT and reads at the outer one.
Not part of the test suite (docs/field-notes.md#every-scenario-on-both-releases quotes it).
"""
from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path
from typing import Any, Iterator

from labs.client.http1 import measure_stream
from labs.lab.server import DEFAULT_SCRIPT
from proxies.binaries import binary
from proxies.kinds import KINDS
from server.launcher import ServerHandle, running_server
from server.processes import ManagedProcess, free_port, managed, port_accepts, wait_until

PATH = "/v1/chat/completions"
WEBSOCKET_MAP = "map $http_upgrade $connection_upgrade {{ default upgrade; '' {empty}; }}"
WEBSOCKET = "proxy_http_version 1.1; proxy_set_header Upgrade $http_upgrade; " \
            "proxy_set_header Connection $connection_upgrade;"
CONF = """worker_processes 1; error_log {d}/error.log; pid {d}/nginx.pid; daemon off;
events {{ worker_connections 512; }}
http {{
  access_log off; client_body_temp_path {d}/b; proxy_temp_path {d}/p; fastcgi_temp_path {d}/f;
  uwsgi_temp_path {d}/u; scgi_temp_path {d}/s;
  {map}
  upstream backend {{ server 127.0.0.1:{upstream}; }}
  server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass http://backend; {snippet} }} }}
}}
"""


@contextlib.contextmanager
def nginx(series: str, upstream: int, snippet: str = "", empty: str = "close") -> Iterator[int]:
    """One nginx of that release on a free port, its own defaults plus `snippet`; yields the port."""
    with tempfile.TemporaryDirectory(prefix="nginx-defaults-") as folder:
        port = free_port()
        conf = Path(folder) / "nginx.conf"
        conf.write_text(CONF.format(d=folder, upstream=upstream, port=port, snippet=snippet,
                                    map=WEBSOCKET_MAP.format(empty=empty) if "$connection_upgrade" in snippet else ""))
        process = ManagedProcess("nginx", [binary("nginx", series), "-p", folder, "-c", str(conf)],
                                 Path(folder) / "nginx.log")
        with managed(process, lambda: port_accepts(port)):
            yield port


def body(tokens_per_s: float = 10.0, script: str = DEFAULT_SCRIPT, **lab: Any) -> dict[str, Any]:
    return {"model": "tiny", "stream": True, "messages": [{"role": "user", "content": "hi"}],
            "lab": {"script": script, "tokens_per_s": tokens_per_s, "omit_headers": ["X-Accel-Buffering"], **lab}}


async def one_stream(port: int, request: dict[str, Any]) -> str:
    result = await measure_stream(f"http://127.0.0.1:{port}{PATH}", request)
    reads = len({event.read for event in result.events})
    return f"TTFT {result.ttft_s * 1000:,.0f} ms, {len(result.events)} events in {reads} reads ({result.outcome})"


async def pooled(port: int, server: ServerHandle) -> str:
    before = server.metrics().get("streamlab_http_connections_total", 0.0)
    for _ in range(10):
        await measure_stream(f"http://127.0.0.1:{port}{PATH}", body(tokens_per_s=200.0))
    return f"{server.metrics()['streamlab_http_connections_total'] - before:.0f} upstream connections for 10 requests"


async def departed(port: int, server: ServerHandle) -> str:
    before = server.metrics().get("streamlab_tokens_generated_total", 0.0)
    await measure_stream(f"http://127.0.0.1:{port}{PATH}", body(20.0, f"{DEFAULT_SCRIPT} {DEFAULT_SCRIPT}"),
                         disconnect_after_events=3)
    wait_until(lambda: not server.metrics().get("streamlab_active_streams", 0.0), 10.0,
               describe="the server to end the stream")
    return f"{server.metrics()['streamlab_tokens_generated_total'] - before:.0f} tokens generated for 3 read"


def main() -> None:
    rows: list[tuple[str, str, str]] = []
    for release in KINDS["nginx"].releases:
        series = release.series
        with running_server(["--engine", "transformers", "--http", "h11"]) as server:
            for label, snippet in (("own defaults", ""), ("proxy_http_version 1.0", "proxy_http_version 1.0;")):
                with nginx(series, server.port, snippet) as port:
                    rows.append((series, f"stream, {label}", asyncio.run(one_stream(port, body()))))
            for label, snippet, empty in (("own defaults", "", "close"),
                                          ("WebSocket map '' close", WEBSOCKET, "close"),
                                          ("WebSocket map '' ''", WEBSOCKET, "''")):
                with nginx(series, server.port, snippet, empty) as port:
                    rows.append((series, f"pool, {label}", asyncio.run(pooled(port, server))))
            for label, snippet in (("own defaults", ""),
                                   ("proxy_ignore_client_abort on", "proxy_ignore_client_abort on;"),
                                   ("ignore_client_abort + 1.0", "proxy_ignore_client_abort on; proxy_http_version 1.0;")):
                with nginx(series, server.port, snippet) as port:
                    rows.append((series, f"departure, {label}", asyncio.run(departed(port, server))))
        with running_server(["--engine", "transformers"]) as server:
            for label, snippet in (("own defaults", ""), ("outer proxy_http_version 1.0", "proxy_http_version 1.0;")):
                with nginx(series, server.port) as inner, nginx(series, inner, snippet) as outer:
                    rows.append((series, f"chain, {label}", asyncio.run(one_stream(outer, body(omit_headers=[])))))
    for series, row, outcome in rows:
        print(f"nginx {series:5} | {row:40} | {outcome}")


if __name__ == "__main__":
    main()
