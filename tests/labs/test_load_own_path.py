"""`python -m labs load URL`: the load lab against a path given by its URL, with the lab's client
and with Locust (1 master + 2 workers), through an nginx whose `worker_connections` is the
known limit, and straight to the server as the clean case. Small and bounded: steps of 10 and
48 streams of 2 s."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from labs.findings import EXIT_FAILURE, EXIT_OK, EXIT_UNUSABLE
from labs.load import SYNTHETIC, LoadLab, LoadPath, StepResult
from labs.pathload.locust_run import locust_available, step_from_stats
from labs.pathload.cli import main
from labs.pathload.ramp import CONNECTION_LIMIT, findings, own_limits

# 64 connections for one worker: a proxied stream holds two (client and upstream), so about 30
# streams fit and 48 do not; 10 leave room to spare (the step below the limit stays healthy).
WORKER_CONNECTIONS = 64
STEPS = "10,48"
ARGS = ["--streams", STEPS, "--duration", "2", "--json"]


def step(n: int, **changes: Any) -> StepResult:
    base: dict[str, Any] = dict(
        path="p", concurrency=n, tokens_per_stream=40, tokens_per_s=20.0, duration_s=2.0,
        outcomes={"complete": n}, ttft_p50_s=0.01, ttft_p99_s=0.05, gap_p50_s=0.05,
        gap_p99_s=0.055, content_events=40 * n, wall_s=2.1, delivered_tok_s=20.0 * n,
        client_cpu_s=0.1, machine_busy_pct=40.0)
    base.update(changes)
    return StepResult(**base)


def test_failed_streams_are_a_connection_limit_and_a_client_out_of_cpu_is_not() -> None:
    baseline = step(1)
    reset = step(48, outcomes={"complete": 30, "reset": 18}, errors={"connection reset": 18})
    reset.limits = own_limits(reset, baseline)
    assert reset.limits[0].name == CONNECTION_LIMIT
    assert "18 of 48 streams did not complete (18 reset)" in reset.limits[0].evidence
    [finding] = findings([baseline, step(10), reset])
    assert (finding.kind, finding.severity, finding.at_streams) == ("connection-limit", "failure", 48)
    # The same late gaps, explained only by this client's own CPU: no finding about the path.
    busy = step(48, gap_p99_s=0.3, client_cpu_s=2.0, wall_s=2.1)
    busy.limits = own_limits(busy, baseline)
    assert [x.name for x in busy.limits] == ["client CPU (one core)"]
    assert findings([baseline, busy]) == []
    assert findings([baseline, step(10), step(48)]) == []


def test_locust_stats_become_a_step() -> None:
    """Locust's JSON (ms histograms per entry) read with the lab's nearest-rank percentiles."""
    stats = [
        {"method": "SSE", "name": "TTFT", "response_times": {"5": 8, "120": 2}, "num_requests": 10},
        {"method": "SSE", "name": "gap", "response_times": {"50": 97, "90": 3}, "num_requests": 100},
        {"method": "SSE", "name": "E2E", "response_times": {"2000": 10}, "num_requests": 10,
         "total_content_length": 110},
        {"method": "SSE", "name": "outcome: complete", "response_times": {"2000": 9}, "num_requests": 9},
        {"method": "SSE", "name": "outcome: reset", "response_times": {"3": 1}, "num_requests": 1},
    ]
    s = step_from_stats("h", 11, stats, {"reset: ConnectionResetError": 1}, 40, 20.0, 2.0,
                        wall_s=4.0, client_cpu_s=1.0)
    assert s.outcomes == {"complete": 9, "reset": 1, "timeout": 1}  # one never reported
    assert (s.ttft_p50_s, s.ttft_p99_s, s.gap_p50_s, s.gap_p99_s) == (0.005, 0.12, 0.05, 0.09)
    assert s.ttft_histogram == {"<0.1 s": 8, "<0.5 s": 2}
    assert s.delivered_tok_s == pytest.approx(10 / 0.0512)
    assert s.content_events == 110 and s.client_cpu_pct == 25.0


def test_unusable_input_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ftp://x/v1", "--json"]) == EXIT_UNUSABLE
    assert "not an http" in json.loads(capsys.readouterr().out)["error"]
    assert main(["http://127.0.0.1:9/v1", "--streams", "0", "--json"]) == EXIT_UNUSABLE
    assert main(["http://127.0.0.1:9/v1", "--ramp", "9", "--duration", "2"]) == EXIT_UNUSABLE


@pytest.fixture(scope="module")
def stand() -> Iterator[dict[str, str]]:
    """The synthetic server, and in front of it an nginx with worker_connections 64."""
    path = LoadPath("nginx-wc", "broken", "worker_connections 64", proxy="nginx",
                    overrides={"worker_processes": 1, "worker_connections": WORKER_CONNECTIONS})
    with LoadLab() as lab:
        server = lab.server(SYNTHETIC)
        with lab.proxy(path, server.port) as proxy:
            yield {"broken": proxy.url + "/v1", "direct": server.url + "/v1"}


def _run(url: str, extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
         ) -> tuple[int, dict[str, Any]]:
    status = main([url, *ARGS, *extra, "--out", str(tmp_path)])
    document = json.loads(capsys.readouterr().out)
    assert {"report.json", "report.md", "load.png"} <= {p.name for p in tmp_path.iterdir()}
    return status, document


CLIENTS = [pytest.param([], id="lab-client"), pytest.param(["--locust", "--workers", "2"], id="locust")]


@pytest.fixture(autouse=True)
def locust_when_asked(request: pytest.FixtureRequest) -> None:
    """make setup installs Locust (the extra [locust]) and the suite runs its path: missing, the
    Locust cases fail saying so, instead of a skip decided at collection."""
    client = request.node.callspec.params.get("client", []) if hasattr(request.node, "callspec") else []
    if "--locust" in client and not locust_available():
        pytest.fail("Locust is not installed: `make setup` installs it (pip install 'streamlab[locust]')")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("client", CLIENTS)
def test_names_the_proxy_connection_limit(stand: dict[str, str], client: list[str], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    status, doc = _run(stand["broken"], client, tmp_path, capsys)
    steps = {s["concurrency"]: s for s in doc["steps"]}
    assert list(steps) == [1, 10, 48]
    # The load happened: below the limit every stream streamed all its tokens.
    assert steps[10]["healthy"] and steps[10]["outcomes"] == {"complete": 10}
    assert steps[10]["content_events"] == 10 * steps[10]["tokens_per_stream"]
    assert status == EXIT_FAILURE and doc["ok"] is False
    [finding] = doc["findings"]
    assert finding["kind"] == "connection-limit" and finding["at_streams"] == 48
    assert f"of 48 streams did not complete" in finding["evidence"]
    assert 0 < steps[48]["completed"] < 48
    assert steps[48]["client_cpu_s"] > 0  # the client's own CPU is in every step
    report = (tmp_path / "report.md").read_text()
    assert CONNECTION_LIMIT in report and "at streams" in report


@pytest.mark.timeout(120)
@pytest.mark.parametrize("client", CLIENTS)
def test_a_clean_path_raises_no_alarm(stand: dict[str, str], client: list[str], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    status, doc = _run(stand["direct"], client, tmp_path, capsys)
    steps = [s["concurrency"] for s in doc["steps"]]
    assert all(s["outcomes"] == {"complete": s["concurrency"]} for s in doc["steps"])
    assert doc["findings"] == []  # no stream refused, reset or queued: no connection-limit
    if all(s["healthy"] for s in doc["steps"]):
        assert steps == [1, 10, 48]
        assert (status, doc["ok"], doc["first_limit"]) == (EXIT_OK, True, None)
    else:  # a busy shared machine can still make a step late (the run stops there, as at any
        # limit); it is never a connection limit
        assert steps == [1, 10, 48][:len(steps)], steps  # it stops at a limit, or goes on
        if doc["first_limit"] is None:  # explained by the client's own CPU: inconclusive, never ok
            assert (status, doc["ok"], doc["verdict"]) == (EXIT_UNUSABLE, False, "inconclusive"), doc
        else:
            names = [x["name"] for x in doc["first_limit"]["limits"]]
            assert CONNECTION_LIMIT not in names, names


def test_another_origin_gets_a_plain_request_and_its_own_pace_is_the_ideal() -> None:
    from labs.pathload.ramp import LoadSettings, OwnPath, run_load

    path = OwnPath("http://127.0.0.1:9/v1", LoadSettings(streams=(10, 48), duration_s=2.0))
    path.probe.origin, path.probe.model = "other", "m"
    assert "lab" not in path.body() and path.body()["max_tokens"] == 40
    rates = []

    def fake(p: OwnPath, n: int, rate: float, baseline: StepResult | None) -> StepResult:
        rates.append(rate)  # the origin streams at 10 tok/s: a 100 ms median gap
        return step(n, tokens_per_s=rate, gap_p50_s=0.1, gap_p99_s=0.11, delivered_tok_s=10.0 * n)

    result = run_load(path, step_runner=fake)
    assert rates == [20.0, 10.0, 10.0]  # asked 20; the baseline measured 10
    assert [s.concurrency for s in result.steps] == [1, 10, 48]
    assert all(s.healthy and s.ideal_tok_s == 10.0 * s.concurrency for s in result.steps)
    path.probe.origin = "streamlab"
    assert path.body()["lab"]["tokens_per_s"] == 20.0


def _client_limited_run(last: dict[str, Any]) -> tuple[Any, Any]:
    """A canary path whose baseline and 10 streams are healthy and whose 48 streams are `last`."""
    from labs.pathload.ramp import LoadSettings, OwnPath, run_load

    path = OwnPath("http://127.0.0.1:9/v1", LoadSettings(streams=(10, 48), duration_s=2.0))
    path.probe.origin, path.probe.model = "streamlab", "m"

    def fake(p: OwnPath, n: int, rate: float, baseline: StepResult | None) -> StepResult:
        s = step(n, **(last if n == 48 else {}))
        s.limits = own_limits(s, baseline)
        return s

    return path, run_load(path, step_runner=fake)


# 48 streams whose gaps were late while this client used 95% of a core (the machine otherwise idle).
CLIENT_BOUND = dict(gap_p99_s=0.3, client_cpu_s=2.0, wall_s=2.1)


def test_a_run_limited_only_by_the_client_is_inconclusive_never_healthy() -> None:
    from labs.load import report
    from labs.pathload.cli import document
    from labs.pathload.ramp import INCONCLUSIVE, exit_status

    path, result = _client_limited_run(CLIENT_BOUND)
    assert [x.name for x in result.steps[-1].limits] == ["client CPU (one core)"]
    assert exit_status(result.steps) == EXIT_UNUSABLE  # no verdict, as the CLI documents
    doc = document(path, result)
    assert (doc["ok"], doc["verdict"], doc["findings"], doc["first_limit"]) == (
        False, "inconclusive", [], None)
    assert doc["inconclusive"]["at_streams"] == 48 and doc["inconclusive"]["healthy_up_to"] == 10
    assert doc["inconclusive"]["reason"] == INCONCLUSIVE
    assert result.to_dict()["verdict"] == "inconclusive"
    at, name, evidence = report.limit_text(result)
    assert at == "48" and name.startswith("inconclusive: limited by the client")
    assert "healthy up to 10 streams" in evidence and "client CPU (one core)" in evidence
    text = report.markdown([result], {"intro": "x"})
    assert "inconclusive" in text and "every step healthy" not in text


def test_a_path_limit_beside_a_busy_client_is_still_the_paths_and_a_clean_run_is_ok() -> None:
    """The other directions: resets are the path's even with the client busy; all healthy is ok."""
    from labs.pathload.cli import document
    from labs.pathload.ramp import exit_status

    path, result = _client_limited_run({**CLIENT_BOUND, "outcomes": {"complete": 30, "reset": 18}})
    assert result.steps[-1].limits[0].name == CONNECTION_LIMIT
    doc = document(path, result)
    assert (exit_status(result.steps), doc["ok"], doc["verdict"], doc["inconclusive"]) == (
        EXIT_FAILURE, False, "limit", None)
    assert doc["first_limit"]["at_streams"] == 48
    path, result = _client_limited_run({})
    doc = document(path, result)
    assert (exit_status(result.steps), doc["ok"], doc["verdict"], doc["inconclusive"]) == (
        EXIT_OK, True, "ok", None)


def _other_origin() -> Iterator[str]:
    """An OpenAI-compatible origin that only lists its models (all --print-body asks)."""
    from http.server import BaseHTTPRequestHandler

    from tests.stub_http import serving

    class Models(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = json.dumps({"object": "list", "data": [
                {"id": "their-model", "object": "model", "owned_by": "someone-else"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serving(Models) as url:
        yield url


other_origin = pytest.fixture(_other_origin)


def test_print_body_prints_what_every_stream_sends_and_runs_nothing(
        stand: dict[str, str], other_origin: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report"
    # The canary: its lab knobs pace the stream at --rate for --duration and stamp each event.
    assert main([stand["direct"], "--print-body", "--rate", "10", "--duration", "3",
                 "--out", str(out)]) == EXIT_OK
    body = json.loads(capsys.readouterr().out)
    assert body["stream"] is True and body["max_tokens"] == 30
    assert body["lab"]["tokens_per_s"] == 10.0 and body["lab"]["stamp"] is True
    assert len(body["lab"]["script"].split()) >= 30 and body["messages"][0]["role"] == "user"
    assert not out.exists()  # printed, not run: no report, no streams
    # Another origin: an ordinary request, no lab knobs, its first listed model.
    assert main([other_origin, "--print-body", "--duration", "2"]) == EXIT_OK
    body = json.loads(capsys.readouterr().out)
    assert "lab" not in body and body["model"] == "their-model" and body["max_tokens"] == 40
    # An entry that does not answer: the body cannot be known, exit 2 with the reason.
    assert main(["http://127.0.0.1:9/v1", "--print-body"]) == EXIT_UNUSABLE


def test_locust_starts_are_spread_over_its_once_a_second_batches() -> None:
    from labs.pathload.locust_run import spawn_plan

    assert spawn_plan(300, 2.0) == (150.0, 1.0)  # two batches of 150, each spread over 1 s
    assert spawn_plan(300, 0.5) == (600.0, 0.5)  # one batch: spread over the whole ramp
    assert spawn_plan(48, 0.0) == (480.0, 0.0)  # all at once: a burst on purpose
    assert spawn_plan(1, 2.0) == (0.5, 2.0)
