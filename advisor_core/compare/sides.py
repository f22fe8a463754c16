"""What one side of a comparison measures: steady step times, the breakdown, kernels by type and cell, memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from advisor_core.analyses.steady import steady_steps, step_stats
from advisor_core.analyses.step_time import step_breakdown
from advisor_core.compare.model import Breakdown, StepStats
from advisor_core.opview.names import fold_layer_index

_COMPONENTS = {"computing": "computing_us", "communication_not_overlapped": "communication_not_overlapped_us",
               "free": "free_us", "preparing": "preparing_us"}


def cell_key(forward_cell: str | None, name: str) -> str:
    """A cell with its decoder-layer index folded (``…/N-LLamaDecodeLayer/…``): one key for every layer."""
    return fold_layer_index(forward_cell or name)


def short_cell(cell: str) -> str:
    """``Default/…/layers-CellList/N-LLamaDecodeLayer/attention-LLamaAttention/wq-Linear`` → ``layers.N.attention.wq``."""
    attrs = [s.split("-", 1)[0] for s in cell.split("/")
             if s and s not in ("Default", "Gradients") and not s.startswith(("network-", "_backbone-", "_VirtualDatasetCell"))]
    return ".".join(attrs[-4:]) or cell


@dataclass
class SideMeasures:
    """One side's steady-state figures (µs per step)."""

    steps: StepStats
    step_series: dict[int, np.ndarray] = field(default_factory=dict)  # rank → steady step totals
    breakdown: Breakdown = field(default_factory=Breakdown)
    rank_means: dict[int, float] = field(default_factory=dict)
    by_type: dict[str, float] = field(default_factory=dict)  # mean over ranks
    by_cell: dict[str, float] = field(default_factory=dict)  # "cell · type" → mean over ranks
    peak_memory_bytes: float | None = None
    layout: dict[str, Any] = field(default_factory=dict)


def measure_side(run: Any) -> SideMeasures:
    """Steady-state figures of a profiled run (every rank; the cluster's step is its slowest rank's)."""
    series: dict[int, np.ndarray] = {}
    comps: dict[str, list[float]] = {k: [] for k in _COMPONENTS}
    warm_notes: list[str] = []
    per_step_max: dict[Any, float] = {}
    for rank in run or []:
        bd = step_breakdown(rank)
        if bd is None or bd.empty or not bd["total_us"].notna().any():
            continue
        totals = bd["total_us"].to_numpy(dtype=float)
        steady = steady_steps(totals)
        if steady.warmup and not warm_notes:
            warm_notes.append(f"rank {rank.rank_id}: " + steady.describe(totals, [str(s) for s in bd["step"]]))
        rows = bd.iloc[list(steady.steps)]
        series[rank.rank_id] = rows["total_us"].to_numpy(dtype=float)
        for key, col in _COMPONENTS.items():
            if rows[col].notna().any():
                comps[key].append(float(rows[col].mean()))
        for step, total in zip(rows["step"], rows["total_us"]):
            k = int(step) if pd.notna(step) else None
            per_step_max[k] = max(per_step_max.get(k, 0.0), float(total))
    cluster = np.array(list(per_step_max.values()), dtype=float) if per_step_max and None not in per_step_max else (
        np.array([s.mean() for s in series.values()]) if series else np.array([]))
    stats = step_stats(cluster)
    out = SideMeasures(StepStats(mean=stats["mean"], median=stats["median"], p90=stats["p90"], steps=stats["count"],
                                 warmup=warm_notes[0] if warm_notes else "no warm-up step detected"))
    out.step_series = series
    out.rank_means = {r: float(s.mean()) for r, s in series.items() if len(s)}
    out.breakdown = Breakdown(**{k: (float(np.max(v)) if v else None) for k, v in comps.items()})
    _kernels(run, out)
    out.peak_memory_bytes = _peak_memory(run)
    out.layout = _layout(run)
    return out


def _kernels(run: Any, out: SideMeasures) -> None:
    by_type: dict[str, list[float]] = {}
    by_cell: dict[str, list[float]] = {}
    n = 0
    for rank in run or []:
        view = rank.op_view()
        if view is None or view.ops.empty:
            continue
        n += 1
        ops = view.ops
        for t, v in ops.groupby(ops["type"].fillna("?"), sort=False)["per_step_us"].sum().items():
            by_type.setdefault(str(t), []).append(float(v))
        keys = [f"{short_cell(cell_key(c, nm))} · {t}" for c, nm, t in zip(ops["forward_cell"], ops["name"], ops["type"])]
        for k, v in pd.Series(ops["per_step_us"].to_numpy(), index=keys).groupby(level=0, sort=False).sum().items():
            by_cell.setdefault(str(k), []).append(float(v))
    if n:
        out.by_type = {k: sum(v) / n for k, v in by_type.items()}
        out.by_cell = {k: sum(v) / n for k, v in by_cell.items()}


def _peak_memory(run: Any) -> float | None:
    peaks = []
    for rank in run or []:
        if rank.has_table("memory_record"):
            t = rank.table("memory_record")
            cols = [c for c in ("total_allocated_mb", "allocated_mb", "total_reserved_mb") if t is not None and c in t]
            if cols and t[cols[0]].notna().any():
                peaks.append(float(t[cols[0]].max()) * 2**20)
    return max(peaks) if peaks else None


def _layout(run: Any) -> dict[str, Any]:
    for rank in run or []:
        p = rank.parallel
        if p is not None:
            return {"world": getattr(p, "world_size", None), "dp": getattr(p, "data_parallel", None),
                    "mp": getattr(p, "tensor_parallel", None), "pp": getattr(p, "pipeline_stages", None)}
    return {}
