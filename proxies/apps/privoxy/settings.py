"""Privoxy's settings: whether the upstream's answers skip the content filters."""
from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from proxies.apps.settings import AppSettings, knob
from proxies.types import Port

PRIVOXY_ACTIONS = "https://www.privoxy.org/user-manual/actions-file.html#FILTER"


class PrivoxySettings(AppSettings):
    """Privoxy as the forward proxy of a user's network (HTTP_PROXY), with Debian's action and
    filter files; a client sends it absolute-form requests for the upstream (see Launch)."""

    app: ClassVar[str] = "privoxy"
    listen_port: Port = Field(8118, description="port Privoxy listens on (its default is 8118)")
    unfiltered_upstream: bool = knob(
        False, "a user.action section `{ -filter }` for the upstream's address: the content "
        "filters Debian's match-all.action turns on for every site skip its answers",
        PRIVOXY_ACTIONS)
