"""webpack-dev-server's settings: the compression in front of every response."""
from __future__ import annotations

from typing import ClassVar

from proxies.apps.settings import AppSettings, knob

WEBPACK_COMPRESS = "https://webpack.js.org/configuration/dev-server/#devservercompress"


class WebpackSettings(AppSettings):
    """proxies/apps/node/dev-server.mjs: webpack-dev-server 5 serving a bundle, /v1 proxied."""

    app: ClassVar[str] = "webpack"
    compress: bool = knob(True, "devServer.compress (the `compression` middleware in front of "
                          "every response, the proxied ones included; on by default)", WEBPACK_COMPRESS)
