"""Install the peer load testers of `make bench-peers`, each in its own venv under `.venvs/`:

    python -m labs.bench.peers.install            # both (skips one already at its pinned version)
    python -m labs.bench.peers.install guidellm

NVIDIA AIPerf and guidellm pin their own transformers, pydantic, pandas and aiohttp ranges
(~1.2-1.5 GB each), which have no place in the lab's environment. guidellm depends on torch: a
plain resolve takes the newest CUDA build (several GB of nvidia-* wheels), so its venv gets the
lab's CPU pin first (`TORCH_PIN`, as `make setup` does for `.venv`) and every later resolve is
constrained to the torch that is then installed.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

REPO_ROOT = Path(__file__).resolve().parents[3]
VENVS = REPO_ROOT / ".venvs"
TORCH_PIN = os.environ.get("TORCH_PIN", "torch==2.13.0")


@dataclass(frozen=True)
class Peer:
    name: str  # the venv's folder and the name in every report
    distribution: str
    version: str
    console_script: str
    needs_torch: bool

    @property
    def venv(self) -> Path:
        return VENVS / self.name

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def executable(self) -> Path:
        return self.venv / "bin" / self.console_script

    @property
    def pin(self) -> str:
        return f"{self.distribution}=={self.version}"


PEERS = (Peer("aiperf", "aiperf", "0.13.0", "aiperf", needs_torch=False),
         Peer("guidellm", "guidellm", "0.8.1", "guidellm", needs_torch=True))
BY_NAME = {peer.name: peer for peer in PEERS}


def installed_version(peer: Peer, distribution: str | None = None) -> str | None:
    """The version of `distribution` (default: the peer's) in the peer's venv, or None."""
    if not peer.python.exists():
        return None
    probe = subprocess.run([str(peer.python), "-c", "import importlib.metadata as m, sys; "
                            "print(m.version(sys.argv[1]))", distribution or peer.distribution],
                           capture_output=True, text=True, timeout=60)
    return probe.stdout.strip() if probe.returncode == 0 else None


def problem(peer: Peer) -> str | None:
    """Why the peer cannot run (not installed, another version), or None."""
    version = installed_version(peer)
    if version is None or not peer.executable.exists():
        return f"{peer.pin} is not installed in {peer.venv}: run `python -m labs.bench.peers.install {peer.name}`"
    if version != peer.version:
        return f"{peer.venv} has {peer.distribution} {version}, not the pinned {peer.version}"
    return None


def _pip(peer: Peer, *args: str) -> None:
    argv = [str(peer.python), "-m", "pip", "install", "-q", *args]
    done = subprocess.run(argv, cwd=REPO_ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed with status {done.returncode}")


def install(peer: Peer) -> None:
    """Create the venv and install the pinned peer; a no-op when it is already there."""
    if problem(peer) is None:
        print(f"peers: {peer.pin} already in {peer.venv.relative_to(REPO_ROOT)}")
        return
    started = time.monotonic()
    if not peer.python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(peer.venv)], check=True)
    constraints: list[str] = []
    if peer.needs_torch:
        if installed_version(peer, "torch") is None:
            _pip(peer, TORCH_PIN)
        torch = installed_version(peer, "torch")
        if torch is None:
            raise RuntimeError(f"{TORCH_PIN} did not install into {peer.venv}")
        pin_file = peer.venv / "torch-constraint.txt"
        pin_file.write_text(f"torch=={torch}\n")  # the CPU build stays; pip may not swap it for CUDA
        constraints = ["-c", str(pin_file)]
    _pip(peer, *constraints, peer.pin)
    size = sum(f.stat().st_size for f in peer.venv.rglob("*") if f.is_file() and not f.is_symlink())
    print(f"peers: {peer.pin} installed in {time.monotonic() - started:.0f} s ({size / 1e6:.0f} MB)")


def install_all(names: Sequence[str]) -> dict[str, str]:
    """Install each named peer; a failure is recorded (name -> why) and the others go on."""
    failed: dict[str, str] = {}
    for name in names:
        try:
            install(BY_NAME[name])
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            failed[name] = f"install failed: {exc}"
            print(f"peers: {name}: {failed[name]}", file=sys.stderr)
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs.bench.peers.install",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("peers", nargs="*", metavar="PEER", help=f"any of {', '.join(BY_NAME)} (default: all)")
    parser.add_argument("--check", action="store_true", help="say what is missing; install nothing")
    args = parser.parse_args(list(argv) if argv is not None else None)
    unknown = [name for name in args.peers if name not in BY_NAME]
    if unknown:
        parser.error(f"unknown peer {', '.join(unknown)}: choose from {', '.join(BY_NAME)}")
    names = args.peers or list(BY_NAME)
    if args.check:
        missing = [p for p in (problem(BY_NAME[n]) for n in names) if p]
        for line in missing:
            print(f"missing: {line}", file=sys.stderr)
        return 1 if missing else 0
    return 1 if install_all(names) else 0


if __name__ == "__main__":
    raise SystemExit(main())
