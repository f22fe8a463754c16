"""Shapes: the (M, K, N) of MatMul kernels from ``kernel_details``, the alignment an op needs, and padding."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - heavy imports are made where used
    import pandas as pd


MATMUL_OPS = {"MatMul", "MatMulExt", "BatchMatMul", "BatchMatMulExt", "Dense", "MatMulV2", "MatMulV3", "BatchMatMulV2",
              "GroupedMatmul", "QuantBatchMatmul", "QuantBatchMatmulV3", "MatmulReduceScatter", "AllGatherMatmul"}
TRANSDATA_OPS = {"TransData", "TransDataRNN"}
COMM_CORES = {"HCCL", "COMMUNICATION"}


def align_of(dtype: str | None) -> int:
    """The cube's alignment for an operand dtype: 32 for int8, else 16."""
    return 32 if dtype and "INT8" in dtype.upper() else 16


def operand_shapes(shapes: tuple[tuple[int, ...], ...]) -> list[list[int]]:
    """The op view's parsed shapes without scalars: ``((4096, 4100), ())`` → ``[[4096, 4100]]``."""
    return [list(s) for s in shapes if s]


def matmul_mkn(a: list[int], b: list[int], out: list[int]) -> tuple[int, int, int] | None:
    """(M, K, N) of a 2-D-ish matmul from input/output shapes, transposes inferred."""
    if len(a) < 2 or len(b) < 2 or len(out) < 2:
        return None
    m, n = out[-2], out[-1]
    k = a[-1] if a[-2] == m else a[-2]
    return m, k, n


def by_weight_roles(m: int, k: int, n: int, weight: tuple[int, int] | None) -> tuple[int, int, int]:
    """(M, K, N) of a product whose positional dims are ``m, k, n``, with roles taken from the layer's weight.

    ``weight`` is the (K, N) of the forward product ``x·Wᵀ`` (the weight's contracted and output dims). The
    same two dims reappear in its backward products, in other positions: ``dX = dY·W`` contracts over N,
    and ``dW = dYᵀ·X`` contracts over the tokens and puts N first. Whatever the position, the weight's
    dims keep their roles and the remaining dim is the tokens (M). Without a weight (attention's
    activation products), or when the product does not hold both weight dims, the positions stand.
    """
    if weight is None:
        return m, k, n
    rest = [m, k, n]
    for v in weight:
        if v not in rest:
            return m, k, n
        rest.remove(v)
    return rest[0], weight[0], weight[1]


def pad_to(v: int, a: int) -> int:
    """``v`` rounded up to a multiple of ``a``."""
    return -(-v // a) * a


def matmuls(ops: pd.DataFrame) -> list[tuple[Any, int, int, int, int, int]]:
    """(op, batch, M, K, N, align) of every MatMul-like op of an op view with static shapes.

    ``op`` is the op view row (a namedtuple: ``Index`` is the op id; ``count``,
    ``total_us``, ``per_step_us`` are over every launch of the op). Roles follow the layer's
    weight (:func:`weight_of_cells`, :func:`by_weight_roles`): M is always the token dim, K and N
    the weight's dims, in the backward products too.
    """
    mm = ops[ops["type"].isin(MATMUL_OPS)]
    weights = weight_of_cells(mm)
    out = []
    for r in mm.itertuples():
        shapes = operand_shapes(r.in_shapes)
        o = operand_shapes(r.out_shapes)
        if len(shapes) < 2 or not o:
            continue
        mkn = matmul_mkn(shapes[0], shapes[1], o[0])
        if mkn is None or min(mkn) < 0:
            continue
        batch = math.prod(o[0][:-2]) if len(o[0]) > 2 else 1
        out.append((r, batch, *by_weight_roles(*mkn, weights.get(r.cell)), align_of(r.input_dtypes)))
    return out


def rank_matmuls(rank: Any, view: Any) -> list[tuple[Any, int, int, int, int, int]]:
    """:func:`matmuls` of ``view`` (the rank's op view), computed once per rank: the dims, the savings and the
    measure all read them. Treat the list as read-only."""
    held = rank.cached("al001_matmuls", lambda: (view.ops, matmuls(view.ops)))
    return held[1] if held[0] is view.ops else matmuls(view.ops)


def weight_of_cells(mm: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Cell → the (K, N) of its weight, read from the cell's forward MatMul ``x·Wᵀ`` (operand 1 is the weight,
    as in every Linear/Dense): the cells with exactly one forward 2-D product shape; attention's batched
    activation products and cells with several forward shapes have none (their positions stand)."""
    found: dict[str, set[tuple[int, int]]] = {}
    fwd = ~mm["backward"].astype(bool).to_numpy()
    # distinct ops, only the three columns read
    for in_shapes, out_shapes, cell in zip(*(mm[c].to_numpy()[fwd] for c in ("in_shapes", "out_shapes", "cell"))):
        shapes = operand_shapes(in_shapes)
        o = operand_shapes(out_shapes)
        if len(shapes) < 2 or not o or len(o[0]) != 2 or len(shapes[1]) != 2 or not cell:
            continue
        mkn = matmul_mkn(shapes[0], shapes[1], o[0])
        if mkn is None or min(mkn) < 0 or mkn[2] not in shapes[1] or mkn[1] not in shapes[1]:
            continue
        found.setdefault(str(cell), set()).add((mkn[1], mkn[2]))
    return {cell: next(iter(w)) for cell, w in found.items() if len(w) == 1}
