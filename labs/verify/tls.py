"""The certificate a run's TLS listeners serve: a self-signed pair for 127.0.0.1, made for the run
and copied into its folder (a container mounts that folder, so it sees the same files). The
measuring client does not verify it: it only needs the listener to speak TLS as deployed."""
from __future__ import annotations

import shutil
from pathlib import Path

from proxies.tls import self_signed


def pair_in(folder: Path) -> tuple[Path, Path]:
    """Where the run's certificate and key are in its folder (a rewrite names them before
    `run_pair` makes them, when the rewritten config is written)."""
    return folder / "tls" / "cert.pem", folder / "tls" / "key.pem"


def run_pair(folder: Path) -> tuple[Path, Path]:
    """The run's own certificate and key (self-signed for 127.0.0.1), copied into its folder."""
    cert, key = self_signed()
    pair = pair_in(folder)
    pair[0].parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cert, pair[0])
    shutil.copyfile(key, pair[1])
    pair[1].chmod(0o644)  # a throwaway key for loopback: workers running as another user read it
    return pair


def bundle_at(folder: Path) -> Path:
    """Where `run_bundle` puts the bundle in the run's folder (a rewrite names it before
    `run_bundle` makes it, when the rewritten config is written)."""
    return pair_in(folder)[0].with_name("bundle.pem")


def run_bundle(folder: Path) -> Path:
    """The run's certificate and key in one PEM file (certificate first), for a proxy that reads
    both from a single file."""
    cert, key = run_pair(folder)
    bundle = bundle_at(folder)
    bundle.write_text(cert.read_text() + key.read_text())
    bundle.chmod(0o644)
    return bundle
