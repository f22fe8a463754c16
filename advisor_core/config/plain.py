"""Config values as plain JSON-able Python (no ruamel import: cheap for every caller)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["json_plain"]


def json_plain(value: Any) -> Any:
    """ruamel round-trip scalars and containers → ``dict`` (``str`` keys) / ``list`` / ``str`` / ``int`` /
    ``float`` / ``bool`` / ``None``, as a patch's ``test`` value or a rule's evidence needs them.

    Unlike :func:`advisor_core.config.document.to_plain` it does not keep alias sharing and it
    turns keys into strings: the result is meant for JSON, not for editing.
    """
    if isinstance(value, Mapping):
        return {str(k): json_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if type(value).__name__ == "ScalarBoolean":
            # ruamel loads an anchored ``&x true`` as an int subclass; a patch's ``test`` must say true
            return bool(value)
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value
