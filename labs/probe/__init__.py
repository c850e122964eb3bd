"""`labs probe`: a deployed streaming path, checked from outside, each fault named with its hop.

    report = probe_path(["http://127.0.0.1:8080/v1", "http://127.0.0.1:8081/v1"], max_silence_s=2)
    report.findings   # labs.findings.Finding, with `hop` = the innermost URL that still shows it
    report.checks     # labs.findings.CheckOutcome, one per check (a pytest test each)

Modules: path (the URLs and the origin behind them), knobs (the request bodies), flow (buffering,
coalescing, compression), protocols (HTTP/2 beside HTTP/1.1: ALPN, one verdict over both),
silence (idle and total limits), departure (disconnects), burst (connection limits), run (order
and hop attribution), report, cli.
"""
from labs.probe.report import ProbeReport
from labs.probe.run import CHECK_NAMES, probe_path

__all__ = ["CHECK_NAMES", "ProbeReport", "probe_path"]
