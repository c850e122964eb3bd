"""A self-signed certificate for 127.0.0.1, made at run time with openssl (never committed).

Made once per process in a temporary folder that is removed at exit; readable by nginx's
workers (they run as `nobody` under root).
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

_made: tuple[str, str] | None = None


class OpenSSLMissing(RuntimeError):
    """openssl is needed to make the certificate; the message says how to install it."""


def self_signed() -> tuple[str, str]:
    """(certificate path, key path) for CN and subjectAltName IP 127.0.0.1, valid one day."""
    global _made
    if _made is not None and all(Path(p).is_file() for p in _made):
        return _made
    openssl = shutil.which("openssl")
    if openssl is None:
        raise OpenSSLMissing("openssl not found: install it (apt-get install openssl) to run "
                             "the TLS/HTTP/2 variant")
    folder = Path(tempfile.mkdtemp(prefix="streamlab-tls-"))
    atexit.register(shutil.rmtree, folder, True)
    os.chmod(folder, 0o755)
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    os.chmod(key, 0o644)  # a throwaway key for loopback; the workers must read it
    _made = (str(cert), str(key))
    return _made
