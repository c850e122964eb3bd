"""The measuring client's tests run against the fake upstream (labs.fakes), shared by the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from labs.fakes.upstream import FakeUpstream, fake_upstream

BODY = {"model": "tiny", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="session")
def upstream() -> Iterator[FakeUpstream]:
    with fake_upstream() as running:
        yield running
