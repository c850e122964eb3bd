"""The MCP origin's replicas in containers (proxies.runtime.docker_mcp): the same Replicas handle as
the local runtime's, each replica its own container of the mcp image, on the SDK line asked for,
every one gone afterwards. The scenarios' guards in containers are tests/test_mcp_scenarios.py's."""
from __future__ import annotations

import os
import urllib.request
from pathlib import Path

import pytest

from proxies.runtime import docker_mcp, get_runtime
from proxies.runtime.dockercli import docker, docker_bin
from proxies.runtime.images import ImageMissing
from server.mcp.knobs import OriginKnobs
from server.mcp.sdks import SDK_LINES
from server.processes import port_accepts
from tests.runtimes import require_images


@pytest.fixture(scope="module")
def mcp_image(docker_engine: None) -> str:
    return require_images(("mcp",))["mcp"]


def _containers() -> set[str]:
    """This process's replica containers (a worker beside it may run replicas of its own)."""
    listed = docker(["ps", "--all", "--quiet", "--no-trunc", "--filter", "label=streamlab.kind=mcp",
                     "--filter", f"label=streamlab.pid={os.getpid()}"])
    return set(listed.stdout.split())


def test_two_replicas_on_mcp_1_30_run_in_containers_and_are_gone_after(mcp_image: str) -> None:
    assert not _containers()
    with get_runtime("docker").run_mcp_replicas(2, OriginKnobs(), sdk="1.30") as replicas:
        ours = _containers()
        # One container per replica, each started from the 1.30 line's interpreter (its venv).
        entrypoints = {docker(["inspect", "--format", "{{.Path}}", cid]).stdout.strip() for cid in ours}
        assert len(ours) == 2 and entrypoints == {str(SDK_LINES["1.30"].python)}
        for replica, port in enumerate(replicas.ports):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
                assert response.status == 200
            assert replicas.processes[replica].argv[:2] == [docker_bin(), "run"]
        assert replicas.requests() == []  # both answer their records; nothing was sent to /mcp
    assert not _containers()
    assert not any(port_accepts(port) for port in replicas.ports)


def test_an_image_without_the_sdk_line_is_refused_saying_what_to_build(monkeypatch: pytest.MonkeyPatch) -> None:
    labels = {"streamlab.mounts": str(Path(__file__).resolve().parents[2]),
              "streamlab.sdks": f"2.3={SDK_LINES['2.3'].python}"}
    monkeypatch.setattr(docker_mcp, "offline_server_labels", lambda image: labels)
    monkeypatch.setattr(docker_mcp, "offline_server_built_here", lambda image: True)
    args = docker_mcp.replica_run_args("streamlab/mcp:host", "n", "2.3", ["-m", "server.mcp"])
    assert args[args.index("--entrypoint") + 1] == str(SDK_LINES["2.3"].python)
    with pytest.raises(ImageMissing, match=r"carries no mcp 1\.30 .*offline_images mcp"):
        docker_mcp.replica_run_args("streamlab/mcp:host", "n", "1.30", ["-m", "server.mcp"])
