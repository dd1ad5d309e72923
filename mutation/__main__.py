"""``python -m mutation [...]``: the catalog, or ``--generated N`` / ``--recheck REPORT`` (mutants.main)."""

import sys

from .mutants import main

sys.exit(main())
