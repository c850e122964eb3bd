"""verify, probe and the catalogue give the same verdict on the same streams.

The streams are recorded runs of catalogue scenarios on this machine (tests/data/streams/, made by
`python -m tests.labs.record_streams`): a buffered stream, one grouped by a hop, a compressed one
held to its end, a stream cut in a silence, departures noticed late and at once, a burst queued
in waves, and the clean runs of the same paths. Each is fed to verify's judgement of its trial,
to probe's of its check, and to the scenario's own `checks.finding` / `checks.no_finding`; all
three must name the same fault (or none) with the same limit (their words differ only by the
baseline's numbers: verify's is the direct stream's TTFT, probe's and the catalogue's the
workload's due time). Every recording of a broken path must be named, and no fixed one.
"""
from __future__ import annotations

import pytest

from labs import catalogue
from labs.client.results import StreamResult
from labs.findings import Verdict
from labs.probe import burst, departure, flow, silence
from labs.scenario import checks
from labs.scenario.model import Run, VariantName
from labs.verify import trials
from labs.verify.trials import Measured
from tests.labs.built_streams import clean, due, grouped, held, stream
from tests.ids import other_id
from tests.labs.record_streams import RECORDINGS, load

SCENARIOS = {s.name: s for s in catalogue.SCENARIOS}
# The clean stream verify's baseline is read from: the same request, no hop holding it.
DIRECT, _ = load("haproxy-nodelay", "fixed")


def probe_verdicts(scenario: str, streams: list[StreamResult], recording: dict) -> dict[str, Verdict]:
    """Probe's judgement of the recording, by the kind its check looks for."""
    kind = SCENARIOS[scenario].kind
    first = streams[0]
    if kind in ("buffering", "coalescing"):
        return {"buffering": flow.judge_buffering(first, True), "coalescing": flow.judge_coalescing(first)}
    if kind == "compression-delay":
        return {kind: flow.judge_compression(DIRECT[0], first, True)}
    if kind == "idle-timeout":
        return {kind: silence.judge_try(first, recording["lab"]["pause_s"])}
    if kind == "disconnect-not-propagated":
        return {kind: departure.judge_departure(first, recording["release_s"], recording["lab"]["pause_s"])}
    observation = burst.ConnectionLimit().observation(streams, [], "")
    return {kind: Verdict(observation.fault, observation.observed, observation.limit_s)}


def verify_trial(scenario: str, streams: list[StreamResult], recording: dict) -> Measured:
    """Verify's judgement of the recording, through the trial that shows its kind."""
    kind = SCENARIOS[scenario].kind
    first = streams[0]
    if kind in ("buffering", "coalescing"):
        return trials.judge_streaming(first, DIRECT[0])
    if kind == "compression-delay":
        return trials.judge_gzip(first, DIRECT[0])
    if kind == "idle-timeout":
        return trials.judge_silence("silence-mid-stream", first, recording["lab"]["pause_s"])
    if kind == "disconnect-not-propagated":
        return trials.judge_departure(first, recording["release_s"])
    return trials.judge_concurrent(streams)


def named(verdicts: dict[str, Verdict]) -> set[str]:
    return {kind for kind, v in verdicts.items() if v.fault}


@pytest.mark.parametrize("scenario, variant", RECORDINGS, ids=[other_id(s, v) for s, v in RECORDINGS])
def test_verify_probe_and_the_catalogue_agree(scenario: str, variant: VariantName) -> None:
    streams, recording = load(scenario, variant)
    kind = SCENARIOS[scenario].kind
    assert kind is not None
    by_probe = probe_verdicts(scenario, streams, recording)
    trial = verify_trial(scenario, streams, recording)
    assert not trial.passed or trial.kind is None
    by_verify = {trial.kind} if trial.kind else set()
    assert by_verify == named(by_probe), (trial.observed, {k: v.observed for k, v in by_probe.items()})
    run = Run(variant=variant, workload=SCENARIOS[scenario].workload, results=streams,
              lab=recording["lab"], release_s=recording["release_s"])
    catalogue_says = checks.finding(kind)(run)
    assert catalogue_says.passed == (kind in by_verify), catalogue_says.observed
    # The recordings are of a broken path and a fixed one: the verdict is the path's.
    assert (kind in by_verify) == (variant == "broken"), trial.observed
    if trial.kind:
        assert trial.limit_s == by_probe[trial.kind].limit_s
    else:
        assert trial.passed and checks.no_finding(kind)(run).passed, trial.observed


# Hand-made streams at the edges where verify and probe used to disagree (3.0 against 4.0 events
# per read, the grouping told by the direct stream or by the hop delay), with the one verdict.
EDGES = [
    pytest.param(lambda: grouped(late_by=0.8), {"coalescing"}, id="late-and-grouped-by-three"),
    pytest.param(lambda: grouped(20, size=4, late_by=0.8), {"buffering"}, id="late-in-lumps-of-four"),
    pytest.param(lambda: stream(due(21), [1 + i // 3 for i in range(21)], hops=[0.002] * 21), set(),
                 id="grouped-by-a-slow-reader"),
    pytest.param(grouped, {"coalescing"}, id="grouped-on-the-way"),
    pytest.param(held, {"buffering"}, id="held-to-the-end"),
    pytest.param(clean, set(), id="clean"),
]


@pytest.mark.parametrize("make, kinds", EDGES)
def test_verify_and_probe_agree_at_the_edges(make, kinds: set[str]) -> None:
    result = make()
    trial = trials.judge_streaming(result, clean())
    by_probe = {"buffering": flow.judge_buffering(result, True), "coalescing": flow.judge_coalescing(result)}
    assert ({trial.kind} if trial.kind else set()) == named(by_probe) == kinds, trial.observed
