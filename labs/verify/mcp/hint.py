"""The line verify's chat judgement adds when the config also has a route written for MCP: the
MCP route is judged only when asked (`--mcp`), since its run starts replicas of another origin and
holds a GET stream up to 17 s; a catch-all route (`location /`) is not taken as one."""
from __future__ import annotations

from labs.verify.model import Reading
from labs.verify.route import Request

MCP_PATH = "/mcp"  # the path the SDKs serve Streamable HTTP on, and `--mcp`'s default


def mcp_hint(reading: Reading, file: str) -> list[str]:
    parsed = reading.parsed
    if parsed is None:
        return []
    chosen = parsed.chosen.request
    found = parsed.reader.match(parsed.config, Request(MCP_PATH, chosen.host, chosen.headers))
    if found is None or found.catch_all or found.describe == reading.route:
        return []
    return [f"a route is written for {MCP_PATH} ({found.describe}): `python -m labs verify {file} --mcp` "
            "judges it for MCP (sessions across replicas, progress, the GET stream)"]
