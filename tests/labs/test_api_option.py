"""`--api` on every tool: parsed, refused with one line naming the choices, and used (the path the
streams go to, the body they send, how their events are read). No stream runs here: each tool's
measuring call is replaced by one that records what it was given."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from labs.client import cli as client_cli
from labs.client.apis import API_NAMES
from labs.findings import UnusableInput
from labs.pathload import cli as load_cli
from labs.pathload.ramp import LoadSettings, OwnPath
from labs.probe import cli as probe_cli
from labs.probe import knobs
from labs.probe.path import Path as ProbePath
from labs.scenario.model import Variant, Workload
from labs.scenario.runner import request_body
from labs.verify import cli as verify_cli
from labs.verify.model import RouteWanted
from labs.verify.trials import Target

BASE = "http://127.0.0.1:1/v1"
TOOLS: dict[str, Callable[[list[str]], int]] = {
    "client": lambda argv: client_cli.main([*argv, "http://127.0.0.1:1/v1/messages"]),
    "probe": lambda argv: probe_cli.main([*argv, BASE]),
    "load": lambda argv: load_cli.main([*argv, BASE]),
    "verify": lambda argv: verify_cli.main([*argv, "nginx.conf"]),
}


@pytest.mark.parametrize("tool", TOOLS)
def test_an_unknown_api_is_exit_2_naming_the_choices(tool: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        TOOLS[tool](["--api", "foo"])
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.endswith("--api: invalid choice: 'foo' (choose from 'chat', 'responses', 'messages')")


def test_the_client_cli_sends_the_protocols_body_to_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    async def run_many(url: str, bodies: list[dict[str, Any]], concurrency: int, deadline: Any, **options: Any):
        seen.update(url=url, body=bodies[0], options=options)
        raise SystemExit(0)

    monkeypatch.setattr(client_cli, "run_many", run_many)
    with pytest.raises(SystemExit):
        client_cli.main(["--api", "responses", "--max-tokens", "5"])
    assert seen["url"] == "http://127.0.0.1:8000/v1/responses"
    assert seen["body"]["max_output_tokens"] == 5 and seen["body"]["input"][0]["role"] == "user"
    assert seen["options"]["api"] == "responses"


def test_probe_and_verify_pass_the_api_on(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def probe_path(urls: list[str], **options: Any) -> Any:
        raise UnusableInput(f"probe saw api={options['api']}")

    def verify_config(file: Any, **options: Any) -> Any:
        raise UnusableInput(f"verify saw api={options['wanted'].api}")

    monkeypatch.setattr("labs.probe.run.probe_path", probe_path)
    monkeypatch.setattr("labs.verify.run.verify_config", verify_config)
    assert probe_cli.main(["--api", "messages", BASE]) == 2
    assert verify_cli.main(["--api", "responses", "nginx.conf"]) == 2
    said = capsys.readouterr()
    assert "probe saw api=messages" in said.err and "verify saw api=responses" in said.out + said.err


@pytest.mark.parametrize("api", API_NAMES)
def test_the_probes_streams_speak_the_api(api: str) -> None:
    path = ProbePath.from_args([BASE], api=api, environ={"KEY": "k"}, api_key_env="KEY")
    tail = {"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}[api]
    assert path.completions(0) == BASE + tail and path.client_options()["api"] == api
    assert ("x-api-key" in path.headers()) == (api == "messages")
    body = knobs.stream_body("tiny", api)
    assert body["lab"]["script"] == knobs.STREAM_KNOBS["script"]
    assert ("input" in body) == (api == "responses") and ("messages" in body) == (api != "responses")


def test_the_probe_refuses_an_unknown_api_as_unusable_input() -> None:
    with pytest.raises(UnusableInput, match="choose one of chat, responses, messages"):
        ProbePath.from_args([BASE], api="foo")


def test_load_streams_speak_the_api() -> None:
    path = OwnPath(BASE, LoadSettings(api="messages"))
    assert path.completions == BASE + "/messages"
    assert path.body()["max_tokens"] == path.tokens() and "anthropic-version" in path.headers()


def test_load_with_locust_refuses_another_api(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_cli.main(["--api", "messages", "--locust", BASE]) == 2
    assert "--locust streams chat only" in capsys.readouterr().err


def test_verify_looks_for_the_protocols_route_and_sends_its_body() -> None:
    assert RouteWanted().paths[0] == "/v1/chat/completions"
    paths = RouteWanted(api="messages").paths
    assert paths[:3] == ("/v1/messages", "/api/messages", "/api/v1/messages")
    assert RouteWanted(path="/x", api="messages").paths == ("/x",)
    target = Target("http://127.0.0.1:1", None, "tiny", None, api="responses")  # type: ignore[arg-type]
    body = target.body({"stamp": True}, prompt="Stream 3: hi", max_tokens=9)
    assert body["input"] == [{"role": "user", "content": "Stream 3: hi"}] and body["max_output_tokens"] == 9
    assert body["lab"]["stamp"] is True


@pytest.mark.parametrize("api", API_NAMES)
def test_a_scenarios_workload_names_its_api(api: str) -> None:
    body = request_body(Workload(api=api, request={"temperature": 0}), Variant(lab={"stamp": True}), "tiny")
    limit = "max_output_tokens" if api == "responses" else "max_tokens"
    assert body[limit] == 1024 and body["temperature"] == 0 and body["lab"]["stamp"] is True
    assert Workload().api == "chat"


# A stand-in for the probe package: it reports the api the plugin passed as the reason it could not probe.
FAKE_PROBE = """
import sys, types
from labs.findings import UnusableInput

def probe_path(urls, **options):
    raise UnusableInput(f"probe saw api={options['api']}")

module = types.ModuleType("labs.probe")
module.CHECK_NAMES = ("buffering",)
module.probe_path = probe_path
sys.modules["labs.probe"] = module
"""


def test_the_pytest_plugin_takes_stream_api(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(FAKE_PROBE)
    result = pytester.runpytest_subprocess(f"--stream-url={BASE}", "--stream-api=messages")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the path cannot be probed: probe saw api=messages*"])
    refused = pytester.runpytest_subprocess(f"--stream-url={BASE}", "--stream-api=foo")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--stream-api: invalid choice: 'foo' (choose from 'chat', 'responses', 'messages')"])
