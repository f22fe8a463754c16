"""Evidence from the profile: how long the device waits for data per step (step trace, else host queue)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from advisor_core.analyses.step_time import step_breakdown
from advisor_core.engine import RuleContext


@dataclass
class Wait:
    """How long the device waits for data per step on one rank, and from which evidence."""

    wait_us: float | None  # device time per step spent waiting for data
    step_us: float | None
    source: str
    empty_share: float | None  # share of steps the feeding queue was empty


def queue_empty_share(rank: Any) -> tuple[float | None, str | None]:
    """Share of samples the queue feeding the device was empty, and which queue (host queue, else the root's child)."""
    hq = rank.table("host_queue") if rank.has_table("host_queue") else None
    if hq is not None and len(hq) > 1:
        sizes = hq["queue_size"].iloc[1:]  # the first step is warm-up
        return float((sizes == 0).mean()), "host queue"
    pipe = rank.table("minddata_pipeline") if rank.has_table("minddata_pipeline") else None
    if pipe is not None and not pipe.empty:
        root = pipe[pipe["parent_id"].isna()]
        if not root.empty:
            child_ids = root.iloc[0]["children_ids"] or []
            feeding = pipe[pipe["op_id"].isin(child_ids)]
            if not feeding.empty and pd.notna(feeding.iloc[0]["queue_empty_freq"]):
                return float(feeding.iloc[0]["queue_empty_freq"]), f"{feeding.iloc[0]['op_type']} output queue"
    return None, None


def data_wait(ctx: RuleContext, rank: Any, empty_queue_share: float) -> Wait:
    """The rank's data wait per step (see the rule's What); ``wait_us`` is ``None`` without step-level evidence."""
    empty, _ = queue_empty_share(rank)
    bd = step_breakdown(rank)
    if bd is not None and not bd.empty:
        rows = bd.iloc[1:] if len(bd) > 2 else bd  # drop the warm-up step when there are enough
        step_us = float(rows["total_us"].mean()) if rows["total_us"].notna().any() else None
        if rows["iteration_interval_us"].notna().any():
            return Wait(float(rows["iteration_interval_us"].mean()), step_us, "step trace iteration gap", empty)
        if rows["free_us"].notna().any():
            # Computing + Communication(Not Overlapped) + Free tile the step, so Preparing (step start →
            # first kernel, where a data wait shows) is already inside Free: never add the two.
            free = float(rows["free_us"].mean())
            n = steps_of_whole_run_row(rank, bd)
            if n > 1:
                free /= n
                step_us = step_us / n if step_us else step_us
            data_starved = empty is not None and empty >= empty_queue_share
            if data_starved:
                return Wait(free, step_us, "device idle (Free) with the feeding queue empty", empty)
            return Wait(0.0 if empty is not None else None, step_us, "device idle, queues not empty", empty)
    hq = rank.table("host_queue") if rank.has_table("host_queue") else None
    if hq is not None and len(hq) > 1 and hq["get_ms"].notna().any():
        rows = hq.iloc[1:]
        get_us = float(rows["get_ms"].mean()) * 1000.0
        step_us = ctx.step_time_us(rank)
        rec = rank.record("minddata_summary") if rank.has_table("minddata_summary") else None
        per_batch = getattr(rec, "per_batch_time_ms", None)
        if step_us is None and per_batch:
            # Data-bound: the device consumes one batch per step, so a step lasts at least a batch.
            step_us = max(float(per_batch) * 1000.0, get_us)
        return Wait(get_us, step_us, "host queue get-next wait", empty)
    return Wait(None, None, "none", empty)


def steps_of_whole_run_row(rank: Any, bd: pd.DataFrame) -> int:
    """Steps a not-yet-divided whole-collection ``step_trace_time.csv`` row covers (1 when per step).

    MindSpore writes one ``Step=0`` row for the whole collection. The step breakdown divides
    it by the steps the trace windows or kernel ``Step ID`` give; when neither exists it is
    left whole (``… (whole collection)``) and the host queue's per-batch records (one per
    step: the device takes one batch per step) count the steps instead.
    """
    if len(bd) != 1 or not str(bd.iloc[0]["source"]).endswith("(whole collection)"):
        return 1
    hq = rank.table("host_queue") if rank.has_table("host_queue") else None
    return int(len(hq)) if hq is not None and len(hq) > 1 else 1
