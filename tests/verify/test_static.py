"""The static reading: parsers, inheritance, route selection, rules, rewrites. No process starts."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from labs.findings import UnusableInput
from labs.verify import read_config
from labs.verify.detect import detect
from labs.verify import trials
from labs.verify.model import MAX_HEARTBEAT_S, Options, RouteWanted
from labs.verify.readers import READERS, heartbeats_to_notice, suspicions
from labs.verify.run import _selected
from labs.verify.rewrite import is_loopback
from tests.verify.conftest import USER_CONFIGS, user_config_cases


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


NGINX = """
events {{ worker_connections 1024; }}
http {{
    proxy_buffering off;
    proxy_set_header Connection "";
    include conf.d/*.conf;
    server {{
        listen 80;
        location / {{ proxy_pass http://10.0.0.1; }}
        location /v1/ {{
            proxy_pass http://10.0.0.2:8000;
            {location}
        }}
    }}
}}
"""


def test_nginx_location_overrides_http_and_include_is_followed(tmp_path):
    write(tmp_path, "conf.d/timeouts.conf", "proxy_read_timeout 7s;\n")
    path = write(tmp_path, "nginx.conf", NGINX.format(location="proxy_buffering on;"))
    reading = read_config(path)
    assert reading.proxy == "nginx" and "location /v1/" in reading.route
    assert reading.get("proxy_buffering").value == "on"
    assert reading.get("proxy_buffering").where.endswith("nginx.conf:12")
    assert reading.get("proxy_read_timeout").value == "7s"
    assert reading.get("proxy_read_timeout").where.endswith("conf.d/timeouts.conf:1")
    assert reading.get("proxy_http_version").where == "default"
    assert reading.get("worker_connections").value == "1024"


def test_nginx_proxy_set_header_is_inherited_only_by_levels_without_their_own(tmp_path):
    path = write(tmp_path, "nginx.conf", NGINX.format(location="proxy_set_header Host $host;"))
    # The location sets a header of its own: the http-level Connection "" is not inherited, and
    # nginx 1.22's default applies (1.30's is "" itself, so only 1.22 tells the two apart).
    on_122 = RouteWanted(version="1.22")
    assert read_config(path, wanted=on_122).get("proxy_set_header Connection").value == "close"
    path = write(tmp_path, "nginx.conf", NGINX.format(location=""))
    assert read_config(path, wanted=on_122).get("proxy_set_header Connection").value == ""


@pytest.mark.parametrize("locations, chosen", [
    ("location /v1/ {P} location ~ ^/v1/chat {P}", "~ ^/v1/chat"),
    ("location ^~ /v1/ {P} location ~ ^/v1/chat {P}", "^~ /v1/"),
    ("location = /v1/chat/completions {P} location /v1/chat {P}", "= /v1/chat/completions"),
    ("location /v1/chat {P} location /v1/ {P}", "/v1/chat"),
    ("location /v1/ { location /v1/chat/ {P} proxy_pass http://a; }", "/v1/chat/"),
])
def test_nginx_location_matching(tmp_path, locations, chosen):
    block = locations.replace("{P}", "{ proxy_pass http://10.0.0.2; }")
    path = write(tmp_path, "nginx.conf", f"events {{}} http {{ server {{ listen 80; {block} }} }}\n")
    assert read_config(path).route.rsplit("> location ", 1)[1].startswith(chosen)


def test_nginx_redirect_server_is_skipped_and_missing_route_is_unusable(tmp_path):
    path = write(tmp_path, "nginx.conf", """events {}
http {
    server { listen 80; return 301 https://$host$request_uri; }
    server { listen 443; server_name b; location / { proxy_pass http://x; } }
}
""")
    assert "server b listen 443" in read_config(path).route
    path = write(tmp_path, "nginx.conf", "events {} http { server { location / { root /x; } } }\n")
    with pytest.raises(UnusableInput, match="nothing is proxied: no location has proxy_pass"):
        read_config(path)


def test_nginx_parse_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "nginx.conf", "events {}\nhttp {\n  server {\n")
    with pytest.raises(UnusableInput) as caught:
        read_config(path)
    assert caught.value.file.endswith("nginx.conf") and caught.value.line == 3


HAPROXY = """global
    maxconn 50
defaults
    mode http
    timeout server 4s
frontend fe
    bind :80
    acl api path_beg /v1/
    use_backend other if !api
    use_backend llm if api METH_POST
    default_backend other
backend other
    server o 10.0.0.1:80
backend llm
    {backend}
    server m 10.0.0.2:8000
"""


def test_haproxy_acl_routing_and_defaults_inheritance(tmp_path):
    path = write(tmp_path, "haproxy.cfg", HAPROXY.format(backend="option http-no-delay"))
    reading = read_config(path)
    assert reading.proxy == "haproxy" and "backend llm" in reading.route
    assert reading.get("option http-no-delay").value is True
    assert reading.get("timeout server").value == 4.0 and reading.get("timeout server").where.endswith(":5")
    assert reading.get("option abortonclose").where == "default"
    kinds = {s.kind for s in suspicions(reading, Options(max_silence_s=10, streams=100))}
    assert kinds == {"idle-timeout", "disconnect-not-propagated", "connection-limit"}


def test_haproxy_backend_timeout_overrides_defaults(tmp_path):
    path = write(tmp_path, "haproxy.cfg", HAPROXY.format(backend="timeout server 10m"))
    assert read_config(path).get("timeout server").value == 600.0


ENVOY = """static_resources:
  listeners:
  - name: l
    address: {{socket_address: {{address: 0.0.0.0, port_value: 80}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: s
          {hcm}
          route_config:
            virtual_hosts:
            - name: v
              domains: ["api.example.com"]
              routes:
              - match: {{prefix: "/v2/"}}
                route: {{cluster: c, timeout: 1s}}
              - match: {{safe_regex: {{regex: "/v1/.*"}}}}
                route: {{cluster: c}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
  clusters:
  - name: c
    type: STRICT_DNS
    load_assignment:
      cluster_name: c
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: m.svc, port_value: 8000}}}}}}}}]}}]
"""


def test_envoy_defaults_apply_where_nothing_is_set(tmp_path):
    path = write(tmp_path, "envoy.yaml", ENVOY.format(hcm="stream_idle_timeout: 2s"))
    reading = read_config(path)
    assert reading.get("route timeout").value == 15.0 and reading.get("route timeout").where == "default"
    assert reading.get("stream_idle_timeout").value == 2.0
    assert reading.get("max_requests").value == 1024
    assert any("api.example.com" in note for note in reading.notes)
    kinds = {s.kind for s in suspicions(reading, Options(max_silence_s=5, max_stream_s=20))}
    assert kinds == {"total-timeout", "idle-timeout"}


def test_envoy_rds_is_unusable(tmp_path):
    text = ENVOY.format(hcm="rds: {route_config_name: r, config_source: {ads: {}}}")
    path = write(tmp_path, "envoy.yaml", text.replace("          route_config:", "          ignored:"))
    with pytest.raises(UnusableInput, match="RDS"):
        read_config(path)


@pytest.mark.parametrize("name, text, proxy", [
    ("a.conf", "server {\n listen 80;\n}\n", "nginx"),
    ("lb.cfg", "global\n    daemon\nfrontend fe from base\n    bind :80\n", "haproxy"),
    ("x.yml", "admin:\n  address: {}\n", "envoy"),
])
def test_detect(tmp_path, name, text, proxy):
    assert detect(write(tmp_path, name, text)) == proxy


def test_detect_refuses_what_it_cannot_tell(tmp_path):
    with pytest.raises(UnusableInput, match="--proxy"):
        detect(write(tmp_path, "config.txt", "hello\n"))
    with pytest.raises(UnusableInput, match="no such file"):
        detect(tmp_path / "missing.conf")


def test_is_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("10.0.0.1") and not is_loopback("*") and not is_loopback("example.com")


@pytest.mark.parametrize("name, expected", user_config_cases(), ids=[c[0] for c in user_config_cases()])
def test_user_configs_rewritten_name_loopback_only(tmp_path, name, expected):
    """Every address in the rewritten config is 127.0.0.1, and no path points outside the run."""
    from labs.verify.run import rewrite_config
    path = USER_CONFIGS / name / expected["config"]
    rewritten = rewrite_config(read_config(path), 65000, tmp_path)  # asserts loopback-only itself
    texts = [new for _, new, _ in rewritten.files.values()]
    for text in texts:
        live = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        assert not re.search(r"\b10\.\d+\.\d+\.\d+|192\.168\.|\.internal|svc\.cluster\.local|"
                             r"\b0\.0\.0\.0\b", live), live
        for line in live.splitlines():  # what the proxy writes (pid, logs, sockets) stays in the run
            if re.search(r"\b(pid|pidfile|error_log|access_log|stats socket|path:)", line):
                assert not re.search(r"(?<![\w.])/(var|run)/", line), line
        assert "STRICT_DNS" not in live and "LOGICAL_DNS" not in live
    assert rewritten.listen_port
    if os.geteuid() != 0:
        assert all("user www-data" not in t.replace("# user", "") for t in texts)


def test_haproxy_host_acl_gives_the_host_verify_sends(tmp_path):
    path = write(tmp_path, "haproxy.cfg", """defaults
    mode http
frontend fe
    bind :443
    acl api hdr(host) -i api.example.com
    use_backend llm if api { path_beg /v1/ }
backend llm
    server m 10.0.0.2:8000
""")
    from labs.verify.haproxy.reader import READER
    from labs.verify.route import Request
    found = READER.match(READER.parse(path, RouteWanted()), Request("/v1/chat/completions"))
    assert found.handle.backend.name == "llm" and found.host == "api.example.com"
    assert found.handle.request.host == "api.example.com"  # what the rewrite and the counters judge


@pytest.mark.parametrize("types, suspected", [(("application/json", "text/event-stream"), True),
                                              (("application/json", "text/plain"), False)])
def test_envoy_compressor_matching_event_stream_is_suspected(tmp_path, types, suspected):
    from proxies.envoy.settings import EnvoySettings
    from proxies.rendering import render
    settings = EnvoySettings(compressor=True, compressor_content_types=types, route_timeout=0)
    path = write(tmp_path, "envoy.yaml", render(settings))
    kinds = {s.kind for s in suspicions(read_config(path), Options(streams=10))}
    assert ("compression-delay" in kinds) is suspected


def test_a_silence_cut_at_the_whole_response_deadline_is_named_as_that_deadline():
    """Envoy's 15 s route timeout cuts a 20 s silence and a 22 s stream alike: one total-timeout,
    never an idle-timeout blamed on stream_idle_timeout (5 min)."""
    from labs.verify.judge import findings
    from labs.verify.trials import Measured
    cut = [Measured("silence-before-first-token", False, "cut after 15.0 s", "idle-timeout", limit_s=15.0),
           Measured("long-stream", False, "cut after 15.0 s", "total-timeout", limit_s=15.0)]
    kinds = {(f.kind, f.severity) for f in findings("envoy", [], cut, {})}
    assert kinds == {("total-timeout", "failure")}
    idle = [Measured("silence-mid-stream", False, "cut after 7.0 s", "idle-timeout", limit_s=7.0), cut[1]]
    assert {f.kind for f in findings("envoy", [], idle, {})} == {"idle-timeout", "total-timeout"}


@pytest.mark.parametrize("limit, suspected", [(10, True), (100, False), (1024, False)])
def test_nginx_limit_conn_is_suspected_only_below_the_concurrent_streams(tmp_path, limit, suspected):
    """proxies/fixed/nginx.conf bounds one address with `limit_conn per_client 1024`: at or above
    --streams it leaves them through."""
    write(tmp_path, "conf.d/zone.conf", "limit_conn_zone $binary_remote_addr zone=per_client:10m;\n")
    path = write(tmp_path, "nginx.conf", NGINX.format(location=f"limit_conn per_client {limit};"))
    kinds = {s.kind for s in suspicions(read_config(path), Options(max_silence_s=10, streams=100))}
    assert ("connection-limit" in kinds) == suspected, kinds


FIXED = Path(__file__).resolve().parents[2] / "proxies" / "fixed"
FIXED_FILES = sorted(p.relative_to(FIXED).as_posix() for p in FIXED.rglob("*") if p.is_file())


@pytest.mark.parametrize("name", FIXED_FILES)
def test_without_heartbeats_only_a_proxy_that_notices_at_a_write_is_suspected_of_the_departure(name):
    """--heartbeat changes one suspicion, on the proxies whose kind declares that it notices a
    departure only at a write (Apache, Varnish): without it their every config is suspected (so
    --quick measures it); with it, not. Every other proxy's reading is the same either way. Each
    file is read on the newest release it claims (Caddyfile-2.6 is Caddy 2.6's)."""
    from proxies.export import exports
    claimed = exports()[name].series[-1] if name in exports() else None
    reading = read_config(FIXED / name, wanted=RouteWanted(version=claimed))
    without = suspicions(reading, Options())
    beating = suspicions(reading, Options(heartbeat_s=10))
    at_write = READERS[reading.proxy].departure_at_write is not None
    assert at_write == (reading.proxy in ("apache", "varnish")), reading.proxy
    assert [s.kind for s in without if s not in beating] == (["disconnect-not-propagated"] if at_write else [])
    assert all(s in without for s in beating)
    if at_write:
        [departure] = [s for s in without if s.kind == "disconnect-not-propagated"]
        assert departure.checks == ("disconnect",) and "--heartbeat" in departure.fix


def test_heartbeats_add_the_disconnect_check_to_quick_and_lengthen_its_silence():
    """The one check that reads --heartbeat runs under --quick when it is given; its silence is
    the heartbeats the proxy needs, one more (the slack), the margin (0.5 s) and the same 2 s in
    which a path they do not help still shows late."""
    assert "disconnect" in _selected(None, True, [], Options(heartbeat_s=1.0))
    assert "disconnect" not in _selected(None, True, [], Options())
    assert _selected(["streaming"], False, [], Options(heartbeat_s=1.0)) == ["streaming"]  # --check decides
    assert trials.departure_pause_s(None) == trials.DISCONNECT_PAUSE_S == 2.0
    assert trials.departure_pause_s(1.0) == pytest.approx(4.5)
    assert trials.departure_pause_s(1.0, 2) == pytest.approx(5.5)
    assert heartbeats_to_notice("apache") == 1 and heartbeats_to_notice("varnish") == 2
    assert heartbeats_to_notice("nginx") == 1
    for wrong in (0.0, -1.0, MAX_HEARTBEAT_S + 1):
        with pytest.raises(UnusableInput, match="--heartbeat"):
            Options(heartbeat_s=wrong)


@pytest.mark.parametrize("text", ["listen 80\nproxy_pass x", "listen 80\nproxy_pass x\n"],
                         ids=["no-final-newline", "final-newline"])
def test_lines_are_added_after_the_last_line_with_or_without_a_final_newline(text):
    """Published files often end without a newline: an edit after their last line (Apache's
    `LogLevel proxy:debug` for loopback-only) crashed verify with a ValueError."""
    from labs.verify.edits import TextEdits

    edits = TextEdits(text)
    edits.insert_after(2, ["added"], indent="")
    assert edits.apply() == "listen 80\nproxy_pass x\nadded\n"
