"""The core's table loaders, registered through the same hook a plugin uses."""

from __future__ import annotations

from advisor_core.engine.hookspecs import hookimpl
from advisor_core.loaders.registry import BUILTIN_LOADERS, TableLoader


@hookimpl
def advisor_register_loaders() -> list[TableLoader]:
    return list(BUILTIN_LOADERS)
