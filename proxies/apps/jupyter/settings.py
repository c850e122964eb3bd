"""Jupyter Server's settings: its own default port; the proxy has no knob the labs switch."""
from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from proxies.apps.settings import AppSettings
from proxies.types import Port


class JupyterSettings(AppSettings):
    """Jupyter Server with jupyter-server-proxy: the upstream reached as /proxy/PORT/..., as a
    notebook user reaches a model server they started beside it."""

    app: ClassVar[str] = "jupyter"
    listen_port: Port = Field(8888, description="port Jupyter Server listens on (its default is 8888)")
