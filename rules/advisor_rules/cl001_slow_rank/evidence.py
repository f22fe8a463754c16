"""One rank's part of the slow-rank check, computed where the rank's files are (its per-rank unit)."""

from __future__ import annotations

from typing import Any

from advisor_rules._common import steady_breakdown


def rank_figures(rank: Any) -> dict[str, Any] | None:
    """Steady-step figures (µs per step) and compute time and launches per op type per step.

    ``None`` without a step breakdown. Small and picklable: a few floats and one entry per op
    type, never kernel rows.
    """
    bd = steady_breakdown(rank)
    if bd is None:
        return None
    out: dict[str, Any] = dict(bd)
    view = rank.op_view()
    types: dict[str, tuple[float, float]] = {}
    if view is not None and not view.ops.empty and view.steps:
        comp = view.compute
        if not comp.empty:
            g = comp.groupby("type", sort=False, dropna=False)[["total_us", "count"]].sum()
            types = {str(t): (float(us) / view.steps, float(n) / view.steps)
                     for t, us, n in zip(g.index, g["total_us"], g["count"])}
    out["types"] = types
    return out
