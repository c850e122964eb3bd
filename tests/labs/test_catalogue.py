"""Every catalogue declaration, checked in seconds, without running a scenario.

- Every body a variant sends (workload and variant merged, and each body a driver derives from
  it) validates against the server's own request schema for the workload's protocol, and every
  client option is one the measuring client knows: a typo'd `lab` key fails here, not in a
  guard. A browser driver's streams are recorded as the page would send them (a POST body, or EventSource's GET with the
  body in `?request=`, read back by the server's own GET parsing), and its options are the
  measuring client's or the browser client's own.
- Every hop's settings render and pass the proxy's own check (its kind's `check`: `nginx -t`,
  `haproxy -c`, ...), and no variant configures a proxy that is not on its path.
- Both variants run the server with the same HTTP protocol (`--http`): a fix's server flags
  replace the broken variant's, and one that drops `--http h11` would measure another framing.
- Each scenario's checks on hand-made runs: tests/labs/test_catalogue_checks.py.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Mapping
from unittest import mock
from urllib.parse import urlsplit

import pytest
from pydantic import ValidationError
from starlette.requests import Request

from labs import catalogue, client
from labs.client import libraries as libclients
from labs.client import Options
from labs.client.libraries import UnknownLibrary, check_library
from labs.client.results import StreamResult
from labs.findings import UnusableInput
from labs.scenario.manifest_hop import ManifestMismatch, prepared
from labs.scenario import runner
from labs.scenario.runner import drive, request_body
from labs.lab.hops import hop_kind, hop_settings
from labs.scenario.model import VARIANTS, Scenario, Since, Variant, VariantName
from labs.scenario import chromium
from labs.scenario.browser_spec import BROWSER_ONLY, PageRequest, page_request
from proxies.apps import is_app
from proxies.kinds import KINDS
from proxies.validation import ConfigInvalid, validate
from server.http.event_source import body_from_query
from labs.client.agents import AGENTS
from server.apis.table import APIS, CHAT
from tests.ids import other_id

SCENARIOS = [pytest.param(scenario, id=other_id(scenario.name)) for scenario in catalogue.SCENARIOS]
URL = "http://127.0.0.1:9/v1/chat/completions"  # never contacted: the client is replaced


def body_the_server_reads(request: PageRequest) -> bytes:
    """The JSON the server parses from a page's request: a POST's body, or a GET's `request`
    query parameter as the server's EventSource route reads it."""
    if request.method == "POST":
        return (request.body or "").encode()
    parts = urlsplit(request.url)
    scope = {"type": "http", "method": "GET", "path": parts.path, "query_string": parts.query.encode(),
             "headers": [(b"sec-fetch-site", b"same-origin")]}
    return body_from_query(Request(scope), ())


# A stream a workload would start: the body, and the measuring client's options (None for a
# browser's stream, whose options request_problems checks against both clients' own).
Sent = tuple[Mapping[str, Any], "dict[str, Any] | None"]


@contextlib.contextmanager
def recorded_sends(pauses: list[float] | None = None) -> Iterator[list[Sent]]:
    """Replace the measuring client and the browser: each stream a workload would start is
    recorded, not sent. A driver's pacing (asyncio.sleep) is recorded into `pauses` and not
    waited out: the race scenarios pace 288 and 216 requests 0.25 s apart per variant, which
    made this check wait 143 s and 107 s for nothing it reads."""
    sent: list[Sent] = []
    real_sleep = asyncio.sleep

    async def paced(seconds: float, result: Any = None) -> Any:
        if pauses is not None:
            pauses.append(seconds)
        await real_sleep(0)  # still a turn of the loop, as a real pause is
        return result

    async def one(url: str, body: Mapping[str, Any], **options: Any) -> StreamResult:
        sent.append((body, options))
        return StreamResult(url=url)

    async def many(url: str, bodies: list[Mapping[str, Any]], concurrency: int, **options: Any) -> list[StreamResult]:
        return [await one(url, body, **options) for body in bodies]

    async def in_the_browser(url: str, spec: Mapping[str, Any], streams: int = 1,
                             concurrency: int = 1) -> list[dict[str, Any]]:
        request = page_request(spec)
        for _ in range(streams):
            sent.append((json.loads(body_the_server_reads(request)), None))
        return [{"url": url} for _ in range(streams)]

    async def library(name: str, url: str, body: Mapping[str, Any],
                      headers: Mapping[str, str] | None = None, **options: Any) -> StreamResult:
        sent.append((body, {"library": name, **({"headers": headers} if headers else {}), **options}))
        return StreamResult(url=url)

    async def agent(name: str, url: str, body: Mapping[str, Any], settings: Any = None,
                    server_url: Any = None) -> StreamResult:
        sent.append((body, {"agent": name, "agent_settings": settings or {}}))
        return StreamResult(url=url)

    with mock.patch.object(client, "measure_stream", one), mock.patch.object(client, "measure_many", many), \
            mock.patch.object(runner, "measure_agent", agent), \
            mock.patch.object(chromium, "run_streams", in_the_browser), \
            mock.patch.object(libclients, "measure_stream", library), \
            mock.patch.object(asyncio, "sleep", paced):
        yield sent


def request_problems(scenario: Scenario, variant_name: VariantName) -> list[str]:
    """What the server's schema, or the client, would reject in what this variant sends."""
    variant = scenario.variant(variant_name)
    options = {**scenario.workload.client, **variant.client}
    api = APIS[scenario.workload.api]
    with recorded_sends() as sent:
        asyncio.run(drive(URL.removesuffix(CHAT.path) + api.path, request_body(scenario.workload, variant, "tiny"),
                          scenario.workload, options))
    problems = []
    for body, opts in sent:
        try:
            api.request.model_validate(body)
        except ValidationError as exc:
            problems.append(f"{variant_name} body: {exc}")
        # A browser's options: the measuring client's (the page applies those it can) or its own.
        client_options = opts if opts is not None else {
            name: value for name, value in options.items() if name not in BROWSER_ONLY}
        try:
            client_options = dict(client_options)
            if "agent" in client_options:  # it takes its own settings, all strings (labs.client.agents)
                agent, settings = AGENTS[client_options.pop("agent")], client_options.pop("agent_settings", {})
                assert agent.api == api.name and all(isinstance(v, str) for v in settings.values()), agent
            if "library" in client_options:
                library = client_options.pop("library")
                client_options.pop("headers", None)
                check_library(library, client_options)
                client_options = {}
            Options(**client_options)
        except (TypeError, UnknownLibrary, KeyError, AssertionError) as exc:
            problems.append(f"{variant_name} client options: {exc}")
    return problems or ([] if sent else [f"{variant_name}: the workload sends no request"])


def hop_problems(scenario: Scenario, variant_name: VariantName) -> list[str]:
    """What a hop's settings model, or its proxy's binary, would reject in this variant."""
    variant = scenario.variant(variant_name)
    problems = [f"{variant_name}: settings for {proxy}, which is not on the path {scenario.path}"
                for proxy in variant.proxy if proxy not in scenario.path]
    if variant.manifest is not None:
        return problems + _manifest_problems(scenario, variant_name)
    for proxy in scenario.path:
        try:
            settings = hop_settings(proxy, variant.proxy.get(proxy, {}), scenario.base)
            if not is_app(hop_kind(proxy)):  # an app's settings are validated by its model alone
                validate(settings)
        except (ValidationError, ConfigInvalid) as exc:
            problems.append(f"{variant_name} {proxy}: {exc}")
    return problems


def _manifest_problems(scenario: Scenario, variant_name: VariantName) -> list[str]:
    """A variant declared as manifests: one proxy, and a translation its binary accepts after the
    rewrite to loopback (exactly what the lab runs)."""
    if len(scenario.path) != 1:
        return [f"{variant_name}: a manifest stands for one proxy's config, the path has {scenario.path}"]
    with tempfile.TemporaryDirectory() as folder:
        try:
            prepared(scenario.path[0], scenario.variant(variant_name).manifest or "", 9, "local", Path(folder))
        except (ManifestMismatch, UnusableInput) as exc:
            return [f"{variant_name} manifest: {exc}"]
    return []


# ---- the declarations ------------------------------------------------------------------------

@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_request_validates_against_the_server_schema(scenario: Scenario) -> None:
    problems = [p for name in VARIANTS for p in request_problems(scenario, name)]
    assert not problems, "\n".join(problems)


def framing(server_args: tuple[str, ...]) -> str:
    """The server's HTTP protocol under these flags (`--http`; uvicorn's httptools by default)."""
    args = list(server_args)
    return args[args.index("--http") + 1] if "--http" in args else "httptools"


def framing_problems(scenario: Scenario) -> list[str]:
    """A fix's server flags replace the broken variant's: one that drops `--http h11` measures a
    chunked reply, which nginx forwards buffering or not (docs/field-notes.md, nginx)."""
    broken, fixed = (framing(tuple(scenario.variant(name).server_args)) for name in VARIANTS)
    return [] if broken == fixed else [f"{scenario.name}: broken answers {broken}, fixed {fixed}"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_both_variants_answer_with_the_same_framing(scenario: Scenario) -> None:
    assert not framing_problems(scenario)


def test_a_fix_that_drops_the_framing_is_caught() -> None:
    scenario = catalogue.get("nginx-accel-header")
    assert framing(tuple(scenario.broken.server_args)) == "h11"
    dropped = dataclasses.replace(scenario, fix=Variant(server_args=("--omit-header", "X-Accel-Buffering")))
    assert framing_problems(dropped) == ["nginx-accel-header: broken answers h11, fixed httptools"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_hop_renders_and_passes_its_proxy_check(scenario: Scenario) -> None:
    problems = [p for name in VARIANTS for p in hop_problems(scenario, name)]
    assert not problems, "\n".join(problems)


def test_a_driver_s_pacing_is_recorded_not_waited_out() -> None:
    """The schema check skips the race scenarios' pauses; the driver still makes each one."""
    from labs.catalogue.nginx_upstream import RACE_KEEPALIVE_S, RACE_OFFSETS_S, RACE_REQUESTS

    race = catalogue.get("upstream-keepalive-race")
    pauses: list[float] = []
    started = time.monotonic()
    with recorded_sends(pauses) as sent:
        asyncio.run(drive(URL, request_body(race.workload, race.variant("broken"), "tiny"),
                          race.workload, race.workload.client))
    waited = time.monotonic() - started
    assert len(sent) == RACE_REQUESTS and len(pauses) == RACE_REQUESTS - 1
    assert pauses[:len(RACE_OFFSETS_S)] == [pytest.approx(RACE_KEEPALIVE_S + o) for o in RACE_OFFSETS_S[1:]
                                            + RACE_OFFSETS_S[:1]]
    # 287 pauses of ~0.25 s were declared (72 s); the check took a small part of one.
    assert sum(pauses) > 250 * RACE_KEEPALIVE_S and waited < sum(pauses) / 10
    plain: list[float] = []
    with recorded_sends(plain):
        request_problems(catalogue.get("nginx-buffering"), "broken")
    assert not plain  # a workload without a driver's pacing records none


def test_a_typo_in_a_lab_key_is_caught() -> None:
    scenario = catalogue.get("nginx-read-timeout")
    typo = dataclasses.replace(scenario, fix=Variant(lab={"heartbeat_S": 0.25}))
    problems = request_problems(typo, "fixed")
    assert problems and "lab.heartbeat_S" in problems[0]
    assert not request_problems(typo, "broken")  # only the variant with the typo


def test_a_typo_in_a_driver_body_is_caught() -> None:
    from labs.catalogue.drivers import one_after_another

    scenario = catalogue.get("server-stop-holdback")
    workload = dataclasses.replace(scenario.workload, driver=one_after_another({"lab": {"scirpt": "x"}}))
    problems = request_problems(dataclasses.replace(scenario, workload=workload), "broken")
    assert problems and "lab.scirpt" in problems[0]


def test_a_browser_driver_sends_what_the_page_would_and_its_typos_are_caught() -> None:
    scenario = catalogue.get("browser-eventsource-reconnect")
    with recorded_sends() as sent:
        variant = scenario.variant("fixed")
        asyncio.run(drive(URL, request_body(scenario.workload, variant, "tiny"), scenario.workload,
                          {**scenario.workload.client, **variant.client}))
    # EventSource's GET, read back as the server reads it: the whole body, knobs included.
    assert len(sent) == scenario.workload.streams and sent[0][0]["lab"]["event_ids"] is True
    typo = dataclasses.replace(scenario, fix=Variant(lab={"event_idz": True}))
    assert any("lab.event_idz" in p for p in request_problems(typo, "fixed"))
    assert not request_problems(typo, "broken")
    option = dataclasses.replace(scenario, fix=Variant(client={"decodr": "naive"}))
    assert any("decodr" in p for p in request_problems(option, "fixed"))


def test_an_eventsource_request_survives_the_query_string() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "𠮷 & = ? % + #"}]}
    request = page_request({"url": URL, "body": body, "api": "eventsource"})
    assert request.method == "GET" and request.body is None and "#" not in request.url
    assert json.loads(body_the_server_reads(request)) == body
    posted = page_request({"url": URL, "body": body})
    assert posted.method == "POST" and json.loads(body_the_server_reads(posted)) == body
    # page_request is client.js's construction, in Python: the page builds the same URL.
    assert '"?request=" + encodeURIComponent(JSON.stringify(spec.body))' in chromium.CLIENT_JS.read_text()


def test_a_typo_in_a_client_option_is_caught() -> None:
    scenario = catalogue.get("client-read-timeout")
    typo = dataclasses.replace(scenario, fix=Variant(client={"read_timeout": 10.0}))
    assert any("read_timeout" in p for p in request_problems(typo, "fixed"))


def test_an_unknown_client_library_or_app_setting_is_caught() -> None:
    scenario = catalogue.get("client-requests-iter-lines")
    typo = dataclasses.replace(scenario, fix=Variant(client={"library": "httpx-iterlines"}))
    assert any("httpx-iterlines" in p for p in request_problems(typo, "fixed"))
    scenario = catalogue.get("gunicorn-sync-timeout")
    bad = dataclasses.replace(scenario, fix=Variant(proxy={"gunicorn": {"worker_klass": "gthread"}}))
    assert any("worker_klass" in p for p in hop_problems(bad, "fixed"))
    assert not hop_problems(scenario, "fixed")


def test_a_setting_the_proxy_binary_rejects_is_caught() -> None:
    # A well-formed nginx time that nginx itself refuses (it overflows nginx's time type).
    scenario = catalogue.get("nginx-read-timeout")
    bad = dataclasses.replace(scenario, fix=Variant(proxy={"nginx": {"proxy_read_timeout": "999999999y"}}))
    problems = hop_problems(bad, "fixed")
    assert problems and "nginx rejected the config" in problems[0] and "proxy_read_timeout" in problems[0]
    assert not hop_problems(bad, "broken")


def test_an_unknown_or_misplaced_proxy_setting_is_caught() -> None:
    scenario = catalogue.get("haproxy-timeout-server")
    typo = dataclasses.replace(scenario, fix=Variant(proxy={"haproxy": {"timeout_sever": "10s"}}))
    assert any("timeout_sever" in p for p in hop_problems(typo, "fixed"))
    stray = dataclasses.replace(scenario, fix=Variant(proxy={"nginx": {"proxy_buffering": False}}))
    assert any("not on the path" in p for p in hop_problems(stray, "fixed"))



def since_problems(scenario: Scenario) -> list[str]:
    """What is wrong with a scenario's `since`: each names a proxy kind on its path with more than
    one release, and a version after the oldest release's series and not after the current one's
    (its guards then run on both; a version outside them names no change the lab can show)."""
    problems = []
    for change in scenario.since:
        releases = KINDS[change.proxy].releases if change.proxy in KINDS else ()
        if change.proxy not in map(hop_kind, scenario.path) or len(releases) < 2:
            problems.append(f"{change.proxy}: not a proxy on the path with more than one release")
            continue
        if change.reached_by(releases[0].series) or not change.reached_by(releases[-1].series):
            problems.append(f"{change.proxy} {change.version}: not after {releases[0].series} "
                            f"and up to {releases[-1].series}")
    return problems


@pytest.mark.parametrize("scenario", [param for param in SCENARIOS if param.values[0].since])
def test_every_since_names_a_proxy_on_the_path_and_a_version_between_its_releases(scenario: Scenario) -> None:
    assert not since_problems(scenario)


@pytest.mark.parametrize(("proxy", "version", "wrong"), [
    ("nginx", "1.29.7", None), ("nginx", "1.30", None), ("nginx", "1.30.6", None),
    ("nginx", "1.22.5", "not after"), ("nginx", "1.31.0", "not after"), ("nginx", "1.9.13", "not after"),
    ("haproxy", "2.8", "not a proxy on the path"), ("apache", "2.4", "not a proxy on the path"),
    ("envoy", "1.40", "not a proxy on the path")])
def test_a_since_off_the_path_or_outside_the_releases_is_caught(proxy: str, version: str, wrong: str | None) -> None:
    scenario = dataclasses.replace(catalogue.get("nginx-read-timeout"), path=("nginx", "apache"),
                                   since=(Since(proxy, version, "a change"),))
    problems = since_problems(scenario)
    assert (wrong is None and not problems) or (wrong is not None and wrong in problems[0]), problems


@pytest.mark.parametrize(("version", "series", "reached"), [
    ("1.29.7", "1.30", True), ("1.29.7", "1.29", True), ("1.29.7", "1.22", False), ("2.9.0", "2.11", True),
    ("2.9.0", "2.6", False), ("2.9", "3.2", True), ("1.23.0", "1.22", False)])
def test_a_release_reaches_a_since_by_its_series(version: str, series: str, reached: bool) -> None:
    """Series by series (the guards pick their expectation so): 2.11 is after 2.9, not before it."""
    assert Since("nginx", version, "a change").reached_by(series) is reached
