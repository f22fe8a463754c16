"""The op view: one rank's kernels as distinct ops, built once in columnar code.

``rank.op_view()`` returns an :class:`OpView` (cached on the rank). Rules reason about
its ``ops`` (a few thousand rows where the kernel table has millions) and never loop
over kernel rows; analyses that need kernel order use its :class:`Timeline` where the
view was built. Name and tensor parsing (:mod:`.names`, :mod:`.tensors`) live here once.

The names below are loaded on first use, so importing the name parsers does not load
pandas and numpy (``advisor rules`` and ``advisor lint`` start without them).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_WHERE = {
    "cell_path_in_layer": "names", "forward_cell": "names", "kernel_cell": "names", "kernel_scope": "names",
    "layer_of_scope": "names", "layer_prefix": "names", "op_primitive": "names", "pattern_for": "names",
    "describe_name": "names", "COMM_CORE_NAMES": "names", "fold_layer_index": "names", "LAYER_ITEM": "names",
    "norm_format": "tensors", "parse_dtypes": "tensors", "parse_formats": "tensors", "parse_shapes": "tensors",
    "OpView": "view", "Timeline": "view",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
