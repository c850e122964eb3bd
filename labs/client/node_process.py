"""A Node.js client script as a subprocess that prints one JSON object a line (fetch-client.mjs, the
official SDKs' clients): each line parsed as it arrives, the process killed past a hard limit and
when the reader stops early."""
from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any, Generator, Sequence

from proxies.apps.nodejs import NODE_DIR, node_binary

# Past this, the Node process is killed: no lab stream lasts this long.
HARD_LIMIT_S = 120.0


def json_lines(script: Path, args: Sequence[str],
               hard_limit_s: float = HARD_LIMIT_S) -> Generator[dict[str, Any], None, None]:
    """Runs `node SCRIPT ARGS...` in the Node apps' folder (where its packages are) and yields each
    line it prints, parsed; a non-zero exit raises with the end of its stderr."""
    process = subprocess.Popen([node_binary(), str(script), *args], cwd=NODE_DIR,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(hard_limit_s, process.kill)
    watchdog.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            yield json.loads(line)
        if process.wait(timeout=10) != 0:
            stderr = process.stderr.read() if process.stderr else ""
            raise RuntimeError(f"node {script.name} exited {process.returncode}: {stderr.strip()[-300:]}")
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()
