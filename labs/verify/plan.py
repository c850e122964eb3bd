"""How a rewrite runs a user's config here: the plan every reader's rewrite gets, the one table of
reasons every rewrite gives, and the lookup of a directive's handler.

A reader's rewrite is a table: directive -> handler (`<proxy>/rewrite.py` `HANDLERS`); a directive
with no handler is kept as written, and the reader says which those are (`KEPT`), so the
conformance test (tests/verify/test_reader_contract.py) can tell a directive nobody looked at
from one judged harmless. The reasons a rewrite gives for a change it makes are here, once: the
same change reads the same for every proxy.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, TypeVar

Handler = TypeVar("Handler", bound=Callable[..., object])


@dataclass(frozen=True)
class RunPlan:
    """Where and how the rewritten config runs: the lab's server's port, the run's own folder, in a
    container or not (there it runs as the invoking user), and the proxy release that runs it."""

    lab_port: int
    folder: Path
    in_container: bool = False
    series: str | None = None  # the proxy's release (proxies.releases); None: the current one
    version: str | None = None  # the version whose defaults the reading used (--proxy-version)
    # `verify --mcp`: one port per replica of the lab's MCP origin (labs/verify/mcp/run.py), so a
    # pool's servers stay distinct processes and its balancing decides where a session goes;
    # empty: every upstream server is the lab's one server at `lab_port`.
    pool_ports: tuple[int, ...] = ()

    def upstream_port(self, index: int) -> int:
        """The port of a pool's `index`-th server (0-based, in config order)."""
        return self.pool_ports[index % len(self.pool_ports)] if self.pool_ports else self.lab_port


# One sentence per kind of change, shown beside the change in the diff and in the notes.
REASONS: dict[str, str] = {
    # Privileges and the process.
    "user-in-container": "runs as the invoking user in a container",
    "user-not-root": "not root here",
    "user-missing": "no such user here",
    "foreground": "the run stays in its own folder, in the foreground",
    # Upstreams: every one is the lab's server, reached in plain HTTP, by address.
    "upstream-tls": "the lab's server speaks plain HTTP",
    "resolver": "no name is resolved: every upstream is the lab's server",
    "dns-off": "DNS resolution of servers is off (resolvers, init-addr): every server is the lab's",
    "health-check": "health checks are off: they would probe the lab's server instead of yours",
    "mirror": "a mirror would send every request twice",
    "bind-address": "binds to an address of the user's machine",
    # Listeners.
    "quic": "QUIC (UDP) is not measured; the TCP listener is",
    "no-certificate": "the lab has no certificate for the config's names",
    "tls-kept": ("TLS is kept: the TLS listeners serve a certificate made for the run (self-signed, "
                 "for 127.0.0.1), and verify measures them over TLS"),
    "tls-secrets": ("static secrets dropped (files of your machine): the run's certificate serves the "
                    "TLS listeners"),
    # Files of the user's machine.
    "include-missing": "not here: left out (see the notes)",
    "include-no-match": "no file matches here",
    "module-missing": "this module is not installed here",
    # Administration.
    "admin-own": "this run reads its own loopback admin endpoint, not your socket",
    "machine-path": "names a path or proxy of the machine it was written for",
    # apache
    "apache-built-in": "compiled into this apache2",
    "apache-server-root": "the run folder is the ServerRoot (-d)",
    "apache-tls-off": "TLS is off here: the lab speaks plain HTTP to this VirtualHost",
    # caddy
    "caddy-apps": "only the http app is measured",
    "caddy-plain-http": "automatic HTTPS is off here and every server listens on plain HTTP on 127.0.0.1",
    # varnish
    "varnish-listen": "the listen address is varnishd's -a flag: 127.0.0.1 on a free port here",
    "unix-socket": "its unix socket is the lab's server here",
    # nginx
    "quic-settings": "QUIC is not measured",
    "http2-listen-param": "nginx 1.22 takes http2 as a parameter of the ssl listens (added there)",
    "tls-file": "a file of your machine's: not here",
    "ocsp-stapling": "OCSP stapling would contact the CA's responders: nothing but loopback is contacted",
    "ocsp-stapling-off": "OCSP stapling is off here",
    "ocsp": "OCSP would contact the CA's responders",
    "ocsp-off": "OCSP is off here",
    "client-certificate": "the lab's client presents no certificate",
    "client-certificate-unchecked": "no client certificate is checked here",
    "certificate-one-pair": "the run's certificate is one file pair",
    # haproxy: sections naming other hosts, what refers to them, files of the user's machine
    "haproxy-resolvers": "names DNS servers of the user's network",
    "haproxy-peers": "names peer hosts",
    "haproxy-mailers": "names mail servers",
    "haproxy-do-resolve": "it uses a resolvers section, commented out here",
    "haproxy-errorfile-missing": "the file is not beside the config (HAProxy's own page is used)",
    "haproxy-dh-params": "a file of your machine's: not here (HAProxy's own DH parameters)",
    "haproxy-issuers-chain": "a folder of your machine's: not here",
    "haproxy-ssl-engine": "a hardware engine of your machine's: not here",
    "haproxy-ssl-async": "asynchronous engines are not used here",
    "haproxy-ca-base": "a folder of your machine's: no CA file is read here",
    "haproxy-crt-base": "a folder of your machine's: the run's certificate is named by its full path",
    # envoy
    "xds": "xDS servers are other hosts",
    "stats-sinks": "stats sinks are other hosts",
    "tracers": "tracers are other hosts",
    "load-reports": "load reports go to other hosts",
    "admin-paths": "this run reads /clusters on its own loopback admin",
    "no-sni": "the lab's client connects to 127.0.0.1 (no SNI), so each chain serves every connection",
    "upstream-http1": "the lab's server speaks HTTP/1.1",
    "judged-statically": "its settings are still judged statically",
    # traefik
    "elsewhere": "it would listen, fetch or report elsewhere",
}


def reason(key: str) -> str:
    """The sentence for one kind of change (KeyError names a reason nobody declared)."""
    return REASONS[key]


def handler_for(handlers: Mapping[str, Handler], name: str) -> Handler | None:
    """The handler of directive `name`: its own entry, else the longest `prefix*` entry
    (`proxy_ssl_*`); None: the directive is kept as written."""
    if name in handlers:
        return handlers[name]
    prefixes = [key for key in handlers if key.endswith("*") and name.startswith(key[:-1])]
    return handlers[max(prefixes, key=len)] if prefixes else None


def handled(handlers: Mapping[str, object], kept: frozenset[str], name: str) -> bool:
    """Whether a directive is accounted for: it has a handler, or the reader declares it kept."""
    return handler_for(handlers, name) is not None or name in kept  # type: ignore[arg-type]
