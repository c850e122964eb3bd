"""What tests/verify/test_fixed*.py share: the files of proxies/fixed/, the releases each claims,
and the one check of a file on one release (test_fixed.py has the whole story). The cases are
spread over modules because `make test` keeps a module on one worker (--dist loadscope): in one,
they made that worker the suite's longest, about 6 minutes of ten-second verify runs."""
from __future__ import annotations

from pathlib import Path

import pytest

from labs.verify import verify_config
from labs.verify.detect import detect
from labs.verify.readers import READERS
from labs.verify.model import RouteWanted
from labs.verify.output import verdict_line
from labs.verify.trials import CHECK_NAMES
from proxies.binaries import binary
from proxies.export import exports
from proxies.kinds import KINDS as PROXY_KINDS

FIXED = Path(__file__).resolve().parents[2] / "proxies" / "fixed"
FILES = sorted(path.relative_to(FIXED).as_posix() for path in FIXED.rglob("*") if path.is_file())
# The default run's limits, scaled: a 1.5 s silence, a stream a little over 2 s, 30 streams.
SCALED = {"max_silence_s": 1.5, "max_stream_s": 2.0, "streams": 30}
# The server's heartbeat interval, scaled as those (10 s in production, server/knobs.py): the
# disconnect check then keeps a silence of 4.5 s (httpd) or 5.5 s (Varnish), trials.departure_pause_s.
HEARTBEAT_S = 1.0
# Every trial runs on a fixed file, and the loopback check; HTTP/2 only where a TLS listener offers it.
EVERY_CHECK = {*CHECK_NAMES, "loopback-only"} - {"streaming-h2"}
HEARTBEATS = "streamlab_heartbeats_total"
# Traefik with Go's proxy (the fixed file's choice, and its CRDs' install default) ends a stream
# now and then just after its headers when the server answers at once: these runs ask for the
# headers a little late (conftest.HEADERS_LATE_S); test_early_cut.py shows the cut reported.
GO_PROXY = {"traefik.yml", "kubernetes/traefik.yaml"}


def _listens_on_tls(name: str) -> bool:
    return "-tls." in name or "-tls-" in name  # nginx-tls.conf, nginx-tls-1.22.conf


def _at_write(name: str):
    """How the file's proxy notices a departure when only a write tells it (None: a setting decides)."""
    return READERS[detect(FIXED / name)].departure_at_write


def _claims(name: str) -> tuple[str | None, ...]:
    """The releases a file is proven on (proxies.export; its header names them), the current one
    as None (verify's default); a Kubernetes manifest runs in its controller's own proxy, which
    the lab stands in for with its current release."""
    if name not in exports():
        return (None,)
    current = PROXY_KINDS[exports()[name].proxy].current.series
    return tuple(None if series == current else series for series in exports()[name].series)


# Each file in both modes on its newest release; on an older release it claims too (the same
# text on another binary: `nginx.conf-1.22`), the default run alone, which measures every check
# --quick does and the rest (measured, 2026-12-06, -n 2: the older releases' runs of the shared
# files took 57 s of the module's 276 s, their --quick runs 10 s of those).
CLAIMS = [pytest.param(name, series, mode, id=f"{name}-{series}-{mode}" if series and len(_claims(name)) > 1
                       else f"{name}-{mode}")
          for name in FILES for series in _claims(name) for mode in ("quick", "default")
          if mode == "default" or series is None or len(_claims(name)) == 1]
AT_WRITE = [name for name in FILES if _at_write(name) is not None]




@pytest.fixture
def programs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The binaries that checked and ran the file (verify's --proxy-version chose the release)."""
    from labs.verify import launch

    ran: list[str] = []
    chosen_program = launch.program

    def recorded(rewritten):
        ran.append(chosen_program(rewritten))
        return ran[-1]
    monkeypatch.setattr(launch, "program", recorded)
    return ran


def passes_verify(verify_server, request, programs, name: str, series: str | None, mode: str) -> None:
    """The file passes verify on that release, in that mode (test_fixed.py says what passing is)."""
    if name in GO_PROXY:
        request.getfixturevalue("headers_late")
    quick = mode == "quick"
    at_write = _at_write(name)
    heartbeat = HEARTBEAT_S if at_write is not None else None
    before = verify_server.metrics()
    report = verify_config(FIXED / name, quick=quick, server=verify_server, heartbeat_s=heartbeat,
                           wanted=RouteWanted(version=series), **({} if quick else SCALED))
    after = verify_server.metrics()
    shown = [(c.name, c.passed, c.observed) for c in report.checks]
    findings = [(f.kind, f.severity, f.where, f.evidence) for f in report.findings]
    assert report.verdict == "ok" and not report.findings, (findings, shown)
    ran = {c.name for c in report.checks if c.ran}
    assert all(c.passed for c in report.checks if c.ran), shown
    assert not any(c.skipped for c in report.checks if c.ran), shown  # none could not measure
    assert all(c.skipped for c in report.checks if not c.ran), shown  # a check not run says why
    assert {"streaming", "loopback-only"} <= ran, shown
    if not quick:
        assert EVERY_CHECK <= ran, shown
        assert ("streaming-h2" in ran) == _listens_on_tls(name), shown
    line = verdict_line(report)
    if quick:  # what --quick left out is named beside its ok, never "every check passed"
        assert report.not_selected and "every check passed" not in line, line
        assert f"not run (--quick): {', '.join(report.not_selected)}" in line, line
    else:
        assert not report.not_selected and "every check passed" in line, line
    if at_write is not None:  # measured through heartbeats the server really sent, quick or not
        assert "disconnect" in ran, shown
        assert after.get(HEARTBEATS, 0) - before.get(HEARTBEATS, 0) >= at_write.heartbeats, shown
    assert after.get("streamlab_tokens_generated_total", 0) > before.get("streamlab_tokens_generated_total", 0)
    # Checked and run by the binary of the release it claims, and by nothing else.
    assert programs and set(programs) == {binary(report.proxy, series)}, programs
    assert report.measured_on["series"] == (series or PROXY_KINDS[report.proxy].current.series)
