"""Every file in proxies/fixed/ passes the lab's own `labs verify`, as a user runs it: `--quick`
(the checks its static reading calls for, plus streaming; the command's own limits) and the
default (every check; the limits scaled down to keep the suite fast). The files are listed from
the folder, so a config added there is verified too; the Kubernetes manifests are among them.
Each file is verified on every release it claims (proxies.export; its header names them): the
current one as verify runs with no flag, an older one with `--proxy-version` (Debian 12's nginx, HAProxy
and Varnish run the same files as the current ones; Debian 12's Caddy has `Caddyfile-2.6`).

"Passes" is every check that ran passed, none could not measure, no finding (not even a
warning), and the lab's server really served the run. What each pass rests on is asserted too: the
default run measured every check of the plain-HTTP path (the client left mid-stream, the 30
streams, the silences and the long stream), HTTP/2 over TLS where the file listens on TLS, and a
check not run says why. The converse (a fixed file made faulty is reported) is each kind's own
test: tests/verify/test_dynamic.py, test_caddy.py (`flush_interval -1`).

A proxy that notices a departed client only at a write to it (httpd 2.4, Varnish 7.1: declared
with the measurement on its kind, labs/verify/<proxy>/kind.py) passes the departure on only
through the server's heartbeats, which production sends (the lab's server: a `: ping` after 10 s
of silence). Its files are verified as their users must: with `--heartbeat`, here at a scaled
interval, and the heartbeats are shown to have been sent; without it, their default run reports
exactly `disconnect-not-propagated` and the fix that names the option, so the option is what
makes them pass.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from labs.verify import verify_config
from labs.verify.detect import detect
from labs.verify.kinds import KINDS
from labs.verify.model import RouteWanted
from labs.verify.output import verdict_line
from proxies.binaries import binary
from proxies.export import exports
from proxies.kinds import KINDS as PROXY_KINDS

pytestmark = pytest.mark.slow
FIXED = Path(__file__).resolve().parents[2] / "proxies" / "fixed"
FILES = sorted(path.relative_to(FIXED).as_posix() for path in FIXED.rglob("*") if path.is_file())
# The default run's limits, scaled: a 1.5 s silence, a stream a little over 2 s, 30 streams.
SCALED = {"max_silence_s": 1.5, "max_stream_s": 2.0, "streams": 30}
# The server's heartbeat interval, scaled as those (10 s in production, server/knobs.py): the
# disconnect check then keeps a silence of 4.5 s (httpd) or 5.5 s (Varnish), trials.departure_pause_s.
HEARTBEAT_S = 1.0
EVERY_CHECK = {"streaming", "gzip", "silence-before-first-token", "silence-mid-stream", "long-stream",
               "disconnect", "concurrent-streams", "loopback-only"}
HEARTBEATS = "streamlab_heartbeats_total"
# Traefik with Go's proxy (the fixed file's choice, and its CRDs' install default) ends a stream
# now and then just after its headers when the server answers at once: these runs ask for the
# headers a little late (conftest.HEADERS_LATE_S); test_early_cut.py shows the cut reported.
GO_PROXY = {"traefik.yml", "kubernetes/traefik.yaml"}


def _listens_on_tls(name: str) -> bool:
    return "-tls." in name


def _at_write(name: str):
    """How the file's proxy notices a departure when only a write tells it (None: a setting decides)."""
    return KINDS[detect(FIXED / name)].departure_at_write


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


@pytest.mark.parametrize(("name", "series", "mode"), CLAIMS)
def test_fixed_file_passes_verify(verify_server, request, programs, name: str, series: str | None,
                                  mode: str) -> None:
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


@pytest.mark.parametrize("mode", ["quick", "default"])
@pytest.mark.parametrize("name", AT_WRITE)
def test_without_heartbeats_the_departure_is_reported(verify_server, name: str, mode: str) -> None:
    """The same file without --heartbeat: its reading suspects the departure, so --quick measures
    it too, and the run reports exactly that failure at the disconnect check (the server kept
    generating through its silence, no heartbeat sent), with the fix that names the option."""
    quick = mode == "quick"
    before = verify_server.metrics()
    report = verify_config(FIXED / name, quick=quick, server=verify_server, **({} if quick else SCALED))
    after = verify_server.metrics()
    shown = [(c.name, c.passed, c.observed) for c in report.checks]
    assert report.verdict == "failure", shown
    assert [(f.kind, f.severity) for f in report.findings] == [("disconnect-not-propagated", "failure")], \
        [(f.kind, f.severity, f.evidence) for f in report.findings]
    [finding] = report.findings
    assert "heartbeat" in finding.fix and "--heartbeat" in finding.fix, finding.fix
    assert "only when a write to it fails" in finding.evidence, finding.evidence
    assert {c.name for c in report.checks if c.ran and not c.passed} == {"disconnect"}, shown
    assert not any(c.skipped for c in report.checks if c.ran), shown
    assert after.get(HEARTBEATS, 0) == before.get(HEARTBEATS, 0), shown  # a silence without heartbeats
