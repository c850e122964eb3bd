"""Every setting renders and validates with the real binary; no setting can inject a directive."""
from __future__ import annotations

from typing import Any

import jinja2
import pytest
from pydantic import ValidationError

from proxies import (ApacheSettings, TraefikSettings, CaddySettings, ConfigInvalid, EnvoySettings, HaproxySettings,
                     NginxSettings, ProxySettings, VarnishSettings, render, validate)
from proxies.kinds import KINDS
from proxies.rendering import render_template
from proxies.tls import self_signed

ADDRESSING: dict[str, Any] = {
    "listen_host": "127.0.0.2", "listen_port": 18080, "upstream_host": "localhost",
    "upstream_port": 18000}
# The MCP route (proxies/fixed_mcp.py), every proxy's: on, and with the proxy's own balancing.
MCP_ROUTE: dict[str, dict[str, Any]] = {
    "mcp_ports": {"mcp_ports": (18001, 18002)}, "mcp_affinity": {"mcp_ports": (18001, 18002), "mcp_affinity": False}}

# One non-default value per field (with what it needs to show up in the config).
NON_DEFAULT: dict[type[ProxySettings], dict[str, dict[str, Any]]] = {
    NginxSettings: {
        **{name: {name: value} for name, value in ADDRESSING.items()}, **MCP_ROUTE,
        "worker_processes": {"worker_processes": "auto"},
        "worker_connections": {"worker_connections": 4096},
        "worker_rlimit_nofile": {"worker_rlimit_nofile": 8192},
        "listen_backlog": {"listen_backlog": 4096},
        "worker_shutdown_timeout": {"worker_shutdown_timeout": 3},
        "tls_http2": {"tls_http2": True},  # a certificate made at run time (proxies/tls.py)
        "ssl_certificate": {"tls_http2": True, "ssl_certificate": self_signed()[0],
                            "ssl_certificate_key": self_signed()[1]},
        "ssl_certificate_key": {"tls_http2": True, "ssl_certificate": self_signed()[0],
                                "ssl_certificate_key": self_signed()[1]},
        "ssl_protocols": {"tls_http2": True, "ssl_protocols": ("TLSv1.2", "TLSv1.3")},
        "ssl_session_cache": {"tls_http2": True, "ssl_session_cache": "shared:SSL:10m"},
        "http2_max_concurrent_streams": {"tls_http2": True, "http2_max_concurrent_streams": 256},
        "proxy_buffering": {"proxy_buffering": False},
        "proxy_request_buffering": {"proxy_request_buffering": False},
        "proxy_buffer_size": {"proxy_buffer_size": "8k"},
        "proxy_buffers_count": {"proxy_buffers_count": 16},
        "proxy_buffers_size": {"proxy_buffers_size": "8k", "proxy_busy_buffers_size": "16k"},
        "proxy_busy_buffers_size": {"proxy_busy_buffers_size": "12k"},
        "client_max_body_size": {"client_max_body_size": "8m"},
        "proxy_http_version": {"proxy_http_version": "1.1"},
        "proxy_connection_header": {"proxy_connection_header": ""},
        "upstream_keepalive": {"upstream_keepalive": 16},
        "upstream_keepalive_timeout": {"upstream_keepalive": 16, "upstream_keepalive_timeout": 4},
        "upstream_peers": {"upstream_peers": 2},
        "upstream_replica_ports": {"upstream_replica_ports": (8001, 8002)},
        "upstream_hash": {"upstream_hash": "$http_mcp_session_id consistent", "upstream_replica_ports": (8001,)},
        "proxy_cache_valid": {"proxy_cache_valid": "1m"},
        "pass_accel_buffering": {"pass_accel_buffering": True},
        "proxy_next_upstream": {"proxy_next_upstream": ("error", "timeout", "http_502", "non_idempotent")},
        "proxy_connect_timeout": {"proxy_connect_timeout": "5s"},
        "proxy_read_timeout": {"proxy_read_timeout": 1.5},
        "proxy_send_timeout": {"proxy_send_timeout": "2m"},
        "proxy_ignore_client_abort": {"proxy_ignore_client_abort": True},
        "client_header_timeout": {"client_header_timeout": "10s"},
        "client_body_timeout": {"client_body_timeout": 30},
        "limit_conn_per_client": {"limit_conn_per_client": 1024},
        "keepalive_timeout": {"keepalive_timeout": "60s"},
        "server_tokens": {"server_tokens": False},
        "json_errors": {"json_errors": True},
        "modsecurity_note": {"modsecurity_note": True},
        "gzip": {"gzip": True},
        "gzip_types": {"gzip_types": ("text/event-stream", "application/json")},
        "cors_allow_origin": {"cors_allow_origin": "https://app.example.com"},
        "cors_allow_headers": {"cors_allow_origin": "*", "cors_allow_headers": ("content-type", "authorization")},
        "cors_expose_headers": {"cors_allow_origin": "*", "cors_expose_headers": ("Mcp-Session-Id",)},
    },
    HaproxySettings: {
        **{name: {name: value} for name, value in ADDRESSING.items()}, **MCP_ROUTE,
        "cors_allow_origin": {"cors_allow_origin": "https://app.example.com"},
        "cors_allow_headers": {"cors_allow_origin": "*", "cors_allow_headers": ("content-type", "authorization")},
        "cors_expose_headers": {"cors_allow_origin": "*", "cors_expose_headers": ("Mcp-Session-Id",)},
        "maxconn_global": {"maxconn_global": 4096},
        "maxconn_frontend": {"maxconn_frontend": 32},
        "maxconn_server": {"maxconn_server": 8},
        "hard_stop_after": {"hard_stop_after": "3s"},
        "http_no_delay": {"http_no_delay": True},
        "abortonclose": {"abortonclose": True},
        "compression_algo": {"compression_algo": "gzip"},
        "compression_types": {"compression_algo": "deflate", "compression_types": ("text/event-stream",)},
        "timeout_connect": {"timeout_connect": "5s"},
        "timeout_client": {"timeout_client": 0.5},
        "timeout_server": {"timeout_server": "1500ms"},
        "timeout_tunnel": {"timeout_tunnel": "1h"},
        "timeout_http_request": {"timeout_http_request": "10s"},
        "timeout_http_keep_alive": {"timeout_http_keep_alive": 60},
        "max_body_bytes": {"max_body_bytes": 8 * 1024 * 1024},
        "timeout_body": {"timeout_body": "60s"},
        "refuse_chunked": {"refuse_chunked": True},
        "json_errors": {"json_errors": True},
        "http_reuse": {"http_reuse": "never"},
        "upstream_replica_ports": {"upstream_replica_ports": (8001, 8002)},
        "balance": {"balance": "hdr(Mcp-Session-Id)", "upstream_replica_ports": (8001,)},
        "session_stick_table": {"session_stick_table": True, "upstream_replica_ports": (8001,)},
        "affinity_cookie": {"affinity_cookie": True, "upstream_replica_ports": (8001,)},
    },
    EnvoySettings: {
        **{name: {name: value} for name, value in ADDRESSING.items()}, **MCP_ROUTE,
        "admin_port": {"admin_port": 19901},
        "admin_socket": {"admin_socket": "admin.sock"},
        "route_timeout": {"route_timeout": 0},
        "route_idle_timeout": {"route_idle_timeout": "300s"},
        "stream_idle_timeout": {"stream_idle_timeout": 1.25},
        "request_timeout": {"request_timeout": "60s"},
        "request_headers_timeout": {"request_headers_timeout": 10},
        "downstream_idle_timeout": {"downstream_idle_timeout": "60s"},
        "max_request_bytes": {"max_request_bytes": 8 * 1024 * 1024},
        "json_errors": {"json_errors": True},
        "admin_allow_paths": {"admin_allow_paths": ("/ready", "/stats/prometheus")},
        "delayed_close_timeout": {"delayed_close_timeout": "0.5s"},
        "connect_timeout": {"connect_timeout": "0.25s"},
        "upstream_idle_timeout": {"upstream_idle_timeout": 4},
        "upstream_http2": {"upstream_http2": True},
        # Istio's sidecar default retry policy.
        "retry_on": {"retry_on": ("connect-failure", "refused-stream", "unavailable", "cancelled",
                                  "retriable-status-codes")},
        "num_retries": {"retry_on": ("5xx",), "num_retries": 2},
        "retriable_status_codes": {"retry_on": ("retriable-status-codes",), "retriable_status_codes": (503,)},
        "compressor": {"compressor": True},
        "compressor_content_types": {"compressor": True, "compressor_content_types": ("text/event-stream",)},
        "max_connections": {"max_connections": 4},
        "max_pending_requests": {"max_pending_requests": 0},
        "max_requests": {"max_requests": 2},
        "max_retries": {"max_retries": 0},
        "max_downstream_connections": {"max_downstream_connections": 10_000},
        "listener_buffer_limit_bytes": {"listener_buffer_limit_bytes": 32768},
        "cluster_buffer_limit_bytes": {"cluster_buffer_limit_bytes": 65536},
        "body_inspection": {"body_inspection": True},
        "body_inspection_skip_event_stream": {"body_inspection": True, "body_inspection_skip_event_stream": True},
        "ext_proc_body_mode": {"ext_proc_body_mode": "STREAMED"},
        "ext_proc_port": {"ext_proc_body_mode": "BUFFERED", "ext_proc_port": 19903},
        "sse_to_metadata": {"sse_to_metadata": True},
        "tls_http2": {"tls_http2": True},  # a certificate made at run time (proxies/tls.py)
        "certificate_chain": {"tls_http2": True, "certificate_chain": self_signed()[0],
                              "private_key": self_signed()[1]},
        "private_key": {"tls_http2": True, "certificate_chain": self_signed()[0],
                        "private_key": self_signed()[1]},
    },
    VarnishSettings: {
        **{name: {name: value} for name, value in ADDRESSING.items()}, **MCP_ROUTE,
        "pass_event_streams": {"pass_event_streams": True},
        "pass_api_requests": {"pass_api_requests": True},
        "do_stream": {"do_stream": False},
        "connect_timeout": {"connect_timeout": "5s"},
        "first_byte_timeout": {"first_byte_timeout": 2},
        "between_bytes_timeout": {"between_bytes_timeout": 2.5},
        "timeout_idle": {"timeout_idle": 60},
        "send_timeout": {"send_timeout": "1h"},
        "idle_send_timeout": {"idle_send_timeout": "60s"},
        "max_body_bytes": {"max_body_bytes": 8 * 1024 * 1024},
        "cache_req_body": {"max_body_bytes": 8 * 1024 * 1024, "cache_req_body": True},
        "json_errors": {"json_errors": True},
        "hide_version": {"hide_version": True},
    },
    ApacheSettings: {
        **{name: {name: value} for name, value in ADDRESSING.items()}, **MCP_ROUTE,
        "timeout": {"timeout": 30},
        "proxy_timeout": {"proxy_timeout": 2},
        "flushpackets": {"flushpackets": "on"},
        "deflate_types": {"deflate_types": ("text/event-stream",)},
        "request_header_timeout": {"request_header_timeout": 10},
        "request_body_timeout": {"request_body_timeout": 60},
        "keepalive_timeout": {"keepalive_timeout": 60},
        "limit_request_body": {"limit_request_body": 8 * 1024 * 1024},
        "refuse_chunked": {"refuse_chunked": True},
        "json_errors": {"json_errors": True},
        "hide_version": {"hide_version": True},
        "max_request_workers": {"max_request_workers": 1000},
        # The WAF's knobs are written only with the module loaded.
        "modsecurity": {"modsecurity": "DetectionOnly"},
        "modsecurity_crs": {"modsecurity": "On", "modsecurity_crs": True},
        "modsecurity_request_body_access": {"modsecurity": "On", "modsecurity_request_body_access": True},
        "modsecurity_response_body_access": {"modsecurity": "On", "modsecurity_response_body_access": True},
        "modsecurity_response_body_mime_types": {"modsecurity": "On", "modsecurity_response_body_mime_types":
                                                 ("text/html", "text/event-stream")},
        "modsecurity_response_body_limit": {"modsecurity": "On", "modsecurity_response_body_limit": 4096},
        "modsecurity_response_body_limit_action": {"modsecurity": "On",
                                                   "modsecurity_response_body_limit_action": "ProcessPartial"},
        "modsecurity_lab_rules": {"modsecurity": "On", "modsecurity_lab_rules": True},
        "modsecurity_request_body_limit": {"modsecurity": "On", "modsecurity_request_body_limit": 8 * 1024 * 1024},
        "modsecurity_audit_log": {"modsecurity": "On", "modsecurity_audit_log": True},
        # Rendered switched off (LoadModule commented, <IfModule>): validates without the module too.
        "modsecurity_switchable": {"modsecurity": "On", "modsecurity_crs": True, "modsecurity_switchable": True},
    },
    CaddySettings: {
        **{name: {name: value} for name, value in ADDRESSING.items()}, **MCP_ROUTE,
        "encode": {"encode": ("gzip", "zstd")},
        "encode_skip_event_streams": {"encode": ("gzip",), "encode_skip_event_streams": True},
        "encode_types": {"encode": ("gzip", "zstd"), "encode_types": ("application/json", "text/plain")},
        "flush_interval": {"flush_interval": "-1"},
        "h2c": {"h2c": True},
        "dial_timeout": {"dial_timeout": 5},
        "response_header_timeout": {"response_header_timeout": "30s"},
        "read_timeout": {"read_timeout": 2},
        "read_header_timeout": {"read_header_timeout": 10},
        "idle_timeout": {"idle_timeout": "60s"},
        "read_body_timeout": {"read_body_timeout": "60s"},
        "max_body_bytes": {"max_body_bytes": 8 * 1024 * 1024},
        "buffer_requests": {"max_body_bytes": 8 * 1024 * 1024, "buffer_requests": True},
        "json_errors": {"json_errors": True},
    },
    TraefikSettings: {
        **{name: {name: value} for name, value in ADDRESSING.items()}, **MCP_ROUTE,
        "read_timeout": {"read_timeout": 60},
        "write_timeout": {"write_timeout": "0s"},
        "idle_timeout": {"idle_timeout": "60s"},
        "flush_interval": {"flush_interval": "-1"},
        "dial_timeout": {"dial_timeout": 5},
        "response_header_timeout": {"response_header_timeout": "300s"},
        "idle_conn_timeout": {"idle_conn_timeout": "4s"},
        "compress": {"compress": True},
        "compress_included_types": {"compress": True, "compress_included_types": ("application/json",)},
        "compress_excluded_types": {"compress": True, "compress_excluded_types": ("text/event-stream",)},
        "compress_min_bytes": {"compress": True, "compress_min_bytes": 1},
        "max_body_bytes": {"max_body_bytes": 8 * 1024 * 1024},
        "retry_attempts": {"retry_attempts": 3},
        "fast_proxy": {"fast_proxy": True},
        "log_level": {"log_level": "INFO"},
    },
}
MODELS = list(NON_DEFAULT)
CASES = [pytest.param(model, changes, id=f"{model.proxy}.{field}")
         for model, fields in NON_DEFAULT.items() for field, changes in fields.items()]

INJECTIONS = ["1s; include /etc/passwd", "on;\n    include /etc/passwd", 'x" ; evil "y',
              "1s\n  admin: {}", "text/html; charset=utf-8", "1s}", "$host", "127.0.0.1 # x", ""]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.proxy)
def test_every_field_has_a_non_default_case(model: type[ProxySettings]) -> None:
    # `version` picks the binary, not a directive: test_every_release_checks_defaults_and_fixed.
    assert set(NON_DEFAULT[model]) == set(model.model_fields) - {"version"}


@pytest.mark.parametrize(("proxy", "series"), [
    pytest.param(kind.name, release.series, id=f"{kind.name}-{release.series}")
    for kind in KINDS.values() for release in kind.releases])
def test_every_release_checks_defaults_and_fixed(proxy: str, series: str) -> None:
    """Each release's own binary passes its defaults and every fixed variant (a directive that a
    release renamed is rendered by the template for that release)."""
    for factory in (KINDS[proxy].settings, KINDS[proxy].fixed):  # the TLS variant: test_tls
        validate(factory().with_(version=series))


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.proxy)
def test_defaults_render_and_validate(model: type[ProxySettings]) -> None:
    validate(model())


@pytest.mark.parametrize(("model", "changes"), CASES)
def test_each_setting_renders_and_validates(model: type[ProxySettings], changes: dict[str, Any]) -> None:
    settings = model().with_(**changes)
    text = render(settings)
    assert text != render(model()), "the setting did not change the config"
    validate(text, model.proxy)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.proxy)
def test_rendered_text_needs_no_clean_up(model: type[ProxySettings]) -> None:
    for changes in NON_DEFAULT[model].values():
        text = render(model(**changes))
        assert text.endswith("\n") and not text.endswith("\n\n")
        assert "\n\n\n" not in text
        assert all(line == line.rstrip() for line in text.splitlines()), "trailing whitespace"
        assert "\t" not in text


@pytest.mark.parametrize(("model", "field"), [
    pytest.param(model, field, id=f"{model.proxy}.{field}")
    for model in MODELS for field in model.model_fields])
def test_injection_is_rejected(model: type[ProxySettings], field: str) -> None:
    current = model.model_fields[field].default
    for payload in INJECTIONS:
        value: Any = (payload,) if isinstance(current, tuple) else payload
        if payload == "" and field == "proxy_connection_header":
            continue  # "" is the documented way to clear the Connection header
        with pytest.raises(ValidationError) as caught:
            model(**{field: value})
        assert field in str(caught.value), f"the error should name {field}"
        # ... and through with_() as well: variants are re-validated.
        with pytest.raises(ValidationError):
            model().with_(**{field: value})


def test_injection_error_is_clear() -> None:
    with pytest.raises(ValidationError, match=r"proxy_read_timeout\n.*is not an nginx time"):
        NginxSettings(proxy_read_timeout="1s; include /etc/passwd")


def test_unknown_field_is_rejected() -> None:
    with pytest.raises(ValidationError, match="proxy_bufering"):
        NginxSettings().with_(proxy_bufering=False)


def test_settings_are_immutable() -> None:
    with pytest.raises(ValidationError):
        NginxSettings().proxy_buffering = False  # type: ignore[misc]


@pytest.mark.parametrize(("model", "field", "seconds", "text"), [
    (NginxSettings, "proxy_read_timeout", 1.5, "1500ms"),
    (NginxSettings, "proxy_read_timeout", 300, "300s"),
    (HaproxySettings, "timeout_server", 0.25, "250ms"),
    (EnvoySettings, "route_timeout", 0, "0s"),
    (EnvoySettings, "stream_idle_timeout", 1.25, "1.25s"),
    (VarnishSettings, "between_bytes_timeout", 2, "2s"),
    (CaddySettings, "read_timeout", 0.5, "500ms"),
])
def test_durations_accept_seconds(model: type[ProxySettings], field: str, seconds: float, text: str) -> None:
    assert getattr(model(**{field: seconds}), field) == text


def test_changed_fields_lists_the_overrides() -> None:
    assert NginxSettings(proxy_buffering=False).changed_fields() == {"proxy_buffering": False}


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.proxy)
def test_strict_undefined_catches_a_missing_input(model: type[ProxySettings]) -> None:
    with pytest.raises(jinja2.UndefinedError):
        render_template(model.template, {})


@pytest.mark.parametrize(("proxy", "text", "message"), [
    ("nginx", "events {}\nbogus_directive on;\n", 'unknown directive "bogus_directive"'),
    ("haproxy", "global\n    bogus_keyword 1\n", "unknown keyword 'bogus_keyword'"),
    ("envoy", "static_resources:\n  listeners:\n  - name: x\n", "address is necessary"),
    ("varnish", "vcl 4.1;\nbogus;\n", "Expected one of"),
    ("apache", "LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so\nBogusDirective on\n", "Invalid command 'BogusDirective'"),
    ("caddy", ":8080 {\n    bogus_directive\n}\n", "unrecognized directive: bogus_directive"),
])
def test_config_invalid_carries_the_binary_message(proxy: str, text: str, message: str) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        validate(text, proxy)  # type: ignore[arg-type]
    assert message in str(caught.value)
    assert caught.value.proxy == proxy and caught.value.config_text == text


def test_validate_text_needs_the_proxy() -> None:
    with pytest.raises(ValueError, match="proxy="):
        validate("events {}\n")


def test_proxy_next_upstream_takes_only_nginxs_words_and_off_alone() -> None:
    from proxies.nginx.settings import NginxSettings

    with pytest.raises(ValidationError, match="stands alone"):
        NginxSettings(proxy_next_upstream=("off", "error"))
    with pytest.raises(ValidationError):
        NginxSettings(proxy_next_upstream=("error", "http_418"))
    with pytest.raises(ValidationError):
        NginxSettings(proxy_next_upstream=())
    assert "proxy_next_upstream       off;" in render(NginxSettings(proxy_next_upstream=("off",)))
