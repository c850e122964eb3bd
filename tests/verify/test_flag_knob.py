"""The way verify sets its server up cannot hide a fault (issue 40, item 7).

verify (and the probe's canary) start the lab's server with flags and ask it, per request, for
the settings that expose faults (labs.lab.exposing: no `X-Accel-Buffering`, no heartbeats).
For every finding kind, the catalogue's broken config of that kind is measured by verify's own
trial two ways: as verify runs (its server, the settings as `lab` knobs), and with the settings
made the server's own by its flags and left out of every request. Both must report the kind: a
fault the knob path shows, the flag path shows too. A third way, the same flags on a server that
answers chunked (uvicorn's httptools, no `--http h11`), must hide the buffering: that is what
the set-up depends on, and the comparison can tell.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from labs import catalogue
from labs.catalogue.render import rendered
from labs.lab import exposing
from labs.findings.kinds import KINDS
from labs.verify import verify_config
from labs.verify.judge import checks_for
from labs.verify.run import server_args
from proxies.kinds import KINDS as PROXY_KINDS
from server.launcher import running_server
from tests.verify.test_dynamic import SCALED, _faulty_proxy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def flag_server():
    """verify's server with the exposing settings as its own flags."""
    with running_server([*server_args(SCALED["streams"]), *exposing.exposing_flags()]) as server:
        yield server


def _verify(tmp_path: Path, scenario_name: str, kind: str, server, monkeypatch, in_request: bool):
    scenario = catalogue.get(scenario_name)
    proxy = _faulty_proxy(scenario)
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / PROXY_KINDS[proxy].config_name
    path.write_text(rendered(scenario.name, "broken", proxy)[1])
    with monkeypatch.context() as patched:
        if not in_request:  # the requests carry none of it: the server's flags must do it all
            patched.setattr(exposing, "EXPOSING", {})
        report = verify_config(path, checks=checks_for({kind}), server=server, **SCALED)
    return {f.kind for f in report.failures()}, [(c.name, c.passed, c.observed) for c in report.checks]


@pytest.mark.parametrize("kind", KINDS, ids=[k.id for k in KINDS])
def test_the_flag_path_shows_what_the_knob_path_shows(verify_server, flag_server, tmp_path,
                                                      monkeypatch, kind):
    by_knob, seen_by_knob = _verify(tmp_path / "knob", kind.scenario, kind.id, verify_server,
                                    monkeypatch, in_request=True)
    by_flag, seen_by_flag = _verify(tmp_path / "flag", kind.scenario, kind.id, flag_server,
                                    monkeypatch, in_request=False)
    assert kind.id in by_knob, seen_by_knob  # the fault is there to be shown
    assert kind.id in by_flag, seen_by_flag


def test_a_chunked_server_hides_the_buffering(tmp_path, monkeypatch):
    """The same flags, the same config, a server answering chunked: nginx forwards each chunk, the
    missing header no longer matters, and the fault goes unseen."""
    args = [a for a in server_args(SCALED["streams"]) if a not in exposing.CLOSE_DELIMITED]
    assert len(args) == len(server_args(SCALED["streams"])) - len(exposing.CLOSE_DELIMITED)
    with running_server([*args, *exposing.exposing_flags()]) as chunked:
        hidden, seen = _verify(tmp_path, "nginx-buffering", "buffering", chunked, monkeypatch,
                               in_request=False)
    assert "buffering" not in hidden, seen
    assert ("streaming", True) in [(name, passed) for name, passed, _ in seen], seen  # measured, passed


def test_each_way_gets_its_settings_from_where_it_says(verify_server, flag_server, monkeypatch):
    """What the comparison depends on: the flag server leaves the header out of a request that
    does not ask, verify's server does not; with EXPOSING emptied, verify's requests ask nothing."""
    import httpx

    from labs.verify.model import Options
    from labs.verify.trials import Target

    plain = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True,
             "max_tokens": 2}
    headers = {name: httpx.post(server.url + "/v1/chat/completions", json=plain, timeout=10).headers
               for name, server in (("flag", flag_server), ("knob", verify_server))}
    assert "x-accel-buffering" not in headers["flag"]
    assert headers["knob"]["x-accel-buffering"] == "no"
    target = Target("http://127.0.0.1:1", verify_server, "tiny", Options())
    assert target.body()["lab"].items() >= exposing.EXPOSING.items()
    monkeypatch.setattr(exposing, "EXPOSING", {})
    assert not {"omit_headers", "heartbeat_s"} & set(target.body()["lab"])
