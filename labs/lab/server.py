"""The lab's model server as a product talks to it: what it is asked to stream by default, which
model it serves, and when it has finished everything it was asked (clients that left included)."""
from __future__ import annotations

import json
import time
import urllib.request
from typing import TYPE_CHECKING

from server.processes import wait_until

if TYPE_CHECKING:  # the scenario's model and the probe read the defaults: no launcher for them
    from server.launcher import ServerHandle

# An English script made of short ASCII words: with the lab's byte-level BPE every token decodes to
# text on its own, so one token is one SSE event and the event count is known in advance.
DEFAULT_SCRIPT = "Every token should reach the reader the moment the model makes it."
# The pace a stream is asked for unless it says otherwise: one event every 100 ms.
DEFAULT_TOKENS_PER_S = 10.0
# Gauges that say the server still works on something (a generation for a client that left).
BUSY_GAUGES = ("streamlab_active_streams", "streamlab_slots_in_use", "streamlab_queued_requests")


def served_model(url: str) -> str:
    """The model the server at `url` serves (the `model` every request body names)."""
    with urllib.request.urlopen(url + "/v1/models", timeout=5) as response:
        return json.load(response)["data"][0]["id"]


def wait_idle(server: ServerHandle, timeout_s: float) -> float | None:
    """Poll until the server has finished everything, including work for clients that left.

    Returns the seconds it took (None if it was still busy after `timeout_s`): right after a
    client disconnects on purpose, this is how long the server kept generating for nobody.
    """
    started = time.monotonic()

    def idle() -> bool:
        metrics = server.metrics()
        return all(metrics.get(name, 0.0) == 0.0 for name in BUSY_GAUGES)
    try:
        wait_until(idle, timeout_s, interval_s=0.01, describe="the server to go idle")
    except TimeoutError:
        return None
    return time.monotonic() - started
