"""Shard strategies MindFormers' Llama sets from ``parallel_config``, and where they disagree.

Per-op ``in_strategy`` (``dp``/``mp`` = data/model parallel):

* column-parallel Linear (``wq``/``wk``/``wv``/``w1``/``w3``): ``((dp, 1), (mp, 1))`` — the weight
  ``(out, in)`` is split on ``out``; no forward communication;
* row-parallel Linear (``wo``/``w2``): ``((dp, mp), (1, mp))`` — split on the reduction axis, so
  the partial results need the expected ``forward_op`` AllReduce over ``mp``;
* norms and their casts ``((dp, 1, 1), …)``, residual adds ``((dp, 1, 1), (dp, 1, 1))``;
* ops on the head-split tensors (rotary, FlashAttention, transpose, SiLU, Mul): split the
  hidden/head axis over ``mp``.

A :class:`~advisor_core.simulate.faults.StrategyMismatch` replaces one op's strategy by one that
does not split the ``mp`` axis; the producer's out layout and the consumer's in layout then
disagree and MindSpore inserts ``redistribution_op_*`` chains (see :mod:`.layer`).
"""

from __future__ import annotations

from advisor_core.config.model_structure import LayerOp

__all__ = ["op_strategy", "render_strategy", "unsplit_strategy"]


def op_strategy(op: LayerOp, ndims: list[int], dp: int, mp: int) -> tuple[tuple[int, ...], ...] | None:
    """The in_strategy MindFormers gives ``op`` (``ndims``: rank of each tensor input)."""
    prim = op.prim
    if prim in ("Reshape",):
        return None
    if prim == "MatMul":
        col = op.comm is None
        return ((dp, 1), (mp, 1)) if col else ((dp, mp), (1, mp))
    split_axis = op.split is not None
    out: list[tuple[int, ...]] = []
    for nd in ndims:
        if nd <= 1:
            out.append((1,))
            continue
        dims = [1] * nd
        dims[0] = dp
        if split_axis:
            dims[-1] = mp
        out.append(tuple(dims))
    return tuple(out)


def unsplit_strategy(ndims: list[int], dp: int) -> tuple[tuple[int, ...], ...]:
    """The mismatching override: batch split only, the model-parallel axis left whole."""
    return tuple(tuple([dp] + [1] * (nd - 1)) if nd > 1 else (1,) for nd in ndims)


def render_strategy(strategy: tuple[tuple[int, ...], ...]) -> str:
    """``((8, 1), (1, 1))`` as MindSpore prints it (a 1-tuple keeps its comma: ``((1, 1),)``)."""
    parts = []
    for t in strategy:
        inner = ", ".join(str(x) for x in t)
        parts.append(f"({inner},)" if len(t) == 1 else f"({inner})")
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
