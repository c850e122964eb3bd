"""What the pages show, gathered from the catalogue and reports/ (the templates only lay it out)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from labs import catalogue
from labs.scenario.model import Scenario
from server.apis.table import APIS

LAYER_TITLES = {"proxy": "proxies", "chain": "chains of proxies", "server": "the server",
                "client": "the client and the browser", "load": "load"}
BROWSER_CONNECTIONS_PER_ORIGIN = 6


def layers() -> list[dict[str, Any]]:
    """Scenarios grouped by layer, in catalogue order."""
    grouped: dict[str, list[Scenario]] = {}
    for scenario in catalogue.SCENARIOS:
        grouped.setdefault(scenario.layer, []).append(scenario)
    return [{"layer": layer, "title": LAYER_TITLES.get(layer, layer), "scenarios": scenarios}
            for layer, scenarios in grouped.items()]


# Why the view does not play them: its measuring client is the browser, reading a token stream;
# an MCP scenario's client is the official MCP SDK's, opening sessions (labs/client/mcp_session.py).
TERMINAL_ONLY_WHY = ("These play in the terminal only: their client is the official MCP SDK's, which opens "
                     "sessions and calls tools, not the browser reading a token stream. Run them with")


def terminal_only() -> dict[str, Any]:
    """The catalogue's MCP scenarios, which the index lists with why and how to run them instead."""
    return {"title": "MCP sessions (in the terminal)", "why": TERMINAL_ONLY_WHY,
            "scenarios": list(catalogue.MCP_SCENARIOS)}


def scenario_page_data(scenario: Scenario) -> dict[str, Any]:
    """What the scenario page's script needs before Run: the workload's defaults and notes."""
    workload = scenario.workload
    notes = []
    if workload.driver is not None and scenario.name.startswith("browser-"):
        notes.append("The lab client of this scenario is Chromium itself (its guard runs the "
                     "same browser client as these panels).")
    elif workload.driver is not None:
        notes.append("The lab client runs this scenario's own sequence of clients; the browser "
                     "sends the workload's streams as plain requests.")
    if workload.streams > 1 or workload.concurrency > 1:
        notes.append(f"Over HTTP/1.1 the browser opens at most {BROWSER_CONNECTIONS_PER_ORIGIN} "
                     "connections per origin, so streams beyond that wait in the browser "
                     "(browser-connection-limit); the lab client has no such limit.")
    if workload.sequential:
        notes.append("The lab client sends these streams one after another; so does the browser "
                     "(concurrency 1).")
    return {
        "name": scenario.name,
        "streams": workload.streams,
        "concurrency": 1 if workload.sequential else workload.concurrency,
        "abort_after_events": workload.disconnect_after_events,
        "interval_ms": workload.interval_s * 1000.0,
        "first_due_ms": workload.first_due_s() * 1000.0,
        "script": workload.script,
        "api": workload.api,  # the protocol the page speaks unless the reader picks another
        "apis": [{"name": api.name, "path": api.path, "title": api.title} for api in APIS.values()],
        "notes": notes,
    }


def past_reports(folder: Path) -> list[dict[str, Any]]:
    """Every reports/NAME/ with a report.md, newest first, with its verdicts when readable."""
    found = []
    if not folder.is_dir():
        return found
    for md in folder.glob("*/report.md"):
        entry: dict[str, Any] = {"name": md.parent.name, "markdown": md.read_text(errors="replace"),
                                 "modified": md.stat().st_mtime, "files": sorted(
                                     p.name for p in md.parent.iterdir() if p.is_file())}
        try:
            entry["verdict"] = json.loads((md.parent / "report.json").read_text()).get("verdict", {})
        except (OSError, ValueError):
            entry["verdict"] = {}
        found.append(entry)
    return sorted(found, key=lambda e: e["modified"], reverse=True)
