"""One scenario at a time: its server and both variants' proxies, started through the lab runner
and kept up while the page runs it; then the lab client's run of the same variants, judged.
Both clients speak the protocol the page chose (`api`: the scenario's own by default; one of
the server's table, server.apis.table.APIS), the browser's read by static/apis.js.

The view adds one thing to the servers it starts: `--cors-origin` for the page's own origins,
so the browser can call each variant's entry point directly (the proxies pass the server's CORS
headers and its answers to preflight requests through).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from collections import Counter
from typing import Any, Callable, Mapping, Sequence

from labs import catalogue, provenance
from labs.scenario import report
from labs.client.results import StreamResult
from labs.scenario.runner import Lab, ScenarioOutcome
from labs.scenario.model import VARIANTS, Scenario, VariantName
from labs.lab.hops import hop_kind
from labs.scenario.browser_spec import browser_spec, from_browser, skipped_options
from labs.client.apis import client_api
from proxies.runtime.base import RunningProxy
from server.apis.table import APIS

# A page may ask for many streams; the lab client's own bound for a run stays the workload's.
MAX_BROWSER_STREAMS = 200


class ViewError(ValueError):
    """A request the view cannot honour; the message says why (shown on the page)."""


@dataclass
class OpenScenario:
    scenario: Scenario
    stack: contextlib.ExitStack
    hops: dict[VariantName, list[RunningProxy]] = field(default_factory=dict)
    # The scenario as the page's controls last ran it (streams, at once, leave after N tokens),
    # so that the lab client's run is the browser's run.
    as_run: Scenario | None = None


class ViewSession:
    """The servers (shared, started on first use) and the open scenario's proxies."""

    def __init__(self, origins: tuple[str, ...], runtime: str | None, reports: Path,
                 progress: Callable[[str], None] | None = None) -> None:
        cors = tuple(arg for origin in origins for arg in ("--cors-origin", origin))
        self.status = "idle"
        self.lab = Lab(runtime=runtime, server_args=cors, progress=self._progress)
        self.reports = reports
        self._log = progress or (lambda message: None)
        self._open: OpenScenario | None = None
        self._lock = threading.Lock()

    def _progress(self, message: str) -> None:
        self.status = message
        self._log(message)

    def close(self) -> None:
        with self._lock:
            self._close_open()
            self.lab.close()

    def _close_open(self) -> None:
        if self._open is not None:
            self._open.stack.close()
            self._open = None

    # ---- before the browser runs --------------------------------------------------------------

    def prepare(self, name: str, controls: Mapping[str, Any]) -> dict[str, Any]:
        """Start (or reuse) the scenario's path for both variants; what each panel's client runs."""
        scenario = _scenario(name)
        # Bad controls are refused before anything starts.
        workload = scenario.workload
        streams = _bounded_int(controls.get("streams"), workload.streams, 1, MAX_BROWSER_STREAMS)
        concurrency = _bounded_int(controls.get("concurrency"), workload.concurrency, 1, streams)
        api = _api(controls.get("api"), workload.api)
        _with_controls({}, controls)
        with self._lock:
            if self._open is None or self._open.scenario.name != name:
                self._close_open()
                self._open = self._start(scenario)
            opened = self._open
            spoken = dataclasses.replace(scenario, workload=dataclasses.replace(workload, api=api))
            specs = {v: _with_controls(self._spec(spoken, v, opened.hops[v]), controls) for v in VARIANTS}
            leave = specs["broken"].get("abortAfterEvents")
            opened.as_run = dataclasses.replace(spoken, workload=dataclasses.replace(
                spoken.workload, streams=streams, concurrency=concurrency, disconnect_after_events=leave))
        self._progress(f"{name}: ready")
        return {"scenario": name, "api": api, "variants": specs, "streams": streams, "concurrency": concurrency}

    def _start(self, scenario: Scenario) -> OpenScenario:
        opened = OpenScenario(scenario, contextlib.ExitStack())
        try:
            for name in VARIANTS:
                variant = scenario.variant(name)
                server = self.lab.server(variant.server_args, variant.server_nofile)
                self._progress(f"{scenario.name}: starting the {name} variant's path")
                hops = opened.stack.enter_context(
                    self.lab.path(scenario.path, variant, server.port, scenario.base))
                opened.hops[name] = hops
        except BaseException:
            opened.stack.close()
            raise
        return opened

    def _spec(self, scenario: Scenario, name: VariantName, hops: list[RunningProxy]) -> dict[str, Any]:
        """What the variant's panel runs: client.js's spec, in the workload's protocol."""
        variant, api = scenario.variant(name), client_api(scenario.workload.api)
        entry = self.lab.entry_url(scenario, name, hops)
        body = self.lab.request_body(scenario.workload, variant)
        # The client options' `api` is the browser's reader (fetch, eventsource), not the protocol.
        options = {**scenario.workload.client, **variant.client}
        spec = browser_spec(entry + api.path, body, scenario.workload, options)
        spec.update(entry=entry, wireApi=api.name, protocolHeaders=api.headers(),
                    skipped=skipped_options(options))
        return spec

    # ---- after the browser ran -----------------------------------------------------------------

    def lab_report(self, name: str, browser: Mapping[str, Any]) -> dict[str, Any]:
        """The lab client's run of both variants through the same path, with the page's controls,
        judged and written to reports/NAME/ with the browser's measurements (browser.json)."""
        _scenario(name)
        with self._lock:
            opened = self._open
            if opened is None or opened.scenario.name != name or opened.as_run is None:
                raise ViewError(f"{name} is not running in the view: press Run first")
            scenario = opened.as_run
            outcome = ScenarioOutcome(scenario)
            started_at = provenance.started_now()
            for variant in VARIANTS:
                self._progress(f"{name}: the lab client runs the {variant} variant")
                run = self.lab.measure(scenario, variant, opened.hops[variant])
                outcome.runs[variant] = run
                outcome.checks[variant] = [check(run) for check in scenario.checks(variant)]
            commands = {v: self.lab.server_command(scenario.variant(v).server_args, scenario.variant(v).server_nofile)
                        for v in VARIANTS}
            # Which binaries the panels ran (nginx 1.30.6 (Debian sid)), as every report names them.
            outcome.provenance = provenance.collect(self.lab.runtime.name, [hop_kind(h) for h in scenario.path],
                                                    commands, started_at, releases=self.lab.releases(scenario.path))
        folder = self.reports / name
        self._progress(f"{name}: writing the report")
        paths = report.write_report(outcome, folder)
        comparison = compare(outcome, browser)
        (folder / "browser.json").write_text(json.dumps(
            {"browser": browser, "comparison": comparison}, indent=2, default=str))
        self._progress(f"{name}: done")
        return {
            "report": report.report_dict(outcome),
            "rows": report.metric_rows(outcome),
            "checks": report.check_rows(outcome),
            "diff": report.config_diff(outcome),
            "comparison": comparison,
            "files": {key: f"/report-files/{name}/{path.name}" for key, path in paths.items()},
        }


def compare(outcome: ScenarioOutcome, browser: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per variant, the first stream's TTFT, E2E, events, reads and outcome: browser vs lab client."""
    rows = []
    for variant, run in outcome.runs.items():
        streams = [from_browser(raw) for raw in browser.get(variant) or [] if isinstance(raw, Mapping)]
        rows.append({
            "variant": variant,
            "browser": _numbers(streams[0], streams) if streams else None,
            "lab": _numbers(run.first, run.results),
        })
    return rows


def _numbers(result: StreamResult, every: Sequence[StreamResult]) -> dict[str, Any]:
    """The first stream's numbers, and over every stream the outcomes and the latest TTFT."""
    def ms(seconds: float | None) -> float | None:
        return None if seconds is None else round(seconds * 1000.0, 1)
    ttfts = [r.ttft_s for r in every if r.ttft_s is not None]
    outcomes = Counter(r.outcome for r in every)
    return {"ttft_ms": ms(result.ttft_s), "e2e_ms": ms(result.e2e_s),
            "events": result.content_events, "reads": result.reads, "outcome": result.outcome,
            "streams": len(every), "outcomes": ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())),
            "ttft_max_ms": ms(max(ttfts)) if ttfts else None}


def _scenario(name: str) -> Scenario:
    try:
        return catalogue.get(name)
    except catalogue.UnknownScenario as exc:
        raise ViewError(str(exc)) from None


def _api(value: Any, default: str) -> str:
    """The protocol the page chose (its default: the scenario's), one of the server's table."""
    if value in (None, ""):
        return default
    if value not in APIS:
        raise ViewError(f"unknown api {value!r}: choose one of {', '.join(APIS)}")
    return str(value)


def _bounded_int(value: Any, default: int, low: int, high: int) -> int:
    if value in (None, ""):
        return min(max(default, low), high)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ViewError(f"{value!r} is not a whole number") from None
    if not low <= number <= high:
        raise ViewError(f"{number} is outside {low}..{high}")
    return number


def _with_controls(spec: Mapping[str, Any], controls: Mapping[str, Any]) -> dict[str, Any]:
    """The page's controls over a variant's client: leave after N tokens (an abort), or not."""
    out = dict(spec)
    abort = controls.get("abort_after_events")
    if abort not in (None, ""):
        out["abortAfterEvents"] = _bounded_int(abort, 1, 1, 100_000)
    elif "abort_after_events" in controls:
        out.pop("abortAfterEvents", None)
    return out
