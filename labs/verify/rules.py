"""What the settings in effect suggest, compared with the catalogue: one `Suspicion` per fault.

The rules of each proxy live in its folder (`labs/verify/<proxy>/rules.py`, named by its
`ConfigKind`); what they share is here. Each rule names the directive behind the fault (its `where`), the fix as the directive to write,
and the dynamic check that can show it. A suspicion the measurement confirms becomes a `failure`;
one it does not confirm stays a `warning`, with the reason.
"""
from __future__ import annotations

import math

from labs.verify.model import Options

SSE = "text/event-stream"


def timeout_fix(limit: float, options: Options) -> int:
    """An idle limit with room (x1.5, in tens of seconds) above the longest silence expected."""
    return int(math.ceil(max(limit, options.max_silence_s) * 1.5 / 10) * 10)

