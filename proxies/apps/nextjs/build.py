"""The Next.js site's build: made once by `make setup` (proxies.apps.install), linked into each
running site's own dist folder with the run's upstream in place of the build's placeholder."""
from __future__ import annotations

import shutil
from pathlib import Path

from proxies.apps.nodejs import NODE_DIR, NODE_MODULES

NEXT_SITE = NODE_DIR / "next-site"
NEXT_BIN = NODE_MODULES / "next" / "dist" / "bin" / "next"
# `make setup` builds the site once into NEXT_BUILD; Next insists its distDir lies inside the
# workspace (this folder), so each running site's own dist folder is made under NEXT_RUNS.
NEXT_BUILD = NODE_DIR / ".next-build"
NEXT_RUNS = NODE_DIR / ".next-runs"
# The build's rewrite destination; each start sets the run's upstream in its place (see next_dist).
NEXT_PLACEHOLDER = "http://upstream.streamlab.invalid:9"


def run_dist(workdir: Path) -> Path:
    """The dist folder of the site whose run folder is `workdir`."""
    return NEXT_RUNS / workdir.name


def next_dist(dist: Path, upstream: str) -> Path:
    """A running site's own dist folder: the setup build linked in, the rewrite set to `upstream`.

    `rewrites()` is evaluated by `next build` and its destination baked into the build's
    manifests (measured: `next start` with another STREAMLAB_UPSTREAM still went to the build's),
    and a build takes ~20-30 s. So setup builds once against a placeholder, and each start links
    that build here with the placeholder in the three manifests replaced by the run's upstream.
    """
    shutil.rmtree(dist, ignore_errors=True)
    dist.mkdir(parents=True)
    for entry in NEXT_BUILD.iterdir():
        if entry.name in ("cache", "trace", "trace-build"):
            continue  # what Next writes while it runs stays with this run
        if entry.is_file() and NEXT_PLACEHOLDER in (text := entry.read_text(errors="replace")):
            (dist / entry.name).write_text(text.replace(NEXT_PLACEHOLDER, upstream))
        else:
            (dist / entry.name).symlink_to(entry)
    (dist / "cache").mkdir()
    return dist
