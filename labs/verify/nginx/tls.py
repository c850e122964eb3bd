"""TLS kept as TLS: a server that listens with `ssl` still does, with a certificate made for the
run, so redirects to HTTPS, `$scheme`/`$https` rules and HTTP/2 behave as deployed and the
measuring client speaks TLS to it. What cannot work here goes, said in the diff: files of the
user's machine other than the server's own pair (CA bundles, DH parameters, CRLs, ticket keys),
OCSP stapling (it would contact the CA's responders), client-certificate checks (the lab's client
has none)."""
from __future__ import annotations

from pathlib import Path

PAIR = ("ssl_certificate", "ssl_certificate_key")
FILES_GONE = ("ssl_trusted_certificate", "ssl_client_certificate", "ssl_dhparam", "ssl_crl",
              "ssl_password_file", "ssl_stapling_file", "ssl_session_ticket_key", "ssl_ecdh_curve_file")
REMOVED = {**{name: "a file of your machine's: not here" for name in FILES_GONE},
           "ssl_stapling": "OCSP stapling would contact the CA's responders: nothing but loopback is contacted",
           "ssl_stapling_verify": "OCSP stapling is off here",
           "ssl_verify_client": "the lab's client presents no certificate",
           "ssl_verify_depth": "no client certificate is checked here",
           "ssl_ocsp": "OCSP would contact the CA's responders", "ssl_ocsp_responder": "OCSP is off here",
           "ssl_ocsp_cache": "OCSP is off here",
           "ssl_certificate_cache": "the run's certificate is one file pair"}


def replacement(name: str, pair: tuple[Path, Path]) -> str | None:
    """The statement that replaces `name ...` (the run's pair), else None."""
    if name == "ssl_certificate":
        return f"ssl_certificate {pair[0]}"
    if name == "ssl_certificate_key":
        return f"ssl_certificate_key {pair[1]}"
    return None


def is_tls_listen(args: list[str]) -> bool:
    return "ssl" in args[1:]
