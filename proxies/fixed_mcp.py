"""The MCP route every production config in `proxies/fixed/` carries (issue 44): `/mcp` to a pool of
MCP servers (Streamable HTTP), declared once here and read by each proxy's `fixed.py`.

Why each choice (measured in docs/mcp.md, proven by tests/reliability/test_proxies_mcp.py):
- Two replicas as placeholders (127.0.0.1:8001 and :8002, the upstream's host): a stateful MCP server
  (the 2025 revisions' `initialize`) keeps each session in the process that answered it, so the
  pool needs affinity; round-robin lost 4 of 4 sessions ("Session not found" at the first tool
  call). Each proxy keeps a session by its own means, each file's comments say which; hashing the
  `Mcp-Session-Id` header is not one (`initialize` carries no id: half the sessions were lost).
- Silences: the official SDKs ping an open SSE stream every 15 s (Python: sse-starlette's
  `: ping`; TypeScript: `keepAliveMs` 15 s); the routes keep the chat route's 300 s silence
  (`fixed_settings.SILENCE`), far above it, and no bound on a whole request: an idle agent's
  standalone GET stream lives as long as its session.
- Headers: the protocol's own (below) pass both ways, and `DELETE` (the client ends its session)
  reaches the server; no buffering and no compression of `text/event-stream`, as on the chat route.
"""
from __future__ import annotations

MCP_PATH = "/mcp"
# Where the two replicas listen (on the upstream's host): edit both to your servers.
MCP_PORTS = (8001, 8002)
# The protocol's headers a hop must pass both ways (MCP 2025-06-18 and later; Mcp-Method and
# Mcp-Name from the 2026-07-28 revision, which routes by them).
MCP_HEADERS = ("Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID", "Mcp-Method", "Mcp-Name")
# The affinity cookie, where a proxy keeps sessions by one (the official Python client keeps
# cookies: its httpx2 client sent HAProxy's back, docs/mcp.md).
MCP_COOKIE = "mcp_route"
# How long a learnt session is remembered without a request (nginx's sticky learn, HAProxy's stick
# table): an agent's session may idle between tasks.
MCP_SESSION_TTL_S = 3600
# The Kubernetes manifests' MCP Service (proxies/fixed/kubernetes/): its replicas are its pods.
MCP_SERVICE = "mcp"
MCP_SERVICE_PORT = 80
