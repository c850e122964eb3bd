"""Run a scenario: start the server and the proxies of each variant, drive the workload, measure.

    with Lab() as lab:
        outcome = lab.run(catalogue.get("nginx-buffering"))

A `Lab` keeps one server per distinct set of server flags for its whole life, so many scenarios
(and the pytest guards) share one warm server; proxies are started per variant and always stopped.
"""
from __future__ import annotations

import contextlib
import os
import shlex
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from labs import client, provenance
from labs.client import libraries
from labs.client.agent_streams import measure_agent
from labs.client.apis import client_api
from labs.client.results import StreamResult
from labs.client.peaks import GaugePeaks
from labs.scenario.manifest_hop import manifest_hop
from labs.scenario.reloads import ReloadAt
from labs.scenario.releases import older_releases, own_defaults
from labs.scenario.model import VARIANTS, CheckResult, Run, Scenario, Variant, VariantName, Workload
from labs.lab.hops import hop_kind, hop_settings, runtime_named
from labs.lab.server import served_model, wait_idle
from proxies.apps import is_app
from proxies.kinds import choose_releases, has_admin
from proxies.releases import CHOICE_VARIABLE
from proxies.runtime.base import RunningProxy, Runtime
from server.launcher import ServerHandle
from server.processes import free_port
from server.signals import run_async

PROMPT = [{"role": "user", "content": "Tell me something, one token at a time."}]
Progress = Callable[[str], None]


@dataclass
class ScenarioOutcome:
    """Both variants of one scenario, measured and judged."""

    scenario: Scenario
    runs: dict[VariantName, Run] = field(default_factory=dict)
    checks: dict[VariantName, list[CheckResult]] = field(default_factory=dict)
    # How it was made (labs.provenance): runtime, proxy versions or images, server command
    # lines, commit, CPUs, start time.
    provenance: dict[str, Any] = field(default_factory=dict)
    # Proxy kind -> the series of its release that ran (proxies.kinds.choose_releases).
    releases: dict[str, str] = field(default_factory=dict)
    # The same variants on each older release of a proxy whose behaviour here changed
    # (Scenario.since; Lab.run with by_release), each with its own releases and provenance.
    older: list["ScenarioOutcome"] = field(default_factory=list)
    # The broken variant with the proxy left at its own defaults on this release (Since.own_defaults),
    # judged by the symptom checks: does this release, left alone, show the symptom?
    own_defaults: Run | None = None
    own_defaults_checks: list[CheckResult] = field(default_factory=list)

    @property
    def wall_s(self) -> float:
        return sum(run.wall_s for run in self.runs.values()) + sum(o.wall_s for o in self.older)

    @property
    def every_release(self) -> list["ScenarioOutcome"]:
        """This outcome (the lab's choice, the current release by default), then the older ones."""
        return [self, *self.older]

    @property
    def all_passed(self) -> bool:
        """Every variant judged as expected, on every release that ran."""
        return all(o.passed(v) for o in self.every_release for v in o.runs)

    def passed(self, variant: VariantName) -> bool:
        return all(c.passed for c in self.checks.get(variant, []))

    @property
    def verdict(self) -> dict[VariantName, str]:
        """broken: 'symptom reproduced' or not; fixed: 'cured' or not."""
        words = {"broken": ("symptom reproduced", "symptom did NOT reproduce"),
                 "fixed": ("cured", "NOT cured")}
        return {v: words[v][0 if self.passed(v) else 1] for v in self.runs}


class Lab:
    """Servers shared across runs, proxies per run. Use as a context manager."""

    def __init__(self, runtime: Runtime | str | None = None, engine: str | None = None,
                 server_env: Mapping[str, str] | None = None,
                 progress: Progress | None = None, server_args: Sequence[str] = (),
                 proxy_version: str | None = None) -> None:
        self.runtime = runtime if runtime is not None and not isinstance(runtime, str) else runtime_named(runtime)
        # Which release of each proxy runs (proxies.kinds.choose_releases): `current` by default.
        self.proxy_version = proxy_version if proxy_version is not None else os.environ.get(CHOICE_VARIABLE)
        # The real model by default; `synthetic` only where a workload needs it (load).
        self.engine = engine or os.environ.get("LAB_ENGINE", "transformers")
        self.server_env = dict(server_env or {})
        # Flags every server of this lab gets as well (the browser view: --cors-origin).
        self.server_args = tuple(server_args)
        self.progress = progress or (lambda message: None)
        self._servers: dict[tuple[str, ...], ServerHandle] = {}
        self._models: dict[tuple[str, ...], str] = {}
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> "Lab":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stack.close()
        self._servers.clear()

    # ---- servers -------------------------------------------------------------------------

    def server(self, args: Sequence[str] = (), nofile: int | None = None) -> ServerHandle:
        """The server for these flags (started on first use); `nofile`: its soft open-file limit."""
        key, handle_key = self._keys(args, nofile)
        if handle_key not in self._servers:
            shown = " ".join(key) + ("" if nofile is None else f" under ulimit -Sn {nofile}")
            self.progress(f"starting the model server ({shown})")
            handle = self._stack.enter_context(self.runtime.run_server(key, env=self.server_env,
                                                                       nofile_soft=nofile))
            self._servers[handle_key] = handle
            self._models[handle_key] = served_model(handle.url)
        return self._servers[handle_key]

    def server_command(self, args: Sequence[str] = (), nofile: int | None = None) -> str:
        """The command line of the server these flags get (its host and port aside)."""
        command = shlex.join(("python", "-m", "server", "--engine", self.engine, *args))
        return command if nofile is None else f"ulimit -Sn {nofile}; {command}"

    def model_name(self, args: Sequence[str] = (), nofile: int | None = None) -> str:
        self.server(args, nofile)
        return self._models[self._keys(args, nofile)[1]]

    def _keys(self, args: Sequence[str], nofile: int | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(the server's flags, the key of its handle)."""
        key = ("--engine", self.engine, *args, *self.server_args)
        # A server under another fd limit is another server; the key of the usual one is unchanged.
        return key, key if nofile is None else (*key, f"<ulimit -Sn {nofile}>")

    # ---- one scenario --------------------------------------------------------------------

    def run(self, scenario: Scenario, variants: Sequence[VariantName] = VARIANTS, *,
            by_release: bool = False) -> ScenarioOutcome:
        """The variants on the lab's choice of releases; `by_release`, when the lab was given no
        choice: then on each older release of a proxy whose behaviour here changed (`since`)."""
        outcome = self._run_on(scenario, variants, self.proxy_version)
        if by_release and not self.proxy_version:
            outcome.older = [self._run_on(scenario, variants, choice) for choice in older_releases(scenario)]
        return outcome

    def _run_on(self, scenario: Scenario, variants: Sequence[VariantName],
                choice: str | None) -> ScenarioOutcome:
        releases = self.releases(scenario.path, choice)
        outcome = ScenarioOutcome(scenario, releases=releases)
        started_at = provenance.started_now()
        shown = ", ".join(f"{proxy} {series}" for proxy, series in releases.items())
        for name in variants:
            self.progress(f"{scenario.name}: {name} variant" + (f" ({shown})" if shown else ""))
            run = self.run_variant(scenario, name, choice)
            outcome.runs[name] = run
            outcome.checks[name] = [check(run) for check in scenario.checks(name)]
        if "broken" in variants and (own := own_defaults(scenario)) is not None:
            self.progress(f"{scenario.name}: broken variant, the proxy's own defaults" + (f" ({shown})" if shown else ""))
            outcome.own_defaults = self.run_variant(scenario, "broken", choice, scenario.broken.then(own))
            outcome.own_defaults_checks = [check(outcome.own_defaults) for check in scenario.checks("broken")]
        commands = {name: self.server_command(scenario.variant(name).server_args,
                                              scenario.variant(name).server_nofile) for name in variants}
        outcome.provenance = provenance.collect(self.runtime.name, [hop_kind(h) for h in scenario.path],
                                                commands, started_at, releases=releases)
        return outcome

    def run_variant(self, scenario: Scenario, name: VariantName, choice: str | None = None,
                    variant: Variant | None = None) -> Run:
        """One variant; `choice`: the releases it runs (choose_releases), else the lab's own;
        `variant`: other settings for the same client and server (the proxy's own defaults)."""
        variant = variant or scenario.variant(name)
        server = self.server(variant.server_args, variant.server_nofile)
        started = time.monotonic()
        with self.path(scenario.path, variant, server.port, scenario.base, choice) as hops:
            run = self.measure(scenario, name, hops)
        run.wall_s = time.monotonic() - started
        return run

    def entry_url(self, scenario: Scenario, name: VariantName, hops: Sequence[RunningProxy]) -> str:
        """Where a client of this variant connects: the outermost hop, or the server itself."""
        variant = scenario.variant(name)
        return hops[0].url if hops else self.server(variant.server_args, variant.server_nofile).url

    def measure(self, scenario: Scenario, name: VariantName, hops: Sequence[RunningProxy]) -> Run:
        """Drive the variant's workload through its path, already started (`path`), and judge it."""
        variant = scenario.variant(name)
        server = self.server(variant.server_args, variant.server_nofile)
        started = time.monotonic()
        body = self.request_body(scenario.workload, variant)
        api = client_api(scenario.workload.api)
        options = {"api": api.name, **scenario.workload.client, **variant.client}
        if "agent" in options:  # it reads its request's record from the server itself
            options["server_url"] = server.url
        url = self.entry_url(scenario, name, hops) + api.path
        # A forward proxy in front (an app hop that has an origin, Privoxy): the client asks it
        # for the origin's URL, as a client with HTTP_PROXY set does. Proxies have no such origin.
        origin = getattr(hops[0], "forward_origin", None) if hops else None
        if origin:
            url, options = origin + api.path, {**options, "proxy": hops[0].url}
        gauges = sorted({gauge for check in scenario.checks(name) for gauge in check.samples})
        with GaugePeaks(server.host, server.port, gauges, _sample_interval(scenario.workload)) as peaks:
            before = server.metrics()
            with ReloadAt(hops, scenario.workload.reload_at_s) as reload:
                results = run_async(drive(url, body, scenario.workload, options))
        # The clients are done (or left on purpose): how long until the server stops working?
        release_s = wait_idle(server, scenario.workload.settle_s)
        delta = _counter_delta(before, server.metrics())
        run = Run(variant=name, workload=scenario.workload, results=results, server_delta=delta,
                  configs={hop.name: hop.config_text for hop in hops}, release_s=release_s,
                  lab=dict(variant.lab), peaks=peaks.peaks, reloaded_at_s=reload.done_at_s,
                  reload_error=reload.error)
        if scenario.bisect:
            run.hops = self._bisect(list(hops), server, body, options)
        run.access_log = {hop.name: [line.strip() for line in hop.access_log()] for hop in hops}
        run.evidence = _evidence(hops, run.access_log)
        run.proxy_stats = _proxy_stats(hops, scenario.proxy_stats)
        run.wall_s = time.monotonic() - started
        return run

    def request_body(self, workload: Workload, variant: Variant) -> dict[str, Any]:
        return request_body(workload, variant, self.model_name(variant.server_args, variant.server_nofile))

    def releases(self, path: Sequence[str], choice: str | None = None) -> dict[str, str]:
        """Proxy kind -> the series of its release that runs on `path`: by `choice`, else the
        lab's own (ValueError when it names a release the path's proxies do not have)."""
        return choose_releases(choice or self.proxy_version, [hop_kind(hop) for hop in path], strict=False)

    @contextlib.contextmanager
    def path(self, proxies: Sequence[str], variant: Variant, server_port: int,
             base: str = "defaults", choice: str | None = None) -> Iterator[list[RunningProxy]]:
        """Start the hops (proxies and apps) from the server outwards, on the releases `choice`
        names (else the lab's); yields them client-side first."""
        releases = self.releases(proxies, choice)
        with contextlib.ExitStack() as stack:
            upstream_port, started = server_port, []
            for proxy in reversed(proxies):
                if variant.manifest is not None:  # the one proxy runs the manifest's translation
                    self.progress(f"starting {proxy} as the manifest's controller would run it")
                    hop = stack.enter_context(manifest_hop(proxy, variant.manifest, upstream_port,
                                                           self.runtime.name, releases.get(hop_kind(proxy))))
                    started.append(hop)
                    upstream_port = hop.settings.listen_port
                    continue
                ports = {"listen_port": free_port(), "upstream_port": upstream_port}
                if has_admin(hop_kind(proxy)):  # its admin endpoint reads the stats and readiness
                    ports["admin_port"] = free_port()
                if hop_kind(proxy) in releases:
                    ports["version"] = releases[hop_kind(proxy)]
                settings = hop_settings(proxy, variant.proxy.get(proxy, {}), base, **ports)
                shown = f"{proxy} {ports['version']}" if "version" in ports else proxy
                self.progress(f"starting {shown} on :{settings.listen_port}")
                run = self.runtime.run_app if is_app(hop_kind(proxy)) else self.runtime.run_proxy
                started.append(stack.enter_context(run(settings)))  # type: ignore[arg-type]
                upstream_port = settings.listen_port
            yield list(reversed(started))

    def _bisect(self, hops: list[RunningProxy], server: ServerHandle, body: dict[str, Any],
                options: Mapping[str, Any]) -> dict[str, list[StreamResult]]:
        """One stream entering at each hop in turn, then direct: where does the lump appear?"""
        entries = [(f"{i + 1}. enter at {hop.name}", hop.url) for i, hop in enumerate(hops)]
        entries.append((f"{len(hops) + 1}. direct to the server", server.url))
        measured = {}
        for label, url in entries:
            result = run_async(client.measure_stream(url + client_api(options["api"]).path, body, **options))
            measured[label] = [result]
        return measured


def request_body(workload: Workload, variant: Variant, model: str) -> dict[str, Any]:
    """The body every stream of this variant sends, in the workload's protocol (a driver may vary it)."""
    return client_api(workload.api).body(model, PROMPT, 1024, workload.knobs(variant.lab),
                                         **{**workload.request, **variant.request})


def _sample_interval(workload: Workload) -> float:
    """Half a token interval, so a peak that lasts a token is seen; within 20-100 ms either way
    (faster would load the server, slower could miss a stream of a few tokens)."""
    return min(0.1, max(0.02, workload.interval_s / 2))


async def drive(url: str, body: dict[str, Any], workload: Workload,
                options: Mapping[str, Any]) -> list[StreamResult]:
    """Run the workload: one stream, several in sequence, or several at once. The client option
    `library` measures one stream through a real client library instead (labs.client.libraries),
    `agent` one run of a coding agent (labs.client.agent_streams; `agent_settings` as the user
    would set them, `server_url` where its request's record is read)."""
    opts = dict(options)
    if "agent" in opts:
        return [await measure_agent(str(opts.pop("agent")), url, body, opts.pop("agent_settings", None),
                                    opts.pop("server_url", None))]
    if "library" in opts:
        library, headers = str(opts.pop("library")), opts.pop("headers", None)
        speaks = libraries.library_api(library)
        if opts.pop("api", workload.api) != speaks:  # each library reads its one protocol's streams
            raise ValueError(f"client library {library!r} measures {speaks} streams only, not {workload.api}")
        # Its own options only (measure_stream names an unknown one).
        return [await libraries.measure_stream(library, url, body, headers, **opts)]
    if workload.disconnect_after_events is not None:
        opts["disconnect_after_events"] = workload.disconnect_after_events
    if workload.driver is not None:
        return await workload.driver(url, body, workload, opts)
    if workload.streams == 1:
        return [await client.measure_stream(url, body, **opts)]
    if workload.sequential:
        return [await client.measure_stream(url, body, **opts) for _ in range(workload.streams)]
    return await client.measure_many(url, [body] * workload.streams, workload.concurrency, **opts)


def _counter_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """How much each counter (and histogram count/sum) moved; gauges as their value after."""
    delta: dict[str, float] = {}
    for name, value in after.items():
        base = name.split("{", 1)[0]
        if base.endswith(("_total", "_count", "_sum")):
            change = value - before.get(name, 0.0)
            if change:
                delta[name] = change
        elif base.startswith("streamlab_"):
            delta[name] = value
    return delta


def _evidence(hops: Sequence[RunningProxy], access_log: dict[str, list[str]], lines: int = 6) -> list[str]:
    """What the proxies themselves said: the last access-log lines and any warning or error."""
    evidence: list[str] = []
    for hop in hops:
        for line in access_log[hop.name][-lines:]:
            evidence.append(f"{hop.name} access: {line}")
        for line in hop.error_log().splitlines():
            if any(word in line.lower() for word in ("warn", "error", "crit", "alert", "emerg")):
                evidence.append(f"{hop.name} log: {line.strip()}")
    return evidence


def _proxy_stats(hops: Sequence[RunningProxy], suffixes: Sequence[str]) -> dict[str, dict[str, int]]:
    if not suffixes:
        return {}
    stats: dict[str, dict[str, int]] = {}
    for hop in hops:
        if not has_admin(getattr(hop.settings, "proxy", None)):
            continue
        picked = {name: value for name, value in hop.stats().items()
                  if name.endswith(tuple(suffixes)) and value}
        stats[hop.name] = picked
    return stats
