"""`labs verify FILE --mcp [PATH]`: a proxy config's MCP route (Streamable HTTP) judged by running
it in front of replicas of the lab's MCP origin and measuring it with the probe's MCP checks.

Modules: hint (the note a chat judgement adds when an MCP route exists), pool (the route's upstream
servers and balancing: nginx, HAProxy, Caddy; pool_more: Envoy, Traefik, Apache, Varnish;
pool_model: the Pool and each proxy's affinity fix), judge (the probe's checks through the route, their faults at the config's
lines), run (`verify_mcp`: read, start replicas, rewrite, run, measure), output (the CI formats).
"""
