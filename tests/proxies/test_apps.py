"""The app hops (proxies/apps): settings that refuse nonsense, the launch each runtime runs, and
every app started, streaming a real answer, and stopped by PID (or container) in both runtimes."""
from __future__ import annotations

import asyncio
import json
import socket
import urllib.request
from unittest import mock

import pytest
from pydantic import ValidationError

from labs.client import measure_stream
from proxies.apps import APP_NAMES, app_settings
from proxies.apps.gunicorn.settings import GunicornSettings
from proxies.apps.kinds import launch
from proxies.apps.litellm.kind import LITELLM_KEY
from proxies.apps.litellm.settings import LitellmSettings
from proxies.apps.nextjs.build import NEXT_PLACEHOLDER, NEXT_RUNS
from proxies.apps.relay.settings import RelaySettings
from proxies.apps.relay.tcp_relay import downgrade
from proxies.runtime import get_runtime
from proxies.runtime import docker_apps
from proxies.runtime.apps import RunningApp, prepared
from proxies.runtime.base import Runtime
from server.launcher import ServerHandle
from server.processes import free_port, port_accepts
from tests.runtimes import RUNTIMES, group_members, require_images


@pytest.fixture(scope="module", params=RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> Runtime:
    if request.param == "docker":
        require_images(["apps"])
    return get_runtime(request.param)


@pytest.fixture(scope="module")
def server(synthetic_server: ServerHandle) -> ServerHandle:
    return synthetic_server  # shared by the session (tests/conftest.py)


def body_for(server: ServerHandle, **lab: object) -> dict[str, object]:
    with urllib.request.urlopen(server.url + "/v1/models", timeout=5) as response:
        model = json.load(response)["data"][0]["id"]
    return {"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}],
            "lab": {"script": "Every token counts.", "tokens_per_s": 50, **lab}}


# ---- settings and launch -----------------------------------------------------------------------

def test_settings_refuse_what_the_app_would_misread() -> None:
    with pytest.raises(ValidationError, match="gthread"):
        GunicornSettings(threads=8)  # gunicorn would quietly switch to gthread
    with pytest.raises(ValidationError, match="min <= max"):
        RelaySettings(split=(40, 1))
    with pytest.raises(ValidationError, match="forward 'fetch' only"):
        app_settings("express").with_(forward="response-hook", abort_on_close=True)
    with pytest.raises(ValidationError, match="worker_klass"):
        app_settings("gunicorn").with_(worker_klass="gthread")
    with pytest.raises(ValueError, match="known: express"):
        app_settings("flask")


def test_a_launch_shows_what_runs(tmp_path) -> None:
    shown = launch(app_settings("gunicorn").with_(listen_port=4001, upstream_port=4002), tmp_path).shown()
    assert "STREAMLAB_UPSTREAM=http://127.0.0.1:4002" in shown
    assert "--bind 127.0.0.1:4001 --worker-class sync --workers 1 --timeout 30" in shown


def test_litellm_pings_only_when_asked(tmp_path) -> None:
    quiet = launch(LitellmSettings(upstream_port=4002), tmp_path)
    config = json.loads(quiet.files["litellm.yaml"])
    assert "litellm_settings" not in config and config["general_settings"]["master_key"] == LITELLM_KEY
    assert quiet.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"  # no cost map from the network
    pinging = json.loads(launch(LitellmSettings(keepalive_ping_s=1.0), tmp_path).files["litellm.yaml"])
    assert pinging["litellm_settings"] == {"sse_keepalive_ping_interval_seconds": 1.0}
    to_chat = json.loads(launch(LitellmSettings(messages_upstream="chat"), tmp_path).files["litellm.yaml"])
    assert to_chat["litellm_settings"] == {"use_chat_completions_url_for_anthropic_messages": True}
    assert quiet.warm_up_paths == ("/v1/chat/completions", "/v1/messages")  # each route's own imports


def test_a_container_mounts_the_side_folder_its_kind_made() -> None:
    """The folder a kind writes outside its work folder (Next.js's dist) is made before the start,
    mounted writable in the container, and removed after."""
    settings = app_settings("nextjs").with_(listen_port=4001, upstream_port=4002)
    with prepared(settings, None, "docker") as app, \
            mock.patch.object(docker_apps, "offline_server_built_here", lambda image: True), \
            mock.patch.object(docker_apps, "offline_server_labels", lambda image: {}):
        assert app.side_folder is not None and app.side_folder.is_dir()
        args = docker_apps.app_run_args(app, "streamlab-apps", "streamlab-nextjs")
    assert f"type=bind,source={app.side_folder},target={app.side_folder}" in args
    assert not app.side_folder.exists()


def test_the_relay_downgrades_only_the_request_line() -> None:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nX-Note: HTTP/1.1\r\n\r\n"
    assert downgrade(head) == b"POST /v1/chat/completions HTTP/1.0\r\nX-Note: HTTP/1.1\r\n\r\n"


# ---- every app, in each runtime ----------------------------------------------------------------

@pytest.mark.parametrize("app", APP_NAMES)
def test_each_app_streams_a_real_answer_and_stops(runtime: Runtime, server: ServerHandle, app: str) -> None:
    settings = app_settings(app).with_(listen_port=free_port(), upstream_port=server.port)
    with runtime.run_app(settings) as running:
        assert running.pid > 0
        headers = running.launched.ready_headers or None
        # A forward proxy (Privoxy) is asked for the origin's URL, as HTTP_PROXY makes clients do.
        origin = running.forward_origin
        result = asyncio.run(measure_stream((origin or running.url) + "/v1/chat/completions",
                                            body_for(server), headers=headers, accept_encoding=None,
                                            proxy=running.url if origin else None))
        assert result.outcome == "complete" and result.text == "Every token counts.", result.error
        started = running.process
        pid = running.pid
        side_folder = running.side_folder  # a Next.js site's own build output, if its kind made one
    assert started is not None and started.process is not None and started.process.poll() is not None
    if runtime.name == "local":
        assert group_members(pid) == []  # gunicorn's workers, Next's children: all gone
    assert not port_accepts(settings.listen_port)
    # This run's folder only: another worker's Next.js site may be running beside it.
    assert side_folder is None or not side_folder.exists()


def test_the_relay_resplits_without_changing_a_byte(runtime: Runtime) -> None:
    payload = ("data: " + "東京で寿司 🧑🏿‍🚀 " * 40 + "\n\n").encode()
    with socket.create_server(("127.0.0.1", 0)) as upstream:
        port = upstream.getsockname()[1]
        settings = RelaySettings(listen_port=free_port(), upstream_port=port, split=(1, 40), seed=7)
        # Readiness asks through the relay, and this upstream is a bare socket: the port will do.
        with mock.patch.object(RunningApp, "ready", lambda self: port_accepts(self.settings.listen_port)), \
                runtime.run_app(settings):
            with socket.create_connection(("127.0.0.1", settings.listen_port), timeout=10) as client:
                client.sendall(b"GET / HTTP/1.1\r\n\r\n")
                served, _ = upstream.accept()
                while not served.recv(1024):  # the readiness probe's connection, closed at once
                    served.close()
                    served, _ = upstream.accept()
                with served:
                    served.sendall(payload)
                    served.shutdown(socket.SHUT_WR)
                    reads, got = 0, b""
                    while chunk := client.recv(65536):
                        reads, got = reads + 1, got + chunk
    assert got == payload
    assert reads > len(payload) // 200, f"{reads} reads for {len(payload)} bytes: not re-split"


def test_the_next_site_gets_the_run_upstream_not_the_placeholder(runtime: Runtime, server: ServerHandle) -> None:
    settings = app_settings("nextjs").with_(listen_port=free_port(), upstream_port=server.port)
    with runtime.run_app(settings) as running:
        assert running.side_folder == NEXT_RUNS / running.workdir.name
        manifests = list(running.side_folder.glob("*.json"))
        texts = "".join(path.read_text() for path in manifests)
        assert NEXT_PLACEHOLDER not in texts and settings.upstream in texts


# Each server kind streams only its own iterator kind; the other is consumed whole, with a warning.
DJANGO_COMBOS = [("asgi", "async", True), ("wsgi", "sync", True),
                 ("asgi", "sync", False), ("wsgi", "async", False)]


@pytest.mark.parametrize("server_kind,iterator,streams", DJANGO_COMBOS,
                         ids=[f"{s}-{i}" for s, i, _ in DJANGO_COMBOS])
def test_django_streams_only_the_iterator_its_server_iterates(server: ServerHandle, server_kind: str,
                                                              iterator: str, streams: bool) -> None:
    settings = app_settings("django").with_(listen_port=free_port(), upstream_port=server.port,
                                            server=server_kind, iterator=iterator)
    interval = 0.1
    with get_runtime("local").run_app(settings) as running:
        body = body_for(server, tokens_per_s=1 / interval, script="one two three four five six seven eight")
        result = asyncio.run(measure_stream(running.url + "/v1/chat/completions", body, accept_encoding=None))
        log = running.error_log()
    assert result.outcome == "complete" and result.text == "one two three four five six seven eight"
    assert result.ttft_s is not None and result.e2e_s is not None
    # Eight tokens paced 0.1 s apart: a streamed answer's first event leads its last by ~0.7 s, a
    # held one's by the time to write a few frames.
    lead = result.e2e_s - result.ttft_s
    warned = "StreamingHttpResponse must consume" in log
    if streams:
        assert lead >= 4 * interval and not warned, (lead, log[-400:])
    else:
        assert lead < interval and warned, (lead, log[-400:])


def test_the_hook_that_skips_event_streams_still_hooks_every_other_answer(server: ServerHandle) -> None:
    """proxy-response-hook's cure keeps the hook: a JSON answer is collected, hooked and sent with
    a Content-Length; the event stream beside it is piped, chunked, and the hook never sees it."""
    settings = app_settings("express").with_(listen_port=free_port(), upstream_port=server.port,
                                             compression="off", forward="hook-skip-sse")
    with get_runtime("local").run_app(settings) as running:
        with urllib.request.urlopen(running.url + "/v1/models", timeout=10) as response:
            assert response.headers["Content-Length"] and json.load(response)["data"]
        result = asyncio.run(measure_stream(running.url + "/v1/chat/completions", body_for(server),
                                            accept_encoding=None))
        log = running.error_log()
    assert result.outcome == "complete" and result.text == "Every token counts."
    assert "chunked" in result.headers.get("transfer-encoding", "")
    hooked = [line for line in log.splitlines() if "response hook:" in line]
    # The readiness probe asks for /v1/models too: every hooked answer is one of those.
    assert hooked and all("GET /v1/models 200" in line for line in hooked), log[-400:]

