"""Between the lab and the browser's client: options in, measurements out (no browser needed)."""
from __future__ import annotations

import contextlib
from typing import Iterator

import pytest

from labs import catalogue
from labs.scenario.model import Workload
from labs.view.cli import page_origins
from labs.view.pages import past_reports, scenario_page_data
from labs.view.session import ViewError, _bounded_int, _with_controls
from labs.scenario.browser_spec import browser_spec, from_browser, skipped_options


def test_client_options_become_the_browser_clients_own() -> None:
    spec = browser_spec("http://127.0.0.1:1/v1/chat/completions", {"model": "m"},
                        Workload(disconnect_after_events=3),
                        {"mode": "read-body", "read_timeout_s": 1.5, "decoder": "naive",
                         "headers": {"X": "y"}})
    assert spec == {"url": "http://127.0.0.1:1/v1/chat/completions", "body": {"model": "m"},
                    "mode": "read-body", "readTimeoutMs": 1500.0, "decoder": "naive",
                    "abortAfterEvents": 3}
    assert skipped_options({"headers": {}, "mode": "stream"}) == ["headers"]


def test_browser_measurements_become_a_stream_result_in_seconds() -> None:
    result = from_browser({
        "url": "u", "status": 200, "protocol": "h2", "ttfbMs": 10, "ttftMs": 12.5, "e2eMs": 40,
        "reads": 2, "splitReads": 1, "text": "ab", "sawDone": True, "outcome": "complete",
        "events": [{"t": 12.5, "read": 1, "kind": "content", "text": "a"},
                   {"t": 12.5, "read": 1, "kind": "content", "text": "b"},
                   {"t": 30, "read": 2, "kind": "comment", "text": ""}]})
    assert result.ttft_s == 0.0125 and result.e2e_s == 0.04 and result.http_version == "h2"
    assert result.content_events == 2 and result.bursts == 1 and result.heartbeats == 1
    assert result.split_reads == 1 and result.mode == "browser"


def test_controls_are_bounded_and_clear() -> None:
    assert _bounded_int("", 7, 1, 200) == 7
    with pytest.raises(ViewError, match="outside"):
        _bounded_int("0", 1, 1, 200)
    with pytest.raises(ViewError, match="whole number"):
        _bounded_int("many", 1, 1, 200)
    spec = {"abortAfterEvents": 3}
    assert "abortAfterEvents" not in _with_controls(spec, {"abort_after_events": ""})
    assert _with_controls(spec, {"abort_after_events": "5"})["abortAfterEvents"] == 5


def test_the_page_knows_each_workloads_defaults() -> None:
    data = scenario_page_data(catalogue.get("nginx-client-abort"))
    assert data["abort_after_events"] == 3 and data["streams"] == 1
    many = scenario_page_data(catalogue.get("nginx-worker-connections"))
    assert many["streams"] == 60 and any("6 connections" in note for note in many["notes"])


def test_page_origins_cover_the_loopback_names() -> None:
    assert page_origins("127.0.0.1", 8765) == ("http://127.0.0.1:8765", "http://localhost:8765")
    assert page_origins("192.0.2.7", 80) == ("http://192.0.2.7:80",)


def test_past_reports_are_found_newest_first(tmp_path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.md").write_text(f"# {name}\n")
    (tmp_path / "b" / "report.json").write_text('{"verdict": {"broken": "symptom reproduced"}}')
    found = past_reports(tmp_path)
    assert {r["name"] for r in found} == {"a", "b"}
    assert next(r for r in found if r["name"] == "b")["verdict"] == {"broken": "symptom reproduced"}
    assert past_reports(tmp_path / "missing") == []


def test_the_comparison_sets_the_browsers_numbers_beside_the_lab_clients() -> None:
    from labs.client.results import StreamResult
    from labs.scenario.runner import ScenarioOutcome
    from labs.scenario.model import Run
    from labs.view.session import compare

    scenario = catalogue.get("nginx-worker-connections")
    lab = [StreamResult(outcome="complete", ttft_s=0.01, e2e_s=1.0, reads=3),
           StreamResult(outcome="reset")]
    outcome = ScenarioOutcome(scenario, runs={"broken": Run("broken", scenario.workload, lab)})
    browser = {"broken": [{"outcome": "complete", "ttftMs": 20, "e2eMs": 1010, "reads": 2},
                          {"outcome": "complete", "ttftMs": 1500, "e2eMs": 2500, "reads": 2}]}
    [row] = compare(outcome, browser)
    assert row["browser"]["ttft_ms"] == 20.0 and row["lab"]["ttft_ms"] == 10.0
    assert row["browser"]["outcomes"] == "complete 2" and row["lab"]["outcomes"] == "complete 1, reset 1"
    assert row["browser"]["ttft_max_ms"] == 1500.0 and row["lab"]["streams"] == 2
    assert compare(outcome, {})[0]["browser"] is None  # a run the page did not report


class _FakeLab:
    """The lab runner's surface the view session uses, with nothing started."""

    def server(self, args: object, nofile: object) -> object:
        return type("Server", (), {"port": 1})()

    @contextlib.contextmanager
    def path(self, *args: object) -> Iterator[list]:
        yield []

    def entry_url(self, scenario: object, name: str, hops: object) -> str:
        return f"http://127.0.0.1:{1 if name == 'broken' else 2}"

    def request_body(self, workload: Workload, variant: object) -> dict:
        from labs.scenario.runner import request_body
        return request_body(workload, variant, "tiny")

    def close(self) -> None:
        pass


def test_the_page_s_protocol_makes_both_panels_and_the_lab_client_speak_it(tmp_path) -> None:
    from labs.client.apis.messages import ANTHROPIC_VERSION
    from labs.view.session import ViewSession

    session = ViewSession((), "local", tmp_path)
    session.lab = _FakeLab()  # type: ignore[assignment]
    with pytest.raises(ViewError, match="unknown api 'soap': choose one of chat, responses, messages"):
        session.prepare("nginx-buffering", {"api": "soap"})
    assert session._open is None  # refused before anything started
    default = session.prepare("nginx-buffering", {})
    assert default["api"] == "chat" and default["variants"]["fixed"]["url"] == "http://127.0.0.1:2/v1/chat/completions"
    plan = session.prepare("nginx-buffering", {"api": "responses"})
    assert plan["api"] == "responses" and session._open is not None
    for variant, port in (("broken", 1), ("fixed", 2)):
        spec = plan["variants"][variant]
        assert spec["url"] == f"http://127.0.0.1:{port}/v1/responses" and spec["entry"] == f"http://127.0.0.1:{port}"
        assert spec["wireApi"] == "responses" and spec["protocolHeaders"] == {}
        assert "input" in spec["body"] and "messages" not in spec["body"]
    assert session._open.as_run is not None and session._open.as_run.workload.api == "responses"
    messages = session.prepare("nginx-buffering", {"api": "messages"})["variants"]["broken"]
    assert messages["url"].endswith("/v1/messages")
    assert messages["protocolHeaders"]["anthropic-version"] == ANTHROPIC_VERSION


def test_the_page_offers_the_servers_protocols_with_the_scenarios_own_chosen() -> None:
    from server.apis.table import APIS

    data = scenario_page_data(catalogue.get("nginx-buffering"))
    assert data["api"] == "chat" and [a["name"] for a in data["apis"]] == list(APIS)
    assert [a["path"] for a in data["apis"]] == [api.path for api in APIS.values()]
