"""``profiler_info_{rank}.json`` and ``profiler_metadata.json`` as MindSpore ≥ 2.5 / MindFormers write them.

``profiler_info_{rank}.json`` keys: ``profiler_parameters``, ``ms_profiler_info``,
``cann_profiler_info``, ``analysis_cost_time``, ``ms_version``, ``cann_version``, ``jit_level``.
``profiler_metadata.json``: ``ENV_VARIABLES``, ``parallel_group_info`` (every group the rank is in:
``{group name: {group_name, group_rank, global_ranks}}``) and MindFormers' ``distributed_args``.
"""

from __future__ import annotations

import json
from pathlib import Path

from advisor_core.simulate.workload import Workload

__all__ = ["write_profiler_info", "write_profiler_metadata", "MS_VERSION", "CANN_VERSION"]

MS_VERSION = "2.5.0"
CANN_VERSION = "8.0.0"


def write_profiler_info(path: Path, w: Workload, rank: int, device_id: int, pid: int, steps: int, start_ns: int,
                        end_ns: int) -> None:
    info = {
        "profiler_parameters": {
            "output_path": "./output/profile", "profiler_level": "Level1", "activities": ["CPU", "NPU"],
            "aic_metrics": "PipeUtilization", "profile_memory": True, "profile_communication": w.world > 1,
            "data_process": True, "parallel_strategy": w.world > 1, "with_stack": False, "record_shapes": False,
            "l2_cache": False, "hbm_ddr": False, "pcie": False, "sync_enable": True, "data_simplification": True,
            "mstx": False, "export_type": ["text"],
            "schedule": {"wait": 0, "active": steps, "warmup": 0, "repeat": 1, "skip_first": 1},
        },
        "ms_profiler_info": {"rank_id": rank, "rank_size": w.world, "device_id": device_id, "pid": pid,
                             "collection_start_ns": start_ns, "collection_end_ns": end_ns,
                             "parallel_mode": w.parallel_mode, "stage_num": w.pp},
        "cann_profiler_info": {"cann_version": CANN_VERSION, "driver_version": "24.1.0", "device_type": "Ascend910B"},
        "analysis_cost_time": {"ascend_pipeline": 0.0},
        "ms_version": MS_VERSION,
        "cann_version": CANN_VERSION,
        "jit_level": "O1",
    }
    path.write_text(json.dumps(info, indent=4), encoding="utf-8")


def write_profiler_metadata(path: Path, w: Workload, rank: int, groups: dict[str, tuple[str, list[int]]]) -> None:
    """``groups``: kind → (group name, global ranks)."""
    pgi = {}
    label = {"mp": "tp", "dp": "dp", "pp_next": "pp", "pp_prev": "pp"}
    for kind, (name, ranks) in sorted(groups.items()):
        if len(ranks) > 1 and name not in pgi:
            pgi[name] = {"group_name": label.get(kind, kind), "group_rank": ranks.index(rank), "global_ranks": sorted(ranks)}
    meta = {
        "ENV_VARIABLES": {"ASCEND_GLOBAL_LOG_LEVEL": "3", "ACLNN_CACHE_LIMIT": "100000",
                          "HOST_CACHE_CAPACITY": "20", "MS_ALLOC_CONF": "enable_vmm:True",
                          "MS_DEV_SAVE_GRAPHS": "1", "MS_MEMORY_STATISTIC": "1"},
        "parallel_group_info": pgi,
        "distributed_args": {
            "tensor_model_parallel_size": w.mp, "pipeline_model_parallel_size": w.pp, "data_parallel_size": w.dp,
            "expert_model_parallel_size": 1, "sequence_parallel": False, "parallel_mode": w.parallel_mode,
            "world_size": w.world,
        },
    }
    path.write_text(json.dumps(meta, indent=4), encoding="utf-8")
