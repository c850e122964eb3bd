"""The proxies whose configs verify reads with the one pipeline (labs/verify/run.py), one reader
each (`labs/verify/<proxy>/reader.py`), and what the pipeline asks of the table."""
from __future__ import annotations

from labs.findings import FindingKind
from labs.verify.envoy.reader import READER as ENVOY
from labs.verify.model import Options, Reading, Suspicion
from labs.verify.reader import ConfigReader
from labs.verify import rules
from labs.verify.apache.reader import READER as APACHE
from labs.verify.caddy.reader import READER as CADDY
from labs.verify.haproxy.reader import READER as HAPROXY
from labs.verify.nginx.reader import READER as NGINX
from labs.verify.traefik.reader import READER as TRAEFIK
from labs.verify.varnish.reader import READER as VARNISH

READERS: dict[str, ConfigReader] = {reader.proxy: reader for reader in (ENVOY, TRAEFIK, NGINX, APACHE, CADDY, HAPROXY, VARNISH)}


def suspicions(reader: ConfigReader, reading: Reading, options: Options) -> list[Suspicion]:
    """The reader's rules over what it read, and the departure it notices only at its next write,
    whatever the config."""
    found = rules.suspicions(reader.rules, reading, options)
    if reader.departure_at_write is not None:
        setting, _ = rules.fallback(reader.rules, rules.DEPARTURE)
        found += rules.departure_at_write(reader.departure_at_write, reading, options, setting)
    return found


def fallback(reader: ConfigReader, kind: FindingKind) -> tuple[str, str]:
    return rules.fallback(reader.rules, kind)

