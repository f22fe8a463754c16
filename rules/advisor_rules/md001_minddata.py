"""MD001: the MindData pipeline cannot keep up with the device."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
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
from advisor_rules._common import ASSUMED_CUBE_TFLOPS, severity_for_share


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
        empty) or from the host queue's get-next waits. Per step: the trace's
        ``ProfilerStep#n`` windows, else MindSpore's whole-collection ``Step=0`` row
        of ``step_trace_time.csv`` divided by the steps it covers (trace windows,
        else kernel ``Step ID``s, else the host queue's one record per batch).
        ``Preparing`` (step start → first kernel) is idle time *inside* ``Free``
        (Computing + Communication(Not Overlapped) + Free tile the step), so the
        wait is ``Free``, never ``Free + Preparing``. The bottleneck op is the
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
        with workers until the step becomes compute-bound: workers = ⌈w · step /
        (compute · (1 − headroom))⌉ (20 % headroom against jitter), predicted step
        = max(compute, step · w / workers). The bound is the host's cores *per
        device*: ``cpu_processor_num`` counts the whole host, so it is divided by
        the devices sharing it — the job's ranks on that host (profiles, world
        size), and a whole server's NPUs (8) when the profiler names an Ascend
        910-family device (192 cores / 8 = 24 on an Atlas 800T A2); override with
        settings ``host.cpu_cores_per_device`` / ``host.devices_per_host``.

    Config alone (``advisor lint``): a ``train_dataset`` whose map transforms cost
    at least ``heavy_sample_us`` of CPU per sample (assumed typical per-transform
    costs: JPEG decode ≈ 1.8 ms, RandomCropDecodeResize 2.2 ms, Normalize 0.4 ms …)
    with ``num_parallel_workers`` (MindSpore's default 8 when absent) too low for
    the device step estimated from the model's FLOPs (6 × weights × tokens at the
    assumed cube throughput) gets a medium finding (low when the estimate says the
    device would not wait) with a safe patch; confidence is low — profile to confirm.

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
            Need.config("dataset.transforms"),
            Need.config("dataset.num_parallel_workers"),
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
        heavy_sample_us: float = Field(1000.0, ge=0, description="config alone: a map costing at least this much CPU per sample is checked, µs")
        headroom_pct: float = Field(20.0, ge=0, lt=100, description="the proposed workers leave the op this share of the compute step idle, %")

    # ------------------------------------------------------------------------------------------
    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        if ctx.run is None or not list(ctx.run):
            yield from self._config_only(ctx)
            return
        best: tuple[float, Any, _Wait, _Bottleneck | None] | None = None
        no_evidence: list[int] = []
        keeps_up: list[tuple[int, float, float]] = []  # rank, wait µs, share %
        for rank in ctx.run:
            wait = self._wait(ctx, rank)
            bott = self._bottleneck(rank)
            if wait.wait_us is None:
                no_evidence.append(rank.rank_id)
                continue
            share = 100.0 * wait.wait_us / wait.step_us if wait.step_us else 0.0
            if share < self.options.min_wait_share_pct:
                keeps_up.append((rank.rank_id, wait.wait_us, share))
                continue
            if best is None or wait.wait_us > best[0]:
                best = (wait.wait_us, rank, wait, bott)
        if best is None:
            ctx.skip(self._quiet_reason(no_evidence, keeps_up))
            return
        yield self._finding(ctx, *best[1:])

    def _quiet_reason(self, no_evidence: list[int], keeps_up: list[tuple[int, float, float]]) -> str:
        """One sentence for all ranks: the worst wait stands for the rest."""
        notes = []
        if keeps_up:
            rank, wait_us, share = max(keeps_up, key=lambda t: t[1])
            who = f"rank {rank}" if len(keeps_up) == 1 else f"{len(keeps_up)} ranks"
            notes.append(f"the pipeline keeps up on {who} (largest data wait {wait_us:.0f} µs = {share:.1f}% of the "
                         f"step, on rank {rank}; below {self.options.min_wait_share_pct}%)")
        if no_evidence:
            ranks = ", ".join(map(str, no_evidence[:8])) + (", …" if len(no_evidence) > 8 else "")
            notes.append(f"no step-level evidence of waiting for data on rank(s) {ranks}")
        return "; ".join(notes) or "no data-wait evidence"

    # -- config alone (advisor lint) ----------------------------------------------------------------
    def _config_only(self, ctx: RuleContext) -> Iterable[Finding]:
        """A map of CPU-heavy transforms with too few workers for the device's step (estimated, no profile)."""
        cfg = ctx.config
        if cfg is None:
            ctx.skip("no profile and no training config")
            return
        transforms = _transform_names(cfg.get("dataset.transforms"))
        if not transforms:
            ctx.skip("no profile, and train_dataset has no map transforms (a text pipeline's TypeCast is cheap)")
            return
        per_sample = sum(_TRANSFORM_US.get(t, _PY_US if _is_python(t) else _UNKNOWN_US) for t in transforms)
        if per_sample < self.options.heavy_sample_us:
            ctx.skip(f"no profile; the map's transforms ({', '.join(transforms)}) cost about {per_sample:.0f} µs per sample: light")
            return
        explicit = cfg.num_parallel_workers
        workers = explicit or _MS_DEFAULT_WORKERS
        batch = cfg.int_of("dataset.batch_size") or cfg.micro_batch_size
        cpu_batch = batch * per_sample  # µs of one core per batch
        device_us = _device_step_estimate(cfg)
        bound = self.options.cores_per_device or int((dict(ctx.settings.get("host") or {})).get("cpu_cores_per_device") or 0)
        bound_src = "configured" if bound else f"assumed: {_ASSUMED_HOST_CORES} host cores / {_SERVER_NPUS} NPUs"
        bound = bound or _ASSUMED_HOST_CORES // _SERVER_NPUS
        head = 1.0 - self.options.headroom_pct / 100.0
        target = math.ceil(cpu_batch / (device_us * head)) if device_us else _MS_DEFAULT_WORKERS
        target = min(target, bound)
        if target <= workers:
            ctx.skip(f"no profile; {workers} worker(s) give the map about {cpu_batch / workers / 1000:.1f} ms per batch"
                     + (f", under the estimated {device_us / 1000:.1f} ms device step" if device_us else ""))
            return
        now, after = cpu_batch / workers, cpu_batch / target
        saving = max(0.0, max(device_us, now) - max(device_us, after)) if device_us else None
        starved = device_us is not None and now > device_us
        what = ", ".join(transforms)
        msg = [
            f"train_dataset's map runs {what}: about {per_sample / 1000:.2f} ms of one CPU core per sample "
            f"(assumed typical costs for ImageNet-size images), {cpu_batch / 1000:.1f} ms per batch of {batch}.",
            f"With {workers} worker(s)" + ("" if explicit else " (num_parallel_workers not set: MindSpore's default)")
            + f" a batch takes about {now / 1000:.1f} ms"
            + (f", while the device step is estimated at {device_us / 1000:.1f} ms from the model's FLOPs at "
               f"{ASSUMED_CUBE_TFLOPS:.0f} TFLOPS" if device_us else "") + ".",
        ]
        if starved:
            msg.append(f"The device would wait about {(now - device_us) / 1000:.1f} ms per step for data.")
        if any(_is_python(t) for t in transforms) and cfg.get("dataset.python_multiprocessing") is not True:
            msg.append("Python transforms run under the GIL in threads: set python_multiprocessing: True for them to scale.")
        msg.append(f"{target} workers (bound: {bound} cores per device, {bound_src}) would feed a batch in about "
                   f"{after / 1000:.1f} ms with {self.options.headroom_pct:.0f}% headroom. Profile a few steps to confirm "
                   "(data_process=True): the costs here are estimates.")
        patch = ctx.config_patch(
            f"set train_dataset.num_parallel_workers to {target}",
            [("dataset.num_parallel_workers", target)],
            safety=Safety.SAFE,
            description=f"enough map workers for the estimated device step; bounded by {bound} CPU cores per device",
        )
        loc = ctx.config_location("dataset.num_parallel_workers", note="the map ops' workers")
        yield Finding(
            code=self.code,
            rule=self.name,
            title=f"num_parallel_workers {workers} for a CPU-heavy map ({what}): the data pipeline will likely starve the device",
            message=" ".join(msg),
            severity=Severity.MEDIUM if starved else Severity.LOW,
            saving_us=saving,
            confidence=0.4,
            evidence=[
                Evidence(name="map_cpu_per_sample", value=round(per_sample, 1), unit="µs", source="assumed per-transform costs"),
                Evidence(name="workers", value=workers),
                Evidence(name="batch_size", value=batch),
            ]
            + ([Evidence(name="device_step_estimate", value=round(device_us, 1), unit="µs", source="config FLOPs")] if device_us else []),
            locations=[loc] if loc else [],
            patches=[patch] if patch else [],
            tags=list(self.tags),
        )

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
                # Computing + Communication(Not Overlapped) + Free tile the step, so Preparing (step start →
                # first kernel, where a data wait shows) is already inside Free: never add the two.
                free = float(rows["free_us"].mean())
                n = self._steps_of_whole_run_row(rank, bd)
                if n > 1:
                    free /= n
                    step_us = step_us / n if step_us else step_us
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

    @staticmethod
    def _steps_of_whole_run_row(rank: Any, bd: pd.DataFrame) -> int:
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
        """Host CPU cores one device's data pipeline may use.

        ``cpu_processor_num`` (``minddata_cpu_utilization``) counts the whole host, which
        every device of the node shares. Devices per host, most specific first: settings
        ``host.devices_per_host``; else the larger of the job's ranks profiled on this host
        and the job's ranks on one node (world size from ``distributed_args``/config, at
        most a server's NPUs); and when the profiler names an Ascend 910-family device, a
        whole server's NPUs (8 per Atlas 800/900 training server): its cores are
        provisioned for all of them, and other jobs may hold the NPUs this job leaves free.
        """
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
        if per_host:
            return max(1, int(cores) // per_host), f"{cores} host cores / {per_host} device(s) per host (settings)"
        name = getattr(getattr(rank, "identity", None), "host", None)
        on_host = sum(1 for r in ctx.run if name and getattr(r.identity, "host", None) == name) if ctx.run is not None else 1
        world = len(ctx.run.ranks) if ctx.run is not None else 1
        if rank.parallel is not None and rank.parallel.world_size:
            world = rank.parallel.world_size
        elif ctx.config is not None:
            world = max(world, ctx.config.device_count)
        device = _device_type(rank)
        slots = _SERVER_NPUS if device and device.startswith("Ascend910") else None
        per_host = max(on_host, min(world, _SERVER_NPUS), slots or 1)
        why = (f"{cores} host cores / {per_host} NPUs per {device} server" if slots and per_host == slots
               else f"{cores} host cores / {per_host} device(s) per host")
        return max(1, int(cores) // per_host), why

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
            msg.append("Its workers together use about one core: a Python op held by the GIL — threads will not scale, "
                       "python_multiprocessing: True will.")
        if new_workers is not None:
            msg.append(
                f"With {new_workers} workers ({o.headroom_pct:.0f}% headroom; bound: {cores} cores per device, "
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


# NPUs per Ascend 910-family training server (Atlas 800 9000, 800T A2, 900 A2 nodes); also the cap on a job's
# ranks per node when the device type is unknown.
_SERVER_NPUS = 8


# Config alone: assumed CPU cost of one sample per transform on one host core (µs; ImageNet-size JPEGs).
# JPEG decode dominates (libjpeg-turbo ≈ 1.5–2.5 ms for a ~110 kB image); the rest are per-pixel passes.
_TRANSFORM_US = {
    "RandomCropDecodeResize": 2200.0, "Decode": 1800.0, "DecodeVideo": 5000.0, "RandomResizedCrop": 400.0,
    "Resize": 350.0, "Normalize": 400.0, "NormalizePad": 420.0, "Rescale": 200.0, "ToTensor": 300.0, "HWC2CHW": 150.0,
    "CenterCrop": 50.0, "RandomCrop": 60.0, "RandomHorizontalFlip": 40.0, "RandomVerticalFlip": 40.0,
    "RandomColorAdjust": 900.0, "AutoAugment": 1500.0, "RandAugment": 1500.0, "TypeCast": 5.0,
}
_UNKNOWN_US = 200.0
_PY_US = 500.0
_MS_DEFAULT_WORKERS = 8  # mindspore.dataset.config default num_parallel_workers
_ASSUMED_HOST_CORES = 192  # Atlas 800T A2 host: 4 × 48-core Kunpeng 920


def _transform_names(value: Any) -> list[str]:
    """``[type: Decode, {type: Resize, size: 224}, "Normalize"]`` → ``["Decode", "Resize", "Normalize"]``."""
    if not isinstance(value, (list, tuple)):
        return []
    out = []
    for t in value:
        name = t.get("type") if isinstance(t, dict) else t
        if name:
            out.append(str(name).rsplit(".", 1)[-1])
    return out


def _is_python(name: str) -> bool:
    return name.startswith(("Py", "py_")) or "Python" in name or "Lambda" in name


def _device_step_estimate(cfg: Any) -> float | None:
    """Device µs per step from the model's FLOPs: 6 × weights × tokens (+ attention), per device, at an assumed rate.

    Per layer 4h² (attention projections, kv heads counted) + 3·h·ffn (gated MLP) weights, plus
    the vocab head; split over model parallel × pipeline stages; tokens = batch × seq. ``None``
    when the config lacks the dims (a non-transformer model).
    """
    h, layers, seq = cfg.hidden_size, cfg.num_layers, cfg.seq_length
    if not h or not layers or not seq:
        return None
    f, _ = cfg.ffn_hidden_size()
    hd = cfg.head_dim or h // max(cfg.num_heads or 1, 1)
    kv = (cfg.num_kv_heads or cfg.num_heads or 1) * hd
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * (f or 4 * h)
    weights = (layers * per_layer + (cfg.vocab_size or 0) * h) / max(cfg.model_parallel * cfg.pipeline_stages, 1)
    tokens = (cfg.int_of("dataset.batch_size") or cfg.micro_batch_size) * seq
    attn = 12.0 * layers * tokens * seq * h / max(cfg.model_parallel * cfg.pipeline_stages, 1)
    return (6.0 * weights * tokens + attn) / (ASSUMED_CUBE_TFLOPS * 1e6)


def _device_type(rank: Any) -> str | None:
    """``cann_profiler_info.device_type`` of ``profiler_info_<rank>.json`` (``Ascend910B``), else ``None``."""
    path = (getattr(rank, "artifacts", None) or {}).get("profiler_info")
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    dev = (data.get("cann_profiler_info") or {}).get("device_type") if isinstance(data, dict) else None
    return str(dev) if dev else None


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
