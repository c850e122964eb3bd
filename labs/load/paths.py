"""What the load lab runs: the paths to the server, the limit each one teaches, its ramp of
steps, and the scripted text every stream asks for."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

# Every stream is scripted with short ASCII words: with the lab's byte-level BPE each token then
# decodes to text on its own, so one token is one SSE event and gaps are pure pacing. Unscripted,
# the synthetic engine cycles through the corpus, whose Japanese and emoji span several tokens:
# the detokenizer holds those back, and gap p99 reads 2 intervals (100 ms) with nothing wrong.
# The tiny model is teacher-forced on the same text (one real forward pass per token).
SCRIPT_SENTENCE = "Every token should reach the reader the moment the model makes it. "


def script(tokens: int) -> str:
    """A script of at least `tokens` tokens (each sentence is more than 8)."""
    return (SCRIPT_SENTENCE * (tokens // 8 + 2)).strip()


ClientKind = Literal["lean", "httpx-default"]
Role = Literal["direct", "broken", "fixed", "teaching"]


@dataclass(frozen=True)
class ServerSpec:
    """How the server runs for a path. Paths with equal specs share one server."""

    engine: Literal["synthetic", "transformers"] = "synthetic"
    slots: int = 1100  # more than the largest step: the engine's admission is not under test
    max_queue: int = 0
    fd_soft_limit: int | None = None  # start it under this `ulimit -n` (and keep it)
    workers: int = 1  # server processes on the port (python -m server --workers)

    def args(self) -> list[str]:
        args = ["--engine", self.engine, "--slots", str(self.slots), "--max-queue",
                str(self.max_queue), "--log-level", "warning"]
        args += ["--workers", str(self.workers)] if self.workers > 1 else []
        return args + (["--keep-fd-limit"] if self.fd_soft_limit else [])


@dataclass(frozen=True)
class LoadPath:
    """One row group of the lab: where the streams go and which limit it teaches."""

    name: str
    role: Role
    limit: str  # the limit this path has, in words (the config line a reader would grep for)
    proxy: str | None = None  # a proxy kind's name (proxies/kinds.py); None = straight to the server
    base: str = "fixed"  # the proxy's base settings; `overrides` switch the limit on
    overrides: Mapping[str, Any] = field(default_factory=dict)
    server: ServerSpec = ServerSpec()
    client: ClientKind = "lean"
    steps: tuple[int, ...] = (100, 300, 1000)
    duration_s: float | None = None  # None: the lab's duration
    stop_at_limit: bool = False  # a broken path stops ramping once its limit is shown


SYNTHETIC = ServerSpec()
PATHS: tuple[LoadPath, ...] = (
    LoadPath("direct", "direct", "none: straight to the server (slots 1100, fd limit raised)",
             steps=(10, 100, 300, 1000)),
    LoadPath("client-httpx-pool", "teaching", "httpx.AsyncClient() defaults: a pool of 100 connections",
             client="httpx-default", steps=(300,), stop_at_limit=True),
    LoadPath("server-fd-512", "teaching", "server under `ulimit -n 512` (--keep-fd-limit)",
             server=ServerSpec(fd_soft_limit=512), steps=(300, 1000), stop_at_limit=True),
    LoadPath("nginx-broken", "broken", "worker_processes 1; worker_connections 512 (nginx's default)",
             proxy="nginx", overrides={"worker_processes": 1, "worker_connections": 512},
             stop_at_limit=True),
    LoadPath("nginx-fixed", "fixed", "proxies/fixed/nginx.conf", proxy="nginx"),
    LoadPath("haproxy-broken", "broken", "maxconn 256 (global and frontend)", proxy="haproxy",
             overrides={"maxconn_global": 256, "maxconn_frontend": 256}, stop_at_limit=True),
    LoadPath("haproxy-fixed", "fixed", "proxies/fixed/haproxy.cfg", proxy="haproxy"),
    LoadPath("envoy-broken", "broken", "circuit breakers max_requests 256, max_pending_requests 256 "
             "(defaults: 1024)", proxy="envoy",
             overrides={"max_requests": 256, "max_pending_requests": 256}, stop_at_limit=True),
    LoadPath("envoy-fixed", "fixed", "proxies/fixed/envoy.yaml", proxy="envoy"),
    LoadPath("tiny-model-slots", "teaching", "tiny transformers model: --slots 8 --max-queue 8",
             server=ServerSpec(engine="transformers", slots=8, max_queue=8), steps=(8, 32),
             duration_s=2.0),
)


def get_path(name: str) -> LoadPath:
    for path in PATHS:
        if path.name == name:
            return path
    raise KeyError(f"no load path {name!r}; known: {', '.join(p.name for p in PATHS)}")
