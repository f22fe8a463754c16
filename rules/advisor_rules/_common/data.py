"""The device's wait for input data per step, and what it does to a device-side saving.

Physics (MindData feeding a device in sink mode): the device consumes one batch per step, so a
step lasts ``max(D, P)`` — the device's own time D and the data pipeline's period per batch P.
When the pipeline is slower, the device idles at each step start until the batch arrives: that
idle time W = P − D is ``Free`` at the step start with the queue feeding the device empty
(legacy traces: the ``iteration_interval`` gap; without a step trace: the host queue's get-next
waits). Changing the device time by −δ (a saving δ > 0, a cost δ < 0) moves the step by
``max(D, P) − max(D − δ, P)``: with headroom H = W ≥ 0 that is ``min(0, δ + H)`` — a saving
shows **nothing** while the data pipeline bounds the step, a cost only what exceeds the wait.

:func:`data_wait` is MD001's measure on one rank; :func:`data_bound_headroom` applies it to the
run (the largest wait over the profiled ranks: a rank that waits for data gates every rank it
synchronises with); :func:`data_bound_effect` turns a device-side saving into the realised one
with the sentence and evidence a finding carries.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from advisor_core.engine import Evidence

if TYPE_CHECKING:  # pragma: no cover - heavy imports are made where used
    import pandas as pd

EMPTY_QUEUE_SHARE = 0.3  # feeding queue empty in at least this share of samples means data-bound (MindInsight's 30 %)
DATA_BOUND_SHARE_PCT = 1.0  # a data wait below this share of the step is dequeue latency and launch gaps, not a bound


@dataclass
class Wait:
    """How long the device waits for data per step on one rank, and from which evidence."""

    wait_us: float | None  # device time per step spent waiting for data
    step_us: float | None
    source: str
    empty_share: float | None  # share of steps the feeding queue was empty
    warmup: str = ""  # which leading steps were left out as warm-up, and why


def queue_empty_share(rank: Any) -> tuple[float | None, str | None]:
    """Share of samples the queue feeding the device was empty, and which queue (host queue, else the root's child)."""
    import pandas as pd

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


def data_wait(ctx: Any, rank: Any, empty_queue_share: float = EMPTY_QUEUE_SHARE) -> Wait:
    """The rank's data wait per step (see the module doc); ``wait_us`` is ``None`` without step-level evidence."""
    from advisor_core.analyses.steady import steady_steps
    from advisor_core.analyses.step_time import step_breakdown

    empty, _ = queue_empty_share(rank)
    bd = step_breakdown(rank)
    if bd is not None and not bd.empty:
        # steady steps only: graph compilation and the queue filling up make the first steps wait for reasons
        # more workers do not change
        steady = steady_steps(bd["total_us"].to_numpy(dtype=float))
        rows = bd.iloc[list(steady.steps)] if steady.steps else bd
        warm = steady.describe(bd["total_us"].to_numpy(dtype=float), [str(s) for s in bd["step"]]) if steady.warmup else ""
        step_us = float(rows["total_us"].mean()) if rows["total_us"].notna().any() else None
        if rows["iteration_interval_us"].notna().any():
            return Wait(float(rows["iteration_interval_us"].mean()), step_us, "step trace iteration gap", empty, warm)
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
                return Wait(free, step_us, "device idle (Free) with the feeding queue empty", empty, warm)
            return Wait(0.0 if empty is not None else None, step_us, "device idle, queues not empty", empty, warm)
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


@dataclass
class DataBound:
    """The run's device waits for data: the largest wait per step over the profiled ranks."""

    wait_us: float  # headroom H: device time may grow this much before the device bounds the step
    step_us: float | None
    rank: int | None
    source: str


def data_bound_headroom(ctx: Any, min_share_pct: float = DATA_BOUND_SHARE_PCT,
                        empty_queue_share: float = EMPTY_QUEUE_SHARE) -> DataBound | None:
    """The data wait that bounds the step (see the module doc); ``None`` when no profiled rank waits for data.

    A rank counts when its wait (MD001's measure, :func:`data_wait`) is at least
    ``min_share_pct`` of its step: below that the idle time is the device-side dequeue and
    launch gaps a device-bound step has too.
    """
    run = getattr(ctx, "run", None)
    if run is None:
        return None
    key = (min_share_pct, empty_queue_share)
    try:
        cached = _HEADROOM.setdefault(run, {})
    except TypeError:  # a run that cannot be weakly referenced is measured every time
        cached = {}
    if key not in cached:
        cached[key] = _largest_wait(ctx, run, min_share_pct, empty_queue_share)
    return cached[key]


# Every device-side rule asks for the same run's headroom: measure it once per run.
_HEADROOM: "weakref.WeakKeyDictionary[Any, dict[tuple[float, float], DataBound | None]]" = weakref.WeakKeyDictionary()


def _largest_wait(ctx: Any, run: Any, min_share_pct: float, empty_queue_share: float) -> DataBound | None:
    best: DataBound | None = None
    for rank in run:
        w = data_wait(ctx, rank, empty_queue_share)
        if not w.wait_us or not w.step_us or 100.0 * w.wait_us / w.step_us < min_share_pct:
            continue
        if best is None or w.wait_us > best.wait_us:
            best = DataBound(float(w.wait_us), w.step_us, rank.rank_id, w.source)
    return best


@dataclass
class DataBoundEffect:
    """A device-side saving as the step realises it, with the sentence and evidence that say so."""

    saving_us: float | None  # realised per step
    unconditional_us: float | None
    note: str = ""
    evidence: list[Evidence] = field(default_factory=list)


def realised_saving(saving_us: float, headroom_us: float) -> float:
    """``max(D, P) − max(D − δ, P)`` with headroom H = P − D ≥ 0: ``min(0, δ + H)``."""
    return min(0.0, saving_us + max(headroom_us, 0.0))


def data_bound_effect(ctx: Any, saving_us: float | None, bound: DataBound | None = None) -> DataBoundEffect:
    """The realised saving of a device-side change of ``saving_us`` (µs per step; negative: a cost).

    ``bound`` defaults to :func:`data_bound_headroom` of ``ctx``; pass it when a rule makes
    several findings. Unchanged when the device is not waiting for data.
    """
    if saving_us is None:
        return DataBoundEffect(None, None)
    if bound is None:
        bound = data_bound_headroom(ctx)
    if bound is None:
        return DataBoundEffect(saving_us, saving_us)
    real = realised_saving(saving_us, bound.wait_us)
    wait = f"the step waits {bound.wait_us / 1000:.2f} ms for data (MD001, rank {bound.rank}: {bound.source})"
    if saving_us >= 0:
        note = (f"Now {wait}: a shorter device time only lengthens that wait, so the step gains nothing yet; this "
                f"saving appears once the data pipeline keeps up: {saving_us / 1000:.2f} ms then.")
    else:
        shown = "none of it shows" if real == 0 else f"{-real / 1000:.2f} ms of it shows"
        note = (f"Now {wait}: the extra device time fills that wait first, so {shown} in the step; all "
                f"{-saving_us / 1000:.2f} ms does once the data pipeline keeps up.")
    ev = [Evidence(name="saving_if_data_keeps_up", value=round(saving_us, 3), unit="µs"),
          Evidence(name="data_wait_per_step", value=round(bound.wait_us, 3), unit="µs", source=bound.source)]
    return DataBoundEffect(real, saving_us, note, ev)
