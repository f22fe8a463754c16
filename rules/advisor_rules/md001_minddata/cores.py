"""Host CPU cores one device's data pipeline may use: option, settings, else the host's cores over its devices."""

from __future__ import annotations

import json
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
