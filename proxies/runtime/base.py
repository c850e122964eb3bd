"""The seam between callers (labs, tests) and how a proxy is run (host process now, Docker later)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ContextManager, Mapping, Protocol, Sequence, runtime_checkable

from proxies.base import ProxySettings

if TYPE_CHECKING:
    from proxies.apps.settings import AppSettings
    from proxies.runtime.apps import RunningApp
    from server.launcher import ServerHandle
    from server.mcp.knobs import OriginKnobs
    from server.mcp.replicas import Replicas


@runtime_checkable
class RunningProxy(Protocol):
    """A started, ready proxy. Logs are read on demand, so call them after the traffic."""

    settings: ProxySettings
    config_text: str

    @property
    def name(self) -> str: ...

    @property
    def url(self) -> str:
        """http://LISTEN_HOST:LISTEN_PORT, where clients connect."""
        ...

    @property
    def pid(self) -> int: ...

    def access_log(self) -> list[str]:
        """One raw line per finished request, in the kind's own format (its `Logs`)."""
        ...

    def wait_access_log(self, count: int, timeout_s: float = 5.0) -> list[str]:
        """access_log() once it holds `count` lines (polling; TimeoutError after timeout_s)."""
        ...

    def access_entries(self) -> list[dict[str, str]]:
        """access_log() parsed: nginx keys status, upstream_status, request_time, ...;
        HAProxy status, termination_state, TR/Tw/Tc/Tr/Ta, ...; Envoy status, flags, duration_ms, ..."""
        ...

    def error_log(self) -> str:
        """Everything the proxy said that is not an access line (warnings, errors)."""
        ...

    def stats(self, prefix: str = "") -> dict[str, int]:
        """Counters and gauges whose name starts with `prefix` (Envoy only; others raise)."""
        ...

    def reload(self) -> None:
        """Reload the config of the running proxy (nginx SIGHUP, HAProxy master-worker SIGUSR2,
        Apache SIGUSR1): streams in flight stay on the old workers. Others raise."""
        ...


class Runtime(Protocol):
    name: str

    def run_server(self, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
                   nofile_soft: int | None = None) -> ContextManager["ServerHandle"]:
        """The model server (`python -m server ARGS`) in this runtime, ready; stopped on exit.

        `nofile_soft`: start it under that soft open-file limit (the fd-limit lab)."""
        ...

    def run_proxy(self, settings: ProxySettings,
                  workdir: Path | None = None) -> ContextManager[RunningProxy]:
        """Render, validate, start on the settings' ports, wait until ready; stop on exit."""
        ...

    def run_app(self, settings: "AppSettings",
                workdir: Path | None = None) -> ContextManager["RunningApp"]:
        """An app hop (proxies.apps): started with its Launch, ready once a real request through
        it answers; stopped on exit."""
        ...

    def run_mcp_replicas(self, count: int, knobs: "OriginKnobs", *, sdk: str) -> ContextManager["Replicas"]:
        """`count` replicas of the MCP origin (python -m server.mcp) on the SDK line `sdk`
        (server.mcp.sdks), each on its own 127.0.0.1 port, ready; every one stopped on exit."""
        ...
