"""`verify_config`: read a user's config, run it here in front of the lab's server, measure, judge.

    report = verify_config(Path("nginx.conf"))          # every check, about a minute
    report = verify_config(Path("nginx.conf"), quick=True)  # only the checks the reading calls for
    report.ok, report.findings, report.checks, report.rewrites

Nothing but loopback is contacted: the rewritten config is parsed again and refused if it names
any other address, and the run checks afterwards that every upstream it used was the lab's server.
"""
from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass, replace
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from labs.findings import CheckOutcome, UnusableInput
from labs.lab.exposing import CLOSE_DELIMITED
from labs.lab.server import served_model
from labs.verify import judge, releases
from labs.verify import trials as dynamic
from labs.verify.detect import detect
from labs.verify.kubernetes import translate
from labs.verify.kubernetes.manifests import Translation
from labs.verify import route
from labs.verify.launch import RunningConfig, running, validate
from labs.verify.mcp.hint import mcp_hint
from labs.verify.model import Options, Reading, RouteWanted, VerifyReport, display_path
from labs.verify.plan import RunPlan
from labs.verify.reader import ConfigReader
from labs.verify.readers import PROXIES, READERS, heartbeats_to_notice, suspicions
from labs.verify.rewrite import Rewritten, assert_loopback
from server.processes import free_port
from server.signals import run_async
from server.launcher import ServerHandle, running_server

Progress = Callable[[str], None]


def server_args(streams: int) -> list[str]:
    """The lab's server as verify needs it: tokens without a model, enough slots, faults exposed
    (HTTP/1.0 answered close-delimited; the requests ask it to omit X-Accel-Buffering)."""
    slots = str(max(256, streams + 16))
    return ["--engine", "synthetic", *CLOSE_DELIMITED, "--slots", slots, "--max-queue", slots,
            "--chat-any-path"]  # a stand-in for whatever the streaming route leads to


@contextlib.contextmanager
def lab_server(streams: int = Options.streams) -> Iterator[ServerHandle]:
    """A lab server to share between several verify runs (the tests, the pytest plugin)."""
    with running_server(server_args(streams)) as server:
        yield server


def read_config(path: Path, proxy: str | None = None, wanted: RouteWanted = RouteWanted()) -> Reading:
    """The static reading alone (no process is started). Kubernetes manifests are read as the
    config their controller would run (labs/verify/kubernetes/), findings at the manifest's fields."""
    translation = translate(Path(path), proxy, paths=wanted.paths if wanted.path else None)
    if translation is not None:
        return read_translation(translation, wanted)
    proxy = proxy_of(path, proxy)
    if wanted.series is None:  # the release that runs it, whose binary's defaults apply unless asked
        wanted = replace(wanted, series=releases.chosen(proxy, wanted.version, READERS[proxy].defaults).series)
    return _read(READERS[proxy], Path(path), wanted)


def read_translation(translation: Translation, wanted: RouteWanted) -> Reading:
    """A manifest's translation read as its controller's config, each place said at the manifest;
    a route asked for that the translation does not carry is verify's limit (_not_translated)."""
    try:
        reading = read_config(translation.path, translation.proxy, wanted)
    except route.NoRoute:
        if wanted.path is None:
            raise
        raise _not_translated(translation.manifest, translation.route, wanted.path) from None
    reading.file = translation.manifest
    return translation.relabel(reading)


def _not_translated(manifest: Path, translated: str, asked: str) -> UnusableInput:
    """A route the manifests name but the controller's translation does not carry (ingress-nginx's
    and F5's translate the chat API's route only): verify's limit, said at the manifest's line that
    names the path, never as the translated file's "no route"."""
    named = [number for number, text in enumerate(manifest.read_text().splitlines(), 1)
             if re.search(rf"\b(?:path|value):\s*[\"']?{re.escape(asked)}[\"']?\s*(?:[,}}\]#]|$)", text)]
    if not named:
        return UnusableInput(f"no route of these manifests serves POST {asked} (verify translated "
                             f"{translated})", file=display_path(manifest))
    return UnusableInput(f"the route for POST {asked} is not run: verify translates these manifests' chat "
                         f"route only ({translated}), a limit of verify, not a fault of the manifests",
                         file=display_path(manifest), line=named[0])


@dataclass
class Parsed:
    """The one parse of a config and the route chosen in it, kept on the reading for the rewrite."""

    reader: ConfigReader
    config: Any
    chosen: route.Chosen


def _read(reader: ConfigReader, path: Path, wanted: RouteWanted) -> Reading:
    """Parse once, choose the route, read the settings in effect on it."""
    config = reader.parse(path, wanted)
    chosen = route.choose(reader, config, wanted, path)
    in_effect = reader.settings(config, chosen, wanted)
    found = chosen.route
    unknown = ([f"matchers taken as matching (not evaluated here): {', '.join(found.unknown)}"]
               if found.unknown else [])
    return Reading(proxy=reader.proxy, file=path, route=found.describe, settings=in_effect.settings,
                   notes=[*found.notes, *unknown, *in_effect.notes], path=chosen.request.path, host=found.host,
                   why=chosen.why, routes=chosen.routes, main=wanted.main, scope=found.scope,
                   version=in_effect.version, wanted=wanted, parsed=Parsed(reader, config, chosen))


def rewrite_config(reading: Reading, lab_port: int, folder: Path, *, in_container: bool = False,
                   pool_ports: tuple[int, ...] = ()) -> Rewritten:
    """The config `reading` was read from (read_config: its one parse, kept on it; a Kubernetes
    manifest's translation), as it runs here, written into `folder`; `in_container`: it runs as the
    invoking user in a container. It runs on the release the reading was made for
    (`reading.wanted.series`). Every address it names is checked for loopback before anything is
    written (NotLoopback). `pool_ports`: a pool's servers spread over these ports (RunPlan)."""
    parsed: Parsed | None = reading.parsed
    if parsed is None:
        raise ValueError("rewrite_config needs a reading made by read_config (it carries the parse)")
    plan = RunPlan(lab_port, folder, in_container, reading.wanted.series, reading.version, pool_ports)
    rewritten = parsed.reader.rewrite(parsed.config, parsed.chosen, plan)
    rewritten.series = plan.series
    assert_loopback(parsed.reader.addresses(rewritten))
    rewritten.write()
    return rewritten


def translated(path: Path) -> tuple[str, Path] | None:
    """(the proxy, its config) that Kubernetes manifests translate into, as their controller would
    write it (labs/verify/kubernetes/); None: no object verify translates."""
    translation = translate(Path(path))
    return (translation.proxy, translation.path) if translation is not None else None


def prepare(path: Path, lab_port: int, folder: Path, *, proxy: str | None = None, runtime: str = "local",
            series: str | None = None) -> Rewritten:
    """A config read, rewritten in front of `lab_port` into `folder`, and passed by the own check of
    the proxy's release `series` (UnusableInput carries its message): what verify starts, and
    what a scenario's manifest hop runs (labs/scenario/manifest_hop.py)."""
    reading = read_config(path, proxy, RouteWanted(series=series))
    rewritten = rewrite_config(reading, lab_port, folder, in_container=runtime == "docker")
    validate(rewritten, runtime)
    return rewritten


def verify_config(path: Path, *, proxy: str | None = None, max_silence_s: float = Options.max_silence_s,
                  max_stream_s: float = Options.max_stream_s, streams: int = Options.streams,
                  heartbeat_s: float | None = None, runtime: str = "local", quick: bool = False,
                  checks: Sequence[str] | None = None, progress: Progress | None = None, server: ServerHandle | None = None,
                  wanted: RouteWanted = RouteWanted(), headers: dict[str, str] | None = None) -> VerifyReport:
    """Verify one config; raises UnusableInput (exit status 2) when it cannot be used.

    `wanted`: the route to judge (--path, --host); `headers`: sent with every measured request
    (--header, e.g. the route's credentials): never stored in the report, never printed;
    `heartbeat_s`: the user's origin's heartbeat interval (--heartbeat), for the disconnect check."""
    started = time.monotonic()
    say = progress or (lambda message: None)
    path = Path(path)
    if runtime not in ("local", "docker"):
        raise UnusableInput(f"unknown runtime {runtime!r}; known: local, docker")
    options = Options(max_silence_s, max_stream_s, streams, heartbeat_s)
    if headers:
        wanted = replace(wanted, headers=tuple(headers.items()))
    headers = dict(wanted.headers)  # what routing read is what the measured requests carry
    translation = translate(path, proxy, paths=wanted.paths if wanted.path else None)
    manifest = path
    if translation is not None:
        say(f"translating {display_path(path)} into {translation.proxy}'s config")
        path, proxy = translation.path, translation.proxy
    proxy = proxy_of(path, proxy)
    runs_on = releases.chosen(proxy, wanted.version, READERS[proxy].defaults, runtime)
    wanted = replace(wanted, series=runs_on.series)
    say(f"reading {display_path(manifest)} ({proxy})")
    reading = read_translation(translation, wanted) if translation is not None else read_config(path, proxy, wanted)
    report = VerifyReport(proxy=proxy, file=display_path(manifest), route=reading.route, path=reading.path,
                          why=reading.why, routes=list(reading.routes), version=reading.version,
                          settings=reading.settings, notes=[*reading.notes, *mcp_hint(reading, display_path(manifest))],
                          measured_on=runs_on.to_json())
    with contextlib.ExitStack() as stack:
        # Rewrite and validate before any server starts, so a config the proxy rejects fails fast.
        lab_port = server.port if server is not None else free_port()
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"streamlab-verify-{proxy}-")))
        rewritten = rewrite_config(reading, lab_port, folder, in_container=runtime == "docker")
        report.rewrites = rewritten.diff
        report.notes += rewritten.notes
        say(f"checking it with {proxy}'s own validator")
        validate(rewritten, runtime)
        # After the proxy's own check, so a bad value gets the proxy's own message first.
        suspected = suspicions(reading, options)
        selected = _selected(checks, quick, suspected, options)
        report.not_selected = [c for c in dynamic.CHECK_NAMES if c not in selected]
        report.selected_by = "--check" if checks is not None else "--quick" if quick else ""
        if server is None:
            say("starting the lab's server")
            server = stack.enter_context(running_server(server_args(streams), port=lab_port))
        say(f"starting {proxy} on 127.0.0.1:{rewritten.listen_port}")
        proxy_run = stack.enter_context(running(rewritten, runtime))
        measured = _measure(proxy_run, server, options, selected, say, reading, headers, wanted.api)
        report.checks = [CheckOutcome(m.name, m.passed, m.observed, kind=m.kind, skipped=m.skipped, ran=m.ran)
                         for m in measured]
        report.checks.append(loopback_check(proxy_run, server.port))
    where_of = {name: setting.where for name, setting in reading.settings.items()}
    report.findings = judge.findings(proxy, suspected, measured, where_of)
    if translation is not None:
        report.findings = [replace(f, fix=translation.refix(f.fix),
                                   scenario=judge.scenario_for(f.kind, proxy, manifest=True))
                           for f in report.findings]
    report.wall_s = time.monotonic() - started
    return report


def proxy_of(path: Path, proxy: str | None) -> str:
    """The proxy `--proxy` names (checked), else the one detected from the file."""
    if proxy is None:
        return detect(path)
    if proxy not in PROXIES:
        raise UnusableInput(f"unknown proxy {proxy!r}; known: {', '.join(PROXIES)}")
    if not path.is_file():
        raise UnusableInput("no such file", file=str(path))
    return proxy


def _selected(checks: Sequence[str] | None, quick: bool, suspected: list, options: Options) -> list[str]:
    if checks is not None:
        unknown = [c for c in checks if c not in dynamic.CHECK_NAMES]
        if unknown:
            raise UnusableInput(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(dynamic.CHECK_NAMES)}")
        return [c for c in dynamic.CHECK_NAMES if c in checks]
    if quick:
        wanted = {"streaming", "streaming-h2", *(c for s in suspected for c in s.checks)}
        if options.heartbeat_s is not None:  # the one check that reads it: what the user stated is measured
            wanted.add("disconnect")
        return [c for c in dynamic.CHECK_NAMES if c in wanted]
    return list(dynamic.CHECK_NAMES)


def _measure(proxy_run: RunningConfig, server: ServerHandle, options: Options, selected: list[str],
             say: Progress, reading: Reading, extra_headers: dict[str, str], api: str) -> list[dynamic.Measured]:
    host = proxy_run.rewritten.host_header or reading.host
    headers = {**extra_headers, **({"Host": host} if host else {})}
    target = dynamic.Target(proxy_run.url, server, served_model(server.url), options, headers,
                            path=reading.path, heartbeats_to_notice=heartbeats_to_notice(reading.proxy),
                            api=api)

    async def everything() -> list[dynamic.Measured]:
        results: dict[str, dynamic.Measured] = {}
        side_by_side = [c for c in selected if dynamic.BY_NAME[c].side_by_side]
        for name in selected:
            if dynamic.BY_NAME[name].side_by_side:
                if name == side_by_side[0]:
                    say(f"measuring {', '.join(side_by_side)} (side by side, "
                        f"~{max(options.max_silence_s, options.max_stream_s):.0f} s)")
                    done = await asyncio.gather(*(dynamic.run_trial(c, target) for c in side_by_side))
                    results.update({m.name: m for m in done})
                continue
            say(f"measuring {name}")
            results[name] = await dynamic.run_trial(name, target)
        return [results[name] for name in selected]
    return run_async(everything())


def loopback_check(proxy_run: RunningConfig, *lab_ports: int) -> CheckOutcome:
    """What the proxy itself says it talked to (its kind's records, labs/verify/records.py): every
    one must be the lab's server. A proxy that recorded no upstream address cannot prove it: skipped, never passed.
    Logs are written when a request is finalized, a moment after the client read its last byte:
    an empty record is read again for a little while (polled, never slept)."""
    deadline = time.monotonic() + 3.0
    seen = _contacted(proxy_run)
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
        seen = _contacted(proxy_run)
    labs = {f"127.0.0.1:{port}" for port in lab_ports}  # the lab's server, or its MCP replicas
    lab = ", ".join(sorted(labs))
    others = sorted(a for a in seen if a not in labs)
    if others:
        return CheckOutcome("loopback-only", False, "OTHER ADDRESSES contacted: " + ", ".join(others)
                            + f" (the lab's server is {lab})")
    if not seen:
        return CheckOutcome("loopback-only", False, "no upstream address recorded", skipped=(
            f"{proxy_run.rewritten.proxy} recorded no upstream address here: nothing shows what it contacted"))
    return CheckOutcome("loopback-only", True, f"every upstream contacted was the lab's server ({lab})")


def _contacted(proxy_run: RunningConfig) -> set[str]:
    found = proxy_run.rewritten.contacted
    return found() if found is not None else set()
