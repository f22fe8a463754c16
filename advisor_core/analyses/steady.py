"""Steady-state steps: the warm-up at the start of a profile detected and left out, and how.

The first steps of a run are slower for reasons a fix does not touch — graph compilation,
the data queue filling up, memory pools growing — so step statistics and data waits are
taken over the steady steps. A leading step is warm-up when it is longer than the
steady level by a margin that no jitter explains: more than ``median + max(3 × MAD,
10 % of the median)`` of the steps after it (median and MAD — median absolute deviation
— are robust to the warm-up itself). Only a prefix is ever dropped, at most half of the
steps, and never the last one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

MIN_MARGIN_FRACTION = 0.10
MAD_FACTOR = 3.0


@dataclass(frozen=True)
class SteadySteps:
    """Which steps are steady and why the others are not."""

    steps: tuple[int, ...]  # positions (0-based) of the steady steps in the input order
    warmup: tuple[int, ...]  # positions of the leading warm-up steps
    threshold_us: float | None  # a leading step above this is warm-up
    median_us: float | None

    def describe(self, values_us: np.ndarray | list[float], labels: list[str] | None = None) -> str:
        """One sentence: which steps were left out and the rule that left them out."""
        if not self.warmup:
            return "no warm-up step detected (every step within median + max(3×MAD, 10 %))"
        vals = np.asarray(values_us, dtype=float)
        names = labels or [str(i + 1) for i in range(len(vals))]
        left = ", ".join(f"step {names[i]} {vals[i] / 1000:.1f} ms" for i in self.warmup)
        return (f"{len(self.warmup)} warm-up step(s) left out ({left}): longer than {self.threshold_us / 1000:.1f} ms = "
                f"median {self.median_us / 1000:.1f} ms of the later steps + max(3×MAD, 10 %)")


def steady_steps(values_us: np.ndarray | list[float] | pd.Series) -> SteadySteps:
    """Detect the leading warm-up steps of a per-step series (µs, in step order)."""
    vals = np.asarray(values_us, dtype=float)
    n = len(vals)
    ok = ~np.isnan(vals)
    if n < 3 or ok.sum() < 3:
        return SteadySteps(tuple(range(n)), (), None, float(np.nanmedian(vals)) if ok.any() else None)
    warm: list[int] = []
    threshold = median = None
    for i in range(n // 2):  # a prefix only, at most half of the steps
        rest = vals[i + 1:][~np.isnan(vals[i + 1:])]
        if len(rest) < 2:
            break
        median = float(np.median(rest))
        mad = float(np.median(np.abs(rest - median)))
        threshold = median + max(MAD_FACTOR * mad, MIN_MARGIN_FRACTION * median)
        if not np.isnan(vals[i]) and vals[i] > threshold:
            warm.append(i)
        else:
            break
    if warm:
        rest = vals[len(warm):][~np.isnan(vals[len(warm):])]
        median = float(np.median(rest))
        mad = float(np.median(np.abs(rest - median)))
        threshold = median + max(MAD_FACTOR * mad, MIN_MARGIN_FRACTION * median)
    return SteadySteps(tuple(range(len(warm), n)), tuple(warm), threshold, median)


def step_stats(values_us: np.ndarray | list[float]) -> dict[str, float | None]:
    """Mean, median and 90th percentile (µs) of a series; ``None`` for an empty one."""
    vals = np.asarray(values_us, dtype=float)
    vals = vals[~np.isnan(vals)]
    if not len(vals):
        return {"mean": None, "median": None, "p90": None, "count": 0}
    return {"mean": float(vals.mean()), "median": float(np.median(vals)), "p90": float(np.percentile(vals, 90)),
            "count": int(len(vals))}
