"""What the proxies themselves count, and which hop of a chain holds the stream."""
from __future__ import annotations

import re
from collections import Counter

from labs.client.durations import milliseconds
from labs.scenario.checks.base import STREAM_SLACK_INTERVALS, after_due
from labs.scenario.model import Check, Run


def proxy_stat_at_least(stat_suffix: str, bound: int, label: str, logged: str | None = None) -> Check:
    """An Envoy admin counter (any stat name ending with `stat_suffix`) reached `bound`; or, with
    `logged`, the proxy's access log shows the same event (`logged` found in an access line).

    Why the log too: a fresh-clone CI run once read the overflow counter as 0 while the access log
    of the same run showed its 503s flagged UO (upstream overflow) by Envoy itself; both are
    Envoy's own records of the event, so either proves that it happened. The whole log is read:
    the overflows come first (instant 503s) and the streams that got through are logged after.
    On a miss, the flags of the lines that were not a 200 say what happened instead."""
    def measure(run: Run) -> tuple[str, bool]:
        total = sum(value for stats in run.proxy_stats.values()
                    for name, value in stats.items() if name.endswith(stat_suffix))
        if total >= bound or logged is None:
            return f"{stat_suffix} = {total}", total >= bound
        every = [line for lines in run.access_log.values() for line in lines]
        hits = [line for line in every if logged in line]
        shown = f"{stat_suffix} = {total}; access log lines with {logged!r}: {len(hits)} of {len(every)}"
        if len(hits) < bound:
            others = Counter(_status_and_flags(line) for line in every if "status=200 " not in line)
            shown += "; not-200 lines by flags: " + (", ".join(f"{f} x{n}" for f, n in others.items())
                                                     or "none")
        return shown, len(hits) >= bound
    return Check(label, measure)


def _status_and_flags(line: str) -> str:
    """The `status=... flags=...` of an access line in the lab's Envoy format."""
    status = re.search(r"status=(\S+)", line)
    flags = re.search(r"flags=(\S+)", line)
    return f"{status.group(1) if status else '?'} {flags.group(1) if flags else '?'}"


def culprit_hop(expected: str | None, entry: int | None = None) -> Check:
    """From the bisection: the innermost entry point that still sees a late first token;
    `entry` (1 = the outermost hop) tells apart two hops of one kind."""
    def measure(run: Run) -> tuple[str, bool]:
        limit = after_due(STREAM_SLACK_INTERVALS)(run)
        late = [label for label, results in run.hops.items()
                if results[0].ttft_s is None or results[0].ttft_s > limit]
        culprit = late[-1].split("enter at ", 1)[-1] if late else None
        # Hop names are like "nginx:41234"; compare the proxy part.
        name = culprit.split(":", 1)[0] if culprit else None
        shown = ", ".join(f"{label}: TTFT {milliseconds(r[0].ttft_s)}" for label, r in run.hops.items())
        at = int(late[-1].split(".", 1)[0]) if late else None
        return f"culprit {name or 'none'} ({shown})", name == expected and (entry is None or at == entry)
    where = f" (hop {entry} from the client)" if entry is not None else ""
    return Check(f"bisection names {expected or 'no hop'}{where} as the hop that holds the stream", measure)


def waf_rule_logged(rule_id: int, what: str, *, fired: bool = True) -> Check:
    """A WAF rule's match in the proxy's error log (ModSecurity writes `[id "N"]` there, in Apache's
    and nginx's error log alike): with `fired`, the rule matched (the WAF read what it reads); else
    it did not, though the WAF ran (the other rules' lines prove that)."""
    tag = f'[id "{rule_id}"]'

    def measure(run: Run) -> tuple[str, bool]:
        said = [line for line in run.evidence if " log: " in line and "ModSecurity" in line]
        hits = [line for line in said if tag in line]
        shown = f"{len(hits)} of {len(said)} ModSecurity lines carry {tag}"
        return shown, bool(hits) if fired else (not hits and bool(said))
    return Check(f"ModSecurity rule {rule_id} {'matched' if fired else 'never matched'}: {what}", measure)


def logged_count_matches_usage(field: str, who: str) -> Check:
    """The proxy's access line of every stream carries `field=N` (a count its filter or external
    processor wrote into Envoy's dynamic metadata), and N is the `usage.completion_tokens` the
    client received: the counter really saw the body and counted every token. `-` (no metadata)
    or another number fails."""
    def measure(run: Run) -> tuple[str, bool]:
        every = [line for lines in run.access_log.values() for line in lines]
        logged = [match.group(1) for line in every if (match := re.search(rf"\b{field}=(\S+)", line))]
        usage = [str((result.usage or {}).get("completion_tokens")) for result in run.results]
        shown = f"{field}= {', '.join(logged) or 'absent'}; the client's usage.completion_tokens {', '.join(usage)}"
        return shown, len(logged) == len(usage) > 0 and sorted(logged) == sorted(usage)
    return Check(f"{who} counted the tokens of every stream ({field}= in the access log equals "
                 "the usage the client received)", measure)
