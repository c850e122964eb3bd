"""Next.js as an app hop (proxies.apps.kind): `next start` of the setup build, in a dist folder of its own."""
from __future__ import annotations

import os
from pathlib import Path

from proxies.apps.kind import AppKind
from proxies.apps.launch import Launch, require
from proxies.apps.nextjs.build import NEXT_BIN, NEXT_BUILD, NEXT_SITE, next_dist, run_dist
from proxies.apps.nextjs.settings import NextjsSettings
from proxies.apps.nodejs import NODE_DIR, NODE_IMAGE, node_binary, node_versions


def launch(settings: NextjsSettings, workdir: Path, python: str) -> Launch:
    require(NEXT_BUILD / "BUILD_ID", "the Next.js site's build")
    return Launch([node_binary(), str(NEXT_BIN), "start", str(NEXT_SITE), "-H", settings.listen_host,
                   "-p", str(settings.listen_port)], cwd=NODE_DIR, env={
                       "NEXT_TELEMETRY_DISABLED": "1", "STREAMLAB_UPSTREAM": settings.upstream,
                       "STREAMLAB_NEXT_COMPRESS": "1" if settings.compress else "0",
                       "STREAMLAB_NEXT_ROUTE": settings.route,
                       "STREAMLAB_NEXT_DIST": os.path.relpath(run_dist(workdir), NEXT_SITE)})


KIND = AppKind(
    settings=NextjsSettings, launch=launch, versions=lambda: node_versions("next", "react"),
    needs=("node-modules", "next-build"), image=NODE_IMAGE,
    side_folder=lambda settings, workdir: next_dist(run_dist(workdir), settings.upstream))
