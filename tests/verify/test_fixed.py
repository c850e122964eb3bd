"""Every file in proxies/fixed/ passes the lab's own `labs verify`, as a user runs it: `--quick`
(the checks its static reading calls for, plus streaming; the command's own limits) and the
default (every check; the limits scaled down to keep the suite fast). The files are listed from
the folder, so a config added there is verified too; the Kubernetes manifests are among them.

"Passes" is every check that ran passed, none could not measure, no finding (not even a
warning), and the lab's server really served the run. What each pass rests on is asserted too: the
default run measured every check of the plain-HTTP path (the client left mid-stream, the 30
streams, the silences and the long stream), HTTP/2 over TLS where the file listens on TLS, and a
check not run says why. The converse (a fixed file made faulty is reported) is each kind's own
test: tests/verify/test_dynamic.py, test_caddy.py (`flush_interval -1`).

What no setting of a proxy changes is declared in CANNOT as measured, so a change in the program
shows here: the default run reports exactly that failure, at that check, and passes the rest.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from labs.verify import verify_config

pytestmark = pytest.mark.slow
FIXED = Path(__file__).resolve().parents[2] / "proxies" / "fixed"
FILES = sorted(path.relative_to(FIXED).as_posix() for path in FIXED.rglob("*") if path.is_file())
# The default run's limits, scaled: a 1.5 s silence, a stream a little over 2 s, 30 streams.
SCALED = {"max_silence_s": 1.5, "max_stream_s": 2.0, "streams": 30}
EVERY_CHECK = {"streaming", "gzip", "silence-before-first-token", "silence-mid-stream", "long-stream",
               "disconnect", "concurrent-streams", "loopback-only"}

# httpd 2.4 and Varnish 7.1 notice a departed client only when their next write to it fails, so
# through the disconnect check's 2 s silence (heartbeats off) the server keeps generating: the
# server noticed 2.11 s (Apache) and 2.17 s (Varnish) after the client left, measured with
# `labs verify proxies/fixed/apache.conf --max-silence 1.5 --max-stream 2 --streams 30`. No
# directive of theirs changes it; the finding's fix is the server's heartbeats (docs/verify.md).
CANNOT = {"apache.conf": ("disconnect", "disconnect-not-propagated"),
          "varnish.vcl": ("disconnect", "disconnect-not-propagated")}


def _listens_on_tls(name: str) -> bool:
    return "-tls." in name


@pytest.mark.parametrize("mode", ["quick", "default"])
@pytest.mark.parametrize("name", FILES)
def test_fixed_file_passes_verify(verify_server, name: str, mode: str) -> None:
    quick = mode == "quick"
    served = verify_server.metrics().get("streamlab_tokens_generated_total", 0)
    report = verify_config(FIXED / name, quick=quick, server=verify_server, **({} if quick else SCALED))
    shown = [(c.name, c.passed, c.observed) for c in report.checks]
    findings = [(f.kind, f.severity, f.where, f.evidence) for f in report.findings]
    cannot = None if quick else CANNOT.get(name)
    if cannot is None:
        assert report.verdict == "ok" and not report.findings, (findings, shown)
    else:  # exactly the declared failure, named with the server-side fix
        check, kind = cannot
        assert report.verdict == "failure", shown
        assert [(f.kind, f.severity) for f in report.findings] == [(kind, "failure")], findings
        assert "heartbeat" in (report.findings[0].fix or ""), report.findings[0].fix
    ran = {c.name for c in report.checks if c.ran}
    failed = {c.name for c in report.checks if c.ran and not c.passed}
    assert failed == ({cannot[0]} if cannot else set()), shown
    assert not any(c.skipped for c in report.checks if c.ran), shown  # none could not measure
    assert all(c.skipped for c in report.checks if not c.ran), shown  # a check not run says why
    assert {"streaming", "loopback-only"} <= ran, shown
    if not quick:
        assert EVERY_CHECK <= ran, shown
        assert ("streaming-h2" in ran) == _listens_on_tls(name), shown
    assert verify_server.metrics().get("streamlab_tokens_generated_total", 0) > served
