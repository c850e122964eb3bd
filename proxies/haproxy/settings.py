"""HAProxy settings: every knob the catalogue switches, defaulting to HAProxy 2.6's own defaults."""
from __future__ import annotations

from typing import ClassVar, Literal, Optional

from pydantic import Field

from proxies.base import ProxySettings, setting
from proxies.cors import CorsSettings
from proxies.errors import ERRORS, ProxyError, errors_for, json_errors_setting
from proxies.types import HaproxyDuration, MimeType, Port

DOCS = "https://docs.haproxy.org/2.6/configuration.html"

Maxconn = Optional[int]
# Statuses HAProxy answers on its own once a request is parsed (`http-error` accepts these and a
# few more). 408 is not among them: see `timeout_http_request`'s comment in the template.
HAPROXY_OWN_ERRORS = (400, 403, 413, 500, 501, 502, 503, 504)


class HaproxySettings(ProxySettings, CorsSettings):
    proxy: ClassVar = "haproxy"
    template: ClassVar[str] = "haproxy/haproxy.cfg.j2"
    config_name: ClassVar[str] = "haproxy.cfg"

    # Concurrency: each stream holds one frontend and one backend connection for its whole life.
    maxconn_global: Maxconn = Field(
        None, ge=1, le=1_000_000,
        description=f"process-wide connection limit (None: derived from `ulimit -n`) ({DOCS}#3.2-maxconn)")
    maxconn_frontend: Maxconn = Field(
        None, ge=1, le=1_000_000,
        description=f"frontend limit; extra connections wait in the accept queue, unanswered "
                    f"(None: the global maxconn) ({DOCS}#4.2-maxconn)")
    maxconn_server: Maxconn = Field(
        None, ge=1, le=1_000_000,
        description=f"concurrent requests sent to the server; the rest queue in HAProxy "
                    f"(None: unlimited) ({DOCS}#5.2-maxconn)")

    # Reloads (master-worker, SIGUSR2): the old worker finishes its streams, unless this ends it.
    hard_stop_after: Optional[HaproxyDuration] = setting(
        None, "after a reload, how long the old worker may keep serving (None: until its "
              "connections end): a stream still running then is cut", f"{DOCS}#3.1-hard-stop-after")

    # Latency of each event.
    http_no_delay: bool = setting(
        False, "send each chunk at once; without it HAProxy sends with MSG_MORE and events "
               "leave in groups", f"{DOCS}#4.2-option%20http-no-delay")
    abortonclose: bool = setting(
        False, "abort the server request as soon as the client closes (otherwise noticed only "
               "when a write fails)", f"{DOCS}#4.2-option%20abortonclose")

    # Compression.
    compression_algo: Optional[Literal["gzip", "deflate", "raw-deflate", "identity"]] = setting(
        None, "compression algorithm (None: no compression)", f"{DOCS}#4.2-compression")
    compression_types: tuple[MimeType, ...] = setting(
        (), "MIME types to compress (empty: every type)", f"{DOCS}#4.2-compression")

    # Timeouts (HAProxy has none by default and warns; None keeps it that way).
    timeout_connect: Optional[HaproxyDuration] = setting(
        None, "time to connect to the server", f"{DOCS}#4.2-timeout%20connect")
    timeout_client: Optional[HaproxyDuration] = setting(
        None, "client inactivity: a pause in the upload, or a client that stops reading "
              "(a silence of the server does not start it)",
        f"{DOCS}#4.2-timeout%20client")
    timeout_server: Optional[HaproxyDuration] = setting(
        None, "longest silence from the server: a longer one cuts the stream",
        f"{DOCS}#4.2-timeout%20server")
    timeout_tunnel: Optional[HaproxyDuration] = setting(
        None, "inactivity of tunnelled (upgraded/CONNECT) connections", f"{DOCS}#4.2-timeout%20tunnel")
    timeout_http_request: Optional[HaproxyDuration] = setting(
        None, "time to receive the whole request headers, from the connection's first byte or the "
              "end of the previous response (a header trickle is closed with 408)",
        f"{DOCS}#4.2-timeout%20http-request")
    timeout_http_keep_alive: Optional[HaproxyDuration] = setting(
        None, "idle time allowed for the next request on a keep-alive connection (None: "
              "timeout http-request applies)", f"{DOCS}#4.2-timeout%20http-keep-alive")

    timeout_body: Optional[HaproxyDuration] = setting(
        None, "`http-request wait-for-body time`: the whole request body (or a full buffer, "
              "`tune.bufsize`) must arrive within this, before HAProxy connects to the server; "
              "else 408 (None: the body is forwarded as it comes)", f"{DOCS}#4.2-http-request%20wait-for-body")

    # Requests HAProxy refuses itself, and how it says so.
    max_body_bytes: Optional[int] = Field(
        None, ge=1, le=1 << 40,
        description=f"requests whose Content-Length is above this get 413 before the server sees "
                    f"them (None: no limit) ({DOCS}#4.2-http-request%20deny)")
    refuse_chunked: bool = setting(
        False, "answer 411 to a request body without a Content-Length (chunked): HAProxy cannot "
               "count one, so `max_body_bytes` would not stop it", f"{DOCS}#4.2-http-request%20deny")
    json_errors: bool = json_errors_setting("HAProxy", "HTML pages", f"{DOCS}#4.2-http-error")

    # Server-side connection reuse.
    http_reuse: Literal["never", "safe", "aggressive", "always"] = setting(
        "safe", "when idle server connections are shared between requests", f"{DOCS}#4.2-http-reuse")

    # Replicas: an MCP origin runs several (the model server runs once), and which one a request
    # reaches decides whether its session is known there.
    upstream_replica_ports: tuple[Port, ...] = Field(
        (), max_length=7, description="further replicas of the upstream, each a `server` line of its own on "
        f"the upstream's host at these ports ({DOCS}#4.2-server)", json_schema_extra={"docs": f"{DOCS}#4.2-server"})
    balance: Literal["roundrobin", "hdr(Mcp-Session-Id)", "source"] = setting(
        "roundrobin", "how a request picks a server: in turn, by a hash of the `Mcp-Session-Id` header "
                      "(a request without it, such as initialize, goes round-robin), or by the client's address",
        f"{DOCS}#4.2-balance")
    session_stick_table: bool = setting(
        False, "learn each `Mcp-Session-Id` from the response that hands it out and send every request "
               "carrying it to that server (a stick table: `stick store-response` / `stick match`)",
        f"{DOCS}#4.2-stick%20store-response")
    affinity_cookie: bool = setting(
        False, "insert a cookie naming the server that answered, and send a request carrying it back there "
               "(for clients that keep cookies)", f"{DOCS}#4.2-cookie")

    @property
    def length_required(self) -> ProxyError:
        """The 411 `refuse_chunked` answers (`http-request deny` carries its own body)."""
        return ERRORS[411]

    @property
    def error_pages(self) -> list[ProxyError]:
        return errors_for(HAPROXY_OWN_ERRORS) if self.json_errors else []
