"""``python -m advisor_core.docs {tables|rules|hooks|all} [--check] [--docs-dir DIR]`` (see the package docstring)."""

from __future__ import annotations

import os
import sys

from advisor_core.docs.driver import main

if __name__ == "__main__":
    # As in advisor_core.__main__: the current directory must not shadow a rule module.
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    sys.exit(main())
