"""Run the load lab: a server per `ServerSpec`, the path's proxy, and each step's streams with
the server's, the proxy's and the client's resources sampled alongside."""
from __future__ import annotations

import contextlib
import resource
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from labs.load.analysis import PathResult, diagnose
from labs.load.evidence import _Marks
from labs.load.paths import LoadPath, ServerSpec, script
from labs.load.results import StepResult
from labs.client.apis import DEFAULT_API, client_api
from labs.client.driver import httpx_defaults_at_once, no_gc_pauses, streams_at_once, uvloop_runner
from labs.load.summary import summarize
from labs.client.resources import Sampler, raise_own_fd_limit

# labs.lab (the hops and the server), server.launcher and proxies are imported where they are
# used: `labs.load` (the analysis, the report, their tests) must import on a checkout without a
# built server.

PROMPT = [{"role": "user", "content": "Tell me something, one token at a time."}]
Progress = Callable[[str], None]


@contextlib.contextmanager
def _fd_limit_for_children(limit: int | None) -> Iterator[None]:
    """Children started inside inherit this soft RLIMIT_NOFILE (the lab's `ulimit -n 512`)."""
    if limit is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@dataclass
class LoadLab:
    """Runs paths; one server per ServerSpec, started when first needed, stopped when the next
    path needs another (the transformers server should not sit beside 1,000 streams)."""

    duration_s: float = 8.0
    tokens_per_s: float = 20.0
    progress: Progress = lambda message: None  # noqa: E731
    runtime: Any = None
    # Called after each step of a path with the step's result (the progress bar advances).
    on_step: Callable[[LoadPath, StepResult], None] = lambda path, step: None  # noqa: E731

    def __post_init__(self) -> None:
        if self.runtime is None:
            from labs.lab.hops import runtime_named
            self.runtime = runtime_named(None)
        self._server_spec: ServerSpec | None = None
        self._server_stack = contextlib.ExitStack()
        self._server: Any = None
        self._model = ""
        raise_own_fd_limit()

    def close(self) -> None:
        self._server_stack.close()
        self._server = self._server_spec = None

    def __enter__(self) -> LoadLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def model(self) -> str:
        """The served model's name (after `server()`)."""
        return self._model

    def server(self, spec: ServerSpec) -> Any:
        if spec != self._server_spec:
            from labs.lab.server import served_model
            from server.launcher import running_server

            self.close()
            self.progress(f"starting the server ({' '.join(spec.args())})")
            with _fd_limit_for_children(spec.fd_soft_limit):
                self._server = self._server_stack.enter_context(running_server(spec.args()))
            self._server_spec = spec
            self._model = served_model(self._server.url)
        return self._server

    def run(self, paths: Sequence[LoadPath], steps: Sequence[int] | None = None) -> list[PathResult]:
        return [self.run_path(path, steps) for path in paths]

    def run_path(self, path: LoadPath, steps: Sequence[int] | None = None) -> PathResult:
        result = PathResult(path)
        try:
            server = self.server(path.server)
            with self.proxy(path, server.port) as proxy:
                for n in steps or path.steps:
                    self.progress(f"{path.name}: {n} streams")
                    step = self.run_step(path, n, server, proxy)
                    result.steps.append(step)
                    self.on_step(path, step)
                    if path.stop_at_limit and not step.healthy:
                        break
        except Exception as exc:  # noqa: BLE001 - one path failing must not lose the others
            result.error = f"{type(exc).__name__}: {exc}"
        return result

    @contextlib.contextmanager
    def proxy(self, path: LoadPath, server_port: int) -> Iterator[Any]:
        if path.proxy is None:
            yield None
            return
        from labs.lab.hops import hop_settings
        from proxies.kinds import has_admin
        from server.processes import free_port

        ports: dict[str, int] = {"listen_port": free_port(), "upstream_port": server_port}
        if has_admin(path.proxy):  # its admin endpoint reads the stats
            ports["admin_port"] = free_port()
        settings = hop_settings(path.proxy, path.overrides, path.base, **ports)
        self.progress(f"{path.name}: starting {path.proxy}")
        with self.runtime.run_proxy(settings) as proxy:
            yield proxy

    def body(self, path: LoadPath, tokens: int, extra_lab: Mapping[str, Any] | None = None,
             api: str = DEFAULT_API) -> dict[str, Any]:
        lab: dict[str, Any] = {"tokens_per_s": self.tokens_per_s, "stamp": True,
                               "script": script(tokens), **(extra_lab or {})}
        return client_api(api).body(self._model, PROMPT, tokens, lab=lab)

    def run_step(self, path: LoadPath, n: int, server: Any, proxy: Any | None,
                 extra_lab: Mapping[str, Any] | None = None, api: str = DEFAULT_API) -> StepResult:
        """N streams at once through `proxy` (or straight to `server`); `extra_lab` adds `lab`
        request fields (the benchmark's coalesce_ms); `api` is the wire protocol they speak
        (labs/client/apis: the benchmark's per-protocol cost)."""
        from labs.lab.server import wait_idle

        duration = path.duration_s or self.duration_s
        tokens = max(2, round(duration * self.tokens_per_s))
        entry = proxy.url if proxy is not None else server.url
        spoken = client_api(api)
        url = entry + spoken.path
        body = self.body(path, tokens, extra_lab, api)
        # Bounded: a stream that waited a whole stream in a queue still fits; nothing runs on.
        deadline = 3 * duration + 15.0
        pids = {"server": server.process.pid}
        if proxy is not None:
            pids["proxy"] = proxy.pid
        entry_port = int(entry.rsplit(":", 1)[1])
        marks = _Marks(server, proxy)
        ports = sorted({entry_port, server.port})
        with Sampler(pids, ports=ports) as sampler, uvloop_runner() as runner, no_gc_pauses():
            if path.client == "httpx-default":
                batch = runner.run(httpx_defaults_at_once(url, body, n, deadline, api=api))
            else:
                batch = runner.run(streams_at_once(url, body, n, deadline, headers=spoken.headers(),
                                                   api=api))
        wait_idle(server, timeout_s=15.0)  # every stream finished (or aborted) before the next step
        step = summarize(path.name, batch, tokens, self.tokens_per_s, duration)
        step.server = sampler.usage["server"].to_dict()
        step.proxy = sampler.usage["proxy"].to_dict() if proxy is not None else None
        step.accept_queue_peak = sampler.queue_peak.get(entry_port, 0)
        step.server_accept_queue_peak = sampler.queue_peak.get(server.port, 0)
        step.machine_busy_pct = sampler.machine_busy_pct
        marks.fill(step)
        step.limits = diagnose(step)
        return step
