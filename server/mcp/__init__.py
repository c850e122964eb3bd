"""The lab's MCP origin: a tool server on the official Python SDK (`mcp` on PyPI), spoken to over
Streamable HTTP, run as `python -m server.mcp`, one process per replica.

It imports nothing of the model server's jobs (pyproject's import-linter contract): it is an
origin of its own that scenarios put behind the same proxies. `knobs.py` declares its knobs,
`app.py` builds the SDK's app and records every request, `replicas.py` runs several of them.
"""
