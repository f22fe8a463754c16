"""Host CPU one device's data pipeline may use: the cores (option, settings, else the host's cores over its devices)
and what the training process's own threads and other processes already take of them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor_core.engine import RuleContext

# NPUs per Ascend 910-family training server (Atlas 800 9000, 800T A2, 900 A2 nodes); also the cap on a job's
# ranks per node when the device type is unknown.
SERVER_NPUS = 8


def cores_per_device(ctx: RuleContext, rank: Any, cores_option: int | None) -> tuple[int | None, str]:
    """Host CPU cores one device's data pipeline may use.

    ``cpu_processor_num`` (``minddata_cpu_utilization``) counts the whole host, which
    every device of the node shares. Devices per host, most specific first: settings
    ``host.devices_per_host``; else the larger of the job's ranks profiled on this host
    and the job's ranks on one node (world size from ``distributed_args``/config, at
    most a server's NPUs); and when the profiler names an Ascend 910-family device, a
    whole server's NPUs (8 per Atlas 800/900 training server): its cores are
    provisioned for all of them, and other jobs may hold the NPUs this job leaves free.
    """
    if cores_option:
        return cores_option, "option cores_per_device"
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
    device = device_type(rank)
    slots = SERVER_NPUS if device and device.startswith("Ascend910") else None
    per_host = max(on_host, min(world, SERVER_NPUS), slots or 1)
    why = (f"{cores} host cores / {per_host} NPUs per {device} server" if slots and per_host == slots
           else f"{cores} host cores / {per_host} device(s) per host")
    return max(1, int(cores) // per_host), why


@dataclass(frozen=True)
class HostCpu:
    """What the training process takes of one device's host cores (cores, from the profile).

    ``minddata_cpu_utilization`` samples the training process (``process_info``: all its
    threads, % of one core) and each pipeline op's threads (``op_info``). The training
    process's own threads — MindSpore's runtime launching the step, the Python loop; on the
    CPU backend the step itself — use ``process − pipeline`` cores. More workers spread the
    pipeline's CPU work differently; they do not shrink it, nor the training threads' work:
    all of it must still fit on the device's cores each step.
    """

    cores: int  # cores per device: the bound on workers
    process_cores: float  # the training process, all threads (pipeline thread workers included)
    pipeline_cores: float  # the pipeline ops' threads

    @property
    def training_cores(self) -> float:
        """The training process's own threads outside the pipeline ops."""
        return max(self.process_cores - self.pipeline_cores, 0.0)

    @property
    def job_cores(self) -> float:
        """CPU the job uses: its process, or its pipeline when worker processes sit outside it."""
        return max(self.process_cores, self.pipeline_cores)

    def cpu_bound_step_us(self, step_us: float) -> float:
        """The shortest step the cores allow: the job's CPU work per step (job cores × step) over the cores."""
        return self.job_cores * step_us / self.cores

    def describe(self) -> str:
        return (f"the training process uses {self.process_cores:.2f} of the {self.cores} core(s): "
                f"{self.pipeline_cores:.2f} in its pipeline ops, {self.training_cores:.2f} in its own threads")


def host_cpu(ctx: RuleContext, rank: Any, cores_option: int | None) -> HostCpu | None:
    """The host CPU picture of ``rank`` (see :class:`HostCpu`); ``None`` without the process's CPU samples."""
    cores, _ = cores_per_device(ctx, rank, cores_option)
    info = rank.record("minddata_cpu") if rank.has_table("minddata_cpu") else None
    process = getattr(info, "process_avg_cpu_pct", None)
    if not cores or process is None:
        return None
    ops = rank.table("minddata_cpu")
    pipeline = float(ops["avg_cpu_pct"].fillna(0.0).sum()) / 100.0 if ops is not None and not ops.empty else 0.0
    return HostCpu(int(cores), float(process) / 100.0, pipeline)


def device_type(rank: Any) -> str | None:
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
