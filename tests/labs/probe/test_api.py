"""`labs probe --api` against the lab's server directly: every check's stream in that protocol."""
from __future__ import annotations

import json

import pytest

from labs.probe import cli
from server.launcher import ServerHandle


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_probe_speaks_the_api_to_the_canary(api: str, origin: ServerHandle,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(["--api", api, "--check", "buffering", "--json", origin.url + "/v1"])
    document = json.loads(capsys.readouterr().out)
    stream = document["measurements"]["buffering"]["identity"]
    assert document["measurements"]["origin"]["api"] == api
    # The canary's 21 paced events, each read as a token of this protocol, ended by its terminal event.
    assert stream["status"] == 200 and stream["outcome"] == "complete", stream
    assert stream["content_events"] == 21 and stream["bursts"] >= 15
    assert status == 0 and document["ok"] is True
