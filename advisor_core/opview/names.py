"""MindSpore full names: the launch op of a kernel, its cell, decoder layer and direction.

MindSpore names a device kernel ``<launch op full name>/<device kernel name>``
(``Default/…/wq-Linear/MatMul-op3/aclnnMatmul_MatMulV3Common_MatMulV3``); the full
name is a path of cell segments ``<attribute>-<CellClass>``, decoder layers are list
items ``<index>-<LayerClass>``, and the last segment is ``<Primitive>-op<N>``.
Backward kernels live under ``Gradients/`` and ``Grad_<Primitive>`` segments;
recomputed copies get a ``recompute_`` prefix. These functions read one name each;
the op view (:mod:`advisor_core.opview.build`) calls them once per distinct name.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, NamedTuple

# Accelerator cores whose kernels are communication (their time is waiting as much as working).
COMM_CORE_NAMES = frozenset({"HCCL", "COMMUNICATION"})
# ``<launch op full name>/<device kernel name>``: the part up to the ``<Op>-op<N>`` segment.
_KERNEL_SCOPE = re.compile(r"^(?P<scope>.*?/[A-Za-z]\w*-op\d+)(?:/.*)?$")
_LAYER_SEG = re.compile(r"^(\d+)-\w+$")
_CELL_SEG = re.compile(r"^(?P<attr>[A-Za-z_]\w*)-(?P<cls>\w+)$")
_OP_SEG = re.compile(r"^(?P<op>\w+)-op\d+$")
_WRAPPER_SEGS = ("Default", "recompute_Default", "Gradients")
_WRAPPER_PREFIXES = ("network-", "_backbone-", "_VirtualDatasetCell")


_OP_SEG_FULL = re.compile(r"[A-Za-z]\w*-op\d+")
# A decoder layer's list item inside a path, ``/3-LLamaDecodeLayer``: what :func:`fold_layer_index` folds.
LAYER_ITEM = re.compile(r"/\d+-(\w+)(?=/|$)")


class NameParts(NamedTuple):
    """Everything the op view reads from one kernel name (see :func:`describe_name`)."""

    scope: str | None
    primitive: str | None
    cell: str
    forward_cell: str
    backward: bool
    grad: str
    layer: int | None
    recompute: bool


@lru_cache(maxsize=1 << 18)
def describe_name(name: str) -> NameParts:
    """:func:`kernel_scope`, :func:`op_primitive`, :func:`kernel_cell`, :func:`forward_cell`,
    :func:`layer_of_scope` and the recompute flag of one kernel name, splitting it once.

    Equal to calling each of those functions (a test holds them together); the op view
    calls this once per distinct kernel name; the ranks of a run share their kernel names,
    so the parse is cached for the process. Everything but the primitive and the scope
    comes from the path above the op segment, which the ops of one cell share: that part
    is parsed once per cell (:func:`_cell_parts`).
    """
    segs = name.split("/")
    for i in range(1, len(segs)):
        seg = segs[i]
        if "-op" in seg and _OP_SEG_FULL.fullmatch(seg):
            break
    else:
        return _describe_unscoped(name, segs)
    parent = "/".join(segs[:i])
    cell, forward, backward, grad, layer, recompute = _cell_parts(parent)
    m = _OP_SEG.match(seg)
    return NameParts(f"{parent}/{seg}", m.group("op") if m else None, cell, forward, backward, grad, layer,
                     recompute or "recompute_" in seg)


@lru_cache(maxsize=1 << 16)
def _cell_parts(parent: str) -> tuple[str, str, bool, str, int | None, bool]:
    """(cell, forward cell, backward, gradient segment, layer, recompute) of the path above an op segment."""
    segs = parent.split("/")
    kept, grads = _split_gradient_segments([x.removeprefix("recompute_") for x in segs if x != "Gradients"])
    fwd = segs[1:] if segs[0] == "Gradients" else segs
    forward = "/".join([x for x in fwd if not x.startswith("Grad_")])
    backward = parent == "Gradients" or parent.startswith("Gradients/") or bool(grads)
    return ("/".join(kept), forward, backward, grads[-1] if grads else "", _first_layer(segs),
            "recompute_" in parent)


def _split_gradient_segments(segs: list[str]) -> tuple[list[str], list[str]]:
    """(cell segments, gradient segments: those starting with "grad" in any case), each in order."""
    kept: list[str] = []
    grads: list[str] = []
    for x in segs:  # one pass, lower-casing only what could start with "grad"
        (grads if x[:1] in "gG" and x.lower().startswith("grad") else kept).append(x)
    return kept, grads


def _first_layer(segs: list[str]) -> int | None:
    for seg in segs:
        lm = _LAYER_SEG.match(seg) if seg[:1].isdigit() else None
        if lm:
            return int(lm.group(1))
    return None


def _describe_unscoped(name: str, segs: list[str]) -> NameParts:
    """:func:`describe_name` of a name without an op segment (a GE kernel, a bare full name): the whole name
    stands for the scope."""
    kept, grads = _split_gradient_segments([x.removeprefix("recompute_") for x in segs if x != "Gradients"][:-1])
    fwd = segs[1:] if segs[0] == "Gradients" and len(segs) > 1 else segs
    forward = "/".join([x for x in fwd[:-1] if not x.startswith("Grad_")])
    return NameParts(None, None, "/".join(kept), forward, name.startswith("Gradients/") or bool(grads),
                     grads[-1] if grads else "", _first_layer(segs), "recompute_" in name)


def kernel_scope(name: str) -> str | None:
    """The IR full name a kernel was launched for.

    A bare full name (CPU profiler, data dump) is its own scope; GE names
    (``trans_TransData_13``) have none.
    """
    m = _KERNEL_SCOPE.match(name)
    return m.group("scope") if m else None


def kernel_cell(name: str) -> tuple[str, bool, str]:
    """(cell scope, is-backward, gradient segment) of a kernel name.

    Forward and backward kernels of one cell share the cell scope:
    ``Gradients/Default/…/wq-Linear/Grad_MatMul/TransData-op1/trans_TransData_7`` →
    (``Default/…/wq-Linear``, True, ``Grad_MatMul``); a recomputed copy's
    ``recompute_`` prefix is dropped.
    """
    scope = kernel_scope(name) or name
    segs = [s.removeprefix("recompute_") for s in scope.split("/") if s != "Gradients"]
    grads = [s for s in segs[:-1] if s.lower().startswith("grad")]
    keep = [s for s in segs[:-1] if not s.lower().startswith("grad")]
    return "/".join(keep), scope.startswith("Gradients/") or bool(grads), (grads[-1] if grads else "")


def forward_cell(name: str) -> str:
    """The forward cell a kernel belongs to: ``Gradients/`` and ``Grad_*`` segments and the op segment dropped."""
    scope = kernel_scope(name) or name
    segs = [x for x in scope.removeprefix("Gradients/").split("/")[:-1] if not x.startswith("Grad_")]
    return "/".join(segs)


def op_primitive(scope: str | None) -> str | None:
    """``…/MatMul-op3`` → ``MatMul`` (``None`` when the last segment is not an op)."""
    if not scope:
        return None
    m = _OP_SEG.match(scope.rpartition("/")[2])
    return m.group("op") if m else None


def layer_of_scope(scope: str | None) -> int | None:
    """``…/layers-CellList/3-LLamaDecodeLayer/…`` → 3 (``None`` outside a layer list)."""
    if not scope:
        return None
    for seg in scope.split("/"):
        m = _LAYER_SEG.match(seg)
        if m:
            return int(m.group(1))
    return None


@lru_cache(maxsize=1 << 18)
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
            if seg in _WRAPPER_SEGS or seg.startswith(_WRAPPER_PREFIXES):
                start = i + 1
    out = []
    for seg in segs[start:]:
        m = _CELL_SEG.match(seg)
        if m and not _OP_SEG.match(seg):
            out.append(m.group("attr"))
    return tuple(out)


def fold_layer_index(path: str) -> str:
    """``…/layers-CellList/3-LLamaDecodeLayer/…`` → ``…/layers-CellList/N-LLamaDecodeLayer/…``: one cell of every layer
    under one name (pandas' ``str.replace`` takes :data:`LAYER_ITEM` and ``r"/N-\\1"`` for a column)."""
    return LAYER_ITEM.sub(r"/N-\1", path)


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
