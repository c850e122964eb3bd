"""verify on Traefik configs: the router Traefik would pick (rules, priorities, entry points), the
settings in effect, a rewrite Traefik accepts that contacts only the lab, and the faults measured
where they are (the buffering middleware, a writeTimeout), clean configs clean."""
from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
import yaml

from labs.findings import UnusableInput
from labs.verify import read_config, verify_config
from labs.verify.detect import detect
from labs.verify.launch import running, validate
from labs.verify.model import RouteWanted
from labs.verify.run import rewrite_config
from labs.verify.traefik.settings import seconds
from labs.verify.traefik.rewrite import ACCESS_LOG
from labs.verify.route import Request
from labs.verify.traefik.routes import rule_matches
from tests.verify.test_static import write

FIXED = Path(__file__).resolve().parents[2] / "proxies" / "fixed" / "traefik.yml"
STATIC = """\
entryPoints:
  web:
    address: ":80"
    http:
      redirections:
        entryPoint: {to: websecure, scheme: https}
  websecure:
    address: ":443"
    transport:
      respondingTimeouts:
        writeTimeout: 5s
certificatesResolvers:
  le:
    acme: {email: ops@example.com, storage: /letsencrypt/acme.json, tlsChallenge: {}}
providers:
  file:
    directory: /etc/traefik/dynamic
api:
  dashboard: true
metrics:
  prometheus: {}
"""
DYNAMIC = """\
http:
  routers:
    ui:
      rule: "Host(`chat.example.com`)"
      entryPoints: [websecure]
      service: ui
      tls: {certResolver: le}
    api:
      rule: "Host(`chat.example.com`) && PathPrefix(`/api`)"
      entryPoints: [websecure]
      middlewares: [auth, limits]
      service: llm
      tls: {certResolver: le}
  middlewares:
    auth:
      forwardAuth: {address: "http://auth.internal:9000/verify"}
    limits:
      chain:
        middlewares: [body]
    body:
      buffering: {maxRequestBodyBytes: 1048576}
  services:
    ui:
      loadBalancer:
        servers: [{url: "http://ui.internal:3000"}]
    llm:
      loadBalancer:
        servers: [{url: "http://10.0.0.5:8000"}, {url: "http://10.0.0.6:8000"}]
        healthCheck: {path: /health, interval: 10s}
        serversTransport: tls
  serversTransports:
    tls:
      insecureSkipVerify: true
      forwardingTimeouts: {responseHeaderTimeout: 120s}
"""


def published(tmp_path: Path) -> Path:
    write(tmp_path, "dynamic/llm.yml", DYNAMIC)
    return write(tmp_path, "traefik.yml", STATIC)


@pytest.mark.parametrize("rule, path, host, expected", [
    ("PathPrefix(`/v1`)", "/v1/chat/completions", None, True),
    ("PathPrefix(`/v2`)", "/v1/chat/completions", None, False),
    ("Path(`/v1/chat/completions`) && Method(`POST`)", "/v1/chat/completions", None, True),
    ("Method(`GET`)", "/v1/chat/completions", None, False),
    ("Host(`a.example`) || PathPrefix(`/v1`)", "/v1/x", "b.example", True),
    ("Host(`a.example`) && !PathPrefix(`/v1`)", "/v1/x", "a.example", False),
    ("(Host(`a.example`) || Host(`b.example`)) && PathRegexp(`^/v[0-9]+/chat`)", "/v1/chat", "b.example", True),
    ("HostRegexp(`^.+\\.example$`)", "/", "x.example", True),
    ('PathPrefix("/v1")', "/v1/chat", None, True),
    # a Host written as ${...} is read as written by the file provider: no request's Host matches it
    ("Host(`${OLLAMA_HOSTNAME:-localhost}`) || PathPrefix(`/ollama`)", "/ollama/v1/chat", None, True),
    ("Host(`${OLLAMA_HOSTNAME:-localhost}`) || PathPrefix(`/ollama`)", "/v1/chat", None, False),
    ("Host(`${OLLAMA_HOSTNAME:-localhost}`)", "/v1/chat", "localhost", False),
    ("HostRegexp(`^${DOMAIN}$`) || Path(`/v1/chat`)", "/v1/chat", None, True),
])
def test_rules_are_evaluated_as_traefik_does(rule, path, host, expected):
    assert rule_matches(rule, Request(path, host))[0] is expected


def test_a_host_the_rule_asks_for_is_the_host_sent(tmp_path):
    reading = read_config(published(tmp_path), "traefik", RouteWanted(path="/api/chat/completions"))
    assert reading.host == "chat.example.com" and "router api" in reading.route
    assert reading.get("writeTimeout").value == 5.0 and reading.get("writeTimeout").where.endswith("traefik.yml:11")
    assert reading.get("buffering").where.endswith("llm.yml:21")  # found through the chain
    assert reading.get("responseHeaderTimeout").value == 120.0


def test_the_higher_priority_router_wins(tmp_path):
    path = write(tmp_path, "dynamic.yml", "http:\n  routers:\n    all:\n      rule: \"PathPrefix(`/`)\"\n"
                 "      service: a\n    api:\n      rule: \"PathPrefix(`/v1`)\"\n      service: b\n"
                 "    pinned:\n      rule: \"PathPrefix(`/`)\"\n      priority: 1000\n      service: c\n"
                 "  services:\n    a: {loadBalancer: {servers: [{url: 'http://a:1'}]}}\n"
                 "    b: {loadBalancer: {servers: [{url: 'http://b:1'}]}}\n"
                 "    c: {loadBalancer: {servers: [{url: 'http://c:1'}]}}\n")
    assert "router pinned" in read_config(path, "traefik").route
    assert detect(path) == "traefik" and detect(FIXED) == "traefik"


PLACEHOLDERS = """\
http:
  routers:
    ollama:
      rule: "Host(`${OLLAMA_HOSTNAME:-localhost}`) || PathPrefix(`/ollama`)"
      service: ollama
    langfuse:
      rule: "Host(`${LANGFUSE_HOSTNAME:-localhost}`) || PathPrefix(`/langfuse`)"
      service: langfuse
  services:
    ollama: {loadBalancer: {servers: [{url: "http://localhost:11434"}]}}
    langfuse: {loadBalancer: {servers: [{url: "http://localhost:3002"}]}}
"""


def test_a_host_written_as_a_placeholder_matches_nothing_and_the_path_chooses(tmp_path):
    """local-ai-podman-traefik's shape (tests/data/wild): every router `Host(`${VAR:-localhost}`) ||
    PathPrefix(...)`. The longer rule (langfuse) used to win for /ollama/..., its Host taken as one a
    user sends; Traefik reads the placeholder literally, so only the PathPrefix routes."""
    path = write(tmp_path, "dynamic.yml", PLACEHOLDERS)
    reading = read_config(path, "traefik", RouteWanted(path="/ollama/v1/chat/completions"))
    assert "router ollama" in reading.route and reading.host is None, reading.route
    assert any("router ollama's Host(`${OLLAMA_HOSTNAME:-localhost}`) is read as written" in n
               and "does not expand" in n for n in reading.notes), reading.notes
    with pytest.raises(UnusableInput, match=r"no route proxies POST /v1/chat/completions or .*is read as written"):
        read_config(path, "traefik")  # no router's path matches the API's: no Host can stand in
    written = write(tmp_path, "plain/dynamic.yml", PLACEHOLDERS.replace("${OLLAMA_HOSTNAME:-localhost}", "llm.example"))
    chosen = read_config(written, "traefik")  # a real host name is still the Host sent
    assert "router ollama" in chosen.route and chosen.host == "llm.example"
    assert not any("read as written" in n for n in chosen.notes)


def test_traefik_itself_serves_the_chat_request_on_the_router_verify_names(tmp_path):
    """The router named is the one the running Traefik logs for the request verify sends (its
    access log's RouterName), the placeholder Host left as written."""
    path = write(tmp_path, "dynamic.yml", PLACEHOLDERS)
    reading = read_config(path, "traefik", RouteWanted(path="/ollama/v1/chat/completions"))
    rewritten = rewrite_config(reading, 9, tmp_path / "run")  # port 9: nothing answers, 502 logged
    rewritten.write()
    with running(rewritten):
        answer = httpx.post(f"http://127.0.0.1:{rewritten.listen_port}{reading.path}", json={}, timeout=10)
        deadline = time.monotonic() + 10
        while not chat_lines(rewritten.folder / ACCESS_LOG, reading.path) and time.monotonic() < deadline:
            time.sleep(0.05)  # Traefik writes the line once the answer is sent
    served = chat_lines(rewritten.folder / ACCESS_LOG, reading.path)  # the readiness polls' lines left out
    assert answer.status_code == 502 and served, (answer.status_code, served)
    assert [s.get("RouterName") for s in served] == ["ollama@file"] and "router ollama" in reading.route


LOWER_CASE_POINTS = """\
http:
  routers:
    site:
      rule: "Host(`llm.example`)"
      entrypoints: websecure
      tls: true
      service: llm
    api:
      rule: "Host(`llm.example`) && PathPrefix(`/v1`)"
      entrypoints: websecure, internal
      service: llm
  services:
    llm: {loadBalancer: {servers: [{url: "http://10.0.0.9:4000"}]}}
"""


def test_a_dynamic_file_alone_runs_the_entry_points_its_routers_name(tmp_path):
    """aijias-litellm-traefik's shape (tests/data/wild): a dynamic file alone whose routers name
    `entrypoints: websecure` (lower case, a scalar). The run used to have only `web`, so Traefik
    served the routers nowhere (404); it now runs the entry points they name, and Traefik's access
    log names the router verify names for the chat request."""
    path = write(tmp_path, "litellm.yml", LOWER_CASE_POINTS)
    reading = read_config(path, "traefik", RouteWanted(path="/v1/chat/completions"))
    assert "router api" in reading.route and reading.host == "llm.example", reading.route
    rewritten = rewrite_config(reading, 9, tmp_path / "run")  # port 9: nothing answers, 502 logged
    rewritten.write()
    assert set(yaml.safe_load(rewritten.main.read_text())["entryPoints"]) == {"websecure", "internal"}
    with running(rewritten):
        answer = httpx.post(f"http://127.0.0.1:{rewritten.listen_port}{reading.path}", json={},
                            headers={"Host": "llm.example"}, timeout=10)
        deadline = time.monotonic() + 10
        while not chat_lines(rewritten.folder / ACCESS_LOG, reading.path) and time.monotonic() < deadline:
            time.sleep(0.05)  # Traefik writes the line once the answer is sent
    served = chat_lines(rewritten.folder / ACCESS_LOG, reading.path)
    assert answer.status_code == 502 and [s.get("RouterName") for s in served] == ["api@file"], (answer.status_code, served)


def chat_lines(log: Path, path: str) -> list[dict]:
    lines = log.read_text().splitlines() if log.is_file() else []
    return [entry for line in lines if line.strip() and (entry := json.loads(line)).get("RequestPath") == path]


def test_the_fixed_config_reads_as_written():
    reading = read_config(FIXED, "traefik")
    assert reading.get("readTimeout").value == 60 and reading.get("writeTimeout").value is None
    assert reading.get("flushInterval").value == -1 and reading.get("compress").value
    assert reading.get("buffering").value is None and reading.get("buffering").where == "default"


def test_the_rewrite_runs_on_loopback_and_traefik_accepts_it(tmp_path):
    path = published(tmp_path)
    reading = read_config(path, "traefik", RouteWanted(path="/api/chat/completions"))
    rewritten = rewrite_config(reading, 65000, tmp_path / "run")
    rewritten.write()
    validate(rewritten)
    run = yaml.safe_load(rewritten.main.read_text())
    assert set(run) == {"entryPoints", "providers", "global", "log", "accessLog", "http"}  # api, metrics, ACME gone
    assert run["global"] == {"checkNewVersion": False, "sendAnonymousUsage": False}
    llm = run["http"]["services"]["llm"]["loadBalancer"]
    assert llm["servers"] == [{"url": "http://127.0.0.1:65000"}] and "healthCheck" not in llm
    assert "tls" not in run["http"]["routers"]["api"] and "insecureSkipVerify" not in run["http"]["serversTransports"]["tls"]
    assert run["http"]["middlewares"]["auth"] == {"headers": {"customRequestHeaders": {"X-Streamlab-Left-Out": "auth"}}}
    assert all(p["address"].startswith("127.0.0.1:") for p in run["entryPoints"].values())
    said = " ".join(rewritten.notes)
    assert "forwardAuth" not in said and "middleware auth is left out" in said and "redirections is off" in said
    assert "auth.internal" not in rewritten.main.read_text() and "10.0.0.5" not in rewritten.main.read_text()


FAST = ("experimental:\n  fastProxy: {}\n"
        "  plugins:\n    demo: {moduleName: github.com/traefik/plugindemo, version: v0.2.1}\n")


FAST_TEXT = FIXED.read_text().replace("\nproviders:\n", "\n" + FAST + "providers:\n", 1)


def fast_proxy(tmp_path: Path) -> Path:
    """The fixed file with the fast proxy on (and a plugin)."""
    return write(tmp_path, "traefik.yml", FAST_TEXT)


def test_the_fast_proxy_runs_as_written_and_plugins_are_left_out(tmp_path):
    """experimental.fastProxy changes how every request is forwarded, so the run keeps it;
    experimental.plugins are downloaded: left out, and said."""
    path = fast_proxy(tmp_path)
    rewritten = rewrite_config(read_config(path, "traefik"), 65000, tmp_path / "run")
    rewritten.write()
    validate(rewritten)
    assert yaml.safe_load(rewritten.main.read_text())["experimental"] == {"fastProxy": {}}
    said = " ".join(rewritten.notes)
    assert "experimental.plugins is left out of the run" in said and "fastProxy" not in said
    clean = rewrite_config(read_config(FIXED, "traefik"), 65000, tmp_path / "fixed")
    assert "experimental" not in yaml.safe_load(clean.files[str(FIXED)][1])


@pytest.mark.slow
def test_the_fast_proxys_late_departure_is_found_at_it(verify_server, headers_late, tmp_path):
    """Measured both ways: the fast proxy notices a client that left only at its next write (the
    finding names experimental.fastProxy), Go's proxy (the fixed file) at once."""
    report = verify_config(fast_proxy(tmp_path), checks=["disconnect"], server=verify_server)
    [finding] = report.failures()
    assert finding.kind == "disconnect-not-propagated" and "experimental.fastProxy" in finding.evidence
    assert "fastProxy off" in (finding.fix or "") and finding.where.endswith(
        f"traefik.yml:{FAST_TEXT.splitlines().index('  fastProxy: {}') + 1}")
    assert verify_config(FIXED, checks=["disconnect"], server=verify_server).ok


@pytest.mark.parametrize("text, message", [
    ("entryPoints:\n  web: {address: ':80'}\nproviders:\n  docker: {exposedByDefault: false}\n",
     "the routers come from the docker provider"),
    ("entryPoints:\n  web: {address: ':80'}\nproviders:\n  file: {filename: dyn.yml}\n",
     "providers.file.filename dyn.yml is not here"),
    ("http:\n  routers:\n    r: {rule: 'PathPrefix(`/v1`', service: s}\n  services:\n    s: {loadBalancer: {servers: [{url: 'http://a:1'}]}}\n",
     "router r: expected"),
    ("http:\n  services:\n    s: {loadBalancer: {servers: [{url: 'http://a:1'}]}}\n", "no HTTP router"),
])
def test_what_verify_cannot_read_is_one_clear_line(tmp_path, text, message):
    with pytest.raises(UnusableInput, match=message):
        read_config(write(tmp_path, "traefik.yml", text), "traefik")


@pytest.mark.parametrize("text, value", [("60s", 60.0), ("1m30s", 90.0), (45, 45.0), ("0", None), ("250ms", 0.25)])
def test_durations(text, value):
    assert seconds(text) == value


@pytest.mark.slow
def test_faults_are_measured_where_they_are_and_the_clean_route_is_clean(verify_server, headers_late, tmp_path):
    path = published(tmp_path)
    wanted = RouteWanted(path="/api/chat/completions")
    report = verify_config(path, checks=["streaming", "long-stream"], server=verify_server, wanted=wanted,
                           max_stream_s=6)
    found = {f.kind: f for f in report.failures()}
    assert set(found) == {"buffering", "total-timeout"}, report.checks
    assert found["buffering"].where.endswith("llm.yml:21") and found["total-timeout"].where.endswith("traefik.yml:11")
    assert next(c for c in report.checks if c.name == "loopback-only").passed
    (tmp_path / "dynamic" / "llm.yml").write_text(DYNAMIC.replace("[auth, limits]", "[auth]"))
    (tmp_path / "traefik.yml").write_text(STATIC.replace("writeTimeout: 5s", "writeTimeout: 0s"))
    clean = verify_config(path, checks=["streaming", "long-stream"], server=verify_server, wanted=wanted,
                          max_stream_s=6)
    assert clean.ok, clean.checks
