"""`python -m server.mcp [--port N] [knobs]`: one MCP origin process (docs/mcp.md)."""
from __future__ import annotations

import sys

import uvicorn

from server.mcp.app import build
from server.mcp.knobs import from_args


def main(argv: list[str] | None = None) -> int:
    knobs, host, port = from_args(argv)
    if host not in ("127.0.0.1", "::1", "localhost"):
        print(f"python -m server.mcp: error: the lab binds loopback only, not {host}", file=sys.stderr)
        return 2
    uvicorn.run(build(knobs), host=host, port=port, log_level="warning", lifespan="on")
    return 0


if __name__ == "__main__":
    sys.exit(main())
