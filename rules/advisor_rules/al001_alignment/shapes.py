"""Shapes: the (M, K, N) of MatMul kernels from ``kernel_details``, the alignment an op needs, and padding."""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

MATMUL_OPS = {"MatMul", "MatMulExt", "BatchMatMul", "BatchMatMulExt", "Dense", "MatMulV2", "MatMulV3", "BatchMatMulV2",
              "GroupedMatmul", "QuantBatchMatmul", "QuantBatchMatmulV3", "MatmulReduceScatter", "AllGatherMatmul"}
TRANSDATA_OPS = {"TransData", "TransDataRNN"}
COMM_CORES = {"HCCL", "COMMUNICATION"}
_SHAPE = re.compile(r"-?\d+")


def align_of(dtype: str | None) -> int:
    """The cube's alignment for an operand dtype: 32 for int8, else 16."""
    return 32 if dtype and "INT8" in dtype.upper() else 16


def parse_shapes(text: Any) -> list[list[int]]:
    """``"4096,4100;4100,11008"`` → ``[[4096, 4100], [4100, 11008]]`` (signs kept; missing → ``[]``)."""
    if text is None or (isinstance(text, float) and math.isnan(text)) or text is pd.NA:
        return []
    out = []
    for part in str(text).split(";"):
        dims = [int(x) for x in _SHAPE.findall(part)]
        if dims:
            out.append(dims)
    return out


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


def kernel_table(rank: Any) -> pd.DataFrame:
    """The rank's kernels (the columns AL001 reads) with ``per_step`` µs; ``attrs["steps"]`` is the step count."""
    cols = rank.columns("kernels") or []
    want = [c for c in ("name", "type", "accelerator_core", "duration_us", "input_shapes", "output_shapes",
                        "input_dtypes", "step_id") if c in cols]
    k = rank.table("kernels", want)
    steps = max(int(k["step_id"].dropna().nunique()), 1) if "step_id" in k else 1
    k = k.assign(per_step=k["duration_us"].astype(float) / steps)
    k.attrs["steps"] = steps
    return k


def matmuls(k: pd.DataFrame) -> list[tuple[Any, int, int, int, int, int]]:
    """(row, batch, M, K, N, align) of every MatMul-like kernel with static shapes."""
    out = []
    for r in k[k["type"].isin(MATMUL_OPS)].itertuples():
        shapes = parse_shapes(r.input_shapes)
        o = parse_shapes(r.output_shapes)
        if len(shapes) < 2 or not o:
            continue
        mkn = matmul_mkn(shapes[0], shapes[1], o[0])
        if mkn is None or min(mkn) < 0:
            continue
        batch = math.prod(o[0][:-2]) if len(o[0]) > 2 else 1
        out.append((r, batch, *mkn, align_of(getattr(r, "input_dtypes", None))))
    return out
