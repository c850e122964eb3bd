"""Findings from the static reading and the measurements together.

The faults are the trials' verdicts (each from its kind's judge in `labs.findings`): this module
decides none, it names them. A measured fault is a `failure`, named by the directive the reading
holds responsible (or the proxy's default); a suspicion the measurement did not confirm is a
`warning` that says why; each finding names the catalogue scenario that demonstrates its kind on
this proxy (`make lab-NAME`).
"""
from __future__ import annotations

from dataclasses import replace

from labs.findings import BY_ID, Finding, FindingKind
from labs.verify.readers import fallback
from labs.verify.trials import CHECK_KINDS, Measured
from labs.verify.model import DEFAULT, Suspicion

def scenario_for(kind: FindingKind, proxy: str, manifest: bool = False) -> str | None:
    """The catalogue scenario that demonstrates `kind` on this proxy (else the kind's own); for a
    manifest's translation (`manifest`), the one run on such a translation first."""
    from labs import catalogue
    same_proxy = [s for s in catalogue.SCENARIOS if s.kind == kind and s.path == (proxy,)]
    preferred = [s.name for s in same_proxy if (s.broken.manifest is not None) == manifest]
    return (preferred or [s.name for s in same_proxy] or [BY_ID[kind].scenario])[0]


def findings(proxy: str, suspicions: list[Suspicion], measured: list[Measured],
             where_of: dict[str, str]) -> list[Finding]:
    """`where_of`: setting name -> where, for the fallback of a fault no suspicion explains."""
    out: list[Finding] = []
    ran = {m.name: m for m in measured}
    measured = _total_deadline_cuts(measured, suspicions)
    for m in measured:
        if m.passed or m.kind is None:
            continue
        matching = [s for s in suspicions if s.kind == m.kind]
        if not m.from_setting:  # no setting explains it: blaming one (writeTimeout 10s) would say more than was seen
            out.append(Finding(kind=m.kind, severity="failure", evidence=f"{m.name}: {m.observed}"))
        elif matching:
            for s in matching:
                out.append(Finding(kind=m.kind, severity="failure", where=s.where,
                                   evidence=f"{m.name}: {m.observed}. Read: {s.evidence}",
                                   scenario=scenario_for(m.kind, proxy), fix=s.fix,
                                   limit_s=s.limit_s if s.limit_s is not None else m.limit_s))
        else:
            setting, fix = fallback(proxy, m.kind)  # a fault no setting explains: its kind's first rule
            out.append(Finding(kind=m.kind, severity="failure", where=where_of.get(setting, DEFAULT),
                               evidence=f"{m.name}: {m.observed}", scenario=scenario_for(m.kind, proxy),
                               fix=fix, limit_s=m.limit_s))
    # A suspicion is a failure's cause when its kind failed from a setting; an early cut leaves it a warning.
    failed_kinds = {m.kind for m in measured if not m.passed and m.kind is not None and m.from_setting}
    for s in suspicions:
        if s.kind in failed_kinds:
            continue
        checked = [ran[c] for c in s.checks if c in ran and not ran[c].skipped]
        if checked:
            reason = "measured here, it did not show: " + "; ".join(f"{c.name}: {c.observed}" for c in checked)
        else:
            skipped = [ran[c] for c in s.checks if c in ran and ran[c].skipped]
            reason = ("not measured: " + "; ".join(f"{c.name}: {c.skipped}" for c in skipped) if skipped
                      else f"not measured (check {', '.join(s.checks)} not run)")
        out.append(Finding(kind=s.kind, severity="warning", where=s.where, evidence=s.evidence,
                           scenario=scenario_for(s.kind, proxy), fix=s.fix, limit_s=s.limit_s, reason=reason))
    return _unique(out)


def _total_deadline_cuts(measured: list[Measured], suspicions: list[Suspicion]) -> list[Measured]:
    """A silence cut at the very limit that also cut the long stream is that whole-response
    deadline (Envoy's route timeout counts from the request, silence or not), not an idle limit:
    named once, as the total timeout, with the silence as more evidence."""
    totals = [m.limit_s for m in measured if m.kind == "total-timeout" and not m.passed and m.limit_s]
    totals += [s.limit_s for s in suspicions if s.kind == "total-timeout" and s.limit_s]
    out = []
    for m in measured:
        if (m.kind == "idle-timeout" and not m.passed and m.limit_s and
                any(abs(m.limit_s - t) <= max(1.0, 0.1 * t) for t in totals)
                and not any(s.kind == "idle-timeout" for s in suspicions)):
            m = replace(m, kind="total-timeout",
                        observed=f"{m.observed} (at the whole-response limit, {m.limit_s:g} s: that deadline, "
                                 "not an idle limit)")
        out.append(m)
    return out


def checks_for(kinds: set[str]) -> list[str]:
    """The checks that can show these kinds, in the order they run."""
    return [name for name, shown in CHECK_KINDS.items() if kinds & set(shown)]


def _unique(found: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in found:
        key = (f.kind, f.severity, f.where)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
