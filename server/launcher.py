"""Run the model server as a child process on a free loopback port (for labs, tests, benchmarks).

    with running_server(["--engine", "synthetic"]) as server:
        httpx.get(server.url + "/healthz")
        server.metrics()["streamlab_tokens_generated_total"]
"""
from __future__ import annotations

import contextlib
import http.client
import os
import sys
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from prometheus_client.parser import text_string_to_metric_families

from server.locations import PACKAGE_ROOT, checkout, default_model_dir
from server.processes import ManagedProcess, free_port, managed

REPO_ROOT = PACKAGE_ROOT  # the checkout, or site-packages when installed
DEFAULT_MODEL_DIR = default_model_dir()


@dataclass
class ServerHandle:
    host: str
    port: int
    process: ManagedProcess
    # One kept-alive connection for scrapes, so reading /metrics never shows up in the server's
    # own count of accepted connections (the upstream-keepalive lab counts those).
    _scrape: http.client.HTTPConnection | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def metrics(self) -> dict[str, float]:
        """Every sample on /metrics, keyed `name{label="v",...}` (labels sorted) or plain `name`."""
        text = self._get("/metrics")
        samples: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return samples

    def log_tail(self, lines: int = 40) -> str:
        return self.process.log_tail(lines)

    def _get(self, path: str) -> str:
        for attempt in (1, 2):  # the server may have closed an idle connection: reconnect once
            if self._scrape is None:
                self._scrape = http.client.HTTPConnection(self.host, self.port, timeout=5)
            try:
                self._scrape.request("GET", path)
                response = self._scrape.getresponse()
                return response.read().decode()
            except (http.client.HTTPException, OSError):
                self._scrape.close()
                self._scrape = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


_NOFILE_SHIM = (
    "import os, resource, sys; "
    "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]; "
    "resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, hard)); "
    "os.execv(sys.executable, [sys.executable, '-m', 'server', *sys.argv[1:]])")


@contextlib.contextmanager
def running_server(args: Sequence[str] = (), *, host: str = "127.0.0.1", port: int | None = None,
                   env: Mapping[str, str] | None = None, workdir: Path | None = None,
                   ready_timeout_s: float = 90.0,
                   nofile_soft: int | None = None) -> Iterator[ServerHandle]:
    """Start `python -m server ARGS` and wait until /healthz says the engine runs.

    `nofile_soft`: start it under that soft open-file limit (as `ulimit -Sn N` would), keeping
    the hard limit, so the server's own start-up raise (or `--keep-fd-limit`) is what decides.
    """
    port = port or free_port(host)
    child_env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    launch = [sys.executable, "-m", "server"]
    if nofile_soft is not None:
        # A shim that lowers its own soft limit, then execs the server: same pid (stop() still
        # reaches it), and nothing else in this process or its threads is touched.
        launch = [sys.executable, "-c", _NOFILE_SHIM.format(soft=int(nofile_soft))]
    with contextlib.ExitStack() as stack:
        folder = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="streamlab-server-")))
        process = ManagedProcess(
            name=f"server:{port}",
            argv=[*launch, "--host", host, "--port", str(port), *args],
            # From a checkout `-m server` finds the packages in it; installed, in site-packages,
            # so it runs in its own folder (a `server/` in the caller's folder would shadow it).
            log_path=folder / "server.log", cwd=checkout() or folder, env=child_env)
        url = f"http://{host}:{port}"
        with managed(process, lambda: _healthy(url), ready_timeout_s) as started:
            yield ServerHandle(host=host, port=port, process=started)
