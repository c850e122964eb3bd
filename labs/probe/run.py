"""One probe run: detect the origin, run the chosen checks in order, name the hop of each finding.

The order matters. The stream checks come first (a path that cannot carry a short stream makes
everything else meaningless), then the total-duration limit (so that a silence cut by it is not
taken for an idle limit), then the silences (the three positions at once: they are independent
streams), then the departure (its pause is kept under any idle limit found) and last the burst of
concurrent streams, which would disturb anything running beside it.

For a finding seen through the outermost entry, each inner entry is asked in turn, from the
innermost outwards, whether it still shows the fault; the first that does is the finding's `hop`
(a fault behind an entry shows through every entry in front of it).
"""
from __future__ import annotations

import asyncio
from typing import Any, Sequence

from labs.client.apis import DEFAULT_API
from labs.findings import BY_ID, FindingKind, UnusableInput
from labs.probe.base import (DEFAULT_BUDGET_S, Budget, CannotTell, Context, Observation, OutOfBudget,
                             Progress, Settings, failed, not_run, skipped)
from labs.probe.burst import ConnectionLimit
from labs.probe.departure import Disconnect
from labs.probe import protocols
from labs.probe.flow import Buffering, Coalescing, Compression, by_protocol, not_for_plain
from labs.probe.path import Path
from labs.probe.report import ProbeReport
from labs.probe.silence import IdleTimeout, POSITIONS, TotalTimeout
from server.signals import run_async

# (checks, run together): the order of a run, see the module docstring.
PHASES: list[tuple[list[Any], bool]] = [
    ([Buffering(), Coalescing(), Compression()], False),
    ([TotalTimeout()], False),
    ([IdleTimeout(p) for p in POSITIONS], True),
    ([Disconnect()], False),
    ([ConnectionLimit()], False),
]
CHECKS = [check for phase, _ in PHASES for check in phase]
CHECK_NAMES: tuple[str, ...] = tuple(check.name for check in CHECKS)


def select(names: Sequence[str] | None) -> set[str]:
    """Check names chosen by name or by finding kind (`idle-timeout` = its three positions)."""
    if not names:
        return set(CHECK_NAMES)
    chosen: set[str] = set()
    for name in names:
        matched = {c.name for c in CHECKS if name in (c.name, c.kind)}
        if not matched:
            raise UnusableInput(f"no probe check named {name!r}; known: {', '.join(CHECK_NAMES)}")
        chosen |= matched
    return chosen


def references(kind: FindingKind) -> tuple[str | None, str | None]:
    """The kind's own catalogue scenario, and the fixes its scenarios on a path write."""
    from labs import catalogue

    shown = [s for s in catalogue.SCENARIOS if s.kind == kind]
    on_paths = [s for s in shown if s.layer in ("proxy", "chain")] or shown
    return BY_ID[kind].scenario, " | ".join(f"{s.name}: {s.fix_summary}" for s in on_paths) or None


async def observe(check: Any, ctx: Context) -> Observation:
    """The check through the outermost entry; skipped when the budget cannot fit it, or with the
    error when it raised (a path that cannot carry a short stream is UnusableInput: exit 2)."""
    try:
        return await check.observe(ctx, 0)
    except OutOfBudget as exc:
        return not_run(check.name, check.kind, str(exc))
    except UnusableInput:
        raise
    except Exception as exc:  # noqa: BLE001 - one check's error must not pass for a measurement
        return failed(check.name, check.kind, exc)


async def attribute(ctx: Context, check: Any, first: Observation) -> tuple[int | None, dict[int, bool]]:
    """The innermost entry that still shows the fault (None when the probe cannot tell)."""
    asked: dict[int, bool] = {0: True}
    for hop in range(len(ctx.path.urls) - 1, 0, -1):
        if ctx.budget.left() < 1.0:
            return None, asked
        ctx.progress(f"{check.name}: does {ctx.path.urls[hop]} still show it?")
        try:
            asked[hop] = await check.shows(ctx, hop, first)
        except (UnusableInput, OutOfBudget, CannotTell):
            # That entry cannot carry a stream, no time is left, or its stream proved nothing.
            return None, asked
        except Exception:  # noqa: BLE001 - an error there names no hop, it does not clear one
            return None, asked
        if asked[hop]:
            return hop, asked
    return 0, asked


async def probe_async(path: Path, settings: Settings, budget: Budget, checks: Sequence[str] | None = None,
                      progress: Progress | None = None) -> ProbeReport:
    progress = progress or (lambda message: None)
    chosen = select(checks)
    progress(f"asking {path.urls[0]} who serves it")
    await path.detect()
    ctx = Context(path, settings, budget, progress)
    report = ProbeReport(urls=list(path.urls), origin=path.origin)
    report.measurements["origin"] = {"owned_by": path.owner, "model": path.model, "slots": path.slots,
                                     "api": path.api}
    observed: list[tuple[Any, Observation]] = []
    for phase, together in PHASES:
        todo = [c for c in phase if c.name in chosen]
        plain = path.origin != "streamlab"
        for_canary = [(c, not_for_plain(c.kind, c.name)) for c in todo if plain and c.canary_only]
        todo = [c for c in todo if not (plain and c.canary_only)]
        if together:
            results = await asyncio.gather(*(observe(c, ctx) for c in todo))
        else:
            results = [await observe(c, ctx) for c in todo]
        observed += [*zip(todo, results), *for_canary]
    report.protocols = by_protocol(ctx)
    report.measurements["http"] = protocols.http_note(ctx)
    hops: dict[str, dict[int, bool]] = {}
    for check, seen in observed:
        if seen.fault:
            seen.hop, hops[check.name] = await attribute(ctx, check, seen)
    by_name = {name: i for i, name in enumerate(CHECK_NAMES)}
    for check, seen in sorted(observed, key=lambda pair: by_name[pair[0].name]):
        report.add(seen, *references(seen.kind))
        if seen.measurements:
            report.measurements[check.name] = seen.measurements
    if hops:
        report.measurements["hops"] = {name: {str(hop): shown for hop, shown in asked.items()}
                                       for name, asked in hops.items()}
    report.measurements["budget"] = {"budget_s": budget.seconds,
                                     "used_s": round(budget.seconds - budget.left(), 2)}
    return report


def probe_path(urls: Sequence[str], *, max_silence_s: float | None = None, max_stream_s: float | None = None,
               streams: int | None = None, budget_s: float | None = None, api_key_env: str | None = None,
               lab_token_env: str | None = "STREAMLAB_LAB_TOKEN", model: str | None = None,
               checks: Sequence[str] | None = None, progress: Progress | None = None,
               http1_only: bool = False, insecure: bool = False, api: str = DEFAULT_API) -> ProbeReport:
    """Probe a path (OpenAI base URLs, outermost first); UnusableInput when it cannot be used.

    `http1_only`: no HTTP/2 comparison of the streaming checks on an https:// entry that offers
    h2; `insecure`: accept any certificate (a self-signed one on a test entry); `api`: the wire
    protocol every stream speaks (labs/client/apis)."""
    defaults = Settings()
    settings = Settings(
        max_silence_s=defaults.max_silence_s if max_silence_s is None else max_silence_s,
        max_stream_s=defaults.max_stream_s if max_stream_s is None else max_stream_s,
        streams=defaults.streams if streams is None else streams, http1_only=http1_only)
    budget_s = DEFAULT_BUDGET_S if budget_s is None else budget_s
    for name, value in (("--max-silence", settings.max_silence_s), ("--max-stream", settings.max_stream_s),
                        ("--budget", budget_s)):
        if not value > 0:
            raise UnusableInput(f"{name} must be above 0 seconds, got {value:g}")
    if settings.streams < 1:
        raise UnusableInput(f"--streams must be at least 1, got {settings.streams}")
    path = Path.from_args(urls, api_key_env=api_key_env, lab_token_env=lab_token_env, model=model,
                          insecure=insecure, api=api)
    budget = Budget(budget_s)
    return run_async(probe_async(path, settings, budget, checks, progress))
