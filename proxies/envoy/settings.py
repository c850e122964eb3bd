"""Envoy settings: every knob the catalogue switches, defaulting to Envoy 1.40's own defaults."""
from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, ClassVar, Literal, Optional

from pydantic import AfterValidator, Field, model_validator

from proxies.base import ProxySettings, setting
from proxies.errors import FALLBACK_CLIENT, FALLBACK_SERVER, ProxyError, errors_for, json_errors_setting
from proxies.tls import fill_certificate
from proxies.types import EnvoyDuration, FilePath, MimeType, Port

API = "https://www.envoyproxy.io/docs/envoy/v1.40.0/api-v3"
ROUTE = f"{API}/config/route/v3/route_components.proto#envoy-v3-api-field-config-route-v3-routeaction"
HCM = (f"{API}/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto"
       "#envoy-v3-api-field-extensions-filters-network-http-connection-manager-v3-httpconnectionmanager")
BREAKER = f"{API}/config/cluster/v3/circuit_breaker.proto#envoy-v3-api-msg-config-cluster-v3-circuitbreakers-thresholds"
COMPRESSOR = f"{API}/extensions/filters/http/compressor/v3/compressor.proto"
CLUSTER = f"{API}/config/cluster/v3/cluster.proto#envoy-v3-api-field-config-cluster-v3-cluster"
LISTENER = f"{API}/config/listener/v3/listener.proto#envoy-v3-api-field-config-listener-v3-listener"
PROTOCOL = f"{API}/config/core/v3/protocol.proto#envoy-v3-api-field-config-core-v3-httpprotocoloptions"
LUA = "https://www.envoyproxy.io/docs/envoy/v1.40.0/configuration/http/http_filters/lua_filter"
BUFFER = f"{API}/extensions/filters/http/buffer/v3/buffer.proto"
EXT_PROC = "https://www.envoyproxy.io/docs/envoy/v1.40.0/configuration/http/http_filters/ext_proc_filter"
SSE_TO_METADATA = "https://www.envoyproxy.io/docs/envoy/v1.40.0/configuration/http/http_filters/sse_to_metadata_filter"
ADMIN = f"{API}/config/bootstrap/v3/bootstrap.proto#envoy-v3-api-field-config-bootstrap-v3-admin-allow-paths"
ADMIN_ADDRESS = f"{API}/config/core/v3/address.proto#envoy-v3-api-msg-config-core-v3-pipe"
OVERLOAD = "https://www.envoyproxy.io/docs/envoy/v1.40.0/configuration/operations/overload_manager/overload_manager"
TLS = f"{API}/extensions/transport_sockets/tls/v3"
DOWNSTREAM_TLS = f"{TLS}/tls.proto#envoy-v3-api-msg-extensions-transport-sockets-tls-v3-downstreamtlscontext"
CERTIFICATE = f"{TLS}/common.proto#envoy-v3-api-field-extensions-transport-sockets-tls-v3-tlscertificate"


def _admin_path(value: str) -> str:
    if not re.fullmatch(r"/[a-z_]{1,32}(?:/[a-z_]{1,32}){0,3}", value):
        raise ValueError(f"{value!r} is not an admin path (for example '/ready')")
    return value


# Statuses Envoy answers on its own, each with its entry in proxies/errors.py; any other local
# reply gets the generic client or server entry by its class.
ENVOY_OWN_ERRORS = (400, 403, 408, 413, 431, 500, 501, 502, 503, 504)
def _admin_socket(value: str) -> str:
    # A socket's path must fit sun_path (108 bytes) once resolved in the working folder.
    if not re.fullmatch(r"[A-Za-z0-9_./-]{1,64}", value) or value.endswith("/") or ".." in value:
        raise ValueError(f"{value!r} is not a socket path (for example 'admin.sock' or '/run/envoy/admin.sock')")
    return value


AdminSocket = Annotated[str, AfterValidator(_admin_socket)]
# An admin path, served with any query string; letters, `_` and `/` only, so it needs no
# escaping in the regex the template builds from it.
AdminPath = Annotated[str, AfterValidator(_admin_path)]

# What the compressor compresses when content_type is left empty.
ENVOY_DEFAULT_COMPRESSED_TYPES = (
    "application/javascript", "application/json", "application/xhtml+xml", "image/svg+xml",
    "text/css", "text/html", "text/plain", "text/xml")


# Envoy's router retry conditions (x-envoy-retry-on and x-envoy-retry-grpc-on).
RetryOn = Literal["5xx", "gateway-error", "reset", "reset-before-request", "connect-failure",
                  "envoy-ratelimited", "retriable-4xx", "refused-stream", "retriable-status-codes",
                  "retriable-headers", "cancelled", "deadline-exceeded", "internal",
                  "resource-exhausted", "unavailable"]


def _count(default: int, doc: str, url: str) -> Any:
    return Field(default, ge=0, le=100_000_000, description=f"{doc} ({url})")


class EnvoySettings(ProxySettings):
    proxy: ClassVar = "envoy"
    template: ClassVar[str] = "envoy/envoy.yaml.j2"
    config_name: ClassVar[str] = "envoy.yaml"
    tls_fields: ClassVar[tuple[str, ...]] = ("certificate_chain", "private_key")

    admin_port: Port = Field(9901, description="admin interface port (stats, readiness), on 127.0.0.1")
    admin_socket: Optional[AdminSocket] = setting(
        None, "the admin on this Unix socket (mode 0600), relative to Envoy's working folder, "
              "instead of admin_port: no TCP port a web page or another user could reach "
              "(None: on admin_port)", ADMIN_ADDRESS)

    # Timeouts.
    route_timeout: EnvoyDuration = setting(
        "15s", "whole-response deadline from the request's end, streaming included: a longer "
               "generation is cut (flag UT). 0s disables it", f"{ROUTE}-timeout")
    route_idle_timeout: Optional[EnvoyDuration] = setting(
        None, "per-route silence limit, overriding stream_idle_timeout (None: not set)",
        f"{ROUTE}-idle-timeout")
    stream_idle_timeout: EnvoyDuration = setting(
        "300s", "longest silence on a stream in either direction (flag SI)", f"{HCM}-stream-idle-timeout")
    request_timeout: EnvoyDuration = setting(
        "0s", "time to receive the whole request, body included; disarmed once the response "
              "starts, so it never bounds a stream (0s: disabled)", f"{HCM}-request-timeout")
    request_headers_timeout: EnvoyDuration = setting(
        "0s", "time to receive the request headers, from their first byte (a header trickle is "
              "closed; 0s: disabled)", f"{HCM}-request-headers-timeout")
    downstream_idle_timeout: Optional[EnvoyDuration] = setting(
        None, "a client connection with no request in flight (silent, or idle between "
              "requests) is closed after this (None: Envoy's 1h)", f"{PROTOCOL}-idle-timeout")
    delayed_close_timeout: EnvoyDuration = setting(
        "1s", "wait for the client to read the last bytes before closing", f"{HCM}-delayed-close-timeout")
    connect_timeout: EnvoyDuration = setting(
        "5s", "time to connect to the upstream", f"{CLUSTER}-connect-timeout")
    upstream_idle_timeout: Optional[EnvoyDuration] = setting(
        None, "idle upstream connections are closed after this (None: Envoy's 1h); keep it below "
              "the server's keep-alive timeout", f"{PROTOCOL}-idle-timeout")
    retry_on: tuple[RetryOn, ...] = setting(
        (), "route retry_policy retry_on (none: no retries, Envoy's default); Istio's sidecars "
            "default to connect-failure, refused-stream, unavailable, cancelled, "
            "retriable-status-codes with 2 retries on 503", f"{ROUTE}-retry-policy")
    num_retries: int = Field(1, ge=0, le=10, description="retry_policy num_retries (with retry_on)")
    retriable_status_codes: tuple[Annotated[int, Field(ge=100, le=599)], ...] = Field(
        (), description="retry_policy retriable_status_codes (with retry_on retriable-status-codes)")
    upstream_http2: bool = setting(
        False, "speak HTTP/2 (cleartext, prior knowledge) to the upstream: a mesh's outbound "
               "sidecar to the inbound one", f"{API}/extensions/upstreams/http/v3/http_protocol_options.proto"
               "#envoy-v3-api-field-extensions-upstreams-http-v3-httpprotocoloptions-explicithttpconfig")

    # Compression.
    compressor: bool = setting(False, "gzip compressor filter", COMPRESSOR)
    compressor_content_types: tuple[MimeType, ...] = setting(
        ENVOY_DEFAULT_COMPRESSED_TYPES, "types the compressor compresses", COMPRESSOR)

    # Circuit breakers on the upstream cluster (exceeding them: instant 503, flag UO).
    max_connections: int = _count(1024, "upstream connections", f"{BREAKER}-max-connections")
    max_pending_requests: int = _count(1024, "requests waiting for a connection", f"{BREAKER}-max-pending-requests")
    max_requests: int = _count(1024, "requests in flight to the upstream", f"{BREAKER}-max-requests")
    max_retries: int = _count(3, "retries in flight", f"{BREAKER}-max-retries")
    max_downstream_connections: Optional[int] = Field(
        None, ge=1, le=100_000_000,
        description=f"process-wide downstream connection limit via the overload manager (None: unlimited) ({OVERLOAD})")

    # Buffers.
    listener_buffer_limit_bytes: int = Field(
        1_048_576, ge=1024, le=1 << 30,
        description=f"per-connection buffer limit, client side ({LISTENER}-per-connection-buffer-limit-bytes)")
    cluster_buffer_limit_bytes: int = Field(
        1_048_576, ge=1024, le=1 << 30,
        description=f"per-connection buffer limit, upstream side ({CLUSTER}-per-connection-buffer-limit-bytes)")

    # Requests Envoy refuses itself, how it says so, and who may reach its admin.
    max_request_bytes: Optional[int] = Field(
        None, ge=1, le=1 << 32,
        description=f"the buffer filter reads each request body, up to this size, before it "
                    f"goes upstream; a larger one gets 413 (None: no filter, no limit) ({BUFFER})")
    json_errors: bool = json_errors_setting("Envoy", "plain text", f"{HCM}-local-reply-config")
    admin_allow_paths: tuple[AdminPath, ...] = setting(
        (), "the only admin paths served (empty: all, Envoy's default); leave out the "
            "mutating ones (/quitquitquit, ...) that a web page could POST to", ADMIN)

    # TLS with HTTP/2 on the listener (ALPN h2, http/1.1; the AUTO codec follows ALPN). Without
    # certificate paths, a self-signed one for 127.0.0.1 is made at run time.
    tls_http2: bool = setting(
        False, "a TLS transport socket offering h2 and http/1.1 by ALPN (off: plain text, where "
               "the AUTO codec still accepts h2c)", DOWNSTREAM_TLS)
    certificate_chain: Optional[FilePath] = setting(
        None, "certificate file, PEM, the chain after it (None with tls_http2: a self-signed one "
              "made at run time)", f"{CERTIFICATE}-certificate-chain")
    private_key: Optional[FilePath] = setting(
        None, "its private key, PEM (named with the certificate, or both left unset)",
        f"{CERTIFICATE}-private-key")

    @model_validator(mode="before")
    @classmethod
    def _certificate_when_tls(cls, data: Any) -> Any:
        return fill_certificate(data, "tls_http2", *cls.tls_fields)

    # A stand-in for a WAF that inspects whole response bodies.
    body_inspection: bool = setting(
        False, "a Lua filter that reads each whole response body before releasing it", LUA)
    body_inspection_skip_event_stream: bool = setting(
        False, "let text/event-stream responses through uninspected", LUA)

    # Token accounting (envoy-token-accounting): an ext_proc processor that reads the response body
    # (proxies/envoy/token_counter.py), or the observe-only SSE-to-metadata filter.
    ext_proc_body_mode: Optional[Literal["BUFFERED", "STREAMED"]] = setting(
        None, "send each response body to the ext_proc processor on 127.0.0.1:ext_proc_port, "
              "whole (BUFFERED: held to its end) or chunk by chunk (STREAMED) (None: no ext_proc)", EXT_PROC)
    ext_proc_port: Port = Field(9903, description=f"the ext_proc processor's gRPC port, on 127.0.0.1 ({EXT_PROC})")
    sse_to_metadata: bool = setting(
        False, "read `usage.completion_tokens` from the SSE events as they pass, into dynamic "
               "metadata (streamlab.tokens) the access log writes as tokens=", SSE_TO_METADATA)

    @property
    def accounting_log_fields(self) -> str:
        """The access log's fields for the token counts: the processor's, the filter's."""
        fields = ""
        if self.ext_proc_body_mode:
            fields += " counted=%DYNAMIC_METADATA(streamlab.ext_proc:completion_tokens)%"
            fields += " split_events=%DYNAMIC_METADATA(streamlab.ext_proc:split_events)%"
        if self.sse_to_metadata:
            fields += " tokens=%DYNAMIC_METADATA(streamlab.tokens:completion_tokens)%"
        return fields

    @property
    def upstream_discovery(self) -> str:
        """STATIC for an IP address, STRICT_DNS for a host name (a chain inside containers)."""
        try:
            ipaddress.ip_address(self.upstream_host)
        except ValueError:
            return "STRICT_DNS"
        return "STATIC"

    @property
    def compressor_content_type_regex(self) -> str:
        """RE2 for `content_type_matcher`: the listed types, optionally followed by parameters."""
        alternatives = "|".join(re.escape(content_type) for content_type in self.compressor_content_types)
        return rf"^({alternatives})(\s*;.*)?$"

    @property
    def error_pages(self) -> list[ProxyError]:
        return errors_for(ENVOY_OWN_ERRORS) if self.json_errors else []

    @property
    def error_fallbacks(self) -> tuple[ProxyError, ProxyError]:
        """(below 500, from 500) for local replies whose status has no entry of its own."""
        return FALLBACK_CLIENT, FALLBACK_SERVER
