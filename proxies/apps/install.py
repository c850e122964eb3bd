"""Install what the app hops need (`make setup` runs each step once, stamped):

    python -m proxies.apps.install node      npm ci from the committed lockfile (Express, Next.js, SDKs)
    python -m proxies.apps.install next      next build of the site, once, into an ignored folder
    python -m proxies.apps.install mcp-browser  webpack: the MCP TypeScript SDK's client for Chromium
    python -m proxies.apps.install litellm   the LiteLLM proxy in its own venv (.venvs/litellm)
    python -m proxies.apps.install agents    npm ci of the coding agents (Codex CLI, Claude Code)
    python -m proxies.apps.install --check   say what is missing, install nothing

Each step prints how long it took and how much it put on disk. LiteLLM gets a venv of its own:
`litellm[proxy]` pins its own FastAPI, pydantic, openai and uvicorn ranges, and ~750 MB of them
have no place in the lab's environment.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from proxies.apps.launch import AppMissing
from proxies.apps.litellm.kind import LITELLM_VENV
from proxies.apps.nextjs.build import NEXT_BIN, NEXT_BUILD, NEXT_PLACEHOLDER, NEXT_SITE
from proxies.apps.nodejs import (AGENTS_DIR, MCP_BROWSER_BUNDLE, MCP_BROWSER_SOURCE, NODE_DIR, NODE_MODULES,
                                 node_binary)

NODE_MIN = (20, 9)  # Next.js 16's floor
LITELLM_PIN = "litellm[proxy]==1.108.7"
STEPS = ("node", "next", "mcp-browser", "litellm", "agents")


def node_version() -> tuple[int, ...]:
    out = subprocess.run([node_binary(), "--version"], capture_output=True, text=True, check=True).stdout
    return tuple(int(part) for part in re.findall(r"\d+", out)[:3])


def _size(path: Path) -> str:
    # Each file once: npm hard-links Claude Code's 400 MB binary into two packages.
    files = {(f.stat().st_dev, f.stat().st_ino): f.stat().st_size
             for f in path.rglob("*") if f.is_file() and not f.is_symlink()}
    return f"{sum(files.values()) / 1e6:.0f} MB"


def _run(argv: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(list(argv), cwd=cwd, env={**os.environ, **(env or {})})
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed with status {result.returncode}")


def _npm_ci(folder: Path) -> None:
    npm = shutil.which("npm")
    if not npm:
        raise SystemExit("no `npm` on PATH: install npm (it comes with Node.js)")
    _run([npm, "ci", "--no-audit", "--no-fund", "--loglevel", "error"], folder)
    print(f"{folder.name}/node_modules: {_size(folder / 'node_modules')}")


def install_node() -> None:
    version = node_version()
    if version[:2] < NODE_MIN:
        raise SystemExit(f"node {'.'.join(map(str, version))} is too old: Next.js 16 needs "
                         f"{'.'.join(map(str, NODE_MIN))} or later")
    _npm_ci(NODE_DIR)


def install_agents() -> None:
    # Each agent is a native binary from its platform package (@openai/codex-linux-x64,
    # @anthropic-ai/claude-code-linux-x64): npm brings it, no download at first start.
    _npm_ci(AGENTS_DIR)


def install_next() -> None:
    if not (NODE_MODULES / "next").is_dir():
        raise SystemExit("Next.js is not installed: run `python -m proxies.apps.install node` first")
    # The rewrite destination is a placeholder each start replaces (proxies.apps.nextjs.build.next_dist).
    _run([node_binary(), str(NEXT_BIN), "build", str(NEXT_SITE)],
         NODE_DIR, env={"NEXT_TELEMETRY_DISABLED": "1", "STREAMLAB_UPSTREAM": NEXT_PLACEHOLDER,
                        "STREAMLAB_NEXT_DIST": os.path.relpath(NEXT_BUILD, NEXT_SITE)})
    print(f"next build: {_size(NEXT_BUILD)}")


def install_mcp_browser() -> None:
    if not (NODE_MODULES / "@modelcontextprotocol" / "sdk").is_dir():
        raise SystemExit("the MCP TypeScript SDK is not installed: run `python -m proxies.apps.install node` first")
    _run([node_binary(), str(MCP_BROWSER_SOURCE / "build.mjs")], NODE_DIR,
         env={"STREAMLAB_MCP_BROWSER_BUILD": str(MCP_BROWSER_BUNDLE.parent)})


def install_litellm() -> None:
    python = LITELLM_VENV / "bin" / "python"
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(LITELLM_VENV)], NODE_DIR)
    # uv beside the lab's Python (make setup installs it) resolves and downloads in parallel:
    # pip took minutes for LiteLLM's ~150 packages here.
    uv = Path(sys.executable).parent / "uv"
    if uv.exists():
        _run([str(uv), "pip", "install", "-q", "--python", str(python), LITELLM_PIN], NODE_DIR)
    else:
        _run([str(python), "-m", "pip", "install", "-q", LITELLM_PIN], NODE_DIR)
    print(f"{LITELLM_VENV.name} venv: {_size(LITELLM_VENV)}")


def problems() -> list[str]:
    found = []
    try:
        version = node_version()
        if version[:2] < NODE_MIN:
            found.append(f"node {'.'.join(map(str, version))} < {'.'.join(map(str, NODE_MIN))}")
    except (AppMissing, OSError, subprocess.CalledProcessError) as exc:
        found.append(str(exc))
    for path, what in ((NODE_MODULES / "express", "node"), (NEXT_BUILD / "BUILD_ID", "next"),
                       (MCP_BROWSER_BUNDLE, "mcp-browser"),
                       (LITELLM_VENV / "bin" / "litellm", "litellm"),
                       (AGENTS_DIR / "node_modules" / ".package-lock.json", "agents")):
        if not path.exists():
            found.append(f"{path} is missing: python -m proxies.apps.install {what}")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("steps", nargs="*", metavar="STEP", help=f"any of {', '.join(STEPS)} (default: all)")
    parser.add_argument("--check", action="store_true", help="report what is missing; install nothing")
    args = parser.parse_args(argv)
    unknown = [step for step in args.steps if step not in STEPS]
    if unknown:
        parser.error(f"unknown step {', '.join(unknown)}: choose from {', '.join(STEPS)}")
    if args.check:
        missing = problems()
        for line in missing:
            print(f"missing: {line}", file=sys.stderr)
        return 1 if missing else 0
    for step in args.steps or STEPS:
        started = time.monotonic()
        {"node": install_node, "next": install_next, "mcp-browser": install_mcp_browser, "litellm": install_litellm,
         "agents": install_agents}[step]()
        print(f"apps: {step} installed in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
