"""The official Python SDK lines the origin runs on, declared once: where each one's Python is, and
how it is installed by need (`labs setup`, as LiteLLM's own venv is).

- `2.3` (the `mcp` extra, in the lab's venv): serves the 2025 revisions' handshake and sessions and
  the 2026-07-28 stateless revision side by side, and its client speaks either.
- `1.30` (its own venv, `.venvs/mcp1`): the 1.x line most deployed servers run; the 2025 revisions
  only, so it does not answer `server/discover`. The two lines cannot share a venv (one package).
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from server.locations import PACKAGE_ROOT

VENVS = PACKAGE_ROOT / ".venvs"


@dataclass(frozen=True)
class SdkLine:
    name: str
    pin: str
    venv: Path | None  # None: the lab's own venv (the running Python)

    @property
    def python(self) -> Path:
        return Path(sys.executable) if self.venv is None else self.venv / "bin" / "python"

    def present(self) -> bool:
        """Whether its Python imports this line's `mcp` (a version check, no server started)."""
        major = self.pin.split("==")[-1].split(">=")[-1].split(".")[0]
        try:
            found = subprocess.run([str(self.python), "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
                                   capture_output=True, text=True, timeout=60)
        except OSError:
            return False
        return found.returncode == 0 and found.stdout.strip().split(".")[0] == major

    def install(self) -> None:
        """Its own venv, then the pinned SDK into it (uv beside the lab's Python when there)."""
        if self.venv is None:
            raise RuntimeError(f"mcp {self.name} is the lab's own: install the [mcp] extra")
        if not self.python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True)
        uv = Path(sys.executable).parent / "uv"
        command = [str(uv), "pip", "install", "-q", "--python", str(self.python), self.pin] if uv.exists() \
            else [str(self.python), "-m", "pip", "install", "-q", self.pin]
        subprocess.run(command, check=True)


SDK_LINES: dict[str, SdkLine] = {
    "2.3": SdkLine("2.3", "mcp>=2.3,<3", None),
    "1.30": SdkLine("1.30", "mcp==1.30.0", VENVS / "mcp1"),
}
DEFAULT_SDK = "2.3"
