"""TLS kept as TLS: a `bind ... ssl` still speaks TLS here, with the run's certificate (HAProxy's
`crt` reads certificate and key from one PEM file: the run's pair concatenated), so a frontend's
`redirect scheme https unless { ssl_fc }`, `ssl_fc` ACLs and ALPN behave as deployed and the
measuring client speaks TLS to it. What cannot work here goes, said in the diff: files of the
user's machine other than the certificate (CA bundles, CRLs, crt-lists, DH parameters) and
client-certificate checks (the lab's client presents none)."""
from __future__ import annotations

from pathlib import Path

FLAGS_KEPT = {"no-sslv3", "no-tlsv10", "no-tlsv11", "no-tlsv12", "no-tlsv13", "force-sslv3", "force-tlsv10",
              "force-tlsv11", "force-tlsv12", "force-tlsv13", "prefer-client-ciphers", "no-tls-tickets",
              "allow-0rtt", "no-ca-names"}
VALUES_KEPT = {"alpn", "npn", "ciphers", "ciphersuites", "curves", "ecdhe", "ssl-min-ver", "ssl-max-ver",
               "sigalgs", "client-sigalgs"}
VALUES_DROPPED = {"crt-list": "a list of certificate files of your machine: the run's certificate serves",
                  "ca-file": "a CA file of your machine: no client certificate is checked here",
                  "ca-verify-file": "a CA file of your machine: no client certificate is checked here",
                  "crl-file": "a CRL of your machine: no client certificate is checked here",
                  "verify": "the lab's client presents no certificate",
                  "ca-ignore-err": "no client certificate is checked here",
                  "crt-ignore-err": "no client certificate is checked here",
                  "ca-sign-file": "a CA of your machine: the run's certificate serves",
                  "ca-sign-pass": "a CA of your machine: the run's certificate serves"}
FLAGS_DROPPED = {"strict-sni": "the lab's client connects to 127.0.0.1 and sends no SNI",
                 "generate-certificates": "a CA of your machine: the run's certificate serves"}
# A global naming a file, folder or engine of the user's machine -> the reason it goes (plan.REASONS).
GLOBALS_DROPPED = {"ssl-dh-param-file": "haproxy-dh-params", "issuers-chain-path": "haproxy-issuers-chain",
                   "ssl-engine": "haproxy-ssl-engine", "ssl-mode-async": "haproxy-ssl-async",
                   "ca-base": "haproxy-ca-base", "crt-base": "haproxy-crt-base"}


def is_tls_bind(words: list[str]) -> bool:
    return "ssl" in words[2:]


def bind_params(words: list[str], bundle: Path, note) -> list[str]:
    """The TLS part of `bind ADDRESS ... ssl ...` as it runs here: `ssl crt <the run's bundle>`,
    the protocol settings kept (alpn, ciphers, versions), the user's files and client checks gone."""
    kept, skip = ["ssl", "crt", str(bundle)], False
    params = words[2:]
    for index, word in enumerate(params):
        if skip:
            skip = False
        elif word in FLAGS_KEPT:
            kept.append(word)
        elif word in VALUES_KEPT and index + 1 < len(params):
            kept += [word, params[index + 1]]
            skip = True
        elif word == "crt":
            note(f"bind crt {params[index + 1] if index + 1 < len(params) else ''}: the run's certificate "
                 "(self-signed, for 127.0.0.1) serves instead")
            skip = True
        elif word in VALUES_DROPPED:
            value = params[index + 1] if index + 1 < len(params) else ""
            note(f"bind {word} {value} dropped: {VALUES_DROPPED[word]}")
            skip = True
        elif word in FLAGS_DROPPED:
            note(f"bind {word} dropped: {FLAGS_DROPPED[word]}")
    return kept
