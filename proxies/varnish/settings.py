"""Varnish settings: the knobs the CDN scenarios switch, defaulting to Varnish 7.1's own behaviour.

Varnish is a cache: by default (its built-in VCL) a GET answer without `Cache-Control` is stored
for `default_ttl` (120 s) and served to the next client whole. Timeouts towards the backend are
backend attributes in VCL; the client-side session limits are `sess.*` variables set in vcl_recv.
"""
from __future__ import annotations

from typing import ClassVar, Optional

from pydantic import Field, model_validator
from typing_extensions import Self

from proxies.base import ProxySettings, setting
from proxies.errors import ProxyError, errors_for, json_errors_setting
from proxies.types import VarnishDuration

VCL = "https://varnish-cache.org/docs/7.1/reference/vcl.html"
VCL_VAR = "https://varnish-cache.org/docs/7.1/reference/vcl-var.html"
BUILTIN = "https://varnish-cache.org/docs/7.1/users-guide/vcl-built-in-code.html"
PARAMS = "https://varnish-cache.org/docs/7.1/reference/varnishd.html#list-of-parameters"
STREAMING = "https://varnish-cache.org/docs/7.1/users-guide/vcl-backends.html"
# Statuses Varnish makes itself: synth (413 here, 400 for a bad request) and backend failures (503).
VARNISH_OWN_ERRORS = (413, 503)


class VarnishSettings(ProxySettings):
    proxy: ClassVar = "varnish"
    template: ClassVar[str] = "varnish/varnish.vcl.j2"
    config_name: ClassVar[str] = "varnish.vcl"

    # Caching: what the built-in VCL does with a GET stream the server did not mark uncacheable.
    pass_event_streams: bool = setting(
        False, "`return (pass)` for requests that accept text/event-stream: never cached, never "
               "coalesced on the waiting list (off: the built-in VCL looks the GET up in the cache)",
        f"{BUILTIN}")
    pass_api_requests: bool = setting(
        False, "`return (pass)` for every request under /v1/: an API answer is for one client and "
               "changes while it runs (a stored response polled with GET /v1/responses/{id}), so "
               "none is looked up in the cache (off: the built-in VCL caches a GET answer without "
               "Cache-Control for default_ttl, 120 s, unless the request carries Authorization)",
        f"{BUILTIN}")
    do_stream: bool = setting(
        True, "deliver the body while it is fetched (off: the whole answer is stored first)",
        f"{VCL_VAR}#beresp-do-stream")

    # Towards the backend (backend attributes; the defaults are the runtime parameters').
    connect_timeout: VarnishDuration = setting(
        "3.5s", "time to open the backend connection", f"{VCL}#backend-definition")
    first_byte_timeout: VarnishDuration = setting(
        "60s", "time to wait for the first byte (the headers) from the backend: a longer prefill is a 503",
        f"{VCL}#backend-definition")
    between_bytes_timeout: VarnishDuration = setting(
        "60s", "longest silence between two reads from the backend: a longer one cuts the stream",
        f"{VCL}#backend-definition")

    # Towards the client (sess.* variables; the defaults are the runtime parameters').
    timeout_idle: Optional[VarnishDuration] = setting(
        None, "how long a client connection may stay idle between requests (None: the parameter "
              "timeout_idle, 5 s; the first request's headers are bounded by the parameter alone)",
        f"{VCL_VAR}#sess-timeout-idle")
    send_timeout: Optional[VarnishDuration] = setting(
        None, "the longest a whole response may take to send (None: the parameter send_timeout, "
              "600 s): a limit on a stream's total length", f"{VCL_VAR}#sess-send-timeout")
    idle_send_timeout: Optional[VarnishDuration] = setting(
        None, "the longest pause between two writes to the client (None: the parameter "
              "idle_send_timeout, 60 s)", f"{VCL_VAR}#sess-idle-send-timeout")

    # Requests Varnish refuses itself, and how it says so.
    max_body_bytes: Optional[int] = Field(
        None, ge=1, le=1 << 40,
        description=f"requests whose Content-Length is above this get 413 from Varnish (None: no "
                    f"limit) ({VCL_VAR}#req-http)")
    cache_req_body: bool = setting(
        False, "read every request body whole (std.cache_req_body, at most max_body_bytes) before "
               "the backend fetch: a chunked body over the limit gets 413 too, and a slow upload "
               "holds no backend connection while it trickles (off: the body is forwarded as it "
               "comes, after the backend connection is opened)",
        "https://varnish-cache.org/docs/7.1/reference/vmod_std.html#std-cache-req-body")
    json_errors: bool = json_errors_setting("Varnish", "its HTML guru meditation page",
                                            f"{VCL}#vcl-synth")
    hide_version: bool = setting(
        False, "no `Via: 1.1 varnish (Varnish/7.1)` on answers, its own ones included (Varnish adds "
               "it by default)", f"{VCL_VAR}#resp-http")

    @model_validator(mode="after")
    def _body_limit_to_cache(self) -> Self:
        if self.cache_req_body and self.max_body_bytes is None:
            raise ValueError("cache_req_body reads at most max_body_bytes: set it")
        return self

    @property
    def error_pages(self) -> list[ProxyError]:
        return errors_for(VARNISH_OWN_ERRORS) if self.json_errors else []
