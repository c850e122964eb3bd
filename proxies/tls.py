"""Certificates for the TLS listeners: a self-signed one for 127.0.0.1 made at run time with
openssl (never committed), the settings' "both files or neither" rule, and the check that the
files a config names exist before any proxy starts.

The self-signed pair is made once per process in a temporary folder removed at exit, readable by
nginx's workers (they run as `nobody` under root) and by a container's user.
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from proxies.base import ProxySettings

_made: tuple[str, str] | None = None


class OpenSSLMissing(RuntimeError):
    """openssl is needed to make the certificate; the message says how to install it."""


class CertificateMissing(FileNotFoundError):
    """A certificate or key file a TLS config names cannot be read: raised before the proxy starts."""


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


def fill_certificate(data: Any, enabled: str, certificate: str, key: str) -> Any:
    """A settings model's input with the self-signed pair filled in when TLS is on and neither
    file is named. Naming one file without the other is an error (a config that cannot load)."""
    if not isinstance(data, dict) or not data.get(enabled):
        return data
    given = {name for name in (certificate, key) if data.get(name)}
    if not given:
        data = {**data}
        data[certificate], data[key] = self_signed()
    elif len(given) == 1:
        missing = ({certificate, key} - given).pop()
        raise ValueError(f"{missing} is needed with {given.pop()} (name both files, or neither "
                         f"for a self-signed certificate made at run time)")
    return data


def require_files(settings: ProxySettings) -> None:
    """Raise CertificateMissing, naming the setting and the path, for a TLS file that is absent or
    unreadable: the proxy would refuse to start with a message of its own, or a container runtime
    would mount nothing."""
    for name, path in settings.tls_files().items():
        file = Path(path)
        if not file.is_file():
            problem = "does not exist" if not file.exists() else "is not a file"
        elif not os.access(file, os.R_OK):
            problem = "is not readable by this user"
        else:
            continue
        raise CertificateMissing(
            f"{settings.proxy} {name}: {path} {problem}. Point {name} at your PEM file, or leave "
            f"both certificate settings unset for a self-signed certificate made at run time.")
