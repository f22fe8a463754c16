"""The core's table loaders, registered through the same hook a plugin uses.

The catalogue (and pandas/pyarrow with it) is imported only when a command asks for
loaders, so `advisor --help`, `rules`, `explain` and `lint` start without them.
"""

from __future__ import annotations

from typing import Any

from advisor_core.engine.hookspecs import hookimpl


@hookimpl
def advisor_register_loaders() -> list[Any]:
    from advisor_core.loaders.registry import BUILTIN_LOADERS

    return list(BUILTIN_LOADERS)
