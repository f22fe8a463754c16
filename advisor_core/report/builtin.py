"""The core's output formats, registered through the same hook a plugin uses."""

from __future__ import annotations

from typing import Any

from advisor_core.engine.hookspecs import hookimpl
from advisor_core.report.formats import BUILTIN_FORMATS


@hookimpl
def advisor_register_formats() -> list[Any]:
    return list(BUILTIN_FORMATS)
