"""Express as an app hop (proxies.apps.kind): node runs `express-app.mjs`, its settings in the environment."""
from __future__ import annotations

from pathlib import Path

from proxies.apps.express.settings import ExpressSettings
from proxies.apps.kind import AppKind
from proxies.apps.launch import Launch, require
from proxies.apps.nodejs import NODE_DIR, NODE_IMAGE, NODE_MODULES, node_binary, node_versions


def launch(settings: ExpressSettings, workdir: Path, python: str) -> Launch:
    require(NODE_MODULES / "express", "Express")
    return Launch([node_binary(), str(NODE_DIR / "express-app.mjs")], cwd=NODE_DIR, env={
        "STREAMLAB_LISTEN": settings.listen,
        "STREAMLAB_UPSTREAM": settings.upstream, "STREAMLAB_COMPRESSION": settings.compression,
        "STREAMLAB_ABORT_ON_CLOSE": "1" if settings.abort_on_close else "0",
        "STREAMLAB_FORWARD": settings.forward})


KIND = AppKind(
    settings=ExpressSettings, launch=launch,
    versions=lambda: node_versions("express", "compression", "http-proxy-middleware"),
    needs=("node-modules",), image=NODE_IMAGE)
