"""The device's wait for input data per step, and what it does to a device-side saving.

Physics (MindData feeding a device in sink mode): the device consumes one batch per step, so a
step lasts ``max(D, P)`` — the device's own time D and the data pipeline's period per batch P.
When the pipeline is slower, the device idles at each step start until the batch arrives: that
idle time W = P − D is ``Free`` at the step start with the queue feeding the device empty
(legacy traces: the ``iteration_interval`` gap; without a step trace: the device's GetNext waits,
else the host queue's get-next waits). Two queues feed a device in sink mode: the host queue the
pipeline fills, and the device queue the host→device transfer fills. An empty device queue with a
full host queue means the transfer, not the pipeline, starves the device (``Wait.bound``). The
first steps are left out when they are warm-up (:mod:`advisor_core.analyses.steady`), and a
wait only counts when the feeding queue was empty in at least 30 % of the steady steps
(MindInsight's criterion). Changing the device time by −δ (a saving δ > 0, a cost δ < 0) moves the step by
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
    """How long the device waits for data per step on one rank, and from which evidence.

    ``bound`` says what the device waits for: ``pipeline`` (the queue the host fills is empty:
    the data pipeline is too slow), ``transfer`` (the device queue is empty while the host
    queue is full: batches wait on the host→device copy, not on the pipeline), or ``""`` (it
    does not wait for data, or no queue says why it idles).
    """

    wait_us: float | None  # device time per step spent waiting for data (steady steps)
    step_us: float | None
    source: str
    empty_share: float | None  # share of steady steps the queue feeding the device was empty
    warmup: str = ""  # which leading steps were left out as warm-up, and why
    bound: str = ""
    host_empty_share: float | None = None  # the host queue (device_queue / dataset_iterator records)
    device_empty_share: float | None = None  # the device queue at each GetNext (sink mode)


@dataclass(frozen=True)
class QueueRecords:
    """A per-step queue record series with its warm-up left out."""

    rows: Any  # the steady rows (pandas DataFrame)
    empty_share: float | None  # share of the steady rows whose queue was empty
    warmup: str  # how the warm-up was detected ("" when none was dropped beyond the first record)


def _steady_records(frame: pd.DataFrame, wait_col: str, size_col: str, what: str, unit_us: float) -> QueueRecords:
    """Leave out the first record (the queue starts empty: the first batch always waits) and the detected warm-up.

    Warm-up is detected on the wait itself (``steady_steps``: a leading wait longer than the later
    steps' median + max(3×MAD, 10 %)): while the pipeline fills its queues or compiles, the first
    steps wait for reasons more workers do not change.
    """
    from advisor_core.analyses.steady import steady_steps

    rest = frame.iloc[1:]
    waits = rest[wait_col].to_numpy(dtype=float) * unit_us
    steady = steady_steps(waits)
    rows = rest.iloc[list(steady.steps)] if steady.steps else rest
    desc = ""
    if steady.warmup:
        labels = [str(s) for s in rest["step"]] if "step" in rest else None
        desc = f"{what}: " + steady.describe(waits, labels).replace(" ms = median", " ms of waiting = median")
    sizes = rows[size_col].dropna() if size_col in rows else None
    share = float((sizes == 0).mean()) if sizes is not None and len(sizes) else None
    return QueueRecords(rows, share, desc)


def host_queue_records(rank: Any) -> QueueRecords | None:
    """The host queue's steady per-batch records (``device_queue_profiling`` / ``dataset_iterator_profiling``)."""
    hq = rank.table("host_queue") if rank.has_table("host_queue") else None
    if hq is None or len(hq) < 2:
        return None
    return rank.cached("md_host_queue_records",
                       lambda: _steady_records(hq, "get_ms", "queue_size", "host queue get-next waits", 1000.0))


def device_queue_records(rank: Any) -> QueueRecords | None:
    """The device queue's steady GetNext records (``minddata_aicpu`` / ``aicpu_mi`` / ``minddata_getnext``)."""
    dq = rank.table("device_queue") if rank.has_table("device_queue") else None
    if dq is None or len(dq) < 2:
        return None
    return rank.cached("md_device_queue_records",
                       lambda: _steady_records(dq, "wait_us", "queue_size", "device GetNext waits", 1.0))


def queue_empty_share(rank: Any) -> tuple[float | None, str | None]:
    """Share of steady samples the queue feeding the device was empty, and which queue.

    The host queue (warm-up left out, see :func:`host_queue_records`), else the queue the
    pipeline's root feeds the consumer from: the root's own output queue when it has one
    (non-sink: the iterator reads it), else its child's (sink: ``DataQueueOp`` reads it).
    """
    import pandas as pd

    rec = host_queue_records(rank)
    if rec is not None and rec.empty_share is not None:
        return rec.empty_share, "host queue"
    pipe = rank.table("minddata_pipeline") if rank.has_table("minddata_pipeline") else None
    if pipe is not None and not pipe.empty:
        root = pipe[pipe["parent_id"].isna()]
        if not root.empty:
            r = root.iloc[0]
            if pd.notna(r["queue_empty_freq"]):
                return float(r["queue_empty_freq"]), f"{r['op_type']} output queue"
            feeding = pipe[pipe["op_id"].isin(r["children_ids"] or [])]
            if not feeding.empty and pd.notna(feeding.iloc[0]["queue_empty_freq"]):
                return float(feeding.iloc[0]["queue_empty_freq"]), f"{feeding.iloc[0]['op_type']} output queue"
    return None, None


def feeding_verdict(host_empty: float | None, device_empty: float | None, threshold: float) -> str:
    """What the device waits for, from how often each queue was empty (MindInsight's queue rules).

    The device queue decides whether the device waits at all: when it holds a batch at
    ``1 − threshold`` of the dequeues the device is fed. When it is empty, the host queue says
    why: empty too → the pipeline cannot fill it; full → the pipeline keeps up and the batches
    wait on the host→device transfer. Without device-queue records the host queue stands for it.
    """
    if device_empty is not None:
        if device_empty < threshold:
            return ""
        return "transfer" if host_empty is not None and host_empty < threshold else "pipeline"
    return "pipeline" if host_empty is not None and host_empty >= threshold else ""


def data_wait(ctx: Any, rank: Any, empty_queue_share: float = EMPTY_QUEUE_SHARE) -> Wait:
    """The rank's data wait per steady step (see the module doc); ``wait_us`` is ``None`` without step-level evidence.

    The device counts as waiting for data only when the queue feeding it was empty in at
    least ``empty_queue_share`` of the steady steps (:func:`feeding_verdict`); otherwise the
    wait is 0 — idle time with data at hand is not the pipeline's. Warm-up steps are left out
    everywhere (:mod:`advisor_core.analyses.steady`) and ``Wait.warmup`` says how.

    ``ctx`` (any rule context, or ``None``) only says whether a step time missing from the
    queue records may come from the rank's step time (``RuleContext.step_time_us``, the same
    for every context): :func:`rank_data_wait` with ``with_step_time=ctx is not None``.
    """
    return rank_data_wait(rank, empty_queue_share, with_step_time=ctx is not None)


def rank_data_wait(rank: Any, empty_queue_share: float = EMPTY_QUEUE_SHARE, *, with_step_time: bool = True) -> Wait:
    """:func:`data_wait` of one rank, where no rule context is at hand (a rank's unit).

    Kept on the rank and handed over from the rank's unit (``Rank.cached``): MD001 measures
    it there (its ``rank_evidence``), on every core, and every rule that asks for the run's
    headroom afterwards (:func:`data_bound_headroom`) reads it rather than measuring each
    rank again, one after another, in the client.
    """
    key = f"data_wait/{empty_queue_share!r}/{'step_time' if with_step_time else 'records'}"
    return rank.cached(key, lambda: _data_wait(rank, empty_queue_share, with_step_time), hand_over=True)


def _data_wait(rank: Any, empty_queue_share: float, with_step_time: bool) -> Wait:
    import numpy as np

    from advisor_core.analyses.steady import steady_steps
    from advisor_core.analyses.step_time import mean_step_time_us, step_breakdown

    def step_time(rank: Any) -> float | None:
        return mean_step_time_us(rank) if with_step_time else None

    host = host_queue_records(rank)
    dev = device_queue_records(rank)
    host_empty = host.empty_share if host is not None else None
    if host_empty is None:
        host_empty, _ = queue_empty_share(rank)
    dev_empty = dev.empty_share if dev is not None else None
    verdict = feeding_verdict(host_empty, dev_empty, empty_queue_share)
    feeding = dev_empty if dev_empty is not None else host_empty
    known = host_empty is not None or dev_empty is not None
    dev_wait = float(dev.rows["wait_us"].mean()) if dev is not None and len(dev.rows) else None

    def wait(wait_us: float | None, step_us: float | None, source: str, warm: str) -> Wait:
        warm = "; ".join(w for w in (warm, dev.warmup if dev is not None else "") if w)
        if known and not verdict and wait_us is not None:
            wait_us, source = 0.0, f"{source}, but the queue feeding the device was not empty (< {100 * empty_queue_share:.0f}% of steps)"
        return Wait(wait_us, step_us, source, feeding, warm, verdict, host_empty, dev_empty)

    bd = step_breakdown(rank)
    if bd is not None and not bd.empty:
        # steady steps only: graph compilation and the queue filling up make the first steps wait for reasons
        # more workers do not change
        steady = steady_steps(bd["total_us"].to_numpy(dtype=float))
        rows = bd.iloc[list(steady.steps)] if steady.steps else bd
        warm = steady.describe(bd["total_us"].to_numpy(dtype=float), [str(s) for s in bd["step"]]) if steady.warmup else ""
        step_us = float(rows["total_us"].mean()) if rows["total_us"].notna().any() else None
        if rows["iteration_interval_us"].notna().any():
            return wait(float(rows["iteration_interval_us"].mean()), step_us, "step trace iteration gap", warm)
        if rows["free_us"].notna().any():
            # Computing + Communication(Not Overlapped) + Free tile the step, so Preparing (step start →
            # first kernel, where a data wait shows) is already inside Free: never add the two.
            free = float(rows["free_us"].mean())
            n = steps_of_whole_run_row(rank, bd)
            if n > 1:
                free /= n
                step_us = step_us / n if step_us else step_us
            if not known:
                return Wait(None, step_us, "device idle, no queue says why", None, warm)
            if verdict == "transfer":
                idle = dev_wait if dev_wait is not None else free
                return wait(min(idle, free) if free else idle, step_us,
                            "device idle (Free) at GetNext with the device queue empty while the host queue is full", warm)
            if verdict == "pipeline":
                return wait(free, step_us, "device idle (Free) with the feeding queue empty", warm)
            return wait(free, step_us, "device idle (Free)", warm)
    if dev is not None and dev_wait is not None:
        step_us = step_time(rank)
        if step_us is None:
            starts = dev.rows["start_us"].to_numpy(dtype=float)
            step_us = float(np.diff(starts).mean()) if len(starts) > 1 else None  # one dequeue per step
        what = {"transfer": "device GetNext waits, device queue empty while the host queue is full",
                "pipeline": "device GetNext waits with the device queue empty"}.get(verdict, "device GetNext waits")
        return wait(dev_wait, step_us, what, "")
    if host is not None and host.rows["get_ms"].notna().any():
        get_us = float(host.rows["get_ms"].mean()) * 1000.0
        step_us = step_time(rank)
        if step_us is None and "timestamp_ms" in host.rows and host.rows["timestamp_ms"].notna().sum() > 1:
            # one record per batch, the consumer takes one batch per step: the records' spacing is the step
            ts = host.rows["timestamp_ms"].dropna().to_numpy(dtype=float)
            span = np.diff(ts)
            step_us = float(span.mean()) * 1000.0 if len(span) and span.mean() > 0 else None
        rec = rank.record("minddata_summary") if rank.has_table("minddata_summary") else None
        per_batch = getattr(rec, "per_batch_time_ms", None)
        if step_us is None and per_batch:
            # Data-bound: the device consumes one batch per step, so a step lasts at least a batch.
            step_us = max(float(per_batch) * 1000.0, get_us)
        return wait(get_us, step_us, "host queue get-next wait", host.warmup)
    return Wait(None, None, "none", feeding, bound=verdict, host_empty_share=host_empty, device_empty_share=dev_empty)


def steps_of_whole_run_row(rank: Any, bd: pd.DataFrame) -> int:
    """Steps a not-yet-divided whole-collection ``step_trace_time.csv`` row covers (1 when per step).

    MindSpore writes one ``Step=0`` row for the whole collection. The step breakdown divides
    it by the steps the trace windows or kernel ``Step ID``s give; when neither exists it is
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
