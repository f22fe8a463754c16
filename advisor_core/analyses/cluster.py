"""The cluster picture: each rank's step broken down, side by side, and what the report draws.

Functions here return DataFrames (HTA style):

* :func:`rank_step_means` — one rank's mean per-step figures over its steady steps;
* :func:`cluster_breakdown` — one row per rank: its pipeline stage and data-parallel group,
  compute, communication not overlapped, free, data wait (µs per step), from the ranks' own
  step breakdowns, or, for a run folder that holds only msprof-analyze's
  ``cluster_step_trace_time.csv``, from its ``Type=rank`` rows;
* :func:`cluster_picture` — median, spread and the slowest ranks of that table;
* :func:`report_summaries` — the frames ``--format html`` charts (step breakdown per rank, top
  kernels, MindData queue use over time, per-link bandwidth).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from advisor_core.analyses.step_time import step_breakdown
from advisor_core.model.run import Rank, Run

BREAKDOWN = ("total_us", "computing_us", "communication_not_overlapped_us", "communication_us", "free_us",
             "preparing_us")
CLUSTER_COLUMNS = ("rank", "stage", "dp_group", "total_us", "compute_us", "comm_not_overlapped_us", "free_us",
                   "data_wait_us", "source")


def rank_step_means(rank: Rank) -> dict[str, float] | None:
    """Mean µs per step over the rank's steady steps (the first of three or more is warm-up and left out).

    Keys: ``steps`` and :data:`BREAKDOWN`; ``None`` without a step breakdown.
    """
    return rank.cached("step_means", lambda: _step_means(rank), hand_over=True)


def _step_means(rank: Rank) -> dict[str, float] | None:
    bd = step_breakdown(rank)
    if bd is None or bd.empty:
        return None
    if len(bd) > 2 and bd["step"].notna().all():
        bd = bd.iloc[1:]
    out: dict[str, float] = {"steps": float(len(bd))}
    for col in BREAKDOWN:
        v = bd[col].astype(float).to_numpy() if col in bd else np.array([np.nan])
        out[col] = float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
    return out


def _stage_of(rank: Rank) -> int | None:
    layout = rank.parallel
    pp = getattr(layout, "pipeline_stages", None) if layout is not None else None
    world = getattr(layout, "world_size", None) if layout is not None else None
    if not pp or pp <= 1 or not world:
        return 0
    return min(rank.rank_id // max(world // pp, 1), pp - 1)


def _dp_group_of(rank: Rank) -> str | None:
    """The rank's data-parallel group as its global ranks (``"1,3"``), when ``parallel_group_info`` says."""
    group = rank.parallel.group("dp") if rank.parallel is not None else None
    return ",".join(str(r) for r in group) if group else None


def cluster_breakdown(run: Run) -> pd.DataFrame | None:
    """One row per rank (see module docstring); ``None`` when no rank has step evidence."""
    rows: list[dict[str, Any]] = []
    for rank in run:
        m = rank_step_means(rank)
        if m is None:
            continue
        free = m["free_us"]
        wait = m["preparing_us"]
        rows.append({"rank": rank.rank_id, "stage": _stage_of(rank), "dp_group": _dp_group_of(rank), "total_us": m["total_us"],
                     "compute_us": m["computing_us"], "comm_not_overlapped_us": m["communication_not_overlapped_us"],
                     "free_us": free - wait if np.isfinite(wait) and np.isfinite(free) else free,
                     "data_wait_us": wait, "source": "rank step breakdown"})
    if not rows:
        cst = run.cluster_step_trace()
        if cst is None or cst.empty:
            return None
        ranks = cst[cst["type"] == "rank"]
        for _, r in ranks.iterrows():
            idx = str(r["index"]).strip()
            if not idx.isdigit():
                continue
            comp, cno, free = (float(r.get("computing_us", np.nan)), float(r.get("communication_not_overlapped_us", np.nan)),
                               float(r.get("free_us", np.nan)))
            pp = r.get("pp_index")
            rows.append({"rank": int(idx), "stage": int(pp) if pd.notna(pp) else None, "dp_group": None,
                         "total_us": np.nansum([comp, cno, free]), "compute_us": comp, "comm_not_overlapped_us": cno,
                         "free_us": free, "data_wait_us": np.nan, "source": "cluster_step_trace_time.csv"})
    df = pd.DataFrame(rows, columns=list(CLUSTER_COLUMNS)).sort_values("rank", ignore_index=True)
    df["rank"] = df["rank"].astype(int)
    df["stage"] = pd.array(df["stage"], dtype="Int64")
    return df


def cluster_picture(df: pd.DataFrame, slowest: int = 3) -> dict[str, Any]:
    """Median step, spread ((max − min) / median) and the slowest ranks of a :func:`cluster_breakdown`."""
    total = df["total_us"].astype(float)
    med = float(total.median())
    order = df.assign(_t=total).sort_values("_t", ascending=False)
    return {"ranks": len(df), "median_total_us": med, "min_total_us": float(total.min()),
            "max_total_us": float(total.max()), "spread": float((total.max() - total.min()) / med) if med else 0.0,
            "slowest": order["rank"].head(slowest).astype(int).tolist()}


# -- what the HTML report draws -----------------------------------------------------------------------------------

def top_kernels(run: Run, n: int = 20) -> pd.DataFrame | None:
    """Kernels (name, type) by total time per step over the profiled ranks, with their share of all kernel time."""
    parts = []
    for rank in run:
        view = rank.op_view()
        if view is None or view.ops.empty:
            continue
        parts.append(view.ops[["name", "type", "total_us"]].assign(total_us=view.ops["total_us"] / max(view.steps, 1)))
    if not parts:
        return None
    allk = pd.concat(parts, ignore_index=True)
    allk["name"] = allk["name"].astype(str)
    allk["type"] = allk["type"].astype(str)
    g = allk.groupby(["name", "type"], sort=False)["total_us"].sum().reset_index()
    g["total_us"] = g["total_us"] / len(parts)  # mean per rank and step
    grand = float(g["total_us"].sum()) or 1.0
    g["share"] = g["total_us"] / grand
    return g.sort_values("total_us", ascending=False, ignore_index=True).head(n)


def minddata_queue(run: Run) -> pd.DataFrame | None:
    """Queue occupancy over time of each MindData op's output queue, first rank that has the samples."""
    for rank in run:
        if not rank.has_table("minddata_pipeline"):
            continue
        pipe = rank.table("minddata_pipeline")
        if pipe is None or pipe.empty:
            continue
        rows = []
        for _, op in pipe.iterrows():  # a handful of pipeline ops
            sizes = op["queue_sizes"]
            if sizes is None or (isinstance(sizes, float) and np.isnan(sizes)) or not len(sizes):
                continue
            interval = float(op["sample_interval_ms"]) if pd.notna(op["sample_interval_ms"]) else 1.0
            cap = float(op["queue_length"]) if pd.notna(op["queue_length"]) else np.nan
            sz = np.asarray(sizes, dtype=float)
            rows.append(pd.DataFrame({"time_ms": np.arange(len(sz)) * interval,
                                      "queue": f"{op['op_type']}(id={op['op_id']}) rank {rank.rank_id}",
                                      "size": sz, "capacity": cap}))
        if rows:
            return pd.concat(rows, ignore_index=True)
    return None


def link_bandwidth(run: Run) -> pd.DataFrame | None:
    """Achieved bandwidth per (source rank, destination rank, transport) from every rank's communication matrix."""
    members: dict[str, set[int]] = {}
    frames = []
    for rank in run:
        if not rank.has_table("communication_matrix"):
            continue
        mx = rank.table("communication_matrix")
        if mx is None or mx.empty:
            continue
        mx = mx[(mx["src_rank"] != mx["dst_rank"]) & mx["transit_us"].fillna(0).gt(0)]
        for g in mx["rank_set"].dropna().unique():
            members.setdefault(str(g), set()).add(rank.rank_id)
        frames.append(mx.assign(owner=rank.rank_id))
    if not frames:
        return None
    mx = pd.concat(frames, ignore_index=True)
    # local ranks of a group are its members in rank order (the group's ranks are those that report it)
    mapping = pd.DataFrame([(g, local, rid) for g, v in members.items() for local, rid in enumerate(sorted(v))],
                           columns=["rank_set", "local", "global"])
    mx["rank_set"] = mx["rank_set"].astype(str)
    for col, out in (("src_rank", "src"), ("dst_rank", "dst")):
        m = mx[["rank_set", col]].astype({col: "Int64"}).merge(
            mapping.astype({"local": "Int64"}), left_on=["rank_set", col], right_on=["rank_set", "local"], how="left")
        mx[out] = m["global"].fillna(m[col]).astype(int).to_numpy()
    g = mx.groupby(["src", "dst", "transport_type"])[["transit_size_mb", "transit_us"]].sum().reset_index()
    g["bandwidth_gbps"] = g["transit_size_mb"] / g["transit_us"] * 1000.0
    return g.rename(columns={"src": "src_rank", "dst": "dst_rank", "transport_type": "transport"})[
        ["src_rank", "dst_rank", "bandwidth_gbps", "transport"]]


def report_summaries(run: Run | None) -> dict[str, pd.DataFrame]:
    """The frames the HTML report charts, by name (absent when the run has no such evidence)."""
    if run is None:
        return {}
    out: dict[str, pd.DataFrame] = {}
    bd = cluster_breakdown(run)
    if bd is not None:
        out["step_breakdown"] = bd[["rank", "compute_us", "comm_not_overlapped_us", "free_us", "data_wait_us"]].fillna(0.0)
    for name, fn in (("top_kernels", top_kernels), ("minddata_queue", minddata_queue), ("link_bandwidth", link_bandwidth)):
        frame = fn(run)
        if frame is not None and not frame.empty:
            out[name] = frame
    return out
