"""MD001's finding from a profile: the wait, the bottleneck op, the workers that would feed the device, patches."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor_core.engine import Evidence, Finding, Location, Patch, RuleContext, Safety, Severity
from advisor_rules._common import severity_for_share
from advisor_rules.md001_minddata.bottleneck import Bottleneck
from advisor_rules.md001_minddata.cores import HostCpu, cores_per_device, host_cpu
from advisor_rules.md001_minddata.python_work import python_work
from advisor_rules.md001_minddata.wait import Wait
from advisor_rules.md001_minddata.workers import WORKERS_KEY, WorkerEstimate, code_call, governing_key, plan_workers

if TYPE_CHECKING:  # pragma: no cover
    from advisor_rules.md001_minddata.rule import MinddataBottleneck


def finding(rule: MinddataBottleneck, ctx: RuleContext, rank: Any, wait: Wait, bott: Bottleneck | None) -> Finding:
    """The finding for the rank waiting longest: the wait, the bottleneck, workers to add and the patches."""
    o = rule.options
    step_us = wait.step_us
    wait_us = float(wait.wait_us or 0.0)
    share = 100.0 * wait_us / step_us if step_us else None
    compute_us = max(step_us - wait_us, 0.0) if step_us else None
    cores, cores_src = cores_per_device(ctx, rank, o.cores_per_device)
    cpu = host_cpu(ctx, rank, o.cores_per_device)
    cfg = ctx.config
    key, key_value, why_not_key = governing_key(cfg, bott, cores) if bott is not None else (None, None, "")
    workers = bott.workers if bott is not None and bott.workers else key_value
    op_cpu = _op_cpu(rank, bott)
    python_why = _python_held(cfg, rank, bott, workers, op_cpu, step_us, o.heavy_sample_us)
    gil = python_why is not None

    est = plan_workers(bott, workers, step_us, compute_us, cores, cpu, o.headroom_pct) if bott is not None \
        else WorkerEstimate(None, None, None, "")
    saving = (step_us - est.predicted_step_us) if (est.predicted_step_us is not None and step_us) else wait_us

    what = bott.label if bott is not None else "the data pipeline"
    transfer = bott is not None and bott.kind == "transfer"
    msg = [_wait_sentence(wait, wait_us, share, step_us)]
    if bott is not None:
        msg.append(f"Bottleneck: {bott.label}, because {bott.reason}.")
        rec = rank.record("minddata_summary") if rank.has_table("minddata_summary") else None
        warned = list(getattr(rec, "bottleneck_warning", []) or [])
        if warned and bott.kind != "transfer" and bott.label not in warned:
            msg.append(f"(MindSpore's summary names {', '.join(warned)} as the bottleneck; its heuristic scans leaf → root "
                       "and does not look at the input queue.)")
    else:
        msg.append("The pipeline files needed to name the op are missing (collect with data_process=True).")
    if op_cpu is not None and workers and not transfer:
        msg.append(f"{what} uses {op_cpu:.1f}% CPU in all over {workers} worker(s) ({op_cpu / workers:.1f}% per worker).")
    if gil:
        msg.append(f"Python held by the GIL, likely: {python_why}. Thread workers run it one at a time — more of them "
                   "will not scale; python_multiprocessing: True (worker processes) will, or moving the work offline "
                   "(preprocessed into the MindRecord files).")
    if bott is not None and bott.kind == "transfer":
        msg.append(_transfer_advice(wait, wait_us, step_us))
    elif est.target is not None:
        msg.append(_prediction(est, cpu, workers, step_us, cores, cores_src, gil, o.headroom_pct))
    elif bott is not None and est.limit == "cpu" and cpu is not None and step_us:
        msg.append(f"More workers will not help: {cpu.describe()}, so the job's CPU work per step already fills the "
                   f"cores (the step cannot drop below {(est.cpu_bound_us or 0) / 1000:.2f} ms on this host). Make "
                   f"{what} cheaper, move the work offline (e.g. preprocess into MindRecord), or give the job more cores.")
    elif bott is not None and workers and cores is not None and workers >= cores:
        msg.append(
            f"num_parallel_workers is already at the host's {cores} core(s) per device: make {what} cheaper "
            + ("(it barely uses CPU: it waits on I/O or sleeps)" if op_cpu is not None and op_cpu / max(workers, 1) < 20 else "")
            + " or move the work offline (e.g. preprocess into MindRecord)."
        )

    patches = _patches(ctx, bott, est, key, key_value, why_not_key, gil, cores, what)
    if why_not_key and est.target is not None:
        msg.append(f"{why_not_key}; set it there: {code_call(bott, est.target)}.")

    confidence = 0.9 if (bott is not None and wait.source != "none") else 0.6
    if bott is not None and bott.kind == "transfer":
        confidence = 0.8 if wait.device_empty_share is not None else 0.6
    evidence = _evidence(rule, wait, wait_us, step_us, bott, None if transfer else workers, cores, cores_src, cpu, est)
    return Finding(
        code=rule.code,
        rule=rule.name,
        title=(f"the host→device transfer starves the device: {wait_us / 1000:.2f} ms per step waiting for data"
               if bott is not None and bott.kind == "transfer" else
               f"data pipeline bottleneck at {what}: {wait_us / 1000:.2f} ms per step waiting for data"),
        message=" ".join(msg),
        severity=severity_for_share(share, floor=Severity.LOW) if share is not None else Severity.MEDIUM,
        saving_us=float(saving),
        step_time_us=step_us,
        confidence=confidence,
        evidence=evidence,
        locations=_locations(ctx, rank, bott, gil, key is not None and not transfer),
        patches=patches,
        rank=rank.rank_id,
        tags=list(rule.tags),
    )


def _wait_sentence(wait: Wait, wait_us: float, share: float | None, step_us: float | None) -> str:
    out = (f"The device waits {wait_us / 1000:.2f} ms per step for data"
           + (f" ({share:.1f}% of a {step_us / 1000:.2f} ms step)" if share is not None else "") + f" [{wait.source}].")
    if wait.warmup:
        out += f" Steady steps only: {wait.warmup}."
    if wait.device_empty_share is not None:
        out += f" The device queue is empty at {100 * wait.device_empty_share:.0f}% of the GetNext calls"
        if wait.host_empty_share is not None:
            out += f", the host queue in {100 * wait.host_empty_share:.0f}% of the steps"
        out += "."
    elif wait.empty_share is not None:
        out += f" The queue feeding the device is empty in {100 * wait.empty_share:.0f}% of samples."
    return out


def _transfer_advice(wait: Wait, wait_us: float, step_us: float | None) -> str:
    idle = f" The device idles {100 * wait_us / step_us:.0f}% of each step." if step_us else ""
    return ("The host→device transfer, not the data pipeline, is the bottleneck: batches are ready on the host but "
            f"do not reach the device queue in time.{idle} More pipeline workers or a larger prefetch_size "
            "will not help. Send fewer bytes per batch (keep images uint8 and cast/normalise on the device; narrower "
            "integer ids), check that dataset_sink_mode is on with the whole epoch sunk, and that the host process "
            "and its memory sit on the device's NUMA node (numa_enable) with nothing else saturating the PCIe link.")


def _prediction(est: WorkerEstimate, cpu: HostCpu | None, workers: int | None, step_us: float | None, cores: int | None,
                cores_src: str, gil: bool, headroom_pct: float) -> str:
    out = (f"With {est.target} workers{' in worker processes' if gil else ''} ({headroom_pct:.0f}% headroom; bound: "
           f"{cores} cores per device, {cores_src}) the step should drop to {est.predicted_step_us / 1000:.2f} ms")
    if est.limit == "cpu" and cpu is not None and step_us and workers:
        out += (f", not to {step_us * workers / est.target / 1000:.2f} ms: {cpu.describe()}, and the job's CPU work "
                f"per step ({cpu.job_cores * step_us / 1000:.1f} core-ms) must fit on the {cpu.cores} core(s)")
    return out + "."


def _patches(ctx: RuleContext, bott: Bottleneck | None, est: WorkerEstimate, key: str | None, key_value: int | None,
             why_not_key: str, gil: bool, cores: int | None, what: str) -> list[Patch]:
    """Worker patch for the slow op (config key when it sets the op's workers, else shown code); processes for GIL."""
    cfg = ctx.config
    out: list[Patch] = []
    if cfg is not None and bott is not None and est.target is not None:
        if key is not None and (key_value is None or est.target > key_value):
            p = ctx.config_patch(
                f"set train_dataset.num_parallel_workers to {est.target}",
                [(key, est.target)],
                safety=Safety.SAFE,
                description=f"{what} needs about {est.target} workers to feed one batch per compute step; "
                            f"bounded by {cores} CPU cores per device."
                            + (" Python work scales only with python_multiprocessing (the next patch)." if gil else ""),
            )
            if p and _changes(cfg, p):
                out.append(p)
        elif key is None and why_not_key:
            out.append(Patch(title=f"give {what} {est.target} workers in the dataset code", safety=Safety.DISPLAY_ONLY,
                             ops=[], description=f"{why_not_key}: {code_call(bott, est.target)}"))
    if cfg is not None and gil and bott is not None and bott.op_type.startswith("Map"):
        p = ctx.config_patch(
            "set train_dataset.python_multiprocessing to True",
            [("dataset.python_multiprocessing", True)],
            safety=Safety.UNSAFE,
            description="run Python map ops in worker processes instead of threads (more memory; per-process RNG state)",
        )
        if p and _changes(cfg, p):
            out.append(p)
    elif gil and bott is not None:
        # MindFormers passes train_dataset.python_multiprocessing to no batch(): only the dataset code can
        out.append(Patch(title=f"run {what}'s Python work in worker processes", safety=Safety.DISPLAY_ONLY, ops=[],
                         description=f"{code_call(bott, est.target or bott.workers or 1)[:-1]}, python_multiprocessing=True)"))
    return out


def _changes(cfg: Any, patch: Patch) -> bool:
    """A patch whose every write keeps the value the config has changes nothing (2 → 2 workers): never emit it."""
    tested = {op.path: op.value for op in patch.ops if op.op == "test"}
    return any(op.op != "replace" or op.path not in tested or tested[op.path] != op.value for op in patch.changes)


def _op_cpu(rank: Any, bott: Bottleneck | None) -> float | None:
    import pandas as pd

    summ = rank.table("minddata_summary") if rank.has_table("minddata_summary") else None
    if summ is None or bott is None or bott.op_id < 0:
        return None
    row = summ[summ["op_id"] == bott.op_id]
    if row.empty or pd.isna(row.iloc[0]["avg_cpu_pct"]):
        return None
    return float(row.iloc[0]["avg_cpu_pct"])


def _python_held(cfg: Any, rank: Any, bott: Bottleneck | None, workers: int | None, op_cpu: float | None,
                 step_us: float | None, heavy_sample_us: float) -> str | None:
    """Why the slow op's work is likely Python serialised by the GIL, or ``None`` (see :mod:`.python_work`)."""
    if bott is None or not bott.op_type.startswith(("Map", "Batch")):
        return None
    py_mp = cfg.get("dataset.python_multiprocessing") if cfg is not None else None
    if workers and workers > 1 and op_cpu is not None and py_mp is not True and 70.0 <= op_cpu <= 130.0:
        return "its workers together use about one core"
    if not bott.op_type.startswith("Map"):
        return None
    rec = rank.record("minddata_summary") if rank.has_table("minddata_summary") else None
    per_batch = getattr(rec, "per_batch_time_ms", None)
    period = float(per_batch) * 1000.0 if per_batch else step_us  # one batch per step
    return python_work(cfg, op_cpu, period, heavy_sample_us)


def _locations(ctx: RuleContext, rank: Any, bott: Bottleneck | None, gil: bool, keyed: bool) -> list[Location]:
    out = []
    if ctx.config is not None and keyed:
        loc = ctx.config_location(WORKERS_KEY, note="the dataset ops' workers")
        if loc:
            out.append(loc)
    if ctx.config is not None and gil:
        loc = ctx.config_location("dataset.python_multiprocessing", note="Python map work in threads")
        if loc:
            out.append(loc)
    src = rank.table_source("minddata_pipeline") or rank.table_source("minddata_summary")
    if bott is not None and bott.kind == "transfer":
        dq = rank.table_source("device_queue") or rank.table_source("host_queue")
        out.append(Location(kind="profile", path=str(dq[0]) if dq else None, table="device_queue" if
                            rank.table_source("device_queue") else "host_queue", op=bott.label, rank=rank.rank_id))
    elif bott is not None:
        out.append(Location(kind="profile", path=str(src[0]) if src else None, table="minddata_pipeline",
                            op=bott.label, rank=rank.rank_id))
    step_src = rank.table_source("step_trace") or rank.table_source("trace_events") or rank.table_source("host_queue")
    if step_src:
        out.append(Location(kind="profile", path=str(step_src[0]), table="step_trace", rank=rank.rank_id,
                            note="data wait per step"))
    return out


def _evidence(rule: MinddataBottleneck, wait: Wait, wait_us: float, step_us: float | None, bott: Bottleneck | None,
              workers: int | None, cores: int | None, cores_src: str, cpu: HostCpu | None,
              est: WorkerEstimate) -> list[Evidence]:
    o = rule.options
    ev = [Evidence(name="data_wait_per_step", value=round(wait_us, 3), unit="µs", source=wait.source,
                   threshold=f"{o.min_wait_share_pct}% of step")]
    if step_us:
        ev.append(Evidence(name="step_time", value=round(step_us, 3), unit="µs"))
    if wait.empty_share is not None:
        ev.append(Evidence(name="feeding_queue_empty_share", value=round(wait.empty_share, 4), threshold=o.empty_queue_share))
    if wait.device_empty_share is not None and wait.host_empty_share is not None:
        ev.append(Evidence(name="host_queue_empty_share", value=round(wait.host_empty_share, 4), threshold=o.empty_queue_share))
    if bott is not None and bott.in_usage is not None:
        ev.append(Evidence(name="bottleneck_input_queue_usage", value=round(bott.in_usage, 4), threshold=o.full_usage))
    if bott is not None and bott.out_usage is not None:
        ev.append(Evidence(name="bottleneck_output_queue_usage", value=round(bott.out_usage, 4), threshold=o.empty_usage))
    if workers:
        ev.append(Evidence(name="workers", value=workers))
    if cores:
        ev.append(Evidence(name="cpu_cores_per_device", value=cores, source=cores_src))
    if cpu is not None:
        ev.append(Evidence(name="training_process_cores", value=round(cpu.process_cores, 3),
                           source="minddata_cpu_utilization process_info"))
        ev.append(Evidence(name="training_thread_cores", value=round(cpu.training_cores, 3),
                           source="process_info − op_info: the training process's own threads"))
    if est.cpu_bound_us is not None:
        ev.append(Evidence(name="cpu_bound_step", value=round(est.cpu_bound_us, 3), unit="µs",
                           source="the job's CPU per step / the device's cores"))
    return ev
