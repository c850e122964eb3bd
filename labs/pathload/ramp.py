"""The load lab against a deployed path (`python -m labs load URL`): steps of concurrent streams,
a one-stream baseline first, each step judged and diagnosed by the lab's own rules.

Behind the URL is either the lab's server as a canary origin (detected as `labs probe` does:
`GET /v1/models` names `streamlab` as the owner), whose `lab` knobs pace every stream at the
asked rate for the asked duration; or any OpenAI-compatible origin, which gets an ordinary
prompt and `max_tokens`, and whose own pace the baseline measures: the ideal of a step is then
N x the baseline's tok/s, and a gap is late against the baseline's token interval.

Only what a client can see is evidence here (the path's processes are not ours to sample): the
outcomes, the client errors, the TTFT histogram, the accept queue of a loopback entry, the
machine's TCP counters, and this client's own CPU, so that a client that ran out of CPU is never
reported as the path's limit: when such a step is all the run found, the verdict is
`inconclusive` (exit status 2), not healthy. Streams refused, reset or queued beyond a count are
the finding kind `connection-limit`, as its judge (`labs.findings.connection_limit`) reads a step.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence
from urllib.parse import urlsplit

from labs.client.apis import DEFAULT_API, client_api
from labs.client.durations import milliseconds
from labs.findings import (EXIT_FAILURE, EXIT_INCONCLUSIVE, EXIT_OK, Finding, UnusableInput,
                           connection_limit)
from labs.load.analysis import PathResult, diagnose
from labs.load.evidence import tcp_counters
from labs.load.paths import LoadPath, script
from labs.load.results import Limit, StepResult
from labs.client.driver import no_gc_pauses, streams_at_once, uvloop_runner
from labs.load.summary import summarize
from labs.probe.path import Path as ProbePath
from labs.client.resources import Sampler, raise_own_fd_limit

PROMPT = [{"role": "user", "content": "Tell me something, one token at a time."}]
CONNECTION_LIMIT = "connection limit: streams refused, reset or queued beyond a count"
INCONCLUSIVE = ("inconclusive: limited by the client, not the path (the client machine's CPU ran "
                "out before the path showed a limit)")
Progress = Callable[[str], None]


@dataclass
class LoadSettings:
    streams: Sequence[int] = (10, 100, 300)
    tokens_per_s: float = 20.0  # the canary's pace; another origin streams at its own
    duration_s: float = 8.0
    ramp_s: float = 0.0  # the starts of a step spread over this long (0: all at once)
    lab_token_env: str = "STREAMLAB_LAB_TOKEN"
    api_key_env: str | None = None
    model: str | None = None
    api: str = DEFAULT_API  # the wire protocol every stream speaks (labs/client/apis)

    def check(self) -> None:
        if not self.streams or any(n < 1 for n in self.streams):
            raise UnusableInput("--streams: give positive stream counts, e.g. 100,300")
        if self.tokens_per_s <= 0 or self.duration_s <= 0 or self.ramp_s < 0:
            raise UnusableInput("--rate and --duration must be positive, --ramp not negative")
        if self.ramp_s >= self.duration_s:
            raise UnusableInput(f"--ramp {self.ramp_s:g} must be shorter than --duration "
                                f"{self.duration_s:g}: the streams would never all be open")


@dataclass
class OwnPath:
    """The path under load: its URL, what the origin is, and the request every stream sends."""

    url: str
    settings: LoadSettings
    probe: ProbePath = field(init=False)

    def __post_init__(self) -> None:
        self.probe = ProbePath.from_args([self.url], api_key_env=self.settings.api_key_env,
                                         lab_token_env=self.settings.lab_token_env,
                                         model=self.settings.model, api=self.settings.api)
        self.url = self.probe.urls[0]

    @property
    def host(self) -> str:
        parts = urlsplit(self.url)
        return f"{parts.hostname}-{parts.port}" if parts.port else str(parts.hostname)

    @property
    def canary(self) -> bool:
        return self.probe.origin == "streamlab"

    @property
    def completions(self) -> str:
        return self.probe.completions(0)

    def headers(self) -> dict[str, str]:
        return self.probe.headers()

    def detect(self) -> None:
        asyncio.run(self.probe.detect())

    def tokens(self) -> int:
        return max(2, round(self.settings.duration_s * self.settings.tokens_per_s))

    def body(self) -> dict[str, Any]:
        tokens = self.tokens()
        # The canary paces each stream and stamps each event.
        lab = ({"tokens_per_s": self.settings.tokens_per_s, "stamp": True, "script": script(tokens)}
               if self.canary else None)
        return client_api(self.settings.api).body(self.probe.model or "", PROMPT, tokens, lab)

    def load_path(self) -> LoadPath:
        """The report's row group for this path."""
        origin = "the lab's server (canary)" if self.canary else f"origin owned by {self.probe.owner!r}"
        return LoadPath(self.host, "direct", f"{self.url} -> {origin}",
                        steps=tuple(self.settings.streams))

    def entry_port(self) -> int | None:
        """The entry's port when it listens on this machine (its accept queue is readable)."""
        parts = urlsplit(self.url)
        if parts.hostname in ("127.0.0.1", "localhost", "::1"):
            return parts.port or (443 if parts.scheme == "https" else 80)
        return None


def own_limits(step: StepResult, baseline: StepResult | None) -> list[Limit]:
    """The lab's diagnosis of a step, with what a client alone can name: streams that failed or
    waited for others to end are a connection limit in front of (or at) the origin."""
    if step.healthy:
        return []
    limits = diagnose(step)
    burst = step.burst()
    verdict = connection_limit.judge_burst(burst)
    if verdict.fault:
        before = ""
        if baseline is not None:
            before = (f"; baseline (1 stream): TTFT p99 {milliseconds(baseline.ttft_p99_s, grouped=True)}, "
                      f"gap p99 {milliseconds(baseline.gap_p99_s, grouped=True)}")
        what = [verdict.observed]
        if step.errors:
            what.append("client errors " + "; ".join(f"{k!r} x{v}" for k, v in step.errors.items()))
        if connection_limit.waves(burst):
            what.append(f"TTFT histogram {step.ttft_histogram}")
        if step.accept_queue_peak:
            what.append(f"the entry's accept queue peaked at {step.accept_queue_peak}")
        limits = [Limit(CONNECTION_LIMIT, "unknown", "; ".join(what) + before)] + [
            x for x in limits if x.name != "unexplained"]
    return limits


def is_client_limit(limits: Sequence[Limit]) -> bool:
    """The step's only explanation is CPU on the client's machine (this client's own, or the
    whole machine busy): the measurement ran out, not necessarily the path."""
    return bool(limits) and all(x.name.startswith("client") or x.where == "cpu" for x in limits)


def findings(steps: Sequence[StepResult]) -> list[Finding]:
    """The path's connection limit as a finding of the contract's kind, from the first step that
    showed it. Steps that only degraded (rate, gaps, admission) name their limit in the steps."""
    for step in sorted(steps, key=lambda s: s.concurrency):
        connection = [x for x in step.limits if x.name == CONNECTION_LIMIT]
        if connection:
            return [Finding("connection-limit", "failure", connection[0].evidence,
                            fix="raise the limit in front of the origin (proxy connections, "
                                "maxconn, circuit breakers, fd limits) or admit fewer streams",
                            scenario="load", at_streams=step.concurrency)]
    return []


@dataclass
class OwnPathResult(PathResult):
    """A path's steps whose first limit skips steps explained only by the client machine's CPU
    (the report, the JSON and the exit status agree on it). When such a step is all there is,
    the run is inconclusive: the measurement ran out before the path showed a limit, so it
    neither names one nor calls the path healthy at that count."""

    @property
    def first_limit(self) -> tuple[StepResult, list[Limit]] | None:
        hit = first_limit_hit(self.steps)
        return None if hit is None else (hit, hit.limits)

    @property
    def inconclusive(self) -> tuple[StepResult, list[Limit]] | None:
        step = client_limited_step(self.steps)
        return None if step is None else (step, step.limits)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "verdict": verdict(self.steps),
                "inconclusive": inconclusive_json(self.steps)}


def first_limit_hit(steps: Sequence[StepResult]) -> StepResult | None:
    for step in sorted(steps, key=lambda s: s.concurrency):
        if not step.healthy and not is_client_limit(step.limits):
            return step
    return None


def client_limited_step(steps: Sequence[StepResult]) -> StepResult | None:
    """The first step limited by the client's CPU, when no step showed a limit of the path's (a
    path limit found at any count is a conclusive answer: the client's share is in its row)."""
    if first_limit_hit(steps) is not None:
        return None
    for step in sorted(steps, key=lambda s: s.concurrency):
        if not step.healthy:
            return step
    return None


Verdict = Literal["ok", "limit", "inconclusive"]


def verdict(steps: Sequence[StepResult]) -> Verdict:
    """"limit": the path hit one; "inconclusive": the client's CPU ran out first, so the
    steps from there on say nothing about the path; "ok": every step healthy."""
    if first_limit_hit(steps) is not None:
        return "limit"
    return "inconclusive" if client_limited_step(steps) is not None else "ok"


def healthy_up_to(steps: Sequence[StepResult]) -> int:
    """The largest count whose step, and every step below it, was healthy (0: none)."""
    top = 0
    for step in sorted(steps, key=lambda s: s.concurrency):
        if not step.healthy:
            break
        top = step.concurrency
    return top


def inconclusive_json(steps: Sequence[StepResult]) -> dict[str, Any] | None:
    step = client_limited_step(steps)
    if step is None:
        return None
    return {"at_streams": step.concurrency, "healthy_up_to": healthy_up_to(steps),
            "reason": INCONCLUSIVE, "limits": [vars(x) for x in step.limits]}


def exit_status(steps: Sequence[StepResult]) -> int:
    """0 every step healthy, 1 the path hit a limit, 2 inconclusive (no verdict, as for input
    that cannot be used: rerun with more client CPU or fewer streams)."""
    return {"ok": EXIT_OK, "limit": EXIT_FAILURE, "inconclusive": EXIT_INCONCLUSIVE}[verdict(steps)]


# ---- the lab's client ------------------------------------------------------------------------


def run_step(path: OwnPath, n: int, tokens_per_s: float, baseline: StepResult | None) -> StepResult:
    """N streams at once (or over the ramp) through the lab's lean client, sampled."""
    duration = path.settings.duration_s
    deadline = 3 * duration + path.settings.ramp_s + 15.0  # bounded, a queued stream still fits
    port = path.entry_port()
    tcp0 = tcp_counters()
    with Sampler({}, ports=[port] if port else []) as sampler, uvloop_runner() as runner, no_gc_pauses():
        batch = runner.run(streams_at_once(path.completions, path.body(), n, deadline,
                                      headers=path.headers(), ramp_s=path.settings.ramp_s,
                                      api=path.settings.api))
    step = summarize(path.host, batch, path.tokens(), tokens_per_s, duration)
    finish_step(step, sampler, port, tcp0)
    step.limits = own_limits(step, baseline)
    return step


def finish_step(step: StepResult, sampler: Sampler, port: int | None, tcp0: dict[str, int]) -> None:
    """What the machine saw during a step (the same fields for either client)."""
    step.machine_busy_pct = sampler.machine_busy_pct
    step.accept_queue_peak = sampler.queue_peak.get(port, 0) if port else 0
    step.tcp_counters = {k: v - tcp0.get(k, 0) for k, v in tcp_counters().items()
                         if v - tcp0.get(k, 0) > 0}


def measured_rate(step: StepResult, asked: float) -> float:
    """The pace one stream gets from this origin alone (the baseline's median gap)."""
    return 1.0 / step.gap_p50_s if step.gap_p50_s else asked


StepRunner = Callable[[OwnPath, int, float, "StepResult | None"], StepResult]


def run_load(path: OwnPath, progress: Progress = lambda m: None,
             on_step: Callable[[StepResult], None] = lambda s: None,
             step_runner: StepRunner = run_step) -> PathResult:
    """The baseline and every step; a step whose limit the path hit ends the ramp (the next
    ones would only show it harder). `step_runner` is the client: the lab's or Locust."""
    raise_own_fd_limit()
    result = OwnPathResult(path.load_path())
    rate = path.settings.tokens_per_s
    progress(f"{path.host}: baseline, 1 stream")
    baseline = step_runner(path, 1, rate, None)
    on_step(baseline)
    if baseline.failed:
        raise UnusableInput(f"{path.url}: a single stream did not complete "
                            f"({', '.join(f'{v} {k}' for k, v in baseline.outcomes.items())}; "
                            f"{'; '.join(baseline.errors) or 'no error text'}): nothing to load")
    if not path.canary:  # the origin's own pace is the ideal
        rate = measured_rate(baseline, rate)
        baseline.tokens_per_s = rate
        baseline.limits = own_limits(baseline, None)
    result.steps.append(baseline)
    for n in path.settings.streams:
        progress(f"{path.host}: {n} streams")
        time.sleep(0.5)  # the path lets the last step's connections go
        step = step_runner(path, n, rate, baseline)
        result.steps.append(step)
        on_step(step)
        if not step.healthy and not is_client_limit(step.limits):
            break
    return result
