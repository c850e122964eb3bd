"""`python -m labs.load`: the load lab's own command line (options: --help); a stop signal stops it
as `python -m labs run load` is stopped (server.signals)."""
from __future__ import annotations

import sys

from labs.load.cli import main
from server.signals import run_stoppable

sys.exit(run_stoppable(main, "python -m labs.load"))
