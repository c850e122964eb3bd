"""`python -m labs serve` stopped by SIGTERM (as a service manager or a test stops it) stops every
server and proxy it started: uvicorn re-raises the signal after its shutdown, and under Python's
default handler the view died there, leaving them running."""
from __future__ import annotations

import json
import signal
import sys
import urllib.parse
import urllib.request
from pathlib import Path

from server.processes import ManagedProcess, free_port, managed, port_accepts, wait_until
from tests.view.conftest import REPO_ROOT, _answers


def _prepare(url: str, name: str) -> dict:
    request = urllib.request.Request(f"{url}/api/scenarios/{name}/prepare", data=b"{}", method="POST",
                                     headers={"content-type": "application/json", "origin": url})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response)


def test_sigterm_stops_the_servers_and_proxies_the_view_started(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    view = ManagedProcess(name=f"view:{port}", argv=[sys.executable, "-m", "labs", "serve", "--port",
                                                     str(port), "--out", str(tmp_path)],
                          log_path=tmp_path / "view.log", cwd=REPO_ROOT)
    with managed(view, lambda: _answers(url + "/"), timeout_s=60):
        prepared = _prepare(url, "nginx-buffering")
        ports = [urllib.parse.urlsplit(v["url"]).port for v in prepared["variants"].values()]
        assert len(ports) == 2 and all(port_accepts(p) for p in ports), prepared
        assert view.process is not None
        view.process.send_signal(signal.SIGTERM)  # the view alone, not its process group
        view.process.wait(timeout=30)
        # Stopped by the view on its way out, not by the group kill `managed` ends with.
        wait_until(lambda: not any(port_accepts(p) for p in ports), 5,
                   describe="the proxies the view started to stop")
    assert view.process.returncode == 128 + signal.SIGTERM, (tmp_path / "view.log").read_text()[-2000:]
