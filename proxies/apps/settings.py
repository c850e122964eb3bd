"""What every app hop's settings share: where it listens and forwards, and `knob`, the field of a
setting its variants switch (each hop's own are in `proxies/apps/<hop>/settings.py`).

The defaults are the app as it is commonly written or started (Express with `compression()`,
Next.js with its default `compress`, gunicorn with its own defaults, LiteLLM without keep-alive
pings): a scenario's broken variant is usually the defaults, and its fix one setting.
"""
from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import Self

from proxies.types import Host, Port


def knob(default: Any, doc: str, url: str, **constraints: Any) -> Any:
    return Field(default, description=f"{doc} ({url})", json_schema_extra={"docs": url}, **constraints)


class AppSettings(BaseModel):
    """Fields every app hop shares (as proxies.base.ProxySettings: apps chain like proxies)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    app: ClassVar[str]  # the hop's name, its key in proxies.apps.kinds.APP_KINDS

    listen_host: Host = Field("127.0.0.1", description="address the app listens on")
    listen_port: Port = Field(3000, description="port the app listens on")
    upstream_host: Host = Field("127.0.0.1", description="address of the upstream (server or next hop)")
    upstream_port: Port = Field(8000, description="port of the upstream")

    @property
    def listen(self) -> str:
        """HOST:PORT, as the hops that take their address in one argument want it."""
        return f"{self.listen_host}:{self.listen_port}"

    @property
    def upstream(self) -> str:
        return f"http://{self.upstream_host}:{self.upstream_port}"

    def with_(self, **changes: Any) -> Self:
        """A copy with `changes` applied, validated again."""
        return type(self).model_validate({**self.model_dump(), **changes})

    def changed_fields(self) -> dict[str, Any]:
        default = type(self)()
        return {name: value for name, value in self.model_dump().items() if getattr(default, name) != value}
