"""Step windows from the kernel table, for profiles without ``ProfilerStep`` events (what MindSpore writes).

MindSpore ≥ 2.5 writes no ``ProfilerStep#<n>`` events in ``trace_view.json``, one whole-run row in
``step_trace_time.csv``, and drops ``kernel_details.csv``'s ``Step ID`` column unless a schedule
is set and the jit level is not O2. What is left to cut the profile into steps, best first:

1. the kernels' ``Step ID`` when the file has it: a step runs from its first kernel's start to
   the next step's first kernel (the last one to its last kernel's end);
2. the kernel sequence itself: a graph-mode training step launches the same kernels every step,
   so every compute kernel name is launched a multiple of the step count ``n`` times (``m`` per
   step with ``m`` micro batches; the optimizer's once). ``n`` is the greatest common divisor of
   the launch counts of the names launched more than once (a name launched once — a weight
   converted in the first step only — says nothing), and step ``k`` starts at the
   ``k``-th occurrence (every ``c``-th, ``c`` = its launches per step) of the profile's first
   compute kernel whose name repeats every step. Accepted when ``n`` ≥ 2, repeated names make
   up :data:`COVERAGE` of the kernels and the steps hold about as many kernels each (within
   :data:`BALANCE`); the profile is assumed to start at a step boundary, as a profiler started
   between steps does.

Reads the kernel table as Arrow (names dictionary-encoded); no Python loop over kernel rows.
"""

from __future__ import annotations

from math import gcd
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from advisor_core.opview.view import COMM_CORE_NAMES

BALANCE = 0.25  # steps may differ in kernel count by this share of the mean (one-off kernels, warm-up)
COVERAGE = 0.9  # share of the compute kernels whose names repeat: below it the profile is not a loop of steps


def kernel_step_windows(rank: Any, kernels: pa.Table | None = None) -> pd.DataFrame | None:
    """``step``, ``start_ns``, ``end_ns`` from the kernel table (see the module docstring); ``None`` when it cannot tell.

    ``kernels``: the rank's kernel table as already read (the op view's); used when it has every
    column needed, so the file is not read (or the DB queried) a second time. The frame's
    ``attrs["source"]`` says which evidence cut it.
    """
    if not rank.usable("kernels", ("start_ns",)):
        return None
    have = set(rank.columns("kernels") or [])
    cols = [c for c in ("name", "start_ns", "duration_us", "accelerator_core", "step_id") if c in have]
    if kernels is not None and set(cols) <= set(kernels.column_names):
        k = kernels.select(cols)
    else:
        k = rank.arrow_table("kernels", cols)
    if k is None or k.num_rows == 0:
        return None
    keep = k.column("start_ns").is_valid()
    k = k.filter(keep)
    start = k.column("start_ns").to_numpy().astype(np.int64)
    dur = np.nan_to_num(k.column("duration_us").to_numpy(zero_copy_only=False).astype(float), nan=0.0) \
        if "duration_us" in k.column_names else np.zeros(len(start))
    end = start + np.round(dur * 1000.0).astype(np.int64)
    if "step_id" in k.column_names and k.column("step_id").null_count < k.num_rows:
        return _from_step_ids(k.column("step_id"), start, end)
    if "name" not in k.column_names:
        return None
    comm = np.zeros(len(start), bool)
    if "accelerator_core" in k.column_names:
        core = k.column("accelerator_core").cast(pa.string())
        comm = pc.fill_null(pc.is_in(core, pa.array(sorted(COMM_CORE_NAMES))), False).to_numpy(zero_copy_only=False)
    return _from_repetition(k.column("name"), start, end, comm)


def _from_step_ids(step_col: pa.ChunkedArray, start: np.ndarray, end: np.ndarray) -> pd.DataFrame | None:
    ids = step_col.to_numpy(zero_copy_only=False)
    ok = ~pd.isna(ids)
    if not ok.any():
        return None
    df = pd.DataFrame({"step": ids[ok].astype(np.int64), "start": start[ok], "end": end[ok]})
    g = df.groupby("step", sort=True).agg(start_ns=("start", "min"), last=("end", "max")).reset_index()
    g = g.sort_values("start_ns").reset_index(drop=True)
    nxt = g["start_ns"].shift(-1)
    g["end_ns"] = nxt.fillna(g["last"]).astype(np.int64)
    out = g[["step", "start_ns", "end_ns"]].copy()
    out.attrs["source"] = "kernel_details Step ID"
    return out


def _from_repetition(names: pa.ChunkedArray, start: np.ndarray, end: np.ndarray, comm: np.ndarray) -> pd.DataFrame | None:
    order = np.argsort(start, kind="stable")
    compute = order[~comm[order]]
    if len(compute) < 4:
        return None
    codes, _ = pd.factorize(names.take(pa.array(compute)).to_numpy(zero_copy_only=False))
    counts = np.bincount(codes)
    repeated = counts[counts >= 2]
    if not len(repeated):
        return None
    n = 0
    for c in np.unique(repeated).tolist():  # distinct counts: few, whatever the row count
        n = gcd(n, int(c))
    if n < 2 or counts[counts >= 2].sum() < COVERAGE * len(codes):
        return None
    periodic = (counts >= 2) & (counts % n == 0)
    anchor = codes[int(np.argmax(periodic[codes]))]  # the first kernel whose name repeats every step
    occ = np.flatnonzero(codes == anchor)[:: counts[anchor] // n]
    occ[0] = 0  # the first step starts with the profile (one-off kernels before the anchor included)
    sizes = np.diff(np.append(occ, len(codes)))
    if len(occ) != n or np.abs(sizes - sizes.mean()).max() > BALANCE * sizes.mean():
        return None
    starts = start[compute[occ]]
    ends = np.append(starts[1:], end.max())
    out = pd.DataFrame({"step": np.arange(1, n + 1, dtype=np.int64), "start_ns": starts, "end_ns": ends})
    out.attrs["source"] = f"repeated kernel sequence ({n} steps of {int(sizes.mean())} compute kernels)"
    return out
