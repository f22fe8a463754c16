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


def pad_to(v: int, a: int) -> int:
    """``v`` rounded up to a multiple of ``a``."""
    return -(-v // a) * a


def matmuls(ops: pd.DataFrame) -> list[tuple[Any, int, int, int, int, int]]:
    """(op, batch, M, K, N, align) of every MatMul-like op of an op view with static shapes.

    ``op`` is the op view row (a namedtuple: ``Index`` is the op id; ``count``,
    ``total_us``, ``per_step_us`` are over every launch of the op).
    """
    out = []
    for r in ops[ops["type"].isin(MATMUL_OPS)].itertuples():
        shapes = operand_shapes(r.in_shapes)
        o = operand_shapes(r.out_shapes)
        if len(shapes) < 2 or not o:
            continue
        mkn = matmul_mkn(shapes[0], shapes[1], o[0])
        if mkn is None or min(mkn) < 0:
            continue
        batch = math.prod(o[0][:-2]) if len(o[0]) > 2 else 1
        out.append((r, batch, *mkn, align_of(r.input_dtypes)))
    return out
