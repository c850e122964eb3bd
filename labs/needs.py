"""What a lab needs installed, read from what it declares: its path's hops (proxies.needs), its
client library, its driver (Chromium for the browser-layer scenarios). Nothing is listed twice:

    python -m labs setup nginx-buffering     install what that lab needs, nothing else
    python -m labs setup load view           the load lab's proxies; every hop the view can play
    python -m labs setup check               what `make check`'s fast tests run: every proxy's binary
    python -m labs setup --all               everything (what `make setup` and the suite need)
    python -m labs setup NAME --check        say what is missing; install nothing (exit 1 if any)

Its own errors (an unknown name, a step that cannot run here) exit 2 with one line.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Iterable, Sequence

from labs.scenario.mcp_clients import CHROMIUM, MCP_CLIENTS
from labs.scenario.mcp_model import McpScenario
from labs.scenario.model import Scenario
from labs.lab.hops import hop_kind
from labs.scenario.chromium import NEEDS as BROWSER_DRIVER_NEEDS
from proxies.kinds import KINDS
from proxies.apps.install import install_agents
from proxies.apps.nodejs import AGENTS_DIR
from server.mcp.sdks import SDK_LINES
from proxies.needs import (HOP_NEEDS, REQUIREMENTS, SETTING_NEEDS, CannotInstall, Requirement, hop_needs,
                           install_missing, npm_ci_present, pip_extra, python_present)

# The measuring client's libraries (labs.client.libraries.LIBRARIES) that are not base dependencies.
LIBRARY_NEEDS: dict[str, tuple[str, ...]] = {
    "requests-iter-lines": ("python-apps",), "requests-chunk-1": ("python-apps",),
    "openai": ("python-sdk",), "anthropic": ("python-sdk",), "aiohttp-lines": ("python-sdk",), "aiohttp-events": ("python-sdk",),
    "node-fetch": ("node-modules",),
}


def _chromium_present() -> bool:
    from labs.view.install import found
    return found() is not None


# The proxies layer's requirements, and the clients' own.
ALL: dict[str, Requirement] = {**REQUIREMENTS, **{r.name: r for r in (
    Requirement("chromium", "Chromium, from Debian's package (Playwright drives it)", _chromium_present,
                apt="chromium"),
    Requirement("python-browser", "Playwright's Python driver (the extra [browser])",
                python_present("playwright"), pip_extra("browser")),
    Requirement("python-mcp", "the official MCP SDK, the MCP origin's and its client's (the extra [mcp])",
                python_present("mcp"), pip_extra("mcp")),
    Requirement("mcp1-venv", f"the MCP SDK's 1.x line in its own venv ({SDK_LINES['1.30'].pin}, "
                f"{SDK_LINES['1.30'].venv}): the origin as most deployed servers run it",
                SDK_LINES["1.30"].present, SDK_LINES["1.30"].install),
    Requirement("python-sdk", "the OpenAI and Anthropic SDKs and aiohttp (the extra [sdk])",
                python_present("openai", "anthropic", "aiohttp"),
                pip_extra("sdk")),
    Requirement("agents", "the coding agents Codex CLI and Claude Code (labs.client.agents): npm ci "
                "from their own lockfile, ~800 MB of native binaries", lambda: npm_ci_present(AGENTS_DIR),
                install_agents),
)}}
# What a browser-driven workload needs, as labs.scenario.chromium.chromium_driver declares it.
BROWSER_NEEDS = BROWSER_DRIVER_NEEDS
# Besides every hop: what the whole test suite needs (pytest and its plugins are in [test]).
# What an MCP scenario's origin and client need besides its proxies: the SDK, and its 1.x line.
MCP_NEEDS = ("python-mcp", "mcp1-venv")
SUITE_NEEDS = (*BROWSER_NEEDS, "python-sdk", "python-apps", "agents", *MCP_NEEDS, *MCP_CLIENTS[CHROMIUM].needs)


def _unique(names: Iterable[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        if name not in out:
            out.append(name)
    return out


def scenario_needs(scenario: Scenario) -> list[str]:
    """The requirements of one scenario: its hops, the client libraries of both variants, its driver."""
    variants = (scenario.variant("broken"), scenario.variant("fixed"))
    libraries = {options.get("library") for options in
                 (scenario.workload.client, *(variant.client for variant in variants))}
    agents = any(options.get("agent") for options in
                 (scenario.workload.client, *(variant.client for variant in variants)))
    driver_needs = getattr(scenario.workload.driver, "needs", ())
    setting_needs = (need for variant in variants for hop, settings in variant.proxy.items()
                     for key, value in settings.items() if value
                     for need in SETTING_NEEDS.get((hop_kind(hop), key), ()))
    return _unique([*hop_needs(hop_kind(hop) for hop in scenario.path), *setting_needs,
                    *(need for library in libraries if library for need in LIBRARY_NEEDS.get(library, ())),
                    *(["agents"] if agents else []), *driver_needs])


def load_needs() -> list[str]:
    from labs.load.paths import PATHS
    return hop_needs(path.proxy for path in PATHS if path.proxy)


def view_needs() -> list[str]:
    """Every hop the view can play; its client is the user's own browser, so no Chromium."""
    from labs import catalogue
    return _unique(need for scenario in catalogue.SCENARIOS for need in scenario_needs(scenario)
                   if need not in BROWSER_NEEDS)


def check_needs() -> list[str]:
    """What `make check` runs besides Python: every proxy's binary, for its config check alone
    (the catalogue's hops and every setting are proven by their proxy's own `nginx -t`,
    `haproxy -c`, `envoy --mode validate` ...); no app, browser or client library is started."""
    return hop_needs(KINDS)


def everything() -> list[str]:
    return _unique([*hop_needs(HOP_NEEDS), *(n for needs in SETTING_NEEDS.values() for n in needs), *SUITE_NEEDS])


def needs_of(name: str) -> list[str]:
    """The requirements of a lab by the name `make lab-NAME` takes (a scenario, load, view, all),
    or of `make check`'s tests (check)."""
    if name == "all":
        return everything()
    if name == "check":
        return check_needs()
    if name == "load":
        return load_needs()
    if name == "view":
        return view_needs()
    from labs import catalogue
    scenario = catalogue.find(name)
    if isinstance(scenario, McpScenario):  # its proxies, the SDK and its 1.x line, its clients' SDKs
        clients = [need for client in scenario.clients for need in MCP_CLIENTS[client].needs]
        return _unique([*hop_needs(scenario.proxies), *MCP_NEEDS, *clients])
    return scenario_needs(scenario)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs setup", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="scenario names, `load`, `view`, `check`")
    parser.add_argument("--all", action="store_true", help="everything the labs and the tests use")
    parser.add_argument("--check", action="store_true", help="report what is missing; install nothing")
    args = parser.parse_args(argv)
    if not args.names and not args.all:
        parser.error("name a lab (e.g. nginx-buffering) or pass --all")
    from labs import catalogue
    try:
        needed = _unique(need for name in (["all"] if args.all else args.names) for need in needs_of(name))
    except catalogue.UnknownScenario as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        absent = [ALL[name] for name in needed if not ALL[name].present()]
        for requirement in absent:
            print(f"missing: {requirement.name}: {requirement.what}", file=sys.stderr)
        return 1 if absent else 0
    started = time.monotonic()
    try:
        installed = install_missing(needed, ALL)
    except (CannotInstall, SystemExit) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if installed:
        print(f"setup: installed {', '.join(installed)} in {time.monotonic() - started:.1f} s", flush=True)
    return 0
