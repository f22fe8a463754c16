"""Step-time shares and severities, dtype sizes, and the rates assumed without a profile."""

from __future__ import annotations

from typing import Iterable

from advisor_core.engine.findings import Severity

# msprof-analyze's priority model: share of the step time.
HIGH_SHARE_PCT = 5.0
MEDIUM_SHARE_PCT = 3.0

# Assumed when a rule must estimate a time without a profile (documented in each rule's help).
ASSUMED_HBM_GBPS = 1600.0 * 0.6  # 910B-class HBM at a realistic 60 % efficiency
ASSUMED_CUBE_TFLOPS = 313.0 * 0.5  # fp16/bf16 cube at 50 % efficiency

DTYPE_BYTES = {
    "Float64": 8, "Float32": 4, "Float16": 2, "BFloat16": 2, "Int64": 8, "Int32": 4, "Int16": 2, "Int8": 1,
    "UInt8": 1, "Bool": 1, "DT_FLOAT": 4, "DT_FLOAT16": 2, "DT_BF16": 2, "DT_DOUBLE": 8, "DT_INT64": 8, "DT_INT32": 4,
    "DT_INT8": 1, "DT_BOOL": 1, "FLOAT": 4, "FLOAT16": 2, "BF16": 2,
}
# Higher = more precise. Used to tell lossy from lossless cast round trips.
PRECISION = {"Float64": 5, "Float32": 4, "BFloat16": 2, "Float16": 2, "Int64": 3, "Int32": 3, "Int16": 1, "Int8": 0, "UInt8": 0, "Bool": 0}


def severity_for_share(pct: float | None, *, floor: Severity = Severity.LOW) -> Severity:
    """msprof-analyze's model: ≥ 5 % of the step is high, ≥ 3 % medium."""
    if pct is None:
        return floor
    if pct >= HIGH_SHARE_PCT:
        return Severity.HIGH
    if pct >= MEDIUM_SHARE_PCT:
        return Severity.MEDIUM
    return floor


def share_pct(part_us: float | None, whole_us: float | None) -> float | None:
    """``part_us`` as a percentage of ``whole_us``; ``None`` when either is missing or the whole is 0."""
    if part_us is None or not whole_us:
        return None
    return 100.0 * part_us / whole_us


def tensor_bytes(shape: Iterable[int] | None, dtype: str | None) -> float | None:
    """Bytes of a tensor (2 per element for an unknown dtype); ``None`` for an unknown or dynamic shape."""
    if shape is None:
        return None
    n = 1
    for d in shape:
        if d is None or d < 0:
            return None
        n *= d
    return float(n * DTYPE_BYTES.get(dtype or "", 2))
