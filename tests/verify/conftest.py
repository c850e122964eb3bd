"""One lab server for every verify run of the session (verify_config(server=...) shares it)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

USER_CONFIGS = Path(__file__).resolve().parent.parent / "data" / "user-configs"


def user_config_cases() -> list[tuple[str, dict]]:
    return [(d.name, json.loads((d / "expected.json").read_text()))
            for d in sorted(USER_CONFIGS.iterdir()) if (d / "expected.json").is_file()]


@pytest.fixture(scope="session")
def verify_server(model_dir):
    from labs.verify import lab_server
    with lab_server() as server:
        yield server


# Traefik's default proxy (Go's) ends a few POST streams in a thousand just after their headers when the
# server answers within a millisecond of the request body (golang/go#40747;
# docs/field-notes.md#traefiks-early-cut), and verify reports each such cut (test_early_cut.py).
# A test that asserts a clean report of a Traefik that runs Go's proxy (proxies/fixed/traefik.yml's
# choice, a Kubernetes CRD manifest's install default, a test's own static file) asks the server for
# its headers this late, as a model's queue and prefill hold them: 0 of 3,000 cut, against 13
# at once (`python -m tests.verify.count_early_cuts --set fast_proxy=false [--headers-delay 0.02]`).
HEADERS_LATE_S = 0.02


@pytest.fixture
def headers_late(monkeypatch):
    """Every trial's request asks the server for its headers HEADERS_LATE_S late (a trial's own
    delay, the silence before the first token, stays its own); the direct baseline is measured
    again the same way, and the run is checked to have asked."""
    from labs.verify import trials
    asked: list[float] = []
    body = trials.Target.body

    def late(self, lab=None, **request):
        fields = {"headers_delay_s": HEADERS_LATE_S, **(lab or {})}
        asked.append(fields["headers_delay_s"])
        return body(self, fields, **request)
    monkeypatch.setattr(trials.Target, "body", late)
    monkeypatch.setattr(trials, "_DIRECT", {})
    yield
    assert HEADERS_LATE_S in asked, "no trial asked for late headers: the run proved nothing about them"
    # The server really held them: the baseline straight to it (where a trial measured one).
    assert all((r.headers_s or 0.0) >= HEADERS_LATE_S for r in trials._DIRECT.values()), trials._DIRECT
