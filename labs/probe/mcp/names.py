"""What `labs probe`'s command line reads of the MCP checks without importing the SDK (the `mcp`
extra is needed only when --mcp runs): their names, in run order, and the defaults."""
from __future__ import annotations

CHECK_NAMES: tuple[str, ...] = ("session-survives", "progress-streams", "get-stream")
DEFAULT_MCP_MAX_SILENCE_S = 20.0  # above the Python SDK's 15 s keep-alive, so one shows
DEFAULT_SESSIONS = 4
