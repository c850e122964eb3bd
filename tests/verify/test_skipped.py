"""A trial whose judge could not tell (`untold`) is skipped with the reason: never a pass, never a
failure, and a suspicion it was meant to confirm says "not measured", not "did not show"."""
from __future__ import annotations

import io

from rich.console import Console

from labs.findings import CheckOutcome
from labs.findings.evidence import untold
from labs.verify import judge, output
from labs.verify.model import Suspicion, VerifyReport
from labs.verify.trials import measured

WHY = "the 10 s pause did not happen (longest gap 0.1 s)"


def test_an_untold_verdict_is_a_skipped_trial() -> None:
    trial = measured("silence-mid-stream", "idle-timeout", untold(WHY), [])
    assert trial.skipped == WHY and not trial.passed and trial.kind is None
    suspicion = Suspicion("idle-timeout", "nginx.conf:12", "proxy_read_timeout 5s", "proxy_read_timeout 60s;",
                          ("silence-mid-stream",), 5.0)
    found = judge.findings("nginx", [suspicion], [trial], {})
    assert [(f.kind, f.severity) for f in found] == [("idle-timeout", "warning")]
    assert found[0].reason == f"not measured: silence-mid-stream: {WHY}"


def test_the_report_shows_a_skipped_check_and_says_so_beside_ok() -> None:
    trial = measured("silence-mid-stream", "idle-timeout", untold(WHY), [])
    report = VerifyReport(proxy="nginx", file="nginx.conf",
                          checks=[CheckOutcome(trial.name, trial.passed, trial.observed, skipped=trial.skipped),
                                  CheckOutcome("streaming", True, "12 events in 12 reads")])
    text = io.StringIO()
    output.print_report(report, Console(file=text, width=200, color_system=None))
    printed = text.getvalue()
    assert "skipped" in printed.split("silence-mid-stream", 1)[1].splitlines()[0]
    assert "FAIL" not in printed
    assert "inconclusive" in printed and "not measured: silence-mid-stream (skipped)" in printed
    assert report.exit_status == 2 and not report.ok  # what was not measured is never "ok"
    assert report.to_json()["checks"][0]["skipped"] == WHY


def test_a_hop_that_refuses_large_events_is_no_gzip_finding() -> None:
    """The gzip check's second ask (1,500-byte events) ending badly says nothing about compression:
    the small-event verdict stands, with what happened said; an ask that compresses is judged."""
    import asyncio

    from labs.client.results import Event, StreamResult
    from labs.verify import trials

    def paced(**fields) -> StreamResult:
        events = [Event(t=0.05 + 0.1 * i, read=i + 1, kind="content", text="x")
                  for i in range(12)]
        return StreamResult(outcome="complete", saw_done=True, status=200, events=events, reads=12,
                            ttft_s=0.05, e2e_s=1.15, **fields)

    class StandIn:
        def __init__(self, large: StreamResult) -> None:
            self.large, self.direct, self.asked = large, paced(), []

        def body(self, lab=None, **request):
            return {"lab": dict(lab or {}), **request}

        async def measure(self, body, **options):
            self.asked.append(body["lab"].get("pad_bytes"))
            return self.large if body["lab"].get("pad_bytes") else paced()

    refused = StandIn(StreamResult(outcome="error", status=502, error="HTTP 502"))
    verdict = asyncio.run(trials.gzip(refused))
    assert refused.asked == [None, trials.LARGE_EVENT_BYTES]
    assert verdict.passed and "did not compress" in verdict.observed and "did not complete" in verdict.observed
    held = StandIn(StreamResult(outcome="complete", saw_done=True, status=200, content_encoding="gzip",
                                events=[Event(t=1.2, read=1, kind="content", text="x")] * 12,
                                reads=1, ttft_s=1.2, e2e_s=1.2))
    verdict = asyncio.run(trials.gzip(held))
    assert not verdict.passed and verdict.kind == "compression-delay", verdict.observed


def test_an_ok_without_every_check_says_which_were_not_run() -> None:
    """--quick (or --check) leaves checks out: its ok never says "every check passed", and names
    them; a run of every check still does. The JSON's verdict is ok either way."""
    def printed(report: VerifyReport) -> str:
        text = io.StringIO()
        output.print_report(report, Console(file=text, width=400, color_system=None))
        return text.getvalue().splitlines()[-1]
    checks = [CheckOutcome("streaming", True, "12 events in 12 reads")]
    quick = VerifyReport(proxy="nginx", file="nginx.conf", checks=checks,
                         not_selected=["gzip", "disconnect"], selected_by="--quick")
    line = printed(quick)
    assert "every check that ran passed; not run (--quick): gzip, disconnect" in line, line
    assert "every check passed" not in line and quick.to_json()["verdict"] == "ok" and quick.exit_status == 0
    assert "every check passed" in printed(VerifyReport(proxy="nginx", file="nginx.conf", checks=checks))
