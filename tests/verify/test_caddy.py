"""verify on Caddy: a Caddyfile through Caddy's own adapter (or Caddy's JSON), the route chosen by
Caddy's matchers, the settings in effect, the rewrite to loopback checked by `caddy validate`,
and measured runs in front of the lab's server."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from labs.findings import UnusableInput
from labs.verify import read_config, verify_config
from labs.verify.run import rewrite_config
from labs.verify.caddy import rewrite
from labs.verify.readers import suspicions
from labs.verify.launch import validate
from labs.verify.model import Options, RouteWanted

REPO = Path(__file__).resolve().parents[2]
FIXED = REPO / "proxies" / "fixed" / "Caddyfile"
pytestmark = pytest.mark.skipif(shutil.which("caddy") is None, reason="caddy is not installed")

SITE = """\
{
\tservers {
\t\ttimeouts {
\t\t\twrite 10s
\t\t}
\t}
}

api.example.com, www.example.com {
\tencode gzip zstd
\thandle_path /static/* {
\t\tfile_server
\t}
\thandle_path /api/* {
\t\treverse_proxy webui:8080
\t}
\t@chat {
\t\tpath /v1/*
\t\tmethod POST
\t}
\thandle @chat {
\t\treverse_proxy 10.0.0.5:8000 10.0.0.6:8000 {
\t\t\tflush_interval 100ms
\t\t\ttransport http {
\t\t\t\tread_timeout 5s
\t\t\t}
\t\t}
\t}
\thandle {
\t\trespond "hello"
\t}
}
"""


def _write(tmp_path: Path, text: str, name: str = "Caddyfile") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_chat_route_is_the_handle_with_its_path_and_method(tmp_path):
    reading = read_config(_write(tmp_path, SITE))
    assert reading.proxy == "caddy" and reading.path == "/v1/chat/completions"
    assert "reverse_proxy 10.0.0.5:8000 10.0.0.6:8000" in reading.route and reading.route.endswith("Caddyfile:22)")
    assert reading.host == "api.example.com"
    assert reading.get("flush_interval").where.endswith("Caddyfile:23")
    assert reading.value("read_timeout") == 5 and reading.get("read_timeout").where.endswith(":25")
    assert reading.value("server write_timeout") == 10 and reading.get("server write_timeout").where.endswith(":4")
    encode = reading.get("encode")
    assert encode.value["event_streams"] and encode.where.endswith(":10")
    kinds = {s.kind for s in suspicions(reading, Options())}
    assert kinds == {"idle-timeout", "total-timeout"}  # flush_interval > 0: not for SSE; 2.11 flushes encoded events
    on_26 = read_config(_write(tmp_path, SITE), wanted=RouteWanted(version="2.6"))
    assert {s.kind for s in suspicions(on_26, Options())} == kinds | {"compression-delay"}


def test_handle_path_strips_its_prefix_and_path_asked_for(tmp_path):
    reading = read_config(_write(tmp_path, SITE), wanted=RouteWanted(path="/api/chat/completions"))
    assert "reverse_proxy webui:8080" in reading.route and "asked for with --path" in reading.why
    assert reading.get("flush_interval").is_default and reading.get("dial_timeout").is_default
    # The usual paths in order: /v1/ wins over /api/ when nothing is asked.
    assert "10.0.0.5" in read_config(_write(tmp_path, SITE)).route


def test_host_asked_for_picks_the_site(tmp_path):
    text = SITE + "\nother.example.org {\n\treverse_proxy 192.0.2.1:9000\n}\n"
    reading = read_config(_write(tmp_path, text), wanted=RouteWanted(host="other.example.org"))
    assert "192.0.2.1:9000" in reading.route and reading.host == "other.example.org"


def test_the_fixed_caddyfile_keeps_event_streams_out_of_encode():
    reading = read_config(FIXED)
    assert reading.value("encode") is None  # its matcher skips requests accepting text/event-stream
    assert reading.value("read_timeout") == 300 and reading.get("flush_interval").is_default
    assert suspicions(reading, Options()) == []


def test_header_matchers_see_verifys_content_length(tmp_path):
    """verify's POST carries a Content-Length of a few hundred bytes: a guard on large bodies lets
    it by and a matcher for bodies with a length takes it (the fixed Caddyfile's @sized route,
    the one that buffers), as Caddy itself would route it."""
    assert "> header > reverse_proxy" in read_config(FIXED).route
    text = """:80 {
\t@huge header_regexp Content-Length "^[0-9]{8,}$"
\trespond @huge 413
\t@sized header Content-Length *
\treverse_proxy @sized 10.0.0.5:8000
\treverse_proxy 10.0.0.6:8000
}
"""
    assert "10.0.0.5:8000" in read_config(_write(tmp_path, text)).route


def test_caddy_json_is_read_as_is(tmp_path):
    import subprocess
    adapted = subprocess.run(["caddy", "adapt", "--config", str(_write(tmp_path, SITE)), "--adapter", "caddyfile",
                              "--pretty"], capture_output=True, text=True, check=True).stdout
    reading = read_config(_write(tmp_path, adapted, "caddy.json"))
    assert reading.proxy == "caddy" and "10.0.0.5:8000" in reading.route
    assert reading.value("read_timeout") == 5 and ".json:" in reading.get("read_timeout").where


def test_rewrite_is_loopback_only_and_caddy_validates_it(tmp_path):
    path = _write(tmp_path, SITE)
    reading = read_config(path)
    folder = tmp_path / "run"
    folder.mkdir()
    rewritten = rewrite_config(reading, 8000, folder)
    data = json.loads(rewritten.main.read_text())
    assert {host for _, host in rewrite.addresses(rewritten)} == {"127.0.0.1"}
    assert data["admin"] == {"disabled": True} and set(data["apps"]) == {"http"}
    assert all(s["automatic_https"] == {"disable": True} for s in data["apps"]["http"]["servers"].values())
    assert "as Caddy's JSON" in rewritten.diff and "127.0.0.1:8000" in rewritten.diff
    assert any("automatic HTTPS is off" in n for n in rewritten.notes)
    validate(rewritten)


@pytest.mark.parametrize("text, line", [("example.com {\n\treverse_proxy {\n\t\tbogus 1\n\t}\n}\n", 3),
                                        ("example.com {\n\timport nowhere.conf\n}\n", 2)])
def test_what_caddy_cannot_adapt_is_unusable_at_its_line(tmp_path, text, line):
    with pytest.raises(UnusableInput) as raised:
        read_config(_write(tmp_path, text), proxy="caddy")
    assert raised.value.line == line and "Caddyfile" in str(raised.value.file)


def test_missing_file_and_a_config_that_proxies_nothing(tmp_path):
    with pytest.raises(UnusableInput, match="no such file"):
        read_config(tmp_path / "Caddyfile", proxy="caddy")
    with pytest.raises(UnusableInput, match="nothing is proxied: no server has a reverse_proxy$"):
        read_config(_write(tmp_path, "garbage here\n"), proxy="caddy")


def test_a_path_no_route_proxies_gets_the_shared_error(tmp_path):
    """The one search's error (labs/verify/route.py): the path asked, every proxied route, the flags."""
    text = ":80 {\n\thandle /api/* {\n\t\treverse_proxy 10.0.0.5:8000\n\t}\n\trespond 404\n}\n"
    with pytest.raises(UnusableInput) as raised:
        read_config(_write(tmp_path, text), wanted=RouteWanted(path="/v1/chat/completions"))
    assert str(raised.value).endswith("no route proxies POST /v1/chat/completions; the proxied routes are: "
                                      "server srv0: reverse_proxy 10.0.0.5:8000 (choose one with --path, --host or --header)")


def test_a_header_given_with_header_picks_the_route_its_matcher_names(tmp_path):
    """--header reaches Caddy's `header` and `header_regexp` matchers, as it reaches the proxy when
    verify measures: without it the route for everyone else serves."""
    text = """:80 {
\t@team_a header X-Team a
\treverse_proxy @team_a 10.0.0.5:8000
\t@team_b header_regexp X-Team ^b[0-9]+$
\treverse_proxy @team_b 10.0.0.6:8000
\treverse_proxy 10.0.0.7:8000
}
"""
    path = _write(tmp_path, text)
    chosen = {team: read_config(path, wanted=RouteWanted(headers=(("X-Team", team),) if team else ())).route
              for team in ("a", "b12", "c", None)}
    assert "10.0.0.5:8000" in chosen["a"] and "10.0.0.6:8000" in chosen["b12"]
    assert "10.0.0.7:8000" in chosen["c"] and "10.0.0.7:8000" in chosen[None]
    assert "--header X-Team" in read_config(path, wanted=RouteWanted(headers=(("X-Team", "a"),))).why


def _for_26(text: str) -> str:
    """The fixed Caddyfile (written for 2.11) as Caddy 2.6 spells it: buffer_requests, the name 2.7 renamed."""
    return re.sub(r"^(\s*)request_buffers \d+$", r"\1buffer_requests", text, flags=re.M)


def _with_low_latency_mode(text: str) -> str:
    """The fixed Caddyfile with `flush_interval -1` in each of its reverse_proxy blocks."""
    return re.sub(r"^(\s*)(reverse_proxy .*\{)$", r"\1\2\n\1    flush_interval -1", text, flags=re.M)


def _clean_on_current_then_26(server, tmp_path: Path, text: str, check: str, also: str):
    """`text` on the current release: `check` passes and nothing is suspected; then the same
    config as 2.6 spells it, run on 2.6 with `also` (its text and report)."""
    current = verify_config(_write(tmp_path, text, "current"), checks=[check], server=server)
    assert next(c for c in current.checks if c.name == check).passed, current.checks
    assert not current.findings, current.findings
    text = _for_26(text)
    return text, verify_config(_write(tmp_path, text), checks=[also, check], server=server,
                               wanted=RouteWanted(version="2.6"))


@pytest.mark.slow
def test_low_latency_mode_keeps_a_departed_clients_request(verify_server, tmp_path):
    """The converse of the fixed Caddyfile's verdict (tests/verify/test_fixed.py): the same file
    with `flush_interval -1` streams as well and passes every check but disconnect, at that line
    (measured on Caddy 2.6.2: the server noticed the departure only at its next write, 2.21 s).
    Caddy 2.11 passes it on at once with the same setting (measured 2026-12-06: disconnect passed)."""
    text = _with_low_latency_mode(FIXED.read_text())
    # The chat route's two proxies (the sized and the chunked one) and the MCP route's.
    assert text.count("flush_interval -1") == 3
    text, report = _clean_on_current_then_26(verify_server, tmp_path, text, "disconnect", "streaming")
    outcome = {c.name: c.passed for c in report.checks if c.ran}
    assert outcome == {"streaming": True, "disconnect": False, "loopback-only": True}, \
        [(c.name, c.observed) for c in report.checks]
    [finding] = report.failures()
    # The chat route's first proxy (the buffering one, for sized bodies) is the one a prompt takes,
    # not the MCP route's above it.
    lines = text.splitlines()
    sized = next(n for n, line in enumerate(lines, 1) if line.strip().startswith("reverse_proxy @sized"))
    line = next(n for n, line in enumerate(lines, 1) if n > sized and line.strip() == "flush_interval -1")
    assert finding.kind == "disconnect-not-propagated" and finding.where.endswith(f"Caddyfile:{line}")


@pytest.mark.slow
def test_encode_on_event_streams_is_a_failure_measured_with_large_events(verify_server, tmp_path):
    """Measured: small events pass uncompressed or not depending on how many the first read holds
    (under load the first write can pass minimum_length); events above it (a long first delta, a
    tool call) turn gzip on and the encoder holds the answer to the end: the catalogue's
    caddy-encode. The gzip check asks with large events whenever small ones stayed plain, so the
    verdict is a failure either way (measured on Caddy 2.6.2). Caddy 2.11's encoder flushes each
    event instead (measured 2026-12-06: gzip-encoded, 12 events in 12 reads): the check passes."""
    # The fixed config's encode (request and Content-Type matchers) made plain: every answer.
    text, found = re.subn(r"encode @compressible \{\n.*?\n    \}\n", "encode gzip\n", FIXED.read_text(), flags=re.S)
    assert found == 1, "the fixed Caddyfile's encode block has changed: update this test's edit"
    text, report = _clean_on_current_then_26(verify_server, tmp_path, text, "gzip", "streaming")
    gzip = next(c for c in report.checks if c.name == "gzip")
    assert not gzip.passed and gzip.ran and "held to the end" in gzip.observed, gzip.observed
    [finding] = [f for f in report.findings if f.kind == "compression-delay"]
    assert finding.severity == "failure" and finding.where.endswith("Caddyfile:" + str(
        next(n for n, line in enumerate(text.splitlines(), 1) if line.strip() == "encode gzip")))