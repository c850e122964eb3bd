"""The proxies whose configs verify reads, in the order detection tries them.

Envoy first: its YAML keys are unambiguous, while a YAML line can look like an nginx block opener
or an HAProxy section header to the looser patterns after it; Traefik's YAML (`entryPoints:`, a
router's `rule: Host(...)`) next. Caddy and Apache last: Caddy's
shape is a directive word opening a line, which no nginx or HAProxy config has; Apache's
`<VirtualHost>`/`ProxyPass` lines are its own. Varnish before HAProxy: a VCL `backend NAME {` line
looks like an HAProxy section header, while `vcl 4.1;` (or a backend with `.host`) is VCL's alone. Adding one is a folder
(`labs/verify/<proxy>/`: config, read, rewrite, kind) and a line here.
"""
from __future__ import annotations

from labs.verify.apache.reader import READER as APACHE
from labs.verify.caddy.reader import READER as CADDY
from labs.verify.envoy.reader import READER as ENVOY
from labs.verify.haproxy.reader import READER as HAPROXY
from labs.verify.kind import ConfigKind
from labs.verify.reader import ConfigReader
from labs.verify.model import Options, Reading, Suspicion
from labs.verify.nginx.reader import READER as NGINX
from labs.verify import readers
from labs.verify.readers import READERS
from labs.verify.rules import DEPARTURE, departure_at_write
from labs.verify.traefik.reader import READER as TRAEFIK
from labs.verify.varnish.reader import READER as VARNISH

KINDS: dict[str, ConfigKind | ConfigReader] = {kind.proxy: kind for kind in (ENVOY, TRAEFIK, NGINX, VARNISH, HAPROXY, CADDY, APACHE)}
PROXIES = tuple(KINDS)


def suspicions(reading: Reading, options: Options) -> list[Suspicion]:
    """The rules of the reading's proxy over what it read, and the departure its kind notices
    only at its next write, whatever the config."""
    reader = READERS.get(reading.proxy)
    if reader is not None:  # on the pipeline: its rules table
        return readers.suspicions(reader, reading, options)
    kind = KINDS[reading.proxy]
    found = kind.suspicions(reading, options)
    if kind.departure_at_write is not None:
        found += departure_at_write(kind.departure_at_write, reading, options, kind.fallback[DEPARTURE][0])
    return found


def heartbeats_to_notice(proxy: str) -> int:
    """With heartbeats through a silence, the one at which this proxy passes a departure on."""
    at_write = KINDS[proxy].departure_at_write
    return at_write.heartbeats if at_write is not None else 1
