"""Next.js's settings: the site's compression and how its route reaches the upstream."""
from __future__ import annotations

from typing import ClassVar, Literal

from proxies.apps.settings import AppSettings, knob

NEXT_COMPRESS = "https://nextjs.org/docs/app/api-reference/config/next-config-js/compress"
NEXT_REWRITES = "https://nextjs.org/docs/app/api-reference/config/next-config-js/rewrites"


class NextjsSettings(AppSettings):
    """proxies/apps/node/next-site: a Next.js 16 site (`next start` of the build `make setup` made)."""

    app: ClassVar[str] = "nextjs"
    compress: bool = knob(True, "next.config `compress` (gzip of every response; Next's default is on)",
                          NEXT_COMPRESS)
    route: Literal["rewrites", "handler"] = knob(
        "rewrites", "`rewrites()` to the upstream (rewrites), or a route handler that returns "
        "`upstream.body` (handler)", NEXT_REWRITES)
