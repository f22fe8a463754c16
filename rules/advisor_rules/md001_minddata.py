"""MD001: the MindData pipeline cannot keep up with the device."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pandas as pd
from pydantic import Field

from advisor_core.analyses.step_time import step_breakdown
from advisor_core.engine import (
    Evidence,
    Finding,
    Location,
    Need,
    Requirements,
    Rule,
    RuleContext,
    RuleOptions,
    Safety,
    Severity,
)
from advisor_rules._common import severity_for_share


@dataclass
class _Wait:
    wait_us: float | None  # device time per step spent waiting for data
    step_us: float | None
    source: str
    empty_share: float | None  # share of steps the feeding queue was empty


@dataclass
class _Bottleneck:
    op_id: int
    label: str  # "Map(id=2)"
    op_type: str
    workers: int | None
    reason: str
    in_usage: float | None
    out_usage: float | None
    kind: str  # op | leaf | transfer


class MinddataBottleneck(Rule):
    """The MindData (dataset) pipeline cannot keep up: the device waits for data every step.

    What
        Decides whether the device waits for input data, and which pipeline op is
        the bottleneck. Time lost per step comes from the step trace (legacy step
        gap ``iteration_interval``; or ``Free`` time when the feeding queue runs
        empty) or from the host queue's get-next waits. The bottleneck op is the
        one whose **input queue is full while its output queue is empty**
        (``minddata_pipeline_raw``), a leaf reader whose output queue stays low,
        or — all queues full but the device queue empty — the host→device
        transfer. MindSpore's own ``bottleneck_warning`` scans leaf → root and can
        name a neighbour (the 2.10 sample names ``Batch(id=1)`` while ``Map(id=2)``
        sits between a 95 % full and a 0 % full queue); this rule decides from the
        queues and says so when it disagrees.

    Why
        While the device waits, nothing runs: the step is as long as the slowest
        pipeline stage, not the compute. The seed case: ResNet-50 with a map op left
        at the default ``num_parallel_workers=1`` ran 90 ms steps with a 72.8 ms gap;
        12 workers brought the gap to 0.25 ms and the step to 18 ms.

    Example
        ``Map(id=2)``: input queue 95 % full, output queue 0 % (empty in 100 % of
        samples); the host queue is empty in 95 % of steps and get-next waits
        39.4 ms per step.

    Fix
        Raise ``train_dataset.num_parallel_workers`` (the map ops' workers) to what
        the step needs — never beyond the host's CPU cores per device; set
        ``python_multiprocessing: True`` when a Python op is held by the GIL (its
        threads together use about one core); raise ``prefetch_size`` when Batch is
        the bottleneck with idle CPU. The estimate assumes a CPU-bound op scales
        with workers until the step becomes compute-bound.

    No finding is produced when the pipeline keeps up (data wait below
    ``min_wait_share_pct`` of the step), however odd one queue looks.
    """

    code = "MD001"
    name = "minddata-bottleneck"
    summary = "the dataset pipeline cannot keep up with the device"
    severity = Severity.HIGH
    requires = Requirements(
        any_of=(
            Need.table("minddata_pipeline"),
            Need.table("minddata_summary"),
            Need.table("host_queue"),
            Need.table("step_trace"),
            Need.table("trace_events"),
        )
    )
    tags = ("data", "minddata")
    fix_availability = "sometimes"

    class Options(RuleOptions):
        min_wait_share_pct: float = Field(3.0, ge=0, description="data wait below this share of the step is not reported, %")
        empty_queue_share: float = Field(0.3, ge=0, le=1, description="host/device queue empty in at least this share of steps means data-bound (MindInsight's 30 %)")
        full_usage: float = Field(0.5, ge=0, le=1, description="an input queue at least this full counts as full")
        empty_usage: float = Field(0.2, ge=0, le=1, description="an output queue at most this full counts as empty")
        cores_per_device: int | None = Field(None, ge=1, description="host CPU cores available per device (default: from the profile or settings)")

    # ------------------------------------------------------------------------------------------
    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        if ctx.run is None:
            ctx.skip("no profile: the data pipeline can only be judged from a profile (config alone: see lint)")
            return
        best: tuple[float, Any, _Wait, _Bottleneck | None] | None = None
        notes: list[str] = []
        for rank in ctx.run:
            wait = self._wait(ctx, rank)
            bott = self._bottleneck(rank)
            if wait.wait_us is None:
                notes.append(f"rank {rank.rank_id}: no step-level evidence of waiting for data")
                continue
            share = 100.0 * wait.wait_us / wait.step_us if wait.step_us else 0.0
            if share < self.options.min_wait_share_pct:
                notes.append(
                    f"rank {rank.rank_id}: the pipeline keeps up (data wait {wait.wait_us:.0f} µs = {share:.1f}% of the step, "
                    f"below {self.options.min_wait_share_pct}%)"
                )
                continue
            if best is None or wait.wait_us > best[0]:
                best = (wait.wait_us, rank, wait, bott)
        if best is None:
            ctx.skip("; ".join(notes) or "no data-wait evidence")
            return
        yield self._finding(ctx, *best[1:])

    # -- evidence -------------------------------------------------------------------------------
    def _queue_empty_share(self, rank: Any) -> tuple[float | None, str | None]:
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

    def _wait(self, ctx: RuleContext, rank: Any) -> _Wait:
        empty, _ = self._queue_empty_share(rank)
        bd = step_breakdown(rank)
        if bd is not None and not bd.empty:
            rows = bd.iloc[1:] if len(bd) > 2 else bd  # drop the warm-up step when there are enough
            step_us = float(rows["total_us"].mean()) if rows["total_us"].notna().any() else None
            if rows["iteration_interval_us"].notna().any():
                return _Wait(float(rows["iteration_interval_us"].mean()), step_us, "step trace iteration gap", empty)
            if rows["free_us"].notna().any():
                free = float(rows["free_us"].mean()) + float(rows["preparing_us"].fillna(0).mean())
                data_starved = empty is not None and empty >= self.options.empty_queue_share
                if data_starved:
                    return _Wait(free, step_us, "device idle (Free) with the feeding queue empty", empty)
                return _Wait(0.0 if empty is not None else None, step_us, "device idle, queues not empty", empty)
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
            return _Wait(get_us, step_us, "host queue get-next wait", empty)
        return _Wait(None, None, "none", empty)

    def _bottleneck(self, rank: Any) -> _Bottleneck | None:
        pipe = rank.table("minddata_pipeline") if rank.has_table("minddata_pipeline") else None
        if pipe is None or pipe.empty:
            summ = rank.table("minddata_summary") if rank.has_table("minddata_summary") else None
            if summ is None or summ.empty:
                return None
            pipe = pd.DataFrame(
                {
                    "op_id": summ["op_id"],
                    "op_type": summ["op_name"].astype(str) + "Op",
                    "num_workers": summ["num_workers"],
                    "queue_usage_rate": summ["queue_utilization_pct"] / 100.0,
                    "queue_empty_freq": summ["queue_empty_freq_pct"] / 100.0,
                    "parent_id": summ["parent_id"],
                    "children_ids": summ["children_ids"],
                }
            )
        usage = {int(r.op_id): (None if pd.isna(r.queue_usage_rate) else float(r.queue_usage_rate)) for r in pipe.itertuples()}
        by_id = {int(r.op_id): r for r in pipe.itertuples()}
        o = self.options
        best: _Bottleneck | None = None
        best_gap = -1.0
        for r in pipe.itertuples():
            children = list(r.children_ids or [])
            if pd.isna(r.parent_id) or not children:
                continue
            ins = [usage.get(c) for c in children if usage.get(c) is not None]
            out = usage.get(int(r.op_id))
            if not ins or out is None:
                continue
            in_u = max(ins)
            if in_u >= o.full_usage and out <= o.empty_usage and in_u - out > best_gap:
                best_gap = in_u - out
                child = by_id.get(children[0])
                best = _Bottleneck(
                    int(r.op_id), _label(r), str(r.op_type), _int(r.num_workers),
                    f"its input queue (from {_label(child) if child is not None else 'its child'}) is {100 * in_u:.1f}% full "
                    f"while its own output queue is {100 * out:.1f}% full",
                    in_u, out, "op",
                )
        if best is not None:
            return best
        leaves = [r for r in pipe.itertuples() if not list(r.children_ids or []) and not pd.isna(r.parent_id)]
        for r in leaves:
            u = usage.get(int(r.op_id))
            if u is not None and u < o.full_usage:
                return _Bottleneck(int(r.op_id), _label(r), str(r.op_type), _int(r.num_workers),
                                   f"the leaf reader's output queue is only {100 * u:.1f}% full on average",
                                   None, u, "leaf")
        non_root = [usage.get(int(r.op_id)) for r in pipe.itertuples() if not pd.isna(r.parent_id)]
        if non_root and all(u is not None and u >= 0.8 for u in non_root):
            root = pipe[pipe["parent_id"].isna()]
            label = _label(next(root.itertuples())) if not root.empty else "device queue"
            return _Bottleneck(-1, label, "transfer", None,
                               "every pipeline queue is full yet the device waits: host→device transfer is the limit",
                               None, None, "transfer")
        return None

    # -- finding --------------------------------------------------------------------------------
    def _cores_per_device(self, ctx: RuleContext, rank: Any) -> tuple[int | None, str]:
        if self.options.cores_per_device:
            return self.options.cores_per_device, "option cores_per_device"
        host = dict(ctx.settings.get("host") or {})
        if host.get("cpu_cores_per_device"):
            return int(host["cpu_cores_per_device"]), "settings host.cpu_cores_per_device"
        info = rank.record("minddata_cpu") if rank.has_table("minddata_cpu") else None
        cores = getattr(info, "cpu_processor_num", None)
        if not cores:
            return None, "unknown"
        per_host = int(host.get("devices_per_host") or 0)
        if not per_host:
            world = len(ctx.run.ranks) if ctx.run is not None else 1
            if rank.parallel is not None and rank.parallel.world_size:
                world = rank.parallel.world_size
            elif ctx.config is not None:
                world = max(world, ctx.config.device_count)
            per_host = max(1, min(8, world))
        return max(1, int(cores) // per_host), f"{cores} host cores / {per_host} device(s) per host"

    def _finding(self, ctx: RuleContext, rank: Any, wait: _Wait, bott: _Bottleneck | None) -> Finding:
        o = self.options
        step_us = wait.step_us
        wait_us = float(wait.wait_us or 0.0)
        share = 100.0 * wait_us / step_us if step_us else None
        compute_us = max(step_us - wait_us, 0.0) if step_us else None
        cores, cores_src = self._cores_per_device(ctx, rank)
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
        if bott is not None and bott.op_type.startswith("Map") and workers and workers > 1 and op_cpu is not None:
            gil = py_mp is False and 70.0 <= op_cpu <= 130.0

        new_workers = None
        predicted_step = None
        if workers and step_us and compute_us is not None and bott is not None and bott.kind in ("op", "leaf"):
            need = math.ceil(workers * step_us / compute_us) if compute_us > 0 else workers * 4
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
            msg.append("Its workers together use about one core: a Python op held by the GIL — threads will not scale, "
                       "python_multiprocessing: True will.")
        if new_workers is not None:
            msg.append(
                f"With {new_workers} workers (bound: {cores} cores per device, {cores_src}) the step should drop to "
                f"{predicted_step / 1000:.2f} ms."
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
                            f"bounded by {cores} CPU cores per device.",
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
            code=self.code,
            rule=self.name,
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
            tags=list(self.tags),
        )


def _label(r: Any) -> str:
    name = str(r.op_type)
    if name.endswith("Op"):
        name = name[:-2]
    return f"{name}(id={int(r.op_id)})"


def _int(v: Any) -> int | None:
    try:
        return None if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA else int(v)
    except (TypeError, ValueError):
        return None
