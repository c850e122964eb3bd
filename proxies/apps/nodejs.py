"""What the Node.js hops (Express, Next.js, webpack-dev-server) and clients (fetch, the official
SDKs) share: their JavaScript in
`proxies/apps/node/` (one package.json, installed once by `make setup`), the `node` that runs it,
and how the versions that ran are read."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

from proxies.apps.kind import AppImage
from proxies.apps.launch import APPS_DIR, AppMissing

NODE_DIR = APPS_DIR / "node"
NODE_MODULES = NODE_DIR / "node_modules"
# The official MCP TypeScript SDK's client bundled for the browser by the webpack above (its entry
# and build script in mcp-browser/; built output, ignored: proxies.apps.install mcp-browser).
MCP_BROWSER_SOURCE = NODE_DIR / "mcp-browser"
MCP_BROWSER_BUNDLE = NODE_DIR / ".mcp-browser-build" / "mcp-client.js"
# The coding agents (Codex CLI, Claude Code): a lockfile of their own, as their native binaries
# weigh ~800 MB that no hop needs (proxies.apps.install agents).
AGENTS_DIR = APPS_DIR / "agents"
AGENTS_BIN = AGENTS_DIR / "node_modules" / ".bin"


def node_binary() -> str:
    found = shutil.which("node")
    if not found:
        raise AppMissing("no `node` on PATH: install Node.js 20 or later (Debian: apt-get install nodejs npm)")
    return os.path.realpath(found)


def _package_version(name: str) -> str:
    try:
        return json.loads((NODE_MODULES / name / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return "not installed"


def node_versions(*packages: str) -> dict[str, str]:
    """node's own version and that of each package in node_modules."""
    try:
        node = subprocess.run([node_binary(), "--version"], capture_output=True, text=True,
                              timeout=10).stdout.strip().lstrip("v")
    except (AppMissing, OSError, subprocess.TimeoutExpired) as exc:
        node = f"unavailable ({exc})"
    return {"node": node, **{package: _package_version(package) for package in packages}}


# The apps image cannot be built without node: every Node.js hop runs the host's.
NODE_IMAGE = AppImage(programs=lambda: [node_binary()])
