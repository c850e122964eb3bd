"""Caddy (a Caddyfile through Caddy's own adapter, or Caddy's JSON config) as verify reads and runs it."""
