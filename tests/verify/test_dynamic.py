"""verify against real proxies: the catalogue's own configs, the exported ones, users' configs.

Self-consistency with the catalogue: every scenario's rendered broken config is reported with the
scenario's kind as a failure, and its fixed config with no failure, measured by the check that
shows that kind (quick: only that check), with limits against the scenarios' scaled values: a 2 s
silence against a 1 s timeout (10 s when fixed), a 4.5 s stream against a 2 s route timeout.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from labs import catalogue
from labs.lab.hops import hop_kind
from labs.verify import verify_config
from labs.catalogue.render import rendered
from labs.verify.judge import checks_for
from labs.verify.model import RouteWanted
from proxies.apps import is_app
from proxies.kinds import KINDS
from proxies.releases import CHOICE_VARIABLE
from tests.ids import other_id
from proxies.variants import variant
from tests.verify.conftest import USER_CONFIGS, user_config_cases

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SCALED = {"max_silence_s": 2.0, "max_stream_s": 2.5, "streams": 60}


def _faulty_proxy(scenario) -> str:
    """The proxy whose config holds the fault (a chain's broken hop is the one its fix changes)."""
    changed = [p for p in scenario.path if scenario.fix.proxy.get(p)]
    return (changed or list(scenario.path))[0]


# verify reads proxy configs: a path with an app hop (Express, gunicorn, LiteLLM...) has no config
# of that kind to hand it (the app's fault is in its code or its settings).
# A fault made by two hops of one kind together (chain-accel-consumed: the inner nginx drops the
# header the outer one needs) is in no single config: probe finds it on the path, verify cannot.
CASES = [(s, v) for s in catalogue.SCENARIOS if s.kind and s.path and not any(map(is_app, s.path))
         and len({hop_kind(h) for h in s.path}) == len(s.path)
         for v in ("broken", "fixed")
         # A fix made on the server (it sends X-Accel-Buffering, heartbeats) leaves the proxy's config
         # as broken as it was: verify rightly reports it, so only the broken side is a case.
         if v == "broken" or s.fix.proxy.get(_faulty_proxy(s)) or s.fix.manifest is not None]


def _symptom_ended(scenario, proxy: str) -> bool:
    """Whether the current release of `proxy` fixed the scenario's symptom (its Since.ends_symptom):
    the broken config then shows its fault on the oldest release only."""
    return any(change.ends_symptom and change.proxy == hop_kind(proxy)
               and change.reached_by(KINDS[change.proxy].current.series) for change in scenario.since)


def _fault_calls_an_outside_service(scenario) -> bool:
    """The broken variant's fault is a filter that calls a service of the user's (Envoy's ext_proc:
    the scenario's processor is the lab's, started beside Envoy, and is no part of the config).
    verify leaves such a filter out of the run (labs/verify/envoy/clusters.py OUTSIDE_FILTERS) and
    can only suspect what it does from its settings: a warning, never a measured failure."""
    return any("ext_proc_body_mode" in (settings or {}) for settings in scenario.variant("broken").proxy.values())


@pytest.mark.parametrize("scenario, side", CASES, ids=[other_id(s.name, v) for s, v in CASES])
def test_catalogue_config(verify_server, request, monkeypatch, tmp_path, scenario, side):
    proxy = _faulty_proxy(scenario)
    if "traefik" in scenario.path:  # Go's proxy: its early cut is not this scenario's (conftest.HEADERS_LATE_S)
        request.getfixturevalue("headers_late")
    manifest = scenario.variant(side).manifest
    # A scenario run on a manifest's translation: verify gets the manifest, as a user would hand it.
    path = tmp_path / ("manifest.yaml" if manifest is not None else KINDS[proxy].config_name)
    wanted = RouteWanted()
    if _symptom_ended(scenario, proxy):  # held to the fault on the oldest release, to none on the current
        if side == "broken":
            path.write_text(rendered(scenario.name, side, proxy)[1])
            current = verify_config(path, checks=checks_for({scenario.kind}), server=verify_server, **SCALED)
            assert scenario.kind not in {f.kind for f in current.failures()}, current.checks
        monkeypatch.setenv(CHOICE_VARIABLE, "oldest")  # rendered for it, and run on it
        wanted = RouteWanted(version=KINDS[hop_kind(proxy)].releases[0].series)
    path.write_text(manifest if manifest is not None else rendered(scenario.name, side, proxy)[1])
    report = verify_config(path, checks=checks_for({scenario.kind}), server=verify_server, wanted=wanted, **SCALED)
    failures = {f.kind for f in report.failures()}
    shown = [(c.name, c.observed) for c in report.checks]
    if side == "broken" and _fault_calls_an_outside_service(scenario):
        warned = [f for f in report.findings if f.kind == scenario.kind and f.severity == "warning"]
        assert warned and scenario.kind not in failures, (shown, report.findings)
        assert any("left out of the run" in note for note in report.notes), report.notes
    elif side == "broken":
        assert scenario.kind in failures, shown
        assert all(f.where and f.fix and f.scenario for f in report.failures())
        if manifest is not None:  # named at the manifest's field, demonstrated by this scenario
            named = [f for f in report.failures() if f.kind == scenario.kind]
            assert all("manifest.yaml:" in (f.where or "") and f.scenario == scenario.name for f in named), named
    else:
        assert not failures, shown
    assert all(c.passed for c in report.checks if c.name == "loopback-only")


# What the current release measures otherwise than a user config's expected.json (written for
# Debian 12's releases), kind -> why; that config also runs on the oldest release, held to the file.
ON_CURRENT = {
    "haproxy-user": {"coalescing": "HAProxy 3.2.26 groups events on the ssl bind without http-no-delay "
                                   "(3 events a read, 105 ms late, 2026-12-06); 2.6.12 sent 12 in 12"},
}
USER_RUNS = [(name, expected, release) for name, expected in user_config_cases()
             for release in (("current", "oldest") if name in ON_CURRENT else ("current",))]


@pytest.mark.parametrize("name, expected, release", USER_RUNS, ids=[f"{c[0]}-{c[2]}" for c in USER_RUNS])
def test_user_config(verify_server, name, expected, release):
    before = verify_server.metrics()
    proxy = KINDS[name.split("-")[0]]  # the folders are named <proxy>-...
    wanted = RouteWanted(version=proxy.releases[0].series if release == "oldest" else None)
    report = verify_config(USER_CONFIGS / name / expected["config"], quick=True, server=verify_server,
                           wanted=wanted, **expected.get("options", {}))
    found_now = set(ON_CURRENT.get(name, {})) if release == "current" else set()
    failures = sorted({f.kind for f in report.findings if f.severity == "failure"} - found_now)
    warnings = sorted({f.kind for f in report.findings if f.severity == "warning"} | (
        found_now & set(expected["warnings"])))  # a warning on 2.6, found on the current release
    assert found_now <= {f.kind for f in report.failures()}, [(c.name, c.observed) for c in report.checks]
    shown = [(c.name, c.observed) for c in report.checks]
    assert failures == sorted(expected["failures"]), shown
    assert warnings == sorted(expected["warnings"]), [(f.kind, f.evidence) for f in report.findings]
    # Nothing but loopback: the proxy reports no other upstream, and the lab's server did serve it.
    loopback = next(c for c in report.checks if c.name == "loopback-only")
    assert loopback.passed, loopback.observed
    served = verify_server.metrics().get("streamlab_tokens_generated_total", 0)
    assert served > before.get("streamlab_tokens_generated_total", 0)
    assert report.rewrites and not re.search(r"^\+(?!\s*#).*\b(10\.\d+\.\d+\.\d+|0\.0\.0\.0)\b", report.rewrites, re.M)


SENTINEL_CONFIGS = {
    "nginx": ("nginx.conf", "events {{}}\nhttp {{\n  upstream named {{ server 127.0.0.1:{port}; }}\n"
              "  server {{\n    listen 127.0.0.1:{port};\n    location / {{ proxy_pass http://127.0.0.1:{port}; }}\n"
              "    location /v1/ {{ proxy_pass http://named; proxy_buffering off; proxy_http_version 1.1;"
              " proxy_set_header Connection \"\"; }}\n  }}\n}}\n"),
    "haproxy": ("haproxy.cfg", "defaults\n    mode http\n    timeout connect 5s\n    timeout client 1m\n"
                "    timeout server 1m\n    option http-no-delay\n    option abortonclose\nfrontend fe\n"
                "    bind 127.0.0.1:{port}\n    default_backend b\nbackend b\n    server s 127.0.0.1:{port}\n"),
}


@pytest.mark.parametrize("proxy", ["envoy", "haproxy", "nginx"])
def test_every_upstream_is_the_lab_server_even_a_loopback_one(verify_server, tmp_path, proxy):
    """A listener stands where the config's upstreams point: verify must never reach it."""
    import socket
    sentinel = socket.socket()
    sentinel.bind(("127.0.0.1", 0))
    sentinel.listen(16)
    sentinel.setblocking(False)
    try:
        port = sentinel.getsockname()[1]
        if proxy == "envoy":  # the exported config, its upstream (and listener) at the sentinel
            name, text = "envoy.yaml", (REPO / "proxies" / "fixed" / "envoy.yaml").read_text()
            for fixed_port in ("8000", "8080"):
                text = text.replace(f"port_value: {fixed_port}", f"port_value: {port}")
        else:
            name, template = SENTINEL_CONFIGS[proxy]
            text = template.format(port=port)
        path = tmp_path / name
        path.write_text(text)
        report = verify_config(path, checks=["streaming", "disconnect"], server=verify_server)
        assert report.ok, [(c.name, c.observed) for c in report.checks]
        with pytest.raises(BlockingIOError):
            sentinel.accept()  # nobody connected to where the user's config pointed
    finally:
        sentinel.close()


@pytest.mark.parametrize("proxy", ["haproxy", "nginx"])
def test_loopback_only_fails_when_the_proxy_reaches_anything_but_the_lab(verify_server, tmp_path, proxy,
                                                                          monkeypatch):
    """The proof can fail: a rewrite that (by a bug) left one upstream at a sentinel server is
    caught by what the proxy itself recorded, and the run is not "ok" (exit status 2)."""
    from labs.verify import lab_server
    from labs.verify.haproxy import rewrite as haproxy_rewrite
    from labs.verify.nginx import rewrite as nginx_rewrite
    with lab_server(streams=4) as sentinel:
        # On the pipeline: the lab's port comes in the run's plan.
        module = nginx_rewrite if proxy == "nginx" else haproxy_rewrite
        real = module.rewrite
        monkeypatch.setattr(module, "rewrite", lambda config, route, plan:
                            real(config, route, replace(plan, lab_port=sentinel.port)))
        name, template = SENTINEL_CONFIGS[proxy]
        path = tmp_path / name
        path.write_text(template.format(port=9))
        report = verify_config(path, checks=["streaming"], server=verify_server)
    loopback = next(c for c in report.checks if c.name == "loopback-only")
    assert not loopback.passed and f"127.0.0.1:{sentinel.port}" in loopback.observed, loopback.observed
    assert report.verdict == "inconclusive" and report.exit_status == 2


def test_the_same_config_buffers_on_nginx_1_22_and_streams_with_1_30s_defaults(verify_server, tmp_path):
    """nginx 1.29.7 made HTTP/1.1 with keep-alive the upstream default: a location that leaves
    proxy_buffering on then gets chunks forwarded as they come. Both directions, one file: on
    1.22, on 1.22 standing in for 1.29.7 with its defaults written in, and on 1.30 itself."""
    path = tmp_path / "nginx.conf"
    path.write_text("events {}\nhttp {\n  upstream llm { server 10.0.0.1:8000; }\n  server {\n    listen 80;\n"
                    "    location /v1/ { proxy_pass http://llm; }\n  }\n}\n")
    old = verify_config(path, checks=["streaming"], server=verify_server, wanted=RouteWanted(version="1.22"))
    assert [f.kind for f in old.failures()] == ["buffering"], old.checks
    for asked, series in (("1.29.7", "1.22"), (None, "1.30")):
        new = verify_config(path, checks=["streaming"], server=verify_server, wanted=RouteWanted(version=asked))
        assert not new.failures() and new.measured_on["series"] == series, (asked, new.checks)
        assert next(c for c in new.checks if c.name == "streaming").passed


def test_a_tls_listener_is_measured_over_tls_and_its_https_redirect_holds(verify_server, tmp_path):
    """Kept as TLS, a server that redirects plain HTTP to HTTPS serves the chat route (it used to
    be "not served here" once TLS was stripped)."""
    path = tmp_path / "nginx.conf"
    path.write_text("events {}\nhttp {\n  server {\n    listen 80;\n    listen 443 ssl;\n"
                    "    ssl_certificate /etc/ssl/chat.pem;\n    ssl_certificate_key /etc/ssl/chat.key;\n"
                    "    if ($scheme = http) { return 301 https://$host$request_uri; }\n"
                    "    location /v1/ { proxy_pass http://10.0.0.1:8000; proxy_buffering off; }\n  }\n}\n")
    report = verify_config(path, checks=["streaming"], server=verify_server)
    assert report.ok, report.checks
    assert any("TLS is kept" in n for n in report.notes)


def test_a_tls_listener_offering_h2_is_measured_over_http2_too(verify_server, tmp_path):
    path = tmp_path / "nginx.conf"
    path.write_text("events {}\nhttp {\n  server {\n    listen 443 ssl http2;\n"
                    "    ssl_certificate /etc/ssl/chat.pem;\n    ssl_certificate_key /etc/ssl/chat.key;\n"
                    "    location /v1/ { proxy_pass http://10.0.0.1:8000; proxy_buffering off; }\n  }\n}\n")
    report = verify_config(path, checks=["streaming", "streaming-h2"], server=verify_server)
    h2 = next(c for c in report.checks if c.name == "streaming-h2")
    assert h2.passed and h2.observed.startswith("over HTTP/2"), h2
    plain = tmp_path / "plain.conf"
    plain.write_text(path.read_text().replace("listen 443 ssl http2;", "listen 80;"))
    report = verify_config(plain, checks=["streaming", "streaming-h2"], server=verify_server)
    h2 = next(c for c in report.checks if c.name == "streaming-h2")
    assert h2.skipped and not h2.ran and report.ok  # not run: no HTTP/2 without TLS, and no verdict lost


def test_a_haproxy_ssl_bind_is_measured_over_tls_and_its_https_redirect_holds(verify_server, tmp_path):
    """Kept as TLS, a frontend that redirects plain HTTP to HTTPS (`unless { ssl_fc }`) serves the
    chat route on its ssl bind (the redirect used to be commented out once TLS was stripped)."""
    path = tmp_path / "haproxy.cfg"
    path.write_text("global\n    ssl-default-bind-options ssl-min-ver TLSv1.2\ndefaults\n    mode http\n"
                    "    option http-no-delay\n    option abortonclose\n    timeout connect 5s\n"
                    "    timeout client 1h\n    timeout server 1h\nfrontend fe\n    bind :80\n"
                    "    bind :443 ssl crt /etc/haproxy/certs/site.pem alpn h2,http/1.1\n"
                    "    http-request redirect scheme https unless { ssl_fc }\n    default_backend llm\n"
                    "backend llm\n    server model1 model.internal:8000\n")
    report = verify_config(path, checks=["streaming"], server=verify_server)
    assert report.ok, report.checks
    assert any("TLS is kept" in n for n in report.notes)


def test_an_envoy_tls_listener_is_measured_over_tls(verify_server, tmp_path):
    """Kept as TLS with the run's certificate, a listener whose virtual host requires TLS
    (`require_tls: ALL`: plain HTTP gets a redirect) serves the chat route."""
    clean = (Path(__file__).resolve().parents[1] / "data" / "user-configs" / "envoy-clean" / "envoy.yaml").read_text()
    tls = ("    - transport_socket:\n        name: envoy.transport_sockets.tls\n        typed_config:\n"
           "          \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext\n"
           "          common_tls_context:\n            alpn_protocols: [\"h2\", \"http/1.1\"]\n"
           "            tls_certificate_sds_secret_configs: [{name: edge}]\n      filters:\n")
    text = clean.replace("    - filters:\n", tls).replace("              domains: [\"*\"]\n",
                                                           "              domains: [\"*\"]\n              require_tls: ALL\n")
    assert "require_tls: ALL" in text and "DownstreamTlsContext" in text
    path = tmp_path / "envoy.yaml"
    path.write_text(text)
    report = verify_config(path, checks=["streaming"], server=verify_server)
    assert report.ok, report.checks
    assert any("TLS is kept" in n for n in report.notes)


@pytest.mark.parametrize("proxy", sorted(KINDS))
def test_every_kind_records_what_it_contacted(verify_server, proxy):
    """Each kind's own reader of its records (labs/verify/records.py) finds the lab's server: the
    loopback-only check ran and passed, it was not skipped for want of a record."""
    path = REPO / "proxies" / "fixed" / KINDS[proxy].config_name
    report = verify_config(path, checks=["streaming"], server=verify_server)
    loopback = next(c for c in report.checks if c.name == "loopback-only")
    assert loopback.ran and loopback.passed and not loopback.skipped, loopback.observed
    assert f"127.0.0.1:{verify_server.port}" in loopback.observed


def test_heartbeats_do_not_pass_a_path_that_ignores_the_departure(verify_server, tmp_path):
    """--heartbeat allows the heartbeats a proxy needs, no more: nginx with
    proxy_ignore_client_abort on reads the whole answer for nobody, heartbeats or not, and the
    check still fails although the heartbeats were sent."""
    path = tmp_path / "nginx.conf"
    path.write_text(rendered("nginx-client-abort", "broken", "nginx")[1])
    before = verify_server.metrics().get("streamlab_heartbeats_total", 0)
    report = verify_config(path, checks=["disconnect"], heartbeat_s=0.5, server=verify_server)
    sent = verify_server.metrics().get("streamlab_heartbeats_total", 0) - before
    [check] = [c for c in report.checks if c.name == "disconnect"]
    assert not check.passed and not check.skipped, check.observed
    assert [f.kind for f in report.failures()] == ["disconnect-not-propagated"], check.observed
    assert sent >= 1, check.observed


GROUPED_OR_HELD = {  # proxy: (file, config, the kind its streaming check shows)
    "haproxy": ("haproxy.cfg", "defaults\n    mode http\n    timeout client 1h\n    timeout server 1h\n"
                "    timeout connect 5s\nfrontend fe\n    bind :80\n    default_backend api\n"
                "backend api\n    server a 10.0.0.1:8000\n", "coalescing"),  # no option http-no-delay
    "nginx": ("nginx.conf", "events {}\nhttp {\n  upstream llm { server 10.0.0.1:8000; }\n  server {\n"
              "    listen 80;\n    location /v1/ { proxy_pass http://llm; }\n  }\n}\n", "buffering"),  # 1.22
}


@pytest.mark.parametrize("proxy", sorted(GROUPED_OR_HELD))
def test_concurrent_streams_are_judged_through_a_coalescing_hop_and_untold_through_a_held_one(
        verify_server, tmp_path, proxy):
    """dmr-ollama-haproxy's shape (tests/data/wild): HAProxy without http-no-delay groups events two
    or three a read, first tokens on time, so the burst is judged (it was skipped as a buffering
    hop's); nginx 1.22's proxy_buffering holds each stream whole, and the burst stays untold."""
    name, text, kind = GROUPED_OR_HELD[proxy]
    path = tmp_path / name
    path.write_text(text)
    report = verify_config(path, checks=["streaming", "concurrent-streams"], streams=12, server=verify_server,
                           wanted=RouteWanted(version="1.22" if proxy == "nginx" else None))  # 1.30 streams it
    checks = {c.name: c for c in report.checks}
    assert not checks["streaming"].passed and checks["streaming"].kind == kind, checks["streaming"]  # the hop's shape
    burst = checks["concurrent-streams"]
    if kind == "coalescing":
        assert burst.skipped is None and burst.passed and "12 streams complete" in burst.observed, burst
    else:
        assert burst.skipped and "each held" in burst.skipped and not burst.passed, burst
