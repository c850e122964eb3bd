"""The base of every proxy's settings model: addressing, immutability, re-validated overrides."""
from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import Self

from proxies.types import Host, Port, Series

# A proxy's name: a key of proxies.kinds.KINDS (the settings' `proxy`, e.g. "nginx").
ProxyName = str


def setting(default: Any, doc: str, url: str) -> Any:
    """A settings field: its default (the proxy's own), what it does, and where the proxy documents it."""
    return Field(default, description=f"{doc} ({url})", json_schema_extra={"docs": url})


class ProxySettings(BaseModel):
    """Fields every proxy shares: where it listens and where it forwards (so chains can be rendered)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    proxy: ClassVar[ProxyName]
    template: ClassVar[str]  # path under proxies/, e.g. "nginx/nginx.conf.j2"
    config_name: ClassVar[str]  # file name of the exported config, e.g. "nginx.conf"
    # The settings naming the TLS certificate and its key, in that order (none: no TLS listener).
    tls_fields: ClassVar[tuple[str, ...]] = ()

    listen_host: Host = Field("127.0.0.1", description="address the proxy listens on")
    listen_port: Port = Field(8080, description="port the proxy listens on")
    upstream_host: Host = Field("127.0.0.1", description="address of the upstream (server or next proxy)")
    upstream_port: Port = Field(8000, description="port of the upstream")
    # An MCP route (proxies/fixed_mcp.py): `/mcp` to a pool of MCP replicas, each session kept on
    # the replica that opened it by the proxy's own means (each template says which).
    mcp_ports: tuple[Port, ...] = Field((), max_length=8, description="an MCP route (`/mcp`) to a pool of "
                                        "replicas on the upstream's host at these ports; empty: none")
    mcp_affinity: bool = Field(True, description="keep each MCP session on the replica that opened it "
                               "(off: the proxy's round-robin, which loses stateful sessions)")
    # Which of the proxy's releases runs the config (its kind's `releases`); a template may
    # differ by it where a directive changed between them.
    version: Series | None = Field(None, description="the release that runs it, as major.minor "
                                   "(e.g. 1.30); None: the lab's current one")

    def tls_files(self) -> dict[str, str]:
        """Setting name -> path of each TLS file the config reads (empty when TLS is off)."""
        if not getattr(self, "tls_http2", False):
            return {}
        return {name: getattr(self, name) for name in self.tls_fields}

    def with_(self, **changes: Any) -> Self:
        """A copy with `changes` applied, validated again (model_copy(update=...) would not)."""
        return type(self).model_validate({**self.model_dump(), **changes})

    def changed_fields(self) -> dict[str, Any]:
        """The fields that differ from the proxy's defaults (what a variant actually switches)."""
        default = type(self)()
        return {name: value for name, value in self.model_dump().items()
                if getattr(default, name) != value}
