"""The op view: one rank's kernels as distinct ops, built once in columnar code.

``rank.op_view()`` returns an :class:`OpView` (cached on the rank). Rules reason about
its ``ops`` (a few thousand rows where the kernel table has millions) and never loop
over kernel rows; analyses that need kernel order use its :class:`Timeline` where the
view was built. Name and tensor parsing (:mod:`.names`, :mod:`.tensors`) live here once.
"""

from advisor_core.opview.names import (
    cell_path_in_layer,
    forward_cell,
    kernel_cell,
    kernel_scope,
    layer_of_scope,
    layer_prefix,
    op_primitive,
    pattern_for,
)
from advisor_core.opview.tensors import norm_format, parse_dtypes, parse_formats, parse_shapes
from advisor_core.opview.view import COMM_CORE_NAMES, OpView, Timeline

__all__ = [
    "COMM_CORE_NAMES",
    "OpView",
    "Timeline",
    "cell_path_in_layer",
    "forward_cell",
    "kernel_cell",
    "kernel_scope",
    "layer_of_scope",
    "layer_prefix",
    "norm_format",
    "op_primitive",
    "parse_dtypes",
    "parse_formats",
    "parse_shapes",
    "pattern_for",
]
