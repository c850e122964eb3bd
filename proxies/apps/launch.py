"""What starting an app hop means: the `Launch` each hop's folder builds from its settings
(`proxies/apps/<hop>/kind.py`), and the error that says what is not installed.

Every runtime reads the same `Launch` (a host process runs it as it is; a container runs it with
the repository mounted at the same path), so an app behaves the same in both.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

APPS_DIR = Path(__file__).resolve().parent
REPO_ROOT = APPS_DIR.parents[1]
READY_PATH = "/v1/models"
# A hop whose first completion pays for lazy imports and its upstream client sends this one when
# ready (Launch.warm_up): any answer will do (the server's 404 for the unknown model included).
WARM_UP = {"model": "streamlab-warm-up", "max_tokens": 1, "messages": [{"role": "user", "content": "warm up"}]}


class AppMissing(RuntimeError):
    """An app's program or packages are not installed; the message says what to run."""


@dataclass(frozen=True)
class Launch:
    """What to run for one app hop: argv (argv[0] a path), extra environment, files to write into
    the work folder first, the folder to run in, and headers its readiness request needs."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    cwd: Path = REPO_ROOT
    ready_headers: dict[str, str] = field(default_factory=dict)
    warm_up: dict[str, Any] | None = None  # a completion body sent once when ready (any answer will do)
    # Where it is sent, in turn: a hop whose other routes pay their own lazy imports names them too.
    warm_up_paths: tuple[str, ...] = ("/v1/chat/completions",)
    # A forward proxy's origin: clients reach `forward_origin` through the app (absolute-form
    # requests, as with HTTP_PROXY set), not the app as the origin itself.
    forward_origin: str | None = None
    # Where the app serves the upstream's paths (jupyter-server-proxy: /proxy/PORT); "" for the root.
    url_path: str = ""

    def shown(self) -> str:
        """The app's "config" as a report shows it: environment, command line, written files."""
        lines = [f"{key}={shlex.quote(value)}" for key, value in sorted(self.env.items())]
        lines.append(shlex.join(self.argv))
        for name, text in self.files.items():
            lines += ["", f"# {name}", text.rstrip()]
        return "\n".join(lines) + "\n"


def require(path: Path, what: str) -> None:
    """AppMissing unless `path` exists: `what` is not installed."""
    if not path.exists():
        raise AppMissing(f"{what} is not installed ({path} is missing): run `make setup`")
