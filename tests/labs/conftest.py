"""The measuring client's tests run against the fake upstream (labs.fakes), shared by the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from labs.client.agents import AGENT_SERVER
from labs.fakes.upstream import FakeUpstream, fake_upstream
from server.launcher import ServerHandle, running_server

BODY = {"model": "tiny", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="session")
def upstream() -> Iterator[FakeUpstream]:
    with fake_upstream() as running:
        yield running


@pytest.fixture(scope="session")
def agent_server() -> Iterator[ServerHandle]:
    """The lab's server as the coding agents need it (labs.client.agents.AGENT_SERVER: their
    prompts need a 16,384-token context), serving the model name `tiny`."""
    with running_server([*AGENT_SERVER, "--served-model-name", "tiny"]) as handle:
        yield handle
