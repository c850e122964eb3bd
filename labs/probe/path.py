"""The path under test: its entry URLs, what the origin behind them is, and the origin's lab endpoints.

Entry URLs are OpenAI base URLs (`http://host:port/v1`), outermost first. The origin is the lab's
server (a canary) when `GET /v1/models` names `streamlab` as the owner through the outermost
entry; then every stream can carry `lab` knobs, and the server's per-request records
(`GET /lab/requests/{id}`, next to `/v1`) say what the origin itself saw. Small JSON GETs go
through httpx; every stream goes through the lab's measuring client (labs.client).
"""
from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Sequence
from urllib.parse import urlsplit

import httpx

from labs.client.apis import DEFAULT_API, client_api
from labs.client.apis.base import bearer
from labs.findings import UnusableInput

Origin = Literal["streamlab", "other"]
LAB_TOKEN_HEADER = "X-Lab-Token"
REQUEST_ID_HEADER = "X-Request-Id"
GET_TIMEOUT_S = 10.0


def check_url(url: str) -> str:
    """An OpenAI base URL, without a trailing slash; UnusableInput says what is wrong with it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise UnusableInput(f"{url!r} is not an http:// or https:// URL (give an OpenAI base URL, "
                            f"e.g. http://127.0.0.1:8080/v1)")
    if not parts.hostname:
        raise UnusableInput(f"{url!r} names no host")
    try:
        parts.port
    except ValueError:
        raise UnusableInput(f"{url!r} has an invalid port") from None
    if parts.query or parts.fragment:
        raise UnusableInput(f"{url!r}: a base URL has no query or fragment")
    return url.rstrip("/")


def entries(urls: Sequence[str], check: Callable[[str], str], what: str) -> list[str]:
    """The path's entry URLs, each checked, none twice (the chat probe's and the MCP probe's)."""
    if not urls:
        raise UnusableInput(f"give at least one {what} (the outermost entry of the path)")
    checked = [check(u) for u in urls]
    if len(set(checked)) != len(checked):
        raise UnusableInput("the same URL is given twice: give each entry of the path once")
    return checked


def key_from(api_key_env: str | None, env: Mapping[str, str]) -> str | None:
    """The API key in the variable --api-key-env names (None: no key asked for)."""
    if not api_key_env:
        return None
    if not env.get(api_key_env):
        raise UnusableInput(f"--api-key-env {api_key_env}: that environment variable is not set")
    return env[api_key_env]


def entry_root(url: str) -> str:
    """Where the lab endpoints are: the base URL without its trailing `/v1`."""
    return url[: -len("/v1")] if url.endswith("/v1") else url


@dataclass
class Path:
    """Entry URLs, the headers every request carries, the model, and what the origin is."""

    urls: list[str]
    api_key: str | None = None
    lab_token: str | None = None
    model: str | None = None
    origin: Origin = "other"
    owner: str | None = None
    # Per entry: whether the origin's records can be read through it (None: not asked yet).
    records_ok: dict[int, bool] = field(default_factory=dict)
    slots: int | None = None  # the canary's engine slots, from its /healthz, when readable
    verify_tls: bool = True  # False (--insecure): a self-signed certificate on an https:// entry
    api: str = DEFAULT_API  # the wire protocol every stream speaks (--api: labs/client/apis)

    @classmethod
    def from_args(cls, urls: Sequence[str], *, api_key_env: str | None = None,
                  lab_token_env: str | None = "STREAMLAB_LAB_TOKEN", model: str | None = None,
                  environ: Mapping[str, str] | None = None, insecure: bool = False,
                  api: str = DEFAULT_API) -> "Path":
        env = os.environ if environ is None else environ
        checked = entries(urls, check_url, "URL")
        api_key = key_from(api_key_env, env)
        token = env.get(lab_token_env) if lab_token_env else None
        try:
            client_api(api)
        except ValueError as exc:
            raise UnusableInput(f"--api: {exc}") from None
        return cls(urls=checked, api_key=api_key, lab_token=token or None, model=model,
                   verify_tls=not insecure, api=api)

    # ---- what every request carries ------------------------------------------------------

    def headers(self, request_id: str | None = None) -> dict[str, str]:
        # The protocol's own (Messages: anthropic-version, the key as x-api-key; else Bearer).
        headers: dict[str, str] = client_api(self.api).headers(self.api_key)
        if self.lab_token and self.origin == "streamlab":
            headers[LAB_TOKEN_HEADER] = self.lab_token
        if request_id:
            headers[REQUEST_ID_HEADER] = request_id
        return headers

    def completions(self, hop: int = 0) -> str:
        """Where every stream is POSTed through entry `hop`: the protocol's route under the base URL."""
        return self.urls[hop] + client_api(self.api).path.removeprefix("/v1")

    def client_options(self) -> dict[str, Any]:
        """The measuring client's options (labs.client Options) for every stream: TLS, protocol."""
        return {"verify_tls": self.verify_tls, "api": self.api}

    def _http(self) -> httpx.AsyncClient:
        # The JSON GETs (/v1/models, the lab's records) are OpenAI's: the key as a Bearer token.
        headers = {**self.headers(), **bearer(self.api_key)}
        return httpx.AsyncClient(timeout=GET_TIMEOUT_S, headers=headers, verify=self.verify_tls)

    @staticmethod
    def new_request_id() -> str:
        return f"probe-{uuid.uuid4().hex}"

    # ---- what is behind the path ---------------------------------------------------------

    async def detect(self) -> None:
        """Ask the outermost entry which models it serves (and so who the origin is)."""
        models = await self._get_json(0, self.urls[0] + "/models", "list the models")
        data = models.get("data") if isinstance(models, dict) else None
        if not isinstance(data, list) or not data or not isinstance(data[0], dict):
            raise UnusableInput(f"{self.urls[0]}/models did not return an OpenAI model list")
        first = data[0]
        self.owner = str(first.get("owned_by", ""))
        self.origin = "streamlab" if self.owner == "streamlab" else "other"
        if self.model is None:
            self.model = str(first.get("id"))
        elif self.model not in {str(m.get("id")) for m in data if isinstance(m, dict)}:
            raise UnusableInput(f"--model {self.model}: {self.urls[0]} serves "
                                f"{', '.join(str(m.get('id')) for m in data if isinstance(m, dict))}")
        for hop in range(1, len(self.urls)):  # inner entries must lead to the same origin
            inner = await self._get_json(hop, self.urls[hop] + "/models", "list the models")
            listed = (inner or {}).get("data", []) if isinstance(inner, dict) else []
            owners = {str(m.get("owned_by", "")) for m in listed if isinstance(m, dict)}
            if self.owner not in owners:
                raise UnusableInput(f"{self.urls[hop]} does not lead to the origin behind {self.urls[0]} "
                                    f"(its models are owned by {', '.join(sorted(owners)) or 'nobody'}): "
                                    f"give inner entries of the same path")
        if self.origin == "streamlab":
            health = await self._try_json(entry_root(self.urls[0]) + "/healthz")
            if isinstance(health, dict) and isinstance(health.get("slots"), int):
                self.slots = health["slots"]

    async def record(self, hop: int, request_id: str) -> dict[str, Any] | None:
        """The origin's record of one request, read through entry `hop` (None: not readable)."""
        found = await self._try_json(f"{entry_root(self.urls[hop])}/lab/requests/{request_id}")
        ok = isinstance(found, dict) and found.get("id") == request_id
        if ok:
            self.records_ok[hop] = True
        return found if ok else None

    async def records_readable(self, hop: int) -> bool:
        """Whether `/lab/requests/` reaches the origin through entry `hop` (asked once)."""
        if hop not in self.records_ok:
            url = f"{entry_root(self.urls[hop])}/lab/requests/{self.new_request_id()}"
            try:
                async with self._http() as http:
                    response = await http.get(url)
                body = response.json()
                code = body.get("error", {}).get("code") if isinstance(body, dict) else None
            except (httpx.HTTPError, ValueError, AttributeError):
                code = None
            self.records_ok[hop] = code == "record_not_found"
        return self.records_ok[hop]

    async def _try_json(self, url: str) -> Any:
        try:
            async with self._http() as http:
                response = await http.get(url)
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        try:
            return response.json()
        except ValueError:
            return None

    async def _get_json(self, hop: int, url: str, what: str) -> Any:
        try:
            async with self._http() as http:
                response = await http.get(url)
        except httpx.HTTPError as exc:
            hint = (" (a self-signed certificate: --insecure)"
                    if "CERTIFICATE_VERIFY_FAILED" in str(exc) else "")
            raise UnusableInput(f"cannot {what} at {url}: {type(exc).__name__}: {exc}{hint}") from None
        if response.status_code in (401, 403):
            raise UnusableInput(f"{url} answered {response.status_code}: the path needs a key "
                                f"(--api-key-env VAR names the environment variable that holds it)")
        if response.status_code != 200:
            raise UnusableInput(f"cannot {what} at {url}: HTTP {response.status_code} "
                                f"{response.text[:200]!r}")
        try:
            return response.json()
        except ValueError:
            raise UnusableInput(f"{url} did not answer JSON: {response.text[:200]!r}") from None
