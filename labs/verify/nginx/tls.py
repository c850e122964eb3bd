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
# directive -> the reason it is removed (labs/verify/plan.py REASONS)
REMOVED = {**{name: "tls-file" for name in FILES_GONE},
           "ssl_stapling": "ocsp-stapling", "ssl_stapling_verify": "ocsp-stapling-off",
           "ssl_verify_client": "client-certificate", "ssl_verify_depth": "client-certificate-unchecked",
           "ssl_ocsp": "ocsp", "ssl_ocsp_responder": "ocsp-off", "ssl_ocsp_cache": "ocsp-off",
           "ssl_certificate_cache": "certificate-one-pair"}


def replacement(name: str, pair: tuple[Path, Path]) -> str:
    """The statement that replaces `ssl_certificate ...` or `ssl_certificate_key ...`: the run's pair."""
    return f"{name} {pair[0] if name == 'ssl_certificate' else pair[1]}"


def is_tls_listen(args: list[str]) -> bool:
    return "ssl" in args[1:]
