import sys

from labs.bench.cli import main

sys.exit(main())
