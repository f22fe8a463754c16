"""(B) When each gradient exists: from the IR's data flow, the backward kernels' cells, or the forward order.

Any model: a parameter's cell is read from its name (``layer1.0.conv1.weight``) and found on the
kernels' scopes behind the training wrappers (:func:`model_root`); readiness is relative to the
compute stream's end in each step (see :func:`readiness`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from advisor_core.engine import RuleContext
from advisor_rules._common import ir_dumps_for

# ``<attribute>-<CellClass>`` (``layer1-SequentialCell``, ``0-ResidualBlock``, ``wq-Linear``); ops end in ``-op<N>``
_CELL_SEG = re.compile(r"^(?P<attr>\w+?)-(?P<cls>[A-Za-z_]\w*)$")
_OP_SEG = re.compile(r"^\w+-op\d+$")
NAMED_SHARE = 0.8  # parameters with gradient kernels of their own, for those kernels to be trusted
INVERSIONS = 0.2  # parameter pairs allowed to come out in parameter order (not reversed) by backward names


@lru_cache(maxsize=1 << 16)  # one call per distinct scope: every rank of a job launches the same ones
def cell_path(scope: str) -> tuple[str, ...]:
    """Every cell attribute on a kernel's scope, outermost first, whatever the model.

    ``Gradients/Default/network-WithLossCell/_backbone-ResNet/layer1-SequentialCell/0-ResidualBlock/
    conv1-Conv2d/Grad_Conv2D/Conv2DBackpropFilter-op0`` → ``(network, _backbone, layer1, 0, conv1)``:
    the ``Gradients``/``recompute_`` wrappers, gradient segments and the op are not cells.
    """
    out = []
    for seg in scope.split("/"):
        attr = _segment_attr(seg)
        if attr is _OP:
            break
        if attr is not None:
            out.append(attr)
    return tuple(out)


_OP = object()  # a scope segment naming the op: the cells end before it


@lru_cache(maxsize=1 << 14)  # the scopes of a model repeat a few hundred distinct segments
def _segment_attr(seg: str) -> Any:
    """A scope segment's cell attribute, ``_OP`` for the op's own segment, ``None`` for anything else."""
    seg = seg.removeprefix("recompute_")
    if _OP_SEG.match(seg):
        return _OP
    m = _CELL_SEG.match(seg)
    return m.group("attr") if m else None


def gradient_kernels(ir: Any, trained: set[str]) -> dict[str, str]:
    """Per trainable parameter, the full name of the backward kernel that produces its gradient.

    The optimizer updates each parameter from its gradient (``ApplyMomentum(w, m, lr, grad, …)``,
    ``AdamWeightDecay(w, m, v, …, grad)``); followed back through what only carries it (the
    grad reducer's AllReduce and mean, casts, ``TupleGetItem`` of a multi-output gradient such as
    BatchNormGrad's), the gradient comes from a node under ``Gradients/``: whatever the model and
    its kernel names, that kernel's end is when the gradient exists.
    """
    out: dict[str, str] = {}
    for n in ir.iter_nodes():
        refs = n.operand_refs
        if not refs or "optimizer" not in (n.scope or ""):
            continue
        p = ir.resolve(n, refs[0])
        name = getattr(p, "name", None) if p is not None and not hasattr(p, "op") else None
        if name not in trained or name in out:
            continue
        for r in refs[1:]:
            src = _gradient_source(ir, n, r)
            if src is not None:
                out[name] = src
                break
    return out


# Nodes a gradient passes through without a kernel of their own (views and plumbing)
_NO_KERNEL = {"TupleGetItem", "MakeTuple", "Depend", "Load", "UpdateState", "Reshape", "ExpandDims", "Squeeze", "Flatten"}


def _gradient_source(ir: Any, node: Any, ref: Any) -> str | None:
    """Full name of the backward kernel behind operand ``ref`` of ``node`` (first operands followed), else ``None``."""
    cur = ir.resolve(node, ref) if ref.kind in ("node", "crossref") else None
    for _ in range(12):
        if cur is None or not hasattr(cur, "op"):
            return None
        if (cur.scope or "").startswith("Gradients/") and cur.op not in _NO_KERNEL:
            return cur.kernel_full_name or cur.scope
        nxt = [r for r in cur.operand_refs if r.kind in ("node", "crossref")]
        if not nxt:
            return None
        cur = ir.resolve(cur, nxt[0])
    return None


def model_root(params: list[tuple[str, float]], paths: Any) -> tuple[str, ...]:
    """The cells that wrap the model on the kernels' scopes (``(network, _backbone)``), found from the parameters.

    A parameter ``layer1.0.conv1.weight`` belongs to cell ``(layer1, 0, conv1)``; the scopes carry
    that cell behind the training wrappers. The wrapper prefix most parameters' cells sit behind is
    the root; it keeps ``conv1`` (the stem) apart from ``layer1.0.conv1``.
    """
    behind: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for kp in paths:
        for i in range(len(kp)):
            behind.setdefault(kp[i:], []).append(kp[:i])
    votes: dict[tuple[str, ...], int] = {}
    for name, _ in params:
        for root in set(behind.get(tuple(name.split(".")[:-1]), ())):
            votes[root] = votes.get(root, 0) + 1
    return max(votes, key=lambda r: (votes[r], -len(r))) if votes else ()


def readiness(tail: dict[str, Any], params: list[tuple[str, float]]) -> list[float]:
    """Per parameter: when its gradient exists in the step's last backward, µs relative to the stream's end (≤ 0).

    Averaged over the profiled steps; all micro batches launch the same kernels, so the last end
    in a step is the last micro batch's; a parameter nothing places counts as ready at the end.
    ``tail["ready_from"]`` says which evidence placed them, best first:

    1. the IR's data flow: the kernel that produces each gradient (:func:`gradient_kernels`) —
       compilers defer weight gradients (a real MindSpore ResNet-50 kernel graph runs most conv
       weight gradients after the input gradients of the earlier blocks), so a cell's place in
       the backward is not when its gradient exists;
    2. the backward kernels of the parameter's cell and the cells inside it
       (``layer1.0.conv1.weight`` → ``…/layer1-SequentialCell/0-ResidualBlock/conv1-Conv2d/…``,
       behind the wrappers :func:`model_root` finds), when those names tell the parameters apart:
       :data:`NAMED_SHARE` of the parameters have kernels of their own and at most
       :data:`INVERSIONS` of the pairs come out in parameter order instead of reversed. MindSpore's
       graph reuse breaks that: identical blocks share one compiled backward whose kernels carry the
       first block's scope (a real ResNet-50 dump names every BatchNormGrad after the stem's ``bn1``);
    3. the forward order, whose kernels keep their cells: the backward runs the forward in reverse,
       so a cell's gradient is ready once the backward has done the share of the last micro batch's
       backward that the cells before it take in the forward.
    """
    from_ir = _from_gradient_kernels(tail, params)
    if from_ir is not None:
        tail["ready_from"] = "the kernels producing them (IR data flow)"
        return from_ir
    ready, named = _from_backward_names(tail, params)
    tail["ready_from"] = "the backward kernels of their cells"
    if named >= NAMED_SHARE * len(params) and _inversions(ready) <= INVERSIONS:
        return ready
    mirrored = _from_forward_order(tail, params)
    if mirrored is None:
        return ready
    tail["ready_from"] = ("the backward reaches their cells in reverse forward order (backward kernel names do not "
                          "tell the parameters apart)")
    return mirrored


def _from_gradient_kernels(tail: dict[str, Any], params: list[tuple[str, float]]) -> list[float] | None:
    """Readiness from each gradient's producing kernel (:func:`gradient_kernels`), when most are in the profile."""
    import numpy as np

    producers, ends, windows = tail.get("grad_kernels") or {}, tail.get("bwd_ops") or {}, tail["windows"]
    found = [ends.get(producers.get(name, "")) for name, _ in params]
    if sum(f is not None for f in found) < NAMED_SHARE * len(params):
        return None
    out = []
    for f in found:
        rel = [((f.get(wi, bwd_end) if f else bwd_end) - stream_end) / 1000.0
               for wi, (_, _, bwd_end, stream_end) in enumerate(windows)]
        out.append(float(np.mean(rel)) if rel else 0.0)
    return out


def _from_backward_names(tail: dict[str, Any], params: list[tuple[str, float]]) -> tuple[list[float], int]:
    """Readiness from the backward kernels of each parameter's cell, and how many parameters have any."""
    import numpy as np

    by_path, windows = tail["bwd_last"], tail["windows"]
    root = model_root(params, by_path)
    out, named = [], 0
    for name, _ in params:
        cell = root + tuple(name.split(".")[:-1])
        mine = [wins for kp, wins in by_path.items() if kp[:len(cell)] == cell]
        named += bool(mine)
        rel = []
        for wi, (_, _, bwd_end, stream_end) in enumerate(windows):
            ends = [wins[wi] for wins in mine if wi in wins]
            rel.append(((max(ends) if ends else bwd_end) - stream_end) / 1000.0)
        out.append(float(np.mean(rel)) if rel else 0.0)
    return out, named


def _inversions(ready: list[float]) -> float:
    """Share of parameter pairs whose gradient is ready in parameter order (earlier parameter first)."""
    import numpy as np

    r = np.asarray(ready, dtype=float)
    if len(r) > 2000:  # the pairs grow quadratically: an even sample tells the same
        r = r[np.linspace(0, len(r) - 1, 2000).astype(int)]
    later = np.triu(np.ones((len(r), len(r)), dtype=bool), 1)  # pairs i < j
    diff = r[None, :] - r[:, None]  # ready[j] − ready[i]
    pairs = int((later & (diff != 0)).sum())
    return float((later & (diff > 0)).sum()) / pairs if pairs else 0.0


def _from_forward_order(tail: dict[str, Any], params: list[tuple[str, float]]) -> list[float] | None:
    """Readiness from the forward order mirrored onto the last micro batch's backward (``None`` without forward kernels)."""
    import numpy as np

    order = tail.get("fwd_order") or []
    total = sum(us for _, us in order)
    if not total or not tail.get("fwd_ends"):
        return None
    root = model_root(params, [p for p, _ in order])
    before, acc = [], 0.0
    for _, us in order:
        before.append(acc)
        acc += us
    out = []
    for name, _ in params:
        cell = root + tuple(name.split(".")[:-1])
        hit = [b for (kp, _), b in zip(order, before) if kp[:len(cell)] == cell]
        share = min(hit) / total if hit else 0.0  # forward time of the cells before it: their backward comes after
        rel = [(bwd_end - share * (bwd_end - fwd_end) - stream_end) / 1000.0
               for (_, _, bwd_end, stream_end), fwd_end in zip(tail["windows"], tail["fwd_ends"])]
        out.append(float(np.mean(rel)) if rel else 0.0)
    return out


def stage_gradient_kernels(ctx: RuleContext, rank: Any, stage: int, names: set[str]) -> dict[str, str]:
    """:func:`gradient_kernels` of the rank's IR: the kernel graph first (its names are the profile's), else the front end."""
    cfg = ctx.config
    rd = ir_dumps_for(ctx, rank.rank_id, stage, cfg.pipeline_stages if cfg is not None else 1,
                      cfg.device_count if cfg is not None else None)
    for kind in ("backend", "frontend"):
        ir = ctx.ir_graph(kind, rd) if rd is not None else None
        found = gradient_kernels(ir, names) if ir is not None else {}
        if found:
            return found
    return {}
