"""Which version of each app hop's component ran (for a run's provenance)."""
from __future__ import annotations

import json
import re
import subprocess
from importlib import metadata
from pathlib import Path

from proxies.apps.launch import LITELLM_VENV, NODE_MODULES, AppMissing, node_binary

# The package whose version names the component, per app.
NODE_PACKAGES = {"express": ("express", "compression", "http-proxy-middleware"), "nextjs": ("next", "react"),
                 "webpack": ("webpack-dev-server", "webpack")}
PYTHON_PACKAGES = {"gunicorn": ("gunicorn", "flask", "requests"),
                   "django": ("django", "uvicorn", "gunicorn", "requests", "httpx"),
                   "jupyter": ("jupyter-server", "jupyter-server-proxy", "tornado")}


def _node_package(name: str) -> str:
    try:
        return json.loads((NODE_MODULES / name / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return "not installed"


def _litellm() -> str:
    found = sorted(LITELLM_VENV.glob("lib/python*/site-packages/litellm-*.dist-info"))
    return found[-1].name.removeprefix("litellm-").removesuffix(".dist-info") if found else "not installed"


def _privoxy() -> str:
    """`privoxy --version` says "Privoxy version 3.0.34 (https://www.privoxy.org/)"."""
    try:
        out = subprocess.run(["privoxy", "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "not installed"
    found = re.search(r"version (\S+)", out)
    return found.group(1) if found else "unknown"


def versions(app: str) -> dict[str, str]:
    """{"component": "version", ...} for app `app` (the runtime that started it aside)."""
    if app in NODE_PACKAGES:
        try:
            node = subprocess.run([node_binary(), "--version"], capture_output=True, text=True,
                                  timeout=10).stdout.strip().lstrip("v")
        except (AppMissing, OSError, subprocess.TimeoutExpired) as exc:
            node = f"unavailable ({exc})"
        return {"node": node, **{pkg: _node_package(pkg) for pkg in NODE_PACKAGES[app]}}
    if app in PYTHON_PACKAGES:
        found = {}
        for dist in PYTHON_PACKAGES[app]:
            try:
                found[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                found[dist] = "not installed"
        return found
    if app == "litellm":
        return {"litellm": _litellm(), "venv": str(Path(LITELLM_VENV))}
    if app == "privoxy":
        return {"privoxy": _privoxy()}
    return {"relay": "proxies/apps/relay.py"}
