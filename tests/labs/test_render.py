"""`python -m labs render`: the proxy config a scenario's variant runs, as the lab renders it."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from labs import catalogue
from labs.catalogue.render import rendered

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "labs", "render", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_the_variants_differ_in_what_the_scenario_switches() -> None:
    _, broken = rendered("nginx-buffering", "broken")
    _, fixed = rendered("nginx-buffering", "fixed")
    assert "proxy_buffering           off;" not in broken
    assert "proxy_buffering           off;" in fixed


def test_every_hop_of_every_scenario_renders() -> None:
    hops = 0
    for scenario in catalogue.SCENARIOS:
        for proxy in scenario.path:
            for variant in ("broken", "fixed"):
                name, text = rendered(scenario.name, variant, proxy)
                assert name == proxy and text
                hops += 1
    assert hops >= 2 * len([s for s in catalogue.SCENARIOS if s.path])


def test_the_cli_prints_a_validated_config() -> None:
    result = cli("nginx-buffering", "--variant", "fixed")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# nginx in front of") and "proxy_buffering           off;" in result.stdout


@pytest.mark.parametrize("args, message", [
    (("chain-buffering",), "chain-buffering runs envoy, haproxy, nginx: name one with --proxy"),
    (("chain-buffering", "--proxy", "squid"), "chain-buffering runs envoy, haproxy, nginx, not squid"),
    (("server-disconnect",), "server-disconnect runs no proxy"),
    (("no-such-scenario",), "no scenario named 'no-such-scenario'"),
], ids=["several-proxies", "another-proxy", "no-proxy", "unknown"])  # no scenario name: tests/test_selection.py
def test_the_cli_says_what_to_ask_for(args: tuple[str, ...], message: str) -> None:
    result = cli(*args)
    assert result.returncode == 2 and result.stdout == ""
    assert message in result.stderr


def test_one_hop_of_a_chain() -> None:
    result = cli("chain-buffering", "--proxy", "haproxy", "--no-validate")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# HAProxy in front of")
