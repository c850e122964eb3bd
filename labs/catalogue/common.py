"""Knobs several scenarios share, named once."""
from __future__ import annotations

# Concurrency scenarios are about the proxy's limits, not the model: the synthetic engine emits the
# same scripted tokens without a forward pass, so 60 streams starting at once all get their first
# token on time (the tiny model prefills new requests one after another, ~8 ms each, which would
# blur TTFT), and enough slots that the server never queues.
MANY_STREAMS_SERVER = ("--engine", "synthetic", "--slots", "256", "--max-queue", "256")
