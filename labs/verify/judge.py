"""Findings from the static reading and the measurements together.

The faults are the trials' verdicts (each from its kind's judge in `labs.findings`): this module
decides none, it names them. A measured fault is a `failure`, named by the directive the reading
holds responsible (or the proxy's default); a suspicion the measurement did not confirm is a
`warning` that says why; each finding names the catalogue scenario that demonstrates its kind on
this proxy (`make lab-NAME`).
"""
from __future__ import annotations

from labs.findings import BY_ID, Finding, FindingKind
from labs.verify.kinds import KINDS
from labs.verify.trials import CHECK_KINDS, Measured
from labs.verify.model import DEFAULT, Suspicion

def scenario_for(kind: FindingKind, proxy: str) -> str | None:
    """The catalogue scenario that demonstrates `kind` on this proxy (else the kind's own)."""
    from labs import catalogue
    same_proxy = [s.name for s in catalogue.SCENARIOS if s.kind == kind and s.path == (proxy,)]
    return (same_proxy or [BY_ID[kind].scenario])[0]


def findings(proxy: str, suspicions: list[Suspicion], measured: list[Measured],
             where_of: dict[str, str]) -> list[Finding]:
    """`where_of`: setting name -> where, for the fallback of a fault no suspicion explains."""
    out: list[Finding] = []
    ran = {m.name: m for m in measured}
    for m in measured:
        if m.passed or m.kind is None:
            continue
        matching = [s for s in suspicions if s.kind == m.kind]
        if matching:
            for s in matching:
                out.append(Finding(kind=m.kind, severity="failure", where=s.where,
                                   evidence=f"{m.name}: {m.observed}. Read: {s.evidence}",
                                   scenario=scenario_for(m.kind, proxy), fix=s.fix,
                                   limit_s=s.limit_s if s.limit_s is not None else m.limit_s))
        else:
            setting, fix = KINDS[proxy].fallback[m.kind]  # a fault no setting explains
            out.append(Finding(kind=m.kind, severity="failure", where=where_of.get(setting, DEFAULT),
                               evidence=f"{m.name}: {m.observed}", scenario=scenario_for(m.kind, proxy),
                               fix=fix, limit_s=m.limit_s))
    failed_kinds = {f.kind for f in out}
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
