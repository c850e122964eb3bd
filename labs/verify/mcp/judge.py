"""The MCP route measured with the probe's own MCP checks (labs/probe/mcp/checks.py: one session
check, one progress check, one GET-stream check, never a second copy here) and their verdicts
named as verify names faults: at the config's line that causes each.

- `session-survives`: a session lost to another replica is the named fault `session-affinity`
  (no finding kind declares it yet, as in `labs probe --mcp`), placed at the pool's block; a pool of
  one server cannot lose one: not run, with the reason.
- `progress-streams`: progress held to the end is the probe's `buffering` judge; grouped in lumps
  on the way is `coalescing`, counted by arrival against the origin's own pace (`progress_lumps`).
- `get-stream`: the standalone GET stream held silent against the route's own idle limit, in
  bounded time (`get_wait`): a cut is `idle-timeout` at the limit's line; a stream still open is a
  pass only when a keep-alive comment of the SDK (every 15 s) came through it, else skipped.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from labs.client.durations import milliseconds
from labs.findings import BY_ID, CheckOutcome, Finding
from labs.findings.buffering import LUMP_GAP_SHARE
from labs.findings.coalescing import COALESCED_EVENTS_PER_READ
from labs.verify import judge as chat_judge
from labs.verify.measured import Measured
from labs.verify.mcp.pool import Pool
from labs.verify.model import Options, Reading, VerifyReport
from labs.verify.readers import suspicions
from server.mcp.knobs import SDK_KEEPALIVE_S, OriginKnobs

ORIGIN = OriginKnobs()  # the replicas' knobs: the SDK's defaults, the lab's pacing

GET_MARGIN_S = 2.0  # past the first keep-alive comment: the comment has crossed every hop by then
TOTAL_CUT_MARGIN_S = 1.5  # a total limit's cut comes within this of the limit (Envoy 15 s: cut at 16.00 s)
# The MCP checks' kinds and the chat kinds the reading's suspicions may name for them.
SHOWN_BY = {"idle-timeout": "get-stream", "buffering": "progress-streams", "coalescing": "progress-streams"}
NOT_RUN_ONE_SERVER = "one server in the pool: there is no other replica a session could be lost to"


class McpFault(Finding):
    """A named MCP fault no finding kind declares yet (`session-affinity`, `held-headers`, as
    `labs probe --mcp` names them): a Finding in every output, its kind checked against the
    probe's named faults instead of the finding kinds."""

    def __post_init__(self) -> None:
        from labs.probe.mcp.run import FAULT_REFERENCES
        if self.kind not in FAULT_REFERENCES or self.severity != "failure":
            raise ValueError(f"unknown MCP fault {self.kind!r}; known: {', '.join(FAULT_REFERENCES)}")


@dataclass
class McpVerifyReport(VerifyReport):
    """A verify report of an MCP route, with the pool it read."""

    pool: Pool | None = None
    measured_with: str = "the official MCP client, in front of replicas of the lab's MCP origin"

    def to_json(self) -> dict[str, Any]:
        pool = self.pool
        return {**super().to_json(), "mcp": True, "pool": None if pool is None else {
            "name": pool.name, "where": pool.where, "servers": pool.servers, "balancing": pool.balancing,
            "affinity": pool.affinity}}


@dataclass
class McpMeasured:
    """One MCP check's result: what the table shows, and the probe's observation behind it."""

    outcome: CheckOutcome
    kind: str | None = None  # the fault's kind when it failed
    evidence: str = ""
    limit_s: float | None = None
    measurements: dict[str, Any] = field(default_factory=dict, repr=False)


def get_wait(limit_s: float | None) -> float:
    """How long the GET stream is held: past a read limit below the SDK's keep-alive (1.5 times
    it, plus a second), else just past the first keep-alive comment (17 s): bounded either way."""
    ceiling = SDK_KEEPALIVE_S + GET_MARGIN_S
    return min(limit_s * 1.5 + 1.0, ceiling) if limit_s is not None and limit_s < SDK_KEEPALIVE_S else ceiling


def measure(url: str, headers: dict[str, str], pool: Pool | None, wait_s: float, limit_s: float | None,
            checks: Sequence[str] | None, say: Callable[[str], None], *, tls: bool = False) -> list[McpMeasured]:
    """The probe's MCP checks through `url` (the proxy's MCP route), in their order."""
    from labs.probe.base import Budget, Settings
    from labs.probe.mcp.checks import CHECKS
    from labs.probe.mcp.endpoint import ORIGIN_PROGRESS_TOOL, McpContext, McpPath
    from labs.probe.run import observe
    from server.signals import run_async

    chosen = [c for c in CHECKS if checks is None or c.name in checks]
    path = McpPath([url], headers=headers, verify_tls=not tls)
    ctx = McpContext(path, Settings(max_silence_s=wait_s), Budget(120.0 + wait_s), say)

    async def run() -> list[McpMeasured]:
        say(f"opening {url} with the official MCP client")
        await path.detect()
        # The origin is the lab's: its progress tool is known even when the listing was lost.
        path.tool = path.tool or ORIGIN_PROGRESS_TOOL
        out = []
        for check in chosen:
            if check.name == "session-survives" and pool is not None and pool.servers < 2:
                out.append(McpMeasured(CheckOutcome(check.name, False, f"not run: {NOT_RUN_ONE_SERVER}",
                                                    skipped=NOT_RUN_ONE_SERVER, ran=False)))
                continue
            out.append(_measured(await observe(check, ctx), limit_s))
        return out
    return run_async(run())


def progress_lumps(seen: Any) -> Any:
    """The progress check's observation, with notifications grouped on the way named `coalescing`:
    the lab's origin sends each alone every ORIGIN.progress_interval_s, so arrivals closer than
    buffering's LUMP_GAP_SHARE of that are one lump, and COALESCED_EVENTS_PER_READ or more per lump
    is the path's grouping (docs/mcp.md: HAProxy without http-no-delay, 20 in 5 lumps; nginx 20 in
    20). The probe's own judge cannot know the origin's pace; verify runs the origin."""
    calls = seen.measurements.get("call") or [{}]
    times = calls[0].get("progress_at_s") or []
    if seen.fault or seen.skipped or len(times) < 2:
        return seen
    interval = ORIGIN.progress_interval_s
    lumps = 1 + sum(b - a >= LUMP_GAP_SHARE * interval for a, b in zip(times, times[1:]))
    per_lump = len(times) / lumps
    said = (f"{len(times)} notifications in {lumps} lumps ({per_lump:.1f} per lump, grouped from "
            f"{COALESCED_EVENTS_PER_READ:g}; the origin sent one every {milliseconds(interval)})")
    if per_lump < COALESCED_EVENTS_PER_READ:
        return replace(seen, observed=f"{said}; {seen.observed}")
    return replace(seen, kind="coalescing", fault=True, observed=said,
                   evidence=f"{said}, first after {milliseconds(times[0])}: grouped on the way")


def _measured(seen: Any, limit_s: float | None) -> McpMeasured:
    """An observation as verify's check row; a GET stream still open counts only with a keep-alive."""
    if seen.check == "progress-streams":
        seen = progress_lumps(seen)
    skipped = seen.skipped
    if seen.check == "get-stream" and not seen.fault and not skipped and seen.ran:
        if not seen.measurements.get("comments_at_s"):
            read = f"the config reads an idle limit of {limit_s:g} s; " if limit_s is not None else ""
            skipped = (f"{read}the stream was open at the end of the {seen.measurements.get('wait_s', 0):g} s wait "
                       "with no keep-alive comment through it: whether a longer silence is cut cannot be told "
                       "in bounded time")
        else:
            seen = replace(seen, observed=f"{seen.observed}: the SDK's {SDK_KEEPALIVE_S:g} s keep-alive came "
                                          "through and kept it open")
    passed = not seen.fault and not skipped
    outcome = CheckOutcome(seen.check, passed, seen.observed if not skipped or seen.observed else skipped,
                           kind=seen.kind, skipped=skipped, ran=seen.ran)
    return McpMeasured(outcome, seen.kind if seen.fault else None, seen.evidence or seen.observed, seen.limit_s,
                       seen.measurements)


def cut_by_total(reading: Reading, cut_s: float | None) -> Any:
    """The route's total limit (its Setting) that cut a GET stream `cut_s` after its request, else
    None: the reading holds a total limit of its own (Envoy's route `timeout`, 15 s unless set;
    Traefik's writeTimeout), not the idle setting nginx and HAProxy fall back to, within
    TOTAL_CUT_MARGIN_S of the cut (measured: Envoy 1.40's default 15 s route timeout cut it at 16.01 s,
    1.00 s after the SDK's keep-alive comment)."""
    from labs.verify.readers import fallback
    total, _ = fallback(reading.proxy, "total-timeout")
    idle, _ = fallback(reading.proxy, "idle-timeout")
    value = reading.settings[total].value if total in reading.settings else None
    if total == idle or cut_s is None or not isinstance(value, (int, float)) or value <= 0:
        return None
    return reading.settings[total] if abs(value - cut_s) <= TOTAL_CUT_MARGIN_S else None


def findings(reading: Reading, pool: Pool | None, measured: list[McpMeasured]) -> list[Finding]:
    """The measured faults at the config's lines: a named fault at the pool's block; a chat kind
    through verify's own judge (labs/verify/judge.py), with the reading's suspicions of the kinds
    these checks show, judged against the SDK's keep-alive interval instead of --max-silence."""
    from labs.probe.mcp.run import fault_references

    options = Options(max_silence_s=SDK_KEEPALIVE_S)
    # The rules word their threshold as --max-silence; here it is the SDK's keep-alive interval.
    said = (f"--max-silence is {SDK_KEEPALIVE_S:g} s", f"the SDK's keep-alive comes every {SDK_KEEPALIVE_S:g} s")
    suspected = [replace(s, checks=(SHOWN_BY[s.kind],), evidence=s.evidence.replace(*said))
                 for s in suspicions(reading, options) if s.kind in SHOWN_BY]
    out: list[Finding] = []
    as_trials: list[Measured] = []
    for m in measured:
        row = m.outcome
        if m.kind is not None and m.kind not in BY_ID:
            scenario, fix = fault_references(m.kind)
            named_fix = pool.fix if m.kind == "session-affinity" and pool is not None else fix
            out.append(McpFault(kind=m.kind, severity="failure", evidence=f"{row.name}: {m.evidence}",
                                where=pool.where if m.kind == "session-affinity" and pool is not None else None,
                                scenario=scenario, fix=named_fix))
            continue
        kind, evidence, limit_s = m.kind, m.evidence, m.limit_s
        ended_s = m.measurements.get("end_s")  # the cut, from the request: a total limit counts from there
        if kind == "idle-timeout" and (total := cut_by_total(reading, ended_s)) is not None:
            kind, limit_s = "total-timeout", float(total.value)
            evidence = (f"the GET stream was cut {ended_s:.2f} s after its request, keep-alive comments or not: "
                        f"the route's total limit ({total.text}), not an idle one: {row.observed}")
        as_trials.append(Measured(row.name, row.passed, evidence if kind else row.observed, kind,
                                  limit_s=limit_s, skipped=row.skipped, ran=row.ran))
    where_of = {name: setting.where for name, setting in reading.settings.items()}
    return out + chat_judge.findings(reading.proxy, suspected, as_trials, where_of)
