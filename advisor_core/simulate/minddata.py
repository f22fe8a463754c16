"""The MindData pipeline as producer/consumer queues: throughput, queues, CPU, and the step gap.

Pipeline (sink mode, as MindFormers builds it)::

    DataQueueOp(0) ← [EpochCtrlOp(1), inline] ← BatchOp ← MapOp ← <leaf: MindRecordOp / ImageFolderOp>

Each op has a cost per batch (per-sample costs × batch size, from :data:`TRANSFORM_COST_US`)
and a number of workers: ``train_dataset.num_parallel_workers`` for the leaf, map and batch ops,
capped by the host cores one device gets (``host_cpu_cores_per_node / devices_per_node``).
Python transforms run under the GIL (one worker at a time) unless ``python_multiprocessing``.
The steady-state period per batch is the slowest op's ``cost / workers`` (or the total CPU
work over the available cores, if that is larger). The device consumes one batch per step; when
the period exceeds the device's busy time the device waits: ``gap = max(0, period − busy) +
dequeue latency``, shown as ``Free`` at the start of every step and as an empty device queue.
The push onto the device (``DataQueueOp``) is a stage too: when it is the slowest (a slow
host→device link) the host queue stays full and only the device queue runs empty. A cold start
(:class:`~advisor_core.simulate.faults.DataWarmup`) makes the first batches late: those steps
wait until their batch arrives (:meth:`PipelineModel.ready_ns`), the later ones only the gap.

Queue samples (every ``SAMPLING_INTERVAL_MS``) follow from who is the bottleneck: queues up
stream of it stay full, queues downstream of it stay nearly empty; when the device is the
bottleneck every queue is full. CPU use per worker is the op's busy share of the period.
All sampling noise comes from :mod:`.jitter` (seeded).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from advisor_core.simulate import jitter
from advisor_core.simulate.faults import DataWarmup, ExpensiveMapOp, SlowHostToDevice
from advisor_core.simulate.hardware import HardwareProfile
from advisor_core.simulate.workload import DatasetSpec

__all__ = ["TRANSFORM_COST_US", "PipelineModel", "PipelineOp", "model_pipeline", "SAMPLING_INTERVAL_MS",
           "DEQUEUE_LATENCY_US"]

# Host CPU time per sample on one core (µs) — assumptions, see README "MindData".
TRANSFORM_COST_US: dict[str, float] = {
    "RandomCropDecodeResize": 2200.0,
    "Decode": 1800.0,
    "RandomResizedCrop": 420.0,
    "Resize": 350.0,
    "CenterCrop": 30.0,
    "RandomHorizontalFlip": 40.0,
    "Normalize": 400.0,
    "HWC2CHW": 150.0,
    "TypeCast": 5.0,
    "PadEnd": 8.0,
    "Slice": 4.0,
}
DEFAULT_TRANSFORM_US = 200.0
PYTHON_OP_US = 500.0
LEAF_FIXED_US = {"MindDataset": 15.0, "ImageFolderDataset": 45.0}
BATCH_FIXED_US, BATCH_PER_SAMPLE_US = 20.0, 1.0
PUSH_FIXED_US = 50.0
SAMPLING_INTERVAL_MS = 10
DEQUEUE_LATENCY_US = 250.0  # device-side GetNext per step even when data is ready (seed 001: 0.25 ms)
_LEAF_TYPES = {"MindDataset": "MindRecordOp", "ImageFolderDataset": "ImageFolderOp", "GeneratorDataset": "GeneratorOp"}


@dataclass
class PipelineOp:
    op_id: int
    op_type: str  # MapOp …
    num_workers: int
    cost_us_per_batch: float  # CPU time per batch (all workers together)
    period_us: float  # time per batch given its workers
    children: list[int] = field(default_factory=list)
    inline: bool = False  # no output queue of its own (EpochCtrl)
    queue_sizes: list[int] = field(default_factory=list)
    cpu_sys: list[float] = field(default_factory=list)
    cpu_user: list[float] = field(default_factory=list)
    transforms: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.op_type[:-2]


@dataclass
class PipelineModel:
    ops: list[PipelineOp]
    period_us: float
    bottleneck: int  # op id
    queue_capacity: int
    gap_ns: int
    device_bound: bool
    batch_bytes: int
    cores_per_device: int
    map_op_id: int
    push_us: float
    busy_us: float = 0.0  # device busy time per step the pipeline was modelled against
    warmup_extra_us: tuple[float, ...] = ()  # extra production time of the first batches (cold start)

    @property
    def transfer_bound(self) -> bool:
        """The host→device push, not a pipeline op, limits the data: the host queue stays full."""
        return not self.device_bound and self.bottleneck == self.ops[0].op_id

    def ready_ns(self, t0_ns: int, steps: int) -> np.ndarray | None:
        """When batch k reaches the device, while the pipeline warms up (``None`` without a warm-up).

        The pipeline starts with empty queues at ``t0``; batch k is ready after k + 1 periods plus
        the extra cost of the cold batches before it.
        """
        if not self.warmup_extra_us:
            return None
        extra = np.zeros(steps)
        n = min(steps, len(self.warmup_extra_us))
        extra[:n] = self.warmup_extra_us[:n]
        return (t0_ns + np.cumsum(self.period_us + extra) * 1000.0).astype(np.int64)

    @property
    def effective_period_us(self) -> float:
        """Time per batch actually achieved: the pipeline waits for the device when the device is slower."""
        return max(self.period_us, self.busy_us)

    def op(self, op_id: int) -> PipelineOp:
        return next(o for o in self.ops if o.op_id == op_id)


def _transform_cost(name: str, python: bool) -> float:
    base = name.split("(")[0]
    return TRANSFORM_COST_US.get(base, PYTHON_OP_US if python else DEFAULT_TRANSFORM_US)


def model_pipeline(ds: DatasetSpec, hw: HardwareProfile, faults: list[object], busy_ns: float) -> PipelineModel:
    """Steady-state pipeline model and the per-step gap for a device busy ``busy_ns`` per step."""
    cores = hw.host_cores_per_device
    w = max(1, min(ds.num_parallel_workers, cores))
    b = ds.batch_size
    transforms = list(ds.transforms) or [("TypeCast", False)]
    extra = [f for f in faults if isinstance(f, ExpensiveMapOp)]
    cpp_us = sum(_transform_cost(t, py) for t, py in transforms if not py)
    py_us = sum(_transform_cost(t, py) for t, py in transforms if py)
    names = [t for t, _ in transforms]
    for f in extra:
        names.append(f.transform)
        if f.python:
            py_us += f.per_sample_us
        else:
            cpp_us += f.per_sample_us
    py_workers = w if ds.python_multiprocessing else 1
    map_cost = b * (cpp_us + py_us)
    map_period = b * (cpp_us / w + py_us / min(w, py_workers))
    leaf_sample_us = LEAF_FIXED_US.get(ds.loader, 15.0) + ds.sample_bytes / (hw.host_disk_bandwidth_gbps * 1e3)
    leaf_cost = b * leaf_sample_us
    leaf_period = leaf_cost / w
    batch_cost = BATCH_FIXED_US + BATCH_PER_SAMPLE_US * b
    batch_period = batch_cost / min(w, 2)
    out_bytes = b * (3 * 224 * 224 * 4 if any(n in TRANSFORM_COST_US and n != "TypeCast" for n in names) else ds.sample_bytes)
    h2d = min([hw.pcie_h2d_bandwidth_gbps] + [f.gbps for f in faults if isinstance(f, SlowHostToDevice)])
    push_us = PUSH_FIXED_US + out_bytes / (h2d * 1e3)
    total_cpu = leaf_cost + map_cost + batch_cost + push_us
    cpu_period = total_cpu / cores
    periods = {"push": push_us, "batch": batch_period, "map": map_period, "leaf": leaf_period}
    period = max(max(periods.values()), cpu_period)

    ops: list[PipelineOp] = []
    next_id = 0

    def add(op_type: str, workers: int, cost: float, per: float, inline: bool = False, tf: tuple[str, ...] = ()) -> PipelineOp:
        nonlocal next_id
        op = PipelineOp(next_id, op_type, workers, cost, per, inline=inline, transforms=tf)
        if ops:
            ops[-1].children = [op.op_id]
        ops.append(op)
        next_id += 1
        return op

    root = add("DataQueueOp", 1, push_us, push_us)
    if ds.epochs > 1:
        add("EpochCtrlOp", 1, 0.0, 0.0, inline=True)
    batch = add("BatchOp", min(w, 2), batch_cost, batch_period)
    mop = add("MapOp", w, map_cost, map_period, tf=tuple(names))
    leaf = add(_LEAF_TYPES.get(ds.loader, "MindRecordOp"), w, leaf_cost, leaf_period)
    by_period = {root.op_id: push_us, batch.op_id: batch_period, mop.op_id: map_period, leaf.op_id: leaf_period}
    bottleneck = max(by_period, key=lambda k: by_period[k])
    busy_us = busy_ns / 1000.0
    device_bound = period <= busy_us
    gap_us = max(0.0, period - busy_us) + DEQUEUE_LATENCY_US
    warm = [f for f in faults if isinstance(f, DataWarmup)]
    extra = np.zeros(max((f.batches for f in warm), default=0))
    for f in warm:
        extra[:f.batches] += f.extra_us
    return PipelineModel(ops, period, bottleneck, ds.prefetch_size, int(round(gap_us * 1000)), device_bound, out_bytes, cores,
                         mop.op_id, push_us, busy_us, tuple(float(x) for x in extra))


def sample(model: PipelineModel, duration_ns: int, seed: int, rank: int) -> None:
    """Fill queue and CPU samples for a run of ``duration_ns`` (one sample per interval)."""
    n = max(3, int(duration_ns // (SAMPLING_INTERVAL_MS * 1_000_000)))
    q = model.queue_capacity
    idx = np.arange(n, dtype=np.uint64)
    chain = [o for o in model.ops if not o.inline]
    bott_pos = next(i for i, o in enumerate(chain) if o.op_id == model.bottleneck)
    for pos, op in enumerate(chain):
        u = jitter.uniform(seed, 101, rank, op.op_id, idx)
        if op.op_id == 0:
            op.queue_sizes = []
        elif model.device_bound or pos > bott_pos:
            # producer faster than its consumer: the queue stays (nearly) full
            sizes = np.where(u < 0.85, q, max(q - 1, 0))
            op.queue_sizes = [int(x) for x in sizes]
        else:
            sizes = np.where(u < 0.92, 0, 1 if q >= 1 else 0)
            op.queue_sizes = [int(x) for x in sizes]
        # busy share of each worker over the achieved period (cost is CPU time of all workers together)
        per_worker = 0.0 if op.inline else min(100.0, 100.0 * op.cost_us_per_batch / max(op.num_workers, 1)
                                                / max(model.effective_period_us, 1e-9))
        total = per_worker * op.num_workers
        v = jitter.uniform(seed, 103, rank, op.op_id, idx)
        noise = 1.0 + (v - 0.5) * 0.1
        tot = np.clip(total * noise, 0.0, 100.0 * op.num_workers)
        op.cpu_user = [round(float(x) * 0.85, 2) for x in tot]
        op.cpu_sys = [round(float(x) * 0.15, 2) for x in tot]
    for op in model.ops:
        if op.inline:
            op.queue_sizes = []
            op.cpu_user = [0.0] * n
            op.cpu_sys = [0.0] * n
