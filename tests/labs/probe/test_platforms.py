"""A measured limit that matches a documented platform limit names the platform, as a hint beside
the measurement (labs/probe/platforms.py): the position and the kind must match, the number within
the probe's own precision, and a limit nobody documents names nothing."""
from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from labs.probe import platforms
from labs.probe.base import Observation
from labs.probe.report import ProbeReport, print_report


def named(kind: str, position: str | None, limit_s: float) -> list[str]:
    return [hint.split(":", 1)[0] for hint in platforms.hints(kind, position, limit_s)]


def test_a_limit_names_the_platforms_that_document_it() -> None:
    assert named("idle-timeout", "before-headers", 125.4) == ["Cloudflare (proxied)"]
    # Cloudflare's documented 100 s is gone from its docs (125 s since 2026-07): 101 s names nothing.
    assert named("idle-timeout", "before-headers", 101.3) == []
    # 60 s is two platforms' default: both are named, neither is claimed.
    assert named("idle-timeout", "mid-stream", 62.0) == ["AWS Application Load Balancer", "nginx (and ingress-nginx)"]
    # Within the precision of two documented limits (Heroku's 55 s, ALB's 60 s): all are named.
    assert named("idle-timeout", "mid-stream", 58.9) == ["AWS Application Load Balancer", "Heroku router", "nginx (and ingress-nginx)"]
    assert named("total-timeout", None, 29.2) == ["AWS API Gateway (REST)", "Google Cloud Application Load Balancer"]
    assert named("total-timeout", None, 15.1) == ["Envoy (Envoy Gateway, Gloo, a bare Envoy)"]
    assert named("total-timeout", None, 61.0) == ["Envoy AI Gateway"]
    assert named("total-timeout", None, 302.0) == ["Google Cloud Run"]
    assert named("total-timeout", None, 120.0) == ["AWS App Runner"]
    assert named("idle-timeout", "after-headers", 300.4) == ["Railway"]


def test_the_position_and_the_kind_must_match_too() -> None:
    # Heroku's 30 s counts to the first byte, its 55 s after it.
    assert "Heroku router" in named("idle-timeout", "before-headers", 30.4)
    assert "Heroku router" not in named("idle-timeout", "mid-stream", 30.4)
    assert "Heroku router" in named("idle-timeout", "mid-stream", 54.0)
    # An idle limit of 29 s is not API Gateway's total one.
    assert "AWS API Gateway (REST)" not in named("idle-timeout", "mid-stream", 29.0)


def test_a_limit_nobody_documents_names_nothing() -> None:
    assert platforms.hints("idle-timeout", "mid-stream", 45.0) == []
    assert platforms.hints("total-timeout", None, 5.0) == []
    assert platforms.hints("idle-timeout", "mid-stream", None) == []
    assert platforms.hints("buffering", None, 60.0) == []


def test_the_hint_stands_beside_the_measurement_in_every_output() -> None:
    report = ProbeReport(urls=["https://chat.example.com/v1"], origin="other")
    report.add(Observation("idle-timeout-mid-stream", "idle-timeout", True, "idle limit ~125.40 s in mid-stream",
                           "a silence of 131.00 s in mid-stream ended the stream (...)", limit_s=125.4), None, None)
    report.add(Observation("idle-timeout-after-headers", "idle-timeout", True, "idle limit ~45.00 s",
                           "a silence of 47.00 s ...", limit_s=45.0), None, None)
    cloudflare, unknown = report.findings
    assert cloudflare.evidence.startswith("a silence of 131.00 s") and cloudflare.limit_s == 125.4
    assert len(cloudflare.hints) == 1 and "524" in cloudflare.hints[0] and "developers.cloudflare.com" in cloudflare.hints[0]
    # Each hint carries its source's date.
    assert cloudflare.hints[0].endswith(", 2026-07-22)")
    assert unknown.hints == ()
    shown = json.loads(json.dumps(report.to_json()))
    assert shown["findings"][0]["hints"] == list(cloudflare.hints) and shown["findings"][1]["hints"] == []
    out = io.StringIO()
    print_report(report, Console(file=out, width=300, color_system=None))
    text = out.getvalue()
    assert "evidence: a silence of 131.00 s" in text
    assert text.count("matches the documented limit of Cloudflare (proxied)") == 1
    assert text.count("matches the documented limit") == 1


def test_every_entry_has_a_side_a_source_and_its_date() -> None:
    assert {e.side for e in platforms.LIMITS} == set(platforms.SIDES)
    for entry in platforms.LIMITS:
        assert entry.source.startswith("https://") and entry.dated, entry
        assert entry.dated.startswith("read 20") or entry.dated[:4].isdigit(), entry.dated
        assert entry.kind in ("idle-timeout", "total-timeout")
        assert (entry.positions == ()) == (entry.kind == "total-timeout"), entry


def test_a_clients_limit_is_never_named_from_the_path_but_in_the_heartbeat_advice() -> None:
    # Codex's, undici's and LibreChat's limits are theirs: a path cut at 300 s is Railway's.
    assert "Codex" not in named("idle-timeout", "mid-stream", 300.0)
    advice = platforms.heartbeat_advice(125.4)
    assert "more often than every 120 s" in advice and "the path's (125 s)" in advice
    assert "Codex 300 s" in advice and "Node fetch (undici) 300 s" in advice and "LibreChat (MCP) 120 s" in advice
    # A path limit under the clients' is the one to beat.
    assert "more often than every 30 s" in platforms.heartbeat_advice(30.0)
    report = ProbeReport(urls=["https://chat.example.com/v1"], origin="other")
    report.add(Observation("idle-timeout-mid-stream", "idle-timeout", True, "idle limit ~30.00 s",
                           "a silence of 33.00 s ...", limit_s=30.0), None, "nginx-read-timeout: raise it")
    report.add(Observation("total-timeout", "total-timeout", True, "cut after 29.00 s", "...", limit_s=29.0),
               None, "envoy-route-timeout: 0s")
    idle, total = report.findings
    assert idle.fix == f"nginx-read-timeout: raise it | {platforms.heartbeat_advice(30.0)}"
    assert total.fix == "envoy-route-timeout: 0s"  # heartbeats do not beat a limit on the whole response


def test_docs_show_the_table_as_the_module_writes_it() -> None:
    docs = (Path(__file__).parents[3] / "docs" / "probe.md").read_text()
    assert platforms.markdown_table() in docs
