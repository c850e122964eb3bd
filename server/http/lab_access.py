"""Who may use the lab extension: the `lab` request fields and every endpoint under `/lab/`.

The lab knobs let a request hold a slot for a day (`pause_s`), so on a server reachable beyond
the machine they are a way to take it down. The policy:

* `--no-lab`: off entirely; a `lab` field gets 400, a `/lab/` path 404, as if neither existed.
* bound to loopback (127.0.0.0/8, ::1, localhost) without a token: open, as a lab server is.
* with a token (`--lab-token TOKEN` or `STREAMLAB_LAB_TOKEN`), wherever bound: a request must
  carry `X-Lab-Token: TOKEN`, else 403.
* bound beyond loopback without a token: refused (403) with how to enable it.

`LabGuard` covers every path under `/lab/` generically, whichever router serves it; the routes
of the API check a body's `lab` field with `LabAccess.check`.
"""
from __future__ import annotations

import hmac
import ipaddress
import json
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from server.errors import APIError

TOKEN_HEADER = "X-Lab-Token"
LAB_PATH_PREFIX = "/lab/"


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class LabAccess:
    enabled: bool = True
    token: str | None = None
    loopback: bool = True  # the server is bound to loopback only

    @classmethod
    def for_server(cls, enabled: bool, token: str | None, host: str) -> "LabAccess":
        return cls(enabled=enabled, token=token or None, loopback=is_loopback(host))

    def check(self, presented: str | None, what: str, *, param: str | None = None) -> None:
        """Raise APIError unless a request presenting this token may use `what`."""
        if not self.enabled:
            raise APIError(400, f"{what} is turned off on this server (--no-lab)", param=param,
                           code="lab_disabled")
        if self.token is None:
            if self.loopback:
                return
            raise APIError(403, f"{what} is refused on a server bound beyond loopback without a "
                           f"lab token: start the server with --lab-token TOKEN (or set "
                           f"STREAMLAB_LAB_TOKEN) and send the header {TOKEN_HEADER}: TOKEN",
                           type="permission_error", param=param, code="lab_token_not_configured")
        if presented is None:
            raise APIError(403, f"{what} needs the header {TOKEN_HEADER} (this server has a lab "
                           "token)", type="permission_error", param=param,
                           code="lab_token_required")
        if not hmac.compare_digest(presented.encode("utf-8", "replace"),
                                   self.token.encode("utf-8")):
            raise APIError(403, f"{what}: the {TOKEN_HEADER} header does not match the server's "
                           "lab token", type="permission_error", param=param,
                           code="lab_token_invalid")


def is_lab_path(path: str) -> bool:
    return path == LAB_PATH_PREFIX.rstrip("/") or path.startswith(LAB_PATH_PREFIX)


class LabGuard:
    """Every request under /lab/ passes LabAccess first; --no-lab makes them all 404."""

    def __init__(self, app: ASGIApp, access: LabAccess) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_lab_path(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if not self.access.enabled:
            error = APIError(404, f"no route for {scope.get('method', 'GET')} {path} (the lab "
                             "extension is turned off: --no-lab)", code="not_found")
        else:
            presented = next((v.decode("latin-1") for n, v in scope.get("headers", ())
                              if n == TOKEN_HEADER.lower().encode()), None)
            try:
                self.access.check(presented, f"the lab endpoint {path}")
            except APIError as exc:
                error = exc
            else:
                await self.app(scope, receive, send)
                return
        body = json.dumps(error.body()).encode()
        await send({"type": "http.response.start", "status": error.status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body, "more_body": False})
