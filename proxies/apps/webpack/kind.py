"""webpack-dev-server as an app hop (proxies.apps.kind): node runs `dev-server.mjs`."""
from __future__ import annotations

from pathlib import Path

from proxies.apps.kind import AppKind
from proxies.apps.launch import Launch, require
from proxies.apps.nodejs import NODE_DIR, NODE_IMAGE, NODE_MODULES, node_binary, node_versions
from proxies.apps.webpack.settings import WebpackSettings


def launch(settings: WebpackSettings, workdir: Path, python: str) -> Launch:
    require(NODE_MODULES / "webpack-dev-server", "webpack-dev-server")
    return Launch([node_binary(), str(NODE_DIR / "dev-server.mjs")], cwd=NODE_DIR, env={
        "STREAMLAB_LISTEN": settings.listen, "STREAMLAB_UPSTREAM": settings.upstream,
        "STREAMLAB_COMPRESS": "1" if settings.compress else "0"})


KIND = AppKind(
    settings=WebpackSettings, launch=launch, versions=lambda: node_versions("webpack-dev-server", "webpack"),
    needs=("node-modules",), image=NODE_IMAGE)
