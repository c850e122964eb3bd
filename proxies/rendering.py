"""Render a settings model through its proxy's one template (jinja2, StrictUndefined)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import jinja2

from proxies import fixed_mcp
from proxies.base import ProxySettings

TEMPLATES = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    # StrictUndefined: a missing input is an error, never an empty string in a config.
    # trim_blocks/lstrip_blocks: block tags leave no blank lines, so the output needs no clean-up.
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)


def render_template(name: str, context: Mapping[str, Any]) -> str:
    """Render one template file (path under proxies/) with an explicit context."""
    return environment().get_template(name).render(**context)


def render(settings: ProxySettings) -> str:
    """The complete config text for `settings`; the proxy is known from the settings type. The
    template sees `release` (the release that will run it) and `version`, its series as a tuple
    of numbers (`{% if version >= (2, 7) %}`), and `mcp`, the MCP route's constants (proxies/fixed_mcp.py)."""
    if not isinstance(settings, ProxySettings):
        raise TypeError(f"expected a ProxySettings model (NginxSettings, ...), got {type(settings).__name__}")
    from proxies.kinds import release_of  # the kinds import the settings this module renders

    release = release_of(settings)
    version = tuple(int(part) for part in release.series.split("."))
    return render_template(settings.template, {"settings": settings, "release": release, "version": version,
                                               "mcp": fixed_mcp})
