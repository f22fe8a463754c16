"""Per-step time breakdown of a rank, from whichever evidence the profile has.

Evidence, best first:

1. ``step_trace_time.csv`` with one row per step (torch_npu, simulator) or the
   legacy syscnt step trace;
2. ``trace_view.json``: ``ProfilerStep#<n>`` events give the step windows (without them,
   as MindSpore writes it, the kernels' ``Step ID`` or their repeated sequence:
   :func:`step_windows`) and ``Overlap Analysis`` events (threads ``Computing``, ``Communication``,
   ``Communication(Not Overlapped)``, ``Free``) are summed inside each window;
   ``preparing_us`` = first device task start − step start (compute kernels of the
   kernel table; the trace's ``Ascend Hardware`` events when there is none). Only these
   events are read from the trace (the ``step_events`` table), not the whole file;
3. the dataset iterator's per-step records (``dataset_iterator_profiling_{id}.txt``,
   non-sink mode, what a MindSpore run without ``ProfilerStep`` still writes): the
   training loop receives one batch per step, so step k lasts from the record of batch
   k − 1 to that of batch k (timestamps, ms), and the ``get`` wait of batch k is the
   data wait inside it (``free_us``; the rest is ``computing_us``);
4. MindSpore's single whole-collection ``step_trace_time.csv`` row (``Step=0``),
   divided by the number of steps when the step count is known (flagged
   ``averaged``); preferred to 2 when the steps were cut from the kernels (no
   ``ProfilerStep``), whose first window starts at the first kernel, not with the
   collection.

Returns a DataFrame with :data:`BREAKDOWN_COLUMNS`; ``source`` says which
evidence was used. Functions here return DataFrames, in the spirit of HTA.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from advisor_core.model.run import Rank
from advisor_core.opview.view import COMM_CORE_NAMES

BREAKDOWN_COLUMNS = (
    "step",
    "total_us",
    "computing_us",
    "communication_not_overlapped_us",
    "communication_us",
    "free_us",
    "preparing_us",
    "bubble_us",
    "iteration_interval_us",
    "fp_bp_us",
    "tail_us",
    "source",
)

_STEP_EVENT = re.compile(r"^ProfilerStep#(\d+)$")
_OVERLAP_THREADS = {
    "Computing": "computing_us",
    "Communication": "communication_us",
    "Communication(Not Overlapped)": "communication_not_overlapped_us",
    "Free": "free_us",
}


def step_windows(rank: Rank, kernels: pa.Table | None = None) -> pd.DataFrame | None:
    """Step windows ``step``, ``start_ns``, ``end_ns`` (computed once per rank); ``None`` when nothing tells the steps apart.

    ``ProfilerStep#<n>`` events from the trace; without them (MindSpore writes none) the kernel
    table's ``Step ID`` or its repeated kernel sequence (:mod:`.kernel_steps`), cut from ``kernels``
    when the caller has the kernel table at hand (the op view's build), else read. ``attrs["source"]``
    says which.
    """
    return rank.cached("step_windows", lambda: _step_windows(rank, kernels), hand_over=True)


def _step_windows(rank: Rank, kernels: pa.Table | None) -> pd.DataFrame | None:
    from advisor_core.analyses.kernel_steps import kernel_step_windows

    w = _profiler_step_windows(rank)
    return w if w is not None else kernel_step_windows(rank, kernels)


def _profiler_step_windows(rank: Rank) -> pd.DataFrame | None:
    ev = rank.table("step_events", ["name", "ph", "ts_ns", "dur_us", "process_name"]) if rank.has_table("step_events") else None
    if ev is None or ev.empty:
        return None
    names = ev["name"].astype("string")
    m = names.str.extract(_STEP_EVENT.pattern, expand=False)
    mask = m.notna() & (ev["ph"] == "X") & ev["ts_ns"].notna()
    if not mask.any():
        return None
    w = pd.DataFrame(
        {
            "step": m[mask].astype(int).to_numpy(),
            "start_ns": ev.loc[mask, "ts_ns"].astype("int64").to_numpy(),
            "dur_us": ev.loc[mask, "dur_us"].to_numpy(),
        }
    )
    w["end_ns"] = w["start_ns"] + np.round(w["dur_us"].fillna(0.0) * 1000).astype("int64")
    w = w.drop_duplicates("step").sort_values("start_ns").reset_index(drop=True)
    out = w[["step", "start_ns", "end_ns"]].copy()
    out.attrs["source"] = "ProfilerStep"
    return out


def step_events_label(rank: Rank) -> str:
    """Where the step windows and overlap intervals came from, in words."""
    src = rank.table_source("step_events")
    w = step_windows(rank)
    cut = (w.attrs.get("source") if w is not None else None) or "ProfilerStep"
    if src is not None and src[1] == "profiler_db":
        return f"{src[0].name} STEP_TIME + overlap of TASK intervals" if cut == "ProfilerStep" \
            else f"steps from the {cut} + overlap of {src[0].name} TASK intervals"
    return "trace_view.json ProfilerStep + Overlap Analysis" if cut == "ProfilerStep" \
        else f"steps from the {cut} + trace_view.json Overlap Analysis"


def _from_trace(rank: Rank) -> pd.DataFrame | None:
    windows = step_windows(rank)
    if windows is None or not rank.has_table("step_events"):
        return None
    ev = rank.table("step_events", ["name", "ph", "ts_ns", "dur_us", "process_name", "thread_name"])
    if ev is None or ev.empty:
        return None
    oa = ev[(ev["process_name"] == "Overlap Analysis") & (ev["ph"] == "X") & ev["ts_ns"].notna()]
    if oa.empty:
        return None
    starts = windows["start_ns"].to_numpy().copy()
    ends = windows["end_ns"].to_numpy()
    ts = oa["ts_ns"].astype("int64").to_numpy()
    if windows.attrs.get("source", "ProfilerStep") != "ProfilerStep":
        # cut at the first kernel: the overlap analysis begins with the collection, before it
        starts[0] = min(int(starts[0]), int(ts.min()))
    idx = np.searchsorted(starts, ts, side="right") - 1
    inside = (idx >= 0) & (ts < ends[np.clip(idx, 0, len(ends) - 1)])
    part = pd.DataFrame(
        {
            "step": windows["step"].to_numpy()[np.clip(idx, 0, len(ends) - 1)][inside],
            "col": oa["thread_name"].map(_OVERLAP_THREADS).to_numpy()[inside],
            "dur": oa["dur_us"].to_numpy()[inside],
        }
    ).dropna(subset=["col"])
    table = part.pivot_table(index="step", columns="col", values="dur", aggfunc="sum", fill_value=0.0)
    out = pd.DataFrame({"step": windows["step"]})
    for col in _OVERLAP_THREADS.values():
        out[col] = out["step"].map(table[col]) if col in table.columns else 0.0
        out[col] = out[col].fillna(0.0)
    out["total_us"] = out["computing_us"] + out["communication_not_overlapped_us"] + out["free_us"]
    first_task = _first_task_starts(rank, starts, ends)
    if first_task is not None:
        out["preparing_us"] = [(f - s) / 1000.0 if f is not None else np.nan for f, s in zip(first_task, starts)]
    out["source"] = step_events_label(rank)
    return out


def _first_task_starts(rank: Rank, starts: np.ndarray, ends: np.ndarray) -> list[int | None] | None:
    """Start (ns) of the first device task inside each window, ``None`` for an empty window.

    Device tasks are the compute kernels of the kernel table (read through the op view's
    timeline when it is at hand); without a kernel table, the trace's ``Ascend Hardware``
    events (which needs the whole trace).
    """
    task_starts: np.ndarray | None = None
    view = rank.op_view()
    if view is not None and view.timeline is not None:
        tl = view.timeline
        task_starts = tl.start_ns[~view.ops["is_comm"].to_numpy()[tl.op]]
    elif view is not None and view.has_columns("start_ns"):
        k = rank.arrow_table("kernels", [c for c in ("start_ns", "accelerator_core") if view.has_columns(c)])
        if k is not None:
            keep = k.column("start_ns").is_valid()
            if "accelerator_core" in k.column_names:
                core = k.column("accelerator_core").cast(pa.string())
                keep = pc.and_(keep, pc.invert(pc.fill_null(pc.is_in(core, pa.array(sorted(COMM_CORE_NAMES))), False)))
            task_starts = np.sort(k.column("start_ns").filter(keep).to_numpy())
    elif view is None:
        ev = rank.table("trace_events", ["ph", "ts_ns", "process_name"])
        if ev is not None:
            hw = ev[(ev["process_name"] == "Ascend Hardware") & (ev["ph"] == "X") & ev["ts_ns"].notna()]
            if not hw.empty:
                task_starts = np.sort(hw["ts_ns"].astype("int64").to_numpy())
    if task_starts is None or not len(task_starts):
        return None
    first = np.searchsorted(task_starts, starts, side="left")
    return [int(task_starts[f]) if f < len(task_starts) and task_starts[f] < e else None
            for f, e in zip(first, ends)]


def step_breakdown(rank: Rank) -> pd.DataFrame | None:
    """Per-step breakdown (µs) or ``None`` when the profile has no step evidence at all (computed once per rank)."""
    return rank.cached("step_breakdown", lambda: _step_breakdown(rank), hand_over=True)


def _step_breakdown(rank: Rank) -> pd.DataFrame | None:
    st = rank.table("step_trace")
    src = rank.table_source("step_trace")
    if st is not None and not st.empty and not bool(st["whole_run"].all()):
        out = st.drop(columns=["whole_run", "device_id", "overlapped_us", "stage_us",
                                "communication_not_overlapped_exclude_receive_us"], errors="ignore").copy()
        out["source"] = src[0].name if src else "step_trace"
        return _finish(out)
    windows = step_windows(rank)
    marked = windows is not None and windows.attrs.get("source") == "ProfilerStep"
    whole = st is not None and not st.empty
    # windows cut from the kernels miss what precedes the first one: MindSpore's whole-run row counts it
    from_trace = _from_trace(rank) if marked or not whole else None
    if from_trace is not None:
        return _finish(from_trace)
    from_iterator = _from_iterator(rank)
    if from_iterator is not None:
        return _finish(from_iterator)
    if whole:
        out = st.drop(columns=["whole_run", "device_id"], errors="ignore").copy()
        n = _step_count(rank)
        name = src[0].name if src else "step_trace"
        if n and n > 1:
            num = out.select_dtypes("number").columns.drop("step", errors="ignore")
            out[num] = out[num] / n
            out["step"] = pd.array([None], dtype="Int64")
            out["source"] = f"{name} whole-run row averaged over {n} steps"
        else:
            out["source"] = f"{name} (whole collection)"
        return _finish(out)
    return None


def _from_iterator(rank: Rank) -> pd.DataFrame | None:
    """Steps from the dataset iterator's records (see the module docstring, source 3)."""
    src = rank.table_source("host_queue") if rank.has_table("host_queue") else None
    if src is None or src[1] != "dataset_iterator_profiling":
        return None
    hq = rank.table("host_queue")
    if hq is None or "timestamp_ms" not in hq or hq["timestamp_ms"].notna().sum() < 3:
        return None
    hq = hq[hq["timestamp_ms"].notna()].sort_values("step")
    ts = hq["timestamp_ms"].to_numpy(dtype=float)
    total = np.diff(ts) * 1000.0
    wait = hq["get_ms"].to_numpy(dtype=float)[1:] * 1000.0
    wait = np.minimum(np.nan_to_num(wait, nan=0.0), total)
    out = pd.DataFrame({"step": hq["step"].to_numpy()[1:], "total_us": total, "free_us": wait,
                        "computing_us": total - wait, "communication_not_overlapped_us": 0.0})
    out["source"] = f"{src[0].name} (batch timestamps; get wait = data wait)"
    return out


def _step_count(rank: Rank) -> int | None:
    w = step_windows(rank)
    if w is not None:
        return len(w)
    if rank.has_table("kernels") and "step_id" in (rank.columns("kernels") or []):
        k = rank.table("kernels", ["step_id"])
        if k is not None:
            n = k["step_id"].dropna().nunique()
            return int(n) if n else None
    return None


def _finish(df: pd.DataFrame) -> pd.DataFrame:
    for col in BREAKDOWN_COLUMNS:
        if col not in df.columns:
            df[col] = np.nan
    df = df[list(BREAKDOWN_COLUMNS)].reset_index(drop=True)
    df["step"] = df["step"].astype("Int64")
    return df


def mean_step_time_us(rank: Rank) -> float | None:
    """Mean end-to-end step time of a rank, µs (``None`` without any timing evidence).

    Per-step breakdown totals first; otherwise the kernels' time span divided by
    the number of steps they cover (their step ids, else the step windows; 1 without either).
    """
    bd = step_breakdown(rank)
    if bd is not None and bd["total_us"].notna().any():
        return float(bd["total_us"].mean())
    if rank.has_table("kernels"):
        cols = rank.columns("kernels") or []
        want = [c for c in ("start_ns", "duration_us", "step_id") if c in cols]
        k = rank.table("kernels", want)
        if k is not None and "start_ns" in k and k["start_ns"].notna().any():
            end = (k["start_ns"] + (k["duration_us"].fillna(0.0) * 1000).round().astype("Int64")).max()
            span_us = float(end - k["start_ns"].min()) / 1000.0
            steps = int(k["step_id"].dropna().nunique()) if "step_id" in k else 0
            return span_us / max(steps or (_step_count(rank) or 1), 1)
    return None
