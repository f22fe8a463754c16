"""Cluster helpers shared by the CL rules: robust outliers among peers, and per-rank step figures.

Ranks of one pipeline stage run the same program, so they should take the same time; a rank
above its peers by more than the noise (``k`` × the scaled median absolute deviation) and by a
share of the step that matters is a straggler. Medians and MADs, not means and standard
deviations: one straggler must not move the yardstick it is measured against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAD_SCALE = 1.4826  # MAD → standard deviation for normal noise


@dataclass(frozen=True)
class Outlier:
    rank: int
    value: float
    median: float
    threshold: float  # excess above the median that counts

    @property
    def excess(self) -> float:
        return self.value - self.median


def high_outliers(values: dict[int, float], *, k: float, floor: float) -> tuple[float, list[Outlier]]:
    """(median, ranks above median + max(k·MAD, floor)), largest excess first; needs ≥ 3 values."""
    import numpy as np

    if len(values) < 3:
        return float("nan"), []
    arr = np.array(list(values.values()), dtype=float)
    med = float(np.median(arr))
    mad = float(np.median(np.abs(arr - med))) * MAD_SCALE
    thr = max(k * mad, floor)
    out = [Outlier(r, v, med, thr) for r, v in values.items() if v - med > thr]
    return med, sorted(out, key=lambda o: -o.excess)


def low_outliers(values: dict[int, float], *, ratio: float) -> tuple[float, list[Outlier]]:
    """(median, ranks below ``ratio`` × median), lowest first; needs ≥ 3 values."""
    import numpy as np

    if len(values) < 3:
        return float("nan"), []
    med = float(np.median(np.array(list(values.values()), dtype=float)))
    out = [Outlier(r, v, med, med * ratio) for r, v in values.items() if med > 0 and v < med * ratio]
    return med, sorted(out, key=lambda o: o.value)


def steady_breakdown(rank: Any) -> dict[str, float] | None:
    """Mean per-step figures (µs) over the rank's steady steps: total, computing, not-overlapped
    communication, communication, free, and the data wait at the step start (``preparing``)."""
    import numpy as np

    from advisor_core.analyses.step_time import step_breakdown

    bd = step_breakdown(rank)
    if bd is None or bd.empty:
        return None
    if len(bd) > 2 and bd["step"].notna().all():
        bd = bd.iloc[1:]  # the first profiled step carries warm-up (queue prefill, first launches)
    out: dict[str, float] = {"steps": float(len(bd))}
    for col in ("total_us", "computing_us", "communication_not_overlapped_us", "communication_us", "free_us",
                "preparing_us"):
        v = bd[col].astype(float).to_numpy() if col in bd else np.array([np.nan])
        out[col] = float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
    return out


def rank_label(ranks: list[int]) -> str:
    """``0-5, 7`` for a list of rank ids."""
    rs = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        parts.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ", ".join(parts)


def parallel_group(rank: Any, kind: str) -> list[int] | None:
    """Global ranks of ``rank``'s ``kind`` group (``dp``, ``tp`` or ``pp``), sorted, as the profile's
    ``parallel_group_info`` (``profiler_metadata.json``) gives them; ``None`` when it does not."""
    layout = getattr(rank, "parallel", None)
    return layout.group(kind) if layout is not None else None

