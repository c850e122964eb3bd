"""Knobs and checks several scenarios share, named once."""
from __future__ import annotations

from labs.scenario import checks
from labs.scenario.model import Check

# Concurrency scenarios are about the proxy's limits, not the model: the synthetic engine emits the
# same scripted tokens without a forward pass, so 60 streams starting at once all get their first
# token on time (the tiny model prefills new requests one after another, ~8 ms each, which would
# blur TTFT), and enough slots that the server never queues.
MANY_STREAMS_SERVER = ("--engine", "synthetic", "--slots", "256", "--max-queue", "256")
NGINX_READ = "nginx's proxy_read_timeout"  # the idle timeout in front of a hop, as the checks name it


def pings_lost_to(timeout_s: float, what: str) -> tuple[Check, ...]:
    """A hop dropped or sat on the server's heartbeats, and the idle timeout `what` in front of it
    cut the stream in the silence: the symptom checks every such scenario shares."""
    return (checks.heartbeats_dropped(), checks.cut_after_silence(timeout_s, what),
            checks.finding("idle-timeout"))


def pings_kept_through(timeout_s: float, what: str) -> tuple[Check, ...]:
    """The heartbeats (the server's or a hop's own) reached the client through a silence that
    outlasted the broken timeout `what`, and the stream completed: the matching cure checks."""
    return (checks.complete_with_done(), checks.heartbeats_at_least(2), checks.server_sent_heartbeats(),
            checks.silence_outlasted(timeout_s, what), checks.no_finding("idle-timeout"))
