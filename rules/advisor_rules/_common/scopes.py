"""MindSpore full names: decoder-layer index, cell path, ``select_recompute`` patterns.

The parsing lives once in :mod:`advisor_core.opview.names` (the op view uses it for every
distinct kernel); rules import it from here.
"""

from __future__ import annotations

from advisor_core.opview.names import (
    LAYER_ITEM,
    cell_path_in_layer,
    fold_layer_index,
    layer_of_scope,
    layer_prefix,
    pattern_for,
)

__all__ = ["LAYER_ITEM", "cell_path_in_layer", "fold_layer_index", "layer_of_scope", "layer_prefix", "pattern_for"]
