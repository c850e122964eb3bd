"""A measured limit that matches a documented platform limit names the platform, as a hint beside
the measurement (labs/probe/platforms.py): the position and the kind must match, the number within
the probe's own precision, and a limit nobody documents names nothing."""
from __future__ import annotations

import io
import json

from rich.console import Console

from labs.probe import platforms
from labs.probe.base import Observation
from labs.probe.report import ProbeReport, print_report


def named(kind: str, position: str | None, limit_s: float) -> list[str]:
    return [hint.split(":", 1)[0] for hint in platforms.hints(kind, position, limit_s)]


def test_a_limit_names_the_platforms_that_document_it() -> None:
    assert named("idle-timeout", "before-headers", 101.3) == ["Cloudflare (proxied)"]
    # 60 s is two platforms' default: both are named, neither is claimed.
    assert named("idle-timeout", "mid-stream", 62.0) == ["AWS Application Load Balancer", "nginx (and ingress-nginx)"]
    # Within the precision of two documented limits (Heroku's 55 s, ALB's 60 s): all are named.
    assert named("idle-timeout", "mid-stream", 58.9) == ["AWS Application Load Balancer", "Heroku router", "nginx (and ingress-nginx)"]
    assert named("total-timeout", None, 29.2) == ["AWS API Gateway (REST)", "Google Cloud Application Load Balancer"]
    assert named("total-timeout", None, 15.1) == ["Envoy (Envoy Gateway, Gloo, a bare Envoy)"]


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
    report.add(Observation("idle-timeout-mid-stream", "idle-timeout", True, "idle limit ~100.40 s in mid-stream",
                           "a silence of 104.00 s in mid-stream ended the stream (...)", limit_s=100.4), None, None)
    report.add(Observation("idle-timeout-after-headers", "idle-timeout", True, "idle limit ~45.00 s",
                           "a silence of 47.00 s ...", limit_s=45.0), None, None)
    cloudflare, unknown = report.findings
    assert cloudflare.evidence.startswith("a silence of 104.00 s") and cloudflare.limit_s == 100.4
    assert len(cloudflare.hints) == 1 and "524" in cloudflare.hints[0] and "developers.cloudflare.com" in cloudflare.hints[0]
    assert unknown.hints == ()
    shown = json.loads(json.dumps(report.to_json()))
    assert shown["findings"][0]["hints"] == list(cloudflare.hints) and shown["findings"][1]["hints"] == []
    out = io.StringIO()
    print_report(report, Console(file=out, width=300, color_system=None))
    text = out.getvalue()
    assert "evidence: a silence of 104.00 s" in text
    assert text.count("matches the documented limit of Cloudflare (proxied)") == 1
    assert text.count("matches the documented limit") == 1
