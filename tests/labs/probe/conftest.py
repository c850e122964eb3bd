"""The canary origin every probe test shares, and a helper that probes a chain and times it."""
from __future__ import annotations

import time
from typing import Iterator, Sequence

import pytest

from labs.probe import ProbeReport, probe_path
from server.launcher import ServerHandle
from tests.labs.probe.chains import canary

# Small limits: the scaled proxy timeouts are 1 s, so 1.5 s of silence and a 2.5 s stream show them.
MAX_SILENCE_S = 1.5
MAX_STREAM_S = 2.5


@pytest.fixture(scope="session")
def origin() -> Iterator[ServerHandle]:
    with canary() as server:
        yield server


def probe(urls: Sequence[str], checks: Sequence[str] | None, **options) -> tuple[ProbeReport, float]:
    """The probe's report and its wall time (every test says how long its probe took)."""
    started = time.monotonic()
    options.setdefault("max_silence_s", MAX_SILENCE_S)
    options.setdefault("max_stream_s", MAX_STREAM_S)
    report = probe_path(list(urls), checks=checks, **options)
    wall = time.monotonic() - started
    print(f"probe {' '.join(urls)} ({', '.join(checks or ['all'])}): {wall:.1f} s; "
          f"findings: {[(f.kind, f.hop, f.limit_s) for f in report.findings]}")
    return report, wall
