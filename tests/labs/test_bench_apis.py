"""The bench's `apis` part (what each wire protocol costs the server): every protocol of the
server's table measured, the ratios, the target and its verdict (the measurements themselves
run in `make bench`)."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import pytest

from labs.bench import apis
from labs.bench.markdown import markdown
from labs.bench.verdicts import summary
from labs.load import StepResult
from server.apis.table import APIS

# CPU per token by protocol, us: what the fake lab's server "spends" on 24,000 tokens.
US_PER_TOKEN = {"chat": 26.0, "responses": 30.0, "messages": 25.0}


class FakeLab:
    """LoadLab's surface the part uses, recording which protocol each step spoke."""

    def __init__(self, **_: Any) -> None:
        self.steps: list[tuple[str, int]] = []

    def __enter__(self) -> FakeLab:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def server(self, spec: Any) -> Any:
        return type("Server", (), {"url": "http://127.0.0.1:1"})()

    def body(self, path: Any, tokens: int, extra_lab: Any = None, api: str = "chat") -> dict[str, Any]:
        return {"max_tokens": tokens, "lab": {"tokens_per_s": 20.0}}

    def run_step(self, path: Any, n: int, server: Any, proxy: Any, extra_lab: Any = None,
                 api: str = "chat") -> StepResult:
        self.steps.append((api, n))
        tokens = 24_000 if n == apis.STREAMS else 3 * n
        step = StepResult(path.name, n, tokens // n, 20.0, 4.0, outcomes={"complete": n})
        step.server_tokens, step.server_writes = tokens, tokens
        step.server = {"cpu_s": US_PER_TOKEN[api] * tokens / 1e6}
        return step


def test_every_protocol_of_the_servers_table_is_measured_per_token_and_per_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[FakeLab] = []

    def lab(**kwargs: Any) -> FakeLab:
        made.append(FakeLab(**kwargs))
        return made[-1]

    with measured_part(monkeypatch, lab) as result:
        assert list(result["apis"]) == list(APIS)  # from the server's table, in its order
        # The streams of each in turn, then the bursts interleaved round by round.
        assert made[0].steps == ([(name, apis.STREAMS) for name in APIS]
                                 + [(name, apis.ARRIVALS) for _ in range(apis.ROUNDS) for name in APIS])
        for name, row in result["apis"].items():
            assert row["path"] == APIS[name].path
            assert row["server_cpu_us_per_token"] == pytest.approx(US_PER_TOKEN[name])
            assert row["ratio_to_chat"] == pytest.approx(US_PER_TOKEN[name] / US_PER_TOKEN["chat"])
            assert row["ratio_to_raw"] == pytest.approx(US_PER_TOKEN[name] / 20.0)  # 0.48 s / 24,000
            assert row["request_ratio_to_raw"] == pytest.approx(3 * US_PER_TOKEN[name] / 320.0)
            assert len(row["server_cpu_us_per_request_each"]) == apis.ROUNDS
        assert "target_met" not in result["apis"]["chat"]  # chat is the yardstick, not judged
        assert result["apis"]["responses"]["target_met"] is True  # 1.15x
        assert result["floor"]["server_cpu_us_per_token"] == pytest.approx(20.0)
    assert len(made) == 1  # one server for every protocol


@contextlib.contextmanager
def measured_part(monkeypatch: pytest.MonkeyPatch, lab: Any) -> Iterator[dict[str, Any]]:
    @contextlib.contextmanager
    def floor_server(*args: str) -> Iterator[tuple[str, int]]:
        yield "http://127.0.0.1:2/v1/chat/completions", 2

    def floor(url: str, pid: int, body: Any, streams: int, deadline_s: float) -> dict[str, Any]:
        many = streams == apis.STREAMS
        return {"events": 24_000 if many else 3 * streams, "failed": 0,
                "server_cpu_s": 0.48 if many else 0.16}

    monkeypatch.setattr(apis, "LoadLab", lab)
    monkeypatch.setattr(apis.references, "module_server", floor_server)
    monkeypatch.setattr(apis.references, "measure", floor)
    monkeypatch.setattr(apis, "wire_bytes", lambda lab, url, api: {"bytes_per_token": 100.0,
                                                                    "bytes_per_request": 500.0})
    yield apis.bench_apis(lambda message: None)


def _result(us_per_token: dict[str, float], chat_failed: int = 0) -> dict[str, Any]:
    rows = {name: {"path": APIS[name].path, "tokens": 24_000, "server_cpu_us_per_token": us,
                   "writes_per_token": 1.0, "bytes_per_token": 100.0, "bytes_per_request": 500.0,
                   "gap_p99_s": 0.06, "failed": chat_failed if name == "chat" else 0,
                   "server_cpu_us_per_request": 300.0, "ttft_p50_s": 0.2, "ttft_p99_s": 0.4,
                   "burst_failed": 0} for name, us in us_per_token.items()}
    result = {"streams": 300, "arrivals": 1000, "tokens_per_s": 20.0, "apis": rows,
              "target_ratio": apis.TARGET_RATIO_TO_CHAT,
              "floor": {"server": "raw ASGI on uvicorn", "tokens": 24_000, "failed": 0,
                        "server_cpu_us_per_token": 20.0, "server_cpu_us_per_request": 150.0}}
    apis.judge(result)
    return result


def test_a_protocol_over_the_target_is_missed_and_the_verdict_reads_it() -> None:
    assert apis.TARGET_RATIO_TO_CHAT == 1.25
    at_target = _result({"chat": 24.0, "responses": 30.0, "messages": 20.0})  # 1.25x: met
    status, lines = summary({"apis": at_target})
    assert status == 0 and lines == ["2 of 2 targets met, 0 missed, 0 not judged; 0 of 1 parts failed: exit 0"]
    text = markdown({"apis": at_target}, "python -m labs bench --only apis")
    assert "| responses | `/v1/responses` | 30.0 | 1.25x | 1.50x |" in text
    assert "| chat | `/v1/chat/completions` | 24.0 | 1.00x | 1.20x |" in text
    over = _result({"chat": 24.0, "responses": 31.0, "messages": 20.0})  # 1.29x
    status, lines = summary({"apis": over})
    assert status == 1 and "missed: apis responses: CPU per token / chat's" in lines
    assert "<= 1.25x chat: **miss**" in markdown({"apis": over}, "x")


def test_without_a_usable_chat_figure_the_verdict_is_skipped_never_a_pass() -> None:
    result = _result({"chat": 24.0, "responses": 24.0, "messages": 24.0}, chat_failed=3)
    assert all(result["apis"][name]["target_met"] is None for name in ("responses", "messages"))
    status, lines = summary({"apis": result})
    assert status == 2 and "skipped (could not be judged): apis messages: CPU per token / chat's" in lines
    assert "skipped: chat gave no usable figure in this run" in markdown({"apis": result}, "x")
