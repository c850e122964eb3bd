"""Each app hop's settings: where it listens and forwards, and the knobs its variants switch.

The defaults are the app as it is commonly written or started (Express with `compression()`,
Next.js with its default `compress`, gunicorn with its own defaults, LiteLLM without keep-alive
pings): a scenario's broken variant is usually the defaults, and its fix one setting.
"""
from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import Self

from proxies.types import Host, Port

AppName = Literal["express", "nextjs", "webpack", "gunicorn", "django", "jupyter", "litellm", "privoxy",
                  "relay"]
APP_NAMES: tuple[AppName, ...] = ("express", "nextjs", "webpack", "gunicorn", "django", "jupyter", "litellm",
                                  "privoxy", "relay")

COMPRESSION = "https://expressjs.com/en/resources/middleware/compression.html"
NEXT_COMPRESS = "https://nextjs.org/docs/app/api-reference/config/next-config-js/compress"
NEXT_REWRITES = "https://nextjs.org/docs/app/api-reference/config/next-config-js/rewrites"
WEBPACK_COMPRESS = "https://webpack.js.org/configuration/dev-server/#devservercompress"
GUNICORN = "https://docs.gunicorn.org/en/stable/settings.html"
DJANGO_STREAMING = "https://docs.djangoproject.com/en/5.2/ref/request-response/#streaminghttpresponse-objects"
LITELLM = "https://docs.litellm.ai/docs/proxy/config_settings"
JUPYTER_PROXY = "https://jupyter-server-proxy.readthedocs.io/en/latest/arbitrary-ports-hosts.html"
PRIVOXY_ACTIONS = "https://www.privoxy.org/user-manual/actions-file.html#FILTER"
ABORT = "https://nodejs.org/api/globals.html#class-abortcontroller"
PROXY_MIDDLEWARE = "https://github.com/chimurai/http-proxy-middleware#intercept-and-manipulate-responses"


def knob(default: Any, doc: str, url: str, **constraints: Any) -> Any:
    return Field(default, description=f"{doc} ({url})", json_schema_extra={"docs": url}, **constraints)


class AppSettings(BaseModel):
    """Fields every app hop shares (as proxies.base.ProxySettings: apps chain like proxies)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    app: ClassVar[AppName]

    listen_host: Host = Field("127.0.0.1", description="address the app listens on")
    listen_port: Port = Field(3000, description="port the app listens on")
    upstream_host: Host = Field("127.0.0.1", description="address of the upstream (server or next hop)")
    upstream_port: Port = Field(8000, description="port of the upstream")

    @property
    def upstream(self) -> str:
        return f"http://{self.upstream_host}:{self.upstream_port}"

    def with_(self, **changes: Any) -> Self:
        """A copy with `changes` applied, validated again."""
        return type(self).model_validate({**self.model_dump(), **changes})

    def changed_fields(self) -> dict[str, Any]:
        default = type(self)()
        return {name: value for name, value in self.model_dump().items() if getattr(default, name) != value}


class ExpressSettings(AppSettings):
    """proxies/apps/node/express-app.mjs: Express 5 forwarding with `fetch` or http-proxy-middleware."""

    app: ClassVar[AppName] = "express"
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


class NextjsSettings(AppSettings):
    """proxies/apps/node/next-site: a Next.js 16 site (`next start` of the build `make setup` made)."""

    app: ClassVar[AppName] = "nextjs"
    compress: bool = knob(True, "next.config `compress` (gzip of every response; Next's default is on)",
                          NEXT_COMPRESS)
    route: Literal["rewrites", "handler"] = knob(
        "rewrites", "`rewrites()` to the upstream (rewrites), or a route handler that returns "
        "`upstream.body` (handler)", NEXT_REWRITES)


class WebpackSettings(AppSettings):
    """proxies/apps/node/dev-server.mjs: webpack-dev-server 5 serving a bundle, /v1 proxied."""

    app: ClassVar[AppName] = "webpack"
    compress: bool = knob(True, "devServer.compress (the `compression` middleware in front of "
                          "every response, the proxied ones included; on by default)", WEBPACK_COMPRESS)


class GunicornSettings(AppSettings):
    """proxies/apps/wsgi_app.py (Flask, a generator over `requests` streaming) under gunicorn."""

    app: ClassVar[AppName] = "gunicorn"
    worker_class: Literal["sync", "gthread", "gevent"] = knob("sync", "--worker-class", f"{GUNICORN}#worker-class")
    workers: int = knob(1, "--workers", f"{GUNICORN}#workers", ge=1, le=64)
    threads: int = knob(1, "--threads (gthread only)", f"{GUNICORN}#threads", ge=1, le=1000)
    timeout_s: int = knob(30, "--timeout: a worker silent this long is killed and restarted",
                          f"{GUNICORN}#timeout", ge=0, le=3600)

    @model_validator(mode="after")
    def _threads_need_gthread(self) -> Self:
        if self.threads > 1 and self.worker_class == "sync":
            # gunicorn itself switches to gthread when --threads > 1 with the sync class: say so.
            raise ValueError("threads > 1 with worker_class sync: gunicorn would silently run gthread; "
                             "name worker_class gthread")
        return self


class DjangoSettings(AppSettings):
    """proxies/apps/django_app.py: a Django view returning a StreamingHttpResponse over the upstream."""

    app: ClassVar[AppName] = "django"
    server: Literal["asgi", "wsgi"] = knob(
        "asgi", "asgi: uvicorn serves `django_app:asgi`; wsgi: gunicorn's gthread workers serve "
        "`django_app:wsgi`", DJANGO_STREAMING)
    iterator: Literal["sync", "async"] = knob(
        "sync", "sync: a sync view returns a generator over `requests`' iter_content; async: an "
        "async view returns an async generator over httpx's aiter_raw", DJANGO_STREAMING)


class JupyterSettings(AppSettings):
    """Jupyter Server with jupyter-server-proxy: the upstream reached as /proxy/PORT/..., as a
    notebook user reaches a model server they started beside it."""

    app: ClassVar[AppName] = "jupyter"
    listen_port: Port = Field(8888, description="port Jupyter Server listens on (its default is 8888)")


class LitellmSettings(AppSettings):
    """The LiteLLM proxy (its own venv), one model routed to the upstream, offline."""

    app: ClassVar[AppName] = "litellm"
    keepalive_ping_s: float | None = knob(
        None, "litellm_settings.sse_keepalive_ping_interval_seconds: a `: ping` after this much "
        "silence (None: LiteLLM's default, no pings)", LITELLM, gt=0, le=3600)


class PrivoxySettings(AppSettings):
    """Privoxy as the forward proxy of a user's network (HTTP_PROXY), with Debian's action and
    filter files; a client sends it absolute-form requests for the upstream (see Launch)."""

    app: ClassVar[AppName] = "privoxy"
    listen_port: Port = Field(8118, description="port Privoxy listens on (its default is 8118)")
    unfiltered_upstream: bool = knob(
        False, "a user.action section `{ -filter }` for the upstream's address: the content "
        "filters Debian's match-all.action turns on for every site skip its answers",
        PRIVOXY_ACTIONS)


class RelaySettings(AppSettings):
    """proxies/apps/relay.py: a TCP relay that re-splits what the server sends, deterministically."""

    app: ClassVar[AppName] = "relay"
    split: tuple[int, int] | None = Field(
        None, description="write the response in pieces of a random size in [min, max] bytes, one "
                          "send each (None: pass reads through as they come)")
    seed: int = Field(0, description="seed of the piece sizes: one seed, the same split every run")
    upstream_http: Literal["1.1", "1.0"] = Field(
        "1.1", description="1.0: forward the request line as HTTP/1.0, so the server answers "
                           "close-delimited (no chunked framing) as it does to an HTTP/1.0 hop")

    @model_validator(mode="after")
    def _split_range(self) -> Self:
        if self.split is not None and not 1 <= self.split[0] <= self.split[1] <= 65536:
            raise ValueError(f"split {self.split}: need 1 <= min <= max <= 65536")
        return self


APP_TYPES: dict[AppName, type[AppSettings]] = {
    "express": ExpressSettings, "nextjs": NextjsSettings, "webpack": WebpackSettings,
    "gunicorn": GunicornSettings,
    "django": DjangoSettings, "jupyter": JupyterSettings, "litellm": LitellmSettings,
    "privoxy": PrivoxySettings,
    "relay": RelaySettings}


def is_app(name: str) -> bool:
    return name in APP_TYPES


def app_settings(name: str) -> AppSettings:
    """The defaults of app `name`; ValueError lists the known ones."""
    if name not in APP_TYPES:
        raise ValueError(f"unknown app {name!r}; known: {', '.join(APP_NAMES)}")
    return APP_TYPES[name]()  # type: ignore[index]
