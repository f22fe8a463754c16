"""``python -m advisor_core`` runs the ``advisor`` command line."""

import os
import sys

# `python -m` puts the current directory first on sys.path; the directory being
# analysed must never be able to shadow a plugin or rule module.
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from advisor_core.cli import run_main  # noqa: E402

run_main()
