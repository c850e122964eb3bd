"""`python -m labs.bench.peers` (`make bench-peers`): labs/bench/peers/compare.py."""
from labs.bench.peers.compare import main

raise SystemExit(main())
