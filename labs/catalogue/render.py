"""`python -m labs render SCENARIO`: the proxy config a scenario's variant runs, validated by the
proxy's own binary, exactly as the lab renders it (only the ports differ: a lab picks free ones).

    python -m labs render nginx-buffering                      # the broken variant
    python -m labs render nginx-buffering --variant fixed
    python -m labs render chain-buffering --proxy haproxy      # one hop of a chain
    python -m labs render gateway-total-deadline               # a manifest's translation
    python -m labs render caddy-encode --proxy-version 2.6     # for another release of the proxy

A variant declared as Kubernetes manifests runs the config their controller would run: that
translation is what is printed (labs/scenario/manifest_hop.py), `--check` runs it through the
proxy's validator after the same rewrite to loopback as the lab's.

The proxies' own variants (`defaults`, `fixed`) are rendered by `python -m proxies render`.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from labs import catalogue
from labs.findings import UnusableInput
from labs.scenario.manifest_hop import prepared, translated
from labs.lab.hops import hop_kind, hop_settings
from labs.scenario.model import VariantName
from proxies.apps import AppSettings, is_app
from proxies.apps.kinds import launch
from proxies.apps.launch import AppMissing
from proxies.binaries import BinaryProblem
from proxies.kinds import choose_releases
from proxies.releases import CHOICE_VARIABLE
from proxies.rendering import render
from proxies.validation import ConfigInvalid, validate
from server.processes import free_port


def rendered(name: str, variant_name: VariantName, proxy: str | None = None) -> tuple[str, str]:
    """(proxy, config text) of one hop of a scenario's variant; ValueError says what to ask for."""
    scenario = catalogue.get(name)
    if not scenario.path:
        raise ValueError(f"{scenario.name} runs no proxy: the client talks to the server directly")
    if proxy is None:
        if len(scenario.path) > 1:
            raise ValueError(f"{scenario.name} runs {', '.join(scenario.path)}: "
                             "name one with --proxy")
        proxy = scenario.path[0]
    elif proxy not in scenario.path:
        raise ValueError(f"{scenario.name} runs {', '.join(scenario.path)}, not {proxy}")
    variant = scenario.variant(variant_name)
    if variant.manifest is not None:
        with tempfile.TemporaryDirectory(prefix="streamlab-render-") as folder:
            made, config = translated(variant.manifest, Path(folder))
            return made, config.read_text().replace(f"{folder}/", "")  # the header names the manifest
    # The release the lab would run (--proxy-version / LAB_PROXY_VERSION, default: the current one):
    # a template may differ by it (Caddy 2.7 renamed buffer_requests).
    series = choose_releases(os.environ.get(CHOICE_VARIABLE), [hop_kind(proxy)], strict=False).get(hop_kind(proxy))
    settings = hop_settings(proxy, variant.proxy.get(proxy, {}), scenario.base,
                            **({"version": series} if series else {}))
    if isinstance(settings, AppSettings):  # an app's "config" is its command line and environment
        return proxy, launch(settings, Path(f"/tmp/streamlab-{hop_kind(proxy)}-WORKDIR")).shown()
    return proxy, render(settings)


def main(name: str, variant_name: VariantName, proxy: str | None, check: bool) -> int:
    try:
        proxy, text = rendered(name, variant_name, proxy)
    except (catalogue.UnknownScenario, ValueError, AppMissing) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        if check and (manifest := catalogue.get(name).variant(variant_name).manifest) is not None:
            with tempfile.TemporaryDirectory(prefix="streamlab-render-") as folder:
                prepared(proxy, manifest, free_port(), "local", Path(folder))
        elif check and not is_app(hop_kind(proxy)):
            series = choose_releases(os.environ.get(CHOICE_VARIABLE), [hop_kind(proxy)], strict=False)[hop_kind(proxy)]
            validate(text, hop_kind(proxy), series)
    except (ConfigInvalid, BinaryProblem, UnusableInput) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0
