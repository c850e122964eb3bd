"""`labs probe --mcp URL [URL ...]`: a deployed MCP endpoint (Streamable HTTP), checked from outside
with the official SDK's client, each fault named with its hop.

    from labs.probe.mcp.run import probe_mcp
    report = probe_mcp(["http://127.0.0.1:8080/mcp", "http://127.0.0.1:8765/mcp"], max_silence_s=3)

Modules: names (the check names and defaults the CLI reads, no SDK import), endpoint (the URLs,
what the server is, the tool to call), get_stream (the standalone GET stream read byte by byte),
checks (session-survives, progress-streams, get-stream), report, run.
"""
