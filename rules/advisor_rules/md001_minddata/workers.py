"""How many workers the slow op needs, what the step would then be, and which config key (if any) sets them.

The estimate: a CPU-bound op's batch time scales as 1/workers until the step is bound by
something else — the device's compute, or the host's CPU. The host bound is real on small
hosts: the pipeline's CPU work and the training process's own (its threads launching the step;
on the CPU backend, the step itself) must fit on the cores together, so a second worker on a
2-core host that is already 1.4 cores busy wins far less than ``step / 2``
(:class:`~advisor_rules.md001_minddata.cores.HostCpu`).

MindFormers builds every dataset op from ``train_dataset.num_parallel_workers``: it is
MindSpore's default for every op (``ds.config.set_num_parallel_workers``) and is passed to
``batch()`` explicitly (``dataset_batch_func``). An op whose profiled workers differ from that
value takes its workers from the dataset code instead, and the key does not change it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from advisor_rules.md001_minddata.bottleneck import Bottleneck
from advisor_rules.md001_minddata.cores import HostCpu

WORKERS_KEY = "dataset.num_parallel_workers"


@dataclass(frozen=True)
class WorkerEstimate:
    """Workers for the slow op and the step they give; ``target`` is ``None`` when more would not help."""

    target: int | None
    predicted_step_us: float | None
    cpu_bound_us: float | None  # the shortest step the job's CPU work allows on the device's cores (None: unknown)
    limit: str  # what bounds the step after: compute | workers | cpu; or why there is no target: cores | cpu | ""


def governing_key(cfg: Any, bott: Bottleneck, cores: int | None) -> tuple[str | None, int | None, str]:
    """``dataset.num_parallel_workers`` when it sets ``bott``'s workers, its value, and why not otherwise.

    It does when the profile's worker count is the key's value (or the host's cores when the
    key asks for more: MindSpore caps workers at the CPU count). Without a profiled count the
    key is taken to govern, as in MindFormers.
    """
    if cfg is None:
        return None, None, "no training config"
    value = cfg.num_parallel_workers
    if value is None:
        return WORKERS_KEY, None, ""
    if bott.workers is None or bott.workers == value or (cores is not None and bott.workers == cores and value > cores):
        return WORKERS_KEY, int(value), ""
    return None, int(value), (f"{bott.label} runs {bott.workers} worker(s) while train_dataset.num_parallel_workers is "
                              f"{value}: that key does not set this op's workers (the dataset code passes its own)")


def plan_workers(bott: Bottleneck, workers: int | None, step_us: float | None, compute_us: float | None,
                 cores: int | None, cpu: HostCpu | None, headroom_pct: float) -> WorkerEstimate:
    """Workers for the slow op and the step after (a target always exceeds ``workers``).

    The step with n workers: ``max(compute, step · w / n, cpu_bound)`` — the op's batch time
    spread over its workers, but never below the device's compute nor below the job's CPU
    work per step over the device's cores (:meth:`HostCpu.cpu_bound_step_us`).
    workers = ⌈w · step / (floor · (1 − headroom))⌉ with floor = max(compute, cpu_bound), at
    least w + 1, at most the cores per device. No target when that leaves nothing to win.
    """
    if not workers or not step_us or compute_us is None or bott.kind not in ("op", "leaf"):
        return WorkerEstimate(None, None, None, "")
    cpu_bound = cpu.cpu_bound_step_us(step_us) if cpu is not None else None
    floor = max(compute_us, cpu_bound or 0.0)
    need = math.ceil(workers * step_us / (floor * (1.0 - headroom_pct / 100.0))) if floor > 0 else workers * 4
    target = max(need, workers + 1)
    if cores is not None:
        target = min(target, cores)
    if target <= workers:
        return WorkerEstimate(None, None, cpu_bound, "cores")
    by_workers = step_us * workers / target
    predicted = max(compute_us, by_workers, cpu_bound or 0.0)
    limit = ("cpu" if cpu_bound is not None and cpu_bound >= max(compute_us, by_workers)
             else "workers" if by_workers >= compute_us else "compute")
    if predicted >= step_us * 0.99:  # the cores are already spent: another worker only competes for them
        return WorkerEstimate(None, None, cpu_bound, "cpu")
    return WorkerEstimate(target, predicted, cpu_bound, limit)


def code_call(bott: Bottleneck, workers: int) -> str:
    """The dataset-code call that sets ``bott``'s workers: ``.batch(..., num_parallel_workers=4)``."""
    kind = bott.op_type[:-2] if bott.op_type.endswith("Op") else bott.op_type
    call = {"Batch": ".batch", "Map": ".map"}.get(kind, f"{kind}Dataset(")
    return f"{call}(..., num_parallel_workers={workers})" if call.startswith(".") else f"{call}..., num_parallel_workers={workers})"
