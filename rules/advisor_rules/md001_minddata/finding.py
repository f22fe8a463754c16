"""MD001's finding from a profile: the wait, the bottleneck op, the workers that would feed the device, patches."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from advisor_core.engine import Evidence, Finding, Location, RuleContext, Safety, Severity
from advisor_rules._common import severity_for_share
from advisor_rules.md001_minddata.bottleneck import Bottleneck
from advisor_rules.md001_minddata.cores import cores_per_device
from advisor_rules.md001_minddata.python_work import python_work
from advisor_rules.md001_minddata.wait import Wait

if TYPE_CHECKING:  # pragma: no cover
    from advisor_rules.md001_minddata.rule import MinddataBottleneck


def finding(rule: MinddataBottleneck, ctx: RuleContext, rank: Any, wait: Wait, bott: Bottleneck | None) -> Finding:
    """The finding for the rank waiting longest: the wait, the bottleneck, workers to add and the patches."""
    import pandas as pd

    o = rule.options
    step_us = wait.step_us
    wait_us = float(wait.wait_us or 0.0)
    share = 100.0 * wait_us / step_us if step_us else None
    compute_us = max(step_us - wait_us, 0.0) if step_us else None
    cores, cores_src = cores_per_device(ctx, rank, rule.options.cores_per_device)
    cfg = ctx.config
    workers = bott.workers if bott is not None and bott.workers else (cfg.num_parallel_workers if cfg else None)
    if cfg is not None and bott is not None and bott.op_type.startswith("Map") and cfg.num_parallel_workers:
        workers = cfg.num_parallel_workers

    gil = False
    summ = rank.table("minddata_summary") if rank.has_table("minddata_summary") else None
    op_cpu = None
    if summ is not None and bott is not None and bott.op_id >= 0:
        row = summ[summ["op_id"] == bott.op_id]
        if not row.empty and pd.notna(row.iloc[0]["avg_cpu_pct"]):
            op_cpu = float(row.iloc[0]["avg_cpu_pct"])
    py_mp = cfg.get("dataset.python_multiprocessing") if cfg is not None else None
    python_why = None
    if bott is not None and bott.op_type.startswith("Map"):
        if workers and workers > 1 and op_cpu is not None and py_mp is False and 70.0 <= op_cpu <= 130.0:
            python_why = "its workers together use about one core"
        else:
            rec = rank.record("minddata_summary") if rank.has_table("minddata_summary") else None
            per_batch = getattr(rec, "per_batch_time_ms", None)
            period = float(per_batch) * 1000.0 if per_batch else step_us  # one batch per step
            python_why = python_work(cfg, op_cpu, period, o.heavy_sample_us)
    gil = python_why is not None

    new_workers = None
    predicted_step = None
    if workers and step_us and compute_us is not None and bott is not None and bott.kind in ("op", "leaf"):
        # A CPU-bound op's batch time scales as 1/workers; leave headroom so jitter does not starve the device.
        need = (math.ceil(workers * step_us / (compute_us * (1.0 - o.headroom_pct / 100.0)))
                if compute_us > 0 else workers * 4)
        target = max(need, workers + 1)
        if cores is not None:
            target = min(target, cores)
        if target > workers:
            new_workers = target
            predicted_step = max(compute_us, step_us * workers / target)
    saving = (step_us - predicted_step) if (predicted_step is not None and step_us) else wait_us
    if gil and new_workers is None and step_us and compute_us is not None:
        saving = wait_us

    what = bott.label if bott is not None else "the data pipeline"
    msg = [
        f"The device waits {wait_us / 1000:.2f} ms per step for data"
        + (f" ({share:.1f}% of a {step_us / 1000:.2f} ms step)" if share is not None else "")
        + f" [{wait.source}]."
    ]
    if wait.empty_share is not None:
        msg.append(f"The queue feeding the device is empty in {100 * wait.empty_share:.0f}% of samples.")
    if bott is not None:
        msg.append(f"Bottleneck: {bott.label}, because {bott.reason}.")
        rec = rank.record("minddata_summary") if rank.has_table("minddata_summary") else None
        warned = list(getattr(rec, "bottleneck_warning", []) or [])
        if warned and bott.label not in warned:
            msg.append(f"(MindSpore's summary names {', '.join(warned)} as the bottleneck; its heuristic scans leaf → root "
                       "and does not look at the input queue.)")
    else:
        msg.append("The pipeline files needed to name the op are missing (collect with data_process=True).")
    if op_cpu is not None and workers:
        msg.append(f"{what} uses {op_cpu:.1f}% CPU in all over {workers} worker(s) ({op_cpu / workers:.1f}% per worker).")
    if gil:
        msg.append(f"Python held by the GIL, likely: {python_why}. Thread workers run it one at a time — more of them "
                   "will not scale; python_multiprocessing: True (worker processes) will, or moving the work offline "
                   "(preprocessed into the MindRecord files).")
    if new_workers is not None:
        msg.append(
            f"With {new_workers} workers{' in worker processes' if gil else ''} ({o.headroom_pct:.0f}% headroom; "
            f"bound: {cores} cores per device, "
            f"{cores_src}) the step should drop to {predicted_step / 1000:.2f} ms."
        )
    elif bott is not None and bott.kind in ("op", "leaf") and workers and cores is not None and workers >= cores:
        msg.append(
            f"num_parallel_workers is already at the host's {cores} core(s) per device: make {what} cheaper "
            + ("(it barely uses CPU: it waits on I/O or sleeps)" if op_cpu is not None and op_cpu / max(workers, 1) < 20 else "")
            + " or move the work offline (e.g. preprocess into MindRecord)."
        )
    elif bott is not None and bott.kind == "transfer":
        msg.append("Workers will not help: check dataset_sink_mode and the host→device copy; raise prefetch_size.")

    patches = []
    if cfg is not None and new_workers is not None:
        p = ctx.config_patch(
            f"set train_dataset.num_parallel_workers to {new_workers}",
            [("dataset.num_parallel_workers", new_workers)],
            safety=Safety.SAFE,
            description=f"{what} needs about {new_workers} workers to feed one batch per compute step; "
                        f"bounded by {cores} CPU cores per device."
                        + (" Python work scales only with python_multiprocessing (the next patch)." if gil else ""),
        )
        if p:
            patches.append(p)
    if cfg is not None and gil:
        p = ctx.config_patch(
            "set train_dataset.python_multiprocessing to True",
            [("dataset.python_multiprocessing", True)],
            safety=Safety.UNSAFE,
            description="run Python map ops in worker processes instead of threads (more memory; per-process RNG state)",
        )
        if p:
            patches.append(p)
    if cfg is not None and bott is not None and bott.op_type.startswith("Batch"):
        cur = cfg.prefetch_size or 1
        p = ctx.config_patch(
            f"raise train_dataset.prefetch_size to {cur * 2}",
            [("dataset.prefetch_size", cur * 2)],
            safety=Safety.SAFE,
            description="deeper queues absorb Batch jitter",
        )
        if p:
            patches.append(p)

    confidence = 0.9 if (bott is not None and wait.source != "none") else 0.6
    locations = []
    if cfg is not None:
        loc = ctx.config_location("dataset.num_parallel_workers", note="the map ops' workers")
        if loc:
            locations.append(loc)
        loc = ctx.config_location("dataset.python_multiprocessing", note="Python map work in threads") if gil else None
        if loc:
            locations.append(loc)
    src = rank.table_source("minddata_pipeline") or rank.table_source("minddata_summary")
    if bott is not None:
        locations.append(Location(kind="profile", path=str(src[0]) if src else None, table="minddata_pipeline",
                                  op=bott.label, rank=rank.rank_id))
    step_src = rank.table_source("step_trace") or rank.table_source("trace_events") or rank.table_source("host_queue")
    if step_src:
        locations.append(Location(kind="profile", path=str(step_src[0]), table="step_trace", rank=rank.rank_id,
                                  note="data wait per step"))
    evidence = [
        Evidence(name="data_wait_per_step", value=round(wait_us, 3), unit="µs", source=wait.source,
                 threshold=f"{o.min_wait_share_pct}% of step"),
    ]
    if step_us:
        evidence.append(Evidence(name="step_time", value=round(step_us, 3), unit="µs"))
    if wait.empty_share is not None:
        evidence.append(Evidence(name="feeding_queue_empty_share", value=round(wait.empty_share, 4), threshold=o.empty_queue_share))
    if bott is not None and bott.in_usage is not None:
        evidence.append(Evidence(name="bottleneck_input_queue_usage", value=round(bott.in_usage, 4), threshold=o.full_usage))
    if bott is not None and bott.out_usage is not None:
        evidence.append(Evidence(name="bottleneck_output_queue_usage", value=round(bott.out_usage, 4), threshold=o.empty_usage))
    if workers:
        evidence.append(Evidence(name="workers", value=workers))
    if cores:
        evidence.append(Evidence(name="cpu_cores_per_device", value=cores, source=cores_src))
    return Finding(
        code=rule.code,
        rule=rule.name,
        title=f"data pipeline bottleneck at {what}: {wait_us / 1000:.2f} ms per step waiting for data",
        message=" ".join(msg),
        severity=severity_for_share(share, floor=Severity.LOW) if share is not None else Severity.MEDIUM,
        saving_us=float(saving),
        step_time_us=step_us,
        confidence=confidence,
        evidence=evidence,
        locations=locations,
        patches=patches,
        rank=rank.rank_id,
        tags=list(rule.tags),
    )
