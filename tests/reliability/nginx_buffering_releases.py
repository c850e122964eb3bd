"""By hand: what holds an SSE stream in nginx with `proxy_buffering on`, on each nginx release the
lab runs (issue 41: nginx 1.29.7 made HTTP/1.1 with keep-alive the upstream default).

    .venv/bin/python -m tests.reliability.nginx_buffering_releases [--runs 3] [--series 1.30 ...]
        [--only TLS]

Each case is nginx with nothing but `proxy_pass` to an upstream block and what the case adds (no
template: the template always writes proxy_http_version, and case "own defaults" must not), in
front of the lab's server (`--http h11`: close-delimited to an HTTP/1.0 request, chunked to 1.1;
the default httptools answers chunked to both), the request without X-Accel-Buffering, the lab's
own workload (nginx-buffering's script at 10 tokens/s), or in front of the fake upstream's
/http10 (a close-delimited reply to any request, 32 events at 10/s). The slow reader has a 1 KB
receive buffer and reads nothing for 1.5 s after the headers, then reads as fast as it can. The
TLS rows listen with the lab's self-signed certificate (the client does not verify it).
Prints TTFT and events/reads per run. Not part of the test suite.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import contextlib

from labs import catalogue
from labs.client import measure_stream
from labs.fakes.upstream import fake_upstream
from labs.scenario.runner import Lab, request_body
from proxies.binaries import binary, check_binary
from proxies.kinds import KINDS
from proxies.tls import self_signed
from server.processes import free_port, wait_until

CONFIG = """daemon off; pid nginx.pid; error_log error.log warn; worker_processes 1;
events {{ worker_connections 512; }}
http {{
  access_log off; client_body_temp_path cbt; proxy_temp_path pt; fastcgi_temp_path ft;
  uwsgi_temp_path ut; scgi_temp_path st;
  upstream up {{ server 127.0.0.1:{upstream}; }}
  server {{ listen 127.0.0.1:{port}{tls}; location / {{ proxy_pass http://up; {extra} }} }}
}}
"""
STREAMING = 'proxy_buffering off; proxy_http_version 1.1; proxy_set_header Connection "";'
# (label, upstream: "h11" | "httptools" | "http10", what the location adds, TLS to the client)
CASES = (
    ("own defaults", "h11", "", False),
    ("proxy_http_version 1.0 pinned", "h11", "proxy_http_version 1.0;", False),
    ("1.0 pinned, httptools server", "httptools", "proxy_http_version 1.0;", False),
    ("the fix", "h11", STREAMING, False),
    ("close-delimited upstream", "http10", "", False),
    ("close-delimited upstream, buffering off", "http10", "proxy_buffering off;", False),
    # docs/field-notes.md: nginx 1.22's buffered path over TLS gathered a chunked stream whole.
    ("own defaults, TLS to the client", "h11", "", True),
    ("HTTP/1.1 upstream, TLS to the client", "h11", "proxy_http_version 1.1;", True),
    ("HTTP/1.1 upstream, TLS, buffering off", "h11", "proxy_http_version 1.1; proxy_buffering off;", True),
)
SLOW_CASES = (("slow reader, own defaults", ""), ("slow reader, buffering off", "proxy_buffering off;"))
STALL_S = 1.5


@contextlib.contextmanager
def nginx(series: str, upstream: int, extra: str, tls: bool = False) -> Iterator[int]:
    """nginx of that release on a free port (TLS: the lab's self-signed pair), stopped by its
    PID; yields the port."""
    with tempfile.TemporaryDirectory(prefix="nginx-buffering-") as prefix:
        port = free_port()
        listen = " ssl; ssl_certificate {}; ssl_certificate_key {}".format(*self_signed()) if tls else ""
        Path(prefix, "nginx.conf").write_text(CONFIG.format(upstream=upstream, port=port, extra=extra, tls=listen))
        process = subprocess.Popen([binary("nginx", series), "-p", f"{prefix}/", "-c", "nginx.conf", "-e", "stderr"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: _listening(port), 10, interval_s=0.01, describe=f"nginx {series}")
            yield port
        finally:
            process.send_signal(signal.SIGQUIT)  # nginx's graceful stop
            process.wait(10)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def slow_reader(port: int, body: dict[str, Any]) -> str:
    """TTFT, then the content events per read after the stall."""
    data = json.dumps(body).encode()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.connect(("127.0.0.1", port))
    sock.setblocking(False)
    reader, writer = await asyncio.open_connection(sock=sock)
    started = time.monotonic()
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
    await writer.drain()
    await reader.readuntil(b"\r\n\r\n")
    await asyncio.sleep(STALL_S)  # the slow reader's pause itself (pacing: what is measured), not a wait
    reads: list[tuple[float, int]] = []
    while chunk := await reader.read(65536):
        events = chunk.count(b'"content":"') - chunk.count(b'"content":""')
        if events:
            reads.append((time.monotonic() - started, events))
    writer.close()
    if not reads:
        return "no content events"
    return (f"TTFT {reads[0][0] * 1000:6,.0f} ms, {sum(n for _, n in reads)} events in {len(reads)} reads, "
            f"per read: {[n for _, n in reads]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--series", nargs="*", default=[r.series for r in KINDS["nginx"].releases])
    parser.add_argument("--only", default="", help="the rows whose label holds this text")
    args = parser.parse_args()
    scenario = catalogue.get("nginx-buffering")
    with Lab(runtime="local") as lab, fake_upstream() as fake:
        ports = {"h11": lab.server(("--http", "h11")).port, "httptools": lab.server(()).port, "http10": fake.port}
        body = request_body(scenario.workload, scenario.broken, lab.model_name(("--http", "h11")))
        for series in args.series:
            path, version = check_binary("nginx", series)
            print(f"== nginx {'.'.join(map(str, version))} ({KINDS['nginx'].release(series).source}, {path})")
            for label, upstream, extra, tls in (case for case in CASES if args.only in case[0]):
                with nginx(series, ports[upstream], extra, tls) as port:
                    url = f"http{'s' if tls else ''}://127.0.0.1:{port}" + (
                        "/http10?n=32&interval=0.1" if upstream == "http10" else "/v1/chat/completions")
                    for _ in range(args.runs):
                        result = asyncio.run(measure_stream(url, body, verify_tls=not tls))
                        print(f"  {label:42s} TTFT {result.ttft_s * 1000:6,.0f} ms, "
                              f"{result.content_events} events in {result.bursts} reads")
            for label, extra in (case for case in SLOW_CASES if args.only in case[0]):
                with nginx(series, ports["h11"], extra) as port:
                    for _ in range(args.runs):
                        print(f"  {label:42s} {asyncio.run(slow_reader(port, body))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
