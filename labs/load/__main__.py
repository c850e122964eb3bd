"""`python -m labs.load`: the load lab's own command line (options: --help)."""
from __future__ import annotations

import sys

from labs.load.cli import main

sys.exit(main())
