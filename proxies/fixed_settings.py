"""The numbers every production config in `proxies/fixed/` shares: what streams well, with headroom.
Each proxy's settings are its folder's `fixed.py` (`proxies/nginx/fixed.py`, ...), named by its kind.

Every choice here is explained in the exported files' comments; the numbers:
- Silences: the server sends a `: ping` heartbeat after 10 s of silence, so a 300 s read/idle
  timeout leaves a wide margin for prefill and queueing, and no timeout bounds a whole stream.
- Concurrency: at least 1,000 streams, each holding a client and an upstream connection.
- Upstream keepalive: idle upstream connections are dropped after 4 s, before uvicorn's own 5 s
  keep-alive timeout, so a proxy never reuses a connection the server is closing.
- Hostile or unlucky clients (they bound the wait for a CLIENT, never a stream in flight):
  headers within 10 s (SDKs send them at once; a trickle or a silent connection is closed),
  an idle keep-alive connection closed after 60 s (above SDK pools' 5 s expiry, so a client
  never sends on a connection the proxy is closing), a whole request body within 60 s (Envoy,
  Apache; Caddy's read_body and Traefik's readTimeout count the headers in; HAProxy waits that
  long for it before connecting) and no pause over 60 s in it; nginx bounds only the pause, and
  the requests one address keeps in flight (1,024); Varnish bounds neither, but reads a body
  whole before it opens a backend connection, so a slow upload holds none (Caddy too, for
  bodies with a Content-Length).
- Bodies above the server's own limit (8 MiB, `--max-body-bytes`) get 413 at the proxy; HAProxy
  and Apache cannot count a chunked body they forward, so they refuse one (411); Varnish cuts a
  chunked one at the limit; Traefik has no limit that leaves responses alone.
- The proxies' own errors are OpenAI-shaped JSON (proxies/errors.py); nginx hides its version;
  Envoy's admin is on a Unix socket (no TCP port: a web page can POST to loopback) and serves
  only read-only paths.
- TLS with HTTP/2 (`nginx-tls.conf`, `envoy-tls.yaml`): the same settings on a TLS listener that
  offers h2 by ALPN, naming the user's certificate and key where Debian keeps them (the lab
  swaps in a self-signed pair made at run time); TLS 1.2 and 1.3 only, sessions resumable.
- An MCP route (`/mcp`) to a pool of two MCP servers, with each proxy's session affinity: its
  numbers and reasons are `proxies/fixed_mcp.py`.
"""
from __future__ import annotations

SILENCE = 300  # seconds: the longest silence a stream may keep, heartbeats aside
COMPRESSIBLE = ("application/json", "text/plain")  # never text/event-stream
# HAProxy's gzip delays every event of any stream by one event: only what is answered whole.
WHOLE_ANSWERS = ("application/json",)
HEADERS = 10  # seconds to receive a request's headers
IDLE = 60  # seconds an idle client connection (no request in flight) stays open
BODY = 60  # seconds: the longest pause in a body (nginx, HAProxy), the whole body (Envoy, Apache, HAProxy, Caddy, Traefik)
MAX_BODY = 8 * 1024 * 1024  # bytes: the server's own --max-body-bytes default
# Varnish's send_timeout bounds a WHOLE response (600 s by default): above any answer's length.
LONGEST_ANSWER = 3600  # seconds
# Envoy's admin paths the lab and operators read; nothing that changes or stops Envoy.
ADMIN_READ_ONLY = ("/ready", "/stats", "/stats/prometheus", "/server_info")
# ... and on a Unix socket in Envoy's working folder, never a TCP port (a web page can reach those).
ADMIN_SOCKET = "admin.sock"
# Where the TLS exports look for the user's certificate (PEM, chain after it) and its key.
CERTIFICATE = "/etc/ssl/certs/proxy.pem"
PRIVATE_KEY = "/etc/ssl/private/proxy.key"
# About 40,000 TLS sessions, shared by nginx's workers: a reconnecting client skips the handshake.
SESSION_CACHE = "shared:SSL:10m"
