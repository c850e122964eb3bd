"""The proxies whose configs verify reads, one reader each (`labs/verify/<proxy>/reader.py`, the
stages of labs/verify/reader.py), in the order detection tries them, and what the pipeline
(labs/verify/run.py) asks of the table.

Envoy first: its YAML keys are unambiguous, while a YAML line can look like an nginx block opener
or an HAProxy section header to the looser patterns after it; Traefik's YAML (`entryPoints:`, a
router's `rule: Host(...)`) next. Varnish before HAProxy: a VCL `backend NAME {` line looks like an
HAProxy section header, while `vcl 4.1;` (or a backend with `.host`) is VCL's alone. Caddy and
Apache last: Caddy's shape is a directive word opening a line, which no nginx or HAProxy config
has; Apache's `<VirtualHost>`/`ProxyPass` lines are its own. Adding one is a folder and a row here
(docs/extending.md, "Recipe: a verify reader").
"""
from __future__ import annotations

from labs.findings import FindingKind
from labs.verify import rules
from labs.verify.apache.reader import READER as APACHE
from labs.verify.caddy.reader import READER as CADDY
from labs.verify.envoy.reader import READER as ENVOY
from labs.verify.haproxy.reader import READER as HAPROXY
from labs.verify.model import Options, Reading, Suspicion
from labs.verify.nginx.reader import READER as NGINX
from labs.verify.reader import ConfigReader
from labs.verify.traefik.reader import READER as TRAEFIK
from labs.verify.varnish.reader import READER as VARNISH

READERS: dict[str, ConfigReader] = {
    reader.proxy: reader for reader in (ENVOY, TRAEFIK, NGINX, VARNISH, HAPROXY, CADDY, APACHE)}
PROXIES = tuple(READERS)


def suspicions(reading: Reading, options: Options) -> list[Suspicion]:
    """The rules of the reading's proxy over what it read (labs/verify/rules.py), and the departure
    it notices only at its next write, whatever the config."""
    reader = READERS[reading.proxy]
    found = rules.suspicions(reader.rules, reading, options)
    if reader.departure_at_write is not None:
        setting, _ = rules.fallback(reader.rules, rules.DEPARTURE)
        found += rules.departure_at_write(reader.departure_at_write, reading, options, setting)
    return found


def fallback(proxy: str, kind: FindingKind) -> tuple[str, str]:
    """(the setting, the general fix) a measured fault of `kind` no setting explains is placed at."""
    return rules.fallback(READERS[proxy].rules, kind)


def heartbeats_to_notice(proxy: str) -> int:
    """With heartbeats through a silence, the one at which this proxy passes a departure on."""
    at_write = READERS[proxy].departure_at_write
    return at_write.heartbeats if at_write is not None else 1
