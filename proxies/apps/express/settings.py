"""Express's settings: the middleware and forwarding its variants switch."""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import model_validator
from typing_extensions import Self

from proxies.apps.settings import AppSettings, knob

COMPRESSION = "https://expressjs.com/en/resources/middleware/compression.html"
ABORT = "https://nodejs.org/api/globals.html#class-abortcontroller"
PROXY_MIDDLEWARE = "https://github.com/chimurai/http-proxy-middleware#intercept-and-manipulate-responses"


class ExpressSettings(AppSettings):
    """proxies/apps/node/express-app.mjs: Express 5 forwarding with `fetch` or http-proxy-middleware."""

    app: ClassVar[str] = "express"
    compression: Literal["default", "skip-sse", "flush", "off"] = knob(
        "default", "`app.use(compression())` (default), with a filter that skips text/event-stream "
        "(skip-sse), with `res.flush()` after every chunk (flush), or none (off)", COMPRESSION)
    abort_on_close: bool = knob(
        False, "`res.on('close', () => controller.abort())`: a client that leaves aborts the upstream fetch",
        ABORT)
    forward: Literal["fetch", "proxy-middleware", "response-hook", "hook-skip-sse"] = knob(
        "fetch", "how it forwards: `fetch` and a loop of `res.write` (fetch); http-proxy-middleware "
        "with its defaults (proxy-middleware); the same with `selfHandleResponse` and a "
        "`responseInterceptor` that reads the body (response-hook); that hook for every response "
        "but text/event-stream, which is piped (hook-skip-sse)", PROXY_MIDDLEWARE)

    @model_validator(mode="after")
    def _abort_needs_fetch(self) -> Self:
        # The abort is wired to the `fetch` handler's signal; http-proxy-middleware has its own
        # handling of a departed client, so the setting would silently do nothing there.
        if self.abort_on_close and self.forward != "fetch":
            raise ValueError(f"abort_on_close applies to forward 'fetch' only, not {self.forward!r}")
        return self
