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
with the measurement on its reader, labs/verify/<proxy>/reader.py) passes the departure on only
through the server's heartbeats, which production sends (the lab's server: a `: ping` after 10 s
of silence). Its files are verified as their users must: with `--heartbeat`, here at a scaled
interval, and the heartbeats are shown to have been sent; without it, their default run reports
exactly `disconnect-not-propagated` and the fix that names the option, so the option is what
makes them pass.
"""
from __future__ import annotations

import pytest

from labs.verify import verify_config
from tests.verify.fixed_cases import AT_WRITE, CLAIMS, FIXED, HEARTBEATS, SCALED, passes_verify, programs  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("name", "series", "mode"), [
    case for case in CLAIMS if case.values[1] is None and not case.values[0].startswith("kubernetes/")])
def test_fixed_file_passes_verify(verify_server, request, programs, name: str, series: str | None,
                                  mode: str) -> None:
    passes_verify(verify_server, request, programs, name, series, mode)


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
