"""What the lab's server is asked to do so that a hop's fault shows, declared once: verify's
trials and the probe's canary send it with every request, as `lab` knobs.

* no `X-Accel-Buffering: no`: the header switches nginx's buffering off for the one response that
  carries it and would hide `proxy_buffering on`;
* no heartbeats (a trial that needs them asks): a `: ping` resets every idle timer and would hide
  the limit being looked for.

Each is a per-stream knob, so the same settings can be the server's own (`exposing_flags()`, the
flags of `python -m server`); a request carrying them gets the same stream either way
(tests/server/test_flag_knob_parity.py). One thing no request sets is the reply's framing: the
server must answer HTTP/1.0 close-delimited (`--http h11`, CLOSE_DELIMITED), or nginx forwards
each chunk of a chunked reply at once, buffering on or not (docs/field-notes.md, nginx).
"""
from __future__ import annotations

from typing import Any

from server.knobs import flag_args

EXPOSING: dict[str, Any] = {"omit_headers": ["X-Accel-Buffering"], "heartbeat_s": 0}
# uvicorn's h11 protocol answers an HTTP/1.0 request close-delimited, as most servers do.
CLOSE_DELIMITED: tuple[str, ...] = ("--http", "h11")


def exposing_flags() -> list[str]:
    """EXPOSING as the server's own settings: `--omit-header x-accel-buffering --heartbeat-s 0`."""
    return flag_args(EXPOSING)
