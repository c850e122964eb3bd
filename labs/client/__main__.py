"""`python -m labs.client URL`: the measuring client on its own (labs/client/cli.py)."""
from labs.client.cli import main

raise SystemExit(main())
