"""MindSpore full names (scopes): decoder-layer index, cell path, ``select_recompute`` patterns."""

from __future__ import annotations

import re
from typing import Iterable

_LAYER_SEG = re.compile(r"^(\d+)-\w+$")
_CELL_SEG = re.compile(r"^(?P<attr>[A-Za-z_]\w*)-(?P<cls>\w+)$")
_OP_SEG = re.compile(r"^(?P<op>\w+)-op\d+$")


def layer_of_scope(scope: str | None) -> int | None:
    """``…/layers-CellList/3-LLamaDecodeLayer/…`` → 3 (``None`` outside a layer list)."""
    if not scope:
        return None
    for seg in scope.split("/"):
        m = _LAYER_SEG.match(seg)
        if m:
            return int(m.group(1))
    return None


def cell_path_in_layer(scope: str | None) -> tuple[str, ...]:
    """Attribute names of the cells between the decoder layer and the op.

    ``…/0-LLamaDecodeLayer/feed_forward-LlamaFeedForward/w1-Linear/Reshape-op3`` →
    ``("feed_forward", "w1")`` (what ``select_recompute`` patterns match).
    """
    if not scope:
        return ()
    segs = scope.split("/")
    start = None
    for i, seg in enumerate(segs):
        if _LAYER_SEG.match(seg):
            start = i + 1
    if start is None:
        # No decoder layer (a small net): the cells below the training wrappers.
        start = 0
        for i, seg in enumerate(segs):
            if seg in ("Default", "recompute_Default", "Gradients") or seg.startswith(("network-", "_backbone-", "_VirtualDatasetCell")):
                start = i + 1
    out = []
    for seg in segs[start:]:
        m = _CELL_SEG.match(seg)
        if m and not _OP_SEG.match(seg):
            out.append(m.group("attr"))
    return tuple(out)


def layer_prefix(scope: str | None) -> str | None:
    """The scope up to and including the decoder layer segment."""
    if not scope:
        return None
    segs = scope.split("/")
    for i, seg in enumerate(segs):
        if _LAYER_SEG.match(seg):
            return "/".join(segs[: i + 1])
    return None


def pattern_for(cell_path: Iterable[str], attr: str) -> str:
    """A ``select_recompute`` pattern: attribute names joined by the literal ``\\.``."""
    return "\\.".join([*cell_path, attr])
