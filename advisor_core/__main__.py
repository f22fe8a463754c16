"""``python -m advisor_core`` runs the ``advisor`` command line."""

import sys

from advisor_core.cli import main

sys.exit(main())
